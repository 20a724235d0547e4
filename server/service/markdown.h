/*
 * markdown.h - Markdown files (.md, .markdown) for /translate_file, read
 * with cmark (CommonMark). Each paragraph and heading is translated as
 * whole sentences; its emphasis, strong emphasis and links carried to the
 * translation's words by attention (spans.h); code spans, images and
 * inline HTML kept verbatim and placed before the word they preceded; a
 * hard line break ends a segment. The translated content is written by
 * cmark's CommonMark writer in place of the block's own (a reference
 * link becomes an inline one); every other byte stays: code blocks, HTML
 * blocks, list markers, block quotes' markers, a YAML front matter, and a
 * GFM table (cmark reads it as a paragraph of '|' lines: left as it is).
 * The office.h interface serves it (office.c).
 */
#ifndef SRV_MARKDOWN_H
#define SRV_MARKDOWN_H

#include <stddef.h>

#include "spans.h"

typedef struct srv_md srv_md;

/* data: UTF-8 (the caller checks it: libre.c; other bytes are read as
 * they are). Lines end at CR, LF or CRLF, a NUL is read as U+FFFD (cmark's
 * rules); the bytes that are not translated come back as they are. 0, -1
 * when out of memory, -2 when a block's source position does not map to
 * the file (err says which; a bug of ours or of cmark's, never a copy). */
int srv_md_parse(const char *data, size_t len, srv_md **out, char *err, size_t errlen);
int srv_md_n(const srv_md *m);
const char *srv_md_source(const srv_md *m, int i);
int srv_md_styled(const srv_md *m, int i);
/* as srv_office_set; *lost: the styles it lost */
int srv_md_set(srv_md *m, int i, const char *t, const srv_align *al, int n_al, int *lost);
/* The file with the translations (malloc'd, *len); once (objects move
 * into the written blocks). NULL with the reason (err) when out of memory
 * or when a block's place in the file is out of order (never: srv_md_parse
 * refuses such a file; checked again before any byte is copied). */
char *srv_md_render(srv_md *m, size_t *len, char *err, size_t errlen);
void srv_md_free(srv_md *m); /* accepts NULL */

#endif
