/*
 * api.c - the endpoints: routes, request JSON -> validated options and
 * tokenized jobs, finished jobs -> response JSON, GET endpoints, error
 * objects (docs/api.md).
 *
 * Validation order for POST /v1/translate: the body parses (jansson, with
 * duplicate keys rejected), it is an object, every key is known, then each
 * field's type and range, then the texts are tokenized and each is held to
 * --max-input-tokens (422). Every failure is a 4xx error object whose param
 * names the field. Each request gets its own copy of the model's default
 * decoding options; nothing a client sends touches shared state.
 *
 * Text <-> tokens happens in one section below (td_tok_encode_batch,
 * decode_target, pieces_json); everything else sees token ids.
 *
 * Threads: every function runs on the HTTP thread that owns the request,
 * except srv_api_job_finished (a scheduler thread, see api.h).
 */
#define _XOPEN_SOURCE 700 /* realpath (a load's path below --models-dir) */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "api.h"
#include "buildinfo.h"
#include "libre.h"
#include "models.h"
#include "reqlimits.h"
#include "openapi.h"

/* ---- routes and responses ------------------------------------------------ */

static const srv_route k_routes[] = {
    {"/v1/translate", SRV_EP_TRANSLATE, SRV_METHOD_POST},
    {"/v1/models", SRV_EP_MODELS, SRV_METHOD_GET_LOAD},
    {"/health/live", SRV_EP_LIVE, SRV_METHOD_GET},
    {"/v2/health/live", SRV_EP_LIVE, SRV_METHOD_GET},
    {"/health/ready", SRV_EP_READY, SRV_METHOD_GET},
    {"/v2/health/ready", SRV_EP_READY, SRV_METHOD_GET},
    {"/metrics", SRV_EP_METRICS, SRV_METHOD_GET},
    {"/openapi.json", SRV_EP_OPENAPI, SRV_METHOD_GET},
    {"/spec", SRV_EP_OPENAPI, SRV_METHOD_GET}, /* LibreTranslate's name for it */
    {"/version", SRV_EP_VERSION, SRV_METHOD_GET},
};

static const srv_route k_model_admin = {SRV_MODELS_PREFIX, SRV_EP_MODEL_ADMIN, SRV_METHOD_ADMIN};

const srv_route *srv_api_route(const char *path)
{
    for (size_t i = 0; i < sizeof k_routes / sizeof k_routes[0]; i++)
        if (!strcmp(path, k_routes[i].path))
            return &k_routes[i];
    if (!strncmp(path, SRV_MODELS_PREFIX, strlen(SRV_MODELS_PREFIX)) &&
        path[strlen(SRV_MODELS_PREFIX)])
        return &k_model_admin;
    return srv_libre_route(path); /* LibreTranslate's endpoints */
}

void srv_req_json(srv_req *r, int status, char *body)
{
    free(r->resp);
    r->status = status;
    r->resp = body;
    r->resp_len = body ? strlen(body) : 0;
    r->resp_ctype = "application/json";
}

/* Replaces in place every byte of s that is not part of a well-formed
 * UTF-8 sequence with '?': an error message or param quoting client input
 * (jansson's parse errors quote the body, cut to their own size, possibly
 * mid-character) must still be a JSON string, or the error itself would
 * become a 500. */
static void utf8_sanitize(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3
                : (*p & 0xF8) == 0xF0 ? 4 : 0;
        int ok = n > 0 && !(n == 2 && *p < 0xC2) && !(n == 4 && *p > 0xF4);
        for (int i = 1; ok && i < n; i++)
            ok = (p[i] & 0xC0) == 0x80;
        if (ok && n == 3) /* no overlong forms, no surrogates */
            ok = !(p[0] == 0xE0 && p[1] < 0xA0) && !(p[0] == 0xED && p[1] >= 0xA0);
        if (ok && n == 4)
            ok = !(p[0] == 0xF0 && p[1] < 0x90) && !(p[0] == 0xF4 && p[1] >= 0x90);
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
}

