/*
 * po_helper.c - `transformerd po-helper read PO | write PO SET`: gettext
 * catalogues read and written with libgettextpo, in a process of their
 * own (docs/decisions.md, "gettext catalogues in a helper process"):
 * libgettextpo keeps its parser's state in globals, exits the process when
 * out of memory and wants its error handler never to return from a fatal
 * error, none of which a daemon can host. server/service/po.c runs this
 * command for each .po upload.
 *
 *   read PO     prints {"header": S, "entries": [{"msgid": S,
 *               "msgid_plural": S|null, "msgstr": S, "msgstr_plural": [S],
 *               "fuzzy": B, "obsolete": B, "context": B}]} (every message
 *               of the default domain but the header, in the file's order)
 *   write PO SET  reads PO again, sets what SET (a JSON file: {"set":
 *               [{"i": N, "msgstr": S} | {"i": N, "msgstr_plural": [S]}],
 *               "header": {FIELD: VALUE}}) says, each set message fuzzy,
 *               and prints the catalogue
 *
 * Any error or fatal error of libgettextpo ends the process with status 3
 * and its message on stderr; the process limits its own memory and CPU
 * time first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <gettext-po.h>
#include <jansson.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "po_helper.h"

static void xerror(int severity, po_message_t message, const char *filename, size_t lineno,
                   size_t column, int multiline_p, const char *message_text)
{
    (void)message;
    (void)column;
    (void)multiline_p;
    (void)filename;
    if (severity == PO_SEVERITY_WARNING)
        return;
    if (lineno != (size_t)-1)
        fprintf(stderr, "line %zu: %s\n", lineno, message_text);
    else
        fprintf(stderr, "%s\n", message_text);
    exit(3);
}

static void xerror2(int severity, po_message_t message1, const char *filename1, size_t lineno1,
                    size_t column1, int multiline_p1, const char *message_text1,
                    po_message_t message2, const char *filename2, size_t lineno2,
                    size_t column2, int multiline_p2, const char *message_text2)
{
    (void)message2;
    (void)filename2;
    (void)lineno2;
    (void)column2;
    (void)multiline_p2;
    (void)message_text2;
    xerror(severity, message1, filename1, lineno1, column1, multiline_p1, message_text1);
}

static const struct po_xerror_handler k_handler = {xerror, xerror2};

static int is_header(po_message_t m)
{
    return !po_message_msgctxt(m) && !*po_message_msgid(m);
}

static int cmd_read(po_file_t f)
{
    json_t *root = json_object(), *entries = json_array();
    const char *header = po_file_domain_header(f, NULL);
    json_object_set_new(root, "header", json_string(header ? header : ""));
    po_message_iterator_t it = po_message_iterator(f, NULL);
    for (po_message_t m; (m = po_next_message(it));) {
        if (is_header(m))
            continue;
        json_t *e = json_object(), *pl = json_array();
        json_object_set_new(e, "msgid", json_string(po_message_msgid(m)));
        const char *idp = po_message_msgid_plural(m);
        json_object_set_new(e, "msgid_plural", idp ? json_string(idp) : json_null());
        json_object_set_new(e, "msgstr", json_string(po_message_msgstr(m)));
        for (int k = 0; idp && po_message_msgstr_plural(m, k); k++)
            json_array_append_new(pl, json_string(po_message_msgstr_plural(m, k)));
        json_object_set_new(e, "msgstr_plural", pl);
        json_object_set_new(e, "fuzzy", json_boolean(po_message_is_fuzzy(m)));
        json_object_set_new(e, "obsolete", json_boolean(po_message_is_obsolete(m)));
        json_array_append_new(entries, e);
    }
    po_message_iterator_free(it);
    json_object_set_new(root, "entries", entries);
    int rc = json_dumpf(root, stdout, JSON_COMPACT) == 0 && fflush(stdout) == 0 ? 0 : 3;
    json_decref(root);
    return rc;
}

static int cmd_write(po_file_t f, const char *set_path)
{
    json_error_t je;
    json_t *set = json_load_file(set_path, 0, &je);
    if (!set) {
        fprintf(stderr, "%s: %s\n", set_path, je.text);
        return 3;
    }
    json_t *items = json_object_get(set, "set");
    size_t next = 0;
    int idx = 0;
    po_message_iterator_t it = po_message_iterator(f, NULL);
    for (po_message_t m; (m = po_next_message(it));) {
        if (is_header(m)) {
            const char *field;
            json_t *v;
            char *h = strdup(po_message_msgstr(m));
            json_object_foreach(json_object_get(set, "header"), field, v)
            {
                char *nh = h ? po_header_set_field(h, field, json_string_value(v)) : NULL;
                free(h);
                h = nh;
            }
            if (h)
                po_message_set_msgstr(m, h);
            free(h);
            continue;
        }
        json_t *s = json_array_get(items, next);
        if (s && json_integer_value(json_object_get(s, "i")) == idx) {
            json_t *pl = json_object_get(s, "msgstr_plural");
            if (pl)
                for (size_t k = 0; k < json_array_size(pl); k++)
                    po_message_set_msgstr_plural(m, (int)k, json_string_value(json_array_get(pl, k)));
            else
                po_message_set_msgstr(m, json_string_value(json_object_get(s, "msgstr")));
            po_message_set_fuzzy(m, 1);
            next++;
        }
        idx++;
    }
    po_message_iterator_free(it);
    json_decref(set);
    if (!po_file_write(f, "/dev/stdout", &k_handler))
        return 3;
    return fflush(stdout) == 0 ? 0 : 3;
}

int cli_po_helper(int argc, char **argv)
{
    /* a catalogue of a few megabytes needs far less (not under a sanitizer,
     * whose shadow memory is terabytes of address space) */
    struct rlimit as = {1UL << 30, 1UL << 30}, cpu = {60, 60};
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    setrlimit(RLIMIT_AS, &as);
#else
    (void)as;
#endif
#if defined(__SANITIZE_ADDRESS__)
    __lsan_disable(); /* libgettextpo keeps a few hundred bytes past po_file_free */
#endif
    setrlimit(RLIMIT_CPU, &cpu);
    int wr = argc == 3 && !strcmp(argv[0], "write");
    if (!(argc == 2 && !strcmp(argv[0], "read")) && !wr) {
        fprintf(stderr, "usage: transformerd po-helper read PO | write PO SET\n");
        return 2;
    }
    po_file_t f = po_file_read(argv[1], &k_handler);
    if (!f) {
        fprintf(stderr, "cannot read the catalogue\n");
        return 3;
    }
    int rc = wr ? cmd_write(f, argv[2]) : cmd_read(f);
    po_file_free(f);
    return rc;
}
