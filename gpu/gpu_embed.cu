/*
 * gpu_embed.cu - the position family: embedding lookup (* scale + absolute
 * position table) and rotary embeddings (rotate-half, GPT-NeoX / HF Llama)
 * from the cached cos|sin table, for a (n_seq, n_t) block at pos0 + t (rope)
 * or for rows at their own positions (rope_rows). Formulas as
 * cpu/cpu_backend.c.
 */
#include "gpu_internal.cuh"

static __global__ void k_embed(float *__restrict__ y, const void *__restrict__ table,
                               td_dtype tdt, const int32_t *__restrict__ ids, int64_t n,
                               int64_t d, float scale, const float *__restrict__ pos,
                               const int32_t *__restrict__ positions)
{
    const int64_t total = n * d;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / d, col = i % d;
        float v = gpu_wload(table, tdt, (int64_t)ids[r] * d + col) * scale;
        if (pos)
            v += pos[(int64_t)positions[r] * d + col];
        y[i] = v;
    }
}

/* Rotates pair i < hd2 = head_dim / 2 of one head in place: x1 is the
 * head's first column, cs the position's table row. k_rope and k_rope_rows
 * both call it, so that a row comes out bit-identical from either
 * (backend.h). The _rn intrinsics fix every rounding: plain a * co - b * si
 * leaves the compiler free to fuse either product into an FMA (nvcc's
 * --fmad, and ptxas on mul.f32), which could differ between two kernels;
 * unfused, the result is also the CPU's (cpu_rope_row, no contraction). */
static __device__ __forceinline__ void rope_pair(float *x1, const float *__restrict__ cs,
                                                 int hd2, int i)
{
    const float co = cs[i], si = cs[hd2 + i];
    const float a = x1[i], b = x1[hd2 + i];
    x1[i] = __fsub_rn(__fmul_rn(a, co), __fmul_rn(b, si));
    x1[hd2 + i] = __fadd_rn(__fmul_rn(b, co), __fmul_rn(a, si));
}

/* One thread per (row, head, pair i < half). */
static __global__ void k_rope(float *x, int n_seq, int n_t, int64_t ld, int64_t seq_stride,
                              int n_heads, int head_dim, int pos0,
                              const float *__restrict__ cos_sin)
{
    const int half = head_dim / 2;
    const int64_t total = (int64_t)n_seq * n_t * n_heads * half;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int i = (int)(e % half);
        const int64_t rh = e / half;
        const int h = (int)(rh % n_heads);
        const int64_t st = rh / n_heads;
        const int64_t s = st / n_t, t = st % n_t;
        const float *cs = cos_sin + (pos0 + t) * (int64_t)head_dim;
        rope_pair(x + s * seq_stride + t * ld + (int64_t)h * head_dim, cs, half, i);
    }
}

/* One thread per (row, head, pair i < half); row r at position pos[r]. */
static __global__ void k_rope_rows(float *x, int64_t n, int64_t ld, int n_heads, int head_dim,
                                   const int32_t *__restrict__ pos,
                                   const float *__restrict__ cos_sin)
{
    const int half = head_dim / 2;
    const int64_t total = n * n_heads * half;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int i = (int)(e % half);
        const int64_t rh = e / half;
        const int h = (int)(rh % n_heads);
        const int64_t r = rh / n_heads;
        const float *cs = cos_sin + (int64_t)pos[r] * head_dim;
        rope_pair(x + r * ld + (int64_t)h * head_dim, cs, half, i);
    }
}

static void launch_embed(gpu_ctx *c, float *y, const td_weight *table, const int32_t *ids,
                         int64_t n, float scale, const float *pos, const int32_t *positions)
{
    const int64_t d = table->cols;
    k_embed<<<gpu_blocks(n * d, 256), 256, 0, c->stream>>>(y, table->data, table->dtype, ids, n,
                                                           d, scale, pos, positions);
    CUDA_CHECK_LAUNCH();
}

static void launch_rope(gpu_ctx *c, float *x, int n_seq, int n_t, int64_t ld, int64_t seq_stride,
                        int n_heads, int head_dim, int pos0, const float *cos_sin)
{
    const int64_t total = (int64_t)n_seq * n_t * n_heads * (head_dim / 2);
    k_rope<<<gpu_blocks(total, 256), 256, 0, c->stream>>>(x, n_seq, n_t, ld, seq_stride, n_heads,
                                                          head_dim, pos0, cos_sin);
    CUDA_CHECK_LAUNCH();
}

static void launch_rope_rows(gpu_ctx *c, float *x, int64_t n, int64_t ld, int n_heads,
                             int head_dim, const int32_t *pos, const float *cos_sin)
{
    const int64_t total = n * n_heads * (head_dim / 2);
    k_rope_rows<<<gpu_blocks(total, 256), 256, 0, c->stream>>>(x, n, ld, n_heads, head_dim, pos,
                                                               cos_sin);
    CUDA_CHECK_LAUNCH();
}

extern "C" void gpu_op_embed(gpu_ctx *c, float *y, const td_weight *table, const int32_t *ids,
                             int64_t n, float scale, const float *pos, const int32_t *positions)
{
    if (n <= 0 || table->cols <= 0)
        return;
    if (!table->data || (pos && !positions)) {
        gpu_fail(c, "cuda: embed: no table data or positions missing");
        return;
    }
    launch_embed(c, y, table, ids, n, scale, pos, positions);
}

extern "C" void gpu_op_rope(gpu_ctx *c, float *x, int n_seq, int n_t, int64_t ld,
                            int64_t seq_stride, int n_heads, int head_dim, int pos0,
                            const float *cos_sin)
{
    if (n_seq <= 0 || n_t <= 0 || n_heads <= 0 || head_dim < 2)
        return;
    launch_rope(c, x, n_seq, n_t, ld, seq_stride, n_heads, head_dim, pos0, cos_sin);
}

extern "C" void gpu_op_rope_rows(gpu_ctx *c, float *x, int64_t n, int64_t ld, int n_heads,
                                 int head_dim, const int32_t *pos, const float *cos_sin)
{
    if (n <= 0 || n_heads <= 0 || head_dim < 2)
        return;
    if (!pos) {
        gpu_fail(c, "cuda: rope_rows: %lld rows but no positions", (long long)n);
        return;
    }
    launch_rope_rows(c, x, n, ld, n_heads, head_dim, pos, cos_sin);
}
