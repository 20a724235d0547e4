/*
 * cpu_bf16.c - bfloat16 weights (--dtype bfloat16 on a CPU with AVX512-BF16
 * or AMX-BF16):
 * y = x W^T + b with W rounded to bfloat16 once at load and x rounded to
 * bfloat16 per row on each call, the products summed in float32.
 *
 * Rounding (both sides): round to nearest, ties to even, on the float32
 * bits (NaN stays a quiet NaN); no flush of subnormals. The same function
 * in plain C and AVX-512, so the bytes are the same whichever runs.
 *
 * Layout (one allocation): panels of 32 features; in panel p, for each
 * pair g of input features, feature j's 2 values are the uint16s
 * [((p*K2 + g)*32 + j)*2, +2) (K2 = ceil(k/2), zero past k and past n_out):
 * the 64 bytes of 16 features at one pair are a row of an AMX B tile, the
 * next pair 128 bytes on, as in the int8 layout (cpu_int8.c) with pairs
 * for groups of four.
 *
 * Kernels: AMX (tdpbf16ps, tiles of 16 rows x 16 features, when k is a
 * multiple of 32), AVX512-BF16 (vdpbf16ps: one pair of inputs of a row
 * broadcast against the 16 features of a zmm, any k) and a plain-C one
 * (float32 sums of the exact products, pair by pair). The tile unit's and
 * vdpbf16ps' order and rounding of their float32 sums are their own (and
 * both treat subnormal inputs as zero), so the three agree within float32
 * rounding of the sums, not bit for bit (the tests hold each to a bound
 * against a float64 sum of the same bfloat16 values).
 */
#include "cpu_kernels.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define B_X86 1
#include "cpu_amx.h"
#endif

#define B_NR 32

static int64_t b_panels(int64_t rows) { return (rows + B_NR - 1) / B_NR; }

int64_t td_cpu_b16_k2(int64_t cols) { return (cols + 1) / 2; }

size_t td_cpu_b16_bytes(int64_t rows, int64_t cols)
{
    return (size_t)b_panels(rows) * (size_t)td_cpu_b16_k2(cols) * 128;
}

uint16_t td_cpu_bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float td_cpu_bf16_float(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void td_cpu_b16_pack(void *dst, const float *W, int64_t rows, int64_t cols, float scale)
{
    const int64_t K2 = td_cpu_b16_k2(cols);
    uint16_t *q = dst;
    memset(dst, 0, td_cpu_b16_bytes(rows, cols));
    for (int64_t r = 0; r < rows; r++) {
        const int64_t p = r / B_NR, j = r % B_NR;
        for (int64_t c = 0; c < cols; c++)
            q[((p * K2 + c / 2) * B_NR + j) * 2 + c % 2] = td_cpu_bf16_round(W[r * cols + c] * scale);
    }
}

void td_cpu_b16_row(float *dst, const void *P, int64_t rows, int64_t cols, int64_t r,
                    float scale)
{
    (void)rows;
    const int64_t K2 = td_cpu_b16_k2(cols), p = r / B_NR, j = r % B_NR;
    const uint16_t *q = P;
    for (int64_t c = 0; c < cols; c++)
        dst[c] = td_cpu_bf16_float(q[((p * K2 + c / 2) * B_NR + j) * 2 + c % 2]) * scale;
}

/* --- activations --------------------------------------------------------- */

#ifdef B_X86
#define B_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))

/* td_cpu_bf16_round on 16 floats at a time. */
B_AVX512 static void b_round_row_avx512(uint16_t *a, const float *x, int64_t k)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000),
                  bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1),
                  quiet = _mm512_set1_epi32(0x40);
    for (int64_t c = 0; c < k; c += 16) {
        const __mmask16 m = k - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - c)) - 1);
        const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + c));
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, absm), inf);
        __m512i r = _mm512_add_epi32(
            u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
        r = _mm512_srli_epi32(r, 16);
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), quiet);
        _mm256_mask_storeu_epi16(a + c, m, _mm512_cvtepi32_epi16(r));
    }
}
#endif

void td_cpu_b16_round_rows(uint16_t *a, const float *x, int64_t ld_x, int64_t m, int64_t k)
{
    const int64_t K2 = td_cpu_b16_k2(k);
    for (int64_t i = 0; i < m; i++) {
        uint16_t *ai = a + i * 2 * K2;
        const float *xi = x + i * ld_x;
#ifdef B_X86
        if (td_cpu_isa_get() >= TD_CPU_ISA_AVX512)
            b_round_row_avx512(ai, xi, k);
        else
#endif
            for (int64_t c = 0; c < k; c++)
                ai[c] = td_cpu_bf16_round(xi[c]);
        for (int64_t c = k; c < 2 * K2; c++)
            ai[c] = 0;
    }
}

