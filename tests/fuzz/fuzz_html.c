/*
 * fuzz_html.c - format=html's parser and writer (server/service/html.c) on
 * arbitrary bytes: libxml2's HTML parser, the segments it hands out, the
 * DOCTYPE internal subset kept aside, and the document written back.
 *
 * Input: any bytes (html.c is given UTF-8 by its callers, which check it
 * first; libxml2 is given the bytes as they are here, a harder input).
 *
 * Invariants (server/service/html.h): srv_html_parse answers 0, -1 (out of memory)
 * or -2 with a message; on 0 every segment is non-empty and has no white
 * space at either end; the document renders; setting every segment to its
 * own text renders the same bytes (srv_html_set keeps the white space
 * around a segment and writes the text as text); setting every segment to
 * "<&>" renders with as many '<' as before (text is written escaped, so a
 * translation can never add markup).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "html.h"

#define FUZZ_CHECK(c)                                                                      \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "fuzz_html: %s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
                    #c);                                                                   \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static size_t count_lt(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '<';
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    srv_html *h = NULL;
    char err[256] = "";
    int rc = srv_html_parse((const char *)data, size, &h, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == -1 || rc == -2);
    if (rc != 0) {
        FUZZ_CHECK(h == NULL);
        FUZZ_CHECK(rc == -1 || err[0] != 0);
        return 0;
    }
    int n = srv_html_n_segments(h);
    FUZZ_CHECK(n >= 0);
    char **own = calloc((size_t)n + 1, sizeof *own);
    FUZZ_CHECK(own != NULL);
    for (int i = 0; i < n; i++) {
        const char *s = srv_html_segment(h, i);
        size_t len = strlen(s);
        FUZZ_CHECK(len > 0);
        FUZZ_CHECK(!is_ws((unsigned char)s[0]) && !is_ws((unsigned char)s[len - 1]));
        own[i] = strdup(s);
        FUZZ_CHECK(own[i] != NULL);
    }
    char *before = srv_html_render(h);
    FUZZ_CHECK(before != NULL);
    for (int i = 0; i < n; i++)
        FUZZ_CHECK(srv_html_set(h, i, own[i]) == 0);
    char *same = srv_html_render(h);
    FUZZ_CHECK(same != NULL && strcmp(before, same) == 0);
    for (int i = 0; i < n; i++)
        FUZZ_CHECK(srv_html_set(h, i, "<&>") == 0);
    char *esc = srv_html_render(h);
    FUZZ_CHECK(esc != NULL);
    /* text is written escaped (a segment's own '<' was "&lt;" before too):
     * "<&>" adds no '<' */
    FUZZ_CHECK(count_lt(esc) == count_lt(before));
    for (int i = 0; i < n; i++)
        free(own[i]);
    free(own);
    free(before);
    free(same);
    free(esc);
    srv_html_free(h);
    return 0;
}
