/*
 * backend.h - the table of compute ops that model/ calls and never bypasses.
 *
 * A backend is a struct of function pointers plus an opaque context (the
 * ggml habit). cpu/ implements it with OpenBLAS; gpu/ implements it with
 * cuBLAS and CUDA kernels. model/ never includes a CUDA header and never
 * touches backend memory directly: it allocates through the table, uploads
 * weights through the table and runs every op through the table.
 *
 * Memory model
 *   - Every pointer named "device memory" below lives in the backend's memory
 *     space (host memory for the CPU backend, device memory for CUDA). It is
 *     obtained from alloc() and released with dealloc().
 *   - Activations are float32, row-major. A "row" is one token's vector.
 *   - Weights are td_weight handles made by weight_upload(): the backend may
 *     keep them in any dtype (the CPU backend keeps float32, a GPU backend
 *     may keep F16/BF16) and owns their storage until weight_free().
 *   - Index arrays (int32) passed to ops are device memory too; upload them
 *     with upload().
 *
 * Ordering
 *   Ops are issued in order on the backend's single queue (one CUDA stream
 *   for the GPU). upload()/download() are ordered with the ops; download()
 *   returns when the data is on the host. An op never blocks the host on
 *   the CPU beyond its own compute.
 *
 * Thread safety
 *   One td_backend belongs to one worker thread. Weights uploaded through one
 *   backend are read-only afterwards and may be read by the ops of other
 *   backends of the same kind on the same device (workers sharing one
 *   model pass the model's td_weight handles to their own backend's ops).
 *
 * Errors
 *   Ops return void: a failure inside an op (CUDA error, scratch allocation,
 *   an argument out of the op's contract) is latched in the backend and
 *   reported by the next sync(), which returns 0 on success and -1 with the
 *   first failure's message in err otherwise, and clears the latch.
 *   alloc() returns NULL on failure.
 */
#ifndef TD_BACKEND_H
#define TD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "activation.h" /* td_activation */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum td_dtype {
    TD_F32 = 0,
    TD_F16 = 1,
    TD_BF16 = 2,
    TD_I8 = 3, /* a backend's storage only (the CPU's --dtype int8): never read
                * from a checkpoint */
} td_dtype;

/* The storage a backend is asked to keep weight matrices in (the loader's
 * --dtype): AUTO keeps the checkpoint's dtype. */
typedef enum td_store {
    TD_STORE_AUTO = 0,
    TD_STORE_F32,
    TD_STORE_F16,
    TD_STORE_BF16,
    TD_STORE_INT8, /* CPU only: int8 matrices with per-feature scales; the
                    * embeddings and output projection float32 (keep_float) */
    TD_STORE_INT8_ALL, /* CPU only: every matrix int8, the output projection too */
} td_store;

/* A weight matrix or vector resident in the backend. rows x cols, row-major
 * (a Linear weight is (out_features, in_features) exactly as in PyTorch).
 * A vector has rows == 1. */
typedef struct td_weight {
    void *data;        /* device memory, owned by the backend */
    td_dtype dtype;    /* storage dtype chosen by the backend */
    int64_t rows;
    int64_t cols;
    float scale;       /* 0 or 1: none. Else the stored values are the
                        * checkpoint's and linear multiplies x @ W^T by it:
                        * a backend keeping half precision does not fold a
                        * load-time scale into the values (weight_upload),
                        * which would round them a second time. */
    int layout;        /* backend-private arrangement of data (0: row-major);
                        * the CPU packs matrices into its GEMM's panels
                        * at load (cpu/cpu_kernels.h). Only the backend that
                        * made the weight reads data. */
} td_weight;

