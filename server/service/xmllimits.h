/*
 * xmllimits.h - the bounds in work of the XML readers of /translate_file
 * (office.c: .docx .pptx .odt .odp .epub .xhtml .html; catalog.c: .ts,
 * XLIFF) and of format=html (html.c), on top of their bounds in bytes.
 *
 * libxml2 2.9 (Debian 12's 2.9.14) costs more than the bytes it reads in
 * three ways, each refused here before the parser sees the bytes:
 *   - an element's attributes: each one is appended at the end of the
 *     element's list by walking it, and HTML's parser compares every name
 *     with every other: quadratic in the attributes of one element (40,000
 *     in a 96 KB .docx took 38-63 s of CPU);
 *   - nodes: ~120-200 bytes of tree each (a `<a/>` of 4 bytes, an entity
 *     reference `&x;` of 3), plus the reader's own records per paragraph:
 *     a 60 MB part of digit-only paragraphs took 1.9 GB;
 *   - a DTD's attribute defaults are compared with every element's
 *     attributes, and parameter entities can carry such declarations.
 * srv_xml_scan counts, in one linear pass over the bytes, an upper bound
 * of what the parser will build (see xmllimits.c for why it is one, entity
 * values and character references included); srv_xml_check refuses what is
 * past the limits below. The text, the paragraphs and the segments are
 * counted by the readers as they go (SRV_XML_MAX_TEXT, _PARAS, _SEGMENTS).
 *
 * The numbers (docs/decisions.md, "Bounds in work of the XML readers";
 * tools/xml_stats.c measures a file): the largest real documents at hand
 * are 3-7x under every limit; a document at the node limit takes ~205 MiB
 * of the daemon's heap while it is read (tests/documents_memory.py).
 */
#ifndef SRV_XMLLIMITS_H
#define SRV_XMLLIMITS_H

#include <stddef.h>

/* Attributes (namespace declarations included) on one element. The most
 * in real documents: 33 (LibreOffice's content.xml root, its namespace
 * declarations), 18 (python-docx's Word template), under 10 elsewhere
 * (XHTML, SVG, XLIFF, TS, ISO 639-3's XML). 200: a margin of 6x; at the limit one element
 * costs 200^2/2 list steps, a document at SRV_XML_MAX_NODES all of such
 * elements ~2e8 (under 1 s). Below 255 (html_max_attrs counts in a byte). */
#define SRV_XML_MAX_ATTRS 200

/* Nodes of a document, all its parts together: markup ('<' of elements,
 * end tags, comments, PIs, CDATA), attributes and entity references, as
 * srv_xml_scan counts them. The largest real document at hand, Node.js's
 * whole API reference as one HTML page (8.4 MB, ~2,000 printed pages),
 * has 476,000. 2,000,000: a margin of 4x; a .docx at the limit (11 MB of
 * XML) took the daemon's RSS up 205 MiB while it was read. */
#define SRV_XML_MAX_NODES 2000000

/* Text of a document in bytes, its text nodes and substituted entities
 * (the readers copy it into segments). A 1,000-page book holds ~2.5 MB,
 * Node.js's reference 3.1 MB. 16 MiB: a margin of 5x. */
#define SRV_XML_MAX_TEXT (16u << 20)

/* Paragraphs of a document (office.c: every paragraph element read, with
 * or without a letter) and units of a catalogue. Node.js's reference has
 * 42,000 blocks, a 1,000-page book ~20,000 paragraphs. 200,000: 4.7x. */
#define SRV_XML_MAX_PARAS 200000

/* Segments (what is translated: paragraphs with a letter, split at tabs,
 * breaks and nested blocks). At the default --max-response-bytes a
 * request can return ~32,000 (reqlimits.c); the same 200,000 bound, so
 * that a document past it is refused before its translation is costed. */
#define SRV_XML_MAX_SEGMENTS 200000

/* An archive entry's inflated size over its compressed size. Real XML
 * deflates 3-8x (Node.js's reference 7x, freedesktop's MIME database 6x,
 * ISO 639-3 8x), Word's own styles.xml, the most repetitive part seen,
 * 32x; 100: a margin of 3x over it. A zip bomb of 60 MB of digit-only
 * paragraphs in 177 KB is 340x. Only for entries of SRV_XML_RATIO_FROM
 * bytes or more: a small part costs little whatever its ratio. */
#define SRV_XML_MAX_RATIO 100
#define SRV_XML_RATIO_FROM (1u << 20)

/* What srv_xml_scan counts: upper bounds of what libxml2 builds. */
typedef struct srv_xml_stats {
    size_t nodes;     /* '<', attributes, entity references (not &amp; &lt; &gt; &quot; &apos;) */
    size_t max_attrs; /* the most attributes one element can have */
    int attlist;      /* a <!ATTLIST declaration */
    int pe;           /* a parameter entity declared (<!ENTITY %) */
} srv_xml_stats;

/* Counts buf's n bytes (linear; never fails). */
void srv_xml_scan(const char *buf, size_t n, srv_xml_stats *st);

/* Scans buf and adds its nodes to *nodes (a document's running count,
 * parts together). 0; -1 out of memory; -2 with why in err (naming name
 * and the limit) when an element has more than SRV_XML_MAX_ATTRS
 * attributes, the document more than SRV_XML_MAX_NODES nodes, or (XML) a
 * DTD declares attribute defaults or parameter entities, which the
 * formats never need. html: buf is for libxml2's HTML parser (attributes
 * counted as it reads them; no DTD is read). */
int srv_xml_check(const char *buf, size_t n, int html, const char *name, size_t *nodes, char *err,
                  size_t errlen);

struct _xmlDoc;
/* An XML document read from buf (n bytes) after srv_xml_check: no
 * network, no DTD loaded, no external entity read; a reference to an
 * internal entity whose value is plain text (no markup, no reference) is
 * replaced by that text, so that it is translated where it stands. The
 * text (entities included) is added to *text (a running count) and
 * refused past SRV_XML_MAX_TEXT. 0 with *out, -1 out of memory, -2 not
 * well-formed or past a bound (err names name). */
int srv_xml_read(const char *buf, size_t n, const char *name, size_t *nodes, size_t *text,
                 struct _xmlDoc **out, char *err, size_t errlen);

/* Adds the text of the tree under node n (text and CDATA nodes) to *text;
 * -2 with err when past SRV_XML_MAX_TEXT. */
int srv_xml_count_text(void *n, const char *name, size_t *text, char *err, size_t errlen);

/* Hands the freed heap back to the system after a document of
 * SRV_XML_TRIM_FROM bytes of input or more (malloc_trim; glibc keeps the
 * pages of a large tree freed in small blocks otherwise: 5.3 GB stayed
 * resident after a refused document). */
#define SRV_XML_TRIM_FROM (1u << 20)
void srv_xml_trim(size_t input_bytes);

#endif /* SRV_XMLLIMITS_H */
