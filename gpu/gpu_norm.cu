/*
 * gpu_norm.cu - LayerNorm fused with the residual add (and the optional
 * store of the pre-norm sum), statistics in float32 in two passes (mean,
 * then the biased variance of the centred values, as torch.nn.LayerNorm).
 *
 * Rows of up to 1024 values (every Marian model: d_model 512 or 1024): one
 * warp per row, the row read once into registers (VPL values per lane),
 * both sums by warp shuffles, no shared memory and no block barrier; 8
 * rows per block. Longer rows: one block per row, the row re-read from
 * global memory on each pass.
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

#define LN_WARP_ROWS 8 /* rows (warps) per block of the warp kernel */

template <int VPL>
static __global__ void __launch_bounds__(LN_WARP_ROWS * 32)
k_layer_norm_warp(float *y, const float *x, const float *res, float *sum_out, int64_t n, int d,
                  const void *__restrict__ g, td_dtype gdt, const void *__restrict__ b,
                  td_dtype bdt, float eps)
{
    const int lane = threadIdx.x & 31;
    const int64_t step = (int64_t)gridDim.x * LN_WARP_ROWS;
    for (int64_t r = (int64_t)blockIdx.x * LN_WARP_ROWS + (threadIdx.x >> 5); r < n; r += step) {
        const float *xr = x + r * d;
        const float *rr = res ? res + r * d : NULL;
        float *yr = y + r * d;
        float *sr = sum_out && sum_out != y ? sum_out + r * d : NULL;
        float v[VPL];
        float part = 0.0f;
#pragma unroll
        for (int u = 0; u < VPL; u++) {
            const int i = lane + 32 * u;
            v[u] = 0.0f;
            if (i < d) {
                v[u] = rr ? xr[i] + rr[i] : xr[i];
                part += v[u];
            }
        }
        for (int o = 16; o > 0; o >>= 1)
            part += __shfl_xor_sync(0xffffffffu, part, o);
        const float mean = part / (float)d;
        part = 0.0f;
#pragma unroll
        for (int u = 0; u < VPL; u++)
            if (lane + 32 * u < d) {
                const float t = v[u] - mean;
                part += t * t;
            }
        for (int o = 16; o > 0; o >>= 1)
            part += __shfl_xor_sync(0xffffffffu, part, o);
        const float rstd = 1.0f / sqrtf(part / (float)d + eps);
#pragma unroll
        for (int u = 0; u < VPL; u++) {
            const int i = lane + 32 * u;
            if (i < d) {
                if (sr)
                    sr[i] = v[u];
                yr[i] = (v[u] - mean) * rstd * gpu_wload(g, gdt, i) + gpu_wload(b, bdt, i);
            }
        }
    }
}

template <int VPL>
static void launch_ln_warp(gpu_ctx *c, float *y, const float *x, const float *res,
                           float *sum_out, int64_t n, int64_t d, const td_weight *gamma,
                           const td_weight *beta, float eps)
{
    const int64_t b = (n + LN_WARP_ROWS - 1) / LN_WARP_ROWS;
    const unsigned blocks = (unsigned)(b < 65535 * 16 ? b : 65535 * 16);
    k_layer_norm_warp<VPL><<<blocks, LN_WARP_ROWS * 32, 0, c->stream>>>(
        y, x, res, sum_out, n, (int)d, gamma->data, gamma->dtype, beta->data, beta->dtype, eps);
    CUDA_CHECK_LAUNCH();
}

static void launch_layer_norm(gpu_ctx *c, float *y, const float *x, const float *res,
                              float *sum_out, int64_t n, int64_t d, const td_weight *gamma,
                              const td_weight *beta, float eps)
{
    if (d <= 1024) {
        if (d <= 32)
            launch_ln_warp<1>(c, y, x, res, sum_out, n, d, gamma, beta, eps);
        else if (d <= 64)
            launch_ln_warp<2>(c, y, x, res, sum_out, n, d, gamma, beta, eps);
        else if (d <= 128)
            launch_ln_warp<4>(c, y, x, res, sum_out, n, d, gamma, beta, eps);
        else if (d <= 256)
            launch_ln_warp<8>(c, y, x, res, sum_out, n, d, gamma, beta, eps);
        else if (d <= 512)
            launch_ln_warp<16>(c, y, x, res, sum_out, n, d, gamma, beta, eps);
        else
            launch_ln_warp<32>(c, y, x, res, sum_out, n, d, gamma, beta, eps);
        return;
    }
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