void srv_req_error(srv_req *r, int status, const char *code, const char *param, const char *fmt,
                   ...)
{
    char msg[512], par[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    utf8_sanitize(msg);
    if (param) {
        snprintf(par, sizeof par, "%s", param);
        utf8_sanitize(par);
        param = par;
    }
    /* LibreTranslate's endpoints answer LibreTranslate's {"error": message} */
    json_t *e = srv_libre_endpoint(r->ep)
                    ? json_pack("{s:s}", "error", msg)
                    : json_pack("{s:{s:s,s:s,s:o}}", "error", "code", code, "message", msg,
                                "param", param ? json_string(param) : json_null());
    char *body = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    if (!body) {
        /* Out of memory: still an error, never a 200. */
        status = 500;
        body = strdup("{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\","
                      "\"param\":null}}");
    }
    srv_req_json(r, status, body);
}

int srv_api_key_ok(const srv_server *s, const char *given)
{
    const char *k = s->o.api_key;
    if (!k || !*k)
        return 1;
    if (!given)
        return 0;
    /* Constant time in the key's content: every byte of the key is
     * compared whatever the first mismatch. */
    size_t kl = strlen(k), gl = strlen(given);
    volatile unsigned char d = kl != gl;
    for (size_t i = 0; i < kl; i++)
        d |= (unsigned char)((unsigned char)k[i] ^ (unsigned char)(i < gl ? given[i] : 0));
    return d == 0;
}

void srv_api_req_free(srv_req *r)
{
    free(r->resp);
    r->resp = NULL;
    for (int i = 0; r->jobs && i < r->n_jobs; i++)
        td_result_free(&r->jobs[i].res);
    for (int i = 0; r->src && i < r->n_jobs; i++)
        free(r->src[i]);
    free(r->src);
    for (int i = 0; r->src_offsets && i < r->n_jobs; i++)
        free(r->src_offsets[i]);
    free(r->src_offsets);
    r->src_offsets = NULL;
    free(r->text_chars);
    r->text_chars = NULL;
    free(r->jobs);
    free(r->attn_layers);
    free(r->attn_heads);
    free(r->text_job);
    r->text_job = NULL;
    for (int i = 0; r->split && i < r->n_texts; i++) {
        free(r->split[i].text);
        free(r->split[i].sent);
        free(r->split[i].job);
    }
    free(r->split);
    r->split = NULL;
    free(r->disposition);
    r->disposition = NULL;
    srv_libre_req_free(r);
    free(r->op);
    r->op = NULL;
    srv_model_put(r->model); /* the request's reference (models.h) */
    r->model = NULL;
    r->jobs = NULL;
    r->src = NULL;
    r->attn_layers = r->attn_heads = NULL;
}

/* ---- text <-> tokens -------------------------------------------------------
 * The one place api.c turns text into token ids and back; the rest of the
 * file sees ids (jobs, results) and JSON. */

/* The detokenized text of target ids (malloc'd), or NULL when out of memory. */
static char *decode_target(const srv_model *sm, const int32_t *ids, int n)
{
    char *t = NULL;
    if (td_tok_decode(sm->tok, ids, n, &t) != 0)
        return NULL;
    return t;
}

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

/* "offsets" of the target tokens in the text of ids (docs/api.md). */
static json_t *target_offsets_json(const srv_model *sm, const int32_t *ids, int n)
{
    size_t *off = NULL;
    char *t = decode_target(sm, ids, n);
    json_t *a = NULL;
    if (t && td_tok_target_offsets(sm->tok, ids, n, &off) == 0) {
        offsets_to_chars(t, off, n);
        a = offsets_json(off, n);
    }
    free(off);
    free(t);
    return a;
}

/* The source tokens' character offsets of every text, while the texts are
 * at hand. Returns 1, or 0 with an error recorded. */
static int source_offsets(srv_req *r, const char *const *texts, const size_t *lens, int n)
{
    /* per job (the texts that run; an empty text has none) */
    r->src_offsets = calloc((size_t)(r->n_jobs > 0 ? r->n_jobs : 1), sizeof *r->src_offsets);
    r->text_chars = calloc((size_t)(n > 0 ? n : 1), sizeof *r->text_chars);
    if (!r->src_offsets || !r->text_chars)
        goto oom;
    for (int i = 0; i < n; i++) {
        for (size_t b = 0; b < lens[i]; b++)
            r->text_chars[i] += ((unsigned char)texts[i][b] & 0xC0) != 0x80;
        const srv_split *sp = r->split && r->split[i].n ? &r->split[i] : NULL;
        for (int s = 0; s < (sp ? sp->n : 1); s++) {
            int k = sp ? sp->job[s] : r->text_job[i];
            if (k < 0)
                continue;
            /* a sentence's tokens: where they are in the whole text */
            size_t b0 = sp ? sp->sent[s].start : 0, *off;
            size_t bl = sp ? sp->sent[s].end - b0 : lens[i];
            if (td_tok_source_offsets(r->model->tok, texts[i] + b0, bl, r->src[k],
                                      r->jobs[k].n_src, &r->src_offsets[k]) != 0)
                goto oom;
            off = r->src_offsets[k];
            for (int t = 0; t < 2 * r->jobs[k].n_src; t++)
                off[t] += b0;
            offsets_to_chars(texts[i], off, r->jobs[k].n_src);
        }
    }
    return 1;
oom:
    srv_req_error(r, 500, "internal", NULL, "out of memory");
    return 0;
}

/* ---- requests -> jobs ------------------------------------------------------ */

/* Sentences of the texts (r->split) unless the request turned splitting
 * off; returns the number of jobs' units (texts and sentences) or -1 with
 * an error recorded. */
static int split_texts(srv_req *r, const char *const *texts, const size_t *lens, int n)
{
    int units = n;
    if (r->no_split)
        return units;
    r->split = calloc((size_t)(n > 0 ? n : 1), sizeof *r->split);
    if (!r->split)
        goto oom;
    for (int i = 0; i < n; i++) {
        td_sentence *sent = NULL;
        char err[256];
        int ns = td_segment(r->model->src_lang, texts[i], lens[i], &sent, err, sizeof err);
        if (ns < 0) {
            srv_req_error(r, 500, "internal", NULL, "text %d: %s", i, err);
            return -1;
        }
        if (ns <= 1) {
            free(sent); /* one sentence: the text as it is, today's job */
            continue;
        }
        srv_split *sp = &r->split[i];
        sp->sent = sent;
        sp->text = malloc(lens[i] + 1);
        sp->job = malloc((size_t)ns * sizeof *sp->job);
        if (!sp->text || !sp->job)
            goto oom;
        memcpy(sp->text, texts[i], lens[i]);
        sp->text[lens[i]] = 0;
        sp->len = lens[i];
        sp->n = ns;
        units += ns - 1;
    }
    return units;
oom:
    srv_req_error(r, 500, "internal", NULL, "out of memory");
    return -1;
}

int srv_api_make_jobs(srv_req *r, const char *const *texts, const size_t *lens, int n,
                      const char *param)
{
    srv_model *sm = r->model;
    r->n_texts = n;
    r->n_jobs = 0;
    r->tokens_in = 0;
    r->text_job = malloc((size_t)(n > 0 ? n : 1) * sizeof *r->text_job);
    int units = r->text_job ? split_texts(r, texts, lens, n) : -1;
    if (units < 0) {
        if (!r->text_job)
            srv_req_error(r, 500, "internal", NULL, "out of memory");
        return 0;
    }
    /* the units the model sees: whole texts, or the sentences of a split one */
    const char **ut = malloc((size_t)(units > 0 ? units : 1) * sizeof *ut);
    size_t *ul = malloc((size_t)(units > 0 ? units : 1) * sizeof *ul);
    int *u_text = malloc((size_t)(units > 0 ? units : 1) * sizeof *u_text);
    int *u_sent = malloc((size_t)(units > 0 ? units : 1) * sizeof *u_sent);
    r->jobs = calloc((size_t)(units > 0 ? units : 1), sizeof *r->jobs);
    r->src = calloc((size_t)(units > 0 ? units : 1), sizeof *r->src);
    /* the text pipeline's tokenizer stage, as `transformerd translate` runs
     * it, refusing (not cutting) a text over the limit */
    td_tok_ids *ids = calloc((size_t)(units > 0 ? units : 1), sizeof *ids);
    int rc = -1;
    if (!ut || !ul || !u_text || !u_sent || !r->jobs || !r->src || !ids) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        goto out;
    }
    int u = 0;
    for (int i = 0; i < n; i++) {
        const srv_split *sp = r->split ? &r->split[i] : NULL;
        for (int k = 0; k < (sp && sp->n ? sp->n : 1); k++, u++) {
            u_text[u] = i;
            u_sent[u] = sp && sp->n ? k : -1;
            ut[u] = sp && sp->n ? texts[i] + sp->sent[k].start : texts[i];
            ul[u] = sp && sp->n ? sp->sent[k].end - sp->sent[k].start : lens[i];
        }
    }
    int bad = -1;
    char msg[256];
    rc = td_tok_encode_batch(sm->tok, ut, ul, units, sm->max_input_tokens, TD_LONG_SOURCE_ERROR,
                             ids, &bad, msg, sizeof msg);
    if (rc == TD_TOK_ETOOLONG && u_sent[bad] < 0) {
        srv_req_error(r, 422, "text_too_long", param,
                      "text %d has %d tokens; the limit is %d (including </s>)", u_text[bad],
                      ids[bad].n_full, sm->max_input_tokens);
    } else if (rc == TD_TOK_ETOOLONG) {
        /* where the sentence is, in characters of its text */
        size_t cs = 0, ce = 0, b0 = (size_t)(ut[bad] - texts[u_text[bad]]);
        for (size_t b = 0; b < b0 + ul[bad]; b++) {
            int ch = ((unsigned char)texts[u_text[bad]][b] & 0xC0) != 0x80;
            cs += b < b0 && ch;
            ce += ch;
        }
        srv_req_error(r, 422, "text_too_long", param,
                      "text %d, sentence %d (characters %zu..%zu) has %d tokens; the limit is "
                      "%d (including </s>)",
                      u_text[bad], u_sent[bad], cs, ce, ids[bad].n_full, sm->max_input_tokens);
    } else if (rc != 0) {
        srv_req_error(r, 500, "internal", NULL, "%s", msg);
    } else {
        for (u = 0; u < units; u++) {
            int i = u_text[u];
            srv_split *sp = u_sent[u] >= 0 ? &r->split[i] : NULL;
            int k = -1;
            /* an empty or whitespace-only text is not run (td_tok_is_empty) */
            if (td_tok_is_empty(ids[u].n_full)) {
                td_tok_ids_free(&ids[u], 1);
            } else {
                k = r->n_jobs++;
                r->src[k] = ids[u].ids; /* owned by r from here */
                ids[u].ids = NULL;
                srv_job *j = &r->jobs[k];
                j->src = r->src[k];
                j->n_src = ids[u].n;
                j->opts = &r->opts;
                r->tokens_in += ids[u].n;
            }
            if (sp) {
                sp->job[u_sent[u]] = k;
                r->text_job[i] = -1;
            } else {
                r->text_job[i] = k;
            }
        }
        if (r->n_jobs > r->s->o.max_queue) {
            srv_req_error(r, 422, "too_many_sentences", param,
                          "the texts have %d sentences to translate; the limit is %d "
                          "(--max-queue)",
                          r->n_jobs, r->s->o.max_queue);
            rc = -1;
        }
    }
    if (rc != 0)
        td_tok_ids_free(ids, units);
out:
    free(ids);
    free(ut);
    free(ul);
    free(u_text);
    free(u_sent);
    return rc == 0;
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

/* An optional array of 1..TD_MAX_ATTN_SELECT ints, into a malloc'd copy
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
    *out = malloc(k * sizeof(int));
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
 * lens (malloc'd arrays of pointers into the JSON). */
static int get_texts(srv_req *r, json_t *v, const char *key, const char ***texts, size_t **lens,
                     int *n, int *is_list)
{
    int max = r->s->o.max_batch_texts;
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
    *texts = malloc(k * sizeof **texts);
    *lens = malloc(k * sizeof **lens);
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
    "target",
};

static json_t *parse_json_body(srv_req *r)
{
    json_error_t je;
    /* a NUL (\u0000) is a character of a text like any other */
    json_t *root = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root) {
        srv_req_error(r, 400, "invalid_json", NULL, "invalid JSON at line %d column %d: %s",
                      je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        srv_req_error(r, 400, "invalid_request", NULL, "the body must be a JSON object");
        json_decref(root);
        return NULL;
    }
    return root;
}

/* A 400 for a pair no model translates, naming the field and the pairs. */
static void no_pair(srv_req *r, const char *param, const char *src, const char *tgt)
{
    char pairs[512];
    srv_models_pairs_text(r->s->models, pairs, sizeof pairs);
    srv_req_error(r, 400, "unsupported_language", param,
                  "no model translates %s to %s; the models: %s", src ? src : "(any)",
                  tgt ? tgt : "(any)", pairs);
}

/* A string field or NULL; 1 with a 400 recorded when it is not a string. */
static int opt_string(srv_req *r, json_t *root, const char *key, const char **out)
{
    json_t *v = json_object_get(root, key);
    *out = NULL;
    if (!v)
        return 0;
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
        srv_req_error(r, 400, "invalid_type", key, "%s must be a string without NUL", key);
        return 1;
    }
    *out = json_string_value(v);
    return 0;
}