/* Arguments of the attention op, in one struct because there are many.
 *
 * Layout: queries are n_q rows per sequence, keys/values n_k rows per key
 * sequence. Head h of a row occupies columns [h*head_dim, (h+1)*head_dim).
 *
 *   q    (n_seq, n_q, ld_q)      q[s*q_seq_stride + i*ld_q + h*head_dim + c]
 *   k, v (n_kseq, kv_cap, ld_kv) k[ks*kv_seq_stride + j*ld_kv + h*head_dim + c]
 *   out  (n_seq, n_q, ld_out)    same head layout as q
 *
 * The query sequence s reads key sequence kv_index[s] (device int32 array of
 * n_seq entries), or s itself when kv_index is NULL. This lets the beams of
 * one sentence share the cross-attention K/V of their sentence.
 *
 * Query i of sequence s has the absolute position
 *   pos(s, i) = q_pos[s] + i   when q_pos != NULL (device int32 array, n_seq
 *                              entries: sequences at different steps, the
 *                              in-flight batch),
 *               q_pos0 + i     otherwise (every sequence in lock-step).
 * It sees keys j < kv_len[s] (device int32 array, n_seq entries; NULL means
 * every sequence sees n_k keys), and when causal is set only keys
 * j <= pos(s, i) as well. q is expected to be pre-scaled (the Marian
 * q_proj(x) * head_dim^-0.5); the op applies no scale of its own.
 *
 * Relative positions (Shaw et al. 2018, eqs. 3-5), when rel_k != NULL:
 *   logit(i, j) = q_i . k_j + q_i . rel_k[clip(j - pos(s, i), -rel_max, rel_max) + rel_max]
 *   out_i       = sum_j p(i,j) (v_j + rel_v[same index])   (rel_v optional)
 * rel_k / rel_v are (2*rel_max+1, head_dim) float32 device memory, shared by
 * all heads. Key j has absolute position j.
 *
 * Masked-out logits get probability exactly 0. A query row with no visible
 * key (only possible for padding rows) gets an all-zero output. Key/value
 * rows that no query may see (j >= kv_len, beyond the causal bound, or
 * beyond n_k) may hold garbage, even NaN, from an unwritten cache: an
 * implementation must not read them (0 * NaN is NaN). kv_len > n_k is
 * treated as n_k. q_pos0 is ignored when q_pos is set.
 *
 * Capture: when probs != NULL the op writes the softmax probabilities of
 * heads [0, n_heads) to probs[((s*n_heads + h)*n_q + i)*probs_ld + j] for
 * j < n_k (masked entries as 0). */
typedef struct td_attn_args {
    const float *q;
    const float *k;
    const float *v;
    float *out;
    int n_seq;
    int n_q;
    int n_k;
    int n_heads;
    int head_dim;
    int64_t ld_q, q_seq_stride;
    int64_t ld_kv, kv_seq_stride;
    int64_t ld_out, out_seq_stride;
    const int32_t *kv_index; /* (n_seq) or NULL */
    const int32_t *kv_len;   /* (n_seq) or NULL */
    int causal;
    int q_pos0;              /* absolute position of query row 0 (q_pos NULL) */
    const int32_t *q_pos;    /* (n_seq) or NULL: position of row 0 per sequence */
    const float *rel_k;      /* (2*rel_max+1, head_dim) or NULL */
    const float *rel_v;      /* (2*rel_max+1, head_dim) or NULL */
    int rel_max;
    float *probs;            /* (n_seq, n_heads, n_q, probs_ld) or NULL */
    int64_t probs_ld;
} td_attn_args;

/* Arguments of the beam_step op: one decoding step's search bookkeeping for
 * n_sent sentences (the rules: backend/beam_rules.h, transformers' greedy
 * _sample and vectorised _beam_search). Every array is device memory.
 *
 *   val, idx (n_rows, ks)  this step's top-k of every row (logprobs_topk:
 *                          log-prob + the row's running score), ks >= 2B of
 *                          each beam sentence, >= 1 of a greedy one
 *   sent (n_sent, TD_BEAM_FIELDS) int32: each stepped sentence's slot, first
 *                          row, beams B (1 = greedy), step t, max_length M,
 *                          early stopping, length penalty (float bits)
 *   st_f, st_i             the search state of every slot, which stays on
 *                          the device from a sentence's admission to its
 *                          end: slot s at st_f + s * td_beam_f_stride(max_beam)
 *                          and st_i + s * td_beam_i_stride(max_beam, max_len)
 *                          (layout: beam_rules.h); a new sentence's state is
 *                          td_beam_init's before its step 0
 *   out (2 * n_rows + n_sent) int32: for row row0 + j of a sentence that
 *                          goes on, out[row0 + j] is the beam (0..B-1) that
 *                          new beam j continues and out[n_rows + row0 + j]
 *                          its new token; -1 and -1 for a finished
 *                          sentence; out[2 * n_rows + i] is 1 when sentence
 *                          i finished at this step, else 0
 * Sentences write disjoint slots and rows: no two entries of sent share a
 * slot or a row. */
typedef struct td_beam_args {
    const float *val;      /* (n_rows, ks) */
    const int32_t *idx;    /* (n_rows, ks) */
    int64_t n_rows;
    int ks;
    const int32_t *sent;   /* (n_sent, TD_BEAM_FIELDS) */
    int n_sent;
    float *st_f;           /* (slots, td_beam_f_stride(max_beam)) */
    int32_t *st_i;         /* (slots, td_beam_i_stride(max_beam, max_len)) */
    int max_beam, max_len; /* the state's strides: beams and steps of a slot */
    int64_t vocab;         /* the top-k's vocabulary (ties: lower beam * vocab + id first) */
    int eos_id;
    int32_t *out;          /* (2 * n_rows + n_sent) */
} td_beam_args;

typedef struct td_backend td_backend;

