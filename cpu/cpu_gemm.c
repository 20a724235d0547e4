/*
 * cpu_gemm.c - y = x W^T + b with W packed once at load (cpu_kernels.h).
 *
 * Layout: W (n_out, k) is cut into panels of GEMM_NR = 32 output features;
 * panel p holds, for every input feature kk, its 32 weights contiguously:
 * P[(p*k + kk)*32 + j] = W[p*32 + j][kk], zero past n_out. A decoding step
 * (few rows) then streams each weight once, in the order the kernel reads
 * it, with nothing repacked per call (OpenBLAS's sgemm copies B into its
 * own layout on every call: 13% of a beam-4 step).
 *
 * Kernel (AVX-512): GEMM_MR = 12 rows x 32 columns of accumulators (24 zmm)
 * over blocks of GEMM_KC input features (a 32 KB slice of the panel stays
 * in L1 while every row block passes over it); the row-block size is a
 * compile-time constant per instantiation (switch below), so the
 * accumulators live in registers. One- and two-row products (greedy batch
 * 1) split the k loop over 4 accumulator sets, which hides the FMA latency.
 * Kernel (AVX2 + FMA): the same arithmetic on half panels, 6 rows x 16
 * columns of accumulators (12 ymm) and a one-row kernel with the same four
 * partial sums: every output is the same chain of FMAs as AVX-512's, so
 * both give the same bits (test_cpu_ops holds them to a plain-C fmaf
 * chain). The plain-C kernel over the same layout is the reference and
 * the path of a weight packed before the instruction set was lowered;
 * CPUs without AVX2 keep row-major weights and OpenBLAS (see
 * td_cpu_pack_wanted).
 */
#include "cpu_kernels.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define G_X86 1
#endif

#define GEMM_MR 12
#define GEMM_KC 256

int64_t td_cpu_packed_floats(int64_t rows, int64_t cols)
{
    return (rows + GEMM_NR - 1) / GEMM_NR * GEMM_NR * cols;
}

void td_cpu_pack(float *dst, const float *W, int64_t rows, int64_t cols, float scale)
{
    const int64_t panels = (rows + GEMM_NR - 1) / GEMM_NR;
    for (int64_t p = 0; p < panels; p++)
        for (int64_t kk = 0; kk < cols; kk++) {
            float *d = dst + (p * cols + kk) * GEMM_NR;
            for (int j = 0; j < GEMM_NR; j++) {
                const int64_t r = p * GEMM_NR + j;
                d[j] = r < rows ? (scale == 1.0f ? W[r * cols + kk] : W[r * cols + kk] * scale)
                                : 0.0f;
            }
        }
}

void td_cpu_packed_row(float *dst, const float *P, int64_t cols, int64_t r, float scale)
{
    const float *src = P + (r / GEMM_NR) * cols * GEMM_NR + r % GEMM_NR;
    for (int64_t kk = 0; kk < cols; kk++)
        dst[kk] = src[kk * GEMM_NR] * scale;
}

/* The plain-C kernel: panels [p0, p1), every row, float32 sums in k order. */
static void g_gemm_c(float *y, int64_t ld_y, const float *x, int64_t ld_x, int64_t m,
                     const float *P, int64_t n_out, int64_t k, const float *bias,
                     int64_t p0, int64_t p1)
{
    for (int64_t p = p0; p < p1; p++) {
        const float *B = P + p * k * GEMM_NR;
        const int64_t j0 = p * GEMM_NR;
        const int nj = n_out - j0 < GEMM_NR ? (int)(n_out - j0) : GEMM_NR;
        for (int64_t i = 0; i < m; i++) {
            float acc[GEMM_NR] = {0};
            const float *xi = x + i * ld_x;
            for (int64_t kk = 0; kk < k; kk++) {
                const float a = xi[kk];
                for (int j = 0; j < GEMM_NR; j++)
                    acc[j] += a * B[kk * GEMM_NR + j];
            }
            float *yi = y + i * ld_y + j0;
            for (int j = 0; j < nj; j++)
                yi[j] = bias ? acc[j] + bias[j0 + j] : acc[j];
        }
    }
}

#ifdef G_X86
#define G_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))

/* mr (compile-time in every call) rows x 32 columns over kc inputs; C is
 * read back unless first, the bias added when last. */
