/*
 * markdown.c - Markdown files for /translate_file (markdown.h), read with
 * cmark (CommonMark's reference library, Debian's libcmark-dev).
 *
 * Each paragraph and heading is a block: its inline nodes are pieces
 * (styled.h: text under its chain of emphasis, strong emphasis and links;
 * code spans, images and inline HTML as objects kept verbatim; hard line
 * breaks as separators between segments). A translated block's inline
 * content is built again by styled.c as a new paragraph of cmark nodes
 * (the chains copied here, the objects moved), rendered by cmark's
 * CommonMark writer, and put in place of the block's own content in the
 * source, found by cmark's source positions; every other byte of the file
 * stays as it was.
 *
 * Source positions are cmark's (0.30, Debian 12's libcmark): a line ends
 * at CR, LF or CRLF; a UTF-8 BOM that starts the text is skipped before
 * line 1's column 1; a NUL byte is read as U+FFFD, so it takes 3 columns;
 * a column counts bytes. The line table here is made by the same rules
 * over the same bytes (line_table, byte_at), so a position means the byte
 * cmark read there. The file is not normalised: the bytes that are not
 * translated, their line endings and NULs among them, come back as they
 * were, and a translated block's own line breaks (a hard break) are
 * written with the line ending the block's first line had (a CRLF file
 * stays CRLF). Every block's range is checked to lie inside the file,
 * after the one before it, before anything is copied: a position that
 * does not map is a refused file (-2), never a copy of a wrong length.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmark.h>

#include "markdown.h"
#include "styled.h"

typedef struct block {
    cmark_node *node;
    size_t a, b;         /* its inline content's bytes in the source */
    srv_pieces pcs;      /* its pieces (styled.h): nodes are cmark's */
} block;

