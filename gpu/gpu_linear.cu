/*
 * gpu_linear.cu - y = x @ W^T + b with cuBLAS (cublasGemmEx, float32
 * accumulation: CUBLAS_COMPUTE_32F).
 *
 * Float32 weights: a plain float32 GEMM (no TF32), so the engine matches the
 * CPU to rounding. F16 / BF16 weights: the float32 activations are rounded
 * to the weight's dtype into the backend scratch, the GEMM reads both in
 * half precision on the tensor cores and writes float32 (the usual mixed
 * precision of fp16 inference: transformers in fp16 rounds them too).
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

/* dst (n, in) contiguous = half(src (n, in) of row stride ld). */
template <typename H>
static __global__ void k_to_half(H *__restrict__ dst, const float *__restrict__ src,
                                 int64_t n, int64_t in, int64_t ld)
{
    const int64_t total = n * in;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / in, col = i % in;
        store_half(dst + i, src[r * ld + col]);
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

static void launch_to_half(gpu_ctx *c, void *dst, td_dtype dt, const float *x, int64_t n,
                           int64_t in, int64_t ld_x)
{
    const unsigned blocks = gpu_blocks(n * in, 256);
    if (dt == TD_F16)
        k_to_half<__half><<<blocks, 256, 0, c->stream>>>((__half *)dst, x, n, in, ld_x);
    else
        k_to_half<__nv_bfloat16><<<blocks, 256, 0, c->stream>>>((__nv_bfloat16 *)dst, x, n, in,
                                                                ld_x);
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
    const float one = 1.0f, zero = 0.0f;
    const void *B = x;
    cudaDataType_t t = CUDA_R_32F;
    int ldb = (int)ld_x;
    if (w->dtype == TD_F16 || w->dtype == TD_BF16) {
        void *xh = gpu_scratch(c, (size_t)n * (size_t)in * 2);
        if (!xh)
            return;
        launch_to_half(c, xh, w->dtype, x, n, in, ld_x);
        if (c->failed)
            return;
        B = xh;
        ldb = (int)in;
        t = w->dtype == TD_F16 ? CUDA_R_16F : CUDA_R_16BF;
    } else if (w->dtype != TD_F32) {
        gpu_fail(c, "cuda: linear: weight dtype %d unknown", (int)w->dtype);
        return;
    }
    CUBLAS_CHECK(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n, (int)in, &one,
                              w->data, t, (int)in, B, t, ldb, &zero, y, CUDA_R_32F, (int)ld_y,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (b)
        launch_add_bias(c, y, ld_y, n, out, b, 0);
}