G_AVX512 static inline __attribute__((always_inline)) void
g_kern(const int mr, int64_t kc, const float *A, int64_t lda, const float *B, float *C,
       int64_t ldc, __mmask16 m0, __mmask16 m1, int first, const float *bias_last)
{
    __m512 c0[GEMM_MR], c1[GEMM_MR];
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++) {
        if (first) {
            c0[i] = _mm512_setzero_ps();
            c1[i] = _mm512_setzero_ps();
        } else {
            c0[i] = _mm512_maskz_loadu_ps(m0, C + i * ldc);
            c1[i] = _mm512_maskz_loadu_ps(m1, C + i * ldc + 16);
        }
    }
    for (int64_t kk = 0; kk < kc; kk++) {
        const __m512 b0 = _mm512_loadu_ps(B + kk * GEMM_NR);
        const __m512 b1 = _mm512_loadu_ps(B + kk * GEMM_NR + 16);
#pragma GCC unroll 12
        for (int i = 0; i < mr; i++) {
            const __m512 a = _mm512_set1_ps(A[i * lda + kk]);
            c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
        }
    }
    __m512 bb0 = _mm512_setzero_ps(), bb1 = _mm512_setzero_ps();
    if (bias_last) {
        bb0 = _mm512_maskz_loadu_ps(m0, bias_last);
        bb1 = _mm512_maskz_loadu_ps(m1, bias_last + 16);
    }
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++) {
        if (bias_last) {
            c0[i] = _mm512_add_ps(c0[i], bb0);
            c1[i] = _mm512_add_ps(c1[i], bb1);
        }
        _mm512_mask_storeu_ps(C + i * ldc, m0, c0[i]);
        _mm512_mask_storeu_ps(C + i * ldc + 16, m1, c1[i]);
    }
}

/* One row, all of k at once, four partial sums (the FMA latency). */
G_AVX512 static void g_row1(int64_t k, const float *A, const float *B, float *C,
                            __mmask16 m0, __mmask16 m1, const float *bias)
{
    __m512 s[8];
    for (int q = 0; q < 8; q++)
        s[q] = _mm512_setzero_ps();
    int64_t kk = 0;
    for (; kk + 4 <= k; kk += 4) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            const __m512 a = _mm512_set1_ps(A[kk + u]);
            s[2 * u] = _mm512_fmadd_ps(a, _mm512_loadu_ps(B + (kk + u) * GEMM_NR), s[2 * u]);
            s[2 * u + 1] = _mm512_fmadd_ps(a, _mm512_loadu_ps(B + (kk + u) * GEMM_NR + 16),
                                           s[2 * u + 1]);
        }
    }
    for (; kk < k; kk++) {
        const __m512 a = _mm512_set1_ps(A[kk]);
        s[0] = _mm512_fmadd_ps(a, _mm512_loadu_ps(B + kk * GEMM_NR), s[0]);
        s[1] = _mm512_fmadd_ps(a, _mm512_loadu_ps(B + kk * GEMM_NR + 16), s[1]);
    }
    __m512 r0 = _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[4], s[6]));
    __m512 r1 = _mm512_add_ps(_mm512_add_ps(s[1], s[3]), _mm512_add_ps(s[5], s[7]));
    if (bias) {
        r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, bias));
        r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, bias + 16));
    }
    _mm512_mask_storeu_ps(C, m0, r0);
    _mm512_mask_storeu_ps(C + 16, m1, r1);
}

#define G_CASE(R)                                                                       \
    case R:                                                                             \
        g_kern(R, kc, A, ld_x, B, C, ld_y, m0, m1, first, bl);                          \
        break;

G_AVX512 static void g_gemm_avx512(float *y, int64_t ld_y, const float *x, int64_t ld_x,
                                   int64_t m, const float *P, int64_t n_out, int64_t k,
                                   const float *bias, int64_t p0, int64_t p1)
{
    for (int64_t p = p0; p < p1; p++) {
        const float *Bp = P + p * k * GEMM_NR;
        const int64_t j0 = p * GEMM_NR;
        const int nj = n_out - j0 < GEMM_NR ? (int)(n_out - j0) : GEMM_NR;
        const __mmask16 m0 = nj >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nj) - 1);
        const __mmask16 m1 = nj >= 32 ? (__mmask16)0xFFFF
                                       : nj > 16 ? (__mmask16)((1u << (nj - 16)) - 1) : 0;
        const float *bp = bias ? bias + j0 : NULL;
        if (m <= 2) {
            for (int64_t i = 0; i < m; i++)
                g_row1(k, x + i * ld_x, Bp, y + i * ld_y + j0, m0, m1, bp);
            continue;
        }
        for (int64_t k0 = 0; k0 < k; k0 += GEMM_KC) {
            const int64_t kc = k - k0 < GEMM_KC ? k - k0 : GEMM_KC;
            const int first = k0 == 0;
            const float *bl = k0 + kc == k ? bp : NULL;
            const float *B = Bp + k0 * GEMM_NR;
            for (int64_t i0 = 0; i0 < m; i0 += GEMM_MR) {
                const int mr = m - i0 < GEMM_MR ? (int)(m - i0) : GEMM_MR;
                const float *A = x + i0 * ld_x + k0;
                float *C = y + i0 * ld_y + j0;
                switch (mr) {
                    G_CASE(1)
                    G_CASE(2)
                    G_CASE(3)
                    G_CASE(4)
                    G_CASE(5)
                    G_CASE(6)
                    G_CASE(7)
                    G_CASE(8)
                    G_CASE(9)
                    G_CASE(10)
                    G_CASE(11)
                    G_CASE(12)
                default:
                    break;
                }
            }
        }
    }
}

