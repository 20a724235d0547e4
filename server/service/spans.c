/*
 * spans.c - inline formatting carried by attention (spans.h).
 */
#include <stdlib.h>
#include <string.h>

#include "spans.h"

typedef struct word {
    size_t a, b;
} word;

void srv_align_free(srv_align *a, int n)
{
    for (int i = 0; a && i < n; i++) {
        free(a[i].t_off);
        free(a[i].s_off);
        free(a[i].w);
    }
    free(a);
}

static int is_sp(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The bytes of a space at t[i] (n bytes): 1 for ASCII white space, 2
 * for U+00A0 (a non-breaking space parts words as a space does: "Home"
 * and "Contact" of "Home&nbsp;Contact" are two words, each with its
 * link), else 0. */
static size_t space_at(const char *t, size_t i, size_t n)
{
    if (is_sp((unsigned char)t[i]))
        return 1;
    return i + 1 < n && (unsigned char)t[i] == 0xC2 && (unsigned char)t[i + 1] == 0xA0 ? 2 : 0;
}

/* The runs of non-space bytes of t into *out; their count, or -1. */
static int words_of(const char *t, size_t n, word **out)
{
    int cnt = 0;
    for (size_t i = 0, k; i < n;) {
        if ((k = space_at(t, i, n)) > 0) {
            i += k;
            continue;
        }
        cnt++;
        while (i < n && !space_at(t, i, n))
            i++;
    }
    *out = malloc((size_t)(cnt ? cnt : 1) * sizeof **out);
    if (!*out)
        return -1;
    int w = 0;
    for (size_t i = 0, k; i < n;) {
        if ((k = space_at(t, i, n)) > 0) {
            i += k;
            continue;
        }
        size_t a = i;
        while (i < n && !space_at(t, i, n))
            i++;
        (*out)[w++] = (word){a, i};
    }
    return cnt;
}

/* Where the source's gap between its words j and j + 1 holds a
 * non-breaking space: its byte, else (size_t)-1. */
static size_t nbsp_after(const char *src, const word *sw, int nsw, int j)
{
    if (j < 0 || j + 1 >= nsw)
        return (size_t)-1;
    for (size_t i = sw[j].b; i < sw[j + 1].a; i++)
        if (space_at(src, i, sw[j + 1].a) == 2)
            return i;
    return (size_t)-1;
}

/* The word holding byte pos, or -1. */
static int word_at(const word *w, int nw, size_t pos)
{
    int lo = 0, hi = nw - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (pos < w[mid].a)
            hi = mid - 1;
        else if (pos >= w[mid].b)
            lo = mid + 1;
        else
            return mid;
    }
    return -1;
}

/* The word a token's bytes [a, b) belong to: the one of its last
 * non-space byte (a piece's space is the word boundary before it). */
static int token_word(const char *t, size_t n, const word *w, int nw, size_t a, size_t b)
{
    if (b > n)
        b = n;
    while (b > a && is_sp((unsigned char)t[b - 1]))
        b--;
    return b > a ? word_at(w, nw, b - 1) : -1;
}

/* Word weights of one sentence into the best links of each word (t_best,
 * t_bw over target words, s_best, s_bw over source words). 0 or -1. */
