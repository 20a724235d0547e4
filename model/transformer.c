/*
 * transformer.c - the encoder and one decoder step, as MarianMTModel
 * computes them (transformers/models/marian/modeling_marian.py), plus the
 * pre-norm variant (normalize_before) and the relative / rotary position
 * extensions of docs/architecture.md. Every computation goes through the backend table.
 *
 * Post-norm (Marian):  x = LN(x + SelfAttn(x));  x = LN(x + FFN(x))
 * Pre-norm:            x = x + SelfAttn(LN(x));  x = x + FFN(LN(x)); final LN
 */
#include <string.h>

#include "model_internal.h"

#define OPS (w->be->ops)

static int head_dim_of(const td_config *c, int heads)
{
    return c->d_model / heads;
}

/* Fills the attention arguments common to every call site. */
static td_attn_args attn_args(const td_config *c, int heads)
{
    td_attn_args a;
    memset(&a, 0, sizeof a);
    a.n_heads = heads;
    a.head_dim = head_dim_of(c, heads);
    a.ld_q = a.ld_kv = a.ld_out = c->d_model;
    return a;
}

/* Residual connection after a sub-layer whose output is in `sub`:
 * post-norm x = LN(x + sub), pre-norm x += sub. */
static void residual(td_worker *w, float *x, const float *sub, int64_t rows,
                     const td_ln_w *ln)
{
    const td_config *c = &w->m->cfg;
    if (c->normalize_before)
        OPS->add(w->be, x, sub, rows, c->d_model);
    else
        OPS->layer_norm(w->be, x, sub, x, NULL, rows, c->d_model, &ln->g, &ln->b,
                        c->layer_norm_eps);
}

/* Input of a sub-layer: x itself (post-norm) or LN(x) written to tmp. */
static const float *sublayer_in(td_worker *w, const float *x, float *tmp,
                                int64_t rows, const td_ln_w *ln)
{
    const td_config *c = &w->m->cfg;
    if (!c->normalize_before)
        return x;
    OPS->layer_norm(w->be, tmp, x, NULL, NULL, rows, c->d_model, &ln->g, &ln->b,
                    c->layer_norm_eps);
    return tmp;
}

/* FFN sub-layer: x <- residual(x, fc2(act(fc1(in) + b1)) + b2). */
static void ffn_block(td_worker *w, const td_layer_w *lw, float *x, float *h,
                      float *ffn, int64_t rows, int64_t ffn_dim)
{
    const td_config *c = &w->m->cfg;
    const float *in = sublayer_in(w, x, h, rows, &lw->final_ln);
    OPS->linear(w->be, ffn, ffn_dim, in, c->d_model, rows, &lw->fc1, &lw->fc1_b);
    OPS->bias_act(w->be, ffn, rows, ffn_dim, NULL, c->activation);
    OPS->linear(w->be, h, c->d_model, ffn, ffn_dim, rows, &lw->fc2, &lw->fc2_b);
    residual(w, x, h, rows, &lw->final_ln);
}

void td_encode(td_worker *w, int n, const int *len)
{
    const td_model *m = w->m;
    const td_config *c = &m->cfg;
    const int64_t d = c->d_model;
    const int heads = c->encoder_attention_heads, hd = head_dim_of(c, heads);
    int64_t rows = 0;
    for (int i = 0; i < n; i++)
        rows += len[i];

    OPS->embed(w->be, w->ex, &m->enc_embed, w->e_ids, rows, m->embed_scale,
               m->enc_pos, w->e_pos);
    for (int l = 0; l < c->encoder_layers; l++) {
        const td_layer_w *lw = &m->enc[l];
        const td_attn_w *a = &lw->self_attn;
        const float *in = sublayer_in(w, w->ex, w->eh, rows, &lw->self_attn_ln);
        OPS->linear(w->be, w->eq, d, in, d, rows, &a->q, &a->q_b);
        OPS->linear(w->be, w->ek, d, in, d, rows, &a->k, &a->k_b);
        OPS->linear(w->be, w->ev, d, in, d, rows, &a->v, &a->v_b);
        if (m->enc_rope) {
            OPS->rope_rows(w->be, w->eq, rows, d, heads, hd, w->e_pos, m->enc_rope);
            OPS->rope_rows(w->be, w->ek, rows, d, heads, hd, w->e_pos, m->enc_rope);
        }
        /* Each sentence attends over its own rows only: one call per run
         * of sentences of the same length (rows packed, no padding). */
        int64_t r0 = 0;
        for (int i = 0, j; i < n; i = j) {
            for (j = i + 1; j < n && len[j] == len[i]; j++)
                ;
            td_attn_args aa = attn_args(c, heads);
            aa.q = w->eq + r0 * d;
            aa.k = w->ek + r0 * d;
            aa.v = w->ev + r0 * d;
            aa.out = w->ectx + r0 * d;
            aa.n_seq = j - i;
            aa.n_q = aa.n_k = len[i];
            aa.q_seq_stride = aa.kv_seq_stride = aa.out_seq_stride = len[i] * d;
            aa.rel_k = a->rel_k;
            aa.rel_v = a->rel_v;
            aa.rel_max = c->relative_attention_max_distance;
            OPS->attention(w->be, &aa);
            r0 += (int64_t)(j - i) * len[i];
        }
        OPS->linear(w->be, w->eh, d, w->ectx, d, rows, &a->o, &a->o_b);
        residual(w, w->ex, w->eh, rows, &lw->self_attn_ln);
        ffn_block(w, lw, w->ex, w->eh, w->effn, rows, c->encoder_ffn_dim);
    }
    if (c->normalize_before)
        OPS->layer_norm(w->be, w->ex, w->ex, NULL, NULL, rows, d, &m->enc_final_ln.g,
                        &m->enc_final_ln.b, c->layer_norm_eps);
}

