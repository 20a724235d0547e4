/*
 * libre_doc.c - a LibreTranslate request's documents (libre_doc.h): an
 * upload made into items, the translated file written back. Runs on a
 * document thread (docpool.h); the answer is libre.c's.
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

/* A .txt file's lines as items: each line one segment without the
 * whitespace around it, which is written back as it was. */
static int txt_items(srv_libre_req *lr, const char *data, size_t len)
{
    int n = 1;
    for (size_t i = 0; i < len; i++)
        n += data[i] == '\n';
    lr->items = calloc((size_t)n, sizeof *lr->items);
    if (!lr->items)
        return -1;
    const char *p = data, *end = data + len;
    while (p < end || lr->n_items == 0) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        libre_item *it = &lr->items[lr->n_items++];
        it->eol = nl ? (le > p && le[-1] == '\r' ? "\r\n" : "\n") : "";
        if (nl && le > p && le[-1] == '\r')
            le--;
        const char *a = p, *b = le;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        it->lead = p;
        it->lead_n = (size_t)(a - p);
        it->trail = b;
        it->trail_n = (size_t)(le - b);
        it->seg0 = lr->n_segs;
        it->n_segs = 1;
        if (srv_libre_add_seg(lr, a, (size_t)(b - a)) != 0)
            return -1;
        p = nl ? nl + 1 : end;
        if (!nl)
            break;
    }
    return 0;
}

/* A subtitle file's pieces (subtitles.h) as items: a cue's text one
 * segment, everything else a segment kept as it is. 0, -1 when out of
 * memory, -2 when it is no subtitle file (why in err). */
static int subtitle_items(srv_libre_req *lr, const char *data, size_t len, char *err,
                          size_t errlen)
{
    int cues = 0;
    int rc = srv_subtitles_parse(data, len, &lr->subs, &lr->n_subs, &cues, err, errlen);
    if (rc != 0)
        return rc;
    lr->items = calloc((size_t)lr->n_subs, sizeof *lr->items);
    if (!lr->items)
        return -1;
    for (int i = 0; i < lr->n_subs; i++) {
        srv_sub_piece *p = &lr->subs[i];
        libre_item *it = &lr->items[lr->n_items++];
        it->sub = p;
        it->seg0 = lr->n_segs;
        it->n_segs = 1;
        if (p->verbatim ? srv_libre_add_seg(lr, p->verbatim, p->verbatim_len)
                        : srv_libre_add_seg(lr, p->text, p->text_len))
            return -1;
        lr->segs[it->seg0].keep = p->verbatim != NULL;
    }
    return 0;
}

/* ---- the parse ------------------------------------------------------------ */

int srv_libre_file_items(srv_libre_req *lr, char *why, size_t whylen)
{
    if (lr->srt || lr->vtt)
        return subtitle_items(lr, lr->data, lr->len, why, whylen);
    if (!lr->cat && !lr->office)
        return txt_items(lr, lr->data, lr->len);
    /* one item, a segment a unit (catalog.h, office.h) */
    lr->items = calloc(1, sizeof *lr->items);
    libre_item *it = lr->items;
    if (!it)
        return -1;
    lr->n_items = 1;
    int rc = lr->office ? srv_office_parse(lr->data, lr->len, lr->ext, &it->office, why, whylen)
                        : srv_catalog_parse(lr->data, lr->len, lr->overwrite, &it->cat, why,
                                            whylen);
    if (rc == 0 && it->cat)
        srv_catalog_target(it->cat, lr->tgt);
    int n = rc ? 0 : lr->office ? srv_office_n(it->office) : srv_catalog_n(it->cat);
    for (int k = 0; rc == 0 && k < n; k++) {
        const char *u = lr->office ? srv_office_source(it->office, k)
                                   : srv_catalog_source(it->cat, k);
        rc = srv_libre_add_seg(lr, u, strlen(u));
        it->n_segs++;
    }
    return rc;
}

/* ---- the render ----------------------------------------------------------- */

/* A cue's translation t (n bytes) with its markup: tags inside its text
 * placed by the alignment of the sentences translated (none when the text
 * was copied); the tags no word took counted in lr->lost_spans. */
