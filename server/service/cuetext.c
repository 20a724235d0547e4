/*
 * cuetext.c - a subtitle cue's text and its markup (cuetext.h).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cuetext.h"

/* ---- tokens ----------------------------------------------------------------- */

typedef enum tok_kind { TOK_TEXT, TOK_OPEN, TOK_CLOSE, TOK_OBJ } tok_kind;

typedef struct tok {
    tok_kind kind;
    const char *a, *b;    /* its bytes */
    const char *na, *nb;  /* an open or close tag: its name */
    int match;            /* an open tag: the close's token, -1 none; a close: the open's, -1 */
} tok;

typedef struct toks {
    tok *t;
    int n, cap;
} toks;

static int is_sp(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

/* SubRip's tags: a '<' before another name is text. */
static int srt_tag_name(const char *na, const char *nb)
{
    static const char *const k_names[] = {"i", "b", "u", "s", "font", NULL};
    for (int i = 0; k_names[i]; i++)
        if ((size_t)(nb - na) == strlen(k_names[i]) && !strncasecmp(na, k_names[i], nb - na))
            return 1;
    return 0;
}

/* A tag's name after '<' or '</' at p: up to a space, a '.' (a WebVTT
 * class) or the '>' at gt. */
static const char *name_end(const char *p, const char *gt)
{
    while (p < gt && !is_sp((unsigned char)*p) && *p != '.' && *p != '>')
        p++;
    return p;
}

size_t srv_cue_tag_len(const char *s, const char *end, int vtt)
{
    if (s + 2 < end && s[0] == '{' && s[1] == '\\') { /* an ASS override */
        const char *c = memchr(s, '}', (size_t)(end - s));
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        return c && (!nl || c < nl) ? (size_t)(c - s) + 1 : 0;
    }
    if (s + 2 >= end || s[0] != '<')
        return 0;
    /* WebVTT: a tag ends at its '>' (the cue text tokenizer); within one
     * line here, a '<' with no '>' after it on its line is text */
    const char *gt = memchr(s, '>', (size_t)(end - s));
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    if (!gt || (nl && nl < gt))
        return 0;
    const char *na = s + 1 + (s[1] == '/');
    if (vtt)
        return (size_t)(gt - s) + 1;
    return srt_tag_name(na, name_end(na, gt)) ? (size_t)(gt - s) + 1 : 0;
}

static int push_tok(toks *l, tok t)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        tok *p = realloc(l->t, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        l->t = p;
        l->cap = cap;
    }
    l->t[l->n++] = t;
    return 0;
}

/* The tokens of [a, b): text runs and tags, each close tag matched with
 * the innermost open tag of its name (closing the tags inside it, as an
 * HTML-like parser does); a close tag that matches none is an object. */
static int tokenize(const char *a, const char *b, int vtt, toks *l)
{
    int *stack = malloc((size_t)(b - a + 1) * sizeof *stack), depth = 0;
    if (!stack)
        return -1;
    const char *p = a, *run = a;
    int rc = 0;
    while (rc == 0 && p < b) {
        size_t k = srv_cue_tag_len(p, b, vtt);
        if (!k) {
            p++;
            continue;
        }
        if (p > run)
            rc = push_tok(l, (tok){TOK_TEXT, run, p, NULL, NULL, -1});
        tok t = {TOK_OBJ, p, p + k, NULL, NULL, -1};
        if (p[0] == '<' && p[1] == '/') {
            t.kind = TOK_CLOSE;
            t.na = p + 2;
            t.nb = name_end(t.na, p + k - 1);
        } else if (p[0] == '<' && !(p[1] >= '0' && p[1] <= '9')) {
            t.kind = TOK_OPEN;
            t.na = p + 1;
            t.nb = name_end(t.na, p + k - 1);
        }
        if (t.kind == TOK_CLOSE) {
            int d = depth - 1;
            while (d >= 0) {
                const tok *o = &l->t[stack[d]];
                if (o->nb - o->na == t.nb - t.na && !strncasecmp(o->na, t.na, t.nb - t.na))
                    break;
                d--;
            }
            if (d < 0) {
                t.kind = TOK_OBJ; /* it closes nothing: kept as it is */
            } else {
                t.match = stack[d];
                l->t[stack[d]].match = l->n;
                depth = d;
            }
        }
        if (rc == 0 && t.kind == TOK_OPEN)
            stack[depth++] = l->n;
        rc = rc ? rc : push_tok(l, t);
        p += k;
        run = p;
    }
    if (rc == 0 && p > run)
        rc = push_tok(l, (tok){TOK_TEXT, run, p, NULL, NULL, -1});
    free(stack);
    return rc;
}