/* The source language of the texts by language identification among the
 * sources of the models into tgt (NULL: any): texts joined by newlines. */
static int detect_source(srv_req *r, const char *const *texts, const size_t *lens, int n,
                         const char *tgt, char *out)
{
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += lens[i] + 1;
    char *all = malloc(len + 1), *w = all;
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
    int rc = srv_libre_detect_source(r->s, all, (size_t)(w - all), tgt, out, 16);
    free(all);
    if (rc != 0)
        no_pair(r, "target", "auto", tgt);
    return rc;
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
    if (opt_string(r, root, "model", &name) || opt_string(r, root, "source", &src) ||
        opt_string(r, root, "target", &tgt))
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
        if ((!autodetect && strcmp(src, r->model->src_lang)) ||
            (tgt && strcmp(tgt, r->model->tgt_lang))) {
            int bad_src = !autodetect && strcmp(src, r->model->src_lang);
            srv_req_error(r, 400, "unsupported_language", bad_src ? "source" : "target",
                          "model %s translates %s to %s, not %s to %s", r->model->name,
                          r->model->src_lang, r->model->tgt_lang, bad_src ? src : "...",
                          bad_src ? "..." : tgt);
            return -1;
        }
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
    if (tgt) {
        r->model = srv_models_get_pair(ms, src, tgt);
    } else {
        /* a source alone: the first model from it */
        srv_pair p[64];
        int np = srv_models_pairs(ms, p, 64);
        for (int i = 0; i < np && i < 64 && !r->model; i++)
            if (!strcmp(p[i].src, src))
                r->model = srv_models_get_pair(ms, src, p[i].tgt);
    }
    if (!r->model) {
        /* which field is wrong: the target when no model translates into it */
        srv_pair p[64];
        int np = srv_models_pairs(ms, p, 64), tgt_known = 0;
        for (int i = 0; i < np && i < 64; i++)
            tgt_known |= tgt && !strcmp(p[i].tgt, tgt);
        no_pair(r, tgt && !tgt_known ? "target" : "source", src, tgt);
        return -1;
    }
    return 0;
}