typedef struct td_backend_ops {
    const char *name; /* "cpu", "cuda" */

    void (*destroy)(td_backend *be);

    /* --- memory --------------------------------------------------------- */
    void *(*alloc)(td_backend *be, size_t bytes);       /* NULL on failure */
    void (*dealloc)(td_backend *be, void *p);          /* accepts NULL */
    void (*upload)(td_backend *be, void *dst, const void *src, size_t bytes);
    void (*download)(td_backend *be, void *dst, const void *src, size_t bytes);
    void (*copy)(td_backend *be, void *dst, const void *src, size_t bytes);
    void (*memset0)(td_backend *be, void *dst, size_t bytes);
    /* Returns 0, or -1 with a message in err (latched op failure). */
    int (*sync)(td_backend *be, char *err, size_t errlen);

    /* Make a weight from host float32 data (rows*cols values). The backend
     * picks its storage dtype (want is a hint: the checkpoint's dtype).
     * The weight stands for host * scale: a float32 weight holds the
     * products; a half-precision matrix holds host as it is and records
     * scale in w->scale. Returns 0, or -1 with a message in err. */
    int (*weight_upload)(td_backend *be, td_weight *w, const float *host,
                         int64_t rows, int64_t cols, td_dtype want, float scale,
                         char *err, size_t errlen);
    void (*weight_free)(td_backend *be, td_weight *w); /* accepts zeroed w */

    /* --- compute -------------------------------------------------------- */

    /* y (n, w->rows) = x (n, w->cols) @ w^T (times w->scale when set) + bias
     * (optional, 1 x w->rows).
     * x has row stride ld_x, y has row stride ld_y (both >= the widths).
     * y must not alias x. */
    void (*linear)(td_backend *be, float *y, int64_t ld_y, const float *x,
                   int64_t ld_x, int64_t n, const td_weight *w,
                   const td_weight *bias);

    /* x (n, d) = act(x + bias) in place; bias optional (1 x d). */
    void (*bias_act)(td_backend *be, float *x, int64_t n, int64_t d,
                     const td_weight *bias, td_activation act);

    /* y (n, d) = LayerNorm(x + res) * gamma + beta, eps as given; res is
     * optional (NULL). When sum_out != NULL the pre-norm sum x + res is also
     * stored there. y may alias x or res. Statistics in float32 with the
     * biased variance, as torch.nn.LayerNorm. */
    void (*layer_norm)(td_backend *be, float *y, const float *x,
                       const float *res, float *sum_out, int64_t n, int64_t d,
                       const td_weight *gamma, const td_weight *beta, float eps);

    /* y (n, d) += x (n, d). */
    void (*add)(td_backend *be, float *y, const float *x, int64_t n, int64_t d);

    /* Embedding lookup: y[r] = table[ids[r]] * scale (+ pos[positions[r]] when
     * pos != NULL; pos is (max_pos, d) float32 device memory). ids and
     * positions are device int32 arrays of n entries. Out-of-range ids are
     * the caller's bug (validated before). */
    void (*embed)(td_backend *be, float *y, const td_weight *table,
                  const int32_t *ids, int64_t n, float scale,
                  const float *pos, const int32_t *positions);

    /* Rotary position embedding, rotate-half convention (GPT-NeoX / HF
     * Llama), head_dim even, positions < the table's rows (the caller
     * validates both), in place on x (n_seq, n_t, ld) for n_heads heads of head_dim:
     * row t of every sequence has absolute position pos0 + t. cos_sin is the
     * cached table (max_pos, head_dim): columns [0, head_dim/2) hold
     * cos(p*theta_i), columns [head_dim/2, head_dim) hold sin(p*theta_i). */
    void (*rope)(td_backend *be, float *x, int n_seq, int n_t, int64_t ld,
                 int64_t seq_stride, int n_heads, int head_dim, int pos0,
                 const float *cos_sin);

    /* Rotary position embedding of n independent rows (the in-flight batch:
     * one new token per sequence, each at its own step): row r of x
     * (n, ld), n_heads heads of head_dim, has absolute position pos[r]
     * (device int32 array of n entries, each < the table's rows). The same
     * convention, table and arithmetic as rope: a row comes out bit-identical
     * to rope applied to it at that position on the same backend. */
    void (*rope_rows)(td_backend *be, float *x, int64_t n, int64_t ld,
                      int n_heads, int head_dim, const int32_t *pos,
                      const float *cos_sin);

    /* Multi-head attention, see td_attn_args. */
    void (*attention)(td_backend *be, const td_attn_args *a);

    /* Decoding scores for one step over n rows of logits (n, vocab), in
     * place, in the order transformers' beam search applies them:
     *   1. logits[r] = log_softmax(logits[r])
     *   2. logits[r][suppress[i]] = -inf for i < n_suppress (bad_words_ids
     *      with one token each, e.g. the pad id); suppress is device int32
     *   3. a forced token f: every entry -inf except f, which is 0
     *      (transformers' ForcedBOSTokenLogitsProcessor and
     *      ForcedEOSTokenLogitsProcessor): f = eos_id on every row when
     *      force_eos is set, else f = force_rows[r] on row r when
     *      force_rows[r] >= 0 (force_rows: device int32 array of n, or
     *      NULL; -1: the row is not forced; each row of an in-flight batch
     *      its own: a target prefix's token, or </s> at its last step). A
     *      forced token outside [0, vocab) leaves every entry -inf.
     *   4. top-k per row of logits[r] + row_bias[r] (row_bias optional: the
     *      running beam scores, device float array of n), sorted by value
     *      descending, ties toward the lower token id, out_val / out_idx
     *      (n, k) device arrays. Additions are float32, as in transformers.
     * 1 <= k <= min(vocab, 64); otherwise a latched error. A row whose
     * entries are all -inf yields -inf values (not NaN). */
    void (*logprobs_topk)(td_backend *be, float *logits, int64_t n,
                          int64_t vocab, const int32_t *suppress,
                          int n_suppress, int force_eos,
                          const int32_t *force_rows, int eos_id,
                          const float *row_bias, int k, float *out_val,
                          int32_t *out_idx);

    /* Gather rows: dst[r] = src[index[r]] for r < n, each row row_elems
     * floats; dst and src rows strided by ld (elements). index is a device
     * int32 array. dst must not alias src. Used to reorder KV caches after a
     * beam step and to compact a batch when sequences finish.
     * row_len (device int32 array of n, or NULL): row r copies only its
     * first min(row_len[r], row_elems) elements (a cache row's written
     * positions); the rest of dst row r is left as it is. */
    void (*gather_rows)(td_backend *be, float *dst, const float *src,
                        const int32_t *index, int64_t n, int64_t row_elems,
                        int64_t ld, const int32_t *row_len);

    /* Scatter rows, the inverse of gather_rows: dst[index[r]] = src[r] for
     * r < n, each row row_elems floats; src rows strided by ld_src, dst rows
     * by ld_dst (elements). index is a device int32 array of n distinct
     * entries (two rows written to one place is the caller's bug: which one
     * wins is unspecified). dst must not alias src; dst rows not named by
     * index are left as they are. Used to write each decoder row's new
     * self-attention K/V at its own position in the cache (index
     * row*T + pos[row]) and to place a newly encoded sentence's
     * cross-attention K/V into its slot. */
    void (*scatter_rows)(td_backend *be, float *dst, int64_t ld_dst,
                         const float *src, int64_t ld_src,
                         const int32_t *index, int64_t n, int64_t row_elems);

    /* One step's search bookkeeping, see td_beam_args: candidate scores,
     * back-pointers, finished hypotheses with their length penalty, the
     * end at max_length, the early stop and the n-best list, every
     * sentence exactly as beam_rules.h's td_beam_sent_step. An argument
     * out of contract (B or max_beam beyond TD_BEAM_MAX, ks < 2B) is a
     * latched error. */
    void (*beam_step)(td_backend *be, const td_beam_args *a);

    /* Optional (NULL: every op runs as it is issued). Bracket one decoder
     * step's ops, from its first compute op to its beam_step, with no
     * upload, download, sync or allocation between. step_begin returns 1
     * when the backend captures the ops instead of running them (the CUDA
     * backend: one CUDA graph, TD_GPU_GRAPHS), else 0. step_end runs what
     * was captured and returns 0, or returns 1 when the capture failed:
     * then nothing of the bracket ran, no error is latched for it, and the
     * caller issues the same ops again, bracketed or not (the next
     * step_begin may return 0). */
    int (*step_begin)(td_backend *be);
    int (*step_end)(td_backend *be);

    /* Optional (NULL: nothing to reserve). The caller will run linear with
     * weight w on up to `rows` rows: a backend that needs temporary device
     * memory for that takes it now (workers call this at start-up, so that
     * no request allocates). A failure is latched, reported by sync. */
    void (*reserve_linear)(td_backend *be, const td_weight *w, int64_t rows);
} td_backend_ops;

struct td_backend {
    const td_backend_ops *ops;
    void *ctx;
    /* Set by the model loader while it uploads the embedding tables and the
     * output projection (tied or not): a backend that stores matrices in a
     * lossy integer format (the CPU's --dtype int8) keeps these float32
     * (--dtype int8-all: int8 as well).
     * The vocabulary projection decides between close candidates, and its
     * rounding cost more agreement with float32 than its speed was worth
     * (docs/decisions.md, "int8 on the CPU"). Other storages ignore it. */
    int keep_float;
};

#ifdef __cplusplus
}
#endif

#endif /* TD_BACKEND_H */
