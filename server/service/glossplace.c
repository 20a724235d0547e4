/*
 * glossplace.c - a glossary applied to one sentence (glossary.h): its
 * source terms found, their target terms placed in the translation by the
 * word links of the model's attention (spans.h, the same links that carry
 * inline formatting).
 */
#include <stdlib.h>
#include <string.h>

#include "glossary.h"
#include "glossary_impl.h"

/* Whether code point c is part of a word (a letter, digit or '_', roughly:
 * ASCII alphanumerics, '_' as in identifiers, and the letters of the other
 * scripts; punctuation, symbols, spaces and emoji are not). */
static int word_cp(unsigned c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '_';
    if (c < 0xC0)
        return c == 0xAA || c == 0xB5 || c == 0xBA;
    if (c == 0xD7 || c == 0xF7 || (c >= 0x2000 && c <= 0x2BFF) || (c >= 0x3000 && c <= 0x303F) ||
        (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF0F) || c >= 0x1F000)
        return 0;
    return 1;
}

/* Whether the character that ends right before byte p of t is a word's. */
static int word_before(const char *t, size_t p)
{
    if (!p)
        return 0;
    size_t i = p - 1;
    while (i > 0 && ((unsigned char)t[i] & 0xC0) == 0x80 && p - i < 4)
        i--;
    unsigned c;
    return srv_gloss_utf8((const unsigned char *)t + i, p - i, &c) == (int)(p - i) && word_cp(c);
}

/* Whether the character at byte p of t (n bytes) is a word's. */
static int word_at(const char *t, size_t n, size_t p)
{
    unsigned c;
    return p < n && srv_gloss_utf8((const unsigned char *)t + p, n - p, &c) && word_cp(c);
}

int srv_gloss_match(const srv_gloss_dict *d, const char *text, size_t n, srv_gloss_hit **out)
{
    *out = NULL;
    char *f = malloc(n + 1);
    srv_gloss_hit *h = malloc(sizeof *h * (n + 1));
    if (!f || !h) {
        free(f);
        free(h);
        return -1;
    }
    srv_gloss_fold(text, n, f);
    int nh = 0;
    for (size_t p = 0; p < n;) {
        if (((unsigned char)f[p] & 0xC0) == 0x80) {
            p++;
            continue;
        }
        /* the entries whose folded source starts with this byte */
        int lo = 0, hi = d->n;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if ((unsigned char)d->e[d->by_first[mid]].fold[0] < (unsigned char)f[p])
                lo = mid + 1;
            else
                hi = mid;
        }
        const int before = word_before(text, p);
        size_t next = p + 1;
        for (int k = lo; k < d->n && d->e[d->by_first[k]].fold[0] == f[p]; k++) {
            const srv_gloss_entry *e = &d->e[d->by_first[k]];
            size_t m = e->src_n;
            if (m > n - p || memcmp(f + p, e->fold, m) != 0)
                continue;
            /* word-bounded where the term's own ends are word characters */
            if ((before && word_at(e->src, e->src_n, 0)) ||
                (word_at(text, n, p + m) && word_before(e->src, e->src_n)))
                continue;
            h[nh++] = (srv_gloss_hit){p, p + m, e};
            next = p + m;
            break;
        }
        p = next;
    }
    free(f);
    if (!nh) {
        free(h);
        return 0;
    }
    *out = h;
    return nh;
}

/* ---- placement ------------------------------------------------------------ */

/* The bytes of the punctuation that opens (lead) or closes a word at p of
 * t (looking back from p when closing), 0 when none. */
static size_t punct_len(const char *t, size_t a, size_t b, int lead)
{
    static const char *const k_lead[] = {"\"", "'", "(", "[", "{", "\xC2\xBF", "\xC2\xA1",
                                         "\xE2\x80\x9E", "\xE2\x80\x9C", "\xE2\x80\x9A",
                                         "\xE2\x80\x98", "\xC2\xAB", "\xC2\xBB"};
    static const char *const k_trail[] = {".", ",", ";", ":", "!", "?", ")", "]", "}", "\"", "'",
                                          "\xE2\x80\x9C", "\xE2\x80\x9D", "\xE2\x80\x98",
                                          "\xE2\x80\x99", "\xC2\xBB", "\xC2\xAB",
                                          "\xE2\x80\xA6"};
    const char *const *set = lead ? k_lead : k_trail;
    size_t ns = lead ? sizeof k_lead / sizeof *k_lead : sizeof k_trail / sizeof *k_trail;
    for (size_t i = 0; i < ns; i++) {
        size_t k = strlen(set[i]);
        if (k > b - a)
            continue;
        if (!memcmp(lead ? t + a : t + b - k, set[i], k))
            return k;
    }
    return 0;
}

/* The bytes of term that make its stem: all but its last character, when
 * that leaves at least 3 bytes; else the whole term. */
static size_t stem_len(const char *t, size_t n)
{
    size_t i = n;
    while (i > 0 && ((unsigned char)t[i - 1] & 0xC0) == 0x80)
        i--;
    i = i ? i - 1 : 0;
    return i >= 3 ? i : n;
}