void td_decode_step(td_worker *w, const td_step_rows *rows, uint64_t capture_mask)
{
    const td_model *m = w->m;
    const td_config *c = &m->cfg;
    const int64_t d = c->d_model, T = w->cap.len, S = w->cap.src;
    const int64_t n = rows->n;
    const int heads = c->decoder_attention_heads, hd = head_dim_of(c, heads);

    OPS->embed(w->be, w->dx, &m->dec_embed, rows->ids, n, m->embed_scale, m->dec_pos,
               rows->emb_pos);
    for (int l = 0; l < c->decoder_layers; l++) {
        const td_layer_w *lw = &m->dec[l];
        const td_attn_w *a = &lw->self_attn;

        /* self-attention over the cache; each row's new K/V written at its
         * own position first */
        const float *in = sublayer_in(w, w->dx, w->dh, n, &lw->self_attn_ln);
        OPS->linear(w->be, w->dq, d, in, d, n, &a->q, &a->q_b);
        OPS->linear(w->be, w->dk, d, in, d, n, &a->k, &a->k_b);
        OPS->linear(w->be, w->dv, d, in, d, n, &a->v, &a->v_b);
        if (m->dec_rope) {
            OPS->rope_rows(w->be, w->dq, n, d, heads, hd, rows->pos, m->dec_rope);
            OPS->rope_rows(w->be, w->dk, n, d, heads, hd, rows->pos, m->dec_rope);
        }
        OPS->scatter_rows(w->be, w->self_k[l], d, w->dk, d, rows->dst, n, d);
        OPS->scatter_rows(w->be, w->self_v[l], d, w->dv, d, rows->dst, n, d);
        td_attn_args sa = attn_args(c, heads);
        sa.q = w->dq;
        sa.k = w->self_k[l];
        sa.v = w->self_v[l];
        sa.out = w->dctx;
        sa.n_seq = (int)n;
        sa.n_q = 1;
        sa.n_k = rows->t_len;
        sa.q_seq_stride = sa.out_seq_stride = d;
        sa.kv_seq_stride = T * d;
        sa.kv_len = rows->self_len;
        sa.q_pos = rows->pos;
        sa.rel_k = a->rel_k;
        sa.rel_v = a->rel_v;
        sa.rel_max = c->relative_attention_max_distance;
        OPS->attention(w->be, &sa);
        OPS->linear(w->be, w->dh, d, w->dctx, d, n, &a->o, &a->o_b);
        residual(w, w->dx, w->dh, n, &lw->self_attn_ln);

        /* cross-attention over the encoder output of each row's sentence */
        const td_attn_w *ca = &lw->cross_attn;
        in = sublayer_in(w, w->dx, w->dh, n, &lw->cross_attn_ln);
        OPS->linear(w->be, w->dq, d, in, d, n, &ca->q, &ca->q_b);
        td_attn_args xa = attn_args(c, heads);
        xa.q = w->dq;
        xa.k = w->cross_k[l];
        xa.v = w->cross_v[l];
        xa.out = w->dctx;
        xa.n_seq = (int)n;
        xa.n_q = 1;
        xa.n_k = rows->s_kv;
        xa.q_seq_stride = xa.out_seq_stride = d;
        xa.kv_seq_stride = S * d;
        xa.kv_index = rows->slot;
        xa.kv_len = rows->src_len;
        if (capture_mask & (UINT64_C(1) << l)) {
            xa.probs = w->probs[l];
            xa.probs_ld = rows->s_kv;
        }
        OPS->attention(w->be, &xa);
        OPS->linear(w->be, w->dh, d, w->dctx, d, n, &ca->o, &ca->o_b);
        residual(w, w->dx, w->dh, n, &lw->cross_attn_ln);

        ffn_block(w, lw, w->dx, w->dh, w->dffn, n, c->decoder_ffn_dim);
    }
    if (c->normalize_before)
        OPS->layer_norm(w->be, w->dx, w->dx, NULL, NULL, n, d, &m->dec_final_ln.g,
                        &m->dec_final_ln.b, c->layer_norm_eps);
    OPS->linear(w->be, w->logits, c->decoder_vocab_size, w->dx, d, n, &m->lm_head,
                &m->lm_bias);
}

void td_cache_reorder(td_worker *w, int n, int t_len, const int32_t *row_len)
{
    const td_config *c = &w->m->cfg;
    const int64_t d = c->d_model, T = w->cap.len;
    for (int l = 0; l < c->decoder_layers; l++) {
        float **bufs[2] = {&w->self_k[l], &w->self_v[l]};
        for (int i = 0; i < 2; i++) {
            /* gather into the spare buffer, then swap: one spare serves all */
            OPS->gather_rows(w->be, w->cache_tmp, *bufs[i], w->d_gather, n,
                             (int64_t)t_len * d, T * d, row_len);
            float *old = *bufs[i];
            *bufs[i] = w->cache_tmp;
            w->cache_tmp = old;
        }
    }
}
