/*
 * html.c - format=html with libxml2's HTML parser (html.h).
 *
 * A fragment is parsed inside <html><body>...</body></html> and written back
 * as the children of the body, so that the parser never adds the implied
 * elements of a document to it; a document (an <html> tag or a doctype
 * anywhere in the first kilobyte) is parsed and written whole. A parse that
 * stopped (a fatal error: nesting past the parser's limit) is refused, not
 * answered with the text it dropped. Text nodes
 * are collected in document order; each segment keeps a pointer to its
 * node and the whitespace around its text.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/HTMLparser.h>
#include <libxml/HTMLtree.h>

#include "html.h"
#include "xmllimits.h"

typedef struct seg {
    xmlNodePtr node;
    char *text;   /* the node's text without surrounding whitespace */
    char *lead;   /* the whitespace before and after it */
    char *trail;
} seg;

struct srv_html {
    htmlDocPtr doc;
    int fragment;
    char *doctype; /* the source's DOCTYPE as written, when its internal
                    * subset was cut out for the parser; else NULL */
    seg *segs;
    int n, cap;
    size_t bytes; /* parsed (the heap given back after a large document) */
};

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The bytes of a space at s: ASCII white space 1, U+00A0 2, else 0. */
static size_t space_len(const char *s)
{
    if (is_space((unsigned char)s[0]))
        return 1;
    return (unsigned char)s[0] == 0xC2 && (unsigned char)s[1] == 0xA0 ? 2 : 0;
}

