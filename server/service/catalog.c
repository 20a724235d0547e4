/*
 * catalog.c - Qt .ts and XLIFF catalogues with libxml2 (catalog.h).
 */
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "catalog.h"
#include "po.h"
#include "xmllimits.h"

enum { CAT_TS, CAT_XLIFF1, CAT_XLIFF2 };

typedef struct unit {
    xmlNodePtr owner;  /* <message>, <trans-unit> or <segment> */
    xmlNodePtr source;
    char *text;
} unit;

struct srv_catalog {
    xmlDocPtr doc;
    int kind;
    unit *u;
    int n, cap, kept;
    srv_po *po;       /* a gettext catalogue: its units (po.h) */
    size_t bytes;     /* the XML read (the heap given back after a large one) */
    char target[16];  /* the language it is translated into */
};

static int named(xmlNodePtr n, const char *name)
{
    return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

static xmlNodePtr child(xmlNodePtr n, const char *name)
{
    for (xmlNodePtr c = n ? n->children : NULL; c; c = c->next)
        if (named(c, name))
            return c;
    return NULL;
}

static int attr_is(xmlNodePtr n, const char *name, const char *value)
{
    xmlChar *v = xmlGetProp(n, (const xmlChar *)name);
    int is = v && !strcmp((const char *)v, value);
    xmlFree(v);
    return is;
}

/* The text of n when it has nothing but text (NULL otherwise), malloc'd. */
static char *plain_text(xmlNodePtr n)
{
    for (xmlNodePtr c = n->children; c; c = c->next)
        if (c->type != XML_TEXT_NODE && c->type != XML_CDATA_SECTION_NODE)
            return NULL;
    xmlChar *t = xmlNodeGetContent(n);
    char *s = t ? strdup((const char *)t) : strdup("");
    xmlFree(t);
    return s;
}

/* Whether n holds text that is not all white space. */
static int has_text(xmlNodePtr n)
{
    xmlChar *t = n ? xmlNodeGetContent(n) : NULL;
    int any = 0;
    for (const xmlChar *p = t; p && *p && !any; p++)
        any = !strchr(" \t\r\n", *p);
    xmlFree(t);
    return any;
}

static int translated(const srv_catalog *c, xmlNodePtr owner)
{
    if (c->kind == CAT_TS) {
        xmlNodePtr tr = child(owner, "translation");
        if (!tr)
            return 0;
        if (child(tr, "numerusform")) {
            for (xmlNodePtr f = tr->children; f; f = f->next)
                if (named(f, "numerusform") && has_text(f))
                    return 1;
            return 0;
        }
        return has_text(tr);
    }
    return has_text(child(owner, "target"));
}

/* 1 when the text holds a tag of escaped markup -- Qt's rich text
 * (`<html><head/><body><p><span style=...>`), HTML in a string: '<', an
 * optional '/', a letter, then a '>' before the next '<'. A model would
 * translate its element and attribute names as words. */
static int escaped_markup(const char *t)
{
    for (const char *p = strchr(t, '<'); p; p = strchr(p + 1, '<')) {
        const char *q = p + 1 + (p[1] == '/');
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')))
            continue;
        const char *gt = strchr(q, '>'), *lt = strchr(q, '<');
        if (gt && (!lt || gt < lt))
            return 1;
    }
    return 0;
}

static int add_unit(srv_catalog *c, xmlNodePtr owner, int overwrite)
{
    xmlNodePtr src = child(owner, "source");
    if (!src || (!overwrite && translated(c, owner)))
        return 0;
    if (c->kind == CAT_TS) {
        xmlNodePtr tr = child(owner, "translation");
        if (tr && (attr_is(tr, "type", "obsolete") || attr_is(tr, "type", "vanished")))
            return 0;
    }
    char *t = plain_text(src);
    if (!t || escaped_markup(t)) { /* markup in the source: left for a person */
        free(t);
        c->kept++;
        return 0;
    }
    if (!has_text(src)) {
        free(t);
        return 0;
    }
    if (c->n >= SRV_XML_MAX_PARAS) {
        free(t);
        return -2;
    }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        unit *u = realloc(c->u, (size_t)cap * sizeof *u);
        if (!u) {
            free(t);
            return -1;
        }
        c->u = u;
        c->cap = cap;
    }
    c->u[c->n++] = (unit){owner, src, t};
    return 0;
}

