/*
 * ct2_config.c - the configuration of a CTranslate2 model directory
 * (wformat.h's config hook of wf_ct2.c): a CTranslate2 Transformer has no
 * MarianConfig; what config.json says elsewhere comes here from
 *   - model.bin's attributes, per side (encoder/, decoder/): num_heads,
 *     pre_norm, activation, scale_embeddings, start_from_zero_embedding,
 *     alignment_layer/_heads (read by CTranslate2 for alignments only: not
 *     used here), and which optional variables are there;
 *   - the variables' shapes: d_model, vocabulary sizes, layer counts, the
 *     feed-forward width, the stored position table's rows;
 *   - CTranslate2's config.json (written since binary version 5: unk, bos,
 *     eos and decoder start tokens, add_source_bos/eos, layer_norm_epsilon,
 *     multi_query_attention), optional;
 *   - the vocabularies (tokenizer.h, td_tok_list): the token ids.
 * Defaults for older files are CTranslate2's own (src/layers/
 * transformer.cc: num_heads 8, pre_norm true, ReLU, sqrt(d_model) scale;
 * TransformerBig: 16 heads; LayerNorm epsilon 1e-6).
 * What the engine does not compute is refused by name and reason.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "config.h"
#include "tokenizer.h"
#include "wformat.h"

#define C2_FILE "model.bin"
#define C2_MAX_LAYERS 256
#define C2_GENERATED_POSITIONS 1024 /* rows of the generated sinusoid */

