/*
 * office.c - documents in zip archives (office.h).
 *
 * A paragraph is read into pieces (styled.h): text (with the chain of
 * elements it sits in below the paragraph), objects (nodes kept whole) and
 * separators (nodes that end a segment). Rendering a translated
 * paragraph takes its children out (but its own properties), then has
 * styled.c write the pieces again: each text piece of the translation
 * inside copies of its style's chain (an element copied here without its
 * children but its properties, shared by consecutive pieces of one
 * chain), each object and separator moved back inside copies of its own
 * chain; the old children are freed after.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <zip.h>

#include "html.h"
#include "markdown.h"
#include "office.h"
#include "styled.h"
#include "xmllimits.h"

#define NS_W "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
#define NS_A "http://schemas.openxmlformats.org/drawingml/2006/main"
#define NS_TEXT "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
#define NS_XHTML "http://www.w3.org/1999/xhtml"

typedef struct fmt {
    const char *ext, *mime;
    const char *ns;
    const char *const *para, *const *inl, *const *props, *const *sep, *const *drop;
    const char *leaf;  /* the element that holds text (NULL: text anywhere) */
    const char *space; /* an element that stands for a space (ODF's text:s) */
    int (*part)(const char *name);
    const char *needs; /* what an archive without a part lacks */
    /* (X)HTML: elements never looked into (their text is no paragraph's);
     * NULL: only the elements of para are paragraphs, else so is every
     * other block element that holds text itself or through inline ones */
    const char *const *never;
    int html;          /* an .html file: libxml2's HTML parser (html.h), no namespace */
} fmt;

static int has_prefix(const char *s, const char *p)
{
    return !strncmp(s, p, strlen(p));
}

static int has_suffix(const char *s, const char *x)
{
    size_t n = strlen(s), m = strlen(x);
    return n >= m && !strcasecmp(s + n - m, x);
}

static int docx_part(const char *n)
{
    return !strcmp(n, "word/document.xml") || !strcmp(n, "word/footnotes.xml") ||
           !strcmp(n, "word/endnotes.xml") || !strcmp(n, "word/comments.xml") ||
           ((has_prefix(n, "word/header") || has_prefix(n, "word/footer")) &&
            has_suffix(n, ".xml") && !strchr(n + 5, '/'));
}

static int pptx_part(const char *n)
{
    return ((has_prefix(n, "ppt/slides/slide") || has_prefix(n, "ppt/notesSlides/notesSlide")) &&
            has_suffix(n, ".xml") && !strchr(strchr(n + 4, '/') + 1, '/'));
}

static int odf_part(const char *n)
{
    return !strcmp(n, "content.xml");
}

static int epub_part(const char *n)
{
    return has_suffix(n, ".xhtml") || has_suffix(n, ".html") || has_suffix(n, ".htm");
}

static const char *const k_w_para[] = {"p", NULL};
static const char *const k_w_inl[] = {"r", "hyperlink", "smartTag", "ins", "sdt", "sdtContent",
                                      NULL};
static const char *const k_w_props[] = {"pPr", "rPr", "sdtPr", "sdtEndPr", NULL};
static const char *const k_w_sep[] = {"tab", "br", "cr", "ptab", NULL};
static const char *const k_w_drop[] = {"proofErr", NULL};
static const char *const k_a_inl[] = {"r", NULL};
static const char *const k_a_props[] = {"pPr", "rPr", "endParaRPr", NULL};
static const char *const k_a_sep[] = {"br", NULL};
static const char *const k_none[] = {NULL};
static const char *const k_odf_para[] = {"p", "h", NULL};
static const char *const k_odf_inl[] = {"span", "a", NULL};
static const char *const k_odf_sep[] = {"tab", "line-break", NULL};
static const char *const k_x_para[] = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "dt", "dd",
                                       "td", "th", "caption", "figcaption", "blockquote", "div",
                                       "title", "summary", "legend", "label", NULL};
static const char *const k_x_inl[] = {"a", "abbr", "b", "bdi", "bdo", "cite", "dfn", "em",
                                      "i", "mark", "q", "s", "small", "span", "strong", "sub",
                                      "sup", "time", "u", "del", "ins", NULL};
static const char *const k_x_sep[] = {"br", NULL};
/* Never sent to the model: scripts, styles, other vocabularies, and code --
 * a <pre> block stays as it is, an inline <code>, <kbd>, <samp>, <var> or
 * <tt> is an object of its paragraph (kept whole, placed by attention), as
 * Markdown's code spans are. */
