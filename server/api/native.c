/*
 * native.c - the native API, POST /v1/translate (docs/api.md): the request
 * JSON -> validated options and tokenized jobs, the finished jobs -> the
 * answer's JSON (texts, scores, tokens and their offsets, attention,
 * hypotheses, the sentences of a long text).
 *
 * Validation order: the body parses (jansson, with duplicate keys
 * rejected), it is an object, every key is known, then each field's type
 * and range, then the texts are tokenized and each is held to
 * --max-input-tokens (422). Every failure is a 4xx error object whose param
 * names the field. Each request gets its own copy of the model's default
 * decoding options; nothing a client sends touches shared state.
 *
 * Threads: the HTTP thread that owns the request.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "languages.h"
#include "models.h"
#include "native.h"
#include "reqlimits.h"
#include "translate.h"

/* ---- tokens and their offsets ------------------------------------------------ */

/* A JSON array of the pieces of ids (docs/api.md: tokens are pieces); a
 * piece that is not UTF-8 becomes U+FFFD. NULL when out of memory. */
static json_t *pieces_json(const srv_model *sm, td_tok_side side, const int32_t *ids, int n)
{
    const char **p = NULL;
    if (td_tok_pieces(sm->tok, side, ids, n, &p) != 0)
        return NULL;
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        json_t *v = json_string(p[i]); /* NULL for a piece that is not UTF-8 */
        json_array_append_new(a, v ? v : json_string("\xEF\xBF\xBD"));
    }
    free(p);
    return a;
}

/* Byte offsets (2n, ascending) into text -> character (code point)
 * offsets, in place. */
static void offsets_to_chars(const char *text, size_t *off, int n)
{
    size_t b = 0, c = 0;
    for (int i = 0; i < 2 * n; i++) {
        for (; b < off[i]; b++)
            c += ((unsigned char)text[b] & 0xC0) != 0x80;
        off[i] = c;
    }
}

/* A JSON array of [start, end] pairs of n tokens. NULL when out of memory. */
static json_t *offsets_json(const size_t *off, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_pack("[I,I]", (json_int_t)off[2 * i],
                                           (json_int_t)off[2 * i + 1]));
    return a;
}

/* Hypothesis hyp of job k: its "text", and with return_tokens its
 * "offsets" in that text (docs/api.md) into *offsets. */
static json_t *hyp_text_json(const srv_req *r, int k, int hyp, json_t **offsets)
{
    size_t *off = NULL;
    char *t = srv_api_decode_job(r, k, hyp, r->return_tokens ? &off : NULL);
    *offsets = NULL;
    if (t && off) {
        int n = r->pipe.jobs[k].res.hyps[hyp].n_tokens;
        offsets_to_chars(t, off, n);
        *offsets = offsets_json(off, n);
    }
    free(off);
    return srv_api_text_json(t);
}

/* The source tokens' character offsets of every text, while the texts are
 * at hand. Returns 1, or 0 with an error recorded. */
static int source_offsets(srv_req *r, const char *const *texts, const size_t *lens, int n)
{
    /* per job (the texts that run; an empty text has none) */
    r->src_offsets = srv_req_alloc(r, (size_t)r->pipe.n_jobs, sizeof *r->src_offsets);
    r->text_chars = srv_req_alloc(r, (size_t)n, sizeof *r->text_chars);
    if (!r->src_offsets || !r->text_chars)
        goto oom;
    for (int i = 0; i < n; i++) {
        for (size_t b = 0; b < lens[i]; b++)
            r->text_chars[i] += ((unsigned char)texts[i][b] & 0xC0) != 0x80;
        const srv_split *sp = r->pipe.split && r->pipe.split[i].n ? &r->pipe.split[i] : NULL;
        for (int s = 0; s < (sp ? sp->n : 1); s++) {
            int k = sp ? sp->job[s] : r->pipe.text_job[i];
            if (k < 0)
                continue;
            /* a sentence's tokens: where they are in the whole text */
            size_t b0 = sp ? sp->sent[s].start : 0, *off;
            size_t bl = sp ? sp->sent[s].end - b0 : lens[i];
            if (td_tok_source_offsets(r->model->tok, texts[i] + b0, bl, r->pipe.src[k],
                                      r->pipe.jobs[k].n_src, &r->src_offsets[k]) != 0)
                goto oom;
            off = r->src_offsets[k];
            for (int t = 0; t < 2 * r->pipe.jobs[k].n_src; t++)
                off[t] += b0;
            offsets_to_chars(texts[i], off, r->pipe.jobs[k].n_src);
        }
    }
    return 1;
oom:
    srv_req_error(r, 500, "internal", NULL, "out of memory");
    return 0;
}