static int blank_tok(const tok *t)
{
    if (t->kind != TOK_TEXT)
        return 0;
    for (const char *c = t->a; c < t->b; c++)
        if (!is_sp((unsigned char)*c))
            return 0;
    return 1;
}

/* ---- character references (WebVTT) --------------------------------------- */

static size_t put_utf8(char *w, uint32_t cp)
{
    if (cp < 0x80) {
        w[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        w[0] = (char)(0xC0 | (cp >> 6));
        w[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        w[0] = (char)(0xE0 | (cp >> 12));
        w[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        w[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    w[0] = (char)(0xF0 | (cp >> 18));
    w[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    w[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    w[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The reference at s (s[0] == '&') read into w: its length in s, 0 when
 * it is none that WebVTT's files write (then '&' is text). *ref: its bit
 * in srv_cue.refs. */
static size_t read_ref(const char *s, const char *end, char *w, size_t *wn, unsigned *ref)
{
    static const struct {
        const char *name;
        uint32_t cp;
        unsigned bit;
    } k_refs[] = {{"&amp;", '&', 0},    {"&lt;", '<', 0},      {"&gt;", '>', 0},
                  {"&lrm;", 0x200E, 2}, {"&rlm;", 0x200F, 4}, {"&nbsp;", 0xA0, 1},
                  {"&quot;", '"', 0},   {"&apos;", '\'', 0}};
    for (size_t i = 0; i < sizeof k_refs / sizeof k_refs[0]; i++) {
        size_t k = strlen(k_refs[i].name);
        if ((size_t)(end - s) >= k && !memcmp(s, k_refs[i].name, k)) {
            *wn = put_utf8(w, k_refs[i].cp);
            *ref |= k_refs[i].bit;
            return k;
        }
    }
    if (end - s < 4 || s[1] != '#')
        return 0;
    int hex = s[2] == 'x' || s[2] == 'X';
    const char *p = s + 2 + hex;
    uint32_t cp = 0;
    int nd = 0;
    for (; p < end && nd < 7; p++, nd++) {
        int d = *p >= '0' && *p <= '9'                ? *p - '0'
                : hex && (*p | 32) >= 'a' && (*p | 32) <= 'f' ? (*p | 32) - 'a' + 10
                                                               : -1;
        if (d < 0)
            break;
        cp = cp * (hex ? 16 : 10) + (uint32_t)d;
    }
    if (!nd || p >= end || *p != ';' || cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    *wn = put_utf8(w, cp);
    return (size_t)(p - s) + 1;
}

/* The text of [a, b) for the model, appended at w: whitespace runs (line
 * breaks too) one space, none at the start (*sp: the last byte written was
 * a space, or nothing is written yet), references read when vtt. */
static size_t text_of(const char *a, const char *b, int vtt, char *w, int *sp, unsigned *refs)
{
    size_t n = 0;
    for (const char *c = a; c < b;) {
        if (is_sp((unsigned char)*c)) {
            if (!*sp)
                w[n++] = ' ';
            *sp = 1;
            c++;
            continue;
        }
        size_t k = 0, wn = 0;
        if (vtt && *c == '&')
            k = read_ref(c, b, w + n, &wn, refs);
        if (k) {
            n += wn;
            c += k;
        } else {
            w[n++] = *c++;
        }
        *sp = 0;
    }
    return n;
}

/* ---- the parse ------------------------------------------------------------- */

static char *dupn(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

/* Tags nested deeper, or after that many in one cue, are objects: a new
 * style needs a new tag, and each text run looks its style up among them,
 * so the work stays linear in the cue. */
#define CUE_MAX_DEPTH 32
#define CUE_MAX_TAGS 256

/* The style of the open tags stack[0..depth) (indices into c->tag_*):
 * found or added (the styles' count bounded by the text runs, their
 * lengths by CUE_MAX_DEPTH). -1 when out of memory. */
static int style_of(srv_cue *c, const int *stack, int depth)
{
    for (int k = 0; k < c->n_styles; k++) {
        int at = c->style_at[k], n = c->style_at[k + 1] - at;
        if (n == depth && (!depth || !memcmp(c->style_tags + at, stack,
                                              (size_t)depth * sizeof *stack)))
            return k;
    }
    int at = c->style_at[c->n_styles];
    if (at + depth > c->style_cap) {
        int cap = 2 * (at + depth) + 16;
        int *p = realloc(c->style_tags, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        c->style_tags = p;
        c->style_cap = cap;
    }
    if (depth)
        memcpy(c->style_tags + at, stack, (size_t)depth * sizeof *stack);
    c->style_at[++c->n_styles] = at + depth;
    return c->n_styles - 1;
}

/* Where the head ends: the tokens before the first word that are objects,
 * blank, or open tags closed after the last word (or never). */
static int head_end(const toks *l, int first, int last)
{
    int h = 0;
    while (h < first) {
        const tok *t = &l->t[h];
        if (t->kind == TOK_OPEN && t->match >= 0 && t->match <= last)
            break;
        h++;
    }
    return h;
}

/* Where the tail starts: from there to the end, only blanks, objects and
 * close tags of tags opened in the head. */
static int tail_start(const toks *l, int last, int head)
{
    int s = l->n;
    while (s - 1 > last) {
        const tok *t = &l->t[s - 1];
        if (t->kind == TOK_OPEN || (t->kind == TOK_CLOSE && t->match >= head) ||
            (t->kind == TOK_TEXT && !blank_tok(t)))
            break;
        s--;
    }
    return s;
}

/* A tag opened before with the bytes of t's, or -1. */
static int same_tag(const srv_cue *c, const tok *t)
{
    for (int g = 0; g < c->n_tags; g++)
        if (strlen(c->tag_open[g]) == (size_t)(t->b - t->a) &&
            !memcmp(c->tag_open[g], t->a, (size_t)(t->b - t->a)) &&
            c->tag_closed[g] == (t->match >= 0))
            return g;
    return -1;
}

/* The tokens [h, s) (the first text starting at from) into c's segment:
 * text pieces in the style of the tags open around them, objects. 1, 0
 * (no letter to translate), -1. */
static int middle(srv_cue *c, const toks *l, int h, int s, const char *from, size_t bytes)
{
    int n = s - h, rc = -1;
    const char **text = calloc((size_t)n + 1, sizeof *text);
    int *id = calloc((size_t)n + 1, sizeof *id), *stack = calloc((size_t)n + 1, sizeof *stack);
    int *tag_of = calloc((size_t)n + 1, sizeof *tag_of);
    char *buf = malloc(2 * bytes + 8), *w = buf;
    c->tag_open = calloc((size_t)n + 1, sizeof *c->tag_open);
    c->tag_close = calloc((size_t)n + 1, sizeof *c->tag_close);
    c->tag_closed = calloc((size_t)n + 1, sizeof *c->tag_closed);
    c->obj = calloc((size_t)n + 1, sizeof *c->obj);
    c->style_at = calloc((size_t)n + 2, sizeof *c->style_at);
    if (!text || !id || !stack || !tag_of || !buf || !c->tag_open || !c->tag_close ||
        !c->tag_closed || !c->obj || !c->style_at || style_of(c, stack, 0) != 0)
        goto done; /* style 0: no tag */
    int depth = 0, np = 0, sp = 1;
    for (int i = h; i < s; i++) {
        const tok *t = &l->t[i];
        if (t->kind == TOK_TEXT) {
            const char *a = i == h ? from : t->a; /* from: after the head's dash */
            size_t k = text_of(a, t->b, c->vtt, w, &sp, &c->refs);
            if (!k)
                continue;
            w[k] = 0;
            text[np] = w;
            w += k + 1;
            if ((id[np++] = style_of(c, stack, depth)) < 0)
                goto done;
        } else if (t->kind == TOK_OPEN && depth < CUE_MAX_DEPTH && c->n_tags < CUE_MAX_TAGS) {
            int g = same_tag(c, t);
            if (g >= 0) { /* <c>...</c> <c>...</c>: one style */
                tag_of[i - h] = g + 1;
                stack[depth++] = g;
                continue;
            }
            g = c->n_tags++;
            c->tag_open[g] = dupn(t->a, (size_t)(t->b - t->a));
            c->tag_close[g] = malloc((size_t)(t->nb - t->na) + 4);
            if (!c->tag_open[g] || !c->tag_close[g])
                goto done;
            memcpy(c->tag_close[g], "</", 2);
            memcpy(c->tag_close[g] + 2, t->na, (size_t)(t->nb - t->na));
            memcpy(c->tag_close[g] + 2 + (t->nb - t->na), ">", 2);
            c->tag_closed[g] = t->match >= 0;
            tag_of[i - h] = g + 1;
            stack[depth++] = g;
        } else if (t->kind == TOK_CLOSE && t->match >= h && tag_of[t->match - h]) {
            int g = tag_of[t->match - h] - 1;
            while (depth > 0 && stack[depth - 1] != g)
                depth--;
            depth -= depth > 0;
        } else { /* an object; a close of a head's tag left inside, a tag
                  * past CUE_MAX_DEPTH or CUE_MAX_TAGS and its close too */
            if (!(c->obj[c->n_obj] = dupn(t->a, (size_t)(t->b - t->a))))
                goto done;
            text[np] = NULL;
            id[np++] = c->n_obj++;
        }
    }
    rc = srv_seg_make(&c->seg, text, id, np);
done:
    free(text);
    free(id);
    free(stack);
    free(tag_of);
    free(buf);
    return rc;
}

/* A speaker's dash at the start of the text token t (from: where its
 * text starts): the bytes after "- " or "-", else from. */
static const char *after_dash(const char *from, const char *b)
{
    const char *p = from;
    while (p < b && is_sp((unsigned char)*p))
        p++;
    if (p < b && *p == '-')
        return p + 1 + (p + 1 < b && p[1] == ' ');
    return from;
}

int srv_cue_parse(srv_cue *c, const char *a, const char *b, int vtt, srv_cue_dash dash)
{
    memset(c, 0, sizeof *c);
    c->vtt = vtt;
    toks l = {0};
    int rc = -1;
    if (tokenize(a, b, vtt, &l) != 0)
        goto fail;
    int first = -1, last = -1, markup = 0;
    for (int i = 0; i < l.n; i++)
        if (!blank_tok(&l.t[i]) && l.t[i].kind == TOK_TEXT) {
            first = first < 0 ? i : first;
            last = i;
        }
    if (first < 0) {
        rc = 0;
        goto fail;
    }
    int h = head_end(&l, first, last), s = tail_start(&l, last, h);
    const char *from = h == first ? l.t[first].a : l.t[h].a;
    if (dash == SRV_CUE_DASH && h == first)
        from = after_dash(from, l.t[first].b);
    for (int i = h; i < s; i++)
        markup |= l.t[i].kind != TOK_TEXT;
    c->head = dupn(a, (size_t)(from - a));
    c->tail = s < l.n ? dupn(l.t[s].a, (size_t)(b - l.t[s].a)) : dupn("", 0);
    if (!c->head || !c->tail)
        goto fail;
    const char *mid_end = s < l.n ? l.t[s].a : b;
    if (!markup) {
        char *w = malloc((size_t)(mid_end - from) * 2 + 1);
        int sp = 1;
        if (!w)
            goto fail;
        size_t n = text_of(from, mid_end, vtt, w, &sp, &c->refs);
        while (n && w[n - 1] == ' ')
            n--;
        w[n] = 0;
        c->plain = w;
        c->plain_len = n;
        free(l.t);
        return 1;
    }
    rc = middle(c, &l, h, s, from, (size_t)(mid_end - a));
    if (rc != 1) {
        rc = rc == 0 ? 0 : -1; /* markup without a letter: kept whole */
        goto fail;
    }
    free(l.t);
    return 1;
fail:
    free(l.t);
    srv_cue_free(c);
    return rc;
}

void srv_cue_free(srv_cue *c)
{
    if (!c)
        return;
    free(c->head);
    free(c->tail);
    free(c->plain);
    srv_seg_free(&c->seg);
    for (int i = 0; i < c->n_tags; i++) {
        free(c->tag_open[i]);
        free(c->tag_close[i]);
    }
    free(c->tag_open);
    free(c->tag_close);
    free(c->tag_closed);
    for (int i = 0; i < c->n_obj; i++)
        free(c->obj[i]);
    free(c->obj);
    free(c->style_tags);
    free(c->style_at);
    int vtt = c->vtt;
    memset(c, 0, sizeof *c);
    c->vtt = vtt;
}

const char *srv_cue_text(const srv_cue *c, size_t *n)
{
    *n = c->plain ? c->plain_len : c->seg.len;
    return c->plain ? c->plain : c->seg.src;
}

int srv_cue_styled(const srv_cue *c)
{
    return !c->plain && c->seg.styled;
}

/* ---- the render -------------------------------------------------------------- */

/* The body being written: its bytes and, per byte, 1 when it is markup
 * (a line is never broken there, nor is it counted in a line's share). */
typedef struct body {
    char *s;
    unsigned char *m;
    size_t n, cap;
} body;

static int put(body *o, const char *s, size_t n, unsigned char markup)
{
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 64;
        while (o->n + n + 1 > cap)
            cap *= 2;
        char *p = realloc(o->s, cap);
        if (!p)
            return -1;
        o->s = p;
        unsigned char *q = realloc(o->m, cap);
        if (!q)
            return -1;
        o->m = q;
        o->cap = cap;
    }
    memcpy(o->s + o->n, s, n);
    memset(o->m + o->n, markup, n);
    o->n += n;
    return 0;
}

/* A translation's text t written back as the cue's format writes text:
 * WebVTT's references for '&' (unless it starts one), '<', '>' and the
 * characters the source wrote as references. */
static int put_text(body *o, const srv_cue *c, const char *t, size_t n)
{
    if (!c->vtt)
        return put(o, t, n, 0);
    for (size_t i = 0; i < n; i++) {
        const char *r = NULL;
        size_t k = 1;
        unsigned char u = (unsigned char)t[i];
        if (u == '<')
            r = "&lt;";
        else if (u == '>')
            r = "&gt;";
        else if (u == '&') {
            size_t j = i + 1;
            while (j < n && j < i + 32 && (t[j] == '#' || isalnum((unsigned char)t[j])))
                j++;
            r = j < n && t[j] == ';' && j > i + 1 ? NULL : "&amp;";
        } else if (u == 0xC2 && i + 1 < n && (unsigned char)t[i + 1] == 0xA0 && (c->refs & 1)) {
            r = "&nbsp;";
            k = 2;
        } else if (u == 0xE2 && i + 2 < n && (unsigned char)t[i + 1] == 0x80 &&
                   (((unsigned char)t[i + 2] == 0x8E && (c->refs & 2)) ||
                    ((unsigned char)t[i + 2] == 0x8F && (c->refs & 4)))) {
            r = (unsigned char)t[i + 2] == 0x8E ? "&lrm;" : "&rlm;";
            k = 3;
        }
        if (r ? put(o, r, strlen(r), 0) : put(o, t + i, 1, 0))
            return -1;
        i += k - 1;
    }
    return 0;
}

/* From the tags f[0..nf) open to g[0..ng) (outermost first): the tags
 * they do not share closed (innermost first; at the end only those the
 * source closed), the others opened. */
static int switch_tags(body *o, const srv_cue *c, const int *f, int nf, const int *g, int ng,
                       int at_end)
{
    int common = 0;
    while (common < nf && common < ng && f[common] == g[common])
        common++;
    for (int k = nf - 1; k >= common; k--)
        if ((!at_end || c->tag_closed[f[k]]) &&
            put(o, c->tag_close[f[k]], strlen(c->tag_close[f[k]]), 1) != 0)
            return -1;
    for (int k = common; k < ng; k++)
        if (put(o, c->tag_open[g[k]], strlen(c->tag_open[g[k]]), 1) != 0)
            return -1;
    return 0;
}

/* The first span from i on with a text other than spaces: its style's
 * tags in *g (NULL and 0 when none). */
static int next_tags(const srv_cue *c, int i, const int **g)
{
    for (; i < c->seg.n_out; i++) {
        const srv_span *sp = &c->seg.out[i];
        for (size_t k = sp->a; !sp->obj && k < sp->b; k++)
            if (!is_sp((unsigned char)c->seg.tgt[k])) {
                *g = c->style_tags + c->style_at[sp->style];
                return c->style_at[sp->style + 1] - c->style_at[sp->style];
            }
    }
    *g = NULL;
    return 0;
}

/* The open tags now (outermost first) as the body is written. */
typedef struct open_tags {
    const int *t;
    int n;
} open_tags;

/* Spaces [a, b) of the translation, inside the tags that the text before
 * and after them share (<b>Salt <i>pepper</i></b>: the space in <b>),
 * whatever style the mapping gave them; i: the span after them. */
static int put_spaces(body *o, const srv_cue *c, open_tags *cur, size_t a, size_t b, int i)
{
    if (a == b)
        return 0;
    const int *nx;
    int nn = next_tags(c, i, &nx), ng = 0;
    while (ng < cur->n && ng < nn && cur->t[ng] == nx[ng])
        ng++;
    if (switch_tags(o, c, cur->t, cur->n, cur->t, ng, 0) != 0)
        return -1;
    cur->n = ng;
    return put_text(o, c, c->seg.tgt + a, b - a);
}

/* The segment's translation with its tags and objects (seg.tgt, seg.out). */
static int styled_body(body *o, const srv_cue *c)
{
    open_tags cur = {NULL, 0};
    for (int i = 0; i < c->seg.n_out; i++) {
        const srv_span *sp = &c->seg.out[i];
        if (sp->obj) {
            const char *ob = c->obj[sp->style];
            if (put(o, ob, strlen(ob), 1) != 0)
                return -1;
            continue;
        }
        size_t a = sp->a, b = sp->b;
        while (a < b && is_sp((unsigned char)c->seg.tgt[a]))
            a++;
        while (b > a && is_sp((unsigned char)c->seg.tgt[b - 1]))
            b--;
        if (put_spaces(o, c, &cur, sp->a, a, i) != 0)
            return -1;
        if (a < b) {
            const int *g = c->style_tags + c->style_at[sp->style];
            int ng = c->style_at[sp->style + 1] - c->style_at[sp->style];
            if (switch_tags(o, c, cur.t, cur.n, g, ng, 0) != 0 ||
                put_text(o, c, c->seg.tgt + a, b - a) != 0)
                return -1;
            cur = (open_tags){g, ng};
        }
        if (put_spaces(o, c, &cur, b > a ? b : a, sp->b, i + 1) != 0)
            return -1;
    }
    return switch_tags(o, c, cur.t, cur.n, NULL, 0, 1);
}

/* The number of characters of the body's text in [a, b). */
static size_t chars(const body *o, size_t a, size_t b)
{
    size_t n = 0;
    for (size_t i = a; i < b; i++)
        n += !o->m[i] && ((unsigned char)o->s[i] & 0xC0) != 0x80;
    return n;
}

/* The body broken over k lines at its text's spaces nearest to an even
 * share of its characters (fewer when it has too few spaces), after head
 * and before tail. */
static char *broken(const body *o, const char *head, const char *tail, int k, const char *nl)
{
    size_t lh = strlen(head), lt = strlen(tail), ln = strlen(nl);
    char *out = malloc(lh + o->n + lt + (size_t)(k > 1 ? k : 1) * ln + 1), *w = out;
    if (!out)
        return NULL;
    memcpy(w, head, lh);
    w += lh;
    const size_t total = chars(o, 0, o->n);
    size_t from = 0, seen = 0;
    for (int line = 1; line < k; line++) {
        size_t target = total * (size_t)line / (size_t)k, best = 0, bestd = (size_t)-1, c = seen;
        for (size_t i = from; i < o->n; i++) {
            if (o->s[i] == ' ' && !o->m[i] && i > from) {
                size_t d = c > target ? c - target : target - c;
                if (d < bestd) {
                    bestd = d;
                    best = i;
                }
            }
            c += !o->m[i] && ((unsigned char)o->s[i] & 0xC0) != 0x80;
        }
        if (!best)
            break; /* no space left: fewer lines */
        memcpy(w, o->s + from, best - from);
        w += best - from;
        memcpy(w, nl, ln);
        w += ln;
        seen += chars(o, from, best + 1);
        from = best + 1;
    }
    memcpy(w, o->s + from, o->n - from);
    w += o->n - from;
    memcpy(w, tail, lt + 1);
    return out;
}

/* A span's bytes hold a word (not spaces alone). */
static int has_word(const char *t, const srv_span *sp)
{
    for (size_t k = sp->a; !sp->obj && k < sp->b; k++)
        if (!is_sp((unsigned char)t[k]))
            return 1;
    return 0;
}

/* The styles with tags that a word of the source had and none of the
 * translation has: the mapping counts those its source words had, not
 * those that lost every word to a neighbour inside one word
 * ("morning<rt>day</rt>"). */
static int lost_styles(const srv_cue *c)
{
    int lost = 0;
    for (int st = 1; st < c->n_styles; st++) {
        int in = 0, out = 0;
        for (int i = 0; !in && i < c->seg.n_in; i++)
            in = c->seg.in[i].style == st && has_word(c->seg.full, &c->seg.in[i]);
        for (int i = 0; in && !out && i < c->seg.n_out; i++)
            out = c->seg.out[i].style == st && has_word(c->seg.tgt, &c->seg.out[i]);
        lost += in && !out;
    }
    return lost;
}

char *srv_cue_render(srv_cue *c, const char *t, size_t n, const srv_align *al, int n_al,
                     int lines, const char *nl, int *lost)
{
    body o = {0};
    char *out = NULL;
    *lost = 0;
    if (c->plain) {
        if (put_text(&o, c, t, n) != 0)
            goto done;
    } else {
        char *tt = dupn(t, n);
        int rc = tt ? srv_seg_set(&c->seg, tt, al, n_al, lost) : -1;
        free(tt);
        if (rc != 0 || styled_body(&o, c) != 0)
            goto done;
        *lost = lost_styles(c);
    }
    if (put(&o, "", 0, 0) == 0)
        out = broken(&o, c->head ? c->head : "", c->tail ? c->tail : "", lines, nl);
done:
    free(o.s);
    free(o.m);
    return out;
}
