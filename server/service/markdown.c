/*
 * markdown.c - Markdown files for /translate_file (markdown.h), read with
 * cmark (CommonMark's reference library, Debian's libcmark-dev).
 *
 * Each paragraph and heading is a block: its inline nodes are pieces
 * (text under its chain of emphasis, strong emphasis and links; code
 * spans, images and inline HTML as objects kept verbatim; hard line breaks
 * as separators between segments). A translated block's inline content is
 * built again as a new paragraph of cmark nodes (the chains copied, the
 * objects moved), rendered by cmark's CommonMark writer, and put in place
 * of the block's own content in the source, found by cmark's source
 * positions; every other byte of the file stays as it was.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmark.h>

#include "markdown.h"

#define MAX_DEPTH 8

enum { P_TEXT, P_OBJECT, P_SEP };

typedef struct piece {
    int kind;
    char *text;          /* P_TEXT (owned) */
    cmark_node *node;    /* P_OBJECT, P_SEP: the node, moved when rendered */
    cmark_node *chain[MAX_DEPTH];
    int depth, style;
} piece;

typedef struct block {
    cmark_node *node;
    size_t a, b;         /* its inline content's bytes in the source */
    piece *pc;
    int n, cap, dirty;
} block;

typedef struct segment {
    int block, p0, p1; /* its pieces */
    srv_seg s;
} segment;

struct srv_md {
    char *data;          /* the source (owned) */
    size_t len;
    size_t front;        /* a YAML front matter's bytes, kept */
    cmark_node *doc;
    size_t *line;        /* each line's first byte (of data + front) */
    int n_lines;
    block *bl;
    int n_bl, cap_bl;
    segment *sg;
    int n_sg, cap_sg;
};