static char *dupn(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

/* Elements whose text is never sent to the model: scripts, styles and code
 * (<pre>, <code>, <kbd>, <samp>, <var>, <tt>: a command or a file name
 * translated is broken). */
static int never_translated(const xmlChar *name)
{
    static const char *const k_never[] = {"script", "style", "pre", "code", "kbd",
                                          "samp",   "var",   "tt",  NULL};
    for (int i = 0; k_never[i]; i++)
        if (!strcasecmp((const char *)name, k_never[i]))
            return 1;
    return 0;
}

/* Adds the text nodes under n (not inside never_translated elements); -1
 * when out of memory. */
static int collect(srv_html *h, xmlNodePtr n)
{
    for (; n; n = n->next) {
        if (n->type == XML_ELEMENT_NODE) {
            if (never_translated(n->name))
                continue;
            if (collect(h, n->children) != 0)
                return -1;
            continue;
        }
        if (n->type != XML_TEXT_NODE || !n->content)
            continue;
        const char *t = (const char *)n->content;
        size_t len = strlen(t), a = 0, b = len;
        /* non-breaking spaces around the text are kept as the others (a
         * node of &nbsp; alone, between two links, is no segment) */
        for (size_t k; a < len && (k = space_len(t + a)) > 0;)
            a += k;
        while (b > a && (is_space((unsigned char)t[b - 1]) ||
                         (b - a >= 2 && space_len(t + b - 2) == 2)))
            b -= is_space((unsigned char)t[b - 1]) ? 1 : 2;
        if (a == b)
            continue;
        if (h->n == h->cap) {
            int cap = h->cap ? h->cap * 2 : 16;
            seg *p = realloc(h->segs, (size_t)cap * sizeof *p);
            if (!p)
                return -1;
            h->segs = p;
            h->cap = cap;
        }
        seg *s = &h->segs[h->n];
        s->node = n;
        s->text = dupn(t + a, b - a);
        s->lead = dupn(t, a);
        s->trail = dupn(t + b, len - b);
        h->n++;
        if (!s->text || !s->lead || !s->trail)
            return -1;
    }
    return 0;
}

/* A document rather than a fragment: <html or <!doctype near the start. */
static int is_document(const char *src, size_t n)
{
    size_t lim = n < 1024 ? n : 1024;
    for (size_t i = 0; i + 5 <= lim; i++) {
        if (src[i] != '<')
            continue;
        if (!strncasecmp(src + i, "<html", 5) || (i + 9 <= lim && !strncasecmp(src + i, "<!doctype", 9)))
            return 1;
    }
    return 0;
}

static xmlNodePtr find_body(htmlDocPtr doc)
{
    xmlNodePtr root = xmlDocGetRootElement(doc);
    for (xmlNodePtr n = root ? root->children : NULL; n; n = n->next)
        if (n->type == XML_ELEMENT_NODE && !strcasecmp((const char *)n->name, "body"))
            return n;
    return NULL;
}

static const int k_opts = HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET |
                          HTML_PARSE_NODEFDTD;

/* The internal subset of the document's DOCTYPE (`<!DOCTYPE x [ ... ]>`),
 * which HTML does not have: libxml2's HTML parser ends the DOCTYPE at the
 * '[' and puts the rest ("]>") into the body as text. Finds the DOCTYPE
 * among the first kilobyte's bytes and, when it has a subset, sets [*a, *b)
 * to the subset (from the white space before '[' to its ']') and [*d0, *d1)
 * to the whole DOCTYPE; returns 1 then, else 0. Quotes are skipped, so a
 * ']' or '>' inside a declaration's literal does not end it. */
static int doctype_subset(const char *src, size_t n, size_t *a, size_t *b, size_t *d0,
                          size_t *d1)
{
    size_t lim = n < 1024 ? n : 1024, i = 0;
    while (i + 9 <= lim && strncasecmp(src + i, "<!doctype", 9))
        i++;
    if (i + 9 > lim)
        return 0;
    size_t k = i + 9;
    char q = 0;
    for (; k < n && (q || (src[k] != '[' && src[k] != '>')); k++)
        if (src[k] == '"' || src[k] == '\'')
            q = q == src[k] ? 0 : q ? q : src[k];
    if (k >= n || src[k] != '[')
        return 0;
    size_t open = k;
    while (open > i + 9 && is_space((unsigned char)src[open - 1]))
        open--;
    for (k++, q = 0; k < n && (q || src[k] != ']'); k++)
        if (src[k] == '"' || src[k] == '\'')
            q = q == src[k] ? 0 : q ? q : src[k];
    if (k >= n)
        return 0;
    size_t close = k + 1;
    for (k = close; k < n && is_space((unsigned char)src[k]); k++)
        ;
    if (k >= n || src[k] != '>')
        return 0;
    *a = open;
    *b = close;
    *d0 = i;
    *d1 = k + 1;
    return 1;
}

/* Runs the parser on buf; 0, -1 (out of memory), -2 (err says why). */
static int parse_buf(srv_html *h, const char *buf, size_t len, char *err, size_t errlen)
{
    htmlParserCtxtPtr ctxt = htmlNewParserCtxt();
    if (!ctxt)
        return -1;
    h->doc = htmlCtxtReadMemory(ctxt, buf, (int)len, NULL, "UTF-8", k_opts);
    /* The HTML parser recovers from any markup; a fatal error means it
     * stopped and dropped the rest of the text: elements nested deeper
     * than its limit (256). The text cannot be answered whole. */
    int rc = h->doc ? 0 : -1;
    if (h->doc && ctxt->lastError.level == XML_ERR_FATAL) {
        const char *m = ctxt->lastError.message ? ctxt->lastError.message : "";
        if (strstr(m, "Excessive depth"))
            snprintf(err, errlen, "the HTML nests elements more than 256 deep (the HTML "
                                  "parser's limit)");
        else
            snprintf(err, errlen, "the HTML parser stopped: %.*s", (int)strcspn(m, "\n"), m);
        rc = -2;
    }
    htmlFreeParserCtxt(ctxt);
    return rc;
}

static int parse(const char *src, size_t n, int segments, srv_html **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    srv_html *h = calloc(1, sizeof *h);
    if (!h)
        return -1;
    int rc = -1;
    if (n > (size_t)INT32_MAX - 64)
        goto fail;
    /* bounded in work before the parser sees it (xmllimits.h): the
     * attributes of one element, the nodes */
    size_t nodes = 0;
    if ((rc = srv_xml_check(src, n, 1, "the HTML", &nodes, err, errlen)) != 0)
        goto fail;
    rc = -1;
    h->bytes = n;
    if (is_document(src, n)) {
        size_t a, b, d0, d1;
        if (doctype_subset(src, n, &a, &b, &d0, &d1)) {
            char *buf = malloc(n - (b - a) + 1);
            h->doctype = dupn(src + d0, d1 - d0);
            if (!buf || !h->doctype) {
                free(buf);
                goto fail;
            }
            memcpy(buf, src, a);
            memcpy(buf + a, src + b, n - b);
            rc = parse_buf(h, buf, n - (b - a), err, errlen);
            free(buf);
        } else {
            rc = parse_buf(h, src, n, err, errlen);
        }
    } else {
        static const char pre[] = "<html><body>", post[] = "</body></html>";
        char *buf = malloc(n + sizeof pre + sizeof post);
        if (!buf)
            goto fail;
        memcpy(buf, pre, sizeof pre - 1);
        memcpy(buf + sizeof pre - 1, src, n);
        memcpy(buf + sizeof pre - 1 + n, post, sizeof post);
        rc = parse_buf(h, buf, n + sizeof pre - 1 + sizeof post - 1, err, errlen);
        free(buf);
        h->fragment = 1;
    }
    if (rc != 0)
        goto fail;
    rc = -1;
    xmlNodePtr start = h->fragment ? find_body(h->doc) : (xmlNodePtr)h->doc;
    if (segments && start && collect(h, start->children) != 0)
        goto fail;
    *out = h;
    return 0;
fail:
    srv_html_free(h);
    return rc;
}

int srv_html_parse(const char *src, size_t n, srv_html **out, char *err, size_t errlen)
{
    return parse(src, n, 1, out, err, errlen);
}

int srv_html_parse_tree(const char *src, size_t n, srv_html **out, char *err, size_t errlen)
{
    return parse(src, n, 0, out, err, errlen);
}

struct _xmlNode *srv_html_top(const srv_html *h)
{
    return h->fragment ? find_body(h->doc) : xmlDocGetRootElement(h->doc);
}

int srv_html_n_segments(const srv_html *h)
{
    return h->n;
}

const char *srv_html_segment(const srv_html *h, int i)
{
    return h->segs[i].text;
}

/* The word of src ending at e (going back to a space), or after b: its
 * bytes [*a, *z). */
static void word_before(const char *src, size_t e, size_t *a, size_t *z)
{
    size_t k = e;
    while (k > 0 && !space_len(src + k - 1) && !(k >= 2 && space_len(src + k - 2) == 2))
        k--;
    *a = k;
    *z = e;
}

static void word_after(const char *src, size_t b, size_t *a, size_t *z)
{
    size_t k = b;
    while (src[k] && !space_len(src + k))
        k++;
    *a = b;
    *z = k;
}

/* In t (the translation, changed in place: a space becomes U+00A0, one
 * byte longer, t has room), the space after the word that came before a
 * non-breaking space of src, else the one before the word after it: the
 * model's tokenizer reads U+00A0 as a space ("10&nbsp;km" would come back
 * "10 km"); a word that the translation changed leaves its space as it
 * is. */
static void nbsp_again(const char *src, char *t)
{
    for (size_t i = 0; src[i]; i++) {
        if (space_len(src + i) != 2)
            continue;
        size_t a, z, n = strlen(t);
        word_before(src, i, &a, &z);
        char *hit = NULL;
        for (char *p = t; z > a && (p = strstr(p, " ")) != NULL; p++)
            if ((size_t)(p - t) >= z - a && !memcmp(p - (z - a), src + a, z - a) &&
                (p - (z - a) == t || space_len(p - (z - a) - 1) == 1)) {
                hit = p;
                break;
            }
        word_after(src, i + 2, &a, &z);
        for (char *p = t; !hit && z > a && (p = strstr(p, " ")) != NULL; p++)
            if (!strncmp(p + 1, src + a, z - a) && (!p[1 + z - a] || space_len(p + 1 + z - a)))
                hit = p;
        if (hit) {
            memmove(hit + 2, hit + 1, n - (size_t)(hit - t));
            hit[0] = (char)0xC2;
            hit[1] = (char)0xA0;
        }
        i++;
    }
}

int srv_html_set(srv_html *h, int i, const char *text)
{
    seg *s = &h->segs[i];
    size_t a = strlen(s->lead), b = strlen(text), c = strlen(s->trail);
    char *t = malloc(a + 2 * b + c + 1);
    if (!t)
        return -1;
    memcpy(t, s->lead, a);
    memcpy(t + a, text, b + 1);
    nbsp_again(s->text, t + a);
    b = strlen(t + a);
    memcpy(t + a + b, s->trail, c + 1);
    /* xmlNodeSetContent would parse entities; the text is plain */
    xmlNodeSetContentLen(s->node, NULL, 0);
    xmlNodeAddContentLen(s->node, (const xmlChar *)t, (int)(a + b + c));
    free(t);
    return 0;
}

/* The first child element of n named name (case-insensitive), or NULL. */
static xmlNodePtr child_named(xmlNodePtr n, const char *name)
{
    for (xmlNodePtr c = n ? n->children : NULL; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE && !strcasecmp((const char *)c->name, name))
            return c;
    return NULL;
}

int srv_html_declare_utf8(srv_html *h)
{
    if (h->fragment)
        return 0;
    xmlNodePtr root = xmlDocGetRootElement(h->doc);
    if (!root || strcasecmp((const char *)root->name, "html") != 0)
        return 0;
    xmlNodePtr head = child_named(root, "head");
    for (xmlNodePtr m = head ? head->children : NULL; m; m = m->next) {
        if (m->type != XML_ELEMENT_NODE || strcasecmp((const char *)m->name, "meta") != 0)
            continue;
        if (xmlHasProp(m, BAD_CAST "charset"))
            return xmlSetProp(m, BAD_CAST "charset", BAD_CAST "utf-8") ? 0 : -1;
        xmlChar *he = xmlGetProp(m, BAD_CAST "http-equiv");
        int ct = he && !strcasecmp((const char *)he, "content-type");
        xmlFree(he);
        if (ct)
            return xmlSetProp(m, BAD_CAST "content", BAD_CAST "text/html; charset=utf-8") ? 0 : -1;
    }
    if (!head) {
        head = xmlNewDocNode(h->doc, NULL, BAD_CAST "head", NULL);
        if (!head)
            return -1;
        if (root->children ? !xmlAddPrevSibling(root->children, head) : !xmlAddChild(root, head)) {
            xmlFreeNode(head);
            return -1;
        }
    }
    xmlNodePtr meta = xmlNewDocNode(h->doc, NULL, BAD_CAST "meta", NULL);
    if (!meta || !xmlSetProp(meta, BAD_CAST "charset", BAD_CAST "utf-8")) {
        xmlFreeNode(meta);
        return -1;
    }
    if (head->children ? !xmlAddPrevSibling(head->children, meta) : !xmlAddChild(head, meta)) {
        xmlFreeNode(meta);
        return -1;
    }
    return 0;
}

char *srv_html_render(const srv_html *h)
{
    xmlBufferPtr b = xmlBufferCreate();
    if (!b)
        return NULL;
    xmlOutputBufferPtr out = xmlOutputBufferCreateBuffer(b, NULL);
    if (!out) {
        xmlBufferFree(b);
        return NULL;
    }
    if (h->fragment) {
        xmlNodePtr body = find_body(h->doc);
        for (xmlNodePtr n = body ? body->children : NULL; n; n = n->next)
            htmlNodeDumpFormatOutput(out, h->doc, n, "UTF-8", 0);
    } else {
        htmlDocContentDumpFormatOutput(out, h->doc, "UTF-8", 0);
    }
    int err = out->error;
    xmlOutputBufferClose(out);
    const char *txt = (const char *)xmlBufferContent(b);
    size_t len = (size_t)xmlBufferLength(b), skip = 0;
    /* the DOCTYPE as the source wrote it, internal subset and all, in place
     * of the parser's (written first, up to its '>') */
    if (!err && h->doctype && len >= 9 && !strncasecmp(txt, "<!doctype", 9)) {
        char q = 0;
        for (skip = 9; skip < len && (q || txt[skip] != '>'); skip++)
            if (txt[skip] == '"' || txt[skip] == '\'')
                q = q == txt[skip] ? 0 : q ? q : txt[skip];
        skip = skip < len ? skip + 1 : 0;
    }
    size_t dl = skip ? strlen(h->doctype) : 0;
    char *r = err ? NULL : malloc(dl + len - skip + 1);
    if (r) {
        memcpy(r, h->doctype ? h->doctype : "", dl);
        memcpy(r + dl, txt + skip, len - skip);
        r[dl + len - skip] = 0;
    }
    xmlBufferFree(b);
    return r;
}

void srv_html_free(srv_html *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->n; i++) {
        free(h->segs[i].text);
        free(h->segs[i].lead);
        free(h->segs[i].trail);
    }
    free(h->segs);
    free(h->doctype);
    if (h->doc)
        xmlFreeDoc(h->doc);
    size_t bytes = h->bytes;
    free(h);
    srv_xml_trim(bytes);
}