static int link_block(const srv_align *al, const char *src, size_t src_n, const word *sw, int nsw,
                      const char *tgt, size_t tgt_n, const word *tw, int ntw, int *t_best,
                      float *t_bw, int *s_best, float *s_bw)
{
    int *tk = malloc((size_t)(al->nt + al->ns + 1) * sizeof *tk), *sk = tk + al->nt;
    if (!tk)
        return -1;
    int t0 = ntw, t1 = -1, s0 = nsw, s1 = -1;
    for (int t = 0; t < al->nt; t++) {
        tk[t] = token_word(tgt, tgt_n, tw, ntw, al->t_off[2 * t], al->t_off[2 * t + 1]);
        if (tk[t] >= 0) {
            t0 = tk[t] < t0 ? tk[t] : t0;
            t1 = tk[t] > t1 ? tk[t] : t1;
        }
    }
    for (int s = 0; s < al->ns; s++) {
        sk[s] = token_word(src, src_n, sw, nsw, al->s_off[2 * s], al->s_off[2 * s + 1]);
        if (sk[s] >= 0) {
            s0 = sk[s] < s0 ? sk[s] : s0;
            s1 = sk[s] > s1 ? sk[s] : s1;
        }
    }
    if (t1 < 0 || s1 < 0) {
        free(tk);
        return 0;
    }
    const int nt = t1 - t0 + 1, ns = s1 - s0 + 1;
    float *m = calloc((size_t)nt * (size_t)ns, sizeof *m);
    if (!m) {
        free(tk);
        return -1;
    }
    for (int t = 0; t < al->nt; t++)
        for (int s = 0; tk[t] >= 0 && s < al->ns; s++)
            if (sk[s] >= 0)
                m[(size_t)(tk[t] - t0) * (size_t)ns + (size_t)(sk[s] - s0)] +=
                    al->w[(size_t)t * (size_t)al->ns + (size_t)s];
    for (int i = 0; i < nt; i++)
        for (int j = 0; j < ns; j++) {
            float v = m[(size_t)i * (size_t)ns + (size_t)j];
            if (v > t_bw[t0 + i]) {
                t_bw[t0 + i] = v;
                t_best[t0 + i] = s0 + j;
            }
            if (v > s_bw[s0 + j]) {
                s_bw[s0 + j] = v;
                s_best[s0 + j] = t0 + i;
            }
        }
    free(m);
    free(tk);
    return 0;
}

/* The answer being written: its pieces and its text (the target's bytes,
 * a space put after an object where the source had one). */
typedef struct out_buf {
    srv_span *s;
    int n, cap;
    char *t;
    size_t tn;
} out_buf;