/* --- the product ---------------------------------------------------------- */

#ifdef B_X86
/* The store masks of a panel's two halves of 16 features (features j0 ..
 * j0+31, clipped to n_out) and its bias (zero without one), shared by the
 * AMX and AVX512-BF16 kernels. */
B_AVX512 static inline void b_panel_out(int64_t n_out, int64_t j0, const float *bias,
                                        __mmask16 *m0, __mmask16 *m1, __m512 *b0, __m512 *b1)
{
    const int nj = n_out - j0 < B_NR ? (int)(n_out - j0) : B_NR;
    *m0 = nj >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nj) - 1);
    *m1 = nj >= 32 ? (__mmask16)0xFFFF : nj > 16 ? (__mmask16)((1u << (nj - 16)) - 1) : 0;
    *b0 = bias ? _mm512_maskz_loadu_ps(*m0, bias + j0) : _mm512_setzero_ps();
    *b1 = bias ? _mm512_maskz_loadu_ps(*m1, bias + j0 + 16) : _mm512_setzero_ps();
}
#endif

static void b_gemm_c(float *y, int64_t ld_y, const uint16_t *a, int64_t m, const void *P,
                     int64_t n_out, int64_t k, const float *bias, int64_t p0, int64_t p1)
{
    const int64_t K2 = td_cpu_b16_k2(k);
    const uint16_t *q = P;
    for (int64_t p = p0; p < p1; p++)
        for (int64_t i = 0; i < m; i++) {
            const uint16_t *ai = a + i * 2 * K2;
            for (int j = 0; j < B_NR && p * B_NR + j < n_out; j++) {
                const int64_t o = p * B_NR + j;
                float acc = 0.0f;
                for (int64_t g = 0; g < K2; g++) {
                    const uint16_t *w = q + ((p * K2 + g) * B_NR + j) * 2;
                    acc += td_cpu_bf16_float(ai[2 * g]) * td_cpu_bf16_float(w[0]) +
                           td_cpu_bf16_float(ai[2 * g + 1]) * td_cpu_bf16_float(w[1]);
                }
                y[i * ld_y + o] = bias ? acc + bias[o] : acc;
            }
        }
}

#ifdef B_X86
/* AMX: as cpu_int8.c's q_gemm_amx, with tdpbf16ps: blocks of up to 32 rows
 * x one panel (cpu_amx.h) of float32 sums, over K2 / 16 steps of 32 inputs
 * (16 pairs); only for k a multiple of 32. */
#define B_AMX                                                                                   \
    __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define B_AMX_MR 32

B_AMX static void b_gemm_amx(float *y, int64_t ld_y, const uint16_t *a, int64_t m,
                             const void *P, int64_t n_out, int64_t k, const float *bias,
                             int64_t p0, int64_t p1)
{
    const int64_t K2 = td_cpu_b16_k2(k), lda = 4 * K2; /* bytes of a row */
    const unsigned char *q = P;
    const unsigned char *A0 = (const unsigned char *)a;
    float acc[B_AMX_MR][B_NR];
    int cfg = 0;
    for (int64_t i0 = 0; i0 < m; i0 += B_AMX_MR) {
        const int r = m - i0 < B_AMX_MR ? (int)(m - i0) : B_AMX_MR;
        if (r != cfg) {
            td_amx_config(r);
            cfg = r;
        }
        const unsigned char *A = A0 + i0 * lda;
        for (int64_t p = p0; p < p1; p++) {
            const unsigned char *B = q + p * K2 * 128;
            TD_AMX_BLOCK(_tile_dpbf16ps, r, A, lda, B, K2 / 16, acc);
            const int64_t j0 = p * B_NR;
            __mmask16 m0, m1;
            __m512 b0, b1;
            b_panel_out(n_out, j0, bias, &m0, &m1, &b0, &b1);
            float *C = y + i0 * ld_y + j0;
            for (int i = 0; i < r; i++) {
                _mm512_mask_storeu_ps(C + i * ld_y, m0,
                                      _mm512_add_ps(_mm512_loadu_ps(&acc[i][0]), b0));
                _mm512_mask_storeu_ps(C + i * ld_y + 16, m1,
                                      _mm512_add_ps(_mm512_loadu_ps(&acc[i][16]), b1));
            }
        }
    }
    _tile_release();
}
#endif