/* Reads an optional integer field into *out; 0 ok, -1 error recorded. */
static int get_int(srv_req *r, json_t *root, const char *key, long lo, long hi, int *out)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return 0;
    if (!json_is_integer(v)) {
        srv_req_error(r, 400, "invalid_type", key, "%s must be an integer", key);
        return -1;
    }
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        srv_req_error(r, 400, "out_of_range", key, "%s must be in %ld..%ld (got %lld)", key, lo,
                      hi, (long long)x);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int get_bool(srv_req *r, json_t *root, const char *key, int *out)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v)) {
        srv_req_error(r, 400, "invalid_type", key, "%s must be true or false", key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* An optional array of 1..TD_MAX_ATTN_SELECT ints, into a copy in the arena
 * (their ranges are td_decode_opts_check's). */
static int get_int_array(srv_req *r, json_t *root, const char *key, int **out, int *n)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return 0;
    size_t k = json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_array(v) || k < 1 || k > TD_MAX_ATTN_SELECT) {
        srv_req_error(r, 400, "invalid_type", key, "%s must be an array of 1..%d integers", key,
                      TD_MAX_ATTN_SELECT);
        return -1;
    }
    *out = srv_req_alloc(r, k, sizeof(int));
    if (!*out) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_array_get(v, i);
        json_int_t x = json_is_integer(e) ? json_integer_value(e) : 0;
        if (!json_is_integer(e) || x < INT_MIN || x > INT_MAX) {
            srv_req_error(r, 400, "invalid_type", key, "%s[%zu] must be an integer", key, i);
            return -1;
        }
        (*out)[i] = (int)x;
    }
    *n = (int)k;
    return 0;
}

/* "text" / "q": a string or a non-empty array of strings. Fills texts and
 * lens (arrays in the arena, of pointers into the JSON). */
static int get_texts(srv_req *r, json_t *v, const char *key, const char ***texts, size_t **lens,
                     int *n, int *is_list)
{
    int max = r->s->api->max_batch_texts;
    if (!v) {
        srv_req_error(r, 400, "missing_field", key, "%s is required", key);
        return -1;
    }
    size_t k = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v)) {
        srv_req_error(r, 400, "invalid_type", key, "%s must be a string or an array of strings",
                      key);
        return -1;
    }
    if (k < 1 || k > (size_t)max) {
        srv_req_error(r, 400, "out_of_range", key, "%s must hold 1..%d texts (got %zu)", key, max,
                      k);
        return -1;
    }
    *texts = srv_req_alloc(r, k, sizeof **texts);
    *lens = srv_req_alloc(r, k, sizeof **lens);
    if (!*texts || !*lens) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return -1;
    }
    *is_list = json_is_array(v);
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(e)) {
            srv_req_error(r, 400, "invalid_type", key, "%s[%zu] must be a string", key, i);
            return -1;
        }
        (*texts)[i] = json_string_value(e);
        (*lens)[i] = json_string_length(e);
    }
    *n = (int)k;
    return 0;
}

static const char *const k_fields[] = {
    "text",           "beam_size",        "num_hypotheses",   "length_penalty",
    "max_length",     "return_tokens",    "return_attention", "attention_layers",
    "attention_heads", "model",            "split_sentences",  "source",
    "target",         "stream",           "copy_unknown",     "glossary",
};
/* A 400 for a pair no model translates, naming the field and the pairs. */
static void no_pair(srv_req *r, const char *param, const char *src, const char *tgt)
{
    char pairs[512];
    srv_models_pairs_text(r->s->models, pairs, sizeof pairs);
    srv_req_error(r, 400, "unsupported_language", param,
                  "no model translates %s to %s; the models: %s", src ? src : "(any)",
                  tgt ? tgt : "(any)", pairs);
}

/* The source language of the texts by language identification among the
 * sources of the models into tgt (NULL: any): texts joined by newlines. */
static int detect_source(srv_req *r, const char *const *texts, const size_t *lens, int n,
                         const char *tgt, char *out)
{
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += lens[i] + 1;
    char *all = srv_req_alloc(r, len + 1, 1), *w = all;
    if (!all) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        memcpy(w, texts[i], lens[i]);
        w += lens[i];
        *w++ = '\n';
    }
    *w = 0;
    int rc = srv_detect_source(r->s, all, (size_t)(w - all), tgt, out, 16);
    if (rc != 0)
        no_pair(r, "target", "auto", tgt);
    return rc;
}

/* The model from src into tgt, or with tgt NULL the first model from src;
 * with a reference (srv_model_put), or NULL. */
static srv_model *model_from(srv_models *ms, const char *src, const char *tgt)
{
    if (tgt)
        return srv_models_get_pair(ms, src, tgt);
    srv_pair p[64];
    int np = srv_models_pairs(ms, p, 64);
    for (int i = 0; i < np && i < 64; i++)
        if (!p[i].n_langs && srv_lang_same(p[i].src, src))
            return srv_models_get_pair(ms, src, p[i].tgt);
    return NULL;
}

/* The languages r was routed by (NULL: not named). */
static void route_langs(srv_req *r, const char *src, const char *tgt)
{
    snprintf(r->src_lang, sizeof r->src_lang, "%s", src ? src : "");
    snprintf(r->tgt_lang, sizeof r->tgt_lang, "%s", tgt ? tgt : "");
}

/* The model a request is for, with the request's reference (r->model):
 * "model" by name; else "source"/"target" (source "auto" or absent:
 * language identification among the sources of the models into target,
 * or of every model when target is absent too); with one model and
 * nothing named, that model. With "model", source and target must be its
 * own (source may be "auto"). Returns 0, or -1 with a 400 recorded. */
