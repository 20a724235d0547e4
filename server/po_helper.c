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
 *               "fuzzy": B, "obsolete": B}]} (every message of the default
 *               domain but the header, in the file's order), in UTF-8: a
 *               catalogue whose header names another charset is read in
 *               it (iconv) and its header made to say UTF-8; refuses a
 *               charset iconv does not know, a string that is not in the
 *               charset named (an escape such as \377 makes any byte)
 *               and, in a catalogue whose header names no charset (or
 *               that has no header), one that is not ASCII, as gettext
 *               reads such a catalogue as ASCII (msgcat refuses it too):
 *               "line N: FIELD ..."
 *   write PO SET  reads PO again, sets what SET (a JSON file: {"set":
 *               [{"i": N, "msgstr": S} | {"i": N, "msgstr_plural": [S]}],
 *               "header": {FIELD: VALUE}}) says, each set message fuzzy,
 *               the header's fields (a header entry made first when the
 *               catalogue has none), and prints the catalogue (in UTF-8,
 *               as read)
 *
 * Any error of libgettextpo, or a string refused, ends the process with
 * status 3 and the reason on stderr; the process limits its own memory and
 * CPU time first.
 */
#include <errno.h>
#include <iconv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include <gettext-po.h>
#include <jansson.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "po_helper.h"

/* ---- libgettextpo's errors ---------------------------------------------------- */

static char g_error[512];

static void fatal_exit(const char *reason)
{
    fprintf(stderr, "%s\n", reason);
    exit(3);
}

static void (*g_fatal)(const char *reason) = fatal_exit;

void po_helper_on_fatal(void (*fatal)(const char *reason))
{
    g_fatal = fatal ? fatal : fatal_exit;
}

const char *po_helper_error(void)
{
    return g_error;
}

void po_helper_reset(void)
{
    g_error[0] = 0;
}

/* libgettextpo goes on after an error (and reports every one); the first
 * is the reason. A fatal error must not return. */
