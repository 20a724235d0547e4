/*
 * html.h - format=html for the LibreTranslate endpoints: an HTML document
 * or fragment parsed by libxml2's HTML parser, its text nodes handed out as
 * segments to translate, and the markup (elements, attributes, comments,
 * script and style) written back around their translations.
 *
 * Promise: only text nodes change; a text node that is whitespace only, or
 * inside <script> / <style>, is not a segment. A segment is the node's text
 * without its leading and trailing whitespace, which srv_html_set keeps.
 *
 * Threads: an srv_html belongs to one thread at a time.
 */
#ifndef SRV_HTML_H
#define SRV_HTML_H

#include <stddef.h>

typedef struct srv_html srv_html;

/* Parses n bytes of UTF-8 HTML into *out: a whole document when it has an
 * <html> tag or a doctype, else a fragment (what a body would hold); a
 * DOCTYPE's internal subset is kept as written, not parsed. Returns 0; -1
 * when out of memory; -2 when the parser stopped before the end (elements
 * nested past its limit of 256), with why in err: the text cannot be
 * answered whole. *out is NULL unless 0. */
int srv_html_parse(const char *src, size_t n, srv_html **out, char *err, size_t errlen);

/* srv_html_parse without the segments: the tree alone, for a caller that
 * walks it (office.h's paragraphs of an .html file), changes it and
 * renders it with srv_html_render. */
int srv_html_parse_tree(const char *src, size_t n, srv_html **out, char *err, size_t errlen);
/* Where the content starts: a fragment's <body> (which the parser made
 * and srv_html_render leaves out), else the document's root element; its
 * siblings follow. NULL when the document has no element. */
struct _xmlNode *srv_html_top(const srv_html *h);

/* The number of segments, and segment i (NUL-terminated, owned by h). */
int srv_html_n_segments(const srv_html *h);
const char *srv_html_segment(const srv_html *h, int i);

/* Replaces segment i by text (copied); 0, or -1 when out of memory. */
int srv_html_set(srv_html *h, int i, const char *text);

/* The document (or fragment) serialized, malloc'd, NUL-terminated; NULL
 * when out of memory. */
char *srv_html_render(const srv_html *h);

/* A whole document (not a fragment) written as UTF-8 says so: its <meta
 * charset> or http-equiv Content-Type set to UTF-8, or a <meta
 * charset="utf-8"> added first in its <head> (made when there is none),
 * since a reader (lxml, a browser without a header) takes an undeclared
 * page for Latin-1. 0, or -1 when out of memory. */
int srv_html_declare_utf8(srv_html *h);

void srv_html_free(srv_html *h); /* accepts NULL */

/* s with its character references replaced as LibreTranslate replaces
 * them in its answers (Python's html.unescape): numeric ones (the
 * semicolon optional; 0x80..0x9F as windows-1252, invalid ones as U+FFFD
 * or dropped) and named ones with HTML 4's names and &apos; (without a
 * semicolon only the legacy names: the Latin-1 ones, amp, lt, gt, quot).
 * HTML 5's other names are left as written. malloc'd; NULL when out of
 * memory. */
char *srv_html_unescape(const char *s);

#endif /* SRV_HTML_H */