static int route_native(srv_req *r, json_t *root, const char *const *texts, const size_t *lens,
                        int n)
{
    srv_models *ms = r->s->models;
    const char *name, *src, *tgt;
    if (srv_req_opt_string(r, root, "model", &name) || srv_req_opt_string(r, root, "source", &src) ||
        srv_req_opt_string(r, root, "target", &tgt))
        return -1;
    int autodetect = !src || !strcmp(src, "auto");
    if (name) {
        r->model = srv_models_get(ms, name);
        if (!r->model) {
            char pairs[512];
            srv_models_pairs_text(ms, pairs, sizeof pairs);
            srv_req_error(r, 400, "model_not_found", "model",
                          "no model named '%s' is loaded; the models: %s", name, pairs);
            return -1;
        }
        char detected[16];
        if (r->model->n_langs > 0 && autodetect) {
            if (detect_source(r, texts, lens, n, tgt, detected) != 0)
                return -1;
            src = detected;
            autodetect = 0;
        }
        int bad_src = r->model->n_langs > 0
                          ? srv_model_lang(r->model, src) < 0
                          : !autodetect && !srv_lang_same(src, r->model->src_lang);
        int bad_tgt = tgt && (r->model->n_langs > 0 ? srv_model_lang(r->model, tgt) < 0
                                                    : !srv_lang_same(tgt, r->model->tgt_lang));
        if (r->model->n_langs > 0 && (bad_src || bad_tgt)) {
            srv_req_error(r, 400, "unsupported_language", bad_src ? "source" : "target",
                          "model %s has no language '%s'", r->model->name,
                          bad_src ? src : tgt);
            return -1;
        }
        if (bad_src || bad_tgt) {
            srv_req_error(r, 400, "unsupported_language", bad_src ? "source" : "target",
                          "model %s translates %s to %s, not %s to %s", r->model->name,
                          r->model->src_lang, r->model->tgt_lang, bad_src ? src : "...",
                          bad_src ? "..." : tgt);
            return -1;
        }
        route_langs(r, autodetect ? NULL : src, tgt);
        return 0;
    }
    srv_pair one[2];
    if (!src && !tgt && srv_models_pairs(ms, one, 2) <= 1) {
        r->model = srv_models_get(ms, NULL); /* the only model */
        if (!r->model)
            srv_req_error(r, 503, "not_ready", NULL, "no model is loaded");
        return r->model ? 0 : -1;
    }
    /* several models and nothing named: the text's language picks the
     * source among all of them, then the first model from it */
    char detected[16];
    if (autodetect) {
        if (detect_source(r, texts, lens, n, tgt, detected) != 0)
            return -1;
        src = detected;
    }
    r->model = model_from(ms, src, tgt);
    route_langs(r, src, tgt);
    if (!r->model) {
        /* which field is wrong: the target when no model translates into it */
        srv_langs L;
        srv_langs_now(r->s, &L);
        int tgt_known = 0;
        for (int i = 0; i < L.np; i++)
            for (int k = 0; k < L.n && tgt && !tgt_known; k++)
                tgt_known = srv_langs_pair(&L, i, L.codes[k], tgt);
        no_pair(r, tgt && !tgt_known ? "target" : "source", src, tgt);
        return -1;
    }
    return 0;
}

/* ---- texts routed each by its own language -------------------------------- */

/* A request whose texts go to several models ("model" absent, the source
 * detected, texts of different languages): one part a model, each a request
 * of its own over its texts (its own options, jobs and model reference) on
 * the same call; the answer puts them back in the texts' order. Kept in the
 * request's state. */
typedef struct native_parts {
    int n;
    srv_req **part;
    int *text_part;  /* per text: its part */
    int *text_local; /* per text: its index among its part's texts */
    int failed;      /* a part's submit was refused (its error answers) */
} native_parts;

static void parts_free(srv_req *r)
{
    native_parts *np = r->state;
    for (int p = 0; np && p < np->n; p++)
        srv_req_free(np->part[p]);
}

/* ---- responses ----------------------------------------------------------- */

static json_t *real_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *attention_json(const td_result *res)
{
    json_t *layers = json_array(), *heads = json_array(), *cross = json_array();
    for (int l = 0; l < res->attn_n_layers; l++)
        json_array_append_new(layers, json_integer(res->attn_layer_ids[l]));
    for (int h = 0; h < res->attn_n_heads; h++)
        json_array_append_new(heads, json_integer(res->attn_head_ids[h]));
    const int T = res->attn_n_t, S = res->attn_n_s;
    for (int l = 0; l < res->attn_n_layers; l++) {
        json_t *jl = json_array();
        for (int h = 0; h < res->attn_n_heads; h++) {
            json_t *jh = json_array();
            for (int t = 0; t < T; t++) {
                json_t *jt = json_array();
                const float *row =
                    res->attention + (((size_t)l * res->attn_n_heads + h) * T + t) * S;
                for (int s = 0; s < S; s++)
                    json_array_append_new(jt, real_or_null(row[s]));
                json_array_append_new(jh, jt);
            }
            json_array_append_new(jl, jh);
        }
        json_array_append_new(cross, jl);
    }
    return json_pack("{s:o,s:o,s:o}", "layers", layers, "heads", heads, "cross", cross);
}

