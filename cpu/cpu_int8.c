/*
 * cpu_int8.c - int8 weights (--dtype int8 on the CPU): y = x W^T + b with
 * W quantized once at load and x quantized per row on each call.
 *
 * Weights: per output feature j a symmetric scale ws_j = max_k |W_jk| / 127
 * and q_jk = round(W_jk / ws_j) in [-127, 127]. Activations: per row i
 * xs_i = max_k |x_ik| / 127 and u_ik = round(x_ik / xs_i) + 128 in [1, 255]
 * (unsigned, as vpdpbusd wants). Then
 *   y_ij = (sum_k u_ik q_jk - 128 sum_k q_jk) * (xs_i * ws_j) + b_j
 * with the sums in int32 (exact: |sum| < 255 * 127 * k) and the
 * compensation 128 sum_k q_jk kept per feature from the load.
 *
 * Layout (one allocation): panels of Q8_NR = 32 features; in panel p, for
 * each group g of 4 input features, feature j's 4 weights are bytes
 * [(p*K4 + g)*128 + 4j, +4) (K4 = ceil(k/4), zero past k and past n_out):
 * one 64-byte load feeds vpdpbusd for 16 features. Then the float scales
 * (panels*32) and the int32 compensations (panels*32).
 *
 * Kernels: AMX (tiles of 16 rows x 16 features, when k is a multiple of
 * 64), AVX-512 VNNI (12 rows x 32 features of int32 accumulators),
 * AVX2 (vpmaddubsw with the sign moved onto the weights, 4 rows x 16
 * features; see q_kern2), and a plain-C one; all compute the same integers
 * and the same float32 epilogue, so all give the same bits (the tests hold
 * them to it).
 */
#include "cpu_kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define Q_X86 1
#endif
#if defined(__x86_64__)
#include "cpu_amx.h"
#endif

#define Q8_NR 32
#define Q8_MR 12

static int64_t q_panels(int64_t rows) { return (rows + Q8_NR - 1) / Q8_NR; }

int64_t td_cpu_q8_k4(int64_t cols) { return (cols + 3) / 4; }

size_t td_cpu_q8_bytes(int64_t rows, int64_t cols)
{
    const size_t panels = (size_t)q_panels(rows);
    return panels * (size_t)td_cpu_q8_k4(cols) * 128 + panels * Q8_NR * 8;
}

static float *q_scales(const void *P, int64_t rows, int64_t cols)
{
    return (float *)((unsigned char *)P + (size_t)q_panels(rows) * (size_t)td_cpu_q8_k4(cols) * 128);
}

static int32_t *q_comp(const void *P, int64_t rows, int64_t cols)
{
    return (int32_t *)(q_scales(P, rows, cols) + q_panels(rows) * Q8_NR);
}

void td_cpu_q8_pack(void *dst, const float *W, int64_t rows, int64_t cols, float scale)
{
    const int64_t K4 = td_cpu_q8_k4(cols);
    int8_t *q = dst;
    float *ws = q_scales(dst, rows, cols);
    int32_t *comp = q_comp(dst, rows, cols);
    memset(dst, 0, td_cpu_q8_bytes(rows, cols));
    for (int64_t r = 0; r < rows; r++) {
        const float *wr = W + r * cols;
        float amax = 0.0f;
        for (int64_t c = 0; c < cols; c++) {
            const float v = fabsf(wr[c] * scale);
            amax = v > amax ? v : amax;
        }
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        const int64_t p = r / Q8_NR, j = r % Q8_NR;
        int32_t sum = 0;
        for (int64_t c = 0; c < cols; c++) {
            long v = lrintf(wr[c] * scale * inv);
            v = v > 127 ? 127 : v < -127 ? -127 : v;
            q[((p * K4 + c / 4) * Q8_NR + j) * 4 + c % 4] = (int8_t)v;
            sum += (int32_t)v;
        }
        ws[r] = amax / 127.0f;
        comp[r] = 128 * sum;
    }
}