static void xerror(int severity, po_message_t message, const char *filename, size_t lineno,
                   size_t column, int multiline_p, const char *message_text)
{
    (void)message;
    (void)column;
    (void)multiline_p;
    (void)filename;
    if (severity == PO_SEVERITY_WARNING)
        return;
    if (!g_error[0]) {
        if (lineno != (size_t)-1 && lineno != 0)
            snprintf(g_error, sizeof g_error, "line %zu: %s", lineno, message_text);
        else
            snprintf(g_error, sizeof g_error, "%s", message_text);
        size_t k = strlen(g_error); /* one line */
        while (k && (g_error[k - 1] == '\n' || g_error[k - 1] == ' '))
            g_error[--k] = 0;
        for (char *c = g_error; *c; c++)
            if (*c == '\n')
                *c = ' ';
    }
    if (severity == PO_SEVERITY_FATAL_ERROR)
        g_fatal(g_error);
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

const struct po_xerror_handler po_helper_xerror = {xerror, xerror2};

/* ---- reading ------------------------------------------------------------------ */

static int is_header(po_message_t m)
{
    return !po_message_msgctxt(m) && !*po_message_msgid(m);
}

/* The header entry's msgstr, or NULL: po_file_domain_header's, without its
 * copy (libgettextpo 0.21 returns a copy that gettext-po.h calls const). */
static const char *header_of(po_file_t f)
{
    po_message_iterator_t it = po_message_iterator(f, NULL);
    const char *h = NULL;
    for (po_message_t m; !h && (m = po_next_message(it));)
        if (is_header(m) && !po_message_is_obsolete(m))
            h = po_message_msgstr(m);
    po_message_iterator_free(it);
    return h;
}

/* UTF-8 as jansson takes it: no overlong form, no surrogate, at most
 * U+10FFFF. */
static int utf8_ok(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned c = *s;
        int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0 || (n == 1 && c < 0xC2))
            return 0;
        unsigned cp = n == 0 ? c : n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;
        for (int k = 1; k <= n; k++) {
            if ((s[k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[k] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        s += n + 1;
    }
    return 1;
}

static int ascii(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80)
            return 0;
    return 1;
}

/* The line libgettextpo read a message's msgstr (its first form) on, or 0.
 * gettext-po.h has no accessor for it; a po_message_t is gettext's
 * message_ty, which begins {msgctxt, msgid, msgid_plural, msgstr,
 * msgstr_len, pos {file_name, line_number}} (gettext's message.h since
 * 0.15), read only when its first four fields are the accessors' own
 * pointers. */
static size_t message_line(po_message_t m)
{
    const struct {
        const char *msgctxt, *msgid, *msgid_plural, *msgstr;
        size_t msgstr_len;
        const char *file_name;
        size_t line_number;
    } *mt = (const void *)m;
    if (mt->msgctxt != po_message_msgctxt(m) || mt->msgid != po_message_msgid(m) ||
        mt->msgid_plural != po_message_msgid_plural(m) || mt->msgstr != po_message_msgstr(m))
        return 0;
    return mt->line_number;
}

/* The offset of line ln (from 1) in text, or len. */
static size_t line_offset(const char *text, size_t len, size_t ln)
{
    size_t i = 0;
    for (size_t l = 1; l < ln && i < len; i++)
        l += text[i] == '\n';
    return i;
}

/* The first keyword of the line at offset i (after blanks and an obsolete
 * "#~"): its length in *n. */
static const char *keyword_at(const char *text, size_t len, size_t i, size_t *n)
{
    while (i < len && (text[i] == ' ' || text[i] == '\t'))
        i++;
    if (i + 1 < len && text[i] == '#' && text[i + 1] == '~')
        i += 2;
    while (i < len && (text[i] == ' ' || text[i] == '\t'))
        i++;
    size_t k = i;
    while (k < len && !strchr(" \t\"\r\n", text[k]))
        k++;
    *n = k - i;
    return text + i;
}

static int keyword_is(const char *kw, size_t n, const char *want)
{
    return n == strlen(want) && !memcmp(kw, want, n);
}

/* The line of field (a keyword: "msgid", "msgstr[2]"...) of the message
 * whose msgstr libgettextpo read on line ln: the nearest line above
 * (msgctxt, msgid, msgid_plural) or below (msgstr[N]) that begins with it,
 * within the message; ln itself when the file's lines do not say. */
static size_t field_line(const char *text, size_t len, size_t ln, const char *field)
{
    if (!text || !ln || !strcmp(field, "msgstr"))
        return ln;
    size_t i = line_offset(text, len, ln), n;
    if (i >= len)
        return ln;
    int down = !strncmp(field, "msgstr[", 7);
    for (size_t l = ln; l > 0 && i < len;) {
        const char *kw = keyword_at(text, len, i, &n);
        if (keyword_is(kw, n, field))
            return l;
        if (l != ln && (down ? n >= 3 && !memcmp(kw, "msg", 3) && strncmp(kw, "msgstr[", 7) != 0
                             : n >= 6 && !memcmp(kw, "msgstr", 6)))
            break; /* the next message, or the one before */
        if (down) {
            const char *nl = memchr(text + i, '\n', len - i);
            if (!nl)
                break;
            i = (size_t)(nl - text) + 1;
            l++;
        } else {
            if (i == 0)
                break;
            i--; /* the '\n' ending the line before */
            while (i > 0 && text[i - 1] != '\n')
                i--;
            l--;
        }
    }
    return ln;
}

typedef struct reader {
    const char *text;
    size_t len;
    int charset; /* the header names one */
    char *err;
    size_t errlen;
} reader;

/* Field's value s of message m (the idx'th): 0, or -2 (rd->err). */
static int check_string(const reader *rd, po_message_t m, int idx, const char *field,
                        const char *s)
{
    int utf8 = utf8_ok(s);
    if (utf8 && (rd->charset || ascii(s)))
        return 0;
    size_t ln = field_line(rd->text, rd->len, message_line(m), field);
    char where[64];
    if (ln)
        snprintf(where, sizeof where, "line %zu", ln);
    else
        snprintf(where, sizeof where, "message %d", idx + 1);
    if (!utf8)
        snprintf(rd->err, rd->errlen,
                 "%s: %s is not valid UTF-8 (catalogues are read as UTF-8; an escape such as "
                 "\\377 makes a byte that is not)",
                 where, field);
    else
        snprintf(rd->err, rd->errlen,
                 "%s: %s is not ASCII, and the catalogue has no header entry naming its "
                 "charset (gettext reads it as ASCII); add one: msgid \"\" msgstr "
                 "\"Content-Type: text/plain; charset=UTF-8\\n\"",
                 where, field);
    return -2;
}

/* Every string of message m (the idx'th): 0, or -2 (rd->err). */
static int check_message(const reader *rd, po_message_t m, int idx)
{
    const char *ctx = po_message_msgctxt(m), *idp = po_message_msgid_plural(m);
    if ((ctx && check_string(rd, m, idx, "msgctxt", ctx) != 0) ||
        check_string(rd, m, idx, "msgid", po_message_msgid(m)) != 0 ||
        (idp && check_string(rd, m, idx, "msgid_plural", idp) != 0))
        return -2;
    if (!idp)
        return check_string(rd, m, idx, "msgstr", po_message_msgstr(m));
    const char *s;
    for (int k = 0; (s = po_message_msgstr_plural(m, k)); k++) {
        char field[32];
        snprintf(field, sizeof field, "msgstr[%d]", k);
        if (check_string(rd, m, idx, field, s) != 0)
            return -2;
    }
    return 0;
}

/* The header names a charset (not xgettext's placeholder "CHARSET"). */
static int names_charset(const char *header)
{
    char *ct = header ? po_header_field(header, "Content-Type") : NULL;
    const char *cs = ct ? strstr(ct, "charset=") : NULL;
    int named = 0;
    if (cs) {
        cs += strlen("charset=");
        size_t n = strcspn(cs, " \t;");
        named = n > 0 && !(n == 7 && !strncmp(cs, "CHARSET", 7));
    }
    free(ct);
    return named;
}

/* ---- a catalogue in another charset ------------------------------------------ */

/* The charset the header's Content-Type names into cs ("" when none, or
 * xgettext's placeholder "CHARSET"). */
static void header_charset(const char *header, char *cs, size_t cssize)
{
    char *ct = header ? po_header_field(header, "Content-Type") : NULL;
    const char *c = ct ? strstr(ct, "charset=") : NULL;
    cs[0] = 0;
    if (c) {
        c += strlen("charset=");
        size_t n = strcspn(c, " \t;");
        if (n > 0 && n < cssize && !(n == 7 && !strncmp(c, "CHARSET", 7)))
            snprintf(cs, cssize, "%.*s", (int)n, c);
    }
    free(ct);
}

static int names_utf8(const char *cs)
{
    return !strcasecmp(cs, "UTF-8") || !strcasecmp(cs, "UTF8");
}

/* s (NUL-terminated) converted by cd into a new string; NULL with errno
 * EILSEQ or EINVAL when s is not in cd's charset, ENOMEM. */
static char *convert(iconv_t cd, const char *s)
{
    size_t in_left = strlen(s), cap = 4 * in_left + 16;
    char *out = malloc(cap), *in = (char *)s, *o = out;
    size_t out_left = cap - 1;
    iconv(cd, NULL, NULL, NULL, NULL);
    if (!out || iconv(cd, &in, &in_left, &o, &out_left) == (size_t)-1 ||
        iconv(cd, NULL, NULL, &o, &out_left) == (size_t)-1) {
        int e = out ? errno : ENOMEM;
        free(out);
        errno = e == E2BIG ? ENOMEM : e;
        return NULL;
    }
    *o = 0;
    return out;
}

typedef struct recoder {
    iconv_t cd;
    const char *cs; /* the charset the header names */
    const reader *rd;
} recoder;

/* A field of message m (the idx'th) converted to UTF-8 and set again: 0,
 * -2 (not in the charset: rd->err) or -1 (out of memory). A string of
 * ASCII is the same in UTF-8: left as it is. */
static int recode_field(const recoder *rc, po_message_t m, int idx, const char *field,
                        const char *s, char **out)
{
    *out = NULL;
    if (!s || ascii(s))
        return 0;
    if ((*out = convert(rc->cd, s)))
        return 0;
    if (errno == ENOMEM)
        return -1;
    size_t ln = field_line(rc->rd->text, rc->rd->len, message_line(m), field);
    char where[64];
    if (ln)
        snprintf(where, sizeof where, "line %zu", ln);
    else
        snprintf(where, sizeof where, "message %d", idx + 1);
    snprintf(rc->rd->err, rc->rd->errlen,
             "%s: %s is not valid %s, the charset the catalogue's header names", where, field,
             rc->cs);
    return -2;
}

/* Every string of message m (the idx'th) in UTF-8: its fields, comments,
 * previous strings and file names. 0, -2 (rd->err) or -1. */
static int recode_message(const recoder *rc, po_message_t m, int idx)
{
    static const struct {
        const char *name;
        const char *(*get)(po_message_t);
        void (*set)(po_message_t, const char *);
        int joined; /* the getter's answer is a new string, "" when none */
    } k_fields[] = {
        {"msgctxt", po_message_msgctxt, po_message_set_msgctxt, 0},
        {"msgid", po_message_msgid, po_message_set_msgid, 0},
        {"msgid_plural", po_message_msgid_plural, po_message_set_msgid_plural, 0},
        {"msgstr", po_message_msgstr, po_message_set_msgstr, 0},
        {"a comment", po_message_comments, po_message_set_comments, 1},
        {"an extracted comment", po_message_extracted_comments, po_message_set_extracted_comments, 1},
        {"a previous msgctxt", po_message_prev_msgctxt, po_message_set_prev_msgctxt, 0},
        {"a previous msgid", po_message_prev_msgid, po_message_set_prev_msgid, 0},
        {"a previous msgid_plural", po_message_prev_msgid_plural, po_message_set_prev_msgid_plural, 0},
    };
    char *t;
    int r = 0;
    for (size_t i = 0; r == 0 && i < sizeof k_fields / sizeof k_fields[0]; i++) {
        const char *v = k_fields[i].get(m);
        r = recode_field(rc, m, idx, k_fields[i].name, v, &t);
        if (t)
            k_fields[i].set(m, t);
        free(t);
        /* libgettextpo joins a message's comment lines into a new string
         * at each call (gettext-po.c: string_list_join, "" for none) that
         * gettext-po.h calls const: freed here, as nothing else holds it */
        if (k_fields[i].joined && v && *v)
            free((char *)v);
    }
    const char *s;
    for (int k = 0; r == 0 && po_message_msgid_plural(m) && (s = po_message_msgstr_plural(m, k)); k++) {
        char field[32];
        snprintf(field, sizeof field, "msgstr[%d]", k);
        r = recode_field(rc, m, idx, field, s, &t);
        if (t)
            po_message_set_msgstr_plural(m, k, t);
        free(t);
    }
    /* a file name of a reference: all of them again, in their order */
    int n = 0, any = 0;
    po_filepos_t fp;
    for (; r == 0 && (fp = po_message_filepos(m, n)); n++)
        any |= !ascii(po_filepos_file(fp));
    if (r != 0 || !any)
        return r;
    char **names = calloc((size_t)n, sizeof *names);
    size_t *lines = calloc((size_t)n, sizeof *lines);
    r = names && lines ? 0 : -1;
    for (int k = 0; r == 0 && k < n; k++) {
        fp = po_message_filepos(m, k);
        lines[k] = po_filepos_start_line(fp);
        r = recode_field(rc, m, idx, "a reference", po_filepos_file(fp), &names[k]);
        if (r == 0 && !names[k] && !(names[k] = strdup(po_filepos_file(fp))))
            r = -1;
    }
    for (int k = n - 1; r == 0 && k >= 0; k--)
        po_message_remove_filepos(m, k);
    for (int k = 0; r == 0 && k < n; k++)
        po_message_add_filepos(m, names[k], lines[k]);
    for (int k = 0; names && k < n; k++)
        free(names[k]);
    free(names);
    free(lines);
    return r;
}

/* A catalogue whose header names a charset other than UTF-8 read in that
 * charset: every string converted to UTF-8 and the header's charset made
 * UTF-8 (docs/decisions.md, "gettext catalogues in other charsets"). 0, -2
 * (err: a charset iconv does not know, a string not in the charset) or -1
 * (out of memory). */
static int to_utf8(po_file_t f, const char *text, size_t len, char *err, size_t errlen)
{
    char cs[64];
    header_charset(header_of(f), cs, sizeof cs);
    if (!cs[0] || names_utf8(cs))
        return 0;
    iconv_t cd = iconv_open("UTF-8", cs);
    if (cd == (iconv_t)-1) {
        snprintf(err, errlen,
                 "the catalogue's header names the charset \"%s\", which is not one this "
                 "server can read",
                 cs);
        return -2;
    }
    reader rd = {text, len, 1, err, errlen};
    recoder rc = {cd, cs, &rd};
    int r = 0, idx = 0;
    po_message_iterator_t it = po_message_iterator(f, NULL);
    for (po_message_t m; r == 0 && (m = po_next_message(it)); idx++) {
        r = recode_message(&rc, m, idx);
        if (r == 0 && is_header(m) && !po_message_is_obsolete(m)) {
            char *h = po_header_set_field(po_message_msgstr(m), "Content-Type",
                                          "text/plain; charset=UTF-8");
            if (h)
                po_message_set_msgstr(m, h);
            r = h ? 0 : -1;
            free(h);
        }
    }
    po_message_iterator_free(it);
    iconv_close(cd);
    if (r == -1)
        snprintf(err, errlen, "out of memory");
    return r;
}

int po_helper_json(po_file_t f, const char *text, size_t len, json_t **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    int cv = to_utf8(f, text, len, err, errlen);
    if (cv != 0)
        return cv;
    const char *header = header_of(f);
    reader rd = {text, len, names_charset(header), err, errlen};
    json_t *entries = json_array();
    int rc = entries ? 0 : -1;
    po_message_iterator_t it = rc == 0 ? po_message_iterator(f, NULL) : NULL;
    int idx = 0;
    for (po_message_t m; rc == 0 && (m = po_next_message(it)); idx++) {
        rc = check_message(&rd, m, idx);
        if (rc != 0 || is_header(m))
            continue;
        const char *idp = po_message_msgid_plural(m);
        json_t *pl = json_array();
        json_t *e = json_pack("{s:s, s:o, s:s, s:o, s:b, s:b}", "msgid", po_message_msgid(m),
                              "msgid_plural", idp ? json_string(idp) : json_null(), "msgstr",
                              po_message_msgstr(m), "msgstr_plural", pl, "fuzzy",
                              po_message_is_fuzzy(m), "obsolete", po_message_is_obsolete(m));
        const char *s;
        for (int k = 0; e && idp && (s = po_message_msgstr_plural(m, k)); k++)
            if (json_array_append_new(pl, json_string(s)) != 0)
                rc = -1;
        if (!e || json_array_append_new(entries, e) != 0)
            rc = -1;
    }
    if (it)
        po_message_iterator_free(it);
    /* the header's string is checked as its message's msgstr */
    json_t *root = rc == 0 ? json_object() : NULL;
    if (rc == 0 && (!root || json_object_set_new(root, "header", json_string(header ? header : "")) ||
                    json_object_set(root, "entries", entries)))
        rc = -1;
    json_decref(entries);
    if (rc == -1)
        snprintf(err, errlen, "out of memory");
    if (rc != 0) {
        json_decref(root);
        return rc;
    }
    *out = root;
    return 0;
}

static int cmd_read(po_file_t f, const char *path)
{
    size_t len = 0;
    char *text = NULL;
    FILE *in = fopen(path, "rb");
    if (in) { /* the file's lines, for a field's line in a refusal */
        long n = fseek(in, 0, SEEK_END) == 0 ? ftell(in) : -1;
        if (n >= 0 && fseek(in, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1)))
            len = fread(text, 1, (size_t)n, in);
        fclose(in);
    }
    json_t *root;
    char err[512];
    int rc = po_helper_json(f, text, len, &root, err, sizeof err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "%s\n", err);
        return 3;
    }
    rc = json_dumpf(root, stdout, JSON_COMPACT) == 0 && fflush(stdout) == 0 ? 0 : 3;
    json_decref(root);
    return rc;
}

