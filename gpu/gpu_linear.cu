/*
 * gpu_linear.cu - y = x @ W^T + b with cuBLAS (cublasGemmEx, float32
 * accumulation: CUBLAS_COMPUTE_32F).
 *
 * Float32 weights: a plain float32 GEMM (no TF32), so the engine matches the
 * CPU to rounding. F16 / BF16 weights: the GEMM reads half-precision inputs
 * on the tensor cores and accumulates in float32. The float32 activation x
 * reaches it in one of two ways (gpu_backend.h):
 *   split (default): hi = half(x), lo = half(x - hi) as 2n rows of one GEMM,
 *     y = y_hi + y_lo + b: float32-accurate activations, the weights read
 *     once;
 *   half_activations: x rounded once (the usual mixed precision of fp16
 *     inference; transformers in fp16 rounds them too).
 *
 * Few rows (n <= GEMV_MAX_ROWS: a decoding step of a small batch) skip cuBLAS:
 * one kernel reads each weight row once, in its stored dtype, multiplies it
 * with the float32 rows of x (no rounding of x in any precision) and adds the
 * bias. Such a step is bound by launches and weight reads, and this is one
 * launch instead of two to four.
 *
 * Row-major y (n, out) with row stride ld_y is column-major (out, n) with
 * leading dimension ld_y, so y^T = W x^T is one GEMM with op(W) = T:
 *   m = out, n = n, k = in, A = W (lda = in), B = x (ldb = ld_x), C = y (ldc = ld_y).
 */
#include <limits.h>

#include "gpu_internal.cuh"

static __device__ __forceinline__ void store_half(__half *p, float v)
{
    *p = __float2half_rn(v);
}

static __device__ __forceinline__ void store_half(__nv_bfloat16 *p, float v)
{
    *p = __float2bfloat16_rn(v);
}

static __device__ __forceinline__ float load_half(const __half *p)
{
    return __half2float(*p);
}

static __device__ __forceinline__ float load_half(const __nv_bfloat16 *p)
{
    return __bfloat162float(*p);
}

/* dst (n, in) contiguous = half(src (n, in) of row stride ld); with split,
 * dst + n*in holds the remainders half(src - half(src)) (0 where the first
 * term overflowed: inf - inf would add a NaN of our own). */
template <typename H>
static __global__ void k_to_half(H *__restrict__ dst, const float *__restrict__ src,
                                 int64_t n, int64_t in, int64_t ld, int split)
{
    const int64_t total = n * in;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / in, col = i % in;
        const float v = src[r * ld + col];
        store_half(dst + i, v);
        if (split) {
            const float hi = load_half(dst + i);
            store_half(dst + total + i, isfinite(hi) ? v - hi : 0.0f);
        }
    }
}

/* y[r, o] = y2[r, o] + y2[n + r, o] + bias[o]: the two terms of a split GEMM
 * (y2 contiguous (2n, out)) into y of row stride ld_y. */
static __global__ void k_sum_split(float *__restrict__ y, int64_t ld_y,
                                   const float *__restrict__ y2, int64_t n, int64_t out,
                                   const float *__restrict__ bias)
{
    const int64_t total = n * out;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / out, o = i % out;
        float v = y2[i] + y2[total + i];
        if (bias)
            v += bias[o];
        y[r * ld_y + o] = v;
    }
}

/* y[r, o] = (beta ? y : 0) + bias[o] over (n, out) rows of stride ld_y;
 * bias_only: the GEMM was skipped (in == 0), so y is just the bias or 0. */
static __global__ void k_add_bias(float *__restrict__ y, int64_t ld_y, int64_t n, int64_t out,
                                  const float *__restrict__ bias, int bias_only)
{
    const int64_t total = n * out;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / out, o = i % out;
        const float b = bias ? bias[o] : 0.0f;
        float *p = y + r * ld_y + o;
        *p = bias_only ? b : *p + b;
    }
}

/* Scratch a linear of n rows with weight w needs (0 for float32 weights and
 * the few-rows kernel): the half activations (*xh_bytes, 256-aligned), then
 * with the split the (2n, out) float32 terms. */
#define GEMV_MAX_ROWS 8
static size_t scratch_bytes(const gpu_ctx *c, const td_weight *w, int64_t n, size_t *xh_bytes)
{
    *xh_bytes = 0;
    if (n <= GEMV_MAX_ROWS || (w->dtype != TD_F16 && w->dtype != TD_BF16) || w->cols == 0)
        return 0;
    const int split = !c->half_activations;
    const size_t rows = (size_t)(split ? 2 * n : n);
    *xh_bytes = (rows * (size_t)w->cols * 2 + 255) / 256 * 256;
    return *xh_bytes + (split ? rows * (size_t)w->rows * sizeof(float) : 0);
}

