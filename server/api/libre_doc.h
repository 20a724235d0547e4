/*
 * libre_doc.h - a LibreTranslate request's state (libre.c's): its items
 * and their segments; and its documents: an uploaded file made into items
 * through the documents table (service/documents.h: the parse) and the
 * translated file written back (the render).
 *
 * The parse and the render run on a document thread (docpool.h) while the
 * call is held (libre.c hands them out and answers after them): they touch
 * the request's state and its arena only, never its answer, which the
 * HTTP thread records once they are done.
 */
#ifndef SRV_LIBRE_DOC_H
#define SRV_LIBRE_DOC_H

#include <stddef.h>

#include <jansson.h>

#include "docpool.h"
#include "documents.h"
#include "html.h"
#include "request.h"

typedef struct libre_seg {
    const char *text;  /* its source text (alive as long as the request) */
    size_t len;
    int text_idx;      /* its index among the request's texts, -1: copied (source = target) */
    int keep;          /* not text: written back as it is, never translated nor detected */
} libre_seg;

typedef struct libre_item {
    srv_html *doc;     /* format html: the parsed document, else NULL */
    int seg0, n_segs;  /* a file's one item: every segment of its document */
    char lang[16];     /* source=auto: the detected language */
    double confidence;
} libre_item;

/* What the document threads do for a /translate_file request now. */
#define LIBRE_STEP_PARSE 0  /* the upload into items */
#define LIBRE_STEP_JOBS 1   /* (the model translates) */
#define LIBRE_STEP_RENDER 2 /* the translated file */

typedef struct srv_libre_req {
    json_t *fields;
    int list, autodetect, alternatives, html, is_file;
    libre_item *items;
    int n_items;
    libre_seg *segs;
    int n_segs, cap_segs;
    char file_name[128];   /* /translate_file: the stored name */
    const char *file_ctype;
    td_decode_opts span_opts; /* a document's styled segments: the attention they align by */
    /* /translate_file: the upload (its bytes in the body), its format's
     * row and the document parsed (documents.h) */
    const char *data;
    size_t len;
    const char *ext;
    const srv_doc_format *format;
    srv_document *file;
    int overwrite;
    const char *src, *tgt;
    char safe[80];         /* the file's name as messages say it */
    /* its steps on the document threads */
    int step;              /* LIBRE_STEP_* */
    srv_doc_task task;
    srv_doc_outcome outcome;
    int doc_rc;            /* the parse: 0, -1 (why, or out of memory), -2 refused (why) */
    char why[256];
    char *out;             /* the render: the translated file (malloc'd), or NULL (why) */
    size_t out_len;
} srv_libre_req;

/* A segment of text t (n bytes) after the others. 0, or -1 out of memory. */
int srv_libre_add_seg(srv_libre_req *lr, const char *t, size_t n);

/* The upload (lr->data, its format) into a document and its segments, one
 * item: 0; -1 out of memory or a failure (why, or empty); -2 refused (why). */
int srv_libre_file_items(srv_libre_req *lr, char *why, size_t whylen);

/* Item i's translated text (malloc'd, NUL-terminated) of a request's
 * texts (not a file), or NULL with why ("out of memory"). hyp > 0: an
 * alternative (plain text only). */
char *srv_libre_item_translation(srv_req *r, int i, int hyp, char *why, size_t whylen);

/* The translated file (malloc'd, *len bytes, NUL-terminated but for an
 * archive), or NULL with why. */
char *srv_libre_file_render(srv_req *r, size_t *len, char *why, size_t whylen);

#endif /* SRV_LIBRE_DOC_H */