/* Text i's translation when it was not run (empty): "" with score 0, no
 * tokens; its source is the lone </s>; attention of the selected layers
 * and heads over no target rows. */
/* The translation of text i, which is empty or white space (not run). */
static json_t *native_empty(srv_req *r, int i)
{
    const srv_model *sm = r->model;
    json_t *o = json_pack("{s:s,s:f}", "text", "", "score", 0.0);
    if (!o)
        return NULL;
    if (r->return_tokens) {
        int32_t eos = (int32_t)td_model_config(sm->m)->eos_token_id;
        json_object_set_new(o, "tokens", json_array());
        json_object_set_new(o, "offsets", json_array());
        json_object_set_new(o, "source_tokens", pieces_json(sm, TD_TOK_SOURCE, &eos, 1));
        /* its </s> spans the whole (blank) text */
        size_t span[2] = {0, r->text_chars ? r->text_chars[i] : 0};
        json_object_set_new(o, "source_offsets", offsets_json(span, 1));
    }
    if (r->return_attention) {
        const td_config *c = td_model_config(sm->m);
        json_t *layers = json_array(), *heads = json_array(), *cross = json_array();
        int nl = r->opts.n_attn_layers, nh = r->opts.n_attn_heads;
        int L = nl ? nl : c->decoder_layers, H = nh ? nh : c->decoder_attention_heads;
        for (int l = 0; l < L; l++) {
            int id = nl ? r->opts.attn_layers[l] : l;
            json_array_append_new(layers, json_integer(id < 0 ? id + c->decoder_layers : id));
            json_t *jl = json_array();
            for (int h = 0; h < H; h++)
                json_array_append_new(jl, json_array());
            json_array_append_new(cross, jl);
        }
        for (int h = 0; h < H; h++)
            json_array_append_new(heads, json_integer(nh ? r->opts.attn_heads[h] : h));
        json_object_set_new(o, "attention", json_pack("{s:o,s:o,s:o}", "layers", layers,
                                                      "heads", heads, "cross", cross));
    }
    if (r->opts.num_hypotheses > 1) {
        json_t *ho = json_pack("{s:s,s:f}", "text", "", "score", 0.0);
        if (r->return_tokens) {
            json_object_set_new(ho, "tokens", json_array());
            json_object_set_new(ho, "offsets", json_array());
        }
        json_object_set_new(o, "hypotheses", json_pack("[o]", ho));
    }
    return o;
}

/* Adds d to every [start, end] of an "offsets" array. */
static void shift_offsets(json_t *a, size_t d)
{
    size_t i;
    json_t *p;
    json_array_foreach(a, i, p)
    {
        for (size_t e = 0; e < 2; e++)
            json_array_set_new(p, e,
                               json_integer(json_integer_value(json_array_get(p, e)) +
                                            (json_int_t)d));
    }
}

static json_t *native_translation(srv_req *r, const srv_job *j)
{
    const srv_model *sm = r->model;
    const td_result *res = &j->res;
    const td_hypothesis *best = &res->hyps[0];
    json_t *o = json_object();
    if (!o)
        return NULL;
    const int job = (int)(j - r->pipe.jobs);
    json_t *offsets;
    json_object_set_new(o, "text", hyp_text_json(r, job, 0, &offsets));
    json_object_set_new(o, "score", real_or_null(best->score));
    if (r->return_tokens) {
        json_object_set_new(o, "tokens",
                            pieces_json(sm, TD_TOK_TARGET, best->tokens, best->n_tokens));
        json_object_set_new(o, "source_tokens",
                            pieces_json(sm, TD_TOK_SOURCE, j->src, j->n_src));
        json_object_set_new(o, "offsets", offsets);
        if (r->src_offsets)
            json_object_set_new(o, "source_offsets",
                                offsets_json(r->src_offsets[j - r->pipe.jobs], j->n_src));
    }
    if (r->return_attention && res->attention)
        json_object_set_new(o, "attention", attention_json(res));
    if (r->opts.num_hypotheses > 1) {
        json_t *hs = json_array();
        for (int k = 0; k < res->n_hyps; k++) {
            const td_hypothesis *h = &res->hyps[k];
            json_t *ho = json_object();
            json_object_set_new(ho, "text", hyp_text_json(r, job, k, &offsets));
            json_object_set_new(ho, "score", real_or_null(h->score));
            if (r->return_tokens) {
                json_object_set_new(ho, "tokens",
                                    pieces_json(sm, TD_TOK_TARGET, h->tokens, h->n_tokens));
                json_object_set_new(ho, "offsets", offsets);
            }
            json_array_append_new(hs, ho);
        }
        json_object_set_new(o, "hypotheses", hs);
    }
    return o;
}

/* Text i of several sentences: the reassembled translation and its score;
 * with return_tokens each sentence's own translation (tokens, attention,
 * hypotheses) in "sentences", with its source_range in the text and its
 * range in the translation, every offset counted in the whole text
 * (docs/api.md, "Long texts"). */
