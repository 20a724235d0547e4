/*
 * model_internal.h - the loaded model and the worker state, shared by the
 * files of model/ only (not part of the public API).
 */
#ifndef TD_MODEL_INTERNAL_H
#define TD_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
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

/* Device buffers of a worker, all allocated at td_worker_init. */
struct td_worker {
    const td_model *m;
    td_backend *be;
    td_worker_opts o;
    size_t arena_bytes;

    /* encoder: rows = max_batch * max_src_len */
    int64_t enc_rows;
    float *ex, *eh, *eq, *ek, *ev, *ectx, *effn; /* (rows, d) / (rows, ffn) */
    int32_t *e_ids, *e_pos, *e_len;               /* (rows), (rows), (max_batch) */

    /* decoder: rows N = max_batch * max_beam */
    int64_t dec_rows;
    float *dx, *dh, *dq, *dctx, *dffn;            /* (N, d) / (N, ffn) */
    float *logits;                                /* (N, dec_vocab) */
    float *topk;  /* 2 x (N, 2*max_beam) 32-bit words: a step's n rows of
                     top-k values, then right after them its n rows of ids,
                     so that one download brings both */
    float *row_bias;                              /* (N) */
    int32_t *d_ids, *d_pos, *d_kv_index, *d_kv_len, *d_gather; /* (N) */
    int32_t *d_suppress;                          /* (TD_MAX_SUPPRESS) */
    float **self_k, **self_v;                     /* per layer (N, T, d) */
    float *cache_tmp;                             /* (N, T, d) reorder scratch */
    float **cross_k, **cross_v;                   /* per layer (B, S, d) */
    float **probs;                                /* per layer (N, heads, S) */

    /* host memory of td_translate_batch (decode.c), sized at init */
    struct td_decode_scratch *scratch;
    size_t scratch_bytes;
};

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
void td_posenc_rope_table(float *out, int n_pos, int head_dim, float theta);

/* transformer.c: the forward pass. */
/* Runs the encoder over n sentences padded to s_max rows each (ids already
 * uploaded to w->e_ids, lengths to w->e_len) and computes every decoder
 * layer's cross-attention K/V into w->cross_k / w->cross_v. */
void td_encode(td_worker *w, int n, int s_max);
/* One decoder step for n rows at position t: reads w->d_ids (last tokens),
 * w->d_kv_index (row -> sentence), w->d_kv_len (row -> source length),
 * writes K/V at position t into the self caches and logits into w->logits.
 * capture_mask: bit l set = store layer l's cross-attention probabilities
 * in w->probs[l]. */
void td_decode_step(td_worker *w, int n, int t, int s_max, uint64_t capture_mask);
/* Reorders the first t_len positions of every self cache: new row r takes
 * old row w->d_gather[r], for r < n. */
void td_cache_reorder(td_worker *w, int n, int t_len);

#endif /* TD_MODEL_INTERNAL_H */