extern "C" void gpu_op_reserve_linear(gpu_ctx *c, const td_weight *w, int64_t rows)
{
    size_t xh;
    const size_t bytes = rows > 0 && w && w->data ? scratch_bytes(c, w, rows, &xh) : 0;
    if (bytes)
        (void)gpu_scratch(c, bytes);
}

/* --- few rows: y = alpha * x @ W^T + b, one warp per output column --- */

#define GEMV_WARPS 8

static __device__ __forceinline__ float wload1(const float *p) { return *p; }
static __device__ __forceinline__ float wload1(const __half *p) { return __half2float(*p); }
static __device__ __forceinline__ float wload1(const __nv_bfloat16 *p)
{
    return __bfloat162float(*p);
}

/* VEC weights per lane per step, loaded as one 16-byte word when VEC > 1
 * (then in % VEC == 0, so every row starts 16-byte aligned). */
template <typename W, int VEC, int NR>
static __global__ void k_gemv(float *__restrict__ y, int64_t ld_y, const float *__restrict__ x,
                              int64_t ld_x, int n, int64_t in, int64_t out,
                              const W *__restrict__ w, float alpha,
                              const float *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int64_t o = (int64_t)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (o >= out)
        return; /* the whole warp: no block-wide synchronisation below */
    const W *wr = w + o * in;
    float acc[NR];
#pragma unroll
    for (int r = 0; r < NR; r++)
        acc[r] = 0.0f;
    for (int64_t k = (int64_t)lane * VEC; k < in; k += 32 * VEC) {
        alignas(16) W wv[VEC];
        if constexpr (VEC > 1)
            *(uint4 *)wv = __ldg((const uint4 *)(wr + k));
        else
            wv[0] = wr[k];
#pragma unroll
        for (int e = 0; e < VEC; e++) {
            const float f = wload1(&wv[e]);
#pragma unroll
            for (int r = 0; r < NR; r++)
                if (r < n)
                    acc[r] += f * __ldg(x + r * ld_x + k + e);
        }
    }
#pragma unroll
    for (int r = 0; r < NR; r++) {
        float v = acc[r];
        for (int off = 16; off > 0; off >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0 && r < n)
            y[r * ld_y + o] = v * alpha + (bias ? bias[o] : 0.0f);
    }
}

template <typename W, int VEC>
static void launch_gemv_rows(gpu_ctx *c, float *y, int64_t ld_y, const float *x, int64_t ld_x,
                             int n, int64_t in, int64_t out, const W *w, float alpha,
                             const float *bias)
{
    const unsigned blocks = (unsigned)((out + GEMV_WARPS - 1) / GEMV_WARPS);
    const int threads = 32 * GEMV_WARPS;
    if (n <= 1)
        k_gemv<W, VEC, 1><<<blocks, threads, 0, c->stream>>>(y, ld_y, x, ld_x, n, in, out, w,
                                                             alpha, bias);
    else if (n <= 2)
        k_gemv<W, VEC, 2><<<blocks, threads, 0, c->stream>>>(y, ld_y, x, ld_x, n, in, out, w,
                                                             alpha, bias);
    else if (n <= 4)
        k_gemv<W, VEC, 4><<<blocks, threads, 0, c->stream>>>(y, ld_y, x, ld_x, n, in, out, w,
                                                             alpha, bias);
    else
        k_gemv<W, VEC, GEMV_MAX_ROWS><<<blocks, threads, 0, c->stream>>>(y, ld_y, x, ld_x, n, in,
                                                                         out, w, alpha, bias);
    CUDA_CHECK_LAUNCH();
}

template <typename W>
static void launch_gemv(gpu_ctx *c, float *y, int64_t ld_y, const float *x, int64_t ld_x,
                        int n, int64_t in, int64_t out, const void *w, float alpha,
                        const float *bias)
{
    const int vec = (int)(16 / sizeof(W)); /* elements per 16-byte load */
    if (in % vec == 0)
        launch_gemv_rows<W, 16 / sizeof(W)>(c, y, ld_y, x, ld_x, n, in, out, (const W *)w, alpha,
                                            bias);
    else
        launch_gemv_rows<W, 1>(c, y, ld_y, x, ld_x, n, in, out, (const W *)w, alpha, bias);
}

static void launch_to_half(gpu_ctx *c, void *dst, td_dtype dt, const float *x, int64_t n,
                           int64_t in, int64_t ld_x, int split)
{
    const unsigned blocks = gpu_blocks(n * in, 256);
    if (dt == TD_F16)
        k_to_half<__half><<<blocks, 256, 0, c->stream>>>((__half *)dst, x, n, in, ld_x, split);
    else
        k_to_half<__nv_bfloat16><<<blocks, 256, 0, c->stream>>>((__nv_bfloat16 *)dst, x, n, in,
                                                                ld_x, split);
    CUDA_CHECK_LAUNCH();
}