static json_t *native_split(srv_req *r, int i)
{
    const srv_split *sp = srv_api_split_of(r, i);
    size_t *rng = srv_req_alloc(r, 2 * (size_t)sp->n, sizeof *rng);
    size_t *src = srv_req_alloc(r, 2 * (size_t)sp->n, sizeof *src);
    double score;
    char *t = rng && src ? srv_api_split_join(r, sp, 0, rng, &score) : NULL;
    json_t *o = t ? json_object() : NULL;
    if (!o) {
        free(t);
        return NULL;
    }
    offsets_to_chars(t, rng, sp->n);
    json_object_set_new(o, "text", srv_api_text_json(t));
    json_object_set_new(o, "score", real_or_null(score));
    if (r->return_tokens) {
        for (int s = 0; s < sp->n; s++) {
            src[2 * s] = sp->sent[s].start;
            src[2 * s + 1] = sp->sent[s].end;
        }
        offsets_to_chars(sp->text, src, sp->n);
        json_t *sents = json_array();
        for (int s = 0; sents && s < sp->n; s++) {
            int k = sp->job[s];
            json_t *so = k >= 0 ? native_translation(r, &r->pipe.jobs[k]) : native_empty(r, i);
            if (!so)
                continue;
            if (k >= 0) {
                shift_offsets(json_object_get(so, "offsets"), rng[2 * s]);
            } else {
                /* a sentence with nothing to translate: its </s> spans it */
                json_object_set_new(so, "source_offsets",
                                    json_pack("[[I,I]]", (json_int_t)src[2 * s],
                                              (json_int_t)src[2 * s + 1]));
            }
            json_object_set_new(so, "source_range",
                                json_pack("[I,I]", (json_int_t)src[2 * s],
                                          (json_int_t)src[2 * s + 1]));
            json_object_set_new(so, "range", json_pack("[I,I]", (json_int_t)rng[2 * s],
                                                       (json_int_t)rng[2 * s + 1]));
            json_array_append_new(sents, so);
        }
        json_object_set_new(o, "sentences", sents);
    }
    if (r->opts.num_hypotheses > 1) {
        json_t *hs = json_array();
        for (int h = 0; hs && h < srv_api_split_n_hyps(r, sp); h++) {
            double hscore;
            json_t *ht = srv_api_text_json(srv_api_split_join(r, sp, h, NULL, &hscore));
            json_array_append_new(hs, json_pack("{s:o*,s:o}", "text", ht, "score",
                                                real_or_null(hscore)));
        }
        json_object_set_new(o, "hypotheses", hs);
    }

    return o;
}

/* Text i's translation (r: the request, or the part, that ran it). */
static json_t *native_text(srv_req *r, int i)
{
    return srv_api_split_of(r, i)     ? native_split(r, i)
           : r->pipe.text_job[i] < 0 ? native_empty(r, i)
                                     : native_translation(r, &r->pipe.jobs[r->pipe.text_job[i]]);
}

/* The answer's JSON (malloc'd), every job finished; NULL when out of memory.
 * Texts routed each by its language: each translation names its model,
 * the answer's "model" is the first text's. */
static char *native_answer(srv_req *r)
{
    const native_parts *np = r->parent == NULL && r->dialect_free == parts_free ? r->state : NULL;
    long tin = r->pipe.tokens_in, tout = r->tokens_out;
    json_t *tr = json_array();
    const char *model = r->model ? r->model->name : NULL;
    for (int p = 0; np && p < np->n; p++) {
        tin += np->part[p]->pipe.tokens_in;
        tout += np->part[p]->tokens_out;
    }
    for (int i = 0; i < r->pipe.n_texts; i++) {
        if (!np) {
            json_array_append_new(tr, native_text(r, i));
            continue;
        }
        srv_req *pr = np->part[np->text_part[i]];
        json_t *o = native_text(pr, np->text_local[i]);
        if (o)
            json_object_set_new(o, "model", json_string(pr->model->name));
        json_array_append_new(tr, o);
        if (i == 0)
            model = pr->model->name;
    }
    json_t *root = json_pack("{s:s,s:o,s:{s:I,s:I}}", "model", model, "translations",
                             tr, "usage", "source_tokens", (json_int_t)tin,
                             "target_tokens", (json_int_t)tout);
    char *body = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(root);
    return body;
}

/* Every job finished: the 200 with the translations, or the error of the
 * first job that did not finish; streamed, the answer is the last event,
 * "done" (or "error"), and the stream ends. */
static void native_respond(srv_req *r)
{
    const native_parts *np = r->dialect_free == parts_free ? r->state : NULL;
    if (np && np->failed)
        return; /* a part was refused: its error is the answer */
    for (int p = 0; np && p < np->n; p++)
        if (srv_api_jobs_failed(np->part[p]))
            return;
    if (srv_api_jobs_failed(r))
        return;
    char *body = native_answer(r);
    if (!body) {
        srv_req_error(r, 500, "internal", NULL, "out of memory building the response");
        return;
    }
    if (r->stream) {
        srv_req_event(r, "done", body);
        free(body);
        srv_call_stream_end(r->call);
        return;
    }
    srv_req_json(r, 200, body);
}