void td_cpu_q8_row(float *dst, const void *P, int64_t rows, int64_t cols, int64_t r,
                   float scale)
{
    const int64_t K4 = td_cpu_q8_k4(cols), p = r / Q8_NR, j = r % Q8_NR;
    const int8_t *q = P;
    const float s = q_scales(P, rows, cols)[r];
    for (int64_t c = 0; c < cols; c++)
        dst[c] = (float)q[((p * K4 + c / 4) * Q8_NR + j) * 4 + c % 4] * s * scale;
}

/* --- activations --------------------------------------------------------- */

static void q_quant_row_c(uint8_t *u, float *xs, const float *x, int64_t k, int64_t K4)
{
    float amax = 0.0f;
    for (int64_t c = 0; c < k; c++) {
        const float v = fabsf(x[c]);
        amax = v > amax ? v : amax;
    }
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t c = 0; c < k; c++) {
        long v = lrintf(x[c] * inv);
        v = v > 127 ? 127 : v < -127 ? -127 : v;
        u[c] = (uint8_t)(v + 128);
    }
    for (int64_t c = k; c < 4 * K4; c++)
        u[c] = 128;
    *xs = amax / 127.0f;
}

#ifdef Q_X86
#define Q_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define Q_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")))

Q_AVX512 static void q_quant_row_avx512(uint8_t *u, float *xs, const float *x, int64_t k,
                                        int64_t K4)
{
    __m512 vm = _mm512_setzero_ps();
    for (int64_t c = 0; c < k; c += 16) {
        const __mmask16 m = k - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - c)) - 1);
        vm = _mm512_max_ps(vm, _mm512_abs_ps(_mm512_maskz_loadu_ps(m, x + c)));
    }
    const float amax = _mm512_reduce_max_ps(vm);
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127),
                  off = _mm512_set1_epi32(128);
    for (int64_t c = 0; c < k; c += 16) {
        const __mmask16 m = k - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - c)) - 1);
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + c), vinv));
        v = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(v, lo), hi), off);
        _mm_mask_storeu_epi8(u + c, m, _mm512_cvtepi32_epi8(v));
    }
    for (int64_t c = k; c < 4 * K4; c++)
        u[c] = 128;
    *xs = amax / 127.0f;
}

#define Q_AVX2 __attribute__((target("avx2,fma")))

/* max |x| over k floats, AVX2 (max is exact: any order gives the same). */
Q_AVX2 static void q_quant_row_avx2(uint8_t *u, float *xs, const float *x, int64_t k,
                                    int64_t K4)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vm = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 <= k; c += 8)
        vm = _mm256_max_ps(vm, _mm256_and_ps(_mm256_loadu_ps(x + c), absm));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(vm), _mm256_extractf128_ps(vm, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float amax = _mm_cvtss_f32(h);
    for (; c < k; c++) {
        const float v = fabsf(x[c]);
        amax = v > amax ? v : amax;
    }
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127),
                  off = _mm256_set1_epi32(128);
    c = 0;
    for (; c + 8 <= k; c += 8) {
        __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + c), vinv));
        v = _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(v, lo), hi), off);
        /* 8 int32 in 1..255 to 8 bytes */
        const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        _mm_storel_epi64((__m128i *)(void *)(u + c), _mm_packus_epi16(w, w));
    }
    for (; c < k; c++) {
        long v = lrintf(x[c] * inv);
        v = v > 127 ? 127 : v < -127 ? -127 : v;
        u[c] = (uint8_t)(v + 128);
    }
    for (c = k; c < 4 * K4; c++)
        u[c] = 128;
    *xs = amax / 127.0f;
}
#endif

