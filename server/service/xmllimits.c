/*
 * xmllimits.c - the bounds in work of the XML readers (xmllimits.h).
 *
 * XML (srv_xml_scan): attributes are counted between two literal '<'.
 * Every attribute libxml2 reads, in the document or in an entity's
 * replacement text, lies between its element's '<' and the next literal
 * '<' of the bytes: XML forbids a literal '<' in an attribute value (the
 * parser stops there), and an entity's replacement text is its literal in
 * the DTD with character references decoded, a start tag never spanning
 * two entities. So an '=' (written, or as &#61; / &#x3D;) followed by
 * white space and a quote (either written or as a reference) is counted,
 * and the most such in one window bounds any element's attributes. Text
 * with "='" counts too (an overestimate; real text has few). Nodes: each
 * literal '<' (and '<' as a reference, markup in an entity value), each
 * attribute and each general entity reference but the five predefined.
 *
 * HTML (html_max_attrs): libxml2's HTML parser reads a quoted attribute
 * value across '<' and '>', so windows do not bound it. Instead the
 * attribute loop of htmlParseStartTag (2.9.14) is replayed from every '<'
 * followed by a letter, whether or not the parser will take it for a tag
 * (inside a comment, a script or a value): one of them is each real tag,
 * so the largest count bounds every element. f[i], the attributes the
 * loop reads from position i on, is computed right to left in one pass
 * (each step of the loop moves forward and depends only on where it is),
 * saturated at 255 in one byte per input byte.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "xmllimits.h"

_Static_assert(SRV_XML_MAX_ATTRS < 255, "html_max_attrs saturates at 255");

static int is_blank(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The character at b[i] as the parser may see it in an entity's
 * replacement text: the byte, or a character reference's value; *len:
 * the bytes it takes. */
static unsigned long char_at(const char *b, size_t i, size_t n, size_t *len)
{
    *len = 1;
    if (b[i] != '&' || i + 2 >= n || b[i + 1] != '#')
        return (unsigned char)b[i];
    size_t k = i + 2;
    int hex = b[k] == 'x';
    k += (size_t)hex;
    size_t d0 = k;
    unsigned long v = 0;
    for (; k < n; k++) {
        unsigned char c = (unsigned char)b[k];
        unsigned d = c >= '0' && c <= '9'          ? (unsigned)(c - '0')
                     : hex && c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : hex && c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                   : 99;
        if (d == 99)
            break;
        v = v > 0x110000 ? v : v * (hex ? 16 : 10) + d;
    }
    if (k == d0 || k >= n || b[k] != ';')
        return '&';
    *len = k + 1 - i;
    return v;
}

static int name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == ':' || c == '-' || c == '.' || c >= 0x80;
}

/* &name; at b[i] (i at '&'): a general entity reference that makes a
 * node (not one of the five predefined ones). */
static int entity_ref(const char *b, size_t i, size_t n)
{
    size_t k = i + 1;
    while (k < n && k - i <= 64 && name_char((unsigned char)b[k]))
        k++;
    if (k == i + 1 || k >= n || b[k] != ';')
        return 0;
    static const char *const predef[] = {"amp", "lt", "gt", "quot", "apos"};
    for (size_t p = 0; p < 5; p++)
        if (k - i - 1 == strlen(predef[p]) && !memcmp(b + i + 1, predef[p], k - i - 1))
            return 0;
    return 1;
}

static int starts(const char *b, size_t i, size_t n, const char *s)
{
    size_t l = strlen(s);
    return i + l <= n && !memcmp(b + i, s, l);
}

static void xml_scan(const char *b, size_t n, srv_xml_stats *st)
{
    size_t attrs = 0; /* in the current window */
    for (size_t i = 0; i < n;) {
        if (b[i] == '<') {
            st->nodes++;
            attrs = 0;
            if (starts(b, i, n, "<!ATTLIST"))
                st->attlist = 1;
            if (starts(b, i, n, "<!ENTITY")) {
                size_t k = i + 8;
                while (k < n && is_blank((unsigned char)b[k]))
                    k++;
                if (k < n && b[k] == '%')
                    st->pe = 1;
            }
            i++;
            continue;
        }
        size_t len;
        unsigned long c = char_at(b, i, n, &len);
        if (c == '=') {
            size_t k = i + len, l2 = 1;
            unsigned long q = 0;
            while (k < n && ((q = char_at(b, k, n, &l2)) == ' ' || q == '\t' || q == '\n' ||
                             q == '\r'))
                k += l2;
            if (k < n && (q == '"' || q == '\'')) {
                st->nodes++;
                if (++attrs > st->max_attrs)
                    st->max_attrs = attrs;
            }
        } else if (c == '<') { /* &#60;: markup in an entity's value */
            st->nodes++;
        } else if (len == 1 && c == '&' && entity_ref(b, i, n)) {
            st->nodes++;
        }
        i += len;
    }
}