/* Whether target word t is the strongest of a source word outside [s0,
 * s1]: putting the term over it would take that word's translation. */
static int others_word(const srv_word_links *l, int t, int s0, int s1)
{
    for (int s = 0; s < l->nsw; s++)
        if ((s < s0 || s > s1) && l->s_best[s] == t)
            return 1;
    return 0;
}

/* The target words [*lo, *hi] of source words [s0, s1] by the links, none
 * of them another source word's strongest; 0 when none. */
static int target_run(const srv_word_links *l, int s0, int s1, int *lo, int *hi)
{
    for (int pass = 0; pass < 3; pass++) {
        *lo = l->ntw;
        *hi = -1;
        int best = -1;
        for (int t = 0; t < l->ntw; t++) {
            if (others_word(l, t, s0, s1))
                continue;
            int in = 0;
            if (pass < 2 && l->t_best[t] >= s0 && l->t_best[t] <= s1)
                in = pass == 1 || l->s_best[l->t_best[t]] == t;
            for (int s = s0; pass == 2 && s <= s1; s++)
                in |= l->s_best[s] == t;
            if (!in)
                continue;
            *lo = t < *lo ? t : *lo;
            *hi = t > *hi ? t : *hi;
            if (best < 0 || l->t_bw[t] > l->t_bw[best])
                best = t;
        }
        if (*hi < 0)
            continue;
        if (*hi - *lo + 1 > (s1 - s0 + 1) + 2) /* too wide: its strongest word */
            *lo = *hi = best;
        return 1;
    }
    return 0;
}

/* The placement's state over one translation: its folded bytes, the
 * bytes already holding a term (used), the words a term took (claimed),
 * the edits. */
typedef struct placing {
    const char *tgt;
    size_t n;
    char *fold, *used, *claimed;
    const srv_word_links *l;
    srv_gloss_edit *ed;
    int ne;
} placing;

/* The first unused occurrence of key (k bytes, folded) in [a, b), or -1. */
static long find_unused(const placing *p, size_t a, size_t b, const char *key, size_t k)
{
    for (size_t i = a; k && i + k <= b; i++)
        if (!memcmp(p->fold + i, key, k) && !memchr(p->used + i, 1, k))
            return (long)i;
    return -1;
}

/* Claims the words holding bytes [a, b) and marks them used. */
static void take(placing *p, size_t a, size_t b)
{
    memset(p->used + a, 1, b - a);
    for (int t = 0; t < p->l->ntw; t++)
        if (p->l->tw[2 * t] < b && p->l->tw[2 * t + 1] > a)
            p->claimed[t] = 1;
}

/* Adds the edit [a, b) -> e's term; its first letter raised when it
 * replaces a capitalized sentence start (first), lowered inside a word
 * (inner), else as written. */
static void add_edit(placing *p, size_t a, size_t b, const srv_gloss_entry *e, int first,
                     int inner)
{
    srv_gloss_edit *ed = &p->ed[p->ne];
    memcpy(ed->rep, e->tgt, e->tgt_n);
    ed->rep_n = e->tgt_n;
    ed->a = a;
    ed->b = b;
    unsigned c0, t0;
    int kr = srv_gloss_utf8((const unsigned char *)ed->rep, ed->rep_n, &c0);
    int kt = srv_gloss_utf8((const unsigned char *)p->tgt + a, b - a, &t0);
    if (kr && kt && kr <= 2) {
        char low[4];
        srv_gloss_fold(ed->rep, (size_t)kr, low);
        int t_upper = p->fold[a] != p->tgt[a];
        if (inner) { /* inside a compound: lower case */
            memcpy(ed->rep, low, (size_t)kr);
        } else if (first && t_upper && !memcmp(low, ed->rep, (size_t)kr)) {
            if (kr == 1 && c0 >= 'a' && c0 <= 'z') {
                ed->rep[0] = (char)(c0 - 32);
            } else if (kr == 2 && c0 >= 0xE0 && c0 <= 0xFE && c0 != 0xF7) {
                ed->rep[0] = (char)(0xC0 | (c0 - 32) >> 6);
                ed->rep[1] = (char)(0x80 | ((c0 - 32) & 0x3F));
            }
        }
    }
    if (!(b - a == ed->rep_n && !memcmp(p->tgt + a, ed->rep, ed->rep_n)))
        p->ne++;
    take(p, a, b);
}

/* The letters right after byte i up to the word's end (its size in bytes
 * and characters). */
static size_t word_tail(const placing *p, size_t i, size_t b, int *chars)
{
    size_t j = i;
    *chars = 0;
    while (j < b && word_at(p->tgt, p->n, j)) {
        unsigned c;
        int k = srv_gloss_utf8((const unsigned char *)p->tgt + j, p->n - j, &c);
        j += (size_t)(k ? k : 1);
        (*chars)++;
    }
    return j - i;
}

/* One hit: the model's own word kept where it holds the term (inflected,
 * or a compound's part), its inflection made the term's for a verbatim
 * one, else the term put over the words the links give. */
