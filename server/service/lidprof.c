/*
 * lidprof.c - a language's word and character profile (lidprof.h): three
 * string-count tables (open addressing, keys in one arena) read from a
 * gzip'd text file with zlib, and the text's likelihood computed in log
 * space (a 300-letter word's character probability underflows a double).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unicode/uchar.h>
#include <unicode/utf8.h>
#include <zlib.h>

#include "lidprof.h"

#define LIDPROF_ORDER 4
#define LIDPROF_MAX_WORDS 256
#define LIDPROF_MAX_CHARS 64 /* a word's characters scored; the rest are not */
#define LIDPROF_MAX_WORD (4 * LIDPROF_MAX_CHARS) /* bytes */

typedef struct table {
    uint32_t *off;   /* key offset + 1 in arena (0: empty slot) */
    uint32_t *count;
    size_t cap;      /* a power of two */
    size_t n;
} table;

struct srv_lidprof {
    double words, chars;
    table w, c, g;   /* lower-case words, words as written, character n-grams */
    char *arena;
    size_t arena_len, arena_cap;
};

static uint64_t hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

/* The count of key (n bytes) in t, 0 when absent. */
static double lookup(const srv_lidprof *p, const table *t, const char *key, size_t n)
{
    if (!t->cap)
        return 0;
    for (size_t i = hash(key, n) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->off[i])
            return 0;
        const char *k = p->arena + t->off[i] - 1;
        if (!strncmp(k, key, n) && k[n] == 0)
            return t->count[i];
    }
}

static int table_grow(table *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    table nt = {calloc(cap, sizeof *nt.off), calloc(cap, sizeof *nt.count), cap, t->n};
    if (!nt.off || !nt.count) {
        free(nt.off);
        free(nt.count);
        return -1;
    }
    *t = nt;
    return 0;
}

/* Adds key (already in the arena at off) with count; rehashing on growth
 * needs the arena, hence p. */
static int insert(srv_lidprof *p, table *t, uint32_t off, uint32_t count)
{
    if ((t->n + 1) * 2 > t->cap) {
        table old = *t;
        if (table_grow(t) != 0)
            return -1;
        for (size_t i = 0; i < old.cap; i++)
            if (old.off[i]) {
                const char *k = p->arena + old.off[i] - 1;
                size_t j = hash(k, strlen(k)) & (t->cap - 1);
                while (t->off[j])
                    j = (j + 1) & (t->cap - 1);
                t->off[j] = old.off[i];
                t->count[j] = old.count[i];
            }
        free(old.off);
        free(old.count);
    }
    const char *k = p->arena + off - 1;
    size_t j = hash(k, strlen(k)) & (t->cap - 1);
    while (t->off[j]) {
        if (!strcmp(p->arena + t->off[j] - 1, k))
            return 0; /* twice: the first stays */
        j = (j + 1) & (t->cap - 1);
    }
    t->off[j] = off;
    t->count[j] = count;
    t->n++;
    return 0;
}

/* Copies s into the arena; its offset + 1, or 0 when out of memory. */
static uint32_t intern(srv_lidprof *p, const char *s, size_t n)
{
    if (p->arena_len + n + 1 > p->arena_cap) {
        size_t cap = p->arena_cap ? p->arena_cap * 2 : 1 << 20;
        while (cap < p->arena_len + n + 1)
            cap *= 2;
        if (cap > UINT32_MAX)
            return 0;
        char *a = realloc(p->arena, cap);
        if (!a)
            return 0;
        p->arena = a;
        p->arena_cap = cap;
    }
    memcpy(p->arena + p->arena_len, s, n);
    p->arena[p->arena_len + n] = 0;
    uint32_t off = (uint32_t)p->arena_len + 1;
    p->arena_len += n + 1;
    return off;
}

void srv_lidprof_free(srv_lidprof *p)
{
    if (!p)
        return;
    table *ts[] = {&p->w, &p->c, &p->g};
    for (int i = 0; i < 3; i++) {
        free(ts[i]->off);
        free(ts[i]->count);
    }
    free(p->arena);
    free(p);
}

/* One line of the file into p: 0, or -1 with a message. */
static int read_line(srv_lidprof *p, char *line, const char *code, int lineno, char *err,
                     size_t errlen)
{
    size_t n = strcspn(line, "\n");
    line[n] = 0;
    char head[64];
    if (lineno == 1) {
        if (snprintf(head, sizeof head, "transformerd-langid 1 %s", code) >= (int)sizeof head ||
            strcmp(line, head) != 0) {
            snprintf(err, errlen, "line 1: expected 'transformerd-langid 1 %s'", code);
            return -1;
        }
        return 0;
    }
    char *end;
    if (!strncmp(line, "words ", 6) || !strncmp(line, "chars ", 6)) {
        double v = strtod(line + 6, &end);
        if (*end || !(v > 0)) {
            snprintf(err, errlen, "line %d: a positive total expected", lineno);
            return -1;
        }
        *(line[0] == 'w' ? &p->words : &p->chars) = v;
        return 0;
    }
    table *t = line[0] == 'w' ? &p->w : line[0] == 'c' ? &p->c : line[0] == 'g' ? &p->g : NULL;
    errno = 0;
    unsigned long v = t && line[1] == ' ' ? strtoul(line + 2, &end, 10) : 0;
    if (!t || !v || errno || v > UINT32_MAX || *end != ' ' || !end[1]) {
        snprintf(err, errlen, "line %d: expected 'w|c|g COUNT STRING'", lineno);
        return -1;
    }
    uint32_t off = intern(p, end + 1, strlen(end + 1));
    if (!off || insert(p, t, off, (uint32_t)v) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

srv_lidprof *srv_lidprof_load(const char *path, const char *code, char *err, size_t errlen)
{
    err[0] = 0;
    gzFile z = gzopen(path, "rb");
    if (!z) {
        if (errno != ENOENT)
            snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : ENOMEM));
        return NULL;
    }
    srv_lidprof *p = calloc(1, sizeof *p);
    char line[1024], why[256] = "";
    int lineno = 0;
    while (p && !why[0] && gzgets(z, line, sizeof line)) {
        if (!strchr(line, '\n') && !gzeof(z))
            snprintf(why, sizeof why, "line %d: longer than %zu bytes", lineno + 1,
                     sizeof line - 2);
        else
            read_line(p, line, code, ++lineno, why, sizeof why);
    }
    int zerr = 0;
    const char *zmsg = gzerror(z, &zerr);
    if (p && !why[0] && zerr != Z_OK && zerr != Z_STREAM_END)
        snprintf(why, sizeof why, "%s", zmsg);
    if (p && !why[0] && (!(p->words > 0) || !(p->chars > 0) || !p->g.n))
        snprintf(why, sizeof why, "no totals or no character n-grams");
    gzclose(z);
    if (!p || why[0]) {
        snprintf(err, errlen, "%s: %s", path, p ? why : "out of memory");
        srv_lidprof_free(p);
        return NULL;
    }
    return p;
}