typedef struct c2cfg {
    const td_wsrc *s;
    const char *dir;
    char *err;
    size_t errlen;
} c2cfg;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int cc_fail(c2cfg *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, x->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static const td_wt *cc_find(const c2cfg *x, const char *name)
{
    return x->s->fmt->find(x->s, name);
}

/* side/layer_N/rest */
static const td_wt *cc_find_layer(const c2cfg *x, const char *side, int n, const char *rest)
{
    char name[256];
    snprintf(name, sizeof name, "%s/layer_%d/%s", side, n, rest);
    return cc_find(x, name);
}

/* A scalar attribute side/key: 0 with *v, 1 when absent, -1 when not a
 * scalar. */
static int cc_scalar(c2cfg *x, const char *side, const char *key, float *v)
{
    char name[128];
    snprintf(name, sizeof name, "%s/%s", side, key);
    const td_wt *t = cc_find(x, name);
    if (!t)
        return 1;
    if (t->n_elements != 1)
        return cc_fail(x, "%s: attribute '%s' must be a scalar (%lld values)", C2_FILE, name,
                       (long long)t->n_elements);
    char rerr[256];
    if (x->s->fmt->read_f32(x->s, t, v, rerr, sizeof rerr) != 0)
        return cc_fail(x, "%s: attribute '%s': %s", C2_FILE, name, rerr);
    return 0;
}

/* The attribute of both sides, which the engine keeps once: they must
 * agree. dflt where absent. */
static int cc_both(c2cfg *x, const char *key, float dflt, float *v)
{
    float e = dflt, d = dflt;
    if (cc_scalar(x, "encoder", key, &e) < 0 || cc_scalar(x, "decoder", key, &d) < 0)
        return -1;
    if (e != d)
        return cc_fail(x, "%s: encoder/%s (%g) and decoder/%s (%g) differ: this engine keeps "
                       "one", C2_FILE, key, (double)e, key, (double)d);
    *v = e;
    return 0;
}

/* The first of two names present. */
static const td_wt *cc_either(const c2cfg *x, const char *a, const char *b)
{
    const td_wt *t = cc_find(x, a);
    return t ? t : cc_find(x, b);
}

/* Options of CTranslate2's TransformerSpec that this engine does not
 * compute, each detected by a variable it implies. */
static int cc_refuse_options(c2cfg *x)
{
    static const struct { const char *name, *why; } opt[] = {
        {"encoder/embeddings_1/weight", "several source embeddings (source features)"},
        {"encoder/layernorm_embedding/gamma", "a layer norm after the embeddings"},
        {"decoder/layernorm_embedding/gamma", "a layer norm after the embeddings"},
        {"encoder/layer_0/self_attention/relative_position_keys", "relative positions"},
        {"encoder/layer_0/self_attention/relative_attention_bias", "a relative attention bias"},
        {"encoder/layer_0/self_attention/queries_scale", "a stored queries scale"},
        {"encoder/layer_0/self_attention/num_heads_kv", "grouped or multi-query attention"},
        {"decoder/layer_0/self_attention/num_heads_kv", "grouped or multi-query attention"},
        {"decoder/layer_0/self_attention/rotary_dim", "rotary embeddings"},
        {"encoder/layer_0/ffn/linear_0_noact/weight", "gated feed-forward layers"},
        {"decoder/project_in/weight", "projections around the decoder"},
        {"decoder/scale_outputs", "scaled outputs"},
        {"encoder/layer_0/input_layer_norm/gamma", "pre and post layer norms"},
    };
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        if (cc_find(x, opt[i].name))
            return cc_fail(x, "%s: '%s' means %s, which this engine does not compute", C2_FILE,
                           opt[i].name, opt[i].why);
    const td_wt *g = cc_find(x, "encoder/layer_0/ffn/layer_norm/gamma");
    if (g && !cc_find(x, "encoder/layer_0/ffn/layer_norm/beta"))
        return cc_fail(x, "%s: layer norms without beta (RMSNorm), which this engine does not "
                       "compute", C2_FILE);
    float f;
    int rc = cc_scalar(x, "decoder", "alibi", &f);
    if (rc < 0)
        return -1;
    if (rc == 0 && f != 0.0f)
        return cc_fail(x, "%s: decoder/alibi is set (ALiBi), which this engine does not compute",
                       C2_FILE);
    rc = cc_scalar(x, "encoder", "multi_query_attention", &f);
    if (rc < 0)
        return -1;
    if (rc == 0 && f != 0.0f)
        return cc_fail(x, "%s: encoder/multi_query_attention is set, which this engine does not "
                       "compute", C2_FILE);
    return 0;
}

/* CTranslate2's activation codes (python/ctranslate2/specs/common_spec.py,
 * Activation). */
static int cc_activation(c2cfg *x, td_config *c)
{
    float a = 0.0f; /* set by cc_both (-O3 cannot tell that a failure returns first) */
    if (cc_both(x, "activation", 0.0f, &a))
        return -1;
    switch ((int)a) {
    case 0: c->activation = TD_ACT_RELU; return 0;
    case 1: c->activation = TD_ACT_GELU_NEW; return 0; /* GELUTanh */
    case 2: c->activation = TD_ACT_SILU; return 0;     /* Swish */
    case 3: c->activation = TD_ACT_GELU; return 0;
    }
    return cc_fail(x, "%s: activation %d is not supported (0 ReLU, 1 GELUTanh, 2 Swish, 3 GELU)",
                   C2_FILE, (int)a);
}

/* scale_embeddings: a flag (int8: sqrt(d_model) or none) or the factor
 * (float); before it, embeddings/multiply_by_sqrt_depth; absent: sqrt. */
static int cc_embed_scale(c2cfg *x, const char *side, int d, float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s/scale_embeddings", side);
    const td_wt *t = cc_find(x, key);
    if (!t) {
        snprintf(key, sizeof key, "%s/embeddings/multiply_by_sqrt_depth", side);
        t = cc_find(x, key);
    }
    float v = 1.0f;
    if (!t) {
        *out = sqrtf((float)d);
        return 0;
    }
    const char *k = strchr(key, '/') + 1;
    if (cc_scalar(x, side, k, &v) != 0)
        return -1;
    if (t->dtype == TD_I8)
        *out = v != 0.0f ? sqrtf((float)d) : 1.0f;
    else
        *out = v;
    if (!(*out > 0.0f) || !isfinite(*out))
        return cc_fail(x, "%s: %s must be positive (got %g)", C2_FILE, key, (double)*out);
    return 0;
}

static int cc_count_layers(const c2cfg *x, const char *side)
{
    int n = 0;
    while (n < C2_MAX_LAYERS && cc_find_layer(x, side, n, "ffn/linear_0/weight"))
        n++;
    return n;
}

/* Dimensions from the variables' shapes. */
static int cc_shapes(c2cfg *x, td_config *c)
{
    const td_wt *ee = cc_either(x, "encoder/embeddings_0/weight", "encoder/embeddings/weight");
    const td_wt *de = cc_find(x, "decoder/embeddings/weight");
    const td_wt *pr = cc_find(x, "decoder/projection/weight");
    if (!ee || !de || !pr)
        return cc_fail(x, "%s: missing variable '%s'", C2_FILE,
                       !ee ? "encoder/embeddings_0/weight"
                       : !de ? "decoder/embeddings/weight" : "decoder/projection/weight");
    if (ee->rank != 2 || de->rank != 2 || pr->rank != 2 || ee->shape[1] != de->shape[1] ||
        pr->shape[1] != de->shape[1] || pr->shape[0] != de->shape[0] || ee->shape[1] < 1 ||
        ee->shape[1] > 65536 || ee->shape[0] < 1 || de->shape[0] < 1 ||
        ee->shape[0] >= (1 << 24) || de->shape[0] >= (1 << 24))
        return cc_fail(x, "%s: the embeddings (%s) and the output projection (%s) disagree in "
                       "shape", C2_FILE, ee->name, pr->name);
    c->d_model = (int)ee->shape[1];
    c->vocab_size = (int)ee->shape[0];
    c->decoder_vocab_size = (int)pr->shape[0];
    const void *re = x->s->fmt->raw(x->s, ee), *rd = x->s->fmt->raw(x->s, de),
               *rp = x->s->fmt->raw(x->s, pr);
    c->share_encoder_decoder_embeddings = re && re == rd;
    c->tie_word_embeddings = rd && rd == rp;
    c->encoder_layers = cc_count_layers(x, "encoder");
    c->decoder_layers = cc_count_layers(x, "decoder");
    if (!c->encoder_layers || !c->decoder_layers)
        return cc_fail(x, "%s: no %s layers (looked for %s/layer_0/ffn/linear_0/weight)",
                       C2_FILE, c->encoder_layers ? "decoder" : "encoder",
                       c->encoder_layers ? "decoder" : "encoder");
    const td_wt *fe = cc_find(x, "encoder/layer_0/ffn/linear_0/weight");
    const td_wt *fd = cc_find(x, "decoder/layer_0/ffn/linear_0/weight");
    if (fe->rank != 2 || fd->rank != 2 || fe->shape[0] < 1 || fd->shape[0] < 1 ||
        fe->shape[0] > (1 << 20) || fd->shape[0] > (1 << 20))
        return cc_fail(x, "%s: the feed-forward weights must be matrices", C2_FILE);
    c->encoder_ffn_dim = (int)fe->shape[0];
    c->decoder_ffn_dim = (int)fd->shape[0];
    return 0;
}

/* The stored position tables, or none: CTranslate2's generated sinusoid
 * (posenc.c). */
static int cc_positions(c2cfg *x, td_config *c)
{
    const td_wt *pe = cc_find(x, "encoder/position_encodings/encodings");
    const td_wt *pd = cc_find(x, "decoder/position_encodings/encodings");
    if (!pe && !pd) {
        /* CTranslate2 generates its sinusoid for any length: the table is
         * made for the engine's longest sentence */
        c->position_encoding = TD_POS_SINUSOIDAL_CT2;
        c->max_position_embeddings = C2_GENERATED_POSITIONS;
        return 0;
    }
    if (!pe || !pd)
        return cc_fail(x, "%s: a stored position table for one side only (%s/position_encodings/"
                       "encodings is missing)", C2_FILE, pe ? "decoder" : "encoder");
    if (pe->rank != 2 || pd->rank != 2 || pe->shape[0] != pd->shape[0] ||
        pe->shape[1] != c->d_model || pd->shape[1] != c->d_model || pe->shape[0] < 2 ||
        pe->shape[0] > (1 << 20))
        return cc_fail(x, "%s: the position tables of the encoder and the decoder must both be "
                       "(positions, %d)", C2_FILE, c->d_model);
    c->position_encoding = TD_POS_LEARNED;
    c->max_position_embeddings = (int)pe->shape[0];
    return 0;
}

/* num_heads; absent (the first specs, TransformerBase and TransformerBig,
 * which CTranslate2 tells by name), 8, or 16 for TransformerBig's width. */
static int cc_heads(c2cfg *x, td_config *c)
{
    float dflt = c->d_model == 1024 ? 16.0f : 8.0f;
    float he = dflt, hd = dflt;
    if (cc_scalar(x, "encoder", "num_heads", &he) < 0 ||
        cc_scalar(x, "decoder", "num_heads", &hd) < 0)
        return -1;
    if (he < 1 || hd < 1 || he > 1024 || hd > 1024 || c->d_model % (int)he ||
        c->d_model % (int)hd)
        return cc_fail(x, "%s: num_heads (encoder %g, decoder %g) must divide d_model %d",
                       C2_FILE, (double)he, (double)hd, c->d_model);
    c->encoder_attention_heads = (int)he;
    c->decoder_attention_heads = (int)hd;
    return 0;
}

/* CTranslate2's config.json, when there: a JSON object (null: unset). */
static json_t *cc_json(c2cfg *x)
{
    char path[4400];
    struct stat sb;
    snprintf(path, sizeof path, "%s/config.json", x->dir);
    if (stat(path, &sb) != 0)
        return json_object();
    if (!S_ISREG(sb.st_mode)) {
        cc_fail(x, "config.json: not a regular file");
        return NULL;
    }
    json_error_t je;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        cc_fail(x, "config.json: %s", o ? "must be a JSON object" : je.text);
        json_decref(o);
        return NULL;
    }
    return o;
}