/* ---- LibreTranslate's html.unescape of its answers ------------------------- */

/* Appends code point cp as UTF-8 to out (room for 4 bytes). */
static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A numeric reference's code point as Python's html.unescape maps it: 0,
 * surrogates and beyond U+10FFFF to U+FFFD, 0x80..0x9F through
 * windows-1252, and the code points HTML forbids to nothing (-1). */
static long charref_cp(unsigned long n)
{
    static const unsigned short cp1252[32] = {
        0x20AC, 0x81,   0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
        0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x8D,   0x017D, 0x8F,
        0x90,   0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
        0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D,   0x017E, 0x0178};
    if (n == 0 || (n >= 0xD800 && n <= 0xDFFF) || n > 0x10FFFF)
        return 0xFFFD;
    if (n == 0x0D)
        return 0x0D;
    if (n >= 0x80 && n <= 0x9F)
        return cp1252[n - 0x80];
    if ((n >= 0x01 && n <= 0x08) || n == 0x0B || (n >= 0x0E && n <= 0x1F) ||
        (n >= 0x7F && n <= 0x9F) || (n >= 0xFDD0 && n <= 0xFDEF) || (n & 0xFFFE) == 0xFFFE)
        return -1;
    return (long)n;
}

/* The code point of entity name[0..len) (HTML 4's and &apos;), or -1;
 * legacy: only the names HTML accepts without a semicolon (the Latin-1
 * ones, amp, lt, gt, quot and AMP, LT, GT, QUOT, COPY, REG). */