static int grow(void **p, int *cap, int n, size_t size)
{
    if (n < *cap)
        return 0;
    int c = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* ---- reading ---------------------------------------------------------------- */

static int is_container(cmark_node *n)
{
    cmark_node_type t = cmark_node_get_type(n);
    return t == CMARK_NODE_EMPH || t == CMARK_NODE_STRONG || t == CMARK_NODE_LINK;
}

static int add_piece(block *b, int kind, cmark_node *node, const char *text, cmark_node **chain,
                     int depth)
{
    if (grow((void **)&b->pc, &b->cap, b->n, sizeof *b->pc) != 0)
        return -1;
    piece *p = &b->pc[b->n];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->node = node;
    p->depth = depth;
    memcpy(p->chain, chain, (size_t)depth * sizeof *chain);
    if (text && !(p->text = strdup(text)))
        return -1;
    b->n++;
    return 0;
}

static int collect(block *b, cmark_node *n, cmark_node **chain, int depth)
{
    for (cmark_node *c = cmark_node_first_child(n); c; c = cmark_node_next(c)) {
        cmark_node_type t = cmark_node_get_type(c);
        int rc;
        if (t == CMARK_NODE_TEXT)
            rc = add_piece(b, P_TEXT, c, cmark_node_get_literal(c), chain, depth);
        else if (t == CMARK_NODE_SOFTBREAK)
            rc = add_piece(b, P_TEXT, c, " ", chain, depth);
        else if (t == CMARK_NODE_LINEBREAK)
            rc = add_piece(b, P_SEP, c, NULL, chain, depth);
        else if (is_container(c) && depth < MAX_DEPTH) {
            chain[depth] = c;
            rc = collect(b, c, chain, depth + 1);
        } else
            rc = add_piece(b, P_OBJECT, c, NULL, chain, depth);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* What makes a chain's formatting: each node's type, a link's URL and title. */
static int same_chain(const piece *x, const piece *y)
{
    if (x->depth != y->depth)
        return 0;
    for (int d = 0; d < x->depth; d++) {
        cmark_node *a = x->chain[d], *b = y->chain[d];
        if (cmark_node_get_type(a) != cmark_node_get_type(b))
            return 0;
        if (cmark_node_get_type(a) == CMARK_NODE_LINK &&
            (strcmp(cmark_node_get_url(a) ? cmark_node_get_url(a) : "",
                    cmark_node_get_url(b) ? cmark_node_get_url(b) : "") ||
             strcmp(cmark_node_get_title(a) ? cmark_node_get_title(a) : "",
                    cmark_node_get_title(b) ? cmark_node_get_title(b) : "")))
            return 0;
    }
    return 1;
}

static int add_segment(srv_md *m, int bi, int p0, int p1)
{
    const block *b = &m->bl[bi];
    const char **text = malloc((size_t)(p1 - p0 + 1) * sizeof *text);
    int *id = malloc((size_t)(p1 - p0 + 1) * sizeof *id);
    segment sg = {.block = bi, .p0 = p0, .p1 = p1};
    int rc = text && id ? 0 : -1;
    for (int k = p0; rc == 0 && k < p1; k++) {
        text[k - p0] = b->pc[k].kind == P_TEXT ? b->pc[k].text : NULL;
        id[k - p0] = b->pc[k].kind == P_TEXT ? b->pc[k].style : k;
    }
    rc = rc == 0 ? srv_seg_make(&sg.s, text, id, p1 - p0) : -1;
    free(text);
    free(id);
    if (rc <= 0)
        return rc;
    if (grow((void **)&m->sg, &m->cap_sg, m->n_sg, sizeof *m->sg) != 0) {
        srv_seg_free(&sg.s);
        return -1;
    }
    m->sg[m->n_sg++] = sg;
    return 0;
}

/* The byte of (line, column), both from 1, in data. */
static size_t at_pos(const srv_md *m, int line, int col)
{
    if (line < 1)
        line = 1;
    if (line > m->n_lines)
        return m->len;
    size_t p = m->line[line - 1] + (size_t)(col > 0 ? col - 1 : 0);
    return p < m->len ? p : m->len;
}

/* Block n's inline content in the source: [*a, *b). 0, or -1 when it is
 * not one to translate (a table's rows). */
static int content_range(const srv_md *m, cmark_node *n, size_t *a, size_t *b)
{
    int sl = cmark_node_get_start_line(n), el = cmark_node_get_end_line(n);
    int ec = cmark_node_get_end_column(n);
    const char *d = m->data;
    size_t x = at_pos(m, sl, cmark_node_get_start_column(n)), y;
    if (ec == 0 && el > sl) { /* cmark ends a setext heading at column 0 of the next line */
        el--;
        y = at_pos(m, el, 1);
        while (y < m->len && d[y] != '\n')
            y++;
    } else {
        y = at_pos(m, el, ec) + 1;
    }
    if (y > m->len)
        y = m->len;
    if (cmark_node_get_type(n) == CMARK_NODE_HEADING) {
        size_t eol = x;
        while (eol < m->len && d[eol] != '\n' && d[eol] != '\r')
            eol++;
        if (x < m->len && d[x] == '#') { /* ATX: "## Title ##" */
            while (x < eol && d[x] == '#')
                x++;
            y = eol;
            while (y > x && (d[y - 1] == ' ' || d[y - 1] == '\t'))
                y--;
            size_t h = y;
            while (h > x && d[h - 1] == '#')
                h--;
            if (h < y && (h == x || d[h - 1] == ' ' || d[h - 1] == '\t'))
                y = h;
        } else { /* setext: the text's lines, not the underline */
            size_t last = m->line[(el > sl ? el - 1 : sl) - 1]; /* line el - 1 */
            y = last;
            while (y < m->len && d[y] != '\n' && d[y] != '\r')
                y++;
        }
        while (x < y && (d[x] == ' ' || d[x] == '\t'))
            x++;
        while (y > x && (d[y - 1] == ' ' || d[y - 1] == '\t'))
            y--;
    } else if (x < m->len && d[x] == '|') {
        return -1; /* a GFM table cmark reads as a paragraph: left as it is */
    }
    while (y > x && (d[y - 1] == '\n' || d[y - 1] == '\r'))
        y--;
    *a = x;
    *b = y;
    return 0;
}

static int read_block(srv_md *m, cmark_node *n)
{
    size_t a, b;
    if (content_range(m, n, &a, &b) != 0 || a >= b)
        return 0;
    if (grow((void **)&m->bl, &m->cap_bl, m->n_bl, sizeof *m->bl) != 0)
        return -1;
    int bi = m->n_bl++;
    block *bl = &m->bl[bi];
    memset(bl, 0, sizeof *bl);
    bl->node = n;
    bl->a = a;
    bl->b = b;
    cmark_node *chain[MAX_DEPTH];
    if (collect(bl, n, chain, 0) != 0)
        return -1;
    for (int k = 0; k < bl->n; k++) {
        bl->pc[k].style = k;
        for (int j = 0; j < k && bl->pc[k].kind == P_TEXT; j++)
            if (bl->pc[j].kind == P_TEXT && same_chain(&bl->pc[j], &bl->pc[k])) {
                bl->pc[k].style = j;
                break;
            }
    }
    for (int k = 0, s0 = 0; k <= bl->n; k++)
        if (k == bl->n || bl->pc[k].kind == P_SEP) {
            if (add_segment(m, bi, s0, k) != 0)
                return -1;
            s0 = k + 1;
        }
    return 0;
}

int srv_md_parse(const char *data, size_t len, srv_md **out, char *err, size_t errlen)
{
    *out = NULL;
    srv_md *m = calloc(1, sizeof *m);
    if (!m || !(m->data = malloc(len + 1))) {
        free(m);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(m->data, data, len);
    m->data[len] = 0;
    m->len = len;
    /* YAML front matter: "---" ... "---" (or "...") first, kept */
    if (len >= 4 && !strncmp(data, "---", 3) && (data[3] == '\n' || data[3] == '\r')) {
        for (const char *p = strchr(data + 3, '\n'); p && p + 1 < data + len; p = strchr(p + 1, '\n'))
            if ((!strncmp(p + 1, "---", 3) || !strncmp(p + 1, "...", 3)) &&
                (p + 4 == data + len || p[4] == '\n' || p[4] == '\r')) {
                const char *e = strchr(p + 1, '\n');
                m->front = e ? (size_t)(e + 1 - data) : len;
                break;
            }
    }
    int n_lines = 1;
    for (size_t i = m->front; i < len; i++)
        n_lines += data[i] == '\n';
    m->line = malloc((size_t)n_lines * sizeof *m->line);
    m->doc = m->line ? cmark_parse_document(data + m->front, len - m->front, CMARK_OPT_SOURCEPOS)
                     : NULL;
    if (!m->doc) {
        snprintf(err, errlen, "out of memory");
        srv_md_free(m);
        return -1;
    }
    m->line[0] = m->front;
    for (size_t i = m->front; i < len; i++)
        if (data[i] == '\n')
            m->line[++m->n_lines] = i + 1;
    m->n_lines++;
    cmark_iter *it = cmark_iter_new(m->doc);
    int rc = 0;
    for (cmark_event_type ev; rc == 0 && (ev = cmark_iter_next(it)) != CMARK_EVENT_DONE;) {
        cmark_node *n = cmark_iter_get_node(it);
        cmark_node_type t = cmark_node_get_type(n);
        if (ev == CMARK_EVENT_ENTER && (t == CMARK_NODE_PARAGRAPH || t == CMARK_NODE_HEADING))
            rc = read_block(m, n);
    }
    cmark_iter_free(it);
    if (rc != 0) {
        snprintf(err, errlen, "out of memory");
        srv_md_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

int srv_md_n(const srv_md *m)
{
    return m->n_sg;
}

const char *srv_md_source(const srv_md *m, int i)
{
    return m->sg[i].s.src;
}

int srv_md_styled(const srv_md *m, int i)
{
    return m->sg[i].s.styled;
}

int srv_md_set(srv_md *m, int i, const char *t, const srv_align *al, int n_al, int *lost)
{
    if (srv_seg_set(&m->sg[i].s, t, al, n_al, lost) != 0)
        return -1;
    m->bl[m->sg[i].block].dirty = 1;
    return 0;
}

/* ---- writing ---------------------------------------------------------------------- */

typedef struct writer {
    cmark_node *para;
    cmark_node *src[MAX_DEPTH], *dst[MAX_DEPTH];
    int depth;
} writer;

static cmark_node *open_chain(writer *w, cmark_node *const *chain, int depth)
{
    int same = 0;
    while (same < w->depth && same < depth && w->src[same] == chain[same])
        same++;
    w->depth = same;
    for (; w->depth < depth; w->depth++) {
        cmark_node *o = chain[w->depth], *c = cmark_node_new(cmark_node_get_type(o));
        if (!c)
            return NULL;
        if (cmark_node_get_type(o) == CMARK_NODE_LINK) {
            cmark_node_set_url(c, cmark_node_get_url(o));
            cmark_node_set_title(c, cmark_node_get_title(o));
        }
        cmark_node_append_child(w->depth ? w->dst[w->depth - 1] : w->para, c);
        w->src[w->depth] = o;
        w->dst[w->depth] = c;
    }
    return depth ? w->dst[depth - 1] : w->para;
}

static int put_text(writer *w, const piece *pc, const char *t, size_t n)
{
    cmark_node *e = open_chain(w, pc->chain, pc->depth);
    cmark_node *tn = e ? cmark_node_new(CMARK_NODE_TEXT) : NULL;
    char *s = tn ? strndup(t, n) : NULL;
    int ok = s && cmark_node_set_literal(tn, s) && cmark_node_append_child(e, tn);
    free(s);
    if (!ok && tn)
        cmark_node_free(tn);
    return ok ? 0 : -1;
}

static int put_node(writer *w, const piece *pc)
{
    cmark_node *e = open_chain(w, pc->chain, pc->depth);
    if (!e)
        return -1;
    cmark_node_unlink(pc->node);
    return cmark_node_append_child(e, pc->node) ? 0 : -1;
}

/* Block b's content again (malloc'd), its translated segments'. */
static char *write_block(srv_md *m, const block *b, const segment *sg, int n_sg)
{
    writer w = {.para = cmark_node_new(CMARK_NODE_PARAGRAPH)};
    int rc = w.para ? 0 : -1, si = 0;
    for (int k = 0; k < b->n && rc == 0;) {
        while (si < n_sg && sg[si].p1 <= k)
            si++;
        const segment *g = si < n_sg && sg[si].p0 <= k && sg[si].s.tgt ? &sg[si] : NULL;
        const srv_seg *s = g ? &g->s : NULL;
        if (!s) {
            const piece *pc = &b->pc[k++];
            rc = pc->kind == P_TEXT ? put_text(&w, pc, pc->text, strlen(pc->text))
                                    : put_node(&w, pc);
            continue;
        }
        for (int j = 0; j < s->n_out && rc == 0; j++) {
            const srv_span *o = &s->out[j];
            const piece *pc = &b->pc[o->style];
            rc = o->obj ? put_node(&w, pc) : put_text(&w, pc, s->tgt + o->a, o->b - o->a);
        }
        k = g->p1;
    }
    char *out = rc == 0 ? cmark_render_commonmark(w.para, CMARK_OPT_DEFAULT, 0) : NULL;
    if (w.para)
        cmark_node_free(w.para);
    size_t n = out ? strlen(out) : 0;
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = 0;
    (void)m;
    return out;
}

char *srv_md_render(srv_md *m, size_t *len)
{
    size_t cap = m->len + 64, n = 0, at = 0;
    char *out = malloc(cap);
    for (int i = 0, s0 = 0; out && i <= m->n_bl; i++) {
        int s1 = s0;
        while (i < m->n_bl && s1 < m->n_sg && m->sg[s1].block == i)
            s1++;
        char *t = NULL;
        if (i < m->n_bl && m->bl[i].dirty && !(t = write_block(m, &m->bl[i], m->sg + s0, s1 - s0))) {
            free(out);
            return NULL;
        }
        size_t keep_to = i < m->n_bl ? (t ? m->bl[i].a : at) : m->len;
        size_t tn = t ? strlen(t) : 0;
        if (n + (keep_to - at) + tn + 1 > cap) {
            cap = 2 * (n + (keep_to - at) + tn + 1);
            char *p = realloc(out, cap);
            if (!p) {
                free(t);
                free(out);
                return NULL;
            }
            out = p;
        }
        memcpy(out + n, m->data + at, keep_to - at);
        n += keep_to - at;
        at = keep_to;
        if (t) {
            memcpy(out + n, t, tn);
            n += tn;
            at = m->bl[i].b;
        }
        free(t);
        s0 = s1;
    }
    if (out) {
        out[n] = 0;
        *len = n;
    }
    return out;
}

void srv_md_free(srv_md *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_sg; i++)
        srv_seg_free(&m->sg[i].s);
    free(m->sg);
    for (int i = 0; i < m->n_bl; i++) {
        for (int k = 0; k < m->bl[i].n; k++)
            free(m->bl[i].pc[k].text);
        free(m->bl[i].pc);
    }
    free(m->bl);
    if (m->doc)
        cmark_node_free(m->doc);
    free(m->line);
    free(m->data);
    free(m);
}
