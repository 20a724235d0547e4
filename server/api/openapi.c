/*
 * openapi.c - GET /openapi.json: the template server/api/openapi.json with the
 * running server's models and limits filled in (openapi.h). Keep the
 * template in step with native.c, libre.c, deepl.c and admin.c: tests/test_server_http.c checks
 * that every routed path is listed, and ctest `schemathesis` checks the
 * daemon's answers against the document.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buildinfo.h"
#include "deepl.h"
#include "models.h"
#include "openapi.h"
#include "request.h"

/* The object at a '/'-separated path of object keys (array indices as
 * digits), or NULL. */
static json_t *at(json_t *root, const char *path)
{
    char key[128];
    json_t *v = root;
    while (v && *path) {
        size_t n = strcspn(path, "/");
        if (n >= sizeof key)
            return NULL;
        memcpy(key, path, n);
        key[n] = 0;
        path += n + (path[n] == '/');
        v = json_is_array(v) ? json_array_get(v, (size_t)strtoul(key, NULL, 10))
                             : json_object_get(v, key);
    }
    return v;
}

/* Sets key of the object at path (takes val); with val NULL, deletes it. */
static void put(json_t *root, const char *path, const char *key, json_t *val)
{
    json_t *o = at(root, path);
    if (o && val)
        json_object_set_new(o, key, val);
    else if (o)
        json_object_del(o, key);
    else
        json_decref(val);
}

static json_t *add_unique(json_t *arr, const char *s)
{
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (!strcmp(json_string_value(json_array_get(arr, i)), s))
            return arr;
    json_array_append_new(arr, json_string(s));
    return arr;
}

/* {"properties": {"source": {"enum": [a, b?]}, "target": {"enum": [t]}}} */
static json_t *pair(const char *src, const char *also, const char *tgt)
{
    json_t *se = json_array();
    json_array_append_new(se, json_string(src));
    if (also)
        json_array_append_new(se, json_string(also));
    return json_pack("{s:{s:{s:o},s:{s:[s]}}}", "properties", "source", "enum", se, "target",
                     "enum", tgt);
}

/* A multilingual model's pairs: any of its languages (and also) into any
 * of them. */
static json_t *pairs_of(const srv_model *sm, const char *also)
{
    json_t *se = json_array(), *te = json_array();
    for (int i = 0; i < sm->n_langs; i++) {
        json_array_append_new(se, json_string(td_tok_lang(sm->tok, i)));
        json_array_append_new(te, json_string(td_tok_lang(sm->tok, i)));
    }
    if (also)
        json_array_append_new(se, json_string(also));
    return json_pack("{s:{s:{s:o},s:{s:o}}}", "properties", "source", "enum", se, "target",
                     "enum", te);
}

#define TR "components/schemas/TranslateRequest"
#define LR "components/schemas/LibreRequest"
#define LF "components/schemas/LibreFileRequest"
#define LRF "components/schemas/LibreRequestForm"

