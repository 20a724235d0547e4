/*
 * spm_normalizer.c - sentencepiece's Normalizer (src/normalizer.cc) in C:
 * the precompiled charsmap (uint32 trie size, Darts-clone double-array
 * units, NUL-separated replacement strings), longest-prefix replacement,
 * U+FFFD for malformed UTF-8 (one byte consumed), then the whitespace rules
 * (remove_extra_whitespaces, add_dummy_prefix, escape_whitespaces with
 * U+2581, treat_whitespace_as_suffix). Also the UTF-8 helpers of util.cc and
 * the byte buffer shared by the spm files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spm_internal.h"

static const char kSpaceSymbol[] = "\xe2\x96\x81"; /* U+2581 */
static const char kReplacementChar[] = "\xef\xbf\xbd"; /* U+FFFD */

/* ---- byte buffer --------------------------------------------------------- */

int spm_buf_reserve(spm_buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->n - 1)
        return -1;
    size_t need = b->n + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap : 64;
    while (ncap < need)
        ncap *= 2;
    char *np = realloc(b->p, ncap);
    if (!np)
        return -1;
    b->p = np;
    b->cap = ncap;
    return 0;
}

int spm_buf_put(spm_buf *b, const void *s, size_t n)
{
    if (spm_buf_reserve(b, n) < 0)
        return -1;
    if (n > 0)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

/* ---- UTF-8, as string_util in util.h / util.cc ---------------------------- */

size_t spm_one_char_len(unsigned char c)
{
    static const unsigned char tab[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return tab[c >> 4];
}

static bool is_trail(unsigned char c) { return (c & 0xc0) == 0x80; }

static bool valid_cp(uint32_t c) { return c < 0xd800 || (c >= 0xe000 && c <= 0x10ffff); }

/* DecodeUTF8 followed by IsValidDecodeUTF8: invalid input consumes 1 byte;
 * a decoded U+FFFD (3 bytes) counts as valid. */
bool spm_valid_decode_utf8(const char *str, size_t len, size_t *mblen)
{
    const unsigned char *s = (const unsigned char *)str;
    *mblen = 1;
    if (len == 0)
        return false;
    if (s[0] < 0x80)
        return true;
    if (len >= 2 && (s[0] & 0xe0) == 0xc0) {
        uint32_t cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
        if (is_trail(s[1]) && cp >= 0x80 && valid_cp(cp)) {
            *mblen = 2;
            return true;
        }
    } else if (len >= 3 && (s[0] & 0xf0) == 0xe0) {
        uint32_t cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
        if (is_trail(s[1]) && is_trail(s[2]) && cp >= 0x800 && valid_cp(cp)) {
            *mblen = 3;
            return true;
        }
    } else if (len >= 4 && (s[0] & 0xf8) == 0xf0) {
        uint32_t cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
                      (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
        if (is_trail(s[1]) && is_trail(s[2]) && is_trail(s[3]) && cp >= 0x10000 &&
            valid_cp(cp)) {
            *mblen = 4;
            return true;
        }
    }
    return false;
}

/* ---- the compiled normalizer --------------------------------------------- */

int spm_norm_init(spm_norm *n, const spm_normspec *spec, bool treat_ws_as_suffix,
                  const char *name, char *err, size_t errlen)
{
    memset(n, 0, sizeof *n);
    n->add_dummy_prefix = spec->add_dummy_prefix;
    n->remove_extra_whitespaces = spec->remove_extra_whitespaces;
    n->escape_whitespaces = spec->escape_whitespaces;
    n->treat_whitespace_as_suffix = treat_ws_as_suffix;
    if (!spec->charsmap || spec->charsmap_len == 0)
        return 0;
    const unsigned char *b = (const unsigned char *)spec->charsmap;
    size_t len = spec->charsmap_len;
    /* Normalizer::DecodePrecompiledCharsMap; stricter than the reference,
     * which reads up to 3 bytes past the blob when the size is len-4..len-1. */
    if (len <= 4) {
        snprintf(err, errlen, "%s: precompiled_charsmap: blob is broken (%zu bytes)", name, len);
        return -1;
    }
    uint32_t tsize = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24;
    if (tsize > len - 4) {
        snprintf(err, errlen, "%s: precompiled_charsmap: trie size %u exceeds the blob (%zu bytes)",
                 name, tsize, len);
        return -1;
    }
    n->nunits = tsize / 4;
    if (n->nunits > 0) {
        n->units = malloc(n->nunits * sizeof *n->units);
        if (!n->units) {
            snprintf(err, errlen, "%s: precompiled_charsmap: out of memory", name);
            return -1;
        }
        for (size_t i = 0; i < n->nunits; i++) {
            const unsigned char *u = b + 4 + 4 * i;
            n->units[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
                          (uint32_t)u[3] << 24;
        }
    }
    n->repl = spec->charsmap + 4 + tsize;
    n->repl_len = len - 4 - tsize;
    return 0;
}

void spm_norm_free(spm_norm *n)
{
    if (!n)
        return;
    free(n->units);
    n->units = NULL;
    n->nunits = 0;
}

/* Darts-clone DoubleArrayUnit accessors (third_party/darts_clone/darts.h). */
static bool unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
static uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xff); }
static uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

/* Darts commonPrefixSearch keeping the longest match (what NormalizePrefix
 * uses), with every unit index bounds-checked. Returns the match length (0:
 * none) and its value. */
static size_t darts_longest(const spm_norm *n, const unsigned char *key, size_t len,
                            uint32_t *value)
{
    if (n->nunits == 0)
        return 0;
    size_t best = 0;
    size_t pos = unit_offset(n->units[0]);
    for (size_t i = 0; i < len; i++) {
        pos ^= key[i];
        if (pos >= n->nunits)
            break;
        uint32_t u = n->units[pos];
        if (unit_label(u) != key[i])
            break;
        pos ^= unit_offset(u);
        if (unit_has_leaf(u)) {
            if (pos >= n->nunits)
                break;
            best = i + 1;
            *value = unit_value(n->units[pos]);
        }
    }
    return best;
}

typedef struct prefix {
    const char *s; /* replacement */
    size_t n;      /* its length */
    size_t used;   /* input bytes consumed */
} prefix;

/* Normalizer::NormalizePrefix. */
static prefix norm_prefix(const spm_norm *n, spm_prefix_matcher matcher, const void *mctx,
                          const char *in, size_t len)
{
    prefix r = {in, 0, 0};
    if (matcher) {
        size_t m = matcher(mctx, in, len);
        if (m > 0) {
            r.n = r.used = m;
            return r;
        }
    }
    uint32_t value = 0;
    size_t longest = darts_longest(n, (const unsigned char *)in, len, &value);
    if (longest > 0) {
        r.used = longest;
        if (value < n->repl_len) {
            r.s = n->repl + value;
            r.n = strnlen(r.s, n->repl_len - value);
        } else {
            r.s = ""; /* corrupt offset; the reference would read out of bounds */
        }
        return r;
    }
    size_t mblen;
    if (spm_valid_decode_utf8(in, len, &mblen)) {
        r.n = r.used = mblen;
    } else {
        r.s = kReplacementChar;
        r.n = 3;
        r.used = 1;
    }
    return r;
}

static int add_ws(const spm_norm *n, spm_buf *b)
{
    return n->escape_whitespaces ? spm_buf_put(b, kSpaceSymbol, 3) : spm_buf_put(b, " ", 1);
}

static bool ends_with(const spm_buf *b, const char *s, size_t n)
{
    return b->n >= n && memcmp(b->p + b->n - n, s, n) == 0;
}

int spm_norm_apply(const spm_norm *n, spm_prefix_matcher matcher, const void *mctx,
                   const char *text, size_t len, char **out, size_t *out_len)
{
    spm_buf b = {0};
    *out = NULL;
    *out_len = 0;
    if (spm_buf_reserve(&b, len + len / 2 + 8) < 0)
        return -1;
    b.p[0] = '\0';
    size_t pos = 0;

    /* Leading whitespace: skipped while a prefix normalizes to exactly " ". */
    if (n->remove_extra_whitespaces) {
        while (pos < len) {
            prefix p = norm_prefix(n, matcher, mctx, text + pos, len - pos);
            if (!(p.n == 1 && p.s[0] == ' '))
                break;
            pos += p.used;
        }
    }
    if (pos < len) {
        int rc = 0;
        if (!n->treat_whitespace_as_suffix && n->add_dummy_prefix)
            rc |= add_ws(n, &b);
        bool is_prev_space = n->remove_extra_whitespaces;
        while (pos < len && rc == 0) {
            prefix p = norm_prefix(n, matcher, mctx, text + pos, len - pos);
            const char *sp = p.s;
            size_t spn = p.n;
            while (is_prev_space && spn > 0 && sp[0] == ' ') {
                sp++;
                spn--;
            }
            if (spn > 0) {
                size_t start = 0;
                for (size_t i = 0; i < spn && rc == 0; i++) {
                    if (n->escape_whitespaces && sp[i] == ' ') {
                        rc |= spm_buf_put(&b, sp + start, i - start);
                        rc |= spm_buf_put(&b, kSpaceSymbol, 3);
                        start = i + 1;
                    }
                }
                rc |= spm_buf_put(&b, sp + start, spn - start);
                is_prev_space = sp[spn - 1] == ' ';
            }
            pos += p.used;
            if (!n->remove_extra_whitespaces)
                is_prev_space = false;
        }
        if (rc == 0 && n->remove_extra_whitespaces) {
            const char *space = n->escape_whitespaces ? kSpaceSymbol : " ";
            size_t sn = n->escape_whitespaces ? 3 : 1;
            while (ends_with(&b, space, sn))
                b.n -= sn;
            b.p[b.n] = '\0';
        }
        if (rc == 0 && n->treat_whitespace_as_suffix && n->add_dummy_prefix)
            rc |= add_ws(n, &b);
        if (rc != 0) {
            free(b.p);
            return -1;
        }
    }
    *out = b.p;
    *out_len = b.n;
    return 0;
}