#define G_AVX2 __attribute__((target("avx2,fma")))
#define G_MR2 6 /* AVX2: 6 rows x 16 columns of accumulators (12 ymm) */

/* Lane mask of the first n of 8 floats (none for n <= 0, all for n >= 8),
 * for maskload/maskstore. */
G_AVX2 static inline __m256i g_mask8(int n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

/* The AVX2 twin of g_kern on one half (16 columns) of a panel: mr rows
 * over kc inputs, C read back unless first, the bias added when last.
 * Every output is the same chain of FMAs in k order as g_kern's, so the
 * two give the same bits. nj: columns of this half inside n_out (1..16). */
G_AVX2 static inline __attribute__((always_inline)) void
g_kern2(const int mr, int64_t kc, const float *A, int64_t lda, const float *B, float *C,
        int64_t ldc, int nj, int first, const float *bias_last)
{
    __m256 c0[G_MR2], c1[G_MR2];
    const int full = nj >= 16;
    const __m256i k0 = g_mask8(nj), k1 = g_mask8(nj - 8);
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
        if (first) {
            c0[i] = _mm256_setzero_ps();
            c1[i] = _mm256_setzero_ps();
        } else if (full) {
            c0[i] = _mm256_loadu_ps(C + i * ldc);
            c1[i] = _mm256_loadu_ps(C + i * ldc + 8);
        } else {
            c0[i] = _mm256_maskload_ps(C + i * ldc, k0);
            c1[i] = _mm256_maskload_ps(C + i * ldc + 8, k1);
        }
    }
    for (int64_t kk = 0; kk < kc; kk++) {
        const __m256 b0 = _mm256_loadu_ps(B + kk * GEMM_NR);
        const __m256 b1 = _mm256_loadu_ps(B + kk * GEMM_NR + 8);
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            const __m256 a = _mm256_broadcast_ss(A + i * lda + kk);
            c0[i] = _mm256_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm256_fmadd_ps(a, b1, c1[i]);
        }
    }
    __m256 bb0 = _mm256_setzero_ps(), bb1 = _mm256_setzero_ps();
    if (bias_last) {
        bb0 = _mm256_maskload_ps(bias_last, k0);
        bb1 = _mm256_maskload_ps(bias_last + 8, k1);
    }
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
        if (bias_last) {
            c0[i] = _mm256_add_ps(c0[i], bb0);
            c1[i] = _mm256_add_ps(c1[i], bb1);
        }
        if (full) {
            _mm256_storeu_ps(C + i * ldc, c0[i]);
            _mm256_storeu_ps(C + i * ldc + 8, c1[i]);
        } else {
            _mm256_maskstore_ps(C + i * ldc, k0, c0[i]);
            _mm256_maskstore_ps(C + i * ldc + 8, k1, c1[i]);
        }
    }
}

/* The AVX2 twin of g_row1 on one half of a panel: one row, the same four
 * partial sums (k mod 4 in the main loop, the tail into the first), added
 * in the same order. */