static long entity_cp(const char *name, size_t len, int legacy)
{
    static const char *const upper[][2] = {{"AMP", "amp"}, {"LT", "lt"},     {"GT", "gt"},
                                           {"QUOT", "quot"}, {"COPY", "copy"}, {"REG", "reg"}};
    char buf[40];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, name, len);
    buf[len] = 0;
    if (!strcmp(buf, "apos"))
        return legacy ? -1 : '\'';
    for (size_t i = 0; i < sizeof upper / sizeof upper[0]; i++)
        if (!strcmp(buf, upper[i][0]))
            snprintf(buf, sizeof buf, "%s", upper[i][1]);
    const htmlEntityDesc *e = htmlEntityLookup((const xmlChar *)buf);
    if (!e)
        return -1;
    if (legacy && e->value > 255 && strcmp(buf, "amp") && strcmp(buf, "lt") &&
        strcmp(buf, "gt") && strcmp(buf, "quot"))
        return -1;
    return (long)e->value;
}

char *srv_html_unescape(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *out = malloc(n + 1); /* a reference is never shorter than its text */
    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        if (s[i] != '&') {
            out[o++] = s[i++];
            continue;
        }
        size_t j = i + 1;
        long cp = -2; /* -2: not a reference, copied as it is */
        if (s[j] == '#') {
            int hex = s[j + 1] == 'x' || s[j + 1] == 'X';
            size_t k = j + 1 + (size_t)hex, d0 = k;
            unsigned long v = 0;
            while (k < n && (hex ? strchr("0123456789abcdefABCDEF", s[k]) != NULL
                                 : (s[k] >= '0' && s[k] <= '9')) && s[k]) {
                unsigned dig = s[k] <= '9' ? (unsigned)(s[k] - '0')
                                           : (unsigned)((s[k] | 0x20) - 'a' + 10);
                v = v > 0x110000 ? v : v * (hex ? 16 : 10) + dig;
                k++;
            }
            if (k > d0) {
                cp = charref_cp(v);
                j = k + (k < n && s[k] == ';');
            }
        } else {
            size_t k = j;
            while (k < n && k - j < 32 && !strchr("\t\n\f <&#;", s[k]))
                k++;
            if (k < n && s[k] == ';' && (cp = entity_cp(s + j, k - j, 0)) >= 0) {
                j = k + 1;
            } else { /* the longest legacy name at the start, without ';' */
                cp = -2;
                for (size_t m = k - j; m >= 2 && cp == -2; m--)
                    if (entity_cp(s + j, m, 1) >= 0) {
                        cp = entity_cp(s + j, m, 1);
                        j += m;
                    }
            }
        }
        if (cp == -2) {
            out[o++] = s[i++];
            continue;
        }
        if (cp >= 0)
            o += put_utf8(out + o, (unsigned)cp);
        i = j;
    }
    out[o] = 0;
    return out;
}