static double log_add(double a, double b)
{
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

/* log Pc(lw): the lower-case word's letters, lw n bytes of UTF-8. */
static double log_chars(const srv_lidprof *p, const char *lw, size_t n)
{
    static const double lambda[LIDPROF_ORDER] = {0.05, 0.15, 0.3, 0.5};
    char x[LIDPROF_MAX_WORD + 2];
    x[0] = '<';
    memcpy(x + 1, lw, n);
    x[n + 1] = '>';
    size_t len = n + 2;
    /* the byte offsets where characters start, and the end */
    size_t at[LIDPROF_MAX_WORD + 3];
    int nc = 0;
    for (int32_t i = 0; (size_t)i < len;) {
        at[nc++] = (size_t)i;
        UChar32 ch;
        U8_NEXT(x, i, (int32_t)len, ch);
        (void)ch;
    }
    at[nc] = len;
    double lp = 0;
    for (int i = 1; i < nc; i++) {
        double pr = 0;
        for (int k = 1; k <= LIDPROF_ORDER && i - k + 1 >= 0; k++) {
            const char *g = x + at[i - k + 1];
            size_t glen = at[i + 1] - at[i - k + 1], hlen = at[i] - at[i - k + 1];
            double pk;
            if (k == 1) {
                pk = (lookup(p, &p->g, g, glen) + 1) / (p->chars + 300);
            } else {
                double hc = lookup(p, &p->g, g, hlen);
                pk = hc > 0 ? lookup(p, &p->g, g, glen) / hc : 0;
            }
            pr += lambda[k - 1] * pk;
        }
        lp += log(pr);
    }
    return lp;
}

static double log_word(const srv_lidprof *p, const char *w, const char *lw, size_t n, size_t ln)
{
    double l = lookup(p, &p->w, lw, ln), c = lookup(p, &p->c, w, n);
    double lower = log_add(l > 0 ? log(l) : -INFINITY, log(1000.0) + log_chars(p, lw, ln)) -
                   log(p->words + 1000);
    return log_add(c > 0 ? log(c) : -INFINITY, log(100.0) + lower) - log(p->words + 100);
}

static int is_letter(UChar32 c)
{
    return c >= 0 && u_isalpha(c);
}

static int is_joiner(UChar32 c)
{
    return c == '\'' || c == 0x2019 || c == '-';
}

double srv_lidprof_score(const srv_lidprof *p, const char *text, size_t n, int *words)
{
    double s = 0;
    int k = 0;
    int32_t len = n > INT32_MAX ? INT32_MAX : (int32_t)n, i = 0;
    while (i < len && k < LIDPROF_MAX_WORDS) {
        UChar32 c;
        int32_t start = i;
        U8_NEXT(text, i, len, c);
        if (!is_letter(c))
            continue;
        /* a word: letters, and a joiner only between letters */
        char w[LIDPROF_MAX_WORD + 8], lw[LIDPROF_MAX_WORD + 8];
        size_t wn = 0, ln = 0;
        int chars = 0;
        int32_t j = start;
        while (j < len) {
            int32_t before = j;
            U8_NEXT(text, j, len, c);
            if (!is_letter(c)) {
                UChar32 next = -1;
                int32_t after = j;
                if (after < len)
                    U8_NEXT(text, after, len, next);
                if (!is_joiner(c) || !is_letter(next)) {
                    j = before;
                    break;
                }
            }
            if (chars++ < LIDPROF_MAX_CHARS) {
                UBool bad = 0;
                U8_APPEND((uint8_t *)w, wn, LIDPROF_MAX_WORD + 8, c, bad);
                U8_APPEND((uint8_t *)lw, ln, LIDPROF_MAX_WORD + 8, u_tolower(c), bad);
                (void)bad;
            }
        }
        i = j;
        w[wn] = lw[ln] = 0;
        s += log_word(p, w, lw, wn, ln);
        k++;
    }
    *words = k;
    return s;
}

size_t srv_lidprof_bytes(const srv_lidprof *p)
{
    if (!p)
        return 0;
    size_t slot = sizeof *p->w.off + sizeof *p->w.count;
    return sizeof *p + (p->w.cap + p->c.cap + p->g.cap) * slot + p->arena_cap;
}