G_AVX2 static void g_row1_2(int64_t k, const float *A, const float *B, float *C, int nj,
                            const float *bias)
{
    __m256 s[8];
    for (int q = 0; q < 8; q++)
        s[q] = _mm256_setzero_ps();
    int64_t kk = 0;
    for (; kk + 4 <= k; kk += 4) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            const __m256 a = _mm256_broadcast_ss(A + kk + u);
            s[2 * u] = _mm256_fmadd_ps(a, _mm256_loadu_ps(B + (kk + u) * GEMM_NR), s[2 * u]);
            s[2 * u + 1] =
                _mm256_fmadd_ps(a, _mm256_loadu_ps(B + (kk + u) * GEMM_NR + 8), s[2 * u + 1]);
        }
    }
    for (; kk < k; kk++) {
        const __m256 a = _mm256_broadcast_ss(A + kk);
        s[0] = _mm256_fmadd_ps(a, _mm256_loadu_ps(B + kk * GEMM_NR), s[0]);
        s[1] = _mm256_fmadd_ps(a, _mm256_loadu_ps(B + kk * GEMM_NR + 8), s[1]);
    }
    __m256 r0 = _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[4], s[6]));
    __m256 r1 = _mm256_add_ps(_mm256_add_ps(s[1], s[3]), _mm256_add_ps(s[5], s[7]));
    const __m256i k0 = g_mask8(nj), k1 = g_mask8(nj - 8);
    if (bias) {
        r0 = _mm256_add_ps(r0, _mm256_maskload_ps(bias, k0));
        r1 = _mm256_add_ps(r1, _mm256_maskload_ps(bias + 8, k1));
    }
    if (nj >= 16) {
        _mm256_storeu_ps(C, r0);
        _mm256_storeu_ps(C + 8, r1);
    } else {
        _mm256_maskstore_ps(C, k0, r0);
        _mm256_maskstore_ps(C + 8, k1, r1);
    }
}

#define G_CASE2(R)                                                                      \
    case R:                                                                             \
        g_kern2(R, kc, A, ld_x, B, C, ld_y, nh, first, bl);                             \
        break;

G_AVX2 static void g_gemm_avx2(float *y, int64_t ld_y, const float *x, int64_t ld_x,
                               int64_t m, const float *P, int64_t n_out, int64_t k,
                               const float *bias, int64_t p0, int64_t p1)
{
    for (int64_t p = p0; p < p1; p++) {
        const float *Bp = P + p * k * GEMM_NR;
        for (int h = 0; h < 2; h++) {
            const int64_t j0 = p * GEMM_NR + 16 * h;
            if (j0 >= n_out)
                break;
            const int nh = n_out - j0 < 16 ? (int)(n_out - j0) : 16;
            const float *bp = bias ? bias + j0 : NULL;
            const float *Bh = Bp + 16 * h;
            if (m <= 2) {
                for (int64_t i = 0; i < m; i++)
                    g_row1_2(k, x + i * ld_x, Bh, y + i * ld_y + j0, nh, bp);
                continue;
            }
            for (int64_t k0 = 0; k0 < k; k0 += GEMM_KC) {
                const int64_t kc = k - k0 < GEMM_KC ? k - k0 : GEMM_KC;
                const int first = k0 == 0;
                const float *bl = k0 + kc == k ? bp : NULL;
                const float *B = Bh + k0 * GEMM_NR;
                for (int64_t i0 = 0; i0 < m; i0 += G_MR2) {
                    const int mr = m - i0 < G_MR2 ? (int)(m - i0) : G_MR2;
                    const float *A = x + i0 * ld_x + k0;
                    float *C = y + i0 * ld_y + j0;
                    switch (mr) {
                        G_CASE2(1)
                        G_CASE2(2)
                        G_CASE2(3)
                        G_CASE2(4)
                        G_CASE2(5)
                        G_CASE2(6)
                    default:
                        break;
                    }
                }
            }
        }
    }
}
#endif /* G_X86 */

int td_cpu_pack_wanted(int64_t rows, int64_t cols)
{
    return td_cpu_isa_get() >= TD_CPU_ISA_AVX2 && rows >= GEMM_NR && cols >= 16;
}

void td_cpu_gemm_packed(float *y, int64_t ld_y, const float *x, int64_t ld_x, int64_t m,
                        const float *P, int64_t n_out, int64_t k, const float *bias,
                        int64_t p0, int64_t p1)
{
#ifdef G_X86
    if (td_cpu_isa_get() == TD_CPU_ISA_AVX512) {
        g_gemm_avx512(y, ld_y, x, ld_x, m, P, n_out, k, bias, p0, p1);
        return;
    }
    if (td_cpu_isa_get() == TD_CPU_ISA_AVX2) {
        g_gemm_avx2(y, ld_y, x, ld_x, m, P, n_out, k, bias, p0, p1);
        return;
    }
#endif
    g_gemm_c(y, ld_y, x, ld_x, m, P, n_out, k, bias, p0, p1);
}