static void launch_add_bias(gpu_ctx *c, float *y, int64_t ld_y, int64_t n, int64_t out,
                            const float *bias, int bias_only)
{
    k_add_bias<<<gpu_blocks(n * out, 256), 256, 0, c->stream>>>(y, ld_y, n, out, bias,
                                                                 bias_only);
    CUDA_CHECK_LAUNCH();
}

extern "C" void gpu_op_linear(gpu_ctx *c, float *y, int64_t ld_y, const float *x, int64_t ld_x,
                              int64_t n, const td_weight *w, const td_weight *bias)
{
    if (n <= 0 || w->rows == 0)
        return;
    const int64_t out = w->rows, in = w->cols;
    if (!w->data || (bias && (bias->dtype != TD_F32 || bias->cols != out))) {
        gpu_fail(c, "cuda: linear: bad weight or bias (weight %p, bias dtype %d cols %lld, "
                 "out %lld)", w->data, bias ? (int)bias->dtype : -1,
                 bias ? (long long)bias->cols : -1LL, (long long)out);
        return;
    }
    if (out > INT_MAX || in > INT_MAX || n > INT_MAX || ld_x > INT_MAX || ld_y > INT_MAX ||
        ld_x < in || ld_y < out) {
        gpu_fail(c, "cuda: linear: shape out of range (n %lld, out %lld, in %lld, ld_x %lld, "
                 "ld_y %lld)", (long long)n, (long long)out, (long long)in, (long long)ld_x,
                 (long long)ld_y);
        return;
    }
    const float *b = bias ? (const float *)bias->data : NULL;
    if (in == 0) {
        launch_add_bias(c, y, ld_y, n, out, b, 1);
        return;
    }
    /* alpha: the load-time scale a half-precision matrix keeps unfolded */
    const float one = w->scale != 0.0f ? w->scale : 1.0f, zero = 0.0f;
    if (n <= GEMV_MAX_ROWS && out <= (int64_t)GEMV_WARPS * 2147483647LL) {
        if (w->dtype == TD_F32)
            launch_gemv<float>(c, y, ld_y, x, ld_x, (int)n, in, out, w->data, one, b);
        else if (w->dtype == TD_F16)
            launch_gemv<__half>(c, y, ld_y, x, ld_x, (int)n, in, out, w->data, one, b);
        else if (w->dtype == TD_BF16)
            launch_gemv<__nv_bfloat16>(c, y, ld_y, x, ld_x, (int)n, in, out, w->data, one, b);
        else
            gpu_fail(c, "cuda: linear: weight dtype %d unknown", (int)w->dtype);
        return;
    }
    if (w->dtype == TD_F32) {
        CUBLAS_CHECK(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n, (int)in,
                                  &one, w->data, CUDA_R_32F, (int)in, x, CUDA_R_32F, (int)ld_x,
                                  &zero, y, CUDA_R_32F, (int)ld_y, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
        if (b)
            launch_add_bias(c, y, ld_y, n, out, b, 0);
        return;
    }
    if (w->dtype != TD_F16 && w->dtype != TD_BF16) {
        gpu_fail(c, "cuda: linear: weight dtype %d unknown", (int)w->dtype);
        return;
    }
    const cudaDataType_t t = w->dtype == TD_F16 ? CUDA_R_16F : CUDA_R_16BF;
    const int split = !c->half_activations;
    const int64_t rows = split ? 2 * n : n; /* GEMM columns: x rows (twice when split) */
    if (rows > INT_MAX) {
        gpu_fail(c, "cuda: linear: %lld rows out of range", (long long)rows);
        return;
    }
    size_t xh_bytes;
    char *scr = (char *)gpu_scratch(c, scratch_bytes(c, w, n, &xh_bytes));
    if (!scr)
        return;
    launch_to_half(c, scr, w->dtype, x, n, in, ld_x, split);
    if (c->failed)
        return;
    if (!split) {
        CUBLAS_CHECK(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n, (int)in,
                                  &one, w->data, t, (int)in, scr, t, (int)in, &zero, y,
                                  CUDA_R_32F, (int)ld_y, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
        if (b)
            launch_add_bias(c, y, ld_y, n, out, b, 0);
        return;
    }
    float *y2 = (float *)(scr + xh_bytes);
    CUBLAS_CHECK(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)rows, (int)in,
                              &one, w->data, t, (int)in, scr, t, (int)in, &zero, y2, CUDA_R_32F,
                              (int)out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    k_sum_split<<<gpu_blocks(n * out, 256), 256, 0, c->stream>>>(y, ld_y, y2, n, out, b);
    CUDA_CHECK_LAUNCH();
}