void td_cpu_q8_quant_rows(uint8_t *u, float *xs, const float *x, int64_t ld_x, int64_t m,
                          int64_t k)
{
    const int64_t K4 = td_cpu_q8_k4(k);
#ifdef Q_X86
    if (td_cpu_isa_get() >= TD_CPU_ISA_AVX512) {
        for (int64_t i = 0; i < m; i++)
            q_quant_row_avx512(u + i * 4 * K4, xs + i, x + i * ld_x, k, K4);
        return;
    }
    if (td_cpu_isa_get() == TD_CPU_ISA_AVX2) {
        for (int64_t i = 0; i < m; i++)
            q_quant_row_avx2(u + i * 4 * K4, xs + i, x + i * ld_x, k, K4);
        return;
    }
#endif
    for (int64_t i = 0; i < m; i++)
        q_quant_row_c(u + i * 4 * K4, xs + i, x + i * ld_x, k, K4);
}

/* --- the product ---------------------------------------------------------- */

static void q_gemm_c(float *y, int64_t ld_y, const uint8_t *u, const float *xs, int64_t m,
                     const void *P, int64_t n_out, int64_t k, const float *bias, int64_t p0,
                     int64_t p1)
{
    const int64_t K4 = td_cpu_q8_k4(k);
    const int8_t *q = P;
    const float *ws = q_scales(P, n_out, k);
    const int32_t *comp = q_comp(P, n_out, k);
    for (int64_t p = p0; p < p1; p++)
        for (int64_t i = 0; i < m; i++) {
            const uint8_t *ui = u + i * 4 * K4;
            for (int j = 0; j < Q8_NR && p * Q8_NR + j < n_out; j++) {
                const int64_t o = p * Q8_NR + j;
                int32_t acc = 0;
                for (int64_t g = 0; g < K4; g++)
                    for (int b = 0; b < 4; b++)
                        acc += (int32_t)ui[4 * g + b] *
                               (int32_t)q[((p * K4 + g) * Q8_NR + j) * 4 + b];
                const float v = (float)(acc - comp[o]) * (xs[i] * ws[o]);
                y[i * ld_y + o] = bias ? v + bias[o] : v;
            }
        }
}

#ifdef Q_X86
/* One panel's per-feature constants for the AVX-512 epilogue: the lane
 * masks of its features inside n_out, scales, compensations and bias
 * (zero where absent). */
typedef struct q_panel {
    __mmask16 m0, m1;
    __m512 ws0, ws1, b0, b1;
    __m512i cp0, cp1;
} q_panel;

Q_AVX512 static inline __attribute__((always_inline)) q_panel
q_panel_load(int64_t p, int64_t n_out, const float *ws, const int32_t *comp, const float *bias)
{
    q_panel t;
    const int64_t j0 = p * Q8_NR;
    const int nj = n_out - j0 < Q8_NR ? (int)(n_out - j0) : Q8_NR;
    t.m0 = nj >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nj) - 1);
    t.m1 = nj >= 32 ? (__mmask16)0xFFFF : nj > 16 ? (__mmask16)((1u << (nj - 16)) - 1) : 0;
    t.ws0 = _mm512_maskz_loadu_ps(t.m0, ws + j0);
    t.ws1 = _mm512_maskz_loadu_ps(t.m1, ws + j0 + 16);
    t.cp0 = _mm512_maskz_loadu_epi32(t.m0, comp + j0);
    t.cp1 = _mm512_maskz_loadu_epi32(t.m1, comp + j0 + 16);
    t.b0 = bias ? _mm512_maskz_loadu_ps(t.m0, bias + j0) : _mm512_setzero_ps();
    t.b1 = bias ? _mm512_maskz_loadu_ps(t.m1, bias + j0 + 16) : _mm512_setzero_ps();
    return t;
}

/* The float32 epilogue of one row of 32 sums (every AVX-512 kernel's, so
 * they give the same bits): (sum - comp) * (xs * ws) + b into C. */