/* ---- writing ------------------------------------------------------------------ */

/* The header entry's msgstr with SET's fields. */
static char *header_with(const char *h, const json_t *fields)
{
    const char *field;
    json_t *v;
    char *out = strdup(h);
    json_object_foreach((json_t *)fields, field, v)
    {
        char *nh = out && json_is_string(v) ? po_header_set_field(out, field, json_string_value(v))
                                            : out;
        if (nh != out)
            free(out);
        out = nh;
    }
    return out;
}

static int cmd_write(po_file_t f, const char *set_path)
{
    json_error_t je;
    json_t *set = json_load_file(set_path, 0, &je);
    if (!set) {
        fprintf(stderr, "%s: %s\n", set_path, je.text);
        return 3;
    }
    const json_t *items = json_object_get(set, "set"), *fields = json_object_get(set, "header");
    char why[512];
    if (to_utf8(f, NULL, 0, why, sizeof why) != 0) { /* as the reading did */
        fprintf(stderr, "%s\n", why);
        json_decref(set);
        return 3;
    }
    if (!header_of(f)) { /* a header entry first, to name the charset */
        po_message_t hm = po_message_create();
        char *h = hm ? header_with("MIME-Version: 1.0\n", fields) : NULL;
        if (!h) {
            fprintf(stderr, "out of memory\n");
            json_decref(set);
            return 3;
        }
        po_message_set_msgid(hm, "");
        po_message_set_msgstr(hm, h);
        free(h);
        po_message_iterator_t at = po_message_iterator(f, NULL);
        po_message_insert(at, hm);
        po_message_iterator_free(at);
        fields = NULL;
    }
    size_t next = 0;
    int idx = 0, bad = 0;
    po_message_iterator_t it = po_message_iterator(f, NULL);
    for (po_message_t m; (m = po_next_message(it));) {
        if (is_header(m)) {
            char *h = fields ? header_with(po_message_msgstr(m), fields) : NULL;
            if (h)
                po_message_set_msgstr(m, h);
            free(h);
            continue;
        }
        const json_t *s = json_array_get(items, next);
        if (s && json_integer_value(json_object_get(s, "i")) == idx) {
            const json_t *pl = json_object_get(s, "msgstr_plural");
            const char *one = json_string_value(json_object_get(s, "msgstr"));
            for (size_t k = 0; k < json_array_size(pl); k++) {
                const char *t = json_string_value(json_array_get(pl, k));
                if (t)
                    po_message_set_msgstr_plural(m, (int)k, t);
                bad |= !t;
            }
            if (!pl && one)
                po_message_set_msgstr(m, one);
            bad |= !pl && !one;
            po_message_set_fuzzy(m, 1);
            next++;
        }
        idx++;
    }
    po_message_iterator_free(it);
    bad |= next != json_array_size(items);
    json_decref(set);
    if (bad) {
        fprintf(stderr, "%s: a translation that is not a string, or of no message\n", set_path);
        return 3;
    }
    if (!po_file_write(f, "/dev/stdout", &po_helper_xerror) || po_helper_error()[0]) {
        fprintf(stderr, "%s\n", po_helper_error()[0] ? po_helper_error() : "cannot write");
        return 3;
    }
    return fflush(stdout) == 0 ? 0 : 3;
}