static const char *const k_x_never[] = {"script", "style", "template", "svg", "math", "noscript",
                                        "pre", "code", "kbd", "samp", "var", "tt", NULL};

static const fmt k_fmts[] = {
    {".docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", NS_W,
     k_w_para, k_w_inl, k_w_props, k_w_sep, k_w_drop, "t", NULL, docx_part, "word/document.xml", NULL, 0},
    {".pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation", NS_A,
     k_w_para, k_a_inl, k_a_props, k_a_sep, k_none, "t", NULL, pptx_part, "ppt/slides/", NULL, 0},
    {".odt", "application/vnd.oasis.opendocument.text", NS_TEXT, k_odf_para, k_odf_inl, k_none,
     k_odf_sep, k_none, NULL, "s", odf_part, "content.xml", NULL, 0},
    {".odp", "application/vnd.oasis.opendocument.presentation", NS_TEXT, k_odf_para, k_odf_inl,
     k_none, k_odf_sep, k_none, NULL, "s", odf_part, "content.xml", NULL, 0},
    {".epub", "application/epub+zip", NS_XHTML, k_x_para, k_x_inl, k_none, k_x_sep, k_none, NULL,
     NULL, epub_part, "an XHTML document", k_x_never, 0},
    /* no archive: the file is the one part */
    {".xhtml", "application/xhtml+xml; charset=utf-8", NS_XHTML, k_x_para, k_x_inl, k_none,
     k_x_sep, k_none, NULL, NULL, NULL, "XHTML", k_x_never, 0},
    {".html", "text/html; charset=utf-8", NULL, k_x_para, k_x_inl, k_none, k_x_sep, k_none, NULL,
     NULL, NULL, "HTML", k_x_never, 1}, /* .htm too (find_fmt) */
};

typedef struct para {
    xmlNodePtr node;
    srv_pieces pcs;    /* its pieces (styled.h): nodes are libxml2's */
} para;

typedef struct part {
    zip_uint64_t idx;
    xmlDocPtr doc;
} part;

struct srv_office {
    srv_md *md; /* a Markdown file (markdown.h): everything below unused */
    const fmt *f;
    srv_html *html; /* an .html file: its tree (no archive, no parts) */
    zip_source_t *src;
    zip_t *za;
    part *parts;
    int n_parts;
    para *paras;
    int n_paras, cap_paras;
    srv_styled st;     /* the paragraphs' segments (styled.h) */
    int lost;
    /* the bounds in work (xmllimits.h), all parts together: nodes counted
     * before a part is parsed, its text, the paragraphs read; the bytes
     * parsed (the heap given back after a large document) */
    size_t nodes, text, bytes;
    int paras_read;
    char *err;
    size_t errlen;
};

/* ---- names ------------------------------------------------------------------ */

static int in_list(const char *const *l, const xmlChar *name)
{
    for (; *l; l++)
        if (!strcmp(*l, (const char *)name))
            return 1;
    return 0;
}

/* n is an element of the format's namespace (HTML's parser: none) named
 * in l. */
static int is(const fmt *f, xmlNodePtr n, const char *const *l)
{
    if (n->type != XML_ELEMENT_NODE)
        return 0;
    if (f->html ? n->ns != NULL
                : !n->ns || !n->ns->href || strcmp((const char *)n->ns->href, f->ns) != 0)
        return 0;
    return in_list(l, n->name);
}

static int is_named(const fmt *f, xmlNodePtr n, const char *name)
{
    const char *const l[] = {name, NULL};
    return name && is(f, n, l);
}

static int all_space(const xmlChar *t)
{
    for (; t && *t; t++)
        if (*t != ' ' && *t != '\t' && *t != '\n' && *t != '\r')
            return 0;
    return 1;
}

/* n's children hold text that is not white space, themselves or through
 * inline elements. */
static int holds_text(const fmt *f, xmlNodePtr n)
{
    for (xmlNodePtr c = n->children; c; c = c->next) {
        if ((c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) &&
            !all_space(c->content))
            return 1;
        if (is(f, c, f->inl) && holds_text(f, c))
            return 1;
    }
    return 0;
}

/* What mark_paras writes in an element's _private. */
#define HOLDS_PARA ((void *)1) /* a paragraph is inside */
#define IS_PARA ((void *)2)

/* Marks every element that is (IS_PARA) or holds (HOLDS_PARA) a
 * paragraph; returns whether n's siblings from n on hold one. */