/* A model whose device failed refuses work (503) instead of queueing it
 * for a batch that would fail too. Returns 1 when an error was recorded. */
static int model_failed(srv_req *r, const srv_model *sm)
{
    const char *why = srv_model_failed(sm);
    if (!why)
        return 0;
    srv_req_error(r, 503, "device_error", NULL, "the model's device failed: %s", why);
    return 1;
}

int srv_api_translate_parse(srv_req *r, const char *ctype, const char *auth_key)
{
    (void)ctype;
    (void)auth_key; /* checked before the body was read */
    json_t *root = parse_json_body(r);
    if (!root)
        return 0;
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
    if (route_native(r, root, texts, lens, n) != 0 || model_failed(r, r->model))
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
    int split = 1;
    if (get_bool(r, root, "split_sentences", &split))
        goto out;
    r->no_split = !split;
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
    if (rc == 1 && !srv_limits_check(r))
        rc = 0;
    if (rc == 1 && r->return_tokens)
        rc = source_offsets(r, texts, lens, n);
    if (rc == 1 && r->n_jobs == 0) {
        /* every text is empty: nothing to run */
        srv_api_translate_respond(r);
        rc = 0;
    }
out:
    free(texts);
    free(lens);
    json_decref(root);
    return rc;
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

static char *decode_text(const srv_model *sm, const td_hypothesis *h)
{
    return decode_target(sm, h->tokens, h->n_tokens);
}

/* JSON string of a detokenized text; invalid UTF-8 (byte pieces that do
 * not form characters) is replaced rather than failing the request. */
static json_t *text_json(char *t)
{
    if (!t)
        return NULL;
    json_t *v = json_string(t);
    if (!v) {
        for (unsigned char *p = (unsigned char *)t; *p; p++)
            if (*p >= 0x80)
                *p = '?';
        v = json_string(t);
    }
    free(t);
    return v;
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

/* ---- texts of several sentences ------------------------------------------ */

static const srv_split *split_of(const srv_req *r, int text)
{
    return r->split && r->split[text].n ? &r->split[text] : NULL;
}

/* Hypotheses of a split text: the fewest of its sentences' (1 when none ran). */
static int split_n_hyps(const srv_req *r, const srv_split *sp)
{
    int nh = 0;
    for (int s = 0; s < sp->n; s++) {
        int k = sp->job[s];
        if (k >= 0 && (!nh || r->jobs[k].res.n_hyps < nh))
            nh = r->jobs[k].res.n_hyps;
    }
    return nh ? nh : 1;
}

/* The one reassembly: hypothesis hyp of every sentence of sp between the
 * text's own separators (malloc'd; NULL when out of memory). ranges (2n,
 * or NULL): each sentence's bytes in it; *score: the sentences' scores
 * weighted by their tokens (the whole text's score with length_penalty 1). */
static char *split_join(const srv_req *r, const srv_split *sp, int hyp, size_t *ranges,
                        double *score)
{
    char **owned = calloc((size_t)sp->n, sizeof *owned);
    const char **parts = calloc((size_t)sp->n, sizeof *parts);
    size_t *plens = calloc((size_t)sp->n, sizeof *plens);
    char *out = NULL;
    size_t out_len;
    double sum = 0, plain = 0;
    long nt = 0;
    int ok = owned && parts && plens, ran = 0;
    for (int s = 0; ok && s < sp->n; s++) {
        int k = sp->job[s];
        parts[s] = "";
        if (k < 0)
            continue; /* nothing to translate: "" */
        const td_result *res = &r->jobs[k].res;
        const td_hypothesis *h = &res->hyps[hyp < res->n_hyps ? hyp : res->n_hyps - 1];
        ok = (owned[s] = decode_text(r->model, h)) != NULL;
        if (ok) {
            parts[s] = owned[s];
            plens[s] = strlen(owned[s]);
        }
        sum += (double)h->score * h->n_tokens;
        plain += h->score;
        nt += h->n_tokens;
        ran++;
    }
    if (ok && td_segment_join(sp->text, sp->len, sp->sent, sp->n, parts, plens, &out, &out_len,
                              ranges) != 0)
        out = NULL;
    *score = nt ? sum / (double)nt : ran ? plain / ran : 0.0;
    for (int s = 0; owned && s < sp->n; s++)
        free(owned[s]);
    free(owned);
    free(parts);
    free(plens);
    return out;
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

int srv_api_n_hyps(const srv_req *r, int text)
{
    if (split_of(r, text))
        return split_n_hyps(r, split_of(r, text));
    int k = r->text_job[text];
    return k < 0 ? 1 : r->jobs[k].res.n_hyps;
}

json_t *srv_api_text_value(const srv_req *r, int text, int hyp)
{
    double score;
    if (split_of(r, text))
        return text_json(split_join(r, split_of(r, text), hyp, NULL, &score));
    int k = r->text_job[text];
    if (k < 0)
        return json_string("");
    return text_json(decode_text(r->model, &r->jobs[k].res.hyps[hyp]));
}

static json_t *native_translation(srv_req *r, const srv_job *j)
{
    const srv_model *sm = r->model;
    const td_result *res = &j->res;
    const td_hypothesis *best = &res->hyps[0];
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "text", text_json(decode_text(sm, best)));
    json_object_set_new(o, "score", real_or_null(best->score));
    if (r->return_tokens) {
        json_object_set_new(o, "tokens",
                            pieces_json(sm, TD_TOK_TARGET, best->tokens, best->n_tokens));
        json_object_set_new(o, "source_tokens",
                            pieces_json(sm, TD_TOK_SOURCE, j->src, j->n_src));
        json_object_set_new(o, "offsets",
                            target_offsets_json(sm, best->tokens, best->n_tokens));
        if (r->src_offsets)
            json_object_set_new(o, "source_offsets",
                                offsets_json(r->src_offsets[j - r->jobs], j->n_src));
    }
    if (r->return_attention && res->attention)
        json_object_set_new(o, "attention", attention_json(res));
    if (r->opts.num_hypotheses > 1) {
        json_t *hs = json_array();
        for (int k = 0; k < res->n_hyps; k++) {
            const td_hypothesis *h = &res->hyps[k];
            json_t *ho = json_object();
            json_object_set_new(ho, "text", text_json(decode_text(sm, h)));
            json_object_set_new(ho, "score", real_or_null(h->score));
            if (r->return_tokens) {
                json_object_set_new(ho, "tokens",
                                    pieces_json(sm, TD_TOK_TARGET, h->tokens, h->n_tokens));
                json_object_set_new(ho, "offsets",
                                    target_offsets_json(sm, h->tokens, h->n_tokens));
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
    const srv_split *sp = split_of(r, i);
    size_t *rng = malloc(2 * (size_t)sp->n * sizeof *rng);
    size_t *src = malloc(2 * (size_t)sp->n * sizeof *src);
    double score;
    char *t = rng && src ? split_join(r, sp, 0, rng, &score) : NULL;
    json_t *o = t ? json_object() : NULL;
    if (!o) {
        free(t);
        free(rng);
        free(src);
        return NULL;
    }
    offsets_to_chars(t, rng, sp->n);
    json_object_set_new(o, "text", text_json(t));
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
            json_t *so = k >= 0 ? native_translation(r, &r->jobs[k]) : native_empty(r, i);
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
        for (int h = 0; hs && h < split_n_hyps(r, sp); h++) {
            double hscore;
            json_t *ht = text_json(split_join(r, sp, h, NULL, &hscore));
            json_array_append_new(hs, json_pack("{s:o*,s:o}", "text", ht, "score",
                                                real_or_null(hscore)));
        }
        json_object_set_new(o, "hypotheses", hs);
    }
    free(rng);
    free(src);
    return o;
}

void srv_api_job_finished(srv_req *r, const srv_job *j)
{
    if (j->status == SRV_JOB_FAILED)
        srv_model_engine_error(r->model, j->engine_rc, j->engine_err);
}

void srv_api_translate_respond(srv_req *r)
{
    for (int i = 0; r->jobs && i < r->n_jobs; i++) {
        switch (r->jobs[i].status) {
        case SRV_JOB_DONE:
            continue;
        case SRV_JOB_TIMEOUT:
            srv_req_error(r, 504, "timeout", NULL,
                          "the request waited longer than %d s and was dropped",
                          r->s->o.request_timeout_s);
            return;
        case SRV_JOB_SHUTDOWN:
            srv_req_error(r, 503, "draining", NULL,
                          "the server shut down before the request could finish");
            return;
        case SRV_JOB_GONE:
            srv_req_error(r, 503, "client_gone", NULL, "the client closed the connection");
            return;
        case SRV_JOB_FAILED:
            srv_req_error(r, 500, "internal", NULL, "translation failed: %s",
                          r->jobs[i].engine_err);
            return;
        default:
            srv_req_error(r, 500, "internal", NULL, "job %d did not finish", i);
            return;
        }
    }
    long tout = 0;
    for (int i = 0; i < r->n_jobs; i++)
        tout += r->jobs[i].res.hyps[0].n_tokens;
    r->tokens_out = tout;
    json_t *root;
    if (r->libre) {
        srv_libre_respond(r);
        return;
    } else {
        json_t *tr = json_array();
        for (int i = 0; i < r->n_texts; i++)
            json_array_append_new(tr, split_of(r, i)          ? native_split(r, i)
                                      : r->text_job[i] < 0 ? native_empty(r, i)
                                      : native_translation(r, &r->jobs[r->text_job[i]]));
        root = json_pack("{s:s,s:o,s:{s:I,s:I}}", "model", r->model->name, "translations", tr,
                         "usage", "source_tokens", (json_int_t)r->tokens_in, "target_tokens",
                         (json_int_t)tout);
    }
    char *body = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(root);
    if (!body) {
        srv_req_error(r, 500, "internal", NULL, "out of memory building the response");
        return;
    }
    srv_req_json(r, 200, body);
}

/* One model of GET /v1/models (and of a load's or reload's answer). */
static json_t *model_json(const srv_server *s, const srv_model *sm)
{
    const td_config *c = td_model_config(sm->m);
    static const char *const pe[] = {"sinusoidal", "sinusoidal_interleaved", "learned",
                                     "relative", "rope"};
    json_t *arch = json_pack(
        "{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:b}", "model_type",
        c->model_type[0] ? c->model_type : "marian", "d_model", c->d_model, "encoder_layers",
        c->encoder_layers, "decoder_layers", c->decoder_layers, "encoder_attention_heads",
        c->encoder_attention_heads, "decoder_attention_heads", c->decoder_attention_heads,
        "encoder_ffn_dim", c->encoder_ffn_dim, "decoder_ffn_dim", c->decoder_ffn_dim,
        "vocab_size", c->vocab_size, "decoder_vocab_size", c->decoder_vocab_size,
        "max_position_embeddings", c->max_position_embeddings, "position_encoding",
        (unsigned)c->position_encoding < 5 ? pe[c->position_encoding] : "unknown",
        "normalize_before", c->normalize_before);
    const char *failed = srv_model_failed(sm);
    return json_pack(
        "{s:s,s:{s:s,s:s},s:o,s:s,s:s,s:I,s:{s:I,s:I,s:i,s:I},s:i,s:s,"
        "s:{s:i,s:i,s:f},s:{s:i,s:i,s:i,s:i}}",
        "name", sm->name, "languages", "source", sm->src_lang, "target", sm->tgt_lang,
        "architecture", arch, "dtype", sm->dtype, "device", sm->device, "weight_bytes",
        (json_int_t)sm->weight_bytes, "memory", "bytes", (json_int_t)sm->bytes, "weight_bytes",
        (json_int_t)sm->weight_bytes, "workers", sm->workers, "worker_bytes",
        (json_int_t)sm->worker_bytes, "generation", (int)sm->generation, "status",
        failed ? "device_error" : "ready", "defaults", "beam_size", sm->defaults.beam_size,
        "max_length", sm->defaults.max_length, "length_penalty",
        (double)sm->defaults.length_penalty, "limits", "max_input_tokens", sm->max_input_tokens,
        "max_length", sm->max_length, "max_batch_texts", s->o.max_batch_texts, "max_beam_size",
        sm->max_beam);
}

/* Records a JSON object as a 200 (a 500 when out of memory); takes o. */
static void respond_object(srv_req *r, int status, json_t *o)
{
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body)
        srv_req_error(r, 500, "internal", NULL, "out of memory");
    else
        srv_req_json(r, status, body);
}

static void api_models(srv_req *r)
{
    srv_server *s = r->s;
    srv_model *all[64];
    int n = srv_models_snapshot(s->models, all, 64);
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        json_array_append_new(list, model_json(s, all[i]));
        srv_model_put(all[i]);
    }
    size_t used, budget;
    srv_models_memory(s->models, &used, &budget);
    respond_object(r, 200,
                   json_pack("{s:o,s:{s:I,s:o},s:{s:s,s:s}}", "models", list, "memory", "used",
                             (json_int_t)used, "budget",
                             budget ? json_integer((json_int_t)budget) : json_null(), "server",
                             "version", srv_version, "commit", srv_commit));
}

/* GET /health/ready: readiness as state.c decides it. */
static void api_ready(srv_req *r)
{
    char why[512];
    switch (srv_server_readiness(r->s, why, sizeof why)) {
    case SRV_READY:
        srv_req_json(r, 200, strdup("{\"status\":\"ready\"}"));
        return;
    case SRV_NOT_READY_DRAINING:
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
        return;
    case SRV_NOT_READY_LOADING:
        srv_req_error(r, 503, "not_ready", NULL, "the models are loading");
        return;
    case SRV_NOT_READY_DEVICE:
        srv_req_error(r, 503, "device_error", NULL, "%s", why);
        return;
    }
    srv_req_error(r, 500, "internal", NULL, "unknown readiness");
}

/* ---- run-time model changes --------------------------------------------------- */

/* "/v1/models/NAME" or "/v1/models/NAME/reload": NAME into name; 1 when
 * the path has that shape and NAME is a valid name. */
static int admin_path(const char *path, char *name, size_t n, int *reload)
{
    const char *p = path + strlen(SRV_MODELS_PREFIX);
    size_t k = strcspn(p, "/");
    *reload = !strcmp(p + k, "/reload");
    if (k == 0 || k >= n || (p[k] && !*reload))
        return 0;
    memcpy(name, p, k);
    name[k] = 0;
    return srv_model_name_ok(name);
}

void srv_api_model_delete(srv_req *r)
{
    char name[128], msg[512];
    int reload, inflight = 0;
    if (!admin_path(r->path, name, sizeof name, &reload) || reload) {
        srv_req_error(r, 404, "model_not_found", "model", "no such model path");
        return;
    }
    int status = srv_models_unload(r->s->models, name, &inflight, msg, sizeof msg);
    if (status != 200) {
        srv_req_error(r, status, status == 404 ? "model_not_found" : status == 409 ? "conflict"
                                                                                  : "internal",
                      "model", "%s", msg);
        return;
    }
    respond_object(r, 200, json_pack("{s:s,s:s,s:i}", "name", name, "status", "unloaded",
                                     "requests_in_flight", inflight));
}

/* A load's "path": a directory below --models-dir (resolved, links
 * followed, and still below it; a path with a NUL names none). 0, or -1
 * with an error recorded (404: no such directory there). */
static int load_path(srv_req *r, json_t *pv, char *out, size_t n)
{
    char base[4096], full[8300], real[4096];
    if (!realpath(r->s->o.models_dir, base)) {
        srv_req_error(r, 500, "internal", NULL, "--models-dir: cannot resolve it");
        return -1;
    }
    const char *path = json_string_value(pv);
    snprintf(full, sizeof full, "%s/%s", base, path);
    size_t bl = strlen(base);
    if (strlen(path) != json_string_length(pv) || !realpath(full, real) ||
        strncmp(real, base, bl) || (real[bl] != '/' && real[bl])) {
        srv_req_error(r, 404, "not_found", "path", "path names no directory below --models-dir");
        return -1;
    }
    snprintf(out, n, "%s", real);
    return 0;
}

int srv_api_admin_parse(srv_req *r)
{
    r->op = calloc(1, sizeof *r->op);
    if (!r->op) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return 0;
    }
    srv_model_op *op = r->op;
    int reload = 0;
    if (r->ep == SRV_EP_MODEL_ADMIN) {
        if (!admin_path(r->path, op->spec.name, sizeof op->spec.name, &reload) || !reload) {
            srv_req_error(r, 404, "not_found", NULL, "POST /v1/models/NAME/reload only");
            return 0;
        }
        op->kind = SRV_OP_RELOAD;
        return 1;
    }
    /* POST /v1/models {"name", "path", "source"?, "target"?} */
    json_t *root = parse_json_body(r);
    if (!root)
        return 0;
    static const char *const fields[] = {"name", "path", "source", "target"};
    const char *key, *v[4] = {NULL, NULL, NULL, NULL};
    json_t *val;
    int rc = 0;
    json_object_foreach(root, key, val)
    {
        int known = 0;
        for (size_t i = 0; i < 4; i++)
            known |= !strcmp(key, fields[i]);
        if (!known) {
            srv_req_error(r, 400, "unknown_field", key, "unknown field '%s'", key);
            goto out;
        }
    }
    if (!r->s->o.models_dir) {
        srv_req_error(r, 403, "forbidden", "path",
                      "loading a model at run time needs --models-dir (the directory it loads "
                      "from)");
        goto out;
    }
    json_t *pv = json_object_get(root, "path");
    if (!json_is_string(pv)) {
        srv_req_error(r, 400, pv ? "invalid_type" : "missing_field", "path",
                      "path must be a string (a directory below --models-dir)");
        goto out;
    }
    if (opt_string(r, root, "name", &v[0]) || opt_string(r, root, "source", &v[2]) ||
        opt_string(r, root, "target", &v[3]) ||
        load_path(r, pv, op->spec.dir, sizeof op->spec.dir) != 0)
        goto out;
    if (v[0] && !srv_model_name_ok(v[0])) {
        srv_req_error(r, 400, "invalid_name", "name",
                      "name must be 1..127 characters of A-Z a-z 0-9 . _ -");
        goto out;
    }
    if (v[0]) {
        snprintf(op->spec.name, sizeof op->spec.name, "%s", v[0]);
    } else {
        const char *b = strrchr(op->spec.dir, '/');
        snprintf(op->spec.name, sizeof op->spec.name, "%.127s", b ? b + 1 : op->spec.dir);
        if (!srv_model_name_ok(op->spec.name)) {
            srv_req_error(r, 400, "invalid_name", "name",
                          "the directory's name is no model name: give name");
            goto out;
        }
    }
    if (!v[2] != !v[3]) {
        srv_req_error(r, 400, "missing_field", v[2] ? "target" : "source",
                      "source and target go together");
        goto out;
    }
    if (v[2]) {
        snprintf(op->spec.langs, sizeof op->spec.langs, "%.15s-%.15s", v[2], v[3]);
        if (!srv_model_langs_ok(op->spec.langs)) {
            srv_req_error(r, 400, "invalid_language", "source",
                          "source and target must be 2- or 3-letter lower-case codes");
            goto out;
        }
    }
    op->kind = SRV_OP_LOAD;
    rc = 1;
out:
    json_decref(root);
    return rc;
}

void srv_api_admin_respond(srv_req *r)
{
    const srv_model_op *op = r->op;
    if (op->status != 200) {
        srv_req_error(r, op->status, op->code, op->param[0] ? op->param : NULL, "%s", op->msg);
        return;
    }
    srv_model *sm = srv_models_get(r->s->models, op->name);
    json_t *m = sm ? model_json(r->s, sm) : NULL;
    srv_model_put(sm);
    respond_object(r, op->kind == SRV_OP_LOAD ? 201 : 200,
                   json_pack("{s:s,s:I,s:o*,s:s}", "name", op->name, "generation",
                             (json_int_t)op->generation, "model", m, "message", op->msg));
}

void srv_api_get(srv_req *r)
{
    srv_server *s = r->s;
    switch (r->ep) {
    case SRV_EP_LIVE:
        srv_req_json(r, 200, strdup("{\"status\":\"ok\"}"));
        return;
    case SRV_EP_READY:
        api_ready(r);
        return;
    case SRV_EP_METRICS: {
        char *t = srv_metrics_render(s->metrics, srv_server_readiness(s, NULL, 0) == SRV_READY);
        if (!t) {
            srv_req_error(r, 500, "internal", NULL, "out of memory");
            return;
        }
        srv_req_json(r, 200, t);
        r->resp_ctype = "text/plain; version=0.0.4; charset=utf-8";
        return;
    }
    case SRV_EP_VERSION: {
        json_t *v = json_pack("{s:s,s:s,s:s}", "name", "transformerd", "version", srv_version,
                              "commit", srv_commit);
        char *body = v ? json_dumps(v, JSON_COMPACT) : NULL;
        json_decref(v);
        if (!body)
            srv_req_error(r, 500, "internal", NULL, "out of memory");
        else
            srv_req_json(r, 200, body);
        return;
    }
    case SRV_EP_OPENAPI: {
        char *doc = srv_openapi_render(s);
        if (!doc)
            srv_req_error(r, 500, "internal", NULL, "out of memory");
        else
            srv_req_json(r, 200, doc);
        return;
    }
    case SRV_EP_MODELS:
        if (!atomic_load(&s->ready)) {
            srv_req_error(r, 503, "not_ready", NULL, "the models are loading");
            return;
        }
        api_models(r);
        return;
    default:
        if (srv_libre_endpoint(r->ep)) {
            srv_libre_get(r);
            return;
        }
        srv_req_error(r, 500, "internal", NULL, "unrouted GET");
    }
}