Q_AVX512 static inline __attribute__((always_inline)) void
q_epilogue(float *C, float xs, __m512i c0, __m512i c1, const q_panel *t)
{
    const __m512 s = _mm512_set1_ps(xs);
    __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(c0, t->cp0)),
                              _mm512_mul_ps(s, t->ws0));
    __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(c1, t->cp1)),
                              _mm512_mul_ps(s, t->ws1));
    _mm512_mask_storeu_ps(C, t->m0, _mm512_add_ps(v0, t->b0));
    _mm512_mask_storeu_ps(C + 16, t->m1, _mm512_add_ps(v1, t->b1));
}

/* c + sum of 4 u8 x s8 products per int32 lane (vpdpbusd). GCC 12 gives
 * the intrinsic's tied accumulator a fresh register on every use inside
 * the unrolled loops below and copies it back (about 2.7 zmm moves per
 * vpdpbusd in the 12-row kernel, which halved its rate on Zen 4); the
 * same instruction in inline assembly with the accumulator as an in-out
 * operand stays in its register. The same integers either way. */
Q_VNNI static inline __attribute__((always_inline)) __m512i
q_dpbusd(__m512i c, __m512i a, __m512i w)
{
#if defined(__GNUC__) && !defined(__clang__)
    __asm__("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(a), "v"(w));
    return c;
#else
    return _mm512_dpbusd_epi32(c, a, w);
#endif
}

Q_VNNI static inline __attribute__((always_inline)) void
q_kern(const int mr, int64_t K4, const uint8_t *A, int64_t lda, const int8_t *B, float *C,
       int64_t ldc, const float *xs, const q_panel *t)
{
    __m512i c0[Q8_MR], c1[Q8_MR];
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++) {
        c0[i] = _mm512_setzero_si512();
        c1[i] = _mm512_setzero_si512();
    }
    for (int64_t g = 0; g < K4; g++) {
        const __m512i w0 = _mm512_loadu_si512((const void *)(B + g * 128));
        const __m512i w1 = _mm512_loadu_si512((const void *)(B + g * 128 + 64));
#pragma GCC unroll 12
        for (int i = 0; i < mr; i++) {
            int32_t a4;
            memcpy(&a4, A + i * lda + 4 * g, 4);
            const __m512i a = _mm512_set1_epi32(a4);
            c0[i] = q_dpbusd(c0[i], a, w0);
            c1[i] = q_dpbusd(c1[i], a, w1);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++)
        q_epilogue(C + i * ldc, xs[i], c0[i], c1[i], t);
}

#define Q_CASE(R)                                                                       \
    case R:                                                                             \
        q_kern(R, K4, A, 4 * K4, B, C, ld_y, xs + i0, &t);                               \
        break;

Q_VNNI static void q_gemm_vnni(float *y, int64_t ld_y, const uint8_t *u, const float *xs,
                               int64_t m, const void *P, int64_t n_out, int64_t k,
                               const float *bias, int64_t p0, int64_t p1)
{
    const int64_t K4 = td_cpu_q8_k4(k);
    const int8_t *q = P;
    const float *ws = q_scales(P, n_out, k);
    const int32_t *comp = q_comp(P, n_out, k);
    for (int64_t p = p0; p < p1; p++) {
        const int64_t j0 = p * Q8_NR;
        const q_panel t = q_panel_load(p, n_out, ws, comp, bias);
        const int8_t *B = q + p * K4 * 128;
        for (int64_t i0 = 0; i0 < m; i0 += Q8_MR) {
            const int mr = m - i0 < Q8_MR ? (int)(m - i0) : Q8_MR;
            const uint8_t *A = u + i0 * 4 * K4;
            float *C = y + i0 * ld_y + j0;
            switch (mr) {
                Q_CASE(1)
                Q_CASE(2)
                Q_CASE(3)
                Q_CASE(4)
                Q_CASE(5)
                Q_CASE(6)
                Q_CASE(7)
                Q_CASE(8)
                Q_CASE(9)
                Q_CASE(10)
                Q_CASE(11)
                Q_CASE(12)
            default:
                break;
            }
        }
    }
}

/* AMX (Sapphire Rapids and later): tdpbusd multiplies a tile of 16 rows x
 * 64 activation bytes by a tile of 16 groups x 16 features x 4 weight bytes
 * into 16 x 16 int32 sums, the integers vpdpbusd gives. The packed layout
 * is already the B tile's: in panel p, group g, the 64 bytes at
 * (p*K4 + g)*128 + 64h are features 16h..16h+15 of the group, and the next
 * group is 128 bytes on; the activations are the A tile's at a stride of
 * 4*K4 bytes. Blocks of up to 32 rows x one panel (cpu_amx.h), over
 * K4 / 16 steps of 64 inputs; only used
 * when k is a multiple of 64 (the tiles cannot read a partial group run),
 * so every model dimension of 64, 128, ... runs here and any other takes
 * the VNNI kernel. The sums go through memory to q_epilogue, the VNNI
 * kernel's float32 epilogue, so the bits equal its. */
#define Q_AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")))
#define Q_AMX_MR 32

Q_AMX static void q_gemm_amx(float *y, int64_t ld_y, const uint8_t *u, const float *xs,
                             int64_t m, const void *P, int64_t n_out, int64_t k,
                             const float *bias, int64_t p0, int64_t p1)
{
    const int64_t K4 = td_cpu_q8_k4(k), lda = 4 * K4;
    const int8_t *q = P;
    const float *ws = q_scales(P, n_out, k);
    const int32_t *comp = q_comp(P, n_out, k);
    int32_t acc[Q_AMX_MR][Q8_NR];
    int cfg = 0;
    for (int64_t i0 = 0; i0 < m; i0 += Q_AMX_MR) {
        const int r = m - i0 < Q_AMX_MR ? (int)(m - i0) : Q_AMX_MR;
        if (r != cfg) {
            td_amx_config(r);
            cfg = r;
        }
        const unsigned char *A = u + i0 * lda;
        for (int64_t p = p0; p < p1; p++) {
            const unsigned char *B = (const unsigned char *)(q + p * K4 * 128);
            TD_AMX_BLOCK(_tile_dpbusd, r, A, lda, B, K4 / 16, acc);
            const q_panel t = q_panel_load(p, n_out, ws, comp, bias);
            float *C = y + i0 * ld_y + p * Q8_NR;
            for (int i = 0; i < r; i++)
                q_epilogue(C + i * ld_y, xs[i0 + i],
                           _mm512_loadu_si512((const void *)&acc[i][0]),
                           _mm512_loadu_si512((const void *)&acc[i][16]), &t);
        }
    }
    _tile_release();
}

/* AVX2 (no VNNI): the same integers as vpdpbusd less the compensation,
 * i.e. sum_k v_ik q_jk with v = u - 128 in [-127, 127]. vpmaddubsw
 * multiplies unsigned by signed bytes and adds pairs with saturation to
 * int16; with |v| as the unsigned side and q carrying v's sign (vpsignb)
 * each pair is at most 2 * 127 * 127 = 32258, so nothing saturates, and
 * vpmaddwd by ones sums each feature's four products into int32. Exact,
 * so the float32 epilogue (the same expression as the others') gives the
 * same bits. |v| and v are made once per call for every row (q_prep2:
 * per group of 4 inputs an int32 of |v| then one of v), not once per
 * panel; 4 rows x 16 features of accumulators per pass over a half panel. */
#define Q_MR2 4

/* Lane mask of the first n of 8 floats (none for n <= 0, all for n >= 8). */
Q_AVX2 static inline __m256i q_mask8(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The m rows of u as q_kern2 reads them: row i at t + 2*K4*i, group g's
 * |v| bytes at [2g], its v bytes at [2g + 1]. */
Q_AVX2 static void q_prep2(int32_t *t, const uint8_t *u, int64_t m, int64_t K4)
{
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int64_t i = 0; i < m; i++) {
        const uint8_t *ur = u + i * 4 * K4;
        int32_t *tr = t + i * 2 * K4;
        int64_t g = 0;
        for (; g + 8 <= K4; g += 8) {
            const __m256i v =
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(ur + 4 * g)), flip);
            const __m256i a = _mm256_abs_epi8(v);
            const __m256i lo = _mm256_unpacklo_epi32(a, v), hi = _mm256_unpackhi_epi32(a, v);
            _mm256_storeu_si256((__m256i *)(void *)(tr + 2 * g), _mm256_permute2x128_si256(lo, hi, 0x20));
            _mm256_storeu_si256((__m256i *)(void *)(tr + 2 * g + 8),
                                _mm256_permute2x128_si256(lo, hi, 0x31));
        }
        for (; g < K4; g++) {
            uint8_t av[4];
            int8_t sv[4];
            for (int b = 0; b < 4; b++) {
                const int x = (int)ur[4 * g + b] - 128;
                sv[b] = (int8_t)x;
                av[b] = (uint8_t)(x < 0 ? -x : x);
            }
            memcpy(tr + 2 * g, av, 4);
            memcpy(tr + 2 * g + 1, sv, 4);
        }
    }
}

