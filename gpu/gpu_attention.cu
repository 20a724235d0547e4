/*
 * gpu_attention.cu - multi-head attention as backend.h specifies it. Two
 * kernels: the fused flash kernel (gpu_attn_flash.cu), taken whenever no
 * probabilities are captured and it fits (head_dim <= 256), and the
 * row-per-block kernel below, which keeps a row's logits and so returns the
 * exact probabilities a capture asks for. TD_GPU_ATTN=naive (read when the
 * backend is created) sends every call to the row kernel, for debugging and
 * for the op test, which checks both against the CPU.
 *
 * The row kernel covers encoder self-attention (kv_len masks), decoder self-attention
 * over the KV cache (causal, q_pos0 or per-sequence q_pos, kv_seq_stride),
 * cross-attention (beams sharing their sentence's K/V through kv_index),
 * Shaw et al. 2018 relative keys/values (eqs. 3-5) and the capture of the
 * probabilities.
 *
 * One block per query row (s, h, i): the block keeps q and the row's logits
 * in shared memory, a warp per key computes q.k_j (+ q.rel_k), the softmax
 * is a block reduction, and P.V is split over groups of head_dim threads.
 * Rows are numbered (s, h, i) with i fastest, so neighbouring blocks read
 * the same K/V head from L2. Keys j >= the row's visible bound are never
 * read, so an unwritten cache tail (even NaN) cannot leak in.
 */
#include "gpu_internal.cuh"

#define ATT_THREADS 128

static __global__ void k_attention(td_attn_args a, int64_t rows)
{
    extern __shared__ float smem[];
    const int hd = a.head_dim, R = a.rel_max;
    const int n_k_cap = a.n_k > 0 ? a.n_k : 0;
    float *q_s = smem;                         /* hd */
    float *p = q_s + hd;                       /* n_k */
    float *part = p + n_k_cap;                 /* max(blockDim, hd) */
    float *red = part + (blockDim.x > (unsigned)hd ? blockDim.x : hd); /* 32 */
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;

    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int i = (int)(row % a.n_q);
        const int h = (int)(row / a.n_q % a.n_heads);
        const int s = (int)(row / a.n_q / a.n_heads);
        const int ks = a.kv_index ? a.kv_index[s] : s;
        int64_t L = a.n_k;
        if (a.kv_len && a.kv_len[s] < L)
            L = a.kv_len[s];
        /* absolute position of this query row (backend.h: pos(s, i)) */
        const int64_t qpos = (a.q_pos ? (int64_t)a.q_pos[s] : (int64_t)a.q_pos0) + i;
        if (a.causal && qpos + 1 < L)
            L = qpos + 1;
        const int lim = L < 0 ? 0 : (int)L;
        float *o = a.out + s * a.out_seq_stride + i * a.ld_out + (int64_t)h * hd;
        float *pr = a.probs ? a.probs + (((int64_t)s * a.n_heads + h) * a.n_q + i) * a.probs_ld
                            : NULL;
        if (lim == 0) { /* padding row: no visible key */
            for (int c = threadIdx.x; c < hd; c += blockDim.x)
                o[c] = 0.0f;
            if (pr)
                for (int j = threadIdx.x; j < a.n_k; j += blockDim.x)
                    pr[j] = 0.0f;
            continue;
        }
        const float *q = a.q + s * a.q_seq_stride + i * a.ld_q + (int64_t)h * hd;
        const float *K = a.k + ks * a.kv_seq_stride + (int64_t)h * hd;
        const float *V = a.v + ks * a.kv_seq_stride + (int64_t)h * hd;
        __syncthreads(); /* the previous row is done with the shared arrays */
        for (int c = threadIdx.x; c < hd; c += blockDim.x)
            q_s[c] = q[c];
        __syncthreads();

        /* logits: one warp per key */
        for (int j = wid; j < lim; j += nw) {
            const float *kj = K + (int64_t)j * a.ld_kv;
            const float *rk = NULL;
            if (a.rel_k) {
                int64_t r = j - qpos;
                r = r < -R ? -R : (r > R ? R : r);
                rk = a.rel_k + (r + R) * hd;
            }
            float acc = 0.0f;
            for (int c = lane; c < hd; c += 32)
                acc += q_s[c] * (rk ? kj[c] + rk[c] : kj[c]);
            for (int off = 16; off > 0; off >>= 1)
                acc += __shfl_xor_sync(0xffffffffu, acc, off);
            if (lane == 0)
                p[j] = acc;
        }
        __syncthreads();

        /* softmax over the visible keys */
        float mx = -INFINITY;
        for (int j = threadIdx.x; j < lim; j += blockDim.x)
            mx = fmaxf(mx, p[j]);
        mx = gpu_block_max(mx, red);
        float sum = 0.0f;
        for (int j = threadIdx.x; j < lim; j += blockDim.x) {
            const float e = expf(p[j] - mx);
            p[j] = e;
            sum += e;
        }
        sum = gpu_block_sum(sum, red);
        const float inv = 1.0f / sum;
        for (int j = threadIdx.x; j < lim; j += blockDim.x)
            p[j] *= inv;
        if (pr)
            for (int j = threadIdx.x; j < a.n_k; j += blockDim.x)
                pr[j] = j < lim ? p[j] : 0.0f;
        __syncthreads();

        /* out = P (V + rel_v): G groups of threads split the keys, each
         * thread of a group owns columns c, c + step, ... */
        const int wide = (int)blockDim.x >= hd;
        const int G = wide ? (int)blockDim.x / hd : 1;
        const int g = wide ? (int)threadIdx.x / hd : 0;
        const int c0 = wide ? (int)threadIdx.x % hd : (int)threadIdx.x;
        const int step = wide ? hd : (int)blockDim.x;
        if (g < G)
            for (int c = c0; c < hd; c += step) {
                float acc = 0.0f;
                for (int j = g; j < lim; j += G) {
                    float v = V[(int64_t)j * a.ld_kv + c];
                    if (a.rel_v) {
                        int64_t r = j - qpos;
                        r = r < -R ? -R : (r > R ? R : r);
                        v += a.rel_v[(r + R) * hd + c];
                    }
                    acc += p[j] * v;
                }
                part[g * hd + c] = acc;
            }
        __syncthreads();
        for (int c = threadIdx.x; c < hd; c += blockDim.x) {
            float acc = 0.0f;
            for (int gg = 0; gg < G; gg++)
                acc += part[gg * hd + c];
            o[c] = acc;
        }
    }
}

