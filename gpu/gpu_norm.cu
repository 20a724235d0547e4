/*
 * gpu_norm.cu - LayerNorm fused with the residual add (and the optional
 * store of the pre-norm sum): one block per row, two passes over the row
 * (mean, then the biased variance of the centred values, as
 * torch.nn.LayerNorm), statistics in float32.
 *
 * Aliasing (y may be x or res, sum_out may be any of them): every pass
 * walks the row with the same thread-to-column mapping, so a column is only
 * ever read and written by one thread, reads before writes.
 */
#include "gpu_internal.cuh"

#define LN_THREADS 256

static __global__ void k_layer_norm(float *y, const float *x, const float *res, float *sum_out,
                                    int64_t n, int64_t d, const void *__restrict__ g,
                                    td_dtype gdt, const void *__restrict__ b, td_dtype bdt,
                                    float eps)
{
    __shared__ float red[32];
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const float *xr = x + r * d;
        const float *rr = res ? res + r * d : NULL;
        float *yr = y + r * d;
        float *sr = sum_out && sum_out != y ? sum_out + r * d : NULL;
        float part = 0.0f;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            const float s = rr ? xr[i] + rr[i] : xr[i];
            yr[i] = s;
            if (sr)
                sr[i] = s;
            part += s;
        }
        const float mean = gpu_block_sum(part, red) / (float)d;
        part = 0.0f;
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
            const float t = yr[i] - mean;
            part += t * t;
        }
        const float var = gpu_block_sum(part, red) / (float)d;
        const float rstd = 1.0f / sqrtf(var + eps);
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
            yr[i] = (yr[i] - mean) * rstd * gpu_wload(g, gdt, i) + gpu_wload(b, bdt, i);
    }
}

static void launch_layer_norm(gpu_ctx *c, float *y, const float *x, const float *res,
                              float *sum_out, int64_t n, int64_t d, const td_weight *gamma,
                              const td_weight *beta, float eps)
{
    int threads = LN_THREADS;
    while (threads > 32 && threads / 2 >= d)
        threads /= 2;
    const unsigned blocks = (unsigned)(n < 65535 * 16 ? n : 65535 * 16);
    k_layer_norm<<<blocks, threads, 0, c->stream>>>(y, x, res, sum_out, n, d, gamma->data,
                                                    gamma->dtype, beta->data, beta->dtype, eps);
    CUDA_CHECK_LAUNCH();
}

extern "C" void gpu_op_layer_norm(gpu_ctx *c, float *y, const float *x, const float *res,
                                  float *sum_out, int64_t n, int64_t d, const td_weight *gamma,
                                  const td_weight *beta, float eps)
{
    if (n <= 0 || d <= 0)
        return;
    if (!gamma->data || !beta->data || gamma->rows * gamma->cols < d ||
        beta->rows * beta->cols < d) {
        gpu_fail(c, "cuda: layer_norm: gamma/beta of %lld/%lld values for d %lld",
                 (long long)(gamma->rows * gamma->cols), (long long)(beta->rows * beta->cols),
                 (long long)d);
        return;
    }
    launch_layer_norm(c, y, x, res, sum_out, n, d, gamma, beta, eps);
}