/* mr rows x 16 features (nj of them inside n_out; k0, k1 their lane
 * masks) over K4 groups of 4 inputs, then the float32 epilogue. */
Q_AVX2 static inline __attribute__((always_inline)) void
q_kern2(const int mr, int64_t K4, const int32_t *T, const int8_t *B, float *C, int64_t ldc,
        const float *xs, __m256 ws0, __m256 ws1, __m256 b0, __m256 b1, int nj, __m256i k0,
        __m256i k1)
{
    __m256i c0[Q_MR2], c1[Q_MR2];
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++) {
        c0[i] = _mm256_setzero_si256();
        c1[i] = _mm256_setzero_si256();
    }
    for (int64_t g = 0; g < K4; g++) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)(B + g * 128));
        const __m256i w1 = _mm256_loadu_si256((const __m256i *)(const void *)(B + g * 128 + 32));
#pragma GCC unroll 4
        for (int i = 0; i < mr; i++) {
            const __m256i av = _mm256_set1_epi32(T[i * 2 * K4 + 2 * g]);
            const __m256i v = _mm256_set1_epi32(T[i * 2 * K4 + 2 * g + 1]);
            const __m256i p0 = _mm256_maddubs_epi16(av, _mm256_sign_epi8(w0, v));
            const __m256i p1 = _mm256_maddubs_epi16(av, _mm256_sign_epi8(w1, v));
            c0[i] = _mm256_add_epi32(c0[i], _mm256_madd_epi16(p0, ones));
            c1[i] = _mm256_add_epi32(c1[i], _mm256_madd_epi16(p1, ones));
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < mr; i++) {
        const __m256 s = _mm256_set1_ps(xs[i]);
        __m256 v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(c0[i]), _mm256_mul_ps(s, ws0));
        __m256 v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(c1[i]), _mm256_mul_ps(s, ws1));
        v0 = _mm256_add_ps(v0, b0);
        v1 = _mm256_add_ps(v1, b1);
        if (nj >= 16) {
            _mm256_storeu_ps(C + i * ldc, v0);
            _mm256_storeu_ps(C + i * ldc + 8, v1);
        } else {
            _mm256_maskstore_ps(C + i * ldc, k0, v0);
            _mm256_maskstore_ps(C + i * ldc + 8, k1, v1);
        }
    }
}

