/*
 * libre_doc.h - a LibreTranslate request's state (libre.c's): its items
 * (one per text of q) and their segments (the text itself, or the text
 * nodes of its HTML), and their translations put back together. An
 * uploaded file (/translate_file) is no item: it goes through the
 * documents' entry point (service/docrun.h), which libre.c starts with the
 * call held and answers after; the request keeps only its run and where
 * its result goes (the file store's name).
 */
#ifndef SRV_LIBRE_DOC_H
#define SRV_LIBRE_DOC_H

#include <stddef.h>

#include <jansson.h>

#include "docrun.h"
#include "html.h"
#include "request.h"

typedef struct libre_seg {
    const char *text;  /* its source text (alive as long as the request) */
    size_t len;
    int text_idx;      /* its index among the request's texts, -1: copied (source = target) */
} libre_seg;

typedef struct libre_item {
    srv_html *doc;     /* format html: the parsed document, else NULL */
    int seg0, n_segs;  /* a file's one item: every segment of its document */
    char lang[16];     /* source=auto: the detected language */
    double confidence;
} libre_item;

typedef struct srv_libre_req {
    json_t *fields;
    int list, autodetect, alternatives, html, is_file;
    libre_item *items;
    int n_items;
    libre_seg *segs;
    int n_segs, cap_segs;
    /* /translate_file: the stored name, its content type, the upload's name
     * as messages say it, and its run (docrun.h: its bytes in the body,
     * the call held until its done) */
    char file_name[128];
    const char *file_ctype;
    char safe[80];
    srv_doc_run *run;
} srv_libre_req;

/* A segment of text t (n bytes) after the others. 0, or -1 out of memory. */
int srv_libre_add_seg(srv_libre_req *lr, const char *t, size_t n);

/* Item i's translated text (malloc'd, NUL-terminated) of a request's
 * texts (not a file), or NULL with why ("out of memory"). hyp > 0: an
 * alternative (plain text only). */
char *srv_libre_item_translation(srv_req *r, int i, int hyp, char *why, size_t whylen);

#endif /* SRV_LIBRE_DOC_H */
