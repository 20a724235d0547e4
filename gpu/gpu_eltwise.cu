/*
 * gpu_eltwise.cu - the element-wise ops: bias + activation, add, the row
 * gather that reorders KV caches (beam search) and compacts batches, and its
 * inverse, the row scatter that writes rows into caches at their positions.
 * Memory-bound grid-stride loops (bias_act in float4 where the row allows);
 * activations from backend/activation.h, shared with the CPU.
 */
#include "activation.h"
#include "gpu_internal.cuh"

/* x (n, d) = act(x + bias) as (row, column) loops: grid.y strides over the
 * rows, grid.x over a row's vectors (no division per element). V is float4
 * when d % 4 == 0 and x and the bias are 16-byte aligned, else float. */
template <typename V>
static __global__ void k_bias_act(V *__restrict__ x, int64_t n, int64_t dv,
                                  const V *__restrict__ bias, td_activation act)
{
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
        V *xr = x + r * dv;
        for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < dv;
             i += (int64_t)gridDim.x * blockDim.x) {
            V v = xr[i];
            float *f = (float *)&v;
            if (bias) {
                const V b = bias[i];
                const float *fb = (const float *)&b;
#pragma unroll
                for (int e = 0; e < (int)(sizeof(V) / sizeof(float)); e++)
                    f[e] += fb[e];
            }
#pragma unroll
            for (int e = 0; e < (int)(sizeof(V) / sizeof(float)); e++)
                f[e] = td_act(f[e], act);
            xr[i] = v;
        }
    }
}

static __global__ void k_add(float *__restrict__ y, const float *__restrict__ x, int64_t total)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

/* One y-block row per gathered row (grid.y strides over rows), float4 when
 * every row start and length is 16-byte aligned. */
template <typename V>
static __global__ void k_gather(V *__restrict__ dst, const V *__restrict__ src,
                                const int32_t *__restrict__ index, int64_t n, int64_t row_vecs,
                                int64_t ld_vecs)
{
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
        const V *s = src + (int64_t)index[r] * ld_vecs;
        V *d = dst + r * ld_vecs;
        for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < row_vecs;
             i += (int64_t)gridDim.x * blockDim.x)
            d[i] = s[i];
    }
}

/* k_gather with a length per row: row r copies its first len_r =
 * min(row_len[r], row_elems) floats, as float4 while 16-byte aligned (vec:
 * every row start is) and then one float at a time. */
static __global__ void k_gather_len(float *__restrict__ dst, const float *__restrict__ src,
                                    const int32_t *__restrict__ index,
                                    const int32_t *__restrict__ row_len, int64_t n,
                                    int64_t row_elems, int64_t ld, int vec)
{
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
        int64_t len = row_len[r];
        len = len < 0 ? 0 : len > row_elems ? row_elems : len;
        const float *s = src + (int64_t)index[r] * ld;
        float *d = dst + r * ld;
        const int64_t step = (int64_t)gridDim.x * blockDim.x;
        int64_t done = 0;
        if (vec) {
            const int64_t nv = len / 4;
            for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv; i += step)
                ((float4 *)d)[i] = ((const float4 *)s)[i];
            done = nv * 4;
        }
        for (int64_t i = done + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < len;
             i += step)
            d[i] = s[i];
    }
}

/* The inverse of k_gather: source row r goes to destination row index[r];
 * the two sides have their own strides. */
template <typename V>
static __global__ void k_scatter(V *__restrict__ dst, int64_t ld_dst_vecs,
                                 const V *__restrict__ src, int64_t ld_src_vecs,
                                 const int32_t *__restrict__ index, int64_t n, int64_t row_vecs)
{
    for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
        const V *s = src + r * ld_src_vecs;
        V *d = dst + (int64_t)index[r] * ld_dst_vecs;
        for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < row_vecs;
             i += (int64_t)gridDim.x * blockDim.x)
            d[i] = s[i];
    }
}

static void launch_bias_act(gpu_ctx *c, float *x, int64_t n, int64_t d, const float *bias,
                            td_activation act)
{
    const int vec = d % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)bias % 16 == 0;
    const int64_t dv = vec ? d / 4 : d;
    int64_t bx = (dv + 255) / 256;
    bx = bx > 64 ? 64 : bx;
    const dim3 grid((unsigned)bx, (unsigned)(n < 65535 ? n : 65535));
    if (vec)
        k_bias_act<float4><<<grid, 256, 0, c->stream>>>((float4 *)x, n, dv,
                                                        (const float4 *)bias, act);
    else
        k_bias_act<float><<<grid, 256, 0, c->stream>>>(x, n, dv, bias, act);
    CUDA_CHECK_LAUNCH();
}

