/*
 * posenc.c - position tables, built once at load and cached on the device.
 *
 * Absolute tables are (max_position_embeddings, d_model) float32, RoPE
 * tables are (max_position_embeddings, head_dim): cos in the first half of
 * the columns, sin in the second. Relative (Shaw) tables are weights and are
 * uploaded by weights.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* Matches transformers' MarianSinusoidalPositionalEmbedding.create_weight:
 * angle(pos, j) = pos / 10000^(2*(j//2)/dim) in float64; sin of the even
 * angles fills columns [0, sentinel), cos of the odd angles fills
 * [sentinel, dim), sentinel = ceil(dim/2); cast to float32 at the end. */
void td_posenc_sinusoidal(float *out, int n_pos, int d)
{
    int sentinel = d / 2 + d % 2;
    for (int p = 0; p < n_pos; p++) {
        float *row = out + (size_t)p * d;
        for (int c = 0; c < sentinel; c++) {
            double a = (double)p / pow(10000.0, 2.0 * c / d);
            row[c] = (float)sin(a);
        }
        for (int c = 0; sentinel + c < d; c++) {
            double a = (double)p / pow(10000.0, 2.0 * c / d);
            row[sentinel + c] = (float)cos(a);
        }
    }
}

/* Vaswani et al. 2017, section 3.5: pe[p, 2i] = sin(p / 10000^(2i/d)),
 * pe[p, 2i+1] = cos(p / 10000^(2i/d)); float64, cast to float32. */
void td_posenc_sinusoidal_interleaved(float *out, int n_pos, int d)
{
    for (int p = 0; p < n_pos; p++) {
        float *row = out + (size_t)p * d;
        for (int i = 0; 2 * i < d; i++) {
            double a = (double)p / pow(10000.0, 2.0 * i / d);
            row[2 * i] = (float)sin(a);
            if (2 * i + 1 < d)
                row[2 * i + 1] = (float)cos(a);
        }
    }
}

/* CTranslate2's generated position encoding (SinusoidalPositionEncoder),
 * the tensor2tensor layout: timescale i of d/2 is 10000^(-i / (d/2 - 1)),
 * sin of position x timescale in the first half of the columns, cos in
 * the second, float32. Row p encodes position p + 1: CTranslate2 counts
 * from 1 as OpenNMT-tf does (test_ct2's prenorm_sinus matches its scores
 * only so; from 0 they differ by 0.03). */
void td_posenc_sinusoidal_ct2(float *out, int n_pos, int d)
{
    const int half = d / 2;
    const float inc = half > 1 ? logf(10000.0f) / (float)(half - 1) : 0.0f;
    for (int p = 0; p < n_pos; p++) {
        float *row = out + (size_t)p * d;
        for (int i = 0; i < half; i++) {
            const float a = (float)(p + 1) * expf(-(float)i * inc);
            row[i] = sinf(a);
            row[half + i] = cosf(a);
        }
        if (d % 2)
            row[d - 1] = 0.0f;
    }
}

/* Matches transformers' M2M100SinusoidalPositionalEmbedding.get_embedding
 * (fairseq's SinusoidalPositionalEmbedding): half = d/2, step =
 * ln(10000)/(half - 1), freq_i = exp(-i * step), angle = p * freq_i, sin
 * in columns [0, half), cos in [half, 2*half), a zero column when d is odd;
 * computed in float32 as torch does (the step in double, then each
 * product rounded to float). pad_row >= 0 is zeroed (padding_idx). */
void td_posenc_sinusoidal_fairseq(float *out, int n_pos, int d, int pad_row)
{
    const int half = d / 2;
    const double step = log(10000.0) / (double)(half - 1);
    for (int p = 0; p < n_pos; p++) {
        float *row = out + (size_t)p * d;
        for (int i = 0; i < half; i++) {
            const float freq = expf((float)i * (float)-step);
            const float a = (float)p * freq;
            row[i] = sinf(a);
            row[half + i] = cosf(a);
        }
        if (d % 2)
            row[d - 1] = 0.0f;
    }
    if (pad_row >= 0 && pad_row < n_pos)
        memset(out + (size_t)pad_row * d, 0, (size_t)d * sizeof(float));
}