static void place_hit(placing *p, const srv_gloss_hit *h, const char *key, size_t k)
{
    const srv_word_links *l = p->l;
    const srv_gloss_entry *e = h->e;
    int s0 = -1, s1 = -1, lo = 0, hi = -1, run = 0;
    for (int s = 0; s < l->nsw; s++)
        if (l->sw[2 * s] < h->b && l->sw[2 * s + 1] > h->a) {
            s0 = s0 < 0 ? s : s0;
            s1 = s;
        }
    size_t a = 0, b = 0, q;
    if (s0 >= 0 && target_run(l, s0, s1, &lo, &hi)) {
        run = 1;
        for (int t = lo; t <= hi; t++)
            run &= !p->claimed[t];
        a = l->tw[2 * lo];
        b = l->tw[2 * hi + 1];
        while (a < b && (q = punct_len(p->tgt, a, b, 1)) > 0)
            a += q;
        while (b > a && (q = punct_len(p->tgt, a, b, 0)) > 0)
            b -= q;
        run &= a < b && !memchr(p->used + a, 1, b - a);
    }
    long at = run ? find_unused(p, a, b, key, k) : -1;
    if (at >= 0) {
        int chars;
        size_t tail = word_tail(p, (size_t)at + k, b, &chars);
        if (e->inflect || chars == 0 || chars >= 3) /* the term, a form, or a compound */
            take(p, a, b);
        else /* a verbatim term's inflection: the term itself */
            add_edit(p, (size_t)at, (size_t)at + k + tail, e, lo == 0 && (size_t)at == a,
                     word_before(p->tgt, (size_t)at));
        return;
    }
    /* elsewhere in the translation (the attention pointing a word off) */
    if ((at = find_unused(p, 0, p->n, key, k)) >= 0) {
        take(p, (size_t)at, (size_t)at + k);
        return;
    }
    if (run)
        add_edit(p, a, b, e, lo == 0, 0);
}

static int by_start(const void *x, const void *y)
{
    const srv_gloss_edit *a = x, *b = y;
    return (a->a > b->a) - (a->a < b->a);
}

int srv_gloss_place(const char *src, size_t src_n, const char *tgt, size_t tgt_n,
                    const srv_gloss_hit *hits, int n_hits, const srv_align *blocks, int n_blocks,
                    srv_gloss_edit **out)
{
    srv_word_links l;
    *out = NULL;
    if (srv_word_links_make(src, src_n, tgt, tgt_n, blocks, n_blocks, &l) != 0)
        return -1;
    placing p = {tgt, tgt_n, malloc(tgt_n + 1), calloc(tgt_n + 1, 1),
                 calloc((size_t)l.ntw + 1, 1), &l,
                 malloc((size_t)(n_hits ? n_hits : 1) * sizeof *p.ed), 0};
    char key[SRV_GLOSS_MAX_TERM];
    int rc = -1;
    if (!p.fold || !p.used || !p.claimed || !p.ed)
        goto out;
    srv_gloss_fold(tgt, tgt_n, p.fold);
    for (int h = 0; h < n_hits; h++) {
        const srv_gloss_entry *e = hits[h].e;
        size_t k = e->inflect ? stem_len(e->tgt, e->tgt_n) : e->tgt_n;
        srv_gloss_fold(e->tgt, k, key);
        place_hit(&p, &hits[h], key, k);
    }
    rc = p.ne;
    if (p.ne) {
        qsort(p.ed, (size_t)p.ne, sizeof *p.ed, by_start);
        *out = p.ed;
        p.ed = NULL;
    }
out:
    free(p.fold);
    free(p.used);
    free(p.claimed);
    free(p.ed);
    srv_word_links_free(&l);
    return rc;
}

char *srv_gloss_apply(const char *tgt, size_t tgt_n, const srv_gloss_edit *ed, int n_ed,
                      size_t *offsets, int n_off, size_t *n_out)
{
    size_t n = tgt_n;
    for (int i = 0; i < n_ed; i++)
        n = n - (ed[i].b - ed[i].a) + ed[i].rep_n;
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    size_t at = 0, from = 0;
    for (int i = 0; i < n_ed; i++) {
        memcpy(o + at, tgt + from, ed[i].a - from);
        at += ed[i].a - from;
        memcpy(o + at, ed[i].rep, ed[i].rep_n);
        at += ed[i].rep_n;
        from = ed[i].b;
    }
    memcpy(o + at, tgt + from, tgt_n - from);
    o[n] = 0;
    for (int j = 0; offsets && j < 2 * n_off; j++) {
        size_t x = offsets[j];
        long shift = 0;
        size_t y = x;
        for (int i = 0; i < n_ed; i++) {
            if (x >= ed[i].b) {
                shift += (long)ed[i].rep_n - (long)(ed[i].b - ed[i].a);
                continue;
            }
            if (x > ed[i].a) { /* inside: clamped to the replacement */
                size_t in = x - ed[i].a;
                y = ed[i].a + (in < ed[i].rep_n ? in : ed[i].rep_n);
                x = (size_t)-1;
            }
            break;
        }
        offsets[j] = x == (size_t)-1 ? (size_t)((long)y + shift) : (size_t)((long)x + shift);
    }
    *n_out = n;
    return o;
}