static void launch_add(gpu_ctx *c, float *y, const float *x, int64_t total)
{
    k_add<<<gpu_blocks(total, 256), 256, 0, c->stream>>>(y, x, total);
    CUDA_CHECK_LAUNCH();
}

static void launch_gather(gpu_ctx *c, float *dst, const float *src, const int32_t *index,
                          int64_t n, int64_t row_elems, int64_t ld)
{
    const int vec = ((uintptr_t)dst % 16 == 0 && (uintptr_t)src % 16 == 0 && ld % 4 == 0 &&
                     row_elems % 4 == 0);
    const int64_t row_vecs = vec ? row_elems / 4 : row_elems;
    int64_t bx = (row_vecs + 255) / 256;
    bx = bx > 1024 ? 1024 : bx;
    dim3 grid((unsigned)bx, (unsigned)(n < 65535 ? n : 65535));
    if (vec)
        k_gather<float4><<<grid, 256, 0, c->stream>>>((float4 *)dst, (const float4 *)src, index,
                                                      n, row_vecs, ld / 4);
    else
        k_gather<float><<<grid, 256, 0, c->stream>>>(dst, src, index, n, row_vecs, ld);
    CUDA_CHECK_LAUNCH();
}

static void launch_scatter(gpu_ctx *c, float *dst, int64_t ld_dst, const float *src,
                           int64_t ld_src, const int32_t *index, int64_t n, int64_t row_elems)
{
    const int vec = ((uintptr_t)dst % 16 == 0 && (uintptr_t)src % 16 == 0 && ld_dst % 4 == 0 &&
                     ld_src % 4 == 0 && row_elems % 4 == 0);
    const int64_t row_vecs = vec ? row_elems / 4 : row_elems;
    int64_t bx = (row_vecs + 255) / 256;
    bx = bx > 1024 ? 1024 : bx;
    dim3 grid((unsigned)bx, (unsigned)(n < 65535 ? n : 65535));
    if (vec)
        k_scatter<float4><<<grid, 256, 0, c->stream>>>((float4 *)dst, ld_dst / 4,
                                                       (const float4 *)src, ld_src / 4, index, n,
                                                       row_vecs);
    else
        k_scatter<float><<<grid, 256, 0, c->stream>>>(dst, ld_dst, src, ld_src, index, n,
                                                      row_vecs);
    CUDA_CHECK_LAUNCH();
}

extern "C" void gpu_op_bias_act(gpu_ctx *c, float *x, int64_t n, int64_t d,
                                const td_weight *bias, td_activation act)
{
    if (n <= 0 || d <= 0 || (!bias && act == TD_ACT_NONE))
        return;
    if (bias && (!bias->data || bias->rows * bias->cols < d || bias->dtype != TD_F32)) {
        gpu_fail(c, "cuda: bias_act: bias of %lld values (dtype %d) for d %lld",
                 (long long)(bias->rows * bias->cols), (int)bias->dtype, (long long)d);
        return;
    }
    launch_bias_act(c, x, n, d, bias ? (const float *)bias->data : NULL, act);
}

extern "C" void gpu_op_add(gpu_ctx *c, float *y, const float *x, int64_t n, int64_t d)
{
    if (n > 0 && d > 0)
        launch_add(c, y, x, n * d);
}

extern "C" void gpu_op_gather_rows(gpu_ctx *c, float *dst, const float *src,
                                   const int32_t *index, int64_t n, int64_t row_elems,
                                   int64_t ld, const int32_t *row_len)
{
    if (n <= 0 || row_elems <= 0)
        return;
    if (!row_len) {
        launch_gather(c, dst, src, index, n, row_elems, ld);
        return;
    }
    const int vec = (uintptr_t)dst % 16 == 0 && (uintptr_t)src % 16 == 0 && ld % 4 == 0;
    int64_t bx = (row_elems / (vec ? 4 : 1) + 255) / 256;
    bx = bx < 1 ? 1 : bx > 1024 ? 1024 : bx;
    dim3 grid((unsigned)bx, (unsigned)(n < 65535 ? n : 65535));
    k_gather_len<<<grid, 256, 0, c->stream>>>(dst, src, index, row_len, n, row_elems, ld, vec);
    CUDA_CHECK_LAUNCH();
}

extern "C" void gpu_op_scatter_rows(gpu_ctx *c, float *dst, int64_t ld_dst, const float *src,
                                    int64_t ld_src, const int32_t *index, int64_t n,
                                    int64_t row_elems)
{
    if (n <= 0 || row_elems <= 0)
        return;
    if (!index) {
        gpu_fail(c, "cuda: scatter_rows: %lld rows but no index", (long long)n);
        return;
    }
    launch_scatter(c, dst, ld_dst, src, ld_src, index, n, row_elems);
}