static int mark_paras(const fmt *f, xmlNodePtr n)
{
    int any = 0;
    for (; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        if (f->never && is(f, n, f->never)) {
            n->_private = NULL;
            continue;
        }
        int self = is(f, n, f->para) || (f->never && !is(f, n, f->inl) && !is(f, n, f->sep) &&
                                         holds_text(f, n));
        int m = mark_paras(f, n->children) | self;
        n->_private = self ? IS_PARA : m ? HOLDS_PARA : NULL;
        any |= m;
    }
    return any;
}

/* ---- reading a paragraph ------------------------------------------------------ */

/* The pieces of n's children (n: the paragraph, or an element of the
 * chain, depth deep). 0 or -1. */
static int collect(const fmt *f, srv_pieces *p, xmlNodePtr n, void **chain, int depth)
{
    int in_leaf = f->leaf ? depth > 0 && is_named(f, chain[depth - 1], f->leaf) : 1;
    for (xmlNodePtr c = n->children; c; c = c->next) {
        int rc = 0;
        if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
            if (in_leaf) {
                const char *t = c->content ? (const char *)c->content : "";
                rc = srv_pieces_add(p, SRV_PIECE_TEXT, c, t, chain, depth);
            } else if (!all_space(c->content)) {
                rc = srv_pieces_add(p, SRV_PIECE_OBJECT, c, NULL, chain, depth);
            }
        } else if (c->type != XML_ELEMENT_NODE) {
            rc = srv_pieces_add(p, SRV_PIECE_OBJECT, c, NULL, chain, depth);
        } else if (is(f, c, f->drop) || is(f, c, f->props)) {
            continue; /* dropped; properties go with their element */
        } else if (is_named(f, c, f->space)) {
            rc = srv_pieces_add(p, SRV_PIECE_TEXT, c, " ", chain, depth);
        } else if (c->_private || is(f, c, f->sep)) {
            rc = srv_pieces_add(p, SRV_PIECE_SEP, c, NULL, chain, depth);
        } else if (f->never && !c->children) {
            /* an empty (X)HTML element (an anchor <a name>, a bookmark): an
             * object, kept at its place, not a chain with no word to go to */
            rc = srv_pieces_add(p, SRV_PIECE_OBJECT, c, NULL, chain, depth);
        } else if (depth < SRV_STYLED_DEPTH && (is(f, c, f->inl) || is_named(f, c, f->leaf))) {
            chain[depth] = c;
            rc = collect(f, p, c, chain, depth + 1);
        } else {
            rc = srv_pieces_add(p, SRV_PIECE_OBJECT, c, NULL, chain, depth);
        }
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* What makes a chain's formatting: each element's name, attributes (but
 * revision ids) and properties. */
static char *style_key(const fmt *f, const srv_piece *pc)
{
    xmlBufferPtr b = xmlBufferCreate();
    if (!b)
        return NULL;
    for (int d = 0; d < pc->depth; d++) {
        xmlNodePtr e = pc->chain[d];
        xmlBufferCat(b, e->name);
        for (xmlAttrPtr a = e->properties; a; a = a->next) {
            if (has_prefix((const char *)a->name, "rsid") ||
                (is_named(f, e, f->leaf) && !strcmp((const char *)a->name, "space")))
                continue;
            xmlChar *v = xmlNodeGetContent((xmlNodePtr)a);
            xmlBufferCCat(b, " ");
            xmlBufferCat(b, a->name);
            xmlBufferCCat(b, "=");
            xmlBufferCat(b, v ? v : (const xmlChar *)"");
            xmlFree(v);
        }
        for (xmlNodePtr c = e->children; c; c = c->next)
            if (is(f, c, f->props))
                xmlNodeDump(b, e->doc, c, 0, 0);
        xmlBufferCCat(b, ";");
    }
    char *k = strdup((const char *)xmlBufferContent(b));
    xmlBufferFree(b);
    return k;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Text pieces j and k have one look: their keys (srv_same_style; ctx: the
 * paragraph's keys). */
static int same_key(const srv_pieces *p, int j, int k, void *ctx)
{
    char **keys = ctx;
    (void)p;
    return keys[j] && keys[k] && !strcmp(keys[j], keys[k]);
}

/* The styles of p's text pieces: in (X)HTML a style is one chain of
 * elements (two links to the same page are two elements, each carried
 * alone, never merged into one); in the other formats one look (Word
 * splits a run where it likes). 0 or -1. */
static int para_styles(const fmt *f, srv_pieces *p)
{
    if (f->never) {
        srv_pieces_style(p, NULL, NULL);
        return 0;
    }
    char **keys = calloc((size_t)(p->n ? p->n : 1), sizeof *keys);
    int rc = keys ? 0 : -1;
    for (int k = 0; k < p->n && rc == 0; k++)
        if (p->pc[k].kind == SRV_PIECE_TEXT && !(keys[k] = style_key(f, &p->pc[k])))
            rc = -1;
    if (rc == 0)
        srv_pieces_style(p, same_key, keys);
    for (int k = 0; keys && k < p->n; k++)
        free(keys[k]);
    free(keys);
    return rc;
}

/* Paragraph node n: its pieces, styles and segments. 0, -1 out of memory,
 * -2 past a bound (d->err). A paragraph without a segment (no letter) is
 * not kept: it is never written again. */
static int read_para(srv_office *d, xmlNodePtr n)
{
    if (++d->paras_read > SRV_XML_MAX_PARAS) {
        snprintf(d->err, d->errlen, "more than %d paragraphs (the limit per document)",
                 SRV_XML_MAX_PARAS);
        return -2;
    }
    if (d->n_paras == d->cap_paras) {
        int cap = d->cap_paras ? d->cap_paras * 2 : 32;
        para *q = realloc(d->paras, (size_t)cap * sizeof *q);
        if (!q)
            return -1;
        d->paras = q;
        d->cap_paras = cap;
    }
    int pi = d->n_paras++;
    para *p = &d->paras[pi];
    memset(p, 0, sizeof *p);
    p->node = n;
    void *chain[SRV_STYLED_DEPTH];
    if (collect(d->f, &p->pcs, n, chain, 0) != 0 || para_styles(d->f, &p->pcs) != 0)
        return -1;
    /* (X)HTML: the text outside the inline elements is the base */
    int rc = srv_styled_cut(&d->st, pi, &p->pcs, d->f->never != NULL);
    if (rc == -2)
        snprintf(d->err, d->errlen, "more than %d segments to translate (the limit per document)",
                 SRV_XML_MAX_SEGMENTS);
    if (rc == 0) { /* nothing to translate: forgotten */
        srv_pieces_free(&p->pcs);
        d->n_paras--;
    }
    return rc < 0 ? rc : 0;
}

/* Every paragraph under n in document order (a nested one after its
 * outer one's pieces). */
static int walk(srv_office *d, xmlNodePtr n)
{
    for (; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE || !n->_private)
            continue;
        int rc = n->_private == IS_PARA ? read_para(d, n) : 0;
        if (rc == 0)
            rc = walk(d, n->children);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- the archive ---------------------------------------------------------------- */

static int is_markdown(const char *ext)
{
    return ext && (!strcasecmp(ext, ".md") || !strcasecmp(ext, ".markdown"));
}

/* The format of extension ext (case-insensitive; .htm is .html), or NULL. */
static const fmt *find_fmt(const char *ext)
{
    if (ext && !strcasecmp(ext, ".htm"))
        ext = ".html";
    for (size_t i = 0; ext && i < sizeof k_fmts / sizeof k_fmts[0]; i++)
        if (!strcasecmp(ext, k_fmts[i].ext))
            return &k_fmts[i];
    return NULL;
}

const char *srv_office_mime(const char *ext)
{
    if (is_markdown(ext))
        return "text/markdown; charset=utf-8";
    const fmt *f = find_fmt(ext);
    return f ? f->mime : NULL;
}

/* Entry i's bytes (malloc'd, *n), bounded by its declared size; -1 out of
 * memory, -2 refused (err). */
static int read_entry(zip_t *za, zip_uint64_t i, const zip_stat_t *st, char **out, size_t *n,
                      char *err, size_t errlen)
{
    zip_file_t *zf = zip_fopen_index(za, i, 0);
    if (!zf) {
        snprintf(err, errlen, "%s: %s", st->name, zip_strerror(za));
        return -2;
    }
    char *buf = malloc((size_t)st->size + 2);
    if (!buf) {
        zip_fclose(zf);
        return -1;
    }
    /* one byte more than declared: an entry that inflates past its size */
    zip_int64_t got = 0, r = 0;
    while (got <= (zip_int64_t)st->size &&
           (r = zip_fread(zf, buf + got, st->size + 1 - (zip_uint64_t)got)) > 0)
        got += r;
    int bad = got != (zip_int64_t)st->size || r < 0;
    if (bad)
        snprintf(err, errlen, "%s: %s", st->name,
                 r < 0 ? zip_file_strerror(zf) : "its data does not match its declared size");
    zip_fclose(zf);
    if (bad) {
        free(buf);
        return -2;
    }
    buf[got] = 0;
    *out = buf;
    *n = (size_t)got;
    return 0;
}

/* XML part name (buf, n bytes; entry idx) read and its paragraphs found. */
static int add_part(srv_office *d, zip_uint64_t idx, const char *name, const char *buf, size_t n,
                    char *err, size_t errlen)
{
    xmlDocPtr doc;
    d->bytes += n;
    int rc = srv_xml_read(buf, n, name, &d->nodes, &d->text, &doc, err, errlen);
    if (rc != 0)
        return rc;
    d->parts[d->n_parts++] = (part){idx, doc};
    xmlNodePtr root = xmlDocGetRootElement(doc);
    mark_paras(d->f, root);
    d->err = err;
    d->errlen = errlen;
    return walk(d, root);
}

/* An .html file (buf, n bytes) read by html.h's parser and its paragraphs
 * found. */
static int add_html(srv_office *d, const char *buf, size_t n, char *err, size_t errlen)
{
    d->bytes += n;
    int rc = srv_html_parse_tree(buf, n, &d->html, err, errlen);
    if (rc != 0)
        return rc;
    xmlNodePtr top = srv_html_top(d->html);
    if ((rc = srv_xml_count_text(top, "the HTML", &d->text, err, errlen)) != 0)
        return rc;
    mark_paras(d->f, top);
    d->err = err;
    d->errlen = errlen;
    return walk(d, top);
}

static int read_parts(srv_office *d, char *err, size_t errlen)
{
    zip_int64_t ne = zip_get_num_entries(d->za, 0);
    if (ne > SRV_OFFICE_MAX_ENTRIES) {
        snprintf(err, errlen, "the archive has %lld entries; the limit is %d", (long long)ne,
                 SRV_OFFICE_MAX_ENTRIES);
        return -2;
    }
    d->parts = calloc((size_t)(ne > 0 ? ne : 1), sizeof *d->parts);
    if (!d->parts)
        return -1;
    zip_uint64_t total = 0;
    for (zip_int64_t i = 0; i < ne; i++) {
        zip_stat_t st;
        if (zip_stat_index(d->za, (zip_uint64_t)i, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
            !(st.valid & ZIP_STAT_NAME)) {
            snprintf(err, errlen, "entry %lld is unreadable", (long long)i);
            return -2;
        }
        if (!d->f->part(st.name))
            continue;
        total += st.size;
        if (st.size > SRV_OFFICE_MAX_PART || total > SRV_OFFICE_MAX_TOTAL) {
            snprintf(err, errlen,
                     "%s expands to %llu bytes (%llu so far); the limits are %u per entry "
                     "and %u in all",
                     st.name, (unsigned long long)st.size, (unsigned long long)total,
                     SRV_OFFICE_MAX_PART, SRV_OFFICE_MAX_TOTAL);
            return -2;
        }
        /* a zip bomb inside the bound in bytes: refused before it is
         * inflated (xmllimits.h) */
        if (st.size >= SRV_XML_RATIO_FROM && (st.valid & ZIP_STAT_COMP_SIZE) &&
            st.size / (st.comp_size ? st.comp_size : 1) > SRV_XML_MAX_RATIO) {
            snprintf(err, errlen,
                     "%s inflates %llu bytes to %llu, more than %d times (the limit on an "
                     "entry's ratio)",
                     st.name, (unsigned long long)st.comp_size, (unsigned long long)st.size,
                     SRV_XML_MAX_RATIO);
            return -2;
        }
        char *buf;
        size_t n;
        int rc = read_entry(d->za, (zip_uint64_t)i, &st, &buf, &n, err, errlen);
        if (rc != 0)
            return rc;
        rc = add_part(d, (zip_uint64_t)i, st.name, buf, n, err, errlen);
        free(buf);
        if (rc != 0)
            return rc;
    }
    if (!d->n_parts) {
        snprintf(err, errlen, "no %s in the archive", d->f->needs);
        return -2;
    }
    return 0;
}

int srv_office_parse(const char *data, size_t len, const char *ext, srv_office **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    if (is_markdown(ext)) {
        srv_office *d = calloc(1, sizeof *d);
        int rc = d ? srv_md_parse(data, len, &d->md, err, errlen) : -1;
        if (rc != 0)
            free(d);
        else
            *out = d;
        return rc;
    }
    const fmt *f = find_fmt(ext);
    if (!f) {
        snprintf(err, errlen, "not a document format");
        return -2;
    }
    srv_office *d = calloc(1, sizeof *d);
    char *copy = malloc(len ? len : 1);
    if (!d || !copy) {
        free(d);
        free(copy);
        return -1;
    }
    memcpy(copy, data, len);
    d->f = f;
    d->st.max = SRV_XML_MAX_SEGMENTS;
    if (!f->part) { /* one file, no archive: XHTML as one part, or HTML */
        int rc = len > SRV_OFFICE_MAX_PART ? (snprintf(err, errlen, "larger than %u bytes",
                                                       SRV_OFFICE_MAX_PART),
                                              -2)
                 : f->html                                    ? add_html(d, copy, len, err, errlen)
                 : !(d->parts = calloc(1, sizeof *d->parts)) ? -1
                                                              : add_part(d, 0, "the file", copy,
                                                                         len, err, errlen);
        free(copy);
        if (rc != 0)
            srv_office_free(d);
        else
            *out = d;
        return rc;
    }
    zip_error_t ze;
    zip_error_init(&ze);
    d->src = zip_source_buffer_create(copy, len, 1, &ze);
    if (!d->src) {
        free(copy);
        free(d);
        zip_error_fini(&ze);
        return -1;
    }
    d->za = zip_open_from_source(d->src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    int rc = 0;
    if (!d->za) {
        snprintf(err, errlen, "not a zip archive (%s)", zip_error_strerror(&ze));
        zip_source_free(d->src);
        d->src = NULL;
        rc = -2;
    } else {
        rc = read_parts(d, err, errlen);
    }
    zip_error_fini(&ze);
    if (rc != 0) {
        srv_office_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int srv_office_n(const srv_office *d)
{
    return d->md ? srv_md_n(d->md) : d->st.n;
}

const char *srv_office_source(const srv_office *d, int i)
{
    return d->md ? srv_md_source(d->md, i) : srv_styled_source(&d->st, i);
}

int srv_office_styled(const srv_office *d, int i)
{
    return d->md ? srv_md_styled(d->md, i) : srv_styled_styled(&d->st, i);
}

int srv_office_lost(const srv_office *d)
{
    return d->lost;
}

int srv_office_set(srv_office *d, int i, const char *t, const srv_align *al, int n_al)
{
    if (d->md) {
        int lost = 0, rc = srv_md_set(d->md, i, t, al, n_al, &lost);
        d->lost += lost;
        return rc;
    }
    int lost = 0;
    if (srv_styled_set(&d->st, i, t, al, n_al, &lost) != 0)
        return -1;
    d->lost += lost;
    return 0;
}

/* ---- writing a paragraph again --------------------------------------------------- */

/* A copy of element e (deep: with its children) that refers to the
 * namespace declarations e refers to: no declaration is made again where
 * the copy goes, under the same paragraph. An element that declares
 * namespaces itself is copied by libxml2 with its declarations. */
static xmlNodePtr copy_elem(xmlNodePtr e, int deep)
{
    if (e->nsDef)
        return xmlDocCopyNode(e, e->doc, deep ? 1 : 2);
    xmlNodePtr c = xmlNewDocNode(e->doc, e->ns, e->name, NULL);
    for (xmlAttrPtr a = e->properties; c && a; a = a->next) {
        xmlChar *v = xmlNodeGetContent((xmlNodePtr)a);
        if (!xmlNewNsProp(c, a->ns, a->name, v ? v : (const xmlChar *)"")) {
            xmlFreeNode(c);
            c = NULL;
        }
        xmlFree(v);
    }
    for (xmlNodePtr k = deep && c ? e->children : NULL; k; k = k->next) {
        xmlNodePtr kc = k->type == XML_ELEMENT_NODE ? copy_elem(k, 1) : xmlDocCopyNode(k, e->doc, 1);
        if (!kc || !xmlAddChild(c, kc)) {
            xmlFreeNode(kc);
            xmlFreeNode(c);
            return NULL;
        }
    }
    return c;
}

/* A copy of e without children, but its properties. */
static xmlNodePtr copy_shell(const fmt *f, xmlNodePtr e)
{
    xmlNodePtr c = copy_elem(e, 0);
    for (xmlNodePtr k = e->children; c && k; k = k->next)
        if (is(f, k, f->props)) {
            xmlNodePtr pk = copy_elem(k, 1);
            if (!pk || !xmlAddChild(c, pk)) {
                xmlFreeNode(pk);
                xmlFreeNode(c);
                return NULL;
            }
        }
    return c;
}

/* Where a paragraph is written: new children of p go before anchor (NULL:
 * last), after its own properties (srv_styled_out's ctx). */
typedef struct writer {
    const fmt *f;
    xmlNodePtr p, anchor;
} writer;

static xmlNodePtr add_to(writer *w, xmlNodePtr parent, xmlNodePtr n)
{
    if (parent == w->p)
        return w->anchor ? xmlAddPrevSibling(w->anchor, n) : xmlAddChild(w->p, n);
    return xmlAddChild(parent, n);
}

/* A copy of element e without its children but its properties, added to
 * parent (srv_styled_out's open). */
static void *open_elem(void *ctx, void *parent, void *e)
{
    writer *w = ctx;
    xmlNodePtr c = copy_shell(w->f, e);
    if (!c || !add_to(w, parent, c)) {
        xmlFreeNode(c);
        return NULL;
    }
    return c;
}

static int put_text(void *ctx, void *parent, const srv_piece *pc, const char *t, size_t n)
{
    writer *w = ctx;
    xmlNodePtr e = parent;
    xmlNodePtr tn = xmlNewTextLen((const xmlChar *)t, (int)n);
    if (!tn || !add_to(w, e, tn)) {
        xmlFreeNode(tn);
        return -1;
    }
    /* Word drops a w:t's edge spaces unless told to keep them */
    if (pc->depth && w->f->leaf && is_named(w->f, pc->chain[pc->depth - 1], w->f->leaf) && n &&
        (is_ws(t[0]) || is_ws(t[n - 1])))
        xmlSetProp(e, (const xmlChar *)"xml:space", (const xmlChar *)"preserve");
    return 0;
}

static int put_node(void *ctx, void *parent, const srv_piece *pc)
{
    xmlUnlinkNode(pc->node);
    return add_to(ctx, parent, pc->node) ? 0 : -1;
}

/* Writes paragraph p's pieces again, its translated segments' instead of
 * theirs. */
static int write_para(srv_office *d, int pi)
{
    para *p = &d->paras[pi];
    writer w = {.f = d->f, .p = p->node};
    /* the paragraph's own properties stay; the rest is taken out */
    int n_old = 0, seen_content = 0;
    for (xmlNodePtr c = p->node->children; c; c = c->next)
        n_old++;
    xmlNodePtr *old = malloc((size_t)(n_old ? n_old : 1) * sizeof *old);
    if (!old)
        return -1;
    n_old = 0;
    for (xmlNodePtr c = p->node->children, next; c; c = next) {
        next = c->next;
        if (is(d->f, c, d->f->props)) {
            if (seen_content && !w.anchor)
                w.anchor = c;
            continue;
        }
        seen_content = 1;
        xmlUnlinkNode(c);
        old[n_old++] = c;
    }
    /* (X)HTML: each source element at most once in the answer */
    srv_styled_out out = {.root = p->node, .once = d->f->never != NULL, .open = open_elem,
                          .text = put_text, .move = put_node, .ctx = &w};
    int rc = srv_styled_write(&d->st, pi, &p->pcs, &out);
    /* what was not moved back (an object or separator of the paragraph's
     * own is in the tree again) */
    for (int i = 0; i < n_old; i++)
        if (!old[i]->parent)
            xmlFreeNode(old[i]);
    free(old);
    return rc;
}

/* ---- the answer -------------------------------------------------------------------- */

static int add_entry(zip_t *zo, const char *name, zip_source_t *zs, const zip_stat_t *st)
{
    zip_int64_t idx = zs ? zip_file_add(zo, name, zs, ZIP_FL_ENC_RAW)
                         : zip_dir_add(zo, name, ZIP_FL_ENC_RAW);
    if (idx < 0) {
        zip_source_free(zs);
        return -1;
    }
    if (st->valid & ZIP_STAT_MTIME)
        zip_file_set_mtime(zo, (zip_uint64_t)idx, st->mtime, 0);
    /* compressed as it was: a stored entry (a picture, a mimetype) is not
     * compressed now, a copied deflated one is not inflated and deflated
     * (a method libzip cannot write is left to its default) */
    if (st->valid & ZIP_STAT_COMP_METHOD)
        zip_set_file_compression(zo, (zip_uint64_t)idx, (zip_int32_t)st->comp_method, 0);
    return 0;
}

static zip_source_t *part_source(zip_t *zo, const part *pt)
{
    xmlChar *x = NULL;
    int n = 0;
    xmlDocDumpMemoryEnc(pt->doc, &x, &n, "UTF-8");
    char *buf = x ? malloc((size_t)n + 1) : NULL;
    if (buf)
        memcpy(buf, x, (size_t)n);
    xmlFree(x);
    zip_source_t *zs = buf ? zip_source_buffer(zo, buf, (zip_uint64_t)n, 1) : NULL;
    if (buf && !zs)
        free(buf);
    return zs;
}

static char *archive_bytes(zip_source_t *out, size_t *len)
{
    zip_stat_t st;
    char *buf = NULL;
    if (zip_source_open(out) != 0)
        return NULL;
    if (zip_source_stat(out, &st) == 0 && (st.valid & ZIP_STAT_SIZE) &&
        (buf = malloc((size_t)st.size + 1))) {
        zip_int64_t got = zip_source_read(out, buf, st.size);
        if (got != (zip_int64_t)st.size) {
            free(buf);
            buf = NULL;
        } else {
            *len = (size_t)st.size;
        }
    }
    zip_source_close(out);
    return buf;
}

char *srv_office_render(srv_office *d, size_t *len, char *err, size_t errlen)
{
    if (d->md) {
        return srv_md_render(d->md, len, err, errlen);
    }
    for (int i = 0; i < d->n_paras; i++)
        if (srv_styled_translated(&d->st, i) && write_para(d, i) != 0) {
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
    if (d->html) {
        char *out = srv_html_declare_utf8(d->html) == 0 ? srv_html_render(d->html) : NULL;
        if (out)
            *len = strlen(out);
        else
            snprintf(err, errlen, "out of memory");
        return out;
    }
    if (!d->za) { /* an XHTML file */
        xmlChar *x = NULL;
        int n = 0;
        xmlDocDumpMemoryEnc(d->parts[0].doc, &x, &n, "UTF-8");
        char *buf = x ? malloc((size_t)n + 1) : NULL;
        if (buf) {
            memcpy(buf, x, (size_t)n);
            buf[n] = 0;
            *len = (size_t)n;
        } else {
            snprintf(err, errlen, "out of memory");
        }
        xmlFree(x);
        return buf;
    }
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *out = zip_source_buffer_create(NULL, 0, 0, &ze);
    zip_t *zo = out ? zip_open_from_source(out, ZIP_TRUNCATE, &ze) : NULL;
    char *buf = NULL;
    if (!zo) {
        snprintf(err, errlen, "cannot write the archive: %s", zip_error_strerror(&ze));
        zip_source_free(out);
        zip_error_fini(&ze);
        return NULL;
    }
    zip_source_keep(out);
    zip_int64_t ne = zip_get_num_entries(d->za, 0);
    int rc = 0, pi = 0;
    for (zip_int64_t i = 0; i < ne && rc == 0; i++) {
        zip_stat_t st;
        if (zip_stat_index(d->za, (zip_uint64_t)i, 0, &st) != 0) {
            rc = -1;
            break;
        }
        int dir = st.name[0] && st.name[strlen(st.name) - 1] == '/';
        zip_source_t *zs = NULL;
        if (pi < d->n_parts && d->parts[pi].idx == (zip_uint64_t)i)
            zs = part_source(zo, &d->parts[pi++]);
        else if (!dir) /* as it is, compressed */
            zs = zip_source_zip(zo, d->za, (zip_uint64_t)i, ZIP_FL_COMPRESSED, 0, -1);
        rc = zs || dir ? add_entry(zo, st.name, zs, &st) : -1;
    }
    if (rc != 0 || zip_close(zo) != 0) {
        snprintf(err, errlen, "cannot write the archive: %s", zip_strerror(zo));
        zip_discard(zo);
    } else if (!(buf = archive_bytes(out, len))) {
        snprintf(err, errlen, "out of memory");
    }
    zip_source_free(out);
    zip_error_fini(&ze);
    return buf;
}

void srv_office_free(srv_office *d)
{
    if (!d)
        return;
    srv_md_free(d->md);
    srv_styled_free(&d->st);
    for (int i = 0; i < d->n_paras; i++)
        srv_pieces_free(&d->paras[i].pcs);
    free(d->paras);
    for (int i = 0; i < d->n_parts; i++)
        xmlFreeDoc(d->parts[i].doc);
    free(d->parts);
    srv_html_free(d->html);
    if (d->za)
        zip_discard(d->za); /* frees its source */
    size_t bytes = d->bytes;
    free(d);
    srv_xml_trim(bytes); /* a large tree's pages back to the system */
}
