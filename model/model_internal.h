/*
 * model_internal.h - the loaded model and the worker state, shared by the
 * files of model/ only (not part of the public API).
 */
#ifndef TD_MODEL_INTERNAL_H
#define TD_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "beam_rules.h"
#include "config.h"
#include "device.h"
#include "translator.h"

/* One attention block: q/k/v/out projections (d_model, d_model) + biases.
 * q and its bias stand for themselves times head_dim^-0.5 (Marian's
 * q_proj(x) * scaling): folded into float32 values at load, or kept as
 * td_weight.scale by a backend holding q in half precision. */
typedef struct td_attn_w {
    td_weight q, q_b, k, k_b, v, v_b, o, o_b;
    float *rel_k;   /* (2k+1, head_dim) device float32 or NULL (relative) */
    float *rel_v;   /* (2k+1, head_dim) device float32 or NULL */
} td_attn_w;

typedef struct td_ln_w {
    td_weight g, b; /* (d_model) each */
} td_ln_w;

typedef struct td_layer_w {
    td_attn_w self_attn;
    td_ln_w self_attn_ln;
    td_attn_w cross_attn;      /* decoder only */
    td_ln_w cross_attn_ln;     /* decoder only */
    td_weight fc1, fc1_b;      /* (ffn, d_model), (ffn) */
    td_weight fc2, fc2_b;      /* (d_model, ffn), (d_model) */
    td_ln_w final_ln;
} td_layer_w;

/* One uploaded tensor, owned by the model; layer structs hold copies of the
 * handle (tied weights appear several times but are owned once). */
typedef struct td_owned_w {
    char *name;
    td_weight w;
} td_owned_w;

struct td_model {
    td_config cfg;
    uint64_t id;               /* unique in the process (td_worker_bind tells models apart
                                * by it, not by an address a freed model may leave) */
    char *dir;
    td_device dev;             /* resolved at load; workers create their
                                * backends from it */
    td_backend *be;            /* the backend that owns the weights */
    td_dtype file_dtype;       /* dtype of the checkpoint's tensors */
    td_dtype matrix_dtype;     /* storage the backend chose for the matrices */
    td_store store;            /* td_load_opts.dtype, parsed */
    int half_activations;      /* td_load_opts.precision == "half" */

    td_weight enc_embed;       /* (vocab_size, d_model) */
    td_weight dec_embed;       /* (decoder_vocab_size, d_model) */
    td_weight lm_head;         /* (decoder_vocab_size, d_model) */
    td_weight lm_bias;         /* (decoder_vocab_size) final_logits_bias */
    td_ln_w enc_final_ln;      /* normalize_before only */
    td_ln_w dec_final_ln;
    td_layer_w *enc;           /* (encoder_layers) */
    td_layer_w *dec;           /* (decoder_layers) */
    float *enc_pos;            /* (max_pos, d_model) absolute table or NULL */
    float *dec_pos;            /* (max_pos, d_model) absolute table or NULL */
    float *enc_rope;           /* (max_pos, head_dim) cos|sin or NULL */
    float *dec_rope;
    float embed_scale;         /* sqrt(d_model) or 1 */

    td_owned_w *owned;
    int n_owned, cap_owned;
    size_t weight_bytes;
};

/* The worker's device buffers, described once (llm.c's act_sizes idea):
 * field, element type, rows, width; a buffer holds rows x width elements.
 * translator.c allocates, frees and totals them from these lists alone.
 * Rows and widths are the fields n_<rows> and w_<width> of td_wsizes:
 *   rows  enc    max_batch * max_src_len encoder rows
 *         dec    max_batch * max_beam decoder rows (N)
 *         dec_t  N * max_length: one self-attention cache, (N, T, d)
 *         batch  max_batch sentences
 *         one    1
 *   width d      d_model
 *         ffn    the larger of encoder_ffn_dim and decoder_ffn_dim
 *         vocab  decoder_vocab_size
 *         topk   2 * 2*max_beam: a step's n rows of top-k values, then
 *                right after them its n rows of ids (one download)
 *         heads_s decoder heads * max_src_len (captured attention)
 *         suppress TD_MAX_SUPPRESS
 *         rowf   TD_STEP_ROW_FIELDS int32 inputs of a step's row
 *         beams  TD_BEAM_FIELDS: a stepped sentence's row of the beam_step op
 *         beamf, beami  a slot's search state (beam_rules.h: floats
 *                td_beam_f_stride, int32 td_beam_i_stride of the worker's
 *                max_beam and max_length, so that growth keeps the stride)
 *         three  3
 *         two    2
 *         one    1 */