/* A streamed answer's event of one finished job (its scheduler thread): the
 * sentence's translation as the answer has it for a text (text, score and,
 * as asked, tokens, offsets, attention, hypotheses: its "offsets" in its
 * own translation, its "source_offsets" in the whole text), with the
 * indexes of its text and of the sentence in it. */
static void native_event(srv_req *r, const srv_job *j)
{
    int k = (int)(j - r->pipe.jobs);
    json_t *o = native_translation(r, j);
    if (!o)
        return; /* out of memory: the event is lost, the answer at the end has it */
    json_object_set_new(o, "text_index", json_integer(r->job_text[k]));
    json_object_set_new(o, "sentence_index", json_integer(r->job_sent[k]));
    if (r->parent) /* texts routed each by its language: which model this is */
        json_object_set_new(o, "model", json_string(r->model->name));
    if (r->model->n_langs > 0) { /* a multilingual model: which pair this is */
        json_object_set_new(o, "source", json_string(r->src_lang));
        json_object_set_new(o, "target", json_string(r->tgt_lang));
    }
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (s)
        srv_req_event(r, "sentence", s);
    free(s);
}

/* Which texts each job is for (a streamed answer's events), while on the
 * HTTP thread. 0, or -1 when out of memory (recorded). */
static int map_jobs(srv_req *r)
{
    r->job_text = srv_req_alloc(r, (size_t)r->pipe.n_jobs, sizeof *r->job_text);
    r->job_sent = srv_req_alloc(r, (size_t)r->pipe.n_jobs, sizeof *r->job_sent);
    if (!r->job_text || !r->job_sent) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return -1;
    }
    for (int i = 0; i < r->pipe.n_texts; i++) {
        const srv_split *sp = srv_api_split_of(r, i);
        for (int s = 0; s < (sp ? sp->n : 1); s++) {
            int k = sp ? sp->job[s] : r->pipe.text_job[i];
            if (k >= 0) {
                r->job_text[k] = i;
                r->job_sent[k] = s;
            }
        }
    }
    return 0;
}

/* The framing a request asks for: "stream": true, or an Accept of
 * text/event-stream or application/x-ndjson; "stream": false wins. */
static int stream_kind(srv_req *r, int asked, int given)
{
    const char *acc = srv_call_header(r->call, "Accept");
    int nd = acc && strstr(acc, "application/x-ndjson");
    int sse = acc && strstr(acc, "text/event-stream");
    if (given && !asked)
        return SRV_STREAM_NONE;
    if (nd && !sse)
        return SRV_STREAM_NDJSON;
    return asked || sse ? SRV_STREAM_SSE : SRV_STREAM_NONE;
}

/* ---- the request -------------------------------------------------------- */

static const srv_limit_fields k_limit_fields = {"return_attention", "num_hypotheses", "text", 0};

static int route_parts(srv_req *r, json_t *root, const char *const *texts, const size_t *lens,
                       int n);

/* The request in root: 1 (jobs made), or 0 (answered: an error, or every
 * text empty). parts: whether texts may be routed each by its own language
 * (a part's own parse may not). */