#define Q_CASE2(R)                                                                          \
    case R:                                                                                 \
        q_kern2(R, K4, T + i0 * 2 * K4, B, C, ld_y, xs + i0, ws0, ws1, b0, b1, nh, k0, k1); \
        break;

/* The calling thread's buffer for q_prep2, freed when the thread ends. */
static pthread_key_t q_tls_key;
static pthread_once_t q_tls_once = PTHREAD_ONCE_INIT;
typedef struct q_tls {
    void *p;
    size_t cap;
} q_tls;

static void q_tls_free(void *arg)
{
    q_tls *t = arg;
    free(t->p);
    free(t);
}

static void q_tls_init(void) { (void)pthread_key_create(&q_tls_key, q_tls_free); }

/* bytes of the calling thread's buffer, or NULL when memory is short */
static void *q_tls_get(size_t bytes)
{
    (void)pthread_once(&q_tls_once, q_tls_init);
    q_tls *t = pthread_getspecific(q_tls_key);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t || pthread_setspecific(q_tls_key, t) != 0) {
            free(t);
            return NULL;
        }
    }
    if (bytes > t->cap) {
        free(t->p);
        t->cap = 0;
        t->p = aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!t->p)
            return NULL;
        t->cap = bytes;
    }
    return t->p;
}

