/*
 * cpu_act.c - one row of bias_act (backend.h): x = act(x + bias).
 *
 * The plain-C row is td_act of backend/activation.h per element (libm
 * expf, erff, tanhf), the reference. With AVX2 (and on AVX-512 CPUs, which
 * have it) ReLU, SiLU and the bias alone run eight lanes at a time: the
 * bias addition, the comparison and the division are the IEEE operations
 * of the plain-C row, so ReLU and the bias give its bits exactly; SiLU's
 * v / (1 + exp(-v)) differs only through exp, the polynomial of
 * cpu_vexp.h (within 2 ulp of expf), clamped: for -v above 88 (v below
 * -88, where SiLU is below 1e-36 in magnitude) the vector row gives -0.
 * The GELUs keep the plain-C row (erff/tanhf; no model shipped here uses
 * them). A tail shorter than eight lanes goes through the same vector
 * code, so an element's value does not depend on its column.
 */
#include "cpu_kernels.h"
#include "cpu_vexp.h"

#include <math.h>

void td_cpu_bias_act_row_ref(float *x, const float *b, int64_t d, td_activation act)
{
    for (int64_t i = 0; i < d; i++)
        x[i] = td_act(b ? x[i] + b[i] : x[i], act);
}

#if defined(__x86_64__) || defined(__i386__)

TD_VEXP_AVX2 static inline __m256 act8(__m256 v, td_activation act)
{
    if (act == TD_ACT_RELU)
        return _mm256_max_ps(v, _mm256_setzero_ps()); /* NaN and -0 give +0 */
    if (act == TD_ACT_SILU) {
        const __m256 t = _mm256_xor_ps(v, _mm256_set1_ps(-0.0f));
        const __m256 over = _mm256_cmp_ps(t, _mm256_set1_ps(TD_VEXP_MAX), _CMP_GT_OQ);
        __m256 e = td_vexp8(_mm256_min_ps(t, _mm256_set1_ps(TD_VEXP_MAX)));
        e = _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY), over);
        return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    }
    return v;
}

TD_VEXP_AVX2 static void bias_act_row_avx2(float *x, const float *b, int64_t d,
                                           td_activation act)
{
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (b)
            v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(x + i, act8(v, act));
    }
    if (i < d) {
        float t[8] = {0}, tb[8] = {0};
        for (int j = 0; i + j < d; j++) {
            t[j] = x[i + j];
            tb[j] = b ? b[i + j] : 0.0f;
        }
        __m256 v = _mm256_loadu_ps(t);
        if (b)
            v = _mm256_add_ps(v, _mm256_loadu_ps(tb));
        _mm256_storeu_ps(t, act8(v, act));
        for (int j = 0; i + j < d; j++)
            x[i + j] = t[j];
    }
}

#endif

void td_cpu_bias_act_row(float *x, const float *b, int64_t d, td_activation act)
{
#if defined(__x86_64__) || defined(__i386__)
    const int vec = act == TD_ACT_NONE || act == TD_ACT_RELU || act == TD_ACT_SILU;
    if (vec && td_cpu_isa_get() >= TD_CPU_ISA_AVX2) {
        bias_act_row_avx2(x, b, d, act);
        return;
    }
#endif
    td_cpu_bias_act_row_ref(x, b, d, act);
}
