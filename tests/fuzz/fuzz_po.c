/*
 * fuzz_po.c - gettext catalogues (.po) as the helper reads them and as the
 * daemon reads the helper's answer, both in this process:
 *
 *   byte 0, bit 0 clear: the rest is a .po file. libgettextpo reads it
 *     (po_file_read from stdin, a temporary file here; a fatal error jumps
 *     back instead of ending the process), then po_helper_json
 *     (server/po_helper.c) checks its strings and makes the answer, which
 *     srv_po_from_reply (server/service/po.c) reads as the daemon does.
 *   bit 0 set: the rest is the helper's answer, any bytes, read by
 *     srv_po_from_reply alone.
 *   bit 1: overwrite (a translated message is a unit too).
 *
 * Invariants: libgettextpo's refusal and po_helper_json's come with a
 * reason ("line N: FIELD ..." for a string); po_helper_json answers 0 or -2
 * (never -1 here, which is out of memory); its answer is JSON that
 * srv_po_from_reply takes (the helper never answers what the daemon
 * refuses), with every string of the catalogue valid UTF-8; from any
 * answer, srv_po_from_reply answers 0 or -1 with a reason; on 0 every
 * unit's source is a UTF-8 string of an entry, at most two units an entry
 * (msgid, msgid_plural), and what the second run would set (every unit
 * translated, for "de") names each entry with units once, in order, a
 * plural one with the target's two forms.
 *
 * Inputs with a NUL byte are skipped in the first mode, as srv_po_parse
 * refuses them before the helper runs. libgettextpo is not instrumented;
 * what it allocates while reading is not leak-checked (it keeps a few
 * hundred bytes past po_file_free, and a fatal error leaves its reading
 * behind), what this code allocates is.
 */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gettext-po.h>
#include <jansson.h>
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_LSAN 1
#endif
#ifdef FUZZ_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#include "po.h"
#include "po_helper.h"

#define FUZZ_CHECK(c)                                                                     \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "fuzz_po: %s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
                    #c);                                                                  \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

static jmp_buf g_fatal_jmp;

static void on_fatal(const char *reason)
{
    (void)reason;
    longjmp(g_fatal_jmp, 1);
}

/* stdin: a temporary file holding the input (po_file_read("-") reads it,
 * and opens nothing that a fatal error's jump would leave open). */
static int stdin_init(void)
{
    static int done;
    if (done)
        return 0;
    char path[] = "/tmp/fuzz_po.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || dup2(fd, 0) < 0)
        return -1;
    unlink(path);
    if (fd != 0)
        close(fd);
    po_helper_on_fatal(on_fatal);
    done = 1;
    return 0;
}

static int stdin_set(const uint8_t *data, size_t n)
{
    if (ftruncate(0, 0) != 0 || (n && pwrite(0, data, n, 0) != (ssize_t)n))
        return -1;
    rewind(stdin);
    clearerr(stdin);
    return 0;
}

static int utf8(const char *s)
{
    json_t *j = s ? json_string(s) : NULL;
    json_decref(j);
    return j != NULL;
}

/* The units of p, read from an answer of n_entries entries. */
static void check_units(srv_po *p, size_t n_entries)
{
    int n = srv_po_n(p);
    FUZZ_CHECK(n >= 0 && (size_t)n <= 2 * n_entries);
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(utf8(srv_po_source(p, i)));
        char t[32];
        snprintf(t, sizeof t, "t%d", i);
        FUZZ_CHECK(srv_po_set(p, i, t) == 0);
    }
    char *s = srv_po_set_text(p, "de");
    FUZZ_CHECK(s);
    json_t *set = json_loads(s, 0, NULL);
    free(s);
    FUZZ_CHECK(json_is_object(set));
    const char *lang = json_string_value(json_object_get(json_object_get(set, "header"), "Language"));
    FUZZ_CHECK(lang && !strcmp(lang, "de"));
    const json_t *items = json_object_get(set, "set");
    FUZZ_CHECK(json_is_array(items));
    size_t units = 0;
    long long prev = -1;
    for (size_t k = 0; k < json_array_size(items); k++) {
        const json_t *it = json_array_get(items, k), *pl = json_object_get(it, "msgstr_plural");
        long long i = json_integer_value(json_object_get(it, "i"));
        FUZZ_CHECK(json_is_integer(json_object_get(it, "i")) && i > prev &&
                   (size_t)i < n_entries);
        prev = i;
        if (pl) {
            FUZZ_CHECK(json_array_size(pl) == 2 && json_is_string(json_array_get(pl, 0)) &&
                       json_is_string(json_array_get(pl, 1)));
            units += 2;
        } else {
            FUZZ_CHECK(json_is_string(json_object_get(it, "msgstr")));
            units++;
        }
    }
    FUZZ_CHECK(units == (size_t)n); /* every unit translated: every message set */
    json_decref(set);
}

static size_t entries_of(const char *reply, size_t n)
{
    json_t *j = json_loadb(reply, n, 0, NULL);
    size_t ne = json_array_size(json_object_get(j, "entries"));
    json_decref(j);
    return ne;
}

static void fuzz_reply(const char *reply, size_t n, int overwrite)
{
    srv_po *p = NULL;
    char err[256] = "";
    int rc = srv_po_from_reply(reply, n, overwrite, &p, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc != 0) {
        FUZZ_CHECK(!p && err[0]);
        return;
    }
    check_units(p, entries_of(reply, n));
    srv_po_free(p);
}

static void fuzz_po(const uint8_t *data, size_t n, int overwrite)
{
    if (memchr(data, 0, n) || stdin_init() != 0 || stdin_set(data, n) != 0)
        return;
    po_helper_reset();
    po_file_t volatile f = NULL;
#ifdef FUZZ_LSAN
    __lsan_disable();
#endif
    int jumped = setjmp(g_fatal_jmp);
    if (!jumped)
        f = po_file_read("-", &po_helper_xerror);
#ifdef FUZZ_LSAN
    __lsan_enable();
#endif
    if (jumped || !f || po_helper_error()[0]) {
        FUZZ_CHECK(po_helper_error()[0] || (!jumped && !f));
        if (f && !jumped)
            po_file_free(f);
        return;
    }
    json_t *root = NULL;
    char err[512] = "";
    int rc = po_helper_json(f, (const char *)data, n, &root, err, sizeof err);
    po_file_free(f);
    FUZZ_CHECK(rc == 0 || rc == -2);
    if (rc != 0) {
        FUZZ_CHECK(!root);
        if (!strncmp(err, "the catalogue's header names the charset ", 41))
            return; /* one iconv does not know */
        FUZZ_CHECK(!strncmp(err, "line ", 5) || !strncmp(err, "message ", 8));
        FUZZ_CHECK((strstr(err, ": msg") && (strstr(err, " is not valid UTF-8") ||
                                             strstr(err, " is not ASCII"))) ||
                   strstr(err, ", the charset the catalogue's header names"));
        return;
    }
    char *reply = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    FUZZ_CHECK(reply);
    srv_po *p = NULL;
    int prc = srv_po_from_reply(reply, strlen(reply), overwrite, &p, err, sizeof err);
    if (prc != 0)
        fprintf(stderr, "fuzz_po: the helper's answer refused: %s\n", err);
    FUZZ_CHECK(prc == 0);
    check_units(p, entries_of(reply, strlen(reply)));
    srv_po_free(p);
    free(reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 16)
        return 0;
    int mode = data[0];
    if (mode & 1)
        fuzz_reply((const char *)data + 1, size - 1, mode >> 1 & 1);
    else
        fuzz_po(data + 1, size - 1, mode >> 1 & 1);
    return 0;
}