Q_AVX2 static void q_gemm_avx2(float *y, int64_t ld_y, const uint8_t *u, const float *xs,
                               int64_t m, const void *P, int64_t n_out, int64_t k,
                               const float *bias, int64_t p0, int64_t p1)
{
    const int64_t K4 = td_cpu_q8_k4(k);
    int32_t *T = q_tls_get((size_t)m * 2 * (size_t)K4 * sizeof(int32_t));
    if (!T) { /* the same bits, slower */
        q_gemm_c(y, ld_y, u, xs, m, P, n_out, k, bias, p0, p1);
        return;
    }
    q_prep2(T, u, m, K4);
    const int8_t *q = P;
    const float *ws = q_scales(P, n_out, k);
    for (int64_t p = p0; p < p1; p++)
        for (int h = 0; h < 2; h++) {
            const int64_t j0 = p * Q8_NR + 16 * h;
            if (j0 >= n_out)
                break;
            const int nh = n_out - j0 < 16 ? (int)(n_out - j0) : 16;
            const __m256i k0 = q_mask8(nh), k1 = q_mask8(nh - 8);
            /* the scales live for every panel slot (zero past n_out) */
            const __m256 ws0 = _mm256_loadu_ps(ws + j0), ws1 = _mm256_loadu_ps(ws + j0 + 8);
            const __m256 b0 = bias ? _mm256_maskload_ps(bias + j0, k0) : _mm256_setzero_ps();
            const __m256 b1 = bias ? _mm256_maskload_ps(bias + j0 + 8, k1) : _mm256_setzero_ps();
            const int8_t *B = q + p * K4 * 128 + 64 * h;
            for (int64_t i0 = 0; i0 < m; i0 += Q_MR2) {
                const int mr = m - i0 < Q_MR2 ? (int)(m - i0) : Q_MR2;
                float *C = y + i0 * ld_y + j0;
                switch (mr) {
                    Q_CASE2(1)
                    Q_CASE2(2)
                    Q_CASE2(3)
                    Q_CASE2(4)
                default:
                    break;
                }
            }
        }
}
#endif

void td_cpu_gemm_q8(float *y, int64_t ld_y, const uint8_t *u, const float *xs, int64_t m,
                    const void *P, int64_t n_out, int64_t k, const float *bias, int64_t p0,
                    int64_t p1)
{
#ifdef Q_X86
    if (td_cpu_has_amx() && k % 64 == 0 && p1 > p0) {
        q_gemm_amx(y, ld_y, u, xs, m, P, n_out, k, bias, p0, p1);
        return;
    }
    if (td_cpu_has_vnni()) {
        q_gemm_vnni(y, ld_y, u, xs, m, P, n_out, k, bias, p0, p1);
        return;
    }
    if (td_cpu_isa_get() >= TD_CPU_ISA_AVX2) {
        q_gemm_avx2(y, ld_y, u, xs, m, P, n_out, k, bias, p0, p1);
        return;
    }
#endif
    q_gemm_c(y, ld_y, u, xs, m, P, n_out, k, bias, p0, p1);
}