static void launch_attention(gpu_ctx *c, const td_attn_args *a, size_t smem)
{
    const int64_t rows = (int64_t)a->n_seq * a->n_heads * a->n_q;
    const unsigned blocks = (unsigned)(rows < 65535LL * 64 ? rows : 65535LL * 64);
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(k_attention, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem));
    k_attention<<<blocks, ATT_THREADS, smem, c->stream>>>(*a, rows);
    CUDA_CHECK_LAUNCH();
}

extern "C" int gpu_attn_use_flash(const gpu_ctx *c, const td_attn_args *a)
{
    return c->attn_kernel == GPU_ATTN_AUTO && !a->probs && gpu_attn_flash_fits(c, a);
}

extern "C" void gpu_op_attention(gpu_ctx *c, const td_attn_args *a)
{
    if (a->n_seq <= 0 || a->n_q <= 0 || a->n_heads <= 0 || a->head_dim <= 0)
        return;
    if ((a->rel_k || a->rel_v) && a->rel_max < 0) {
        gpu_fail(c, "cuda: attention: rel_max %d < 0", a->rel_max);
        return;
    }
    if (a->probs && a->probs_ld < a->n_k) {
        gpu_fail(c, "cuda: attention: probs_ld %lld < n_k %d", (long long)a->probs_ld, a->n_k);
        return;
    }
    if (gpu_attn_use_flash(c, a)) {
        gpu_attn_flash(c, a);
        return;
    }
    const size_t hd = (size_t)a->head_dim;
    const size_t nk = a->n_k > 0 ? (size_t)a->n_k : 0;
    const size_t smem = (hd + nk + (ATT_THREADS > hd ? ATT_THREADS : hd) + 32) * sizeof(float);
    if (smem > (size_t)c->max_smem_optin) {
        gpu_fail(c, "cuda: attention: %d keys x head_dim %d need %zu bytes of shared memory, "
                 "the device has %d", a->n_k, a->head_dim, smem, c->max_smem_optin);
        return;
    }
    launch_attention(c, a, smem);
}
