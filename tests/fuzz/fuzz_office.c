/*
 * fuzz_office.c - the XML readers of /translate_file on arbitrary bytes:
 * an .xhtml file (server/service/office.c, one part without an archive),
 * the same bytes as an .html file (html.c's parser) or as a Qt TS / XLIFF
 * catalogue (catalog.c), all through the bounds in work of xmllimits.c.
 *
 * Input: byte 0 picks the reader (0: .xhtml, 1: .html, 2: a catalogue, 3:
 * .xhtml with every segment set to "<&>"); the rest is the file.
 *
 * Invariants: a parse answers 0, -1 (out of memory) or -2 with a message,
 * and nothing on failure; on 0 at most SRV_XML_MAX_SEGMENTS segments
 * (units), each non-empty, no longer than SRV_XML_MAX_TEXT; libxml2's
 * external entity loader is never called (no external entity or DTD is
 * read: the seeds declare some; the target's loader aborts); the document renders after every segment is set to its
 * own text (or "<&>", which adds no '<': text is written escaped).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parserInternals.h>

#include "catalog.h"
#include "office.h"
#include "xmllimits.h"

#define FUZZ_CHECK(c)                                                                        \
    do {                                                                                     \
        if (!(c)) {                                                                          \
            fprintf(stderr, "fuzz_office: %s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
                    #c);                                                                     \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

static size_t count_lt(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '<';
    return k;
}

static void check_source(const char *s)
{
    FUZZ_CHECK(s && s[0]);
    FUZZ_CHECK(strlen(s) <= SRV_XML_MAX_TEXT);
}

/* libxml2 asked to read a file or a URL: an external entity or a DTD */
static xmlParserInputPtr no_loader(const char *url, const char *id, xmlParserCtxtPtr ctxt)
{
    (void)id;
    (void)ctxt;
    fprintf(stderr, "fuzz_office: external entity loaded: %s\n", url ? url : "(null)");
    abort();
}

static void office(const char *data, size_t size, const char *ext, int markup)
{
    srv_office *d = NULL;
    char err[256] = "";
    int rc = srv_office_parse(data, size, ext, &d, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == -1 || rc == -2);
    if (rc != 0) {
        FUZZ_CHECK(d == NULL);
        FUZZ_CHECK(rc == -1 || err[0] != 0);
        return;
    }
    int n = srv_office_n(d);
    FUZZ_CHECK(n >= 0 && n <= SRV_XML_MAX_SEGMENTS);
    size_t before = 0, len = 0;
    if (markup) { /* the '<' of the document as written without a change */
        char *out = srv_office_render(d, &len, err, sizeof err);
        FUZZ_CHECK(out != NULL);
        before = count_lt(out, len);
        free(out);
    }
    for (int i = 0; i < n; i++) {
        const char *s = srv_office_source(d, i);
        check_source(s);
        char *t = strdup(markup ? "<&>" : s);
        FUZZ_CHECK(t != NULL);
        FUZZ_CHECK(srv_office_set(d, i, t, NULL, 0) == 0);
        free(t);
    }
    char *out = srv_office_render(d, &len, err, sizeof err);
    FUZZ_CHECK(out != NULL);
    if (markup)
        FUZZ_CHECK(count_lt(out, len) <= before);
    free(out);
    srv_office_free(d);
}

static void catalog(const char *data, size_t size)
{
    size_t i = 0;
    while (i < size && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r'))
        i++;
    if (i >= size || data[i] != '<')
        return; /* a gettext catalogue: another process (po.c), not fuzzed here */
    srv_catalog *c = NULL;
    char err[256] = "";
    int rc = srv_catalog_parse(data, size, 1, &c, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == -1 || rc == -2);
    if (rc != 0) {
        FUZZ_CHECK(c == NULL);
        FUZZ_CHECK(rc == -1 || err[0] != 0);
        return;
    }
    int n = srv_catalog_n(c);
    FUZZ_CHECK(n >= 0 && n <= SRV_XML_MAX_PARAS);
    for (int k = 0; k < n; k++) {
        const char *s = srv_catalog_source(c, k);
        check_source(s);
        char *t = strdup(s);
        FUZZ_CHECK(t != NULL);
        FUZZ_CHECK(srv_catalog_set(c, k, t) >= 0);
        free(t);
    }
    size_t len = 0;
    char *out = srv_catalog_render(c, &len, err, sizeof err);
    FUZZ_CHECK(out != NULL);
    free(out);
    srv_catalog_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 16)
        return 0;
    const char *d = (const char *)data + 1;
    size_t n = size - 1;
    xmlSetExternalEntityLoader(no_loader);
    switch (data[0] & 3) {
    case 0:
        office(d, n, ".xhtml", 0);
        break;
    case 1:
        office(d, n, ".html", 0);
        break;
    case 2:
        catalog(d, n);
        break;
    default:
        office(d, n, ".xhtml", 1);
        break;
    }
    return 0;
}