static int html_name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == ':' || c == '-' || c == '_' || c == '.';
}

/* The most attributes htmlParseStartTag can read for one element (see the
 * top; 255 means 255 or more), their sum over every '<' + letter into
 * *total and the '<' into *lt. -1 when out of memory. */
static long html_max_attrs(const char *b, size_t n, size_t *total, size_t *lt)
{
    uint8_t *f = malloc(n + 1);
    if (!f)
        return -1;
    f[n] = 0;
    /* the nearest positions at or after i, kept as i goes down */
    size_t dq1 = n, dq2 = n, sq1 = n, sq2 = n; /* the first and second '"', '\'' */
    size_t name_end = n;                     /* the end of the name characters at i */
    size_t garbage = n;                      /* the first blank, '>' or "/>" */
    size_t c_e = (size_t)-1, c_next = 0;     /* the last name's end and where it led */
    for (size_t i = n; i-- > 0;) {
        unsigned char c = (unsigned char)b[i];
        if (c == '"') {
            dq2 = dq1;
            dq1 = i;
        } else if (c == '\'') {
            sq2 = sq1;
            sq1 = i;
        }
        if (!html_name_char(c))
            name_end = i;
        int end = c == '>' || (c == '/' && i + 1 < n && b[i + 1] == '>');
        if (is_blank(c) || end)
            garbage = i;
        unsigned v;
        if (is_blank(c)) {
            v = f[i + 1]; /* SKIP_BLANKS */
        } else if (end) {
            v = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                   c == '.') {
            /* htmlParseAttribute: a name (htmlParseHTMLName takes at most
             * 100 characters), blanks, then maybe '=', blanks and a value */
            size_t e = name_end - i > 100 ? i + 100 : name_end, k = e;
            /* the up to 100 starts that end at one name's end are
             * consecutive here: what follows it is found once */
            while (e != c_e && k < n && is_blank((unsigned char)b[k]))
                k++;
            size_t next = e == c_e ? c_next : e; /* no '=': the loop goes on after the name */
            if (e != c_e && k < n && b[k] == '=') {
                size_t vv = k + 1;
                while (vv < n && is_blank((unsigned char)b[vv]))
                    vv++;
                if (vv >= n) {
                    next = n;
                } else if (b[vv] == '"' || b[vv] == '\'') {
                    /* the closing quote: the second one from i on (the
                     * name, blanks and '=' hold none) */
                    size_t close = b[vv] == '"' ? dq2 : sq2;
                    next = close >= n ? n : close + 1;
                } else { /* unquoted: up to a blank or '>' */
                    next = vv;
                    while (next < n && !is_blank((unsigned char)b[next]) && b[next] != '>')
                        next++;
                }
            }
            c_e = e;
            c_next = next;
            unsigned rest = next >= n ? 0 : f[next];
            v = rest + 1 > 255 ? 255 : rest + 1;
        } else { /* a bogus attribute: dumped up to a blank or the tag's end */
            v = garbage >= n ? 0 : f[garbage];
        }
        f[i] = (uint8_t)v;
    }
    /* every '<' + letter: its name (at most 100 characters), then the loop */
    long most = 0;
    for (size_t i = 0; i < n; i++) {
        if (b[i] != '<')
            continue;
        ++*lt;
        unsigned char c = i + 1 < n ? (unsigned char)b[i + 1] : 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            continue;
        size_t k = i + 1;
        while (k < n && k - (i + 1) < 100 && html_name_char((unsigned char)b[k]))
            k++;
        long a = k >= n ? 0 : f[k];
        *total += (size_t)a;
        if (a > most)
            most = a;
    }
    free(f);
    return most;
}

void srv_xml_scan(const char *buf, size_t n, srv_xml_stats *st)
{
    memset(st, 0, sizeof *st);
    xml_scan(buf, n, st);
}