#ifdef B_X86
/* AVX512-BF16: blocks of up to B_DP_MR rows x one panel, 2 x R float32
 * accumulators in registers; for each pair g the panel's 128 bytes (16
 * features a zmm) against each row's pair broadcast. R is a constant in
 * each call of the always-inlined block and its loops are unrolled, so
 * the accumulators stay in registers. */
#define B_DP __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define B_DP_MR 8

B_DP static inline __attribute__((always_inline)) void
b_dp_block(float *C, int64_t ld_y, const uint16_t *A, int64_t K2, const uint16_t *B, const int R,
           __mmask16 m0, __mmask16 m1, __m512 b0, __m512 b1)
{
    __m512 c0[B_DP_MR], c1[B_DP_MR];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
        c0[i] = c1[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < K2; g++) {
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512(B + g * 2 * B_NR);
        const __m512bh w1 = (__m512bh)_mm512_loadu_si512(B + g * 2 * B_NR + B_NR);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            uint32_t pair;
            memcpy(&pair, A + i * 2 * K2 + 2 * g, sizeof pair);
            const __m512bh x = (__m512bh)_mm512_set1_epi32((int)pair);
            c0[i] = _mm512_dpbf16_ps(c0[i], x, w0);
            c1[i] = _mm512_dpbf16_ps(c1[i], x, w1);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        _mm512_mask_storeu_ps(C + i * ld_y, m0, _mm512_add_ps(c0[i], b0));
        _mm512_mask_storeu_ps(C + i * ld_y + 16, m1, _mm512_add_ps(c1[i], b1));
    }
}

B_DP static void b_gemm_dp(float *y, int64_t ld_y, const uint16_t *a, int64_t m, const void *P,
                           int64_t n_out, int64_t k, const float *bias, int64_t p0, int64_t p1)
{
    const int64_t K2 = td_cpu_b16_k2(k);
    const uint16_t *q = P;
    for (int64_t p = p0; p < p1; p++) {
        const uint16_t *B = q + p * K2 * 2 * B_NR;
        const int64_t j0 = p * B_NR;
        __mmask16 m0, m1;
        __m512 b0, b1;
        b_panel_out(n_out, j0, bias, &m0, &m1, &b0, &b1);
        for (int64_t i0 = 0; i0 < m; i0 += B_DP_MR) {
            const uint16_t *A = a + i0 * 2 * K2;
            float *C = y + i0 * ld_y + j0;
            switch (m - i0 < B_DP_MR ? (int)(m - i0) : B_DP_MR) {
            case 1: b_dp_block(C, ld_y, A, K2, B, 1, m0, m1, b0, b1); break;
            case 2: b_dp_block(C, ld_y, A, K2, B, 2, m0, m1, b0, b1); break;
            case 3: b_dp_block(C, ld_y, A, K2, B, 3, m0, m1, b0, b1); break;
            case 4: b_dp_block(C, ld_y, A, K2, B, 4, m0, m1, b0, b1); break;
            case 5: b_dp_block(C, ld_y, A, K2, B, 5, m0, m1, b0, b1); break;
            case 6: b_dp_block(C, ld_y, A, K2, B, 6, m0, m1, b0, b1); break;
            case 7: b_dp_block(C, ld_y, A, K2, B, 7, m0, m1, b0, b1); break;
            default: b_dp_block(C, ld_y, A, K2, B, B_DP_MR, m0, m1, b0, b1); break;
            }
        }
    }
}
#endif

void td_cpu_gemm_b16(float *y, int64_t ld_y, const uint16_t *a, int64_t m, const void *P,
                     int64_t n_out, int64_t k, const float *bias, int64_t p0, int64_t p1)
{
#ifdef B_X86
    if (td_cpu_has_amx_bf16() && k % 32 == 0 && p1 > p0) {
        b_gemm_amx(y, ld_y, a, m, P, n_out, k, bias, p0, p1);
        return;
    }
    if (td_cpu_has_avx512_bf16()) {
        b_gemm_dp(y, ld_y, a, m, P, n_out, k, bias, p0, p1);
        return;
    }
#endif
    b_gemm_c(y, ld_y, a, m, P, n_out, k, bias, p0, p1);
}
