/*
 * styled.c - a document's paragraphs as styled pieces (styled.h): their
 * styles, their segments for the model, and a paragraph written again from
 * its translated segments through the format's callbacks.
 */
#include <stdlib.h>
#include <string.h>

#include "styled.h"

static int grow(void **p, int *cap, int n, size_t size, int first)
{
    if (n < *cap)
        return 0;
    int c = *cap ? *cap * 2 : first;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* ---- pieces ------------------------------------------------------------------ */

int srv_pieces_add(srv_pieces *p, int kind, void *node, const char *text, void *const *chain,
                   int depth)
{
    if (grow((void **)&p->pc, &p->cap, p->n, sizeof *p->pc, 8) != 0)
        return -1;
    srv_piece *pc = &p->pc[p->n];
    memset(pc, 0, sizeof *pc);
    if (text && !(pc->text = strdup(text)))
        return -1;
    pc->kind = kind;
    pc->node = node;
    pc->depth = depth;
    memcpy(pc->chain, chain, (size_t)depth * sizeof *chain);
    p->n++;
    return 0;
}

static int same_chain(const srv_pieces *p, int j, int k, void *ctx)
{
    const srv_piece *x = &p->pc[j], *y = &p->pc[k];
    (void)ctx;
    return x->depth == y->depth && !memcmp(x->chain, y->chain, (size_t)x->depth * sizeof *x->chain);
}

void srv_pieces_style(srv_pieces *p, srv_same_style same, void *ctx)
{
    if (!same)
        same = same_chain;
    for (int k = 0; k < p->n; k++) {
        p->pc[k].style = k;
        for (int j = 0; j < k && p->pc[k].kind == SRV_PIECE_TEXT; j++)
            if (p->pc[j].kind == SRV_PIECE_TEXT && same(p, j, k, ctx)) {
                p->pc[k].style = j;
                break;
            }
    }
}

void srv_pieces_free(srv_pieces *p)
{
    for (int k = 0; k < p->n; k++)
        free(p->pc[k].text);
    free(p->pc);
    *p = (srv_pieces){0};
}

/* ---- segments ------------------------------------------------------------------ */

/* Segment of pieces [p0, p1) of paragraph para: 1 kept (it has a letter), 0
 * not, -1 out of memory, -2 past d->max. */
static int add_segment(srv_styled *d, int para, const srv_pieces *p, int p0, int p1,
                       int plain_outside)
{
    const char **text = malloc((size_t)(p1 - p0 + 1) * sizeof *text);
    int *id = malloc((size_t)(p1 - p0 + 1) * sizeof *id);
    srv_styled_seg sg = {.para = para, .p0 = p0, .p1 = p1};
    int rc = text && id ? 0 : -1;
    for (int k = p0; rc == 0 && k < p1; k++) {
        text[k - p0] = p->pc[k].kind == SRV_PIECE_TEXT ? p->pc[k].text : NULL;
        id[k - p0] = p->pc[k].kind == SRV_PIECE_TEXT ? p->pc[k].style : k;
    }
    rc = rc == 0 ? srv_seg_make(&sg.s, text, id, p1 - p0) : -1;
    free(text);
    free(id);
    if (rc <= 0)
        return rc;
    /* the text outside the inline elements is the base (the words attention
     * does not place, the spaces between two elements) */
    for (int k = p0; plain_outside && k < p1 && sg.s.plain < 0; k++)
        if (p->pc[k].kind == SRV_PIECE_TEXT && p->pc[k].depth == 0)
            sg.s.plain = p->pc[k].style;
    if (d->max > 0 && d->n >= d->max) {
        srv_seg_free(&sg.s);
        return -2;
    }
    if (grow((void **)&d->sg, &d->cap, d->n, sizeof *d->sg, 32) != 0) {
        srv_seg_free(&sg.s);
        return -1;
    }
    d->sg[d->n++] = sg;
    return 1;
}

int srv_styled_cut(srv_styled *d, int para, const srv_pieces *p, int plain_outside)
{
    int kept = 0;
    for (int k = 0, s0 = 0; k <= p->n; k++)
        if (k == p->n || p->pc[k].kind == SRV_PIECE_SEP) {
            int rc = add_segment(d, para, p, s0, k, plain_outside);
            if (rc < 0)
                return rc;
            kept += rc;
            s0 = k + 1;
        }
    return kept;
}

const char *srv_styled_source(const srv_styled *d, int i)
{
    return d->sg[i].s.src;
}

int srv_styled_styled(const srv_styled *d, int i)
{
    return d->sg[i].s.styled;
}

int srv_styled_set(srv_styled *d, int i, const char *t, const srv_align *al, int n_al, int *lost)
{
    return srv_seg_set(&d->sg[i].s, t, al, n_al, lost);
}

/* The first segment of paragraph para or after it (the segments are in the
 * order of their paragraphs). */
static int first_seg(const srv_styled *d, int para)
{
    int lo = 0, hi = d->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (d->sg[mid].para < para)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int srv_styled_translated(const srv_styled *d, int para)
{
    for (int i = first_seg(d, para); i < d->n && d->sg[i].para == para; i++)
        if (d->sg[i].s.tgt)
            return 1;
    return 0;
}

void srv_styled_free(srv_styled *d)
{
    for (int i = 0; i < d->n; i++)
        srv_seg_free(&d->sg[i].s);
    free(d->sg);
    *d = (srv_styled){0};
}

/* ---- writing a paragraph again --------------------------------------------------- */

typedef struct writer {
    const srv_styled_out *out;
    void *src[SRV_STYLED_DEPTH]; /* the open chain: the elements copied... */
    void *dst[SRV_STYLED_DEPTH]; /* ...and their copies */
    int depth;
    void **closed; /* out->once: the elements whose copy was closed */
    int n_closed, cap_closed;
} writer;

static int was_closed(const writer *w, const void *e)
{
    for (int i = 0; i < w->n_closed; i++)
        if (w->closed[i] == e)
            return 1;
    return 0;
}

/* The writer's open chain cut to its first same elements; with out->once
 * the ones closed are remembered. 0 or -1. */
static int close_to(writer *w, int same)
{
    for (; w->out->once && w->depth > same; w->depth--) {
        if (grow((void **)&w->closed, &w->cap_closed, w->n_closed, sizeof *w->closed, 16) != 0)
            return -1;
        w->closed[w->n_closed++] = w->src[w->depth - 1];
    }
    w->depth = same;
    return 0;
}

/* Opens chain (depth deep) on the writer: the part in common with the open
 * one stays, the rest is copied; with out->once an element closed before
 * is left out. The element to write into, or NULL. */
static void *open_chain(writer *w, void *const *in_chain, int in_depth)
{
    void *chain[SRV_STYLED_DEPTH];
    int depth = 0;
    for (int d = 0; d < in_depth; d++)
        if (!w->out->once || !was_closed(w, in_chain[d]))
            chain[depth++] = in_chain[d];
    int same = 0;
    while (same < w->depth && same < depth && w->src[same] == chain[same])
        same++;
    if (close_to(w, same) != 0)
        return NULL;
    for (; w->depth < depth; w->depth++) {
        void *parent = w->depth ? w->dst[w->depth - 1] : w->out->root;
        void *c = w->out->open(w->out->ctx, parent, chain[w->depth]);
        if (!c)
            return NULL;
        w->src[w->depth] = chain[w->depth];
        w->dst[w->depth] = c;
    }
    return depth ? w->dst[depth - 1] : w->out->root;
}

/* Piece pc written inside its chain: its node moved (node), or text t (n
 * bytes). */
static int put(writer *w, const srv_piece *pc, int node, const char *t, size_t n)
{
    void *e = open_chain(w, pc->chain, pc->depth);
    if (!e)
        return -1;
    return node ? w->out->move(w->out->ctx, e, pc) : w->out->text(w->out->ctx, e, pc, t, n);
}

int srv_styled_write(const srv_styled *d, int para, const srv_pieces *p,
                     const srv_styled_out *out)
{
    writer w = {.out = out};
    int si = first_seg(d, para), rc = 0;
    for (int k = 0; k < p->n && rc == 0;) {
        while (si < d->n && d->sg[si].para == para && d->sg[si].p1 <= k)
            si++;
        const srv_styled_seg *g = si < d->n && d->sg[si].para == para && d->sg[si].p0 <= k &&
                                          d->sg[si].s.tgt
                                      ? &d->sg[si]
                                      : NULL;
        if (!g) { /* a piece of no translated segment: as it was */
            const srv_piece *pc = &p->pc[k++];
            rc = pc->kind == SRV_PIECE_TEXT ? put(&w, pc, 0, pc->text, strlen(pc->text))
                                            : put(&w, pc, 1, NULL, 0);
            continue;
        }
        /* the translation's pieces: a text's style and an object's id are
         * the indices of their pieces (srv_styled_cut's ids) */
        const srv_seg *s = &g->s;
        for (int j = 0; j < s->n_out && rc == 0; j++) {
            const srv_span *o = &s->out[j];
            rc = put(&w, &p->pc[o->style], o->obj, s->tgt + o->a, o->b - o->a);
        }
        k = g->p1;
    }
    free(w.closed);
    return rc;
}
