/*
 * fuzz_markdown.c - Markdown files for /translate_file
 * (server/service/markdown.c): cmark's parse, the blocks found by its
 * source positions, the segments, and the file written back.
 *
 * Input: any bytes (the daemon checks a .md upload is UTF-8 first; cmark
 * and the line table here read any bytes the same way, CR, LF, CRLF and
 * NUL included, so any bytes are a harder input).
 *
 * Invariants (server/service/markdown.h):
 * - srv_md_parse answers 0, or -1 (out of memory) with a message; -2 (a
 *   block whose position does not map to the file) is a bug of the line
 *   table and aborts here;
 * - every segment's source is non-empty, with no space at either end;
 * - rendered with nothing set, the file comes back byte for byte;
 * - rendered with segment i set to a word of its own, a UTF-8 file (without
 *   \v or \f, below) holds each word once, in the segments' order (each
 *   block's translation in its own place), and parses again (the exact
 *   bytes of such files are test_markdown's: the CommonMark writer may
 *   write a block's markup otherwise than it was, emphasis nested past 8
 *   levels is an object kept verbatim);
 * - rendered with every segment set to other text (slices of the input,
 *   line endings, markup, nothing at all), it renders.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "markdown.h"

#define FUZZ_CHECK(c)                                                                          \
    do {                                                                                       \
        if (!(c)) {                                                                            \
            fprintf(stderr, "fuzz_markdown: %s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
                    #c);                                                                       \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

static int is_sp(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Well-formed UTF-8 (NUL included), as the daemon checks an upload. */
static int utf8_ok(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 0 : c >= 0xc2 && c < 0xe0 ? 1 : c >= 0xe0 && c < 0xf0 ? 2
                              : c >= 0xf0 && c < 0xf5 ? 3 : 9;
        if (k == 9 || i + k >= n + (k ? 0 : 1))
            return 0;
        uint32_t u = k ? c & (0x3f >> k) : c;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
            u = u << 6 | (s[i + j] & 0x3f);
        }
        if ((k == 2 && (u < 0x800 || (u >= 0xd800 && u < 0xe000))) ||
            (k == 3 && (u < 0x10000 || u > 0x10ffff)))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* The first t in s[from, n) (NULs included), or NULL. */
static const char *find(const char *s, size_t n, size_t from, const char *t)
{
    size_t k = strlen(t);
    for (size_t i = from; i + k <= n; i++)
        if (!memcmp(s + i, t, k))
            return s + i;
    return NULL;
}

static srv_md *parse(const uint8_t *data, size_t size)
{
    srv_md *m = NULL;
    char err[256] = "";
    int rc = srv_md_parse((const char *)data, size, &m, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "fuzz_markdown: parse: %d %s\n", rc, err);
    FUZZ_CHECK(rc == 0 || (rc == -1 && err[0]));
    FUZZ_CHECK((rc == 0) == (m != NULL));
    return m;
}

static char *render(srv_md *m, size_t *len)
{
    char err[256] = "";
    char *out = srv_md_render(m, len, err, sizeof err);
    if (!out)
        fprintf(stderr, "fuzz_markdown: render: %s\n", err);
    FUZZ_CHECK(out != NULL && strlen(out) <= *len);
    return out;
}

static void set(srv_md *m, int i, const char *t)
{
    int lost = 0;
    FUZZ_CHECK(srv_md_set(m, i, t, NULL, 0, &lost) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    srv_md *m = parse(data, size);
    if (!m)
        return 0;
    int n = srv_md_n(m);
    FUZZ_CHECK(n >= 0);
    for (int i = 0; i < n; i++) {
        const char *s = srv_md_source(m, i);
        size_t len = strlen(s);
        FUZZ_CHECK(len > 0 && !is_sp((unsigned char)s[0]) && !is_sp((unsigned char)s[len - 1]));
    }
    size_t len = 0;
    char *same = render(m, &len);
    FUZZ_CHECK(len == size && memcmp(same, data, size) == 0);
    free(same);
    srv_md_free(m);

    /* each segment a word of its own ("Zq<i>Zq"): each word once in the
     * file written, in the segments' order (each block's translation in its
     * own place), and the file parses again. In UTF-8 (cmark's writer
     * replaces a byte that is not), without \v and \f (cmark takes them for
     * the space after a list marker, its writer writes "&#11;"), without a
     * "Zq" of its own */
    int zq = 0;
    for (size_t i = 0; i + 1 < size; i++)
        zq |= data[i] == 'Z' && data[i + 1] == 'q';
    m = !zq && utf8_ok(data, size) && !memchr(data, '\v', size) && !memchr(data, '\f', size)
            ? parse(data, size)
            : NULL;
    for (int i = 0; m && i < n; i++) {
        char t[32];
        snprintf(t, sizeof t, "Zq%dZq", i);
        set(m, i, t);
    }
    char *back = m ? render(m, &len) : NULL;
    srv_md_free(m);
    size_t at = 0;
    for (int i = 0; back && i < n; i++) {
        char t[32];
        snprintf(t, sizeof t, "Zq%dZq", i);
        const char *w = find(back, len, 0, t);
        int once = w && (size_t)(w - back) >= at && !find(back, len, (size_t)(w - back) + 1, t);
        if (!once)
            fprintf(stderr, "fuzz_markdown: %s not once after byte %zu of \"%s\"\n", t, at, back);
        FUZZ_CHECK(once);
        at = (size_t)(w - back) + strlen(t);
    }
    srv_md_free(back ? parse((const uint8_t *)back, len) : NULL);
    free(back);

    /* other text: slices of the input and markup */
    static const char *const odd[] = {"", "\n", "\r\n\r\n", "\r", "# x\n===\n", "`", "*",
                                      "\\",  "<!--", "[a]: /b\n", "- x\n  - y", "|a|b|"};
    m = parse(data, size);
    for (int i = 0; i < n; i++) {
        char t[24];
        size_t a = size ? ((size_t)i * 7) % size : 0, k = 0;
        for (; k + 1 < sizeof t && a + k < size && data[a + k]; k++)
            t[k] = (char)data[a + k];
        t[k] = 0;
        set(m, i, i % 2 ? odd[(size_t)i / 2 % (sizeof odd / sizeof *odd)] : t);
    }
    free(render(m, &len));
    srv_md_free(m);
    return 0;
}
