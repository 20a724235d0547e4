/*
 * cpu_vexp.h - the vectorised exp of the CPU kernels (the log-softmax of
 * cpu_logprobs.c, the SiLU of cpu_act.c), private to cpu/.
 *
 * exp(x) for x <= TD_VEXP_MAX: n = round(x log2 e), r = x - n ln2 (ln2 in
 * two parts), exp(r) by the Cephes expf polynomial, times 2^n built in the
 * exponent bits. x below ln(FLT_MIN) (-87.34, where 2^n would leave the
 * normal range) gives 0: its true value is below 1.2e-38. Above
 * TD_VEXP_MAX (88.0, where n reaches 127) the result is not defined; the
 * callers clamp. Within 2 ulp of expf over [-87.3, 88] (the tests measure
 * it). The AVX2 and AVX-512 versions do the same operations in the same
 * order, so they give the same bits.
 */
#ifndef TD_CPU_VEXP_H
#define TD_CPU_VEXP_H

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define TD_VEXP_MIN (-87.3365447504f)
#define TD_VEXP_MAX 88.0f
#define TD_VEXP_LOG2E 1.44269504088896341f
#define TD_VEXP_LN2_HI 0.693359375f
#define TD_VEXP_LN2_LO (-2.12194440e-4f)
#define TD_VEXP_P0 1.9875691500e-4f
#define TD_VEXP_P1 1.3981999507e-3f
#define TD_VEXP_P2 8.3334519073e-3f
#define TD_VEXP_P3 4.1665795894e-2f
#define TD_VEXP_P4 1.6666665459e-1f
#define TD_VEXP_P5 5.0000001201e-1f

#define TD_VEXP_AVX2 __attribute__((target("avx2,fma")))
#define TD_VEXP_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))

TD_VEXP_AVX2 static inline __m256 td_vexp8(__m256 x)
{
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(TD_VEXP_MIN), _CMP_LT_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(TD_VEXP_MIN));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(TD_VEXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(TD_VEXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(TD_VEXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(TD_VEXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TD_VEXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TD_VEXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TD_VEXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TD_VEXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TD_VEXP_P5));
    const __m256 r2 = _mm256_mul_ps(r, r);
    __m256 y = _mm256_fmadd_ps(p, r2, r);
    y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(under, y);
}

TD_VEXP_AVX512 static inline __m512 td_vexp16(__m512 x)
{
    const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(TD_VEXP_MIN), _CMP_LT_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(TD_VEXP_MIN));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(TD_VEXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(TD_VEXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(TD_VEXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(TD_VEXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TD_VEXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TD_VEXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TD_VEXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TD_VEXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TD_VEXP_P5));
    const __m512 r2 = _mm512_mul_ps(r, r);
    __m512 y = _mm512_fmadd_ps(p, r2, r);
    y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps((__mmask16)~under, y);
}

#endif /* x86 */

#endif /* TD_CPU_VEXP_H */
