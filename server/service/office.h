/*
 * office.h - documents in zip archives for /translate_file: Word and
 * PowerPoint (.docx, .pptx: Office Open XML), Writer and Impress (.odt,
 * .odp: OpenDocument) and e-books (.epub: XHTML), read with libzip and
 * libxml2 (no network, no DTD loaded, no external entity read; an
 * internal entity of plain text is its text); an .xhtml file is read the
 * same way as one part without an archive.
 *
 * Which entries are translated: .docx word/document.xml, headers,
 * footers, footnotes, endnotes and comments; .pptx slides and their
 * notes; .odt/.odp content.xml; .epub every (X)HTML entry. Every other
 * entry is copied into the answer as it is, compressed bytes and all,
 * never decompressed; the entries keep their order (an EPUB's or an
 * OpenDocument's mimetype first and stored).
 *
 * A paragraph (w:p, a:p, text:p/text:h, an XHTML block) is translated as
 * whole sentences. Its text is the text of its runs (w:r/a:r, text:span,
 * text:a, XHTML's inline elements: b, i, em, strong, a, code, span...);
 * each run's formatting (the chain of elements from the paragraph down
 * to its text, with their properties: w:rPr, a:rPr, attributes) is a
 * style, and the translation's words take the styles of the source words
 * they align with by attention (spans.h). A tab, a line break, or a nested
 * block (a table in a list item, a text box) ends a segment: the text on
 * either side is translated alone and the separator stays where it was.
 * Other inline objects (images, footnote marks, fields, bookmarks) are
 * kept and placed before the word they preceded (spans.h). Spelling marks
 * (w:proofErr) are dropped; a paragraph with nothing to translate (no
 * letter) is left untouched, byte for byte in its part's XML as libxml2
 * writes it.
 *
 * Bounds (before anything is expanded): at most SRV_OFFICE_MAX_ENTRIES
 * entries; each translated entry at most SRV_OFFICE_MAX_PART bytes once
 * decompressed, all of them SRV_OFFICE_MAX_TOTAL; an entry that inflates
 * past the size its header declares, or fails its CRC, is refused, and one
 * of SRV_XML_RATIO_FROM bytes or more inflating SRV_XML_MAX_RATIO times.
 * Bounds in work (xmllimits.h): attributes per element, nodes, text,
 * paragraphs, segments, counted before a part is parsed or while it is
 * read. Entry names are keys in the archive, never file system paths.
 */
#ifndef SRV_OFFICE_H
#define SRV_OFFICE_H

#include <stddef.h>

#include "spans.h"

#define SRV_OFFICE_MAX_ENTRIES 10000
#define SRV_OFFICE_MAX_PART (64u << 20)
#define SRV_OFFICE_MAX_TOTAL (128u << 20)

typedef struct srv_office srv_office;

/* The media type of a supported extension (".docx", case-insensitive), or
 * NULL when it is none of them. */
const char *srv_office_mime(const char *ext);

/* Reads data (len bytes, copied) as a document of kind ext. 0, -1 when out
 * of memory, -2 when it is not such a document or breaks a bound (why in
 * err). */
int srv_office_parse(const char *data, size_t len, const char *ext, srv_office **out, char *err,
                     size_t errlen);

/* Segments to translate, and segment i's text (its runs' text joined,
 * without the whitespace around it). */
int srv_office_n(const srv_office *d);
const char *srv_office_source(const srv_office *d, int i);

/* 1 when segment i has more than one style or an object inside: its
 * translation needs the alignment. */
int srv_office_styled(const srv_office *d, int i);

/* Segment i's translation t (of srv_office_source's text) with its
 * alignment (n_al sentences, offsets into the source text and t; NULL
 * and 0 without: every word then takes the base style). 0, or -1 when
 * out of memory. */
int srv_office_set(srv_office *d, int i, const char *t, const srv_align *al, int n_al);

/* Styles that found no word in the translations set so far (spans.h). */
int srv_office_lost(const srv_office *d);

/* The translated archive (malloc'd, *len bytes), or NULL (why in err). */
char *srv_office_render(srv_office *d, size_t *len, char *err, size_t errlen);

void srv_office_free(srv_office *d); /* accepts NULL */

#endif