static int parse_root(srv_req *r, json_t *root, int parts)
{
    int rc = 0;
    const char **texts = NULL;
    size_t *lens = NULL;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        int known = 0;
        for (size_t i = 0; i < sizeof k_fields / sizeof k_fields[0]; i++)
            known |= !strcmp(key, k_fields[i]);
        if (!known) {
            srv_req_error(r, 400, "unknown_field", key, "unknown field '%s'", key);
            goto out;
        }
    }
    int n = 0, is_list = 0;
    if (get_texts(r, json_object_get(root, "text"), "text", &texts, &lens, &n, &is_list))
        goto out;
    if (parts) {
        int pr = route_parts(r, root, texts, lens, n);
        if (pr != 0)
            return pr > 0;
    }
    if (route_native(r, root, texts, lens, n) != 0 || srv_api_model_failed(r, r->model))
        goto out;
    srv_model *sm = r->model;
    r->opts = sm->defaults;
    const td_config *c = td_model_config(sm->m);
    td_decode_opts *o = &r->opts;
    o->num_hypotheses = 1;
    /* Types here; every range, with the server's limits, in the engine's one
     * check (td_decode_opts_check), which names the failing field. */
    if (get_int(r, root, "beam_size", INT_MIN, INT_MAX, &o->beam_size) ||
        get_int(r, root, "num_hypotheses", INT_MIN, INT_MAX, &o->num_hypotheses) ||
        get_int(r, root, "max_length", INT_MIN, INT_MAX, &o->max_length) ||
        get_bool(r, root, "return_tokens", &r->return_tokens) ||
        get_bool(r, root, "return_attention", &r->return_attention))
        goto out;
    int split = 1, stream = 0, copy_unknown = 1;
    if (get_bool(r, root, "split_sentences", &split) || get_bool(r, root, "stream", &stream) ||
        get_bool(r, root, "copy_unknown", &copy_unknown))
        goto out;
    r->pipe.raw_unknown = !copy_unknown;
    r->no_split = !split;
    const char *glossary = NULL;
    if (srv_req_opt_string(r, root, "glossary", &glossary) ||
        (glossary && srv_api_use_glossary(r, glossary, "glossary") != 0))
        goto out;
    r->stream = stream_kind(r, stream, json_object_get(root, "stream") != NULL);
    /* Without beam_size the model's beam widens to num_hypotheses (within
     * --max-beam): asking for 3 hypotheses of a model with num_beams 2 is
     * not a contradiction, as an explicit beam_size 2 would be. */
    if (!json_object_get(root, "beam_size") && o->num_hypotheses > o->beam_size &&
        o->num_hypotheses <= sm->max_beam)
        o->beam_size = o->num_hypotheses;
    json_t *lp = json_object_get(root, "length_penalty");
    if (lp) {
        if (!json_is_number(lp)) {
            srv_req_error(r, 400, "invalid_type", "length_penalty",
                          "length_penalty must be a number");
            goto out;
        }
        double x = json_number_value(lp);
        /* held to the range before it is rounded to float: 10.000000000000002
         * is out of range, though it rounds to 10.0f */
        if (!(fabs(x) <= TD_MAX_LENGTH_PENALTY)) {
            srv_req_error(r, 400, "out_of_range", "length_penalty",
                          "length_penalty must be in -%d..%d", TD_MAX_LENGTH_PENALTY,
                          TD_MAX_LENGTH_PENALTY);
            goto out;
        }
        o->length_penalty = (float)x;
    }
    int nl = 0, nh = 0;
    if (get_int_array(r, root, "attention_layers", &r->attn_layers, &nl) ||
        get_int_array(r, root, "attention_heads", &r->attn_heads, &nh))
        goto out;
    /* the selection is checked whenever it is given, asked for or not */
    td_decode_opts chk = *o;
    chk.return_attention = r->return_attention || nl > 0 || nh > 0;
    chk.attn_layers = r->attn_layers;
    chk.n_attn_layers = nl;
    chk.attn_heads = r->attn_heads;
    chk.n_attn_heads = nh;
    td_decode_limits lim = {.max_beam = sm->max_beam, .max_length = sm->max_length};
    const char *param = NULL;
    char msg[256];
    if (td_decode_opts_check(c, &lim, &chk, &param, msg, sizeof msg) != 0) {
        srv_req_error(r, 400, "out_of_range", param, "%s", msg);
        goto out;
    }
    if (r->return_attention) {
        o->return_attention = 1;
        o->attn_layers = r->attn_layers;
        o->n_attn_layers = nl;
        o->attn_heads = r->attn_heads;
        o->n_attn_heads = nh;
        r->return_tokens = 1;
    }
    rc = srv_api_make_jobs(r, texts, lens, n, "text");
    if (rc == 1 && !srv_limits_check(r, &k_limit_fields))
        rc = 0;
    if (rc == 1 && r->return_tokens)
        rc = source_offsets(r, texts, lens, n);
    /* the stream's start once per call (a part's: the first part's) */
    const int opened = r->parent && r->parent->stream;
    if (rc == 1 && r->stream && !opened &&
        srv_call_stream(r->call, 200,
                        r->stream == SRV_STREAM_NDJSON ? "application/x-ndjson"
                                                       : "text/event-stream") != 0) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        rc = 0;
    }
    if (rc == 1 && r->stream) {
        if (!opened)
            srv_req_header(r, "Cache-Control", "no-cache");
        r->job_event = native_event;
        if (map_jobs(r) != 0)
            rc = 0;
    }
    if (rc == 1 && r->pipe.n_jobs == 0 && !r->parent) {
        /* every text is empty: nothing to run (streamed: the last event alone) */
        native_respond(r);
        rc = 0;
    }
out:
    return rc;
}

int srv_native_parse(srv_req *r)
{
    json_t *root = srv_req_json_body(r);
    if (!root)
        return 0;
    int rc = parse_root(r, root, 1);
    json_decref(root);
    return rc;
}

/* Whether text (n bytes) has anything but white space. */
static int has_text(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(" \t\n\r\f\v", t[i]))
            return 1;
    return 0;
}

/* The serving model text i goes to by its own language (into tgt, or the
 * first from its source); its name into name. 0, or -1 when none. */
static int text_model(srv_req *r, const char *text, size_t len, const char *tgt, char *name,
                      size_t namelen)
{
    char src[16];
    if (srv_detect_source(r->s, text, len, tgt, src, sizeof src) != 0)
        return -1;
    srv_model *sm = model_from(r->s->models, src, tgt);
    if (!sm)
        return -1;
    snprintf(name, namelen, "%s", sm->name);
    srv_model_put(sm);
    return 0;
}

/* "model" absent, the source to detect, several texts and models: each text
 * is detected alone (when our profiles cover the candidate languages, so a
 * short text is told as well as a long one; else all texts together, as
 * before) and texts of different models become parts (native_parts). 0: one
 * model for all (route_native routes), 1: parts made and parsed, -1: an
 * error recorded. */