struct srv_md {
    char *data;          /* the source (owned) */
    size_t len;
    size_t front;        /* a YAML front matter's bytes, kept */
    cmark_node *doc;
    size_t *ls, *le;     /* cmark's line k (from 1): bytes [ls[k-1], le[k-1]) of data */
    int n_lines;
    block *bl;
    int n_bl, cap_bl;
    srv_styled st;       /* the blocks' segments (styled.h) */
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

/* The pieces of n's children (n: the block, or an element of the chain,
 * depth deep): text, soft breaks as spaces, hard breaks as separators,
 * emphasis, strong emphasis and links as chains, the rest objects. */
static int collect(srv_pieces *p, cmark_node *n, void **chain, int depth)
{
    for (cmark_node *c = cmark_node_first_child(n); c; c = cmark_node_next(c)) {
        cmark_node_type t = cmark_node_get_type(c);
        int rc;
        if (t == CMARK_NODE_TEXT)
            rc = srv_pieces_add(p, SRV_PIECE_TEXT, c, cmark_node_get_literal(c), chain, depth);
        else if (t == CMARK_NODE_SOFTBREAK)
            rc = srv_pieces_add(p, SRV_PIECE_TEXT, c, " ", chain, depth);
        else if (t == CMARK_NODE_LINEBREAK)
            rc = srv_pieces_add(p, SRV_PIECE_SEP, c, NULL, chain, depth);
        else if (is_container(c) && depth < SRV_STYLED_DEPTH) {
            chain[depth] = c;
            rc = collect(p, c, chain, depth + 1);
        } else
            rc = srv_pieces_add(p, SRV_PIECE_OBJECT, c, NULL, chain, depth);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* What makes a chain's formatting: each node's type, a link's URL and title
 * (srv_same_style). */
static int same_chain(const srv_pieces *p, int j, int k, void *ctx)
{
    const srv_piece *x = &p->pc[j], *y = &p->pc[k];
    (void)ctx;
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

/* cmark's lines of data[from, to): a line ends at CR, LF or CRLF (a NUL
 * does not end one), a BOM at from is skipped (S_parser_feed, blocks.c),
 * and no empty line follows the last line ending. 0, or -1 when out of
 * memory. */
static int line_table(srv_md *m, size_t from, size_t to)
{
    const char *d = m->data;
    int n = 1;
    for (size_t i = from; i < to; i++)
        n += d[i] == '\n' || (d[i] == '\r' && (i + 1 >= to || d[i + 1] != '\n'));
    m->ls = malloc((size_t)n * sizeof *m->ls);
    m->le = malloc((size_t)n * sizeof *m->le);
    if (!m->ls || !m->le)
        return -1;
    size_t p = from;
    if (to - p >= 3 && !memcmp(d + p, "\xef\xbb\xbf", 3))
        p += 3;
    while (p < to && m->n_lines < n) {
        size_t q = p;
        while (q < to && d[q] != '\n' && d[q] != '\r')
            q++;
        m->ls[m->n_lines] = p;
        m->le[m->n_lines++] = q;
        if (q < to && d[q] == '\r')
            q++;
        if (q < to && d[q] == '\n')
            q++;
        p = q;
    }
    return 0;
}

/* The byte cmark read at (line, col), both from 1: a NUL is 3 columns (cmark
 * reads U+FFFD); past the line's text, its end. (size_t)-1 when there is no
 * such line. */
static size_t byte_at(const srv_md *m, int line, int col)
{
    if (line < 1 || line > m->n_lines)
        return (size_t)-1;
    size_t p = m->ls[line - 1], e = m->le[line - 1];
    for (long c = 1; p < e; p++) {
        long w = m->data[p] ? 1 : 3;
        if (col < c + w)
            return p;
        c += w;
    }
    return e;
}

/* The byte after the one cmark read at (line, col): a range's end. */
static size_t byte_after(const srv_md *m, int line, int col)
{
    if (col < 1)
        return line >= 1 && line <= m->n_lines ? m->ls[line - 1] : (size_t)-1;
    size_t p = byte_at(m, line, col);
    return p == (size_t)-1 || p >= m->le[line - 1] ? p : p + 1;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Block n's inline content in the source: [*a, *b) (empty when it holds
 * none). 1 when it is not one to translate (a table's rows), -1 when its
 * position does not map to the file. */
static int content_range(const srv_md *m, cmark_node *n, size_t *a, size_t *b)
{
    int sl = cmark_node_get_start_line(n), el = cmark_node_get_end_line(n);
    const char *d = m->data;
    size_t x = byte_at(m, sl, cmark_node_get_start_column(n)), y;
    if (x == (size_t)-1 || el < sl)
        return -1;
    if (cmark_node_get_type(n) != CMARK_NODE_HEADING) {
        y = byte_after(m, el, cmark_node_get_end_column(n));
        if (y == (size_t)-1)
            return -1;
        if (y > x && d[x] == '|')
            return 1; /* a GFM table cmark reads as a paragraph: left as it is */
    } else if (el == sl) { /* ATX: "## Title ##", on one line */
        y = m->le[sl - 1];
        if (x >= y || d[x] != '#')
            return -1;
        while (x < y && d[x] == '#')
            x++;
        while (y > x && is_blank(d[y - 1]))
            y--;
        size_t h = y;
        while (h > x && d[h - 1] == '#')
            h--;
        if (h < y && (h == x || is_blank(d[h - 1])))
            y = h;
    } else {
        /* setext: the text's lines, not the underline. cmark ends the
         * heading on the line after its underline (the line that closed
         * it), or on the underline itself at the end of the input, which
         * the blank line srv_md_parse adds after the file rules out. */
        if (el - 2 < sl)
            return -1;
        y = m->le[el - 3]; /* line el - 2 */
    }
    if (y < x)
        return -1;
    while (x < y && is_blank(d[x]))
        x++;
    while (y > x && (is_blank(d[y - 1]) || d[y - 1] == '\n' || d[y - 1] == '\r'))
        y--;
    if (y > m->len)
        return -1;
    *a = x;
    *b = y;
    return 0;
}

/* 0, -1 when out of memory, -2 when n's position does not map to the file
 * after the block before it (err). */
static int read_block(srv_md *m, cmark_node *n, char *err, size_t errlen)
{
    size_t a = 0, b = 0, prev = m->n_bl ? m->bl[m->n_bl - 1].b : m->front;
    int rc = content_range(m, n, &a, &b);
    if (rc < 0 || (rc == 0 && a < b && a < prev)) {
        snprintf(err, errlen, "the %s at line %d: its position (cmark's) is outside the file",
                 cmark_node_get_type(n) == CMARK_NODE_HEADING ? "heading" : "paragraph",
                 cmark_node_get_start_line(n));
        return -2;
    }
    if (rc != 0 || a >= b)
        return 0;
    if (grow((void **)&m->bl, &m->cap_bl, m->n_bl, sizeof *m->bl) != 0)
        return -1;
    int bi = m->n_bl++;
    block *bl = &m->bl[bi];
    memset(bl, 0, sizeof *bl);
    bl->node = n;
    bl->a = a;
    bl->b = b;
    void *chain[SRV_STYLED_DEPTH];
    if (collect(&bl->pcs, n, chain, 0) != 0)
        return -1;
    srv_pieces_style(&bl->pcs, same_chain, NULL);
    /* a block without a letter stays in the list: the next one's place is
     * checked after its range */
    return srv_styled_cut(&m->st, bi, &bl->pcs, 0) < 0 ? -1 : 0;
}

/* The end of the line that starts at p in d[0, len), its line ending
 * included (CR, LF or CRLF). */
static size_t next_line(const char *d, size_t len, size_t p)
{
    while (p < len && d[p] != '\n' && d[p] != '\r')
        p++;
    if (p < len && d[p] == '\r')
        p++;
    if (p < len && d[p] == '\n')
        p++;
    return p;
}

/* A YAML front matter's bytes: "---" alone on the first line, up to a line
 * "---" or "..." (its line ending included), lines as cmark ends them; 0
 * when there is none or it is not closed. */
static size_t front_matter(const char *d, size_t len)
{
    if (len < 4 || memcmp(d, "---", 3) != 0 || (d[3] != '\n' && d[3] != '\r'))
        return 0;
    for (size_t p = next_line(d, len, 0); p < len;) {
        size_t e = next_line(d, len, p);
        size_t t = e; /* the line without its ending */
        while (t > p && (d[t - 1] == '\n' || d[t - 1] == '\r'))
            t--;
        if (t - p == 3 && (!memcmp(d + p, "---", 3) || !memcmp(d + p, "...", 3)))
            return e; /* its closing line, line ending included */
        p = e;
    }
    return 0;
}

int srv_md_parse(const char *data, size_t len, srv_md **out, char *err, size_t errlen)
{
    *out = NULL;
    /* the file, then a blank line for cmark (content_range) and a NUL */
    srv_md *m = len < (size_t)-4 ? calloc(1, sizeof *m) : NULL;
    if (!m || !(m->data = malloc(len + 3))) {
        free(m);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(m->data, data, len);
    memcpy(m->data + len, "\n\n", 3);
    m->len = len;
    m->front = front_matter(m->data, len);
    m->doc = line_table(m, m->front, len + 2) == 0
                 ? cmark_parse_document(m->data + m->front, len + 2 - m->front, CMARK_OPT_SOURCEPOS)
                 : NULL;
    if (!m->doc) {
        snprintf(err, errlen, "out of memory");
        srv_md_free(m);
        return -1;
    }
    cmark_iter *it = cmark_iter_new(m->doc);
    int rc = 0;
    for (cmark_event_type ev; rc == 0 && (ev = cmark_iter_next(it)) != CMARK_EVENT_DONE;) {
        cmark_node *n = cmark_iter_get_node(it);
        cmark_node_type t = cmark_node_get_type(n);
        if (ev == CMARK_EVENT_ENTER && (t == CMARK_NODE_PARAGRAPH || t == CMARK_NODE_HEADING))
            rc = read_block(m, n, err, errlen);
    }
    cmark_iter_free(it);
    if (rc != 0) {
        if (rc == -1)
            snprintf(err, errlen, "out of memory");
        srv_md_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int srv_md_n(const srv_md *m)
{
    return m->st.n;
}

const char *srv_md_source(const srv_md *m, int i)
{
    return srv_styled_source(&m->st, i);
}

int srv_md_styled(const srv_md *m, int i)
{
    return srv_styled_styled(&m->st, i);
}

int srv_md_set(srv_md *m, int i, const char *t, const srv_align *al, int n_al, int *lost)
{
    return srv_styled_set(&m->st, i, t, al, n_al, lost);
}

/* ---- writing ---------------------------------------------------------------------- */

/* A copy of emphasis, strong emphasis or link o (its URL and title) as
 * parent's last child (srv_styled_out's open). */
static void *open_elem(void *ctx, void *parent, void *e)
{
    cmark_node *o = e, *c = cmark_node_new(cmark_node_get_type(o));
    (void)ctx;
    if (!c)
        return NULL;
    if (cmark_node_get_type(o) == CMARK_NODE_LINK) {
        cmark_node_set_url(c, cmark_node_get_url(o));
        cmark_node_set_title(c, cmark_node_get_title(o));
    }
    if (!cmark_node_append_child(parent, c)) {
        cmark_node_free(c);
        return NULL;
    }
    return c;
}

static int put_text(void *ctx, void *parent, const srv_piece *pc, const char *t, size_t n)
{
    cmark_node *tn = cmark_node_new(CMARK_NODE_TEXT);
    char *s = tn ? strndup(t, n) : NULL;
    int ok = s && cmark_node_set_literal(tn, s) && cmark_node_append_child(parent, tn);
    (void)ctx;
    (void)pc;
    free(s);
    if (!ok && tn)
        cmark_node_free(tn);
    return ok ? 0 : -1;
}

static int put_node(void *ctx, void *parent, const srv_piece *pc)
{
    (void)ctx;
    cmark_node_unlink(pc->node);
    return cmark_node_append_child(parent, pc->node) ? 0 : -1;
}

/* Block bi's content again (malloc'd), its translated segments'. */
static char *write_block(srv_md *m, int bi)
{
    cmark_node *para = cmark_node_new(CMARK_NODE_PARAGRAPH);
    srv_styled_out w = {
        .root = para, .open = open_elem, .text = put_text, .move = put_node};
    int rc = para ? srv_styled_write(&m->st, bi, &m->bl[bi].pcs, &w) : -1;
    char *out = rc == 0 ? cmark_render_commonmark(para, CMARK_OPT_DEFAULT, 0) : NULL;
    if (para)
        cmark_node_free(para);
    size_t n = out ? strlen(out) : 0;
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = 0;
    return out;
}

/* The line ending of the line block b starts on ("\n" at the end of the
 * file). */
static const char *block_eol(const srv_md *m, const block *b)
{
    size_t e = b->a;
    while (e < m->len && m->data[e] != '\n' && m->data[e] != '\r')
        e++;
    if (e >= m->len || m->data[e] == '\n')
        return "\n";
    return e + 1 < m->len && m->data[e + 1] == '\n' ? "\r\n" : "\r";
}

/* Appends n bytes of s to out (*n of *cap), "\n" written as eol. */
static int put(char **out, size_t *n, size_t *cap, const char *s, size_t len, const char *eol)
{
    size_t extra = 0, el = strlen(eol);
    for (size_t i = 0; el > 1 && i < len; i++)
        extra += s[i] == '\n';
    if (len + extra * (el - 1) + 1 > *cap - *n) {
        size_t c = 2 * (*n + len + extra * (el - 1) + 1);
        char *p = realloc(*out, c);
        if (!p)
            return -1;
        *out = p;
        *cap = c;
    }
    if (!extra || el == 1) {
        memcpy(*out + *n, s, len);
        for (size_t i = 0; el == 1 && eol[0] != '\n' && i < len; i++)
            if ((*out)[*n + i] == '\n')
                (*out)[*n + i] = eol[0];
        *n += len;
        return 0;
    }
    for (size_t i = 0; i < len; i++)
        if (s[i] == '\n') {
            memcpy(*out + *n, eol, el);
            *n += el;
        } else {
            (*out)[(*n)++] = s[i];
        }
    return 0;
}

char *srv_md_render(srv_md *m, size_t *len, char *err, size_t errlen)
{
    size_t cap = m->len + 64, n = 0, at = 0;
    char *out = malloc(cap);
    int rc = out ? 0 : -1;
    for (int i = 0; rc == 0 && i <= m->n_bl; i++) {
        const block *b = i < m->n_bl ? &m->bl[i] : NULL;
        if (b && !srv_styled_translated(&m->st, i))
            continue;
        /* the bytes kept before it: checked (srv_md_parse made them so) */
        size_t to = b ? b->a : m->len;
        if (to < at || to > m->len || (b && (b->b < b->a || b->b > m->len))) {
            snprintf(err, errlen, "a block's place in the file is out of order (%zu..%zu after %zu)",
                     b ? b->a : to, b ? b->b : to, at);
            free(out);
            return NULL;
        }
        rc = put(&out, &n, &cap, m->data + at, to - at, "\n");
        at = to;
        char *t = rc == 0 && b ? write_block(m, i) : NULL;
        if (b) {
            rc = t ? put(&out, &n, &cap, t, strlen(t), block_eol(m, b)) : -1;
            at = b->b;
        }
        free(t);
    }
    if (rc != 0) {
        snprintf(err, errlen, "out of memory");
        free(out);
        return NULL;
    }
    out[n] = 0;
    *len = n;
    return out;
}

void srv_md_free(srv_md *m)
{
    if (!m)
        return;
    srv_styled_free(&m->st);
    for (int i = 0; i < m->n_bl; i++)
        srv_pieces_free(&m->bl[i].pcs);
    free(m->bl);
    if (m->doc)
        cmark_node_free(m->doc);
    free(m->ls);
    free(m->le);
    free(m->data);
    free(m);
}