static void fill_models(json_t *d, srv_model *const *all, int n)
{
    int max_beam = 0, libre_beam = 0, max_len = 0, max_in = 0, layers = 0, heads = 0;
    json_t *names = json_array(), *langs = json_array(), *tr_any = json_array();
    json_t *lr_any = json_array(), *lf_any = json_array(), *tr_pairs = json_array();
    for (int i = 0; i < n; i++) {
        const srv_model *sm = all[i];
        const td_config *c = td_model_config(sm->m);
        add_unique(names, sm->name);
        for (int k = 0; k < sm->n_langs; k++)
            add_unique(langs, td_tok_lang(sm->tok, k));
        if (sm->n_langs == 0) {
            add_unique(langs, sm->src_lang);
            add_unique(langs, sm->tgt_lang);
        }
        /* the widest model for the native API (a request names its model);
         * /translate's alternatives are held to the narrowest (libre.c) */
        if (sm->max_beam > max_beam)
            max_beam = sm->max_beam;
        libre_beam = i == 0 || sm->max_beam < libre_beam ? sm->max_beam : libre_beam;
        if (sm->max_length > max_len)
            max_len = sm->max_length;
        max_in = i == 0 || sm->max_input_tokens < max_in ? sm->max_input_tokens : max_in;
        layers = i == 0 || c->decoder_layers < layers ? c->decoder_layers : layers;
        heads = i == 0 || c->decoder_attention_heads < heads ? c->decoder_attention_heads : heads;
        const int multi = sm->n_langs > 0;
        json_array_append_new(lr_any, multi ? pairs_of(sm, "auto")
                                            : pair(sm->src_lang, "auto", sm->tgt_lang));
        /* the native API: a model, and its languages when they are given */
        json_t *tp = multi ? pairs_of(sm, "auto") : pair(sm->src_lang, "auto", sm->tgt_lang);
        json_object_set_new(json_object_get(tp, "properties"), "model",
                            json_pack("{s:[s]}", "enum", sm->name));
        json_array_append_new(tr_pairs, tp);
        json_array_append_new(lf_any, multi ? pairs_of(sm, "auto")
                                            : pair(sm->src_lang, "auto", sm->tgt_lang));
    }
    /* a language to itself: returned as it is */
    for (size_t i = 0; i < json_array_size(langs); i++) {
        const char *l = json_string_value(json_array_get(langs, i));
        json_array_append_new(lr_any, pair(l, NULL, l));
        json_array_append_new(lf_any, pair(l, NULL, l));
    }
    /* num_hypotheses <= beam_size: one alternative per beam size (without
     * beam_size the beam widens to num_hypotheses, native.c) */
    for (int b = 1; b <= max_beam; b++)
        json_array_append_new(tr_any, json_pack("{s:{s:{s:[i]},s:{s:i}}}", "properties",
                                                "beam_size", "enum", b, "num_hypotheses",
                                                "maximum", b));
    put(d, TR "/properties/model", "enum", names);
    put(d, TR "/properties/beam_size", "maximum", json_integer(max_beam));
    put(d, TR "/properties/num_hypotheses", "maximum", json_integer(max_beam));
    put(d, TR "/properties/max_length", "maximum", json_integer(max_len));
    put(d, TR, "x-max-input-tokens", json_integer(max_in));
    put(d, TR, "allOf", json_pack("[{s:o},{s:o}]", "anyOf", tr_any, "anyOf", tr_pairs));
    put(d, TR "/properties/attention_layers/items", "minimum", json_integer(-layers));
    put(d, TR "/properties/attention_layers/items", "maximum", json_integer(layers - 1));
    put(d, TR "/properties/attention_heads/items", "maximum", json_integer(heads - 1));
    json_t *with_auto = json_deep_copy(langs);
    json_array_append_new(with_auto, json_string("auto"));
    put(d, LR "/properties/source", "enum", with_auto);
    put(d, LR "/properties/target", "enum", json_deep_copy(langs));
    put(d, LR "/properties/alternatives", "maximum", json_integer(libre_beam - 1));
    put(d, LRF "/properties/source", "enum", json_deep_copy(json_object_get(at(d, LR "/properties/source"), "enum")));
    put(d, LRF "/properties/target", "enum", json_deep_copy(langs));
    put(d, LRF "/properties/alternatives", "maximum", json_integer(libre_beam - 1));
    /* oneOf (the pairs exclude each other): schemathesis 4.32's coverage
     * phase fails on these as an anyOf */
    put(d, LRF, "oneOf", json_deep_copy(lr_any));
    put(d, LR, "oneOf", lr_any);
    put(d, LF "/properties/source", "enum", json_deep_copy(with_auto)); /* the file's language */
    put(d, LF "/properties/target", "enum", langs);
    /* oneOf (the pairs exclude each other): schemathesis 4.32 fails on an
     * anyOf in a multipart body */
    put(d, LF, "oneOf", lf_any);
}

/* Not ready: nothing model-dependent (an empty enum is not JSON Schema). */
static void drop_models(json_t *d)
{
    put(d, TR "/properties/model", "enum", NULL);
    put(d, TR "/properties/beam_size", "maximum", NULL);
    put(d, TR "/properties/num_hypotheses", "maximum", NULL);
    put(d, TR "/properties/max_length", "maximum", NULL);
    put(d, TR, "x-max-input-tokens", NULL);
    put(d, TR, "allOf", NULL);
    put(d, TR "/properties/attention_layers/items", "minimum", NULL);
    put(d, TR "/properties/attention_layers/items", "maximum", NULL);
    put(d, TR "/properties/attention_heads/items", "maximum", NULL);
    put(d, LR "/properties/source", "enum", NULL);
    put(d, LR "/properties/target", "enum", NULL);
    put(d, LR "/properties/alternatives", "maximum", NULL);
    put(d, LR, "oneOf", NULL);
    put(d, LRF "/properties/source", "enum", NULL);
    put(d, LRF "/properties/target", "enum", NULL);
    put(d, LRF "/properties/alternatives", "maximum", NULL);
    put(d, LRF, "oneOf", NULL);
    put(d, LF "/properties/source", "enum", NULL);
    put(d, LF "/properties/target", "enum", NULL);
    put(d, LF, "oneOf", NULL);
}

char *srv_openapi_render(const srv_server *s)
{
    json_error_t je;
    json_t *d = json_loads(srv_openapi_template, 0, &je);
    if (!d)
        return NULL;
    put(d, "info", "version", json_string(srv_version));
    /* texts per request: --max-batch-texts */
    put(d, TR "/properties/text/oneOf/1", "maxItems", json_integer(s->api->max_batch_texts));
    put(d, LR "/properties/q/oneOf/1", "maxItems", json_integer(s->api->max_batch_texts));
    srv_model *all[64];
    int n = atomic_load(&s->ready) ? srv_models_snapshot(s->models, all, 64) : 0;
    if (n > 0)
        fill_models(d, all, n);
    else
        drop_models(d);
    for (int i = 0; i < n; i++)
        srv_model_put(all[i]);
    srv_deepl_openapi(s, d);
    char *out = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    return out;
}
