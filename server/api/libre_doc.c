/*
 * libre_doc.c - a LibreTranslate request's documents (libre_doc.h): an
 * upload made into items through the documents table (documents.h), the
 * translated file written back. Runs on a document thread (docpool.h);
 * the answer is libre.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "libre_doc.h"
#include "spans.h"
#include "translate.h"

int srv_libre_add_seg(srv_libre_req *lr, const char *t, size_t n)
{
    if (lr->n_segs == lr->cap_segs) {
        int cap = lr->cap_segs ? lr->cap_segs * 2 : 16;
        libre_seg *p = realloc(lr->segs, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        lr->segs = p;
        lr->cap_segs = cap;
    }
    lr->segs[lr->n_segs++] = (libre_seg){.text = t, .len = n, .text_idx = -1};
    return 0;
}

/* ---- the parse ------------------------------------------------------------ */

int srv_libre_file_items(srv_libre_req *lr, char *why, size_t whylen)
{
    const srv_doc_opts o = {lr->overwrite, lr->tgt};
    switch (srv_doc_parse(lr->format, lr->ext, lr->data, lr->len, &o, &lr->file, why, whylen)) {
    case SRV_OK:
        break;
    case SRV_ERR_INVALID:
        return -2;
    default:
        return -1;
    }
    lr->items = calloc(1, sizeof *lr->items);
    if (!lr->items)
        return -1;
    lr->n_items = 1;
    for (int k = 0; k < srv_doc_n(lr->file); k++) {
        size_t n;
        const char *t = srv_doc_seg(lr->file, k, &n);
        if (srv_libre_add_seg(lr, t, n) != 0)
            return -1;
        lr->segs[k].keep = srv_doc_keep(lr->file, k);
        lr->items[0].n_segs++;
    }
    return 0;
}

/* ---- the render ----------------------------------------------------------- */

char *srv_libre_item_translation(srv_req *r, int i, int hyp, char *why, size_t whylen)
{
    snprintf(why, whylen, "out of memory");
    srv_libre_req *lr = r->state;
    libre_item *it = &lr->items[i];
    if (it->doc) {
        for (int k = 0; k < it->n_segs; k++) {
            const libre_seg *sg = &lr->segs[it->seg0 + k];
            if (sg->text_idx < 0)
                continue;
            json_t *v = srv_api_text_value(r, sg->text_idx, 0);
            int rc = !v ? -1 : srv_html_set(it->doc, k, json_string_value(v));
            json_decref(v);
            if (rc != 0)
                return NULL;
        }
        return srv_html_render(it->doc);
    }
    const libre_seg *sg = &lr->segs[it->seg0];
    json_t *v = NULL;
    const char *t = sg->text;
    size_t n = sg->len;
    if (sg->text_idx >= 0) {
        v = srv_api_text_value(r, sg->text_idx, hyp);
        if (!v)
            return NULL;
        t = json_string_value(v);
        n = json_string_length(v);
    }
    char *out = strndup(t, n);
    json_decref(v);
    return out;
}

char *srv_libre_file_render(srv_req *r, size_t *len, char *why, size_t whylen)
{
    srv_libre_req *lr = r->state;
    *len = 0;
    for (int k = 0; k < lr->n_segs; k++) {
        const libre_seg *sg = &lr->segs[k];
        if (sg->text_idx < 0)
            continue; /* copied (source = target) or kept: the source's */
        json_t *v = srv_api_text_value(r, sg->text_idx, 0);
        srv_align *al = NULL;
        int nb = v && srv_doc_styled(lr->file, k)
                     ? srv_api_text_align(r, sg->text_idx, sg->text, sg->len, &al)
                     : 0;
        int rc = v && nb >= 0 ? srv_doc_set(lr->file, k, json_string_value(v),
                                            json_string_length(v), al, nb)
                              : -1;
        srv_align_free(al, nb);
        json_decref(v);
        if (rc != 0) {
            snprintf(why, whylen, "out of memory");
            return NULL;
        }
    }
    return srv_doc_render(lr->file, len, why, whylen);
}
