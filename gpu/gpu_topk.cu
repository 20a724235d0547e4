/*
 * gpu_topk.cu - the decoding scores of one step: log-softmax, suppressed
 * tokens, forced EOS (every row, or the rows force_rows names), then the
 * top k (<= 64) of logprob + row bias, in the order of transformers' beam
 * search (backend.h).
 *
 * One block per row. Top-k in two phases: each thread keeps the k best of
 * its own columns (t = tid, tid + B, ... visited in ascending id order, so
 * an equal value never displaces an earlier one: ties go to the lower id),
 * then k rounds of a block-wide argmax over the threads' list heads under
 * the order (value descending, id ascending). The global top k is contained
 * in the union of the per-thread lists, so the result is exact.
 */
#include <limits.h>

#include "gpu_internal.cuh"

#define TOPK_THREADS 256
#define TOPK_MAX 64

typedef struct cand {
    float v;
    int id; /* INT_MAX: empty (worse than any real entry, -inf included) */
} cand;

static __device__ __forceinline__ int better(cand a, cand b)
{
    if ((a.id == INT_MAX) != (b.id == INT_MAX))
        return b.id == INT_MAX;
    if (a.v > b.v)
        return 1;
    if (a.v < b.v)
        return 0;
    return a.id < b.id;
}

static __device__ __forceinline__ cand warp_best(cand c)
{
    for (int o = 16; o > 0; o >>= 1) {
        cand x;
        x.v = __shfl_xor_sync(0xffffffffu, c.v, o);
        x.id = __shfl_xor_sync(0xffffffffu, c.id, o);
        if (better(x, c))
            c = x;
    }
    return c;
}

static __global__ void k_logprobs_topk(float *logits, int64_t n, int64_t vocab,
                                       const int32_t *__restrict__ suppress, int n_suppress,
                                       int force_eos, const int32_t *__restrict__ force_rows,
                                       int eos_id,
                                       const float *__restrict__ row_bias, int k,
                                       float *__restrict__ out_val, int32_t *__restrict__ out_idx)
{
    __shared__ float red[32];
    __shared__ cand wbest[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        float *x = logits + r * vocab;
        /* the same for every thread of the block (one row per block) */
        const int forced = force_eos || (force_rows && force_rows[r]);
        /* 1. log_softmax as torch: (x - max) - log(sum(exp(x - max))) */
        float mx = -INFINITY;
        for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x)
            mx = fmaxf(mx, x[t]);
        mx = gpu_block_max(mx, red);
        float lse = 0.0f;
        if (mx != -INFINITY) {
            float sum = 0.0f;
            for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x)
                sum += expf(x[t] - mx);
            lse = logf(gpu_block_sum(sum, red));
        }
        /* 3. forced EOS wins over everything before it */
        for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x) {
            if (forced)
                x[t] = t == eos_id ? 0.0f : -INFINITY;
            else
                x[t] = mx == -INFINITY ? -INFINITY : (x[t] - mx) - lse;
        }
        __syncthreads();
        /* 2. suppressed tokens */
        if (!forced)
            for (int i = threadIdx.x; i < n_suppress; i += blockDim.x)
                if (suppress[i] >= 0 && suppress[i] < vocab)
                    x[suppress[i]] = -INFINITY;
        __syncthreads();

        /* 4. per-thread top k of x + bias */
        const float b = row_bias ? row_bias[r] : 0.0f;
        float val[TOPK_MAX];
        int idx[TOPK_MAX];
        int cnt = 0;
        for (int64_t t = threadIdx.x; t < vocab; t += blockDim.x) {
            const float v = x[t] + b;
            if (cnt == k && !(v > val[k - 1]))
                continue;
            int pos = cnt < k ? cnt++ : k - 1;
            while (pos > 0 && val[pos - 1] < v) {
                val[pos] = val[pos - 1];
                idx[pos] = idx[pos - 1];
                pos--;
            }
            val[pos] = v;
            idx[pos] = (int)t;
        }
        /* k rounds of block argmax over the list heads */
        int head = 0;
        for (int round = 0; round < k; round++) {
            cand c;
            c.v = head < cnt ? val[head] : -INFINITY;
            c.id = head < cnt ? idx[head] : INT_MAX;
            c = warp_best(c);
            if (lane == 0)
                wbest[wid] = c;
            __syncthreads();
            if (wid == 0) {
                cand w;
                w.v = lane < nw ? wbest[lane].v : -INFINITY;
                w.id = lane < nw ? wbest[lane].id : INT_MAX;
                w = warp_best(w);
                if (lane == 0)
                    wbest[0] = w;
            }
            __syncthreads();
            const cand win = wbest[0];
            if (threadIdx.x == 0) {
                out_val[r * k + round] = win.v;
                out_idx[r * k + round] = win.id;
            }
            if (win.id != INT_MAX && head < cnt && idx[head] == win.id)
                head++;
            __syncthreads(); /* wbest is rewritten by the next round */
        }
    }
}

static void launch_logprobs_topk(gpu_ctx *c, float *logits, int64_t n, int64_t vocab,
                                 const int32_t *suppress, int n_suppress, int force_eos,
                                 const int32_t *force_rows, int eos_id, const float *row_bias,
                                 int k, float *out_val, int32_t *out_idx)
{
    const unsigned blocks = (unsigned)(n < 65535LL * 16 ? n : 65535LL * 16);
    k_logprobs_topk<<<blocks, TOPK_THREADS, 0, c->stream>>>(logits, n, vocab, suppress,
                                                            n_suppress, force_eos, force_rows,
                                                            eos_id, row_bias, k, out_val,
                                                            out_idx);
    CUDA_CHECK_LAUNCH();
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
