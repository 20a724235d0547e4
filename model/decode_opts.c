/*
 * decode_opts.c - a decode's options and results: the model's defaults
 * (generation_config.json's), the checks of a request's options against the
 * model and the worker's limits (each failure names its option), the cap on
 * generated tokens, and freeing a result. The running decode (decode.c) and
 * the worker's start-up (translator.c) use them; they use neither.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* ---- limits and options ---------------------------------------------------- */

int td_generated_cap(const td_config *c)
{
    int cap = c->max_position_embeddings;
    if (cap > TD_MAX_GENERATED)
        cap = TD_MAX_GENERATED;
    return cap < 1 ? 1 : cap;
}

void td_decode_opts_default(const td_model *m, td_decode_opts *o)
{
    const td_config *c = &m->cfg;
    memset(o, 0, sizeof *o);
    o->beam_size = c->num_beams;
    o->num_hypotheses = 1;
    o->length_penalty = c->length_penalty;
    int ml = c->max_length - 1; /* transformers counts the start token */
    if (ml > td_generated_cap(c))
        ml = td_generated_cap(c);
    o->max_length = ml < 1 ? 1 : ml;
}

/* Sets the failing option's name and message; returns -1. */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static int opt_fail(const char **param, const char *name, char *err, size_t errlen,
                    const char *fmt, ...)
{
    if (param)
        *param = name;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int td_decode_opts_check(const td_config *c, const td_decode_limits *lim,
                         const td_decode_opts *o, const char **param, char *err, size_t errlen)
{
    if (param)
        *param = NULL;
    if (o->beam_size < 1 || o->beam_size > lim->max_beam)
        return opt_fail(param, "beam_size", err, errlen, "beam_size %d: must be in 1..%d",
                        o->beam_size, lim->max_beam);
    if (o->num_hypotheses < 1 || o->num_hypotheses > o->beam_size)
        return opt_fail(param, "num_hypotheses", err, errlen,
                        "num_hypotheses %d: must be in 1..beam_size (%d)", o->num_hypotheses,
                        o->beam_size);
    if (o->max_length < 1 || o->max_length > lim->max_length)
        return opt_fail(param, "max_length", err, errlen, "max_length %d: must be in 1..%d",
                        o->max_length, lim->max_length);
    if (!isfinite(o->length_penalty) || fabsf(o->length_penalty) > TD_MAX_LENGTH_PENALTY)
        return opt_fail(param, "length_penalty", err, errlen,
                        "length_penalty must be in -%d..%d", TD_MAX_LENGTH_PENALTY,
                        TD_MAX_LENGTH_PENALTY);
    if (o->n_prefix < 0 || o->n_prefix > TD_MAX_PREFIX || (o->n_prefix > 0 && !o->prefix))
        return opt_fail(param, "target_prefix", err, errlen,
                        "target_prefix: 0..%d tokens", TD_MAX_PREFIX);
    if (o->n_prefix >= o->max_length)
        return opt_fail(param, "target_prefix", err, errlen,
                        "target_prefix: %d tokens leave no room in max_length %d",
                        o->n_prefix, o->max_length);
    for (int i = 0; i < o->n_prefix; i++)
        if (o->prefix[i] < 0 || o->prefix[i] >= c->decoder_vocab_size)
            return opt_fail(param, "target_prefix", err, errlen,
                            "target_prefix: token %d at %d is outside the decoder "
                            "vocabulary (0..%d)", o->prefix[i], i, c->decoder_vocab_size - 1);
    if (!o->return_attention)
        return 0;
    const int L = c->decoder_layers, H = c->decoder_attention_heads;
    if (L > 64)
        return opt_fail(param, "return_attention", err, errlen,
                        "attention capture supports at most 64 decoder layers");
    if (o->n_attn_layers < 0 || o->n_attn_layers > TD_MAX_ATTN_SELECT ||
        (o->n_attn_layers > 0 && !o->attn_layers))
        return opt_fail(param, "attention_layers", err, errlen,
                        "attention_layers: 1..%d entries", TD_MAX_ATTN_SELECT);
    for (int i = 0; o->attn_layers && i < o->n_attn_layers; i++)
        if (o->attn_layers[i] < -L || o->attn_layers[i] >= L)
            return opt_fail(param, "attention_layers", err, errlen,
                            "attention_layers: layer %d out of range [-%d, %d)",
                            o->attn_layers[i], L, L);
    if (o->n_attn_heads < 0 || o->n_attn_heads > TD_MAX_ATTN_SELECT ||
        (o->n_attn_heads > 0 && !o->attn_heads) ||
        (!(o->attn_heads && o->n_attn_heads > 0) && H > TD_MAX_ATTN_SELECT))
        return opt_fail(param, "attention_heads", err, errlen,
                        "attention_heads: 1..%d entries", TD_MAX_ATTN_SELECT);
    for (int i = 0; o->attn_heads && i < o->n_attn_heads; i++)
        if (o->attn_heads[i] < 0 || o->attn_heads[i] >= H)
            return opt_fail(param, "attention_heads", err, errlen,
                            "attention_heads: head %d out of range [0, %d)", o->attn_heads[i],
                            H);
    return 0;
}

void td_result_free(td_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_hyps; i++)
        free(r->hyps[i].tokens);
    free(r->hyps);
    free(r->attention);
    free(r->attn_layer_ids);
    free(r->attn_head_ids);
    memset(r, 0, sizeof *r);
}