static const char *cc_str(const json_t *o, const char *key, const char *dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : v && json_is_null(v) ? NULL : dflt;
}

/* Token ids from the vocabularies and config.json's token strings. */
static int cc_tokens(c2cfg *x, td_config *c, const json_t *o, int zero_start)
{
    td_tok_list ls, lt;
    int rc = td_tok_list_load(&ls, x->dir, TD_TOK_SOURCE, x->err, x->errlen);
    if (rc == 1)
        return cc_fail(x, "%s: no vocabulary (shared_vocabulary.json, source_vocabulary.json "
                       "or their .txt)", C2_FILE);
    if (rc != 0)
        return -1;
    rc = td_tok_list_load(&lt, x->dir, TD_TOK_TARGET, x->err, x->errlen);
    if (rc != 0) {
        if (rc == 1)
            cc_fail(x, "%s: no target vocabulary (target_vocabulary.json or .txt)", C2_FILE);
        td_tok_list_free(&ls);
        return -1;
    }
    rc = -1;
    if (ls.n != c->vocab_size) {
        cc_fail(x, "%s: %d tokens, but %s's source embeddings have %d rows", ls.file, ls.n,
                C2_FILE, c->vocab_size);
        goto out;
    }
    if (lt.n != c->decoder_vocab_size) {
        cc_fail(x, "%s: %d tokens, but %s's output projection has %d rows", lt.file, lt.n,
                C2_FILE, c->decoder_vocab_size);
        goto out;
    }
    const char *eos = cc_str(o, "eos_token", "</s>"), *bos = cc_str(o, "bos_token", "<s>");
    const char *start = cc_str(o, "decoder_start_token", "<s>");
    c->eos_token_id = eos ? td_tok_list_find(&lt, eos) : -1;
    if (c->eos_token_id < 0) {
        cc_fail(x, "%s: the end token '%s' is not in %s", "config.json", eos ? eos : "null",
                lt.file);
        goto out;
    }
    c->bos_token_id = bos ? td_tok_list_find(&lt, bos) : -1;
    if (zero_start) {
        c->decoder_start_token_id = c->decoder_vocab_size; /* the zero row */
    } else {
        c->decoder_start_token_id = start ? td_tok_list_find(&lt, start) : -1;
        if (c->decoder_start_token_id < 0) {
            cc_fail(x, "config.json: the decoder start token '%s' is not in %s",
                    start ? start : "null", lt.file);
            goto out;
        }
    }
    /* no padding token in CTranslate2's vocabularies: the end token pads
     * (masked), and nothing is suppressed */
    c->pad_token_id = c->eos_token_id < c->vocab_size ? c->eos_token_id : 0;
    c->forced_eos_token_id = -1;
    c->n_suppress = 0;
    /* CTranslate2's beam search ends a sentence as soon as enough of its
     * hypotheses have ended, not on transformers' heuristic: early_stopping
     * true matches it on every fixture line (docs/decisions.md) */
    c->early_stopping = TD_EARLY_STOP_TRUE;
    rc = 0;
out:
    td_tok_list_free(&ls);
    td_tok_list_free(&lt);
    return rc;
}