#define TD_STEP_ROW_FIELDS 9 /* decode.c's ROW_* */
#define TD_WORKER_BUFFERS(X)                                                    \
    X(ex, float, enc, d)         /* encoder hidden states */                    \
    X(eh, float, enc, d)         /* sub-layer output / normed input */          \
    X(eq, float, enc, d)                                                        \
    X(ek, float, enc, d)                                                        \
    X(ev, float, enc, d)                                                        \
    X(ectx, float, enc, d)       /* attention context */                        \
    X(effn, float, enc, ffn)                                                    \
    X(e_ids, int32_t, enc, one)                                                 \
    X(e_pos, int32_t, enc, one)                                                 \
    X(e_dst, int32_t, enc, one)  /* encoder row -> cross K/V row of its slot */ \
    X(dx, float, dec, d)         /* decoder hidden states of a step */          \
    X(dh, float, dec, d)                                                        \
    X(dq, float, dec, d)                                                        \
    X(dctx, float, dec, d)                                                      \
    X(dffn, float, dec, ffn)                                                    \
    X(logits, float, dec, vocab)                                                \
    X(topk, float, dec, topk)                                                   \
    X(dk, float, dec, d)         /* a step's new self-attention K, V */       \
    X(dv, float, dec, d)                                                        \
    X(row_bias, float, dec, one) /* running beam scores */                      \
    X(d_rows, int32_t, dec, rowf) /* a step's per-row inputs (decode.c) */      \
    X(d_gather, int32_t, dec, two) /* new row -> old row, then its length */  \
    X(d_beam_sent, int32_t, batch, beams) /* beam_step's sentences */          \
    X(beam_out, int32_t, dec, three) /* beam_step's back-pointers, tokens, ends */ \
    X(d_suppress, int32_t, one, suppress)                                       \
    X(cache_tmp, float, dec_t, d) /* spare cache for reordering */
/* The search state of each slot (beam_rules.h), which lives on the device
 * from a sentence's admission to its end: carried over by a growth
 * (td_worker_resize copies the old slots, the stride unchanged). */
#define TD_WORKER_SLOT_BUFFERS(X)                                               \
    X(beam_f, float, batch, beamf) /* running and finished scores */           \
    X(beam_i, int32_t, batch, beami) /* finished lists, back-pointers */
/* One allocation per decoder layer each. */
#define TD_WORKER_LAYER_BUFFERS(X)                                              \
    X(self_k, float, dec_t, d)   /* self-attention caches (N, T, d) */          \
    X(self_v, float, dec_t, d)                                                  \
    X(cross_k, float, enc, d)    /* cross-attention K/V (B, S, d) */            \
    X(cross_v, float, enc, d)                                                   \
    X(probs, float, dec, heads_s) /* captured cross-attention */

typedef struct td_wsizes {
    int64_t n_enc, n_dec, n_dec_t, n_batch, n_one;
    int64_t w_d, w_ffn, w_vocab, w_topk, w_heads_s, w_suppress, w_rowf, w_beams, w_beamf,
        w_beami, w_three, w_two, w_one;
} td_wsizes;

/* A worker's capacities: what its device buffers hold now. slots:
 * sentences (batch rows), rows: decoder rows (dec), src: source tokens a
 * slot holds (the stride of the cross K/V and of enc = slots x src), len:
 * generated tokens a row's self-attention cache holds (its stride: dec_t =
 * rows x len). */
typedef struct td_wcap {
    int slots, rows, src, len;
} td_wcap;

/* The first capacities of a worker with td_worker_opts.grow (each capped
 * at the worker's maxima); growth doubles a capacity until it fits. */
#define TD_WCAP_SLOTS0 2
#define TD_WCAP_ROWS0 4
#define TD_WCAP_SRC0 16
#define TD_WCAP_LEN0 16

/* Device buffers of a worker: allocated at td_worker_init for cap (the
 * maxima of w->o, or the first capacities with o.grow), reallocated by
 * td_worker_resize between two decodes. */
struct td_worker {
    const td_model *m;         /* the model bound (td_worker_bind); it may be gone while
                                * the worker idles: nothing but a decode reads it */
    uint64_t model_id;         /* its td_model.id */
    td_config cfg;             /* its config: what the buffers are sized from */
    td_device dev;             /* its device and numerics: what the backend was made for */
    td_store store;
    int half_activations;
    int reserved_enc, reserved_dec; /* rows of GEMM scratch reserved so far (td_wbufs_alloc) */
    td_backend *be;
    td_worker_opts o;
    size_t arena_bytes;
    td_wcap cap;       /* now */
    td_wcap cap_max;   /* from w->o: max_batch, max_batch x max_beam, max_src_len, max_length */
    td_wcap cap_min;   /* what td_worker_trim goes back to */

#define TD_WB_FIELD(name, type, rows, width) type *name;
#define TD_WB_LAYER_FIELD(name, type, rows, width) type **name;
    TD_WORKER_BUFFERS(TD_WB_FIELD)
    TD_WORKER_SLOT_BUFFERS(TD_WB_FIELD)
    TD_WORKER_LAYER_BUFFERS(TD_WB_LAYER_FIELD)
#undef TD_WB_FIELD
#undef TD_WB_LAYER_FIELD