static int route_parts(srv_req *r, json_t *root, const char *const *texts, const size_t *lens,
                       int n)
{
    const char *name = NULL, *src = NULL, *tgt = NULL;
    if (srv_req_opt_string(r, root, "model", &name) || srv_req_opt_string(r, root, "source", &src) ||
        srv_req_opt_string(r, root, "target", &tgt))
        return -1;
    srv_pair pairs[2];
    if (name || (src && strcmp(src, "auto")) || n < 2 || srv_models_pairs(r->s->models, pairs, 2) < 2)
        return 0;
    srv_langs L;
    srv_langs_now(r->s, &L);
    const char *codes[SRV_LANGS_MAX];
    int nc = srv_langs_sources(&L, tgt, codes);
    if (nc < 2 || !srv_langid_profiles_cover(r->s->langid, codes, nc))
        return 0;
    char (*model)[128] = srv_req_alloc(r, (size_t)n, sizeof *model);
    native_parts *np = srv_req_alloc(r, 1, sizeof *np);
    int *part = srv_req_alloc(r, (size_t)n, sizeof *part);
    int *local = srv_req_alloc(r, (size_t)n, sizeof *local);
    srv_req **reqs = srv_req_alloc(r, (size_t)n, sizeof *reqs);
    if (!model || !np || !part || !local || !reqs) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return -1;
    }
    int first = -1, k = 0;
    for (int i = 0; i < n; i++) {
        if (!has_text(texts[i], lens[i]))
            continue; /* an empty text goes with the first text that has one */
        if (text_model(r, texts[i], lens[i], tgt, model[i], sizeof model[i]) != 0) {
            no_pair(r, "target", "auto", tgt);
            return -1;
        }
        if (first < 0)
            first = i;
    }
    for (int i = 0; i < n; i++) {
        if (!has_text(texts[i], lens[i]))
            snprintf(model[i], sizeof model[i], "%s", first >= 0 ? model[first] : "");
        part[i] = -1;
        for (int j = 0; j < i && part[i] < 0; j++)
            if (!strcmp(model[j], model[i]))
                part[i] = part[j];
        if (part[i] < 0)
            part[i] = k++;
    }
    if (k < 2)
        return 0;
    np->n = 0;
    np->part = reqs;
    np->text_part = part;
    np->text_local = local;
    r->state = np;
    r->dialect_free = parts_free;
    r->pipe.n_texts = n;
    for (int p = 0; p < k; p++) {
        srv_req *c = srv_req_alloc(r, 1, sizeof *c);
        int *index = srv_req_alloc(r, (size_t)n, sizeof *index);
        json_t *croot = json_deep_copy(root), *ts = json_array();
        if (!c || !index || !croot || !ts) {
            json_decref(croot);
            json_decref(ts);
            srv_req_error(r, 500, "internal", NULL, "out of memory");
            return -1;
        }
        *c = (srv_req){.s = r->s, .call = r->call, .route = r->route, .ep = r->ep,
                       .path = r->path, .host = r->host, .query = r->query, .parent = r,
                       .text_index = index};
        reqs[np->n++] = c;
        int m = 0;
        const char *pm = NULL;
        for (int i = 0; i < n; i++)
            if (part[i] == p) {
                c->text_index[m] = i;
                local[i] = m++;
                pm = model[i];
                json_array_append_new(ts, json_stringn(texts[i], lens[i]));
            }
        json_object_set_new(croot, "text", ts);
        json_object_set_new(croot, "model", json_string(pm));
        int rc = parse_root(c, croot, 0);
        json_decref(croot);
        if (rc != 1)
            return -1;
        r->stream = c->stream;
        for (int j = 0; c->job_text && j < c->pipe.n_jobs; j++) /* events carry the request's index */
            c->job_text[j] = c->text_index[c->job_text[j]];
    }
    return 1;
}

/* POST /v1/translate, the body in: answers (an error; every text empty),
 * or hands the jobs out (of each part in turn). */
static srv_call_next native_body(srv_req *r)
{
    if (srv_native_parse(r) != 1)
        return SRV_NEXT_ANSWERED;
    native_parts *np = r->dialect_free == parts_free ? r->state : NULL;
    if (!np) {
        srv_call_next nx = srv_api_submit(r);
        /* out: from here an error is the stream's last event */
        r->stream_live = r->stream && nx == SRV_NEXT_PENDING;
        return nx;
    }
    for (int p = 0; p < np->n; p++) {
        srv_req *c = np->part[p];
        if (srv_api_submit(c) != SRV_NEXT_PENDING) {
            if (p == 0)
                return SRV_NEXT_ANSWERED; /* nothing out: the refusal answers now */
            np->failed = 1;               /* answered when the parts out finish */
            return SRV_NEXT_PENDING;
        }
        c->stream_live = r->stream_live = r->stream;
    }
    return SRV_NEXT_PENDING;
}

/* ---- the routes ---------------------------------------------------------- */

static srv_call_next native_resumed(srv_req *r)
{
    native_respond(r);
    return SRV_NEXT_ANSWERED;
}

static const srv_route k_native_routes[] = {
    {"POST", "/v1/translate", SRV_EP_TRANSLATE, SRV_ROUTE_SERVING | SRV_ROUTE_KEY, NULL,
     native_body, native_resumed, "/v1/translate"},
};

int srv_native_routes(srv_route *out, int max)
{
    return srv_routes_copy(k_native_routes, (int)(sizeof k_native_routes / sizeof k_native_routes[0]), out, max);
}