/* config.json's switches: what this engine computes of them. */
static int cc_json_switches(c2cfg *x, td_config *c, const json_t *o)
{
    const json_t *v = json_object_get(o, "add_source_bos");
    if (json_is_true(v))
        return cc_fail(x, "config.json: add_source_bos is true, which this engine's tokenizer "
                       "does not do");
    v = json_object_get(o, "multi_query_attention");
    if (json_is_true(v))
        return cc_fail(x, "config.json: multi_query_attention is true, which this engine does "
                       "not compute");
    c->layer_norm_eps = 1e-6f; /* CTranslate2's LayerNorm default */
    v = json_object_get(o, "layer_norm_epsilon");
    if (json_is_number(v)) {
        double e = json_number_value(v);
        if (!(e > 0.0 && e < 1.0))
            return cc_fail(x, "config.json: layer_norm_epsilon must be in (0, 1) (got %g)", e);
        c->layer_norm_eps = (float)e;
    }
    return 0;
}

int td_ct2_config(const td_wsrc *s, const char *dir, td_config *c, char *err, size_t errlen);

int td_ct2_config(const td_wsrc *s, const char *dir, td_config *c, char *err, size_t errlen)
{
    c2cfg x = {s, dir, err, errlen};
    /* the spec name is the first thing after the version (wf_ct2.c keeps
     * it private): a Transformer is told by its variables */
    if (!cc_find(&x, "decoder/embeddings/weight") || !cc_find(&x, "encoder/layer_0/ffn/linear_0/weight"))
        return cc_fail(&x, "%s: not a sequence-to-sequence Transformer (no encoder/layer_0 and "
                       "decoder/embeddings variables)", C2_FILE);
    if (cc_refuse_options(&x) || cc_shapes(&x, c) || cc_positions(&x, c) ||
        cc_heads(&x, c) || cc_activation(&x, c))
        return -1;
    float pre = 1.0f;
    if (cc_both(&x, "pre_norm", 1.0f, &pre))
        return -1;
    c->normalize_before = pre != 0.0f;
    float se = 1.0f, sd = 1.0f;
    if (cc_embed_scale(&x, "encoder", c->d_model, &se) ||
        cc_embed_scale(&x, "decoder", c->d_model, &sd))
        return -1;
    if (se != sd)
        return cc_fail(&x, "%s: the encoder's embedding scale %g and the decoder's %g differ: "
                       "this engine keeps one", C2_FILE, (double)se, (double)sd);
    c->embedding_scale = se;
    c->scale_embedding = se != 1.0f;
    float zero = 0.0f;
    if (cc_scalar(&x, "decoder", "start_from_zero_embedding", &zero) < 0)
        return -1;
    c->decoder_start_zero = zero != 0.0f;
    const td_wt *w = cc_find(&x, "encoder/layer_0/ffn/linear_0/weight");
    const td_wt *e = cc_find(&x, "decoder/embeddings/weight");
    c->weights_int8 = w->dtype != TD_I8 ? 0 : e && e->dtype == TD_I8 ? 2 : 1;
    json_t *o = cc_json(&x);
    if (!o)
        return -1;
    int rc = cc_json_switches(&x, c, o) || cc_tokens(&x, c, o, c->decoder_start_zero) ? -1 : 0;
    json_decref(o);
    snprintf(c->model_type, sizeof c->model_type, "ctranslate2");
    return rc;
}