static char *sub_render(srv_req *r, libre_item *it, const libre_seg *sg, const char *t,
                        size_t n)
{
    srv_libre_req *lr = r->state;
    srv_align *al = NULL;
    int nb = sg->text_idx >= 0 && srv_subtitles_styled(it->sub)
                 ? srv_api_text_align(r, sg->text_idx, sg->text, sg->len, &al)
                 : 0;
    int lost = 0;
    char *out = nb >= 0 ? srv_subtitles_render(it->sub, t, n, al, nb, &lost) : NULL;
    srv_align_free(al, nb);
    lr->lost_spans += lost;
    return out;
}

char *srv_libre_item_translation(srv_req *r, int i, int hyp, char *why, size_t whylen)
{
    snprintf(why, whylen, "out of memory");
    srv_libre_req *lr = r->state;
    libre_item *it = &lr->items[i];
    if (it->doc || it->cat) {
        for (int k = 0; k < it->n_segs; k++) {
            const libre_seg *sg = &lr->segs[it->seg0 + k];
            if (sg->text_idx < 0)
                continue;
            json_t *v = srv_api_text_value(r, sg->text_idx, 0);
            int rc = !v ? -1
                     : it->doc ? srv_html_set(it->doc, k, json_string_value(v))
                               : srv_catalog_set(it->cat, k, json_string_value(v)) < 0;
            json_decref(v);
            if (rc != 0)
                return NULL;
        }
        size_t n;
        return it->doc ? srv_html_render(it->doc) : srv_catalog_render(it->cat, &n, why, whylen);
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
    if (it->sub) { /* a subtitle file: its bytes, or a cue's lines again */
        char *out = it->sub->verbatim ? strndup(t, n) : sub_render(r, it, sg, t, n);
        json_decref(v);
        return out;
    }
    size_t a = lr->is_file ? it->lead_n : 0, c = lr->is_file ? it->trail_n : 0;
    size_t e = it->eol ? strlen(it->eol) : 0;
    char *out = malloc(a + n + c + e + 1);
    if (out) {
        if (a) /* lead and trail are NULL outside files */
            memcpy(out, it->lead, a);
        memcpy(out + a, t, n);
        if (c)
            memcpy(out + a + n, it->trail, c);
        memcpy(out + a + n + c, it->eol ? it->eol : "", e + 1);
    }
    json_decref(v);
    return out;
}

/* A document's translated archive (office.h), or NULL with why. */
static char *office_file(srv_req *r, size_t *len, char *why, size_t whylen)
{
    srv_libre_req *lr = r->state;
    const libre_item *it = &lr->items[0];
    for (int k = 0; k < it->n_segs; k++) {
        const libre_seg *sg = &lr->segs[it->seg0 + k];
        if (sg->text_idx < 0)
            continue;
        json_t *v = srv_api_text_value(r, sg->text_idx, 0);
        srv_align *al = NULL;
        int nb = v && srv_office_styled(it->office, k)
                     ? srv_api_text_align(r, sg->text_idx, sg->text, sg->len, &al)
                     : 0;
        int rc = v && nb >= 0 ? srv_office_set(it->office, k, json_string_value(v), al, nb) : -1;
        srv_align_free(al, nb);
        json_decref(v);
        if (rc != 0) {
            snprintf(why, whylen, "out of memory");
            return NULL;
        }
    }
    return srv_office_render(it->office, len, why, whylen);
}

char *srv_libre_file_render(srv_req *r, size_t *len, char *why, size_t whylen)
{
    srv_libre_req *lr = r->state;
    size_t cap = 4096;
    *len = 0;
    if (lr->n_items == 1 && lr->items[0].office)
        return office_file(r, len, why, whylen);
    char *out = malloc(cap);
    snprintf(why, whylen, "out of memory");
    for (int i = 0; out && i < lr->n_items; i++) {
        char *t = srv_libre_item_translation(r, i, 0, why, whylen);
        size_t n = t ? strlen(t) : 0;
        if (t && *len + n + 1 > cap) {
            while (*len + n + 1 > cap)
                cap *= 2;
            char *p = realloc(out, cap);
            if (!p) {
                free(t);
                free(out);
                out = NULL;
                break;
            }
            out = p;
        }
        if (!t) {
            free(out);
            out = NULL;
            break;
        }
        memcpy(out + *len, t, n);
        *len += n;
        free(t);
    }
    if (!out) /* why: the item's reason (a catalogue's writer), else out of memory */
        return NULL;
    out[*len] = 0;
    return out;
}