/* Appends t[a, b) in style (obj: an object, id style, t unused). */
static int push(out_buf *o, const char *t, size_t a, size_t b, int style, int obj)
{
    if (!obj && a == b)
        return 0;
    size_t at = o->tn;
    memcpy(o->t + at, obj ? "" : t + a, obj ? 0 : b - a);
    o->tn += obj ? 0 : b - a;
    if (!obj && o->n > 0 && !o->s[o->n - 1].obj && o->s[o->n - 1].style == style &&
        o->s[o->n - 1].b == at) {
        o->s[o->n - 1].b = o->tn;
        return 0;
    }
    if (o->n == o->cap) {
        int cap = o->cap ? o->cap * 2 : 16;
        srv_span *p = realloc(o->s, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        o->s = p;
        o->cap = cap;
    }
    o->s[o->n++] = (srv_span){at, o->tn, style, obj};
    return 0;
}

static int is_punct(char c)
{
    return c && strchr(".,;:!?)]\"'", c) != NULL;
}

/* Whether style st's source text ends in punctuation (then its target
 * word's does too). */
static int keeps_punct(const char *src, const srv_span *in, int n_in, int st)
{
    for (int k = 0; k < n_in; k++) {
        size_t b = in[k].b;
        while (!in[k].obj && in[k].style == st && b > in[k].a && is_sp((unsigned char)src[b - 1]))
            b--;
        if (!in[k].obj && in[k].style == st && b > in[k].a && is_punct(src[b - 1]))
            return 1;
    }
    return 0;
}

/* Word [a, b) of t in style st: the punctuation at its edges in base
 * unless the style has its own, and only at the edges of the style's run
 * (lead: the word begins it, trail: ends it; the colon of a link's
 * "DocBook: The Definitive Guide" stays in the link, which would be two
 * links else). */
static int push_word(out_buf *o, const char *t, size_t a, size_t b, int st, int base, int punct,
                     int lead, int trail)
{
    size_t x = a, y = b;
    if (st != base && !punct) {
        while (trail && y > x && is_punct(t[y - 1]))
            y--;
        while (lead && x < y && (t[x] == '(' || t[x] == '[' || t[x] == '"' || t[x] == '\''))
            x++;
        if (x == y) /* all punctuation: one piece */
            x = a, y = b;
    }
    return push(o, t, a, x, base, 0) || push(o, t, x, y, st, 0) || push(o, t, y, b, base, 0);
}

/* Each source word's style: the style of most of its bytes. */
static void word_styles(const word *sw, int nsw, const srv_span *in, int n_in, int *s_style)
{
    int k = 0;
    for (int i = 0; i < nsw; i++) {
        size_t best = 0;
        s_style[i] = -1;
        while (k < n_in && (in[k].obj || in[k].b <= sw[i].a))
            k++;
        for (int j = k; j < n_in && in[j].a < sw[i].b; j++) {
            if (in[j].obj)
                continue;
            size_t a = in[j].a > sw[i].a ? in[j].a : sw[i].a;
            size_t b = in[j].b < sw[i].b ? in[j].b : sw[i].b;
            if (b > a && b - a > best) {
                best = b - a;
                s_style[i] = in[j].style;
            }
        }
    }
}

/* The style of most non-space source bytes (the first such on a tie). */
static int base_style(const char *src, const srv_span *in, int n_in)
{
    int best = -1;
    size_t best_n = 0;
    for (int i = 0; i < n_in; i++) {
        if (in[i].obj)
            continue;
        size_t cnt = 0;
        for (int j = 0; j < n_in; j++)
            for (size_t p = in[j].a; !in[j].obj && in[j].style == in[i].style && p < in[j].b; p++)
                cnt += !is_sp((unsigned char)src[p]);
        if (best < 0 || cnt > best_n) {
            best = in[i].style;
            best_n = cnt;
        }
    }
    return best < 0 ? 0 : best;
}

/* Gives the target words their styles (spans.h's rules); returns the
 * styles lost. */
static int target_styles(const srv_span *in, int n_in, int base, const int *s_style, int nsw,
                         const int *t_best, const int *s_best, int ntw, int *t_style)
{
    int lost = 0;
    for (int i = 0; i < ntw; i++)
        t_style[i] = base;
    for (int k = 0; k < n_in; k++) {
        int st = in[k].style, seen = 0;
        if (in[k].obj || st == base)
            continue;
        for (int j = 0; j < k; j++)
            seen |= !in[j].obj && in[j].style == st;
        if (seen)
            continue;
        int first = -1, last = -1, cnt = 0;
        for (int i = 0; i < nsw; i++)
            if (s_style[i] == st) {
                first = first < 0 ? i : first;
                last = i;
                cnt++;
            }
        if (!cnt)
            continue; /* only spaces: nothing to carry */
        /* both ways first; one way (target to source) when none is */
        int lo = -1, hi = -1;
        for (int pass = 0; pass < 2 && lo < 0; pass++)
            for (int i = 0; i < ntw; i++) {
                int s = t_best[i];
                if (s < 0 || s_style[s] != st || (!pass && s_best[s] != i))
                    continue;
                t_style[i] = st;
                lo = lo < 0 ? i : lo;
                hi = i;
            }
        for (int i = first; lo < 0 && i <= last; i++) /* the other way */
            if (s_style[i] == st && s_best[i] >= 0 && t_style[s_best[i]] == base)
                t_style[s_best[i]] = st;
        for (int i = 0; lo < 0 && i < ntw; i++)
            if (t_style[i] == st) {
                lo = lo < 0 ? i : lo;
                hi = i;
            }
        if (lo >= 0 && last - first + 1 == cnt && hi - lo + 1 <= 2 * cnt + 2)
            for (int i = lo; i <= hi; i++)
                if (t_style[i] == base)
                    t_style[i] = st;
    }
    /* never more runs of a style in the target than in the source (one
     * link, one bold word is one element: a second run of it would be an
     * element the source does not have); the runs past that are given back
     * to the base style, the weakest first (fewest words linked both ways,
     * then fewest words, then the later) */
    for (int k = 0; k < n_in; k++) {
        int st = in[k].style, seen = 0;
        for (int j = 0; j < k; j++)
            seen |= !in[j].obj && in[j].style == st;
        if (in[k].obj || st == base || seen)
            continue;
        int src_runs = 0;
        for (int i = 0; i < nsw; i++)
            src_runs += s_style[i] == st && (i == 0 || s_style[i - 1] != st);
        for (;;) {
            int runs = 0, weak = -1, weak_both = 0, weak_n = 0;
            for (int i = 0; i < ntw; i++) {
                if (t_style[i] != st || (i > 0 && t_style[i - 1] == st))
                    continue;
                int both = 0, n = 0;
                for (int j = i; j < ntw && t_style[j] == st; j++, n++)
                    both += t_best[j] >= 0 && s_best[t_best[j]] == j;
                runs++;
                if (weak < 0 || both < weak_both || (both == weak_both && n <= weak_n)) {
                    weak = i;
                    weak_both = both;
                    weak_n = n;
                }
            }
            if (runs <= src_runs || weak < 0)
                break;
            for (int j = weak; j < ntw && t_style[j] == st; j++)
                t_style[j] = base;
        }
    }
    /* lost: a style of source words that no target word has now (a later
     * style's stronger link may have taken its only word) */
    for (int k = 0; k < n_in; k++) {
        int st = in[k].style, seen = 0, has = 0, words = 0;
        for (int j = 0; j < k; j++)
            seen |= !in[j].obj && in[j].style == st;
        if (in[k].obj || st == base || seen)
            continue;
        for (int i = 0; i < nsw; i++)
            words += s_style[i] == st;
        for (int i = 0; i < ntw; i++)
            has |= t_style[i] == st;
        lost += words && !has;
    }
    return lost;
}

/* Where each object goes in the target (pos, in in's order). */
static void object_places(const char *src, const char *tgt, const srv_span *in, int n_in,
                          const word *sw, int nsw, const word *tw, int ntw, const int *t_best,
                          const int *s_best, size_t tgt_n, size_t *pos)
{
    for (int k = 0; k < n_in; k++) {
        if (!in[k].obj)
            continue;
        int next = 0;
        while (next < nsw && sw[next].a < in[k].a)
            next++;
        size_t p = tgt_n;
        if (next == 0) {
            p = 0;
        } else if (next < nsw) {
            int t = -1;
            for (int i = 0; i < ntw && t < 0; i++)
                if (t_best[i] == next)
                    t = i;
            if (t < 0)
                t = s_best[next];
            if (t >= 0)
                p = tw[t].a;
        }
        /* one the source's word before it touches stays at that word's
         * translation's end, before the space */
        if (in[k].a > 0 && !is_sp((unsigned char)src[in[k].a - 1]) && p > 0 && p < tgt_n)
            while (p > 0 && is_sp((unsigned char)tgt[p - 1]))
                p--;
        pos[k] = p; /* the pieces are written in the source's order: a place
                     * before an earlier object's is that object's */
    }
}

/* The target's gaps that get a non-breaking space again: nb[i] (the
 * gap before target word i) is 1 + the source byte of one that joined
 * the source words whose translations words i - 1 and i are (linked
 * either way), or whose two styles words i - 1 and i have, else 0; a gap gets one only when it is a single space. */
static void nbsp_gaps(const char *src, const word *sw, int nsw, const char *tgt, const word *tw,
                      int ntw, const int *t_best, const int *s_best, const int *s_style,
                      const int *t_style, size_t *nb)
{
    for (int i = 0; i < ntw; i++)
        nb[i] = 0;
    for (int j = 0; j + 1 < nsw; j++) {
        size_t at = nbsp_after(src, sw, nsw, j);
        int l = s_best[j], r = s_best[j + 1];
        if (at != (size_t)-1 && l >= 0 && r == l + 1)
            nb[r] = at + 1;
        /* between two styles (two links): between the last word of the
         * one and the first of the other in the target */
        for (int i = 1; at != (size_t)-1 && s_style[j] != s_style[j + 1] && i < ntw; i++)
            if (t_style[i - 1] == s_style[j] && t_style[i] == s_style[j + 1])
                nb[i] = at + 1;
    }
    for (int i = 1; i < ntw; i++) {
        int j = t_best[i - 1];
        size_t at = j >= 0 && t_best[i] == j + 1 ? nbsp_after(src, sw, nsw, j) : (size_t)-1;
        if (at != (size_t)-1)
            nb[i] = at + 1;
    }
    for (int i = 1; i < ntw; i++)
        if (nb[i] && !(tw[i].a == tw[i - 1].b + 1 && tgt[tw[i - 1].b] == ' '))
            nb[i] = 0;
}

/* The style of the source's byte at (a text's). */
static int style_at(const srv_span *in, int n_in, size_t at, int base)
{
    for (int k = 0; k < n_in; k++)
        if (!in[k].obj && in[k].a <= at && at < in[k].b)
            return in[k].style;
    return base;
}

/* The style of the spaces between a target word of style l and one of
 * style r (l != r): the style the source gave the spaces between its
 * first word of l followed by a word of r, when they all had one of the
 * two (the space at the start of a link after a bold word,
 * "<strong>ffi_type</strong><a> ¶</a>": a base space there would be an
 * element of the base's between two parts of one element); else the
 * base's. */
static int gap_style(const srv_span *in, int n_in, const word *sw, int nsw, const int *s_style,
                     int l, int r, int base)
{
    for (int j = 0; j + 1 < nsw; j++) {
        if (s_style[j] != l || s_style[j + 1] != r)
            continue;
        int st = style_at(in, n_in, sw[j].b, base);
        for (size_t p = sw[j].b + 1; p < sw[j + 1].a; p++)
            if (style_at(in, n_in, p, base) != st)
                st = base;
        return st == l || st == r ? st : base;
    }
    return base;
}

/* srv_spans_map with the base style plain (-1: the style of most bytes). */
static int map_spans(const char *src, size_t src_n, const srv_span *in, int n_in, const char *tgt,
                     size_t tgt_n, const srv_align *blocks, int n_blocks, int plain,
                     srv_span **out, int *n_out, char **text, int *lost)
{
    word *sw = NULL, *tw = NULL;
    int nsw = words_of(src, src_n, &sw), ntw = nsw < 0 ? -1 : words_of(tgt, tgt_n, &tw);
    int *ints = NULL;
    float *fl = NULL;
    size_t *pos = NULL;
    out_buf o = {0};
    int rc = -1;
    *out = NULL;
    *n_out = 0;
    *text = NULL;
    *lost = 0;
    if (nsw < 0 || ntw < 0 || !(o.t = malloc(2 * tgt_n + (size_t)n_in + 1)))
        goto done;
    ints = malloc((size_t)(2 * nsw + 2 * ntw + 1) * sizeof *ints);
    fl = calloc((size_t)(nsw + ntw + 1), sizeof *fl);
    pos = calloc((size_t)(n_in + ntw + 1), sizeof *pos);
    if (!ints || !fl || !pos)
        goto done;
    int *s_style = ints, *s_best = ints + nsw, *t_best = ints + 2 * nsw,
        *t_style = ints + 2 * nsw + ntw;
    float *s_bw = fl, *t_bw = fl + nsw;
    for (int i = 0; i < nsw; i++)
        s_best[i] = -1;
    for (int i = 0; i < ntw; i++)
        t_best[i] = -1;
    for (int b = 0; b < n_blocks; b++)
        if (link_block(&blocks[b], src, src_n, sw, nsw, tgt, tgt_n, tw, ntw, t_best, t_bw, s_best,
                       s_bw) != 0)
            goto done;
    word_styles(sw, nsw, in, n_in, s_style);
    /* the plain text is the base when it has a word (a non-breaking space
     * alone between two links is none: the style of most bytes then) */
    int base = base_style(src, in, n_in);
    for (int k = 0; plain >= 0 && k < n_in; k++)
        for (size_t i = in[k].a, sp; !in[k].obj && in[k].style == plain && i < in[k].b; i += sp)
            if (!(sp = space_at(src, i, in[k].b))) {
                base = plain;
                break;
            }
    *lost = target_styles(in, n_in, base, s_style, nsw, t_best, s_best, ntw, t_style);
    object_places(src, tgt, in, n_in, sw, nsw, tw, ntw, t_best, s_best, tgt_n, pos);
    size_t *nb = pos + n_in; /* the gaps that get a non-breaking space */
    nbsp_gaps(src, sw, nsw, tgt, tw, ntw, t_best, s_best, s_style, t_style, nb);
    /* the text's pieces, the objects put in between */
    int k = 0;
    for (int i = 0; i <= ntw; i++) {
        /* the gap before word i (the tail after the last), then word i */
        size_t ga = i ? tw[i - 1].b : 0, gb = i < ntw ? tw[i].a : tgt_n;
        /* the spaces before the first word and after the last are the
         * base style's (a styled space there would be an element of its
         * own: a link around nothing) */
        int gs = !ntw || i == 0 || i == ntw    ? base
                 : t_style[i - 1] == t_style[i] ? t_style[i]
                                                : gap_style(in, n_in, sw, nsw, s_style,
                                                            t_style[i - 1], t_style[i], base);
        for (int pass = 0; pass < 2; pass++) {
            size_t a = pass ? gb : ga, b = pass ? (i < ntw ? tw[i].b : gb) : gb;
            int st = pass ? (i < ntw ? t_style[i] : gs) : gs;
            for (; k < n_in; k++) {
                if (!in[k].obj)
                    continue;
                if (pos[k] >= b && !(b == tgt_n && i == ntw && pass))
                    break;
                size_t p = pos[k] > a ? pos[k] : a;
                /* before a word, and a space after it in the source: one
                 * after it here too */
                int sp = in[k].a < src_n && is_sp((unsigned char)src[in[k].a]) && p < tgt_n &&
                         !is_sp((unsigned char)tgt[p]);
                if (push(&o, tgt, a, p, st, 0) != 0 || push(&o, tgt, p, p, in[k].style, 1) != 0 ||
                    (sp && push(&o, " ", 0, 1, base, 0) != 0))
                    goto done;
                a = p;
            }
            /* a single space between the translations of two source
             * words that a non-breaking space joined: one again, in the
             * style it had */
            int nbsp = !pass && i > 0 && i < ntw && nb[i] && b == a + 1 && tgt[a] == ' ';
            int r = pass && i < ntw ? push_word(&o, tgt, a, b, st, base,
                                                keeps_punct(src, in, n_in, st),
                                                i == 0 || t_style[i - 1] != st,
                                                i + 1 == ntw || t_style[i + 1] != st)
                    : nbsp ? push(&o, "\xC2\xA0", 0, 2, style_at(in, n_in, nb[i] - 1, base), 0)
                           : push(&o, tgt, a, b, st, 0);
            if (r != 0)
                goto done;
        }
    }
    o.t[o.tn] = 0;
    *out = o.s;
    *n_out = o.n;
    *text = o.t;
    o.s = NULL;
    o.t = NULL;
    rc = 0;
done:
    free(o.s);
    free(o.t);
    free(sw);
    free(tw);
    free(ints);
    free(fl);
    free(pos);
    return rc;
}

int srv_spans_map(const char *src, size_t src_n, const srv_span *in, int n_in, const char *tgt,
                  size_t tgt_n, const srv_align *blocks, int n_blocks, srv_span **out,
                  int *n_out, char **text, int *lost)
{
    return map_spans(src, src_n, in, n_in, tgt, tgt_n, blocks, n_blocks, -1, out, n_out, text,
                     lost);
}

/* ---- a document's segment --------------------------------------------------- */

static int has_letter(const char *t)
{
    for (; *t; t++)
        if (((*t | 32) >= 'a' && (*t | 32) <= 'z') || (unsigned char)*t >= 0xc0)
            return 1;
    return 0;
}

int srv_seg_make(srv_seg *s, const char *const *text, const int *id, int n)
{
    memset(s, 0, sizeof *s);
    s->plain = -1;
    size_t len = 0;
    int first_obj = -1, last_text = -1, styles = 0;
    for (int k = 0; k < n; k++)
        if (text[k]) {
            len += strlen(text[k]);
            styles |= last_text >= 0 && id[k] != id[last_text];
            last_text = k;
        } else if (first_obj < 0 && last_text >= 0) {
            first_obj = k;
        }
    s->full = malloc(len + 1);
    s->in = malloc((size_t)(n ? n : 1) * sizeof *s->in);
    if (!s->full || !s->in)
        goto fail;
    size_t at = 0;
    for (int k = 0; k < n; k++) {
        size_t m = text[k] ? strlen(text[k]) : 0;
        memcpy(s->full + at, m ? text[k] : "", m);
        s->in[s->n_in++] = (srv_span){at, at + m, id[k], !text[k]};
        at += m;
    }
    s->full[len] = 0;
    if (!has_letter(s->full)) {
        srv_seg_free(s);
        return 0;
    }
    size_t a = 0, b = len;
    while (a < b && is_sp((unsigned char)s->full[a]))
        a++;
    while (b > a && is_sp((unsigned char)s->full[b - 1]))
        b--;
    s->lead = a;
    s->len = b - a;
    if (!(s->src = malloc(s->len + 1)))
        goto fail;
    memcpy(s->src, s->full + a, s->len);
    s->src[s->len] = 0;
    /* a non-breaking space between two words is kept by the alignment too */
    int nbsp = 0;
    for (size_t i = 0; i + 1 < s->len && !nbsp; i++)
        nbsp = (unsigned char)s->src[i] == 0xC2 && (unsigned char)s->src[i + 1] == 0xA0;
    s->styled = styles || (first_obj >= 0 && first_obj < last_text) || nbsp;
    return 1;
fail:
    srv_seg_free(s);
    return -1;
}

int srv_seg_set(srv_seg *s, const char *t, const srv_align *al, int n_al, int *lost)
{
    const size_t n = strlen(t), trail = strlen(s->full) - s->lead - s->len;
    char *tgt = malloc(s->lead + n + trail + 1);
    srv_align *sh = n_al ? calloc((size_t)n_al, sizeof *sh) : NULL;
    int rc = tgt && (!n_al || sh) ? 0 : -1;
    if (rc == 0) {
        memcpy(tgt, s->full, s->lead);
        memcpy(tgt + s->lead, t, n);
        memcpy(tgt + s->lead + n, s->full + s->lead + s->len, trail + 1);
    }
    /* the alignment's offsets into full and tgt: both begin with lead */
    for (int b = 0; rc == 0 && b < n_al; b++) {
        sh[b] = (srv_align){al[b].nt, al[b].ns, malloc(2 * (size_t)al[b].nt * sizeof(size_t)),
                            malloc(2 * (size_t)al[b].ns * sizeof(size_t)), al[b].w};
        if (!sh[b].t_off || !sh[b].s_off) {
            rc = -1;
            break;
        }
        for (int k = 0; k < 2 * al[b].nt; k++)
            sh[b].t_off[k] = al[b].t_off[k] + s->lead;
        for (int k = 0; k < 2 * al[b].ns; k++)
            sh[b].s_off[k] = al[b].s_off[k] + s->lead;
    }
    srv_span *o = NULL;
    char *text = NULL;
    int no = 0;
    *lost = 0;
    if (rc == 0)
        rc = map_spans(s->full, strlen(s->full), s->in, s->n_in, tgt, strlen(tgt), sh, n_al,
                       s->plain, &o, &no, &text, lost);
    for (int b = 0; sh && b < n_al; b++) {
        free(sh[b].t_off);
        free(sh[b].s_off);
    }
    free(sh);
    free(tgt);
    if (rc != 0)
        return -1;
    free(s->tgt);
    free(s->out);
    s->tgt = text; /* the translation with the objects' spaces */
    s->out = o;
    s->n_out = no;
    return 0;
}

void srv_seg_free(srv_seg *s)
{
    free(s->full);
    free(s->src);
    free(s->in);
    free(s->tgt);
    free(s->out);
    memset(s, 0, sizeof *s);
}

/* ---- word links for other modules (glossary placement) -------------------- */

void srv_word_links_free(srv_word_links *l)
{
    if (!l)
        return;
    free(l->sw);
    free(l->tw);
    free(l->s_best);
    free(l->t_bw);
    *l = (srv_word_links){0};
}

int srv_word_links_make(const char *src, size_t src_n, const char *tgt, size_t tgt_n,
                        const srv_align *blocks, int n_blocks, srv_word_links *l)
{
    word *sw = NULL, *tw = NULL;
    *l = (srv_word_links){0};
    int nsw = words_of(src, src_n, &sw), ntw = nsw < 0 ? -1 : words_of(tgt, tgt_n, &tw);
    if (nsw < 0 || ntw < 0)
        goto oom;
    l->nsw = nsw;
    l->ntw = ntw;
    l->sw = malloc(2 * (size_t)(nsw + 1) * sizeof *l->sw);
    l->tw = malloc(2 * (size_t)(ntw + 1) * sizeof *l->tw);
    l->s_best = malloc((size_t)(nsw + ntw + 1) * sizeof *l->s_best);
    l->t_bw = calloc((size_t)(nsw + ntw + 1), sizeof *l->t_bw);
    if (!l->sw || !l->tw || !l->s_best || !l->t_bw)
        goto oom;
    l->t_best = l->s_best + nsw;
    l->s_bw = l->t_bw + ntw;
    for (int i = 0; i < nsw; i++) {
        l->sw[2 * i] = sw[i].a;
        l->sw[2 * i + 1] = sw[i].b;
        l->s_best[i] = -1;
    }
    for (int i = 0; i < ntw; i++) {
        l->tw[2 * i] = tw[i].a;
        l->tw[2 * i + 1] = tw[i].b;
        l->t_best[i] = -1;
    }
    for (int b = 0; b < n_blocks; b++)
        if (link_block(&blocks[b], src, src_n, sw, nsw, tgt, tgt_n, tw, ntw, l->t_best, l->t_bw,
                       l->s_best, l->s_bw) != 0)
            goto oom;
    free(sw);
    free(tw);
    return 0;
oom:
    free(sw);
    free(tw);
    srv_word_links_free(l);
    return -1;
}