/* Rotary table in the rotate-half convention (GPT-NeoX, HF Llama's
 * LlamaRotaryEmbedding): inv_freq_i = 1 / theta^(2i/head_dim), angle =
 * p * inv_freq_i, both in float32 as transformers computes them, then
 * cos/sin. Column i and i + head_dim/2 share the frequency i. */
void td_posenc_rope_table(float *out, int n_pos, int head_dim, float theta)
{
    int half = head_dim / 2;
    for (int p = 0; p < n_pos; p++) {
        float *row = out + (size_t)p * head_dim;
        for (int i = 0; i < half; i++) {
            float inv = 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
            float a = (float)p * inv;
            row[i] = (float)cos((double)a);
            row[half + i] = (float)sin((double)a);
        }
    }
}

static float *upload_table(td_model *m, const float *host, size_t n,
                           const char *what, char *err, size_t errlen)
{
    size_t bytes = n * sizeof(float);
    float *dev = m->be->ops->alloc(m->be, bytes);
    if (!dev) {
        snprintf(err, errlen, "position tables: cannot allocate %zu bytes for %s",
                 bytes, what);
        return NULL;
    }
    m->be->ops->upload(m->be, dev, host, bytes);
    m->weight_bytes += bytes;
    return dev;
}

int td_posenc_build(td_model *m, char *err, size_t errlen)
{
    const td_config *c = &m->cfg;
    /* absolute tables hold position_offset rows before position 0 */
    int n_pos = c->max_position_embeddings, d = c->d_model;
    int n_abs = n_pos + c->position_offset;
    size_t n = (size_t)n_abs * (size_t)d;
    float *host = NULL;

    switch (c->position_encoding) {
    case TD_POS_SINUSOIDAL:
    case TD_POS_SINUSOIDAL_INTERLEAVED:
    case TD_POS_SINUSOIDAL_CT2:
    case TD_POS_SINUSOIDAL_FAIRSEQ:
        host = malloc(n * sizeof(float));
        if (!host) {
            snprintf(err, errlen, "position tables: out of memory (%zu floats)", n);
            return -1;
        }
        if (c->position_encoding == TD_POS_SINUSOIDAL)
            td_posenc_sinusoidal(host, n_abs, d);
        else if (c->position_encoding == TD_POS_SINUSOIDAL_INTERLEAVED)
            td_posenc_sinusoidal_interleaved(host, n_abs, d);
        else if (c->position_encoding == TD_POS_SINUSOIDAL_CT2)
            td_posenc_sinusoidal_ct2(host, n_abs, d);
        else
            td_posenc_sinusoidal_fairseq(host, n_abs, d,
                                         c->position_pad ? c->position_offset - 1 : -1);
        /* Encoder and decoder tables are identical: build once, share. */
        m->enc_pos = upload_table(m, host, n, "the sinusoidal table", err, errlen);
        m->dec_pos = m->enc_pos;
        free(host);
        return m->enc_pos ? 0 : -1;
    case TD_POS_ROPE: {
        int hd_e = d / c->encoder_attention_heads;
        int hd_d = d / c->decoder_attention_heads;
        size_t ne = (size_t)n_pos * hd_e, nd = (size_t)n_pos * hd_d;
        host = malloc((ne > nd ? ne : nd) * sizeof(float));
        if (!host) {
            snprintf(err, errlen, "position tables: out of memory");
            return -1;
        }
        td_posenc_rope_table(host, n_pos, hd_e, c->rope_theta);
        m->enc_rope = upload_table(m, host, ne, "the encoder RoPE table", err, errlen);
        if (m->enc_rope && hd_d == hd_e) {
            m->dec_rope = m->enc_rope;
        } else if (m->enc_rope) {
            td_posenc_rope_table(host, n_pos, hd_d, c->rope_theta);
            m->dec_rope = upload_table(m, host, nd, "the decoder RoPE table", err, errlen);
        }
        free(host);
        return (m->enc_rope && m->dec_rope) ? 0 : -1;
    }
    case TD_POS_LEARNED:   /* tables are weights: weights.c uploads them */
    case TD_POS_RELATIVE:  /* per-layer weights: weights.c */
        return 0;
    }
    snprintf(err, errlen, "position tables: unknown position encoding %d",
             (int)c->position_encoding);
    return -1;
}