/* The units under n (and its siblings). XLIFF's translate="no" holds for
 * the element's whole content -- a <file>, a <group>, a unit -- until a
 * descendant says translate="yes" (XLIFF 2.0 states the inheritance; a 1.2
 * <group translate="no"> is meant so too): `no` is what n's parent says. */
static int walk(srv_catalog *c, xmlNodePtr n, int overwrite, int no)
{
    for (; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        int here = no;
        if (c->kind != CAT_TS && attr_is(n, "translate", "no"))
            here = 1;
        else if (c->kind != CAT_TS && attr_is(n, "translate", "yes"))
            here = 0;
        const char *want = c->kind == CAT_TS ? "message"
                           : c->kind == CAT_XLIFF1 ? "trans-unit"
                                                   : "segment";
        if (named(n, want)) {
            int rc = here ? 0 : add_unit(c, n, overwrite);
            if (rc != 0)
                return rc;
            continue;
        }
        int rc = walk(c, n->children, overwrite, here);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The language translated into, where each format keeps it: XLIFF 1.x's
 * <file target-language>, 2.0's <xliff trgLang>, Qt's <TS language>. */
static int set_target(srv_catalog *c)
{
    if (!c->target[0])
        return 0;
    xmlNodePtr root = xmlDocGetRootElement(c->doc);
    const xmlChar *lang = (const xmlChar *)c->target;
    if (c->kind == CAT_TS)
        return xmlSetProp(root, BAD_CAST "language", lang) ? 0 : -1;
    if (c->kind == CAT_XLIFF2)
        return xmlSetProp(root, BAD_CAST "trgLang", lang) ? 0 : -1;
    for (xmlNodePtr f = root ? root->children : NULL; f; f = f->next)
        if (named(f, "file") && !xmlSetProp(f, BAD_CAST "target-language", lang))
            return -1;
    return 0;
}

/* data whose first byte (after a byte order mark and spaces) is there
 * and not XML's '<': a gettext catalogue */
static int is_po(const char *data, size_t len)
{
    size_t i = len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3) ? 3 : 0;
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n'))
        i++;
    return i < len && data[i] != '<';
}

int srv_catalog_parse(const char *data, size_t len, int overwrite, srv_catalog **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    if (is_po(data, len)) {
        srv_catalog *c = calloc(1, sizeof *c);
        int rc = c ? srv_po_parse(data, len, overwrite, &c->po, err, errlen) : -1;
        if (rc != 0) {
            free(c);
            return rc;
        }
        snprintf(c->target, sizeof c->target, "en");
        *out = c;
        return 0;
    }
    /* bounded in work (xmllimits.h); an internal entity of plain text is
     * its text, nothing external is read */
    size_t nodes = 0, text = 0;
    xmlDocPtr doc;
    int rc = srv_xml_read(data, len, "the catalogue", &nodes, &text, &doc, err, errlen);
    if (rc != 0) {
        srv_xml_trim(len);
        return rc;
    }
    xmlNodePtr root = xmlDocGetRootElement(doc);
    int kind = -1;
    if (named(root, "TS"))
        kind = CAT_TS;
    else if (named(root, "xliff") && (attr_is(root, "version", "1.2") ||
                                      attr_is(root, "version", "1.1") ||
                                      attr_is(root, "version", "1.0")))
        kind = CAT_XLIFF1; /* 1.0 and 1.1 units as 1.2's */
    else if (named(root, "xliff") && attr_is(root, "version", "2.0"))
        kind = CAT_XLIFF2;
    if (kind < 0) {
        snprintf(err, errlen, "not a Qt TS or XLIFF 1.x/2.0 document (root <%s>)",
                 root ? (const char *)root->name : "none");
        xmlFreeDoc(doc);
        return -2;
    }
    srv_catalog *c = calloc(1, sizeof *c);
    if (!c) {
        xmlFreeDoc(doc);
        return -1;
    }
    c->doc = doc;
    c->kind = kind;
    c->bytes = len;
    if ((rc = walk(c, root->children, overwrite, 0)) != 0) {
        if (rc == -2)
            snprintf(err, errlen, "more than %d units to translate (the limit per catalogue)",
                     SRV_XML_MAX_PARAS);
        srv_catalog_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int srv_catalog_n(const srv_catalog *c)
{
    return c->po ? srv_po_n(c->po) : c->n;
}

const char *srv_catalog_source(const srv_catalog *c, int i)
{
    return c->po ? srv_po_source(c->po, i) : c->u[i].text;
}

int srv_catalog_kept(const srv_catalog *c)
{
    return c->kept;
}

/* ---- placeholders --------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ident_char(char c)
{
    return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The length of the placeholder at p (0: none): printf's, Python's
 * %(name)s, Qt's %1 %n %L1, {0} {name}, Twig's and Symfony's {{ name }}
 * ({{ limit|number }}), Symfony's %name%, Ruby on Rails' %{name}, ${name}. */
static size_t placeholder_at(const char *p)
{
    if (p[0] == '{' && p[1] == '{') { /* {{ name }}: one line, at most 80 bytes */
        size_t k = 2;
        while (p[k] && p[k] != '{' && p[k] != '}' && p[k] != '\n' && k < 80)
            k++;
        return p[k] == '}' && p[k + 1] == '}' ? k + 2 : 0;
    }
    if ((p[0] == '%' || p[0] == '$') && p[1] == '{') { /* %{name}, ${name} */
        size_t k = 2;
        while (ident_char(p[k]))
            k++;
        return k > 2 && p[k] == '}' ? k + 1 : 0;
    }
    if (p[0] == '%' && ident_char(p[1]) && !(p[1] >= '0' && p[1] <= '9')) { /* %name% */
        size_t k = 1;
        while (ident_char(p[k]))
            k++;
        if (k > 2 && p[k] == '%')
            return k + 1;
    }
    if (p[0] == '{') { /* {0}, {name} */
        size_t k = 1;
        while (p[k] && (p[k] == '_' || (p[k] >= '0' && p[k] <= '9') || (p[k] >= 'a' && p[k] <= 'z') ||
                        (p[k] >= 'A' && p[k] <= 'Z')))
            k++;
        return p[k] == '}' ? k + 1 : 0;
    }
    if (p[0] != '%' || !p[1] || p[1] == '%')
        return 0;
    size_t k = 1;
    if (p[k] == '(') { /* %(name)s */
        while (p[k] && p[k] != ')')
            k++;
        if (!p[k])
            return 0;
        k++;
    } else if (p[k] == 'L' && p[k + 1] >= '1' && p[k + 1] <= '9') { /* Qt %L1 */
        k++;
    }
    if (p[k] >= '1' && p[k] <= '9') { /* %1 (Qt), %1$d (positional printf) */
        size_t d = k;
        while (p[d] >= '0' && p[d] <= '9')
            d++;
        if (p[d] != '$')
            return d;
        k = d + 1;
    }
    /* flags, not the space: "100 % sicher" is German for "100% sure" */
    while (p[k] && strchr("-+#0'", p[k]))
        k++;
    while (p[k] >= '0' && p[k] <= '9')
        k++;
    if (p[k] == '.') {
        k++;
        while (p[k] >= '0' && p[k] <= '9')
            k++;
    }
    while (p[k] && strchr("hlLqjzt", p[k]))
        k++;
    return p[k] && strchr("diouxXeEfFgGaAcspn", p[k]) ? k + 1 : 0;
}

int srv_catalog_placeholders(const char *t, char *buf, size_t n)
{
    size_t cnt = 0, cap = 16;
    char **ph = malloc(cap * sizeof *ph);
    int rc = ph ? 0 : -1;
    for (const char *p = t; rc == 0 && *p;) {
        if (p[0] == '%' && p[1] == '%') {
            p += 2;
            continue;
        }
        size_t k = placeholder_at(p);
        if (!k) {
            p++;
            continue;
        }
        if (cnt == cap) {
            char **q = realloc(ph, (cap *= 2) * sizeof *ph);
            if (!q) {
                rc = -1;
                break;
            }
            ph = q;
        }
        if (!(ph[cnt++] = strndup(p, k)))
            rc = -1;
        p += k;
    }
    if (rc == 0)
        qsort(ph, cnt, sizeof *ph, cmp_str);
    size_t w = 0;
    for (size_t i = 0; rc == 0 && i < cnt; i++) {
        size_t l = strlen(ph[i]);
        if (w + l + 2 > n) {
            rc = -1;
            break;
        }
        memcpy(buf + w, ph[i], l);
        w += l;
        buf[w++] = '\x1f';
    }
    if (n)
        buf[rc == 0 ? w : 0] = 0;
    for (size_t i = 0; ph && i < cnt; i++)
        free(ph[i]);
    free(ph);
    return rc;
}

/* ---- writing -------------------------------------------------------------- */

static void set_text(xmlNodePtr n, const char *t)
{
    xmlNodeSetContent(n, NULL);
    xmlNodeAddContent(n, (const xmlChar *)t);
}

/* A <name> element (in n's namespace) right after n, or n's own. */
static xmlNodePtr target_after(xmlNodePtr owner, xmlNodePtr src, const char *name)
{
    xmlNodePtr t = child(owner, name);
    if (t)
        return t;
    t = xmlNewDocNode(owner->doc, src->ns, (const xmlChar *)name, NULL);
    if (!t)
        return NULL;
    return xmlAddNextSibling(src, t);
}

int srv_catalog_set(srv_catalog *c, int i, const char *t)
{
    char a[1024], b[1024];
    if (srv_catalog_placeholders(srv_catalog_source(c, i), a, sizeof a) != 0 ||
        srv_catalog_placeholders(t, b, sizeof b) != 0 || strcmp(a, b) != 0) {
        c->kept++; /* a placeholder lost or made up: left for a person */
        return 0;
    }
    if (c->po)
        return srv_po_set(c->po, i, t) == 0 ? 1 : -1;
    unit *u = &c->u[i];
    if (c->kind == CAT_TS) {
        xmlNodePtr tr = target_after(u->owner, u->source, "translation");
        if (!tr)
            return -1;
        int forms = 0;
        for (xmlNodePtr f = tr->children; f; f = f->next)
            if (named(f, "numerusform")) {
                set_text(f, t);
                forms++;
            }
        if (!forms && attr_is(u->owner, "numerus", "yes")) {
            for (int k = 0; k < 2; k++) /* German and English: two forms */
                if (!xmlNewTextChild(tr, NULL, (const xmlChar *)"numerusform",
                                     (const xmlChar *)"") )
                    return -1;
            for (xmlNodePtr f = tr->children; f; f = f->next)
                if (named(f, "numerusform"))
                    set_text(f, t);
        } else if (!forms) {
            set_text(tr, t);
        }
        xmlSetProp(tr, (const xmlChar *)"type", (const xmlChar *)"unfinished");
        return 1;
    }
    xmlNodePtr tg = target_after(u->owner, u->source, "target");
    if (!tg)
        return -1;
    set_text(tg, t);
    if (c->kind == CAT_XLIFF1)
        xmlSetProp(tg, (const xmlChar *)"state", (const xmlChar *)"needs-review-translation");
    else
        xmlSetProp(u->owner, (const xmlChar *)"state", (const xmlChar *)"translated");
    return 1;
}

void srv_catalog_target(srv_catalog *c, const char *lang)
{
    snprintf(c->target, sizeof c->target, "%s", lang);
}

char *srv_catalog_render(srv_catalog *c, size_t *len, char *err, size_t errlen)
{
    if (c->po)
        return srv_po_render(c->po, c->target, len, err, errlen);
    snprintf(err, errlen, "out of memory");
    if (set_target(c) != 0)
        return NULL;
    xmlChar *buf = NULL;
    int n = 0;
    xmlDocDumpMemoryEnc(c->doc, &buf, &n, "UTF-8");
    if (!buf)
        return NULL;
    char *out = malloc((size_t)n + 1);
    if (out) {
        memcpy(out, buf, (size_t)n);
        out[n] = 0;
        *len = (size_t)n;
    }
    xmlFree(buf);
    return out;
}

void srv_catalog_free(srv_catalog *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        free(c->u[i].text);
    free(c->u);
    xmlFreeDoc(c->doc);
    srv_po_free(c->po);
    size_t bytes = c->bytes;
    free(c);
    srv_xml_trim(bytes);
}
