/*
 * documents.h - every file format behind one table: a row per format
 * (its extensions, the translated file's content type, its parse, its
 * segments, its render), and one document object every door uses the same
 * way, through the documents' entry point (docrun.h): LibreTranslate's
 * /translate_file, DeepL's /v2/document and `transformerd translate-file`.
 *
 *   srv_doc_format_of   the row of a file's extension (NULL: not supported)
 *   srv_doc_parse       the bytes into the format's segments
 *   srv_doc_seg ...     segment i's text, whether it is kept as it is (not
 *                       text: never translated nor detected) and whether
 *                       its translation needs the word alignment (styled)
 *   srv_doc_set         segment i's translation (with its alignment); a
 *                       segment never set is written as its source
 *   srv_doc_render      the translated file
 *
 * The rows' parsers are the formats' own files (catalog.c, po.c through
 * it, office.c with markdown.c and html.c, subtitles.c with cuetext.c);
 * plain text's lines are this file's. Knows no HTTP: a failure is an error
 * kind (errors.h) with why.
 *
 * Threads: a document belongs to one thread at a time (a document thread
 * for the parse and the render, docpool.h).
 */
#ifndef SRV_DOCUMENTS_H
#define SRV_DOCUMENTS_H

#include <stddef.h>

#include "errors.h"
#include "spans.h"

typedef struct srv_document srv_document;

/* A row of the table: a format. */
typedef struct srv_doc_format {
    const char *name;     /* "text", "subrip", "webvtt", "catalogue", "gettext", "office",
                             "markdown", "html" */
    const char *exts[6];  /* its extensions, lower case, NULL after the last */
    const char *ctype;    /* the translated file's Content-Type (NULL: by extension,
                             srv_office_mime) */
    int binary;           /* not checked as UTF-8: bytes (a zip archive), or a text in the
                             charset it names itself (a gettext catalogue's header) */
    int own_ext;          /* a stored translation keeps the upload's extension (else .txt) */
    int counts_lost;      /* reports the styles no word took (lostSpans) */
    int counts_kept;      /* reports the units left as they were (keptUnits) */
} srv_doc_format;

/* The row of ext (".docx", case-insensitive; from the name's last dot),
 * or NULL when no format has it. */
const srv_doc_format *srv_doc_format_of(const char *ext);

/* The translated file's Content-Type for row f and ext. */
const char *srv_doc_ctype(const srv_doc_format *f, const char *ext);

/* Every row's extensions, in the table's order, into out (up to max):
 * returns how many there are. */
int srv_doc_exts(const char **out, int max);

/* Options of a parse. */
typedef struct srv_doc_opts {
    int overwrite;        /* a catalogue: its translated units too */
    const char *target;   /* a catalogue's target language (its header, plural forms) */
} srv_doc_opts;

/* data (len bytes, which must outlive the document) as a document of row
 * f (ext: the upload's). SRV_OK, SRV_ERR_INVALID (not such a file, or a
 * bound broken: why), SRV_ERR_NOMEM or SRV_ERR_INTERNAL (why; a helper
 * process failing). */
srv_err srv_doc_parse(const srv_doc_format *f, const char *ext, const char *data, size_t len,
                      const srv_doc_opts *o, srv_document **out, char *why, size_t whylen);

int srv_doc_n(const srv_document *d);
/* Segment i's source text (len bytes). */
const char *srv_doc_seg(const srv_document *d, int i, size_t *len);
/* 1: segment i is not text (a subtitle file's numbers and timings): kept. */
int srv_doc_keep(const srv_document *d, int i);
/* 1: segment i's translation needs the word alignment (styles inside). */
int srv_doc_styled(const srv_document *d, int i);

/* Segment i's translation t (n bytes, NUL after them) with the alignment
 * of its sentences (al, n_al; NULL and 0 without). 0, -1 when out of
 * memory. */
int srv_doc_set(srv_document *d, int i, const char *t, size_t n, const srv_align *al, int n_al);

/* The translated file (malloc'd, *len bytes, NUL-terminated but for an
 * archive), or NULL with why (out of memory, a catalogue writer's reason). */
char *srv_doc_render(srv_document *d, size_t *len, char *why, size_t whylen);

/* The styles no word took (rows with counts_lost), the units left as they
 * were (counts_kept). */
int srv_doc_lost(const srv_document *d);
int srv_doc_kept(const srv_document *d);

void srv_doc_free(srv_document *d); /* accepts NULL */

#endif /* SRV_DOCUMENTS_H */
