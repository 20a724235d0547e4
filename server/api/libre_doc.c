/*
 * libre_doc.c - a LibreTranslate request's items (libre_doc.h): their
 * segments, and their translations put back together (an HTML item's into
 * its document). The answer is libre.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "libre_doc.h"
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
