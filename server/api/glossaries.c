/*
 * glossaries.c - the glossary routes every dialect shares, in DeepL's
 * shapes (docs/api.md, "Glossaries"): /v2/glossaries (one language pair a
 * glossary), /v3/glossaries (a glossary of dictionaries, one per pair),
 * /v2/glossary-language-pairs; v3's edits (PATCH a glossary, PUT and
 * DELETE a dictionary). The store is service/glossary.h's; its
 * error kinds (errors.h) become DeepL's codes here, errors DeepL's
 * {"message", "detail"} with the field named in detail.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "form.h"
#include "glossaries.h"
#include "glossary.h"
#include "langcodes.h"
#include "models.h"

#define V2 "/v2/glossaries"
#define V3 "/v3/glossaries"

/* A DeepL error: status, its short message, and detail. */
static void gl_error(srv_req *r, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void gl_error(srv_req *r, int status, const char *fmt, ...)
{
    char detail[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    const char *m = status == 400   ? "Bad request"
                    : status == 404 ? "Not found"
                    : status == 413 ? "Request Entity Too Large"
                    : status == 456 ? "Quota exceeded"
                                    : "Internal server error";
    json_t *o = json_pack("{s:s, s:s}", "message", m, "detail", detail);
    if (!o) /* detail not UTF-8: the ids and codes a client sent */
        o = json_pack("{s:s}", "message", m);
    srv_req_object(r, status, o);
}

/* The status of a store result (glossary.h's kinds; DeepL's 456 for the
 * glossary quota, 413 for a glossary over its bounds). */
static int gl_status(srv_err e)
{
    switch (e) {
    case SRV_OK: return 200;
    case SRV_ERR_INVALID: return 400;
    case SRV_ERR_NOT_FOUND: return 404;
    case SRV_ERR_NO_ROOM: return 456;
    case SRV_ERR_TOO_LONG: return 413;
    default: return 500;
    }
}

static json_t *dict_json(const srv_gloss_dict *d, int entries)
{
    return entries ? json_pack("{s:s, s:s, s:s%, s:s}", "source_lang", d->src_lang, "target_lang",
                               d->tgt_lang, "entries", d->tsv, d->tsv_n, "entries_format", "tsv")
                   : json_pack("{s:s, s:s, s:i}", "source_lang", d->src_lang, "target_lang",
                               d->tgt_lang, "entry_count", d->n);
}

/* A glossary's information: v2 (its first dictionary's pair and count) or
 * v3 (its dictionaries). */
static json_t *info_json(const srv_glossary *g, int v3)
{
    json_t *o = json_pack("{s:s, s:s, s:s}", "glossary_id", g->id, "name", g->name,
                          "creation_time", g->created);
    if (!o)
        return NULL;
    if (!v3) {
        json_object_set_new(o, "ready", json_true());
        json_object_set_new(o, "source_lang", json_string(g->d[0].src_lang));
        json_object_set_new(o, "target_lang", json_string(g->d[0].tgt_lang));
        json_object_set_new(o, "entry_count", json_integer(g->d[0].n));
        return o;
    }
    json_t *ds = json_array();
    for (int i = 0; ds && i < g->n_dicts; i++)
        json_array_append_new(ds, dict_json(&g->d[i], 0));
    json_object_set_new(o, "dictionaries", ds ? ds : json_null());
    return o;
}

/* The glossary of a path PREFIX/ID[/entries], or NULL (its error answered:
 * 404 for an id the store lacks). */
static srv_glossary *path_glossary(srv_req *r, const char *prefix)
{
    const char *p = r->path + strlen(prefix) + 1;
    size_t n = strcspn(p, "/");
    char id[72], msg[128]; /* longer than any id: the store's message names 64 bytes */
    snprintf(id, sizeof id, "%.*s", (int)(n < sizeof id - 1 ? n : sizeof id - 1), p);
    srv_glossary *g = NULL;
    srv_err e = srv_glossaries_get(r->s->glossaries, id, &g, msg, sizeof msg);
    if (e != SRV_OK)
        gl_error(r, gl_status(e), "glossary_id: %s", msg);
    return g;
}

static int is_v3(const srv_req *r)
{
    return !strncmp(r->path, V3, strlen(V3));
}

/* ---- create ----------------------------------------------------------------- */

/* A string field of o, or NULL when it is absent (a 400 naming it when it
 * is there but not a string, null included: DeepL's optional fields are
 * left out, never null). *bad set on that 400. */
static const char *str_field(srv_req *r, json_t *o, const char *key, int *bad)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return NULL;
    if (!json_is_string(v)) {
        gl_error(r, 400, "%s must be a string", key);
        *bad = 1;
        return NULL;
    }
    return json_string_value(v);
}

/* One dictionary's fields of o into in; 0, or -1 with a 400. */
static int dict_input(srv_req *r, json_t *o, srv_gloss_input *in)
{
    int bad = 0;
    static const char *const k_need[] = {"source_lang", "target_lang", "entries"};
    for (size_t i = 0; i < 3; i++)
        if (!json_is_string(json_object_get(o, k_need[i]))) {
            gl_error(r, 400, "%s: a string is required", k_need[i]);
            return -1;
        }
    in->src_lang = str_field(r, o, "source_lang", &bad);
    in->tgt_lang = str_field(r, o, "target_lang", &bad);
    in->entries = str_field(r, o, "entries", &bad);
    in->entries_n = json_string_length(json_object_get(o, "entries"));
    in->format = str_field(r, o, "entries_format", &bad);
    return bad ? -1 : 0;
}

/* The dictionaries of ds (an array of at most SRV_GLOSS_MAX_DICTS) into
 * in: their count, or -1 with a 400 naming the one at fault. */
static int dicts_input(srv_req *r, json_t *ds, srv_gloss_input *in)
{
    int n = 0;
    for (size_t i = 0; i < json_array_size(ds); i++) {
        json_t *d = json_array_get(ds, i);
        if (!json_is_object(d)) {
            gl_error(r, 400, "dictionaries[%zu]: an object is required", i);
            return -1;
        }
        if (dict_input(r, d, &in[n++]) != 0)
            return -1;
    }
    return n;
}

static srv_call_next gl_create(srv_req *r)
{
    srv_form_file file = {0};
    int is_json = 0;
    json_t *o = srv_form_fields(r, srv_call_header(r->call, "Content-Type"), &file, &is_json);
    if (!o)
        return SRV_NEXT_ANSWERED;
    const int v3 = is_v3(r);
    srv_gloss_input in[SRV_GLOSS_MAX_DICTS];
    int n = 0, bad = 0;
    const char *name = str_field(r, o, "name", &bad);
    if (bad)
        goto out;
    if (!name) {
        gl_error(r, 400, "name: a glossary needs a name");
        goto out;
    }
    if (v3) {
        json_t *ds = json_object_get(o, "dictionaries");
        if (!json_is_array(ds) || json_array_size(ds) == 0 ||
            json_array_size(ds) > SRV_GLOSS_MAX_DICTS) {
            gl_error(r, 400, "dictionaries: an array of 1 to %d dictionaries is required",
                     SRV_GLOSS_MAX_DICTS);
            goto out;
        }
        if ((n = dicts_input(r, ds, in)) < 0)
            goto out;
    } else if (dict_input(r, o, &in[n++]) != 0) {
        goto out;
    }
    const char *param = NULL;
    char msg[512];
    srv_glossary *g = NULL;
    srv_err e = srv_glossaries_create(r->s->glossaries, name, in, n, &g, &param, msg, sizeof msg);
    if (e != SRV_OK) {
        if (param && strncmp(msg, param, strlen(param)) != 0 && strncmp(msg, "entries", 7) != 0)
            gl_error(r, gl_status(e), "%s: %s", param, msg);
        else
            gl_error(r, gl_status(e), "%s", msg);
        goto out;
    }
    srv_req_object(r, 201, info_json(g, v3));
    srv_glossary_put(g);
out:
    json_decref(o);
    return SRV_NEXT_ANSWERED;
}

/* ---- read and delete ---------------------------------------------------------- */

static void gl_list(srv_req *r)
{
    srv_glossary **all = NULL;
    int n = srv_glossaries_list(r->s->glossaries, &all);
    json_t *a = n >= 0 ? json_array() : NULL;
    for (int i = 0; i < n; i++) {
        if (a)
            json_array_append_new(a, info_json(all[i], is_v3(r)));
        srv_glossary_put(all[i]);
    }
    free(all);
    srv_req_object(r, 200, a ? json_pack("{s:o}", "glossaries", a) : NULL);
}

static void gl_get(srv_req *r)
{
    srv_glossary *g = path_glossary(r, is_v3(r) ? V3 : V2);
    if (!g)
        return;
    srv_req_object(r, 200, info_json(g, is_v3(r)));
    srv_glossary_put(g);
}

/* A query parameter's value (decoded enough for language codes) into out. */
static int query_param(const srv_req *r, const char *key, char *out, size_t n)
{
    size_t k = strlen(key);
    for (const char *q = r->query; q && *q;) {
        const char *end = q + strcspn(q, "&");
        if ((size_t)(end - q) > k && !strncmp(q, key, k) && q[k] == '=') {
            size_t len = (size_t)(end - q) - k - 1;
            if (len >= n)
                return -1;
            memcpy(out, q + k + 1, len);
            out[len] = 0;
            return 0;
        }
        q = *end ? end + 1 : end;
    }
    return -1;
}

/* v2: the entries as TSV; v3: {"dictionaries": [the pair's, entries
 * and format]}, the pair named by source_lang and target_lang. */
static void gl_entries(srv_req *r)
{
    const int v3 = is_v3(r);
    srv_glossary *g = path_glossary(r, v3 ? V3 : V2);
    if (!g)
        return;
    if (!v3) {
        char *body = malloc(g->d[0].tsv_n + 1);
        if (body)
            memcpy(body, g->d[0].tsv, g->d[0].tsv_n + 1);
        srv_req_reply(r, body ? 200 : 500, "text/tab-separated-values; charset=utf-8", body,
                      body ? g->d[0].tsv_n : 0);
        srv_glossary_put(g);
        return;
    }
    char s[40], t[40];
    if (query_param(r, "source_lang", s, sizeof s) || query_param(r, "target_lang", t, sizeof t)) {
        gl_error(r, 400, "source_lang and target_lang: both are required");
    } else {
        const srv_gloss_dict *d = srv_glossary_dict(g, s, t);
        if (!d)
            gl_error(r, 404, "source_lang, target_lang: glossary %s has no %s->%s dictionary",
                     g->id, s, t);
        else
            srv_req_object(r, 200, json_pack("{s:[o]}", "dictionaries", dict_json(d, 1)));
    }
    srv_glossary_put(g);
}

static void gl_delete(srv_req *r)
{
    const char *prefix = is_v3(r) ? V3 : V2;
    srv_glossary *g = path_glossary(r, prefix);
    if (!g)
        return;
    char id[40];
    snprintf(id, sizeof id, "%s", g->id);
    srv_glossary_put(g);
    srv_err e = srv_glossaries_delete(r->s->glossaries, id, NULL, 0); /* the detail is ours */
    if (e == SRV_OK)
        srv_req_reply(r, 204, "application/json", strdup(""), 0);
    else
        gl_error(r, gl_status(e), "glossary_id: glossary %s could not be deleted", id);
}

/* ---- edits (v3) ----------------------------------------------------------------- */

/* A store edit's failure as DeepL answers it. */
static void edit_error(srv_req *r, srv_err st, const char *param, char *msg, size_t n)
{
    if (st == SRV_ERR_NOMEM)
        snprintf(msg, n, "out of memory");
    if (param && strncmp(msg, param, strlen(param)) != 0 && strncmp(msg, "entries", 7) != 0)
        gl_error(r, gl_status(st), "%s: %s", param, msg);
    else
        gl_error(r, gl_status(st), "%s", msg);
}

/* PATCH /v3/glossaries/ID: a new name and/or dictionaries merged in (the
 * entries given replace those of the same source term, the others are
 * kept; a new pair is added) -> the glossary's information. PUT
 * /v3/glossaries/ID/dictionaries: one dictionary replaced or added -> its
 * pair and count. */
static srv_call_next gl_edit(srv_req *r)
{
    const int put = !strcmp(r->call->method, "PUT");
    srv_form_file file = {0};
    int is_json = 0;
    json_t *o = srv_form_fields(r, srv_call_header(r->call, "Content-Type"), &file, &is_json);
    if (!o)
        return SRV_NEXT_ANSWERED;
    srv_glossary *g = path_glossary(r, V3), *done = NULL;
    srv_gloss_input in[SRV_GLOSS_MAX_DICTS];
    int n = 0, bad = 0;
    const char *name = NULL;
    if (!g)
        goto out;
    if (put) {
        if (dict_input(r, o, &in[n++]) != 0)
            goto out;
    } else {
        name = str_field(r, o, "name", &bad);
        json_t *ds = json_object_get(o, "dictionaries");
        if (bad)
            goto out;
        if (ds && (!json_is_array(ds) || json_array_size(ds) > SRV_GLOSS_MAX_DICTS)) {
            gl_error(r, 400, "dictionaries: an array of at most %d dictionaries",
                     SRV_GLOSS_MAX_DICTS);
            goto out;
        }
        if (json_is_array(ds) && (n = dicts_input(r, ds, in)) < 0)
            goto out;
        if (!name && n == 0) {
            gl_error(r, 400, "name, dictionaries: nothing to edit");
            goto out;
        }
    }
    const char *param = NULL;
    char msg[512];
    srv_err st = srv_glossaries_edit(r->s->glossaries, g->id, name, in, n,
                                              put ? SRV_GLOSS_REPLACE : SRV_GLOSS_MERGE, &done,
                                              &param, msg, sizeof msg);
    if (st != SRV_OK)
        edit_error(r, st, param, msg, sizeof msg);
    else if (put)
        srv_req_object(r, 200, dict_json(srv_glossary_dict(done, in[0].src_lang, in[0].tgt_lang), 0));
    else
        srv_req_object(r, 200, info_json(done, 1));
out:
    srv_glossary_put(done);
    srv_glossary_put(g);
    json_decref(o);
    return SRV_NEXT_ANSWERED;
}

/* DELETE /v3/glossaries/ID/dictionaries?source_lang=..&target_lang=..: the
 * pair's dictionary removed (the glossary keeps at least one). */
static void gl_drop_dict(srv_req *r)
{
    srv_glossary *g = path_glossary(r, V3), *done = NULL;
    if (!g)
        return;
    char s[40], t[40], msg[512];
    if (query_param(r, "source_lang", s, sizeof s) || query_param(r, "target_lang", t, sizeof t)) {
        gl_error(r, 400, "source_lang and target_lang: both are required");
    } else {
        const srv_gloss_input in = {.src_lang = s, .tgt_lang = t};
        const char *param = NULL;
        srv_err st = srv_glossaries_edit(r->s->glossaries, g->id, NULL, &in, 1,
                                                  SRV_GLOSS_DROP, &done, &param, msg, sizeof msg);
        if (st == SRV_OK)
            srv_req_reply(r, 204, "application/json", strdup(""), 0);
        else
            edit_error(r, st, param, msg, sizeof msg);
    }
    srv_glossary_put(done);
    srv_glossary_put(g);
}

/* The pairs the served models translate: a bilingual model's own, every
 * pair of a multilingual model's languages. */
static void gl_pairs(srv_req *r)
{
    srv_pair p[64];
    int n = srv_models_pairs(r->s->models, p, 64);
    json_t *a = json_array();
    for (int i = 0; a && i < n && i < 64; i++) {
        if (p[i].n_langs) /* multilingual: its pairs are every two of its languages */
            continue;
        char s[16], t[16];
        srv_lang_canon(p[i].src, s, sizeof s);
        srv_lang_canon(p[i].tgt, t, sizeof t);
        int seen = 0;
        for (size_t k = 0; k < json_array_size(a); k++) {
            json_t *e = json_array_get(a, k);
            seen |= !strcmp(json_string_value(json_object_get(e, "source_lang")), s) &&
                    !strcmp(json_string_value(json_object_get(e, "target_lang")), t);
        }
        if (!seen)
            json_array_append_new(a, json_pack("{s:s, s:s}", "source_lang", s, "target_lang", t));
    }
    srv_req_object(r, 200, a ? json_pack("{s:o}", "supported_languages", a) : NULL);
}

/* ---- the routes ----------------------------------------------------------- */

/* The entries' patterns first: a path matching both is an entries one.
 * SRV_ROUTE_MESSAGE: the errors answered before a handler runs (the API
 * key, a body too large or not JSON, a method not taken) in DeepL's shape
 * too, {"message": ...}. */
#define GL_FLAGS (SRV_ROUTE_KEY | SRV_ROUTE_MESSAGE)
/* one metrics label for every glossary route */
#define GL_LABEL "/v2/glossaries"
static const srv_route k_glossary_routes[] = {
    {"GET", V2 "/*/entries", SRV_EP_GLOSSARIES, GL_FLAGS, gl_entries, NULL, NULL, GL_LABEL},
    {"GET", V3 "/*/entries", SRV_EP_GLOSSARIES, GL_FLAGS, gl_entries, NULL, NULL, GL_LABEL},
    {"PUT", V3 "/*/dictionaries", SRV_EP_GLOSSARIES, GL_FLAGS, NULL, gl_edit, NULL, GL_LABEL},
    {"DELETE", V3 "/*/dictionaries", SRV_EP_GLOSSARIES, GL_FLAGS, gl_drop_dict, NULL, NULL, GL_LABEL},
    {"GET", V2, SRV_EP_GLOSSARIES, GL_FLAGS, gl_list, NULL, NULL, GL_LABEL},
    {"POST", V2, SRV_EP_GLOSSARIES, GL_FLAGS | SRV_ROUTE_ANY_BODY, NULL, gl_create, NULL, GL_LABEL},
    {"GET", V3, SRV_EP_GLOSSARIES, GL_FLAGS, gl_list, NULL, NULL, GL_LABEL},
    {"POST", V3, SRV_EP_GLOSSARIES, GL_FLAGS, NULL, gl_create, NULL, GL_LABEL},
    {"GET", V2 "/*", SRV_EP_GLOSSARIES, GL_FLAGS, gl_get, NULL, NULL, GL_LABEL},
    {"DELETE", V2 "/*", SRV_EP_GLOSSARIES, GL_FLAGS, gl_delete, NULL, NULL, GL_LABEL},
    {"GET", V3 "/*", SRV_EP_GLOSSARIES, GL_FLAGS, gl_get, NULL, NULL, GL_LABEL},
    {"DELETE", V3 "/*", SRV_EP_GLOSSARIES, GL_FLAGS, gl_delete, NULL, NULL, GL_LABEL},
    {"PATCH", V3 "/*", SRV_EP_GLOSSARIES, GL_FLAGS, NULL, gl_edit, NULL, GL_LABEL},
    {"GET", "/v2/glossary-language-pairs", SRV_EP_GLOSSARIES, GL_FLAGS, gl_pairs, NULL, NULL, GL_LABEL},
};

int srv_glossary_routes(srv_route *out, int max)
{
    return srv_routes_copy(k_glossary_routes,
                           (int)(sizeof k_glossary_routes / sizeof k_glossary_routes[0]), out,
                           max);
}