int srv_xml_check(const char *buf, size_t n, int html, const char *name, size_t *nodes, char *err,
                  size_t errlen)
{
    srv_xml_stats st;
    if (html) { /* '<', and attributes as the HTML parser reads them */
        memset(&st, 0, sizeof st);
        size_t total = 0, lt = 0;
        long a = html_max_attrs(buf, n, &total, &lt);
        if (a < 0)
            return -1;
        st.max_attrs = (size_t)a;
        st.nodes = lt + total;
    } else {
        srv_xml_scan(buf, n, &st);
    }
    *nodes += st.nodes;
    if (st.max_attrs > SRV_XML_MAX_ATTRS) {
        snprintf(err, errlen,
                 "%s has an element with more than %d attributes (the limit on attributes "
                 "per element)",
                 name, SRV_XML_MAX_ATTRS);
        return -2;
    }
    if (*nodes > SRV_XML_MAX_NODES) {
        snprintf(err, errlen,
                 "%s makes the document more than %d nodes (elements, attributes, entity "
                 "references: the limit on nodes per document)",
                 name, SRV_XML_MAX_NODES);
        return -2;
    }
    if (st.attlist || st.pe) {
        snprintf(err, errlen, "%s declares %s in its DTD, which is not read", name,
                 st.attlist ? "attribute defaults (<!ATTLIST>)" : "parameter entities");
        return -2;
    }
    return 0;
}

/* ---- reading ---------------------------------------------------------------------- */

static int text_past(const char *name, size_t *text, size_t add, char *err, size_t errlen)
{
    *text += add;
    if (*text <= SRV_XML_MAX_TEXT)
        return 0;
    snprintf(err, errlen,
             "%s makes the document's text more than %u bytes (the limit on text per "
             "document)",
             name, SRV_XML_MAX_TEXT);
    return -2;
}

/* Counts the text under n's siblings from n on and replaces each
 * reference to an internal entity of plain text by its text. */
static int text_walk(xmlNodePtr n, const char *name, size_t *text, char *err, size_t errlen)
{
    for (xmlNodePtr next; n; n = next) {
        next = n->next;
        if (n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) {
            if (n->content && text_past(name, text, strlen((const char *)n->content), err, errlen))
                return -2;
        } else if (n->type == XML_ENTITY_REF_NODE) {
            xmlEntityPtr e = xmlGetDocEntity(n->doc, n->name);
            const char *v = e ? (const char *)e->content : NULL;
            if (!e || e->etype != XML_INTERNAL_GENERAL_ENTITY || !v || strpbrk(v, "<&"))
                continue; /* external, or markup or references inside: kept */
            if (text_past(name, text, strlen(v), err, errlen))
                return -2;
            xmlNodePtr t = xmlNewDocText(n->doc, (const xmlChar *)v);
            if (!t)
                return -1;
            xmlReplaceNode(n, t);
            xmlFreeNode(n);
        } else if (n->type == XML_ELEMENT_NODE) {
            int rc = text_walk(n->children, name, text, err, errlen);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int srv_xml_count_text(void *n, const char *name, size_t *text, char *err, size_t errlen)
{
    return text_walk(n, name, text, err, errlen);
}

int srv_xml_read(const char *buf, size_t n, const char *name, size_t *nodes, size_t *text,
                 xmlDocPtr *out, char *err, size_t errlen)
{
    *out = NULL;
    if (n > (size_t)INT32_MAX) {
        snprintf(err, errlen, "%s is too large", name);
        return -2;
    }
    int rc = srv_xml_check(buf, n, 0, name, nodes, err, errlen);
    if (rc)
        return rc;
    /* no XML_PARSE_NOENT (it would read external entities: files), no
     * DTD loaded, no network, no XML_PARSE_HUGE (libxml2's own limits:
     * depth 256, entity amplification) */
    xmlDocPtr doc = xmlReadMemory(buf, (int)n, NULL, "UTF-8",
                                  XML_PARSE_NONET | XML_PARSE_NOWARNING | XML_PARSE_NOERROR);
    if (!doc) {
        const xmlError *e = xmlGetLastError();
        snprintf(err, errlen, "%s is not well-formed XML%s%s", name,
                 e && e->message ? ": " : "", e && e->message ? e->message : "");
        size_t k = strlen(err);
        while (k && (err[k - 1] == '\n' || err[k - 1] == ' '))
            err[--k] = 0;
        return -2;
    }
    xmlNodePtr root = xmlDocGetRootElement(doc);
    rc = root ? text_walk(root->children, name, text, err, errlen) : 0;
    if (rc) {
        xmlFreeDoc(doc);
        return rc;
    }
    *out = doc;
    return 0;
}

void srv_xml_trim(size_t input_bytes)
{
    if (input_bytes >= SRV_XML_TRIM_FROM)
        malloc_trim(0);
}
