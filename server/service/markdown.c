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
    int block, p0, p1;
    char *full, *src;
    size_t lead, len;
    srv_span *in;
    int n_in, styled;
    char *tgt;
    srv_span *out;
    int n_out;
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

static int has_letter(const char *t)
{
    for (; *t; t++)
        if (((*t | 32) >= 'a' && (*t | 32) <= 'z') || (unsigned char)*t >= 0xc0)
            return 1;
    return 0;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int add_segment(srv_md *m, int bi, int p0, int p1)
{
    const block *b = &m->bl[bi];
    segment s = {.block = bi, .p0 = p0, .p1 = p1};
    size_t len = 0;
    int first_obj = -1, last_text = -1, styles = 0, first_style = -1;
    for (int k = p0; k < p1; k++)
        if (b->pc[k].kind == P_TEXT) {
            len += strlen(b->pc[k].text);
            first_style = first_style < 0 ? b->pc[k].style : first_style;
            styles |= b->pc[k].style != first_style;
            last_text = k;
        } else if (first_obj < 0 && last_text >= 0) {
            first_obj = k;
        }
    s.full = malloc(len + 1);
    s.in = malloc((size_t)(p1 - p0 + 1) * sizeof *s.in);
    if (!s.full || !s.in)
        goto oom;
    size_t at = 0;
    for (int k = p0; k < p1; k++) {
        const piece *pc = &b->pc[k];
        size_t n = pc->kind == P_TEXT ? strlen(pc->text) : 0;
        memcpy(s.full + at, n ? pc->text : "", n);
        s.in[s.n_in++] = (srv_span){at, at + n, pc->kind == P_TEXT ? pc->style : k,
                                    pc->kind != P_TEXT};
        at += n;
    }
    s.full[len] = 0;
    if (!has_letter(s.full)) {
        free(s.full);
        free(s.in);
        return 0;
    }
    size_t a = 0, e = len;
    while (a < e && is_ws(s.full[a]))
        a++;
    while (e > a && is_ws(s.full[e - 1]))
        e--;
    s.lead = a;
    s.len = e - a;
    if (!(s.src = strndup(s.full + a, s.len)))
        goto oom;
    s.styled = styles || (first_obj >= 0 && first_obj < last_text);
    if (grow((void **)&m->sg, &m->cap_sg, m->n_sg, sizeof *m->sg) != 0)
        goto oom;
    m->sg[m->n_sg++] = s;
    return 0;
oom:
    free(s.full);
    free(s.in);
    free(s.src);
    return -1;
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

/* Whether t is UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF). */
static int valid_utf8(const unsigned char *t, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = t[i];
        size_t k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2
                             : (c & 0xf8) == 0xf0 ? 3 : 9;
        if (k == 9 || i + k >= n + (k == 0))
            return k == 0;
        unsigned cp = k ? c & (0x3f >> k) : c;
        for (size_t j = 1; j <= k; j++) {
            if ((t[i + j] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (t[i + j] & 0x3f);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) ||
            (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        i += k + 1;
    }
    return 1;
}

int srv_md_parse(const char *data, size_t len, srv_md **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!valid_utf8((const unsigned char *)data, len) || memchr(data, 0, len)) {
        snprintf(err, errlen, "not UTF-8 text");
        return -2;
    }
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
    return m->sg[i].src;
}

int srv_md_styled(const srv_md *m, int i)
{
    return m->sg[i].styled;
}

int srv_md_set(srv_md *m, int i, const char *t, const srv_align *al, int n_al, int *lost)
{
    segment *s = &m->sg[i];
    size_t n = strlen(t), trail = strlen(s->full) - s->lead - s->len;
    char *tgt = malloc(s->lead + n + trail + 1);
    srv_align *sh = n_al ? calloc((size_t)n_al, sizeof *sh) : NULL;
    int rc = tgt && (!n_al || sh) ? 0 : -1;
    if (rc == 0) {
        memcpy(tgt, s->full, s->lead);
        memcpy(tgt + s->lead, t, n);
        memcpy(tgt + s->lead + n, s->full + s->lead + s->len, trail + 1);
    }
    for (int b = 0; rc == 0 && b < n_al; b++) { /* offsets from full's and tgt's start */
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
    if (rc == 0)
        rc = srv_spans_map(s->full, strlen(s->full), s->in, s->n_in, tgt, strlen(tgt), sh, n_al,
                           &o, &no, &text, lost);
    for (int b = 0; sh && b < n_al; b++) {
        free(sh[b].t_off);
        free(sh[b].s_off);
    }
    free(sh);
    free(tgt);
    if (rc != 0)
        return -1;
    tgt = text; /* the translation with the objects' spaces */
    free(s->tgt);
    free(s->out);
    s->tgt = tgt;
    s->out = o;
    s->n_out = no;
    m->bl[s->block].dirty = 1;
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
        const segment *s = si < n_sg && sg[si].p0 <= k && sg[si].tgt ? &sg[si] : NULL;
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
        k = s->p1;
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
    for (int i = 0; i < m->n_sg; i++) {
        free(m->sg[i].full);
        free(m->sg[i].src);
        free(m->sg[i].in);
        free(m->sg[i].tgt);
        free(m->sg[i].out);
    }
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
