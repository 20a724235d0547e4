/*
 * gpu_topk.cu - the decoding scores of one step: log-softmax, suppressed
 * tokens, forced EOS (every row, or the rows force_rows names), then the
 * top k (<= 64) of logprob + row bias, in the order of transformers' beam
 * search (backend.h).
 *
 * One block per row, two reads of the row (the second from L2) and one
 * write, everything fused:
 *   1. the log-sum-exp in one pass: each thread keeps a running max m and
 *      sum s of exp(x - m), rescaled by exp(m_old - m_new) when its max
 *      grows (the online softmax of Milakov & Gimelshein 2018, "Online
 *      normalizer calculation for softmax"); the block combines the pairs.
 *      Forced rows skip it (every value is overwritten);
 *   2. y = (x - max) - lse, -inf for suppressed ids (a bitmap of the
 *      suppressed ids in shared memory, built once per block; a scan of
 *      the list when the bitmap does not fit), every value -inf but eos
 *      (0) on forced rows; y is written back in place and y + bias enters
 *      the thread's sorted list of its best KT >= k candidates, held in
 *      registers (unrolled compare-and-swap insertion, no local memory);
 *   3. merge, without sorting the vocabulary: each warp takes k rounds of a
 *      warp argmax over its lanes' list heads (shuffles only), then warp 0
 *      takes k rounds over the warps' lists. The order is (value
 *      descending, id ascending) everywhere, so the union of the per-thread
 *      lists holds the global top k and ties go to the lower id, as the
 *      CPU twin's.
 * Rows whose logits are all -inf give -inf values (ids 0..k-1: the order
 * on ids), never NaN: the sum is skipped when the max is -inf.
 */
#include <limits.h>

#include "gpu_internal.cuh"

#define TOPK_THREADS 256
#define TOPK_WARPS (TOPK_THREADS / 32)
#define TOPK_MAX 64

typedef struct cand {
    float v;
    int id; /* INT_MAX: empty (worse than any real entry, -inf included) */
} cand;

/* (va, ia) comes before (vb, ib): value descending, id ascending, empty
 * last. A NaN value compares by id only (the CPU twin lets a NaN in only
 * while its list is not full, behind the entries already there). */
static __device__ __forceinline__ bool before(float va, int ia, float vb, int ib)
{
    if ((ia == INT_MAX) != (ib == INT_MAX))
        return ib == INT_MAX;
    if (va > vb)
        return true;
    if (va < vb)
        return false;
    return ia < ib;
}

static __device__ __forceinline__ cand warp_best(cand c)
{
    for (int o = 16; o > 0; o >>= 1) {
        cand x;
        x.v = __shfl_xor_sync(0xffffffffu, c.v, o);
        x.id = __shfl_xor_sync(0xffffffffu, c.id, o);
        if (before(x.v, x.id, c.v, c.id))
            c = x;
    }
    return c;
}

/* The row's max and log(sum(exp(x - max))) (lse 0 when the max is -inf),
 * in one pass over x. */
static __device__ void row_lse(const float *x, int64_t vocab, float *red, float *mx_out,
                               float *lse_out)
{
    float m = -INFINITY, s = 0.0f;
    for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x) {
        const float v = x[t];
        if (v > m) {
            s = s * expf(m - v) + 1.0f; /* m = -inf: s is 0, exp(-inf) 0 */
            m = v;
        } else if (v != -INFINITY) {
            s += expf(v - m);
        }
    }
    const float M = gpu_block_max(m, red);
    float lse = 0.0f;
    if (M != -INFINITY) /* the same for the whole block */
        lse = logf(gpu_block_sum(m == -INFINITY ? 0.0f : s * expf(m - M), red));
    *mx_out = M;
    *lse_out = lse;
}

template <int KT>
static __global__ void __launch_bounds__(TOPK_THREADS)
k_logprobs_topk(float *logits, int64_t n, int64_t vocab, const int32_t *__restrict__ suppress,
                int n_suppress, int use_bits, int force_eos,
                const int32_t *__restrict__ force_rows, int eos_id,
                const float *__restrict__ row_bias, int k, float *__restrict__ out_val,
                int32_t *__restrict__ out_idx)
{
    extern __shared__ uint32_t lp_bits[]; /* (vocab + 31) / 32 when use_bits */
    __shared__ float red[32];
    __shared__ cand wl[TOPK_WARPS][KT]; /* each warp's top k */
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;

    if (use_bits) {
        const int64_t words = (vocab + 31) / 32;
        for (int64_t i = threadIdx.x; i < words; i += blockDim.x)
            lp_bits[i] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < n_suppress; i += blockDim.x) {
            const int32_t id = suppress[i];
            if (id >= 0 && id < vocab)
                atomicOr(&lp_bits[id >> 5], 1u << (id & 31));
        }
        __syncthreads();
    }

    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        float *x = logits + r * vocab;
        /* the same for every thread of the block (one row per block) */
        /* the token forced on this row, -1: none (force_eos: eos on every row) */
        const int fid = force_eos ? eos_id : force_rows ? force_rows[r] : -1;
        const int forced = fid >= 0;
        float mx = -INFINITY, lse = 0.0f;
        if (!forced)
            row_lse(x, vocab, red, &mx, &lse);

        /* 2. the scores, written back, and each thread's best KT */
        const float b = row_bias ? row_bias[r] : 0.0f;
        float val[KT];
        int idx[KT];
