/*
 * gpu_embed.cu - the position family: embedding lookup (* scale + absolute
 * position table) and rotary embeddings (rotate-half, GPT-NeoX / HF Llama)
 * from the cached cos|sin table. Formulas as cpu/cpu_backend.c.
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
        float *x1 = x + s * seq_stride + t * ld + (int64_t)h * head_dim;
        const float co = cs[i], si = cs[half + i];
        const float a = x1[i], b = x1[half + i];
        x1[i] = a * co - b * si;
        x1[half + i] = b * co + a * si;
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