    /* host memory of td_translate_batch (decode.c), sized at init */
    struct td_decode_scratch *scratch;
    size_t scratch_bytes;
};

/* wmem.c: the device buffers reallocated for capacities of at least
 * need (each grown along its ladder, up to cap_max; a smaller one is not
 * shrunk), the running decode's state carried over (resize). The new
 * memory is written once (committed) now. Returns 0; TD_EINVAL with a
 * message when the memory cannot be had (nothing changed); TD_EDEVICE
 * when the worker is left unusable (the caller resets the decode). */
int td_worker_grow(td_worker *w, td_wcap need, int rows_live, int carry, char *err,
                   size_t errlen);
/* wmem.c: the buffers reallocated for exactly cap; carry: the running
 * decode (rows_live rows, every slot) is copied into them (growing only). */
int td_worker_resize(td_worker *w, td_wcap cap, int rows_live, int carry, char *err,
                     size_t errlen);
/* wmem.c: every buffer of the table for cap (those already there kept),
 * the suppressed ids uploaded; -1 with the backend's message. */
int td_wbufs_alloc(td_worker *w, td_wcap cap, char *why, size_t whylen);
void td_wbufs_free(td_worker *w); /* the per-layer pointer arrays stay */

/* decode.c: the worker's host scratch, sized from w->o and the model. */
typedef struct td_decode_scratch td_decode_scratch;
int td_decode_scratch_init(td_worker *w, char *err, size_t errlen);
void td_decode_scratch_free(td_worker *w); /* accepts a worker without one */

/* weights.c */
int td_weights_load(td_model *m, char *err, size_t errlen);
void td_weights_free(td_model *m);

/* posenc.c: builds the cached position tables on the device. */
int td_posenc_build(td_model *m, char *err, size_t errlen);
/* Host helpers, exposed for tests: fill (n_pos, d) tables. */
void td_posenc_sinusoidal(float *out, int n_pos, int d);
void td_posenc_sinusoidal_interleaved(float *out, int n_pos, int d);
void td_posenc_sinusoidal_ct2(float *out, int n_pos, int d);
void td_posenc_sinusoidal_fairseq(float *out, int n_pos, int d, int pad_row);

/* The row of an absolute position table that token tok at position t
 * (0-based; in the encoder, counting the tokens before it that are not pad
 * when c->position_pad) reads: t + position_offset, or the padding row
 * for a pad token (fairseq's make_positions, transformers'
 * create_position_ids_from_input_ids). Without an offset it is t, which
 * rotary and relative positions use as well. */
static inline int32_t td_pos_row(const td_config *c, int t, int32_t tok)
{
    if (c->position_pad && tok == c->position_offset - 1)
        return c->position_offset - 1;
    return (int32_t)(t + c->position_offset);
}
void td_posenc_rope_table(float *out, int n_pos, int head_dim, float theta);

/* transformer.c: the forward pass. */
/* Runs the encoder over n sentences of len[i] tokens packed one after the
 * other, without padding (ids already uploaded to w->e_ids, each row's
 * position in its sentence to w->e_pos): the encoder output is in w->ex,
 * (sum of len, d_model); each sentence's rows see only its own. */
void td_encode(td_worker *w, int n, const int *len);

/* The rows of one decoder step; every array is device int32 of n entries. */
typedef struct td_step_rows {
    int n;
    const int32_t *ids;      /* the row's last token */
    const int32_t *pos;      /* its new token's position */
    const int32_t *slot;     /* its sentence's slot: cross K/V at slot * max_src_len */
    const int32_t *src_len;  /* its sentence's source length */
    const int32_t *self_len; /* self-attention keys it sees: pos + 1 */
    const int32_t *dst;      /* cache row of its new K/V: row * max_length + pos */
    const int32_t *emb_pos;  /* the row of the position table its token reads
                                (td_pos_row; = pos without an offset) */
    int s_kv;                /* the longest source among the rows */
    int t_len;               /* the longest self_len among the rows */
} td_step_rows;

/* One decoder step for the rows: writes each row's K/V at its position
 * into the self caches and the logits into w->logits. capture_mask: bit l
 * set = store layer l's cross-attention probabilities in w->probs[l] as
 * (n, heads, s_kv). */
void td_decode_step(td_worker *w, const td_step_rows *rows, uint64_t capture_mask);
/* Reorders every self cache: new row r takes old row w->d_gather[r], for
 * r < n, copying its first row_len[r] floats (device int32; its written
 * positions times d_model; at most t_len positions), or t_len positions
 * when row_len is NULL. */
void td_cache_reorder(td_worker *w, int n, int t_len, const int32_t *row_len);

#endif /* TD_MODEL_INTERNAL_H */