/* The charset the header of the catalogue at path names, read from its
 * text (libgettextpo refused it: no header to ask), into cs; "" when none
 * is found in its first 64 KiB. */
static void file_charset(const char *path, char *cs, size_t cssize)
{
    char buf[65536];
    FILE *in = fopen(path, "rb");
    size_t n = in ? fread(buf, 1, sizeof buf - 1, in) : 0;
    if (in)
        fclose(in);
    buf[n] = 0;
    const char *c = memchr(buf, 0, n) ? NULL : strstr(buf, "charset=");
    cs[0] = 0;
    if (c) {
        c += strlen("charset=");
        size_t k = strcspn(c, " \t;\"\\\r\n");
        if (k > 0 && k < cssize)
            snprintf(cs, cssize, "%.*s", (int)k, c);
    }
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
    po_helper_reset();
    po_file_t f = po_file_read(argv[1], &po_helper_xerror);
    if (!f || po_helper_error()[0]) {
        char cs[64] = "";
        if (strstr(po_helper_error(), "multibyte sequence")) /* libgettextpo read it in cs */
            file_charset(argv[1], cs, sizeof cs);
        fprintf(stderr, "%s%s%s%s\n", po_helper_error()[0] ? po_helper_error()
                                                           : "cannot read the catalogue",
                cs[0] ? " in the charset \"" : "", cs, cs[0] ? "\" the catalogue's header names" : "");
        if (f)
            po_file_free(f);
        return 3;
    }
    int rc = wr ? cmd_write(f, argv[2]) : cmd_read(f, argv[1]);
    po_file_free(f);
    return rc;
}