#pragma unroll
        for (int p = 0; p < KT; p++) {
            val[p] = -INFINITY;
            idx[p] = INT_MAX;
        }
        for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x) {
            float y;
            if (forced) {
                y = t == fid ? 0.0f : -INFINITY;
            } else if (mx == -INFINITY) {
                y = -INFINITY;
            } else {
                int sup = 0;
                if (use_bits)
                    sup = (lp_bits[t >> 5] >> (t & 31)) & 1u;
                else
                    for (int i = 0; i < n_suppress && !sup; i++)
                        sup = suppress[i] == t;
                y = sup ? -INFINITY : (x[t] - mx) - lse;
            }
            x[t] = y;
            float cv = y + b;
            int ci = (int)t;
            if (before(cv, ci, val[KT - 1], idx[KT - 1])) {
#pragma unroll
                for (int p = 0; p < KT; p++)
                    if (before(cv, ci, val[p], idx[p])) {
                        const float tv = val[p];
                        const int ti = idx[p];
                        val[p] = cv;
                        idx[p] = ci;
                        cv = tv;
                        ci = ti;
                    }
            }
        }

        /* 3a. each warp: k rounds over its lanes' list heads */
        for (int round = 0; round < k; round++) {
            cand c;
            c.v = val[0];
            c.id = idx[0];
            const cand win = warp_best(c);
            if (lane == 0)
                wl[wid][round] = win;
            if (win.id != INT_MAX && idx[0] == win.id) { /* ids are unique: one lane */
#pragma unroll
                for (int p = 0; p < KT - 1; p++) {
                    val[p] = val[p + 1];
                    idx[p] = idx[p + 1];
                }
                val[KT - 1] = -INFINITY;
                idx[KT - 1] = INT_MAX;
            }
        }
        __syncthreads();
        /* 3b. warp 0: k rounds over the warps' lists (lane w reads list w) */
        if (wid == 0) {
            int head = 0;
            for (int round = 0; round < k; round++) {
                cand c;
                c.v = -INFINITY;
                c.id = INT_MAX;
                if (lane < nw && head < k)
                    c = wl[lane][head];
                const cand win = warp_best(c);
                if (lane == 0) {
                    out_val[r * k + round] = win.v;
                    out_idx[r * k + round] = win.id;
                }
                if (win.id != INT_MAX && lane < nw && head < k && c.id == win.id)
                    head++;
            }
        }
        __syncthreads(); /* wl and red are reused by the next row */
    }
}

template <int KT>
static void launch_topk_kt(gpu_ctx *c, unsigned blocks, size_t smem, float *logits, int64_t n,
                           int64_t vocab, const int32_t *suppress, int n_suppress, int use_bits,
                           int force_eos, const int32_t *force_rows, int eos_id,
                           const float *row_bias, int k, float *out_val, int32_t *out_idx)
{
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(k_logprobs_topk<KT>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    k_logprobs_topk<KT><<<blocks, TOPK_THREADS, smem, c->stream>>>(
        logits, n, vocab, suppress, n_suppress, use_bits, force_eos, force_rows, eos_id,
        row_bias, k, out_val, out_idx);
    CUDA_CHECK_LAUNCH();
}

static void launch_logprobs_topk(gpu_ctx *c, float *logits, int64_t n, int64_t vocab,
                                 const int32_t *suppress, int n_suppress, int force_eos,
                                 const int32_t *force_rows, int eos_id, const float *row_bias,
                                 int k, float *out_val, int32_t *out_idx)
{
    const unsigned blocks = (unsigned)(n < 65535LL * 16 ? n : 65535LL * 16);
    /* the suppressed ids as a bitmap in shared memory when it fits next to
     * the kernel's static arrays (else each score scans the list) */
    const size_t bits = n_suppress > 0 ? (size_t)((vocab + 31) / 32) * sizeof(uint32_t) : 0;
    const size_t static_bytes = sizeof(cand) * TOPK_WARPS * TOPK_MAX + 32 * sizeof(float);
    const int use_bits = bits > 0 && bits + static_bytes <= (size_t)c->max_smem_optin;
    const size_t smem = use_bits ? bits : 0;
#define TOPK_LAUNCH(KT)                                                                    \
    launch_topk_kt<KT>(c, blocks, smem, logits, n, vocab, suppress, n_suppress, use_bits,  \
                       force_eos, force_rows, eos_id, row_bias, k, out_val, out_idx)
    if (k <= 1)
        TOPK_LAUNCH(1);
    else if (k <= 2)
        TOPK_LAUNCH(2);
    else if (k <= 4)
        TOPK_LAUNCH(4);
    else if (k <= 8)
        TOPK_LAUNCH(8);
    else if (k <= 16)
        TOPK_LAUNCH(16);
    else if (k <= 32)
        TOPK_LAUNCH(32);
    else
        TOPK_LAUNCH(TOPK_MAX);
#undef TOPK_LAUNCH
}

extern "C" void gpu_op_logprobs_topk(gpu_ctx *c, float *logits, int64_t n, int64_t vocab,
                                     const int32_t *suppress, int n_suppress, int force_eos,
                                     const int32_t *force_rows, int eos_id,
                                     const float *row_bias, int k, float *out_val,
                                     int32_t *out_idx)
{
    if (n <= 0 || vocab <= 0)
        return;
    if (k < 1 || k > vocab || k > TOPK_MAX || vocab >= INT_MAX) {
        gpu_fail(c, "cuda: logprobs_topk: k %d out of [1, min(vocab %lld, %d)]", k,
                 (long long)vocab, TOPK_MAX);
        return;
    }
    if (n_suppress > 0 && !suppress) {
        gpu_fail(c, "cuda: logprobs_topk: %d suppressed ids but no array", n_suppress);
        return;
    }
    launch_logprobs_topk(c, logits, n, vocab, suppress, n_suppress, force_eos, force_rows,
                         eos_id, row_bias, k, out_val, out_idx);
}
