/*
 * cpu_logprobs.c - one row of logprobs_topk (backend.h): log-softmax,
 * suppression, forced </s> and the top-k, fused.
 *
 * The vectorised rows (AVX-512, AVX2) read the logits twice:
 *   1. blocks of LP_BLOCK floats (L1-sized): the block's max, then
 *      sum(exp(x - M)) with M the running max, the float64 partial sums
 *      rescaled by exp(M_old - M_new) when a block raises the max (the
 *      running-max trick: the row is not read a third time for its max);
 *   2. y = (x - max) - lse written in place, and the top-k of y + b: a
 *      vector compare against the current k-th value picks the few lanes
 *      that can enter, which go through the same insertion as the plain-C
 *      row (ties toward the lower id), suppressed ids entering as -inf.
 * The float32 operations of step 2 are those of the plain-C row, so a
 * vector row differs from it only through lse: exp is a Cephes-style
 * polynomial (within 2 ulp of expf over the range used), the sum float64,
 * so lse agrees to ~1e-7 relative.
 *
 * Rows with a NaN or +inf logit, a non-finite bias, or only -inf logits
 * go through the plain-C row, which defines what those give. Forced rows
 * skip the log-softmax (every value is overwritten): the row is filled and
 * the top-k read from its first k+1 ids and eos.
 */
#include "cpu_kernels.h"
#include "cpu_vexp.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LP_X86 1
#endif

#define LP_BLOCK 2048

/* Inserts (v, id) into the descending list val/idx of *cnt <= k entries.
 * Ids arrive in ascending order, so an equal value goes after the ones
 * already there: ties resolve toward the lower id. */
static inline void lp_push(float *val, int32_t *idx, int *cnt, int k, float v,
                           int32_t id)
{
    if (*cnt == k && !(v > val[k - 1]))
        return;
    int pos = *cnt < k ? (*cnt)++ : k - 1;
    while (pos > 0 && val[pos - 1] < v) {
        val[pos] = val[pos - 1];
        idx[pos] = idx[pos - 1];
        pos--;
    }
    val[pos] = v;
    idx[pos] = id;
}

static inline int lp_suppressed(const int32_t *suppress, int n_suppress, int64_t id)
{
    for (int i = 0; i < n_suppress; i++)
        if (suppress[i] == id)
            return 1;
    return 0;
}

static void lp_apply_suppress(float *x, int64_t vocab, const int32_t *suppress,
                              int n_suppress)
{
    for (int i = 0; i < n_suppress; i++)
        if (suppress[i] >= 0 && suppress[i] < vocab)
            x[suppress[i]] = -INFINITY;
}

static void lp_force(float *x, int64_t vocab, int eos_id)
{
    for (int64_t t = 0; t < vocab; t++)
        x[t] = -INFINITY;
    if (eos_id >= 0 && eos_id < vocab)
        x[eos_id] = 0.0f;
}

void td_cpu_logprobs_row_ref(float *x, int64_t vocab, const int32_t *suppress,
                             int n_suppress, int forced, int eos_id, float b,
                             int k, float *out_val, int32_t *out_idx)
{
    /* 1. log_softmax as torch: (x - max) - log(sum(exp(x - max))) */
    float mx = x[0];
    for (int64_t t = 1; t < vocab; t++)
        mx = x[t] > mx ? x[t] : mx;
    if (mx == -INFINITY) {
        for (int64_t t = 0; t < vocab; t++)
            x[t] = -INFINITY;
    } else {
        double sum = 0.0;
        for (int64_t t = 0; t < vocab; t++)
            sum += expf(x[t] - mx);
        const float lse = (float)log(sum);
        for (int64_t t = 0; t < vocab; t++)
            x[t] = (x[t] - mx) - lse;
    }
    /* 2. suppressed tokens */
    lp_apply_suppress(x, vocab, suppress, n_suppress);
    /* 3. forced EOS */
    if (forced)
        lp_force(x, vocab, eos_id);
    /* 4. top-k of x + b, float32 additions */
    float val[64];
    int32_t idx[64];
    int cnt = 0;
    for (int64_t t = 0; t < vocab; t++)
        lp_push(val, idx, &cnt, k, x[t] + b, (int32_t)t);
    memcpy(out_val, val, (size_t)k * sizeof(float));
    memcpy(out_idx, idx, (size_t)k * sizeof(int32_t));
}

/* A forced row: every value is -inf but eos (0), whatever the logits, so
 * the log-softmax is skipped. The top-k is among ids 0..k and eos: every
 * other id holds the same -inf + b as these and loses the tie. */
static void lp_forced_row(float *x, int64_t vocab, int eos_id, float b, int k,
                          float *out_val, int32_t *out_idx)
{
    lp_force(x, vocab, eos_id);
    float val[64];
    int32_t idx[64];
    int cnt = 0;
    const int64_t head = vocab < (int64_t)k + 1 ? vocab : (int64_t)k + 1;
    for (int64_t t = 0; t < head; t++)
        lp_push(val, idx, &cnt, k, x[t] + b, (int32_t)t);
    if (eos_id >= head && eos_id < vocab)
        lp_push(val, idx, &cnt, k, x[eos_id] + b, eos_id);
    memcpy(out_val, val, (size_t)k * sizeof(float));
    memcpy(out_idx, idx, (size_t)k * sizeof(int32_t));
}

#ifdef LP_X86

#define LP_AVX2 TD_VEXP_AVX2
#define LP_AVX512 TD_VEXP_AVX512

LP_AVX2 static void lp_exp_avx2(float *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, td_vexp8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float tx[8], ty[8];
        for (int j = 0; j < 8; j++)
            tx[j] = i + j < n ? x[i + j] : 0.0f;
        _mm256_storeu_ps(ty, td_vexp8(_mm256_loadu_ps(tx)));
        for (int j = 0; i + j < n; j++)
            y[i + j] = ty[j];
    }
}

LP_AVX512 static void lp_exp_avx512(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF
                                        : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, td_vexp16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

/* Step 1, AVX-512: max and float64 sum of exp(x - max). Returns -1 when
 * the row needs the plain-C path (NaN, +inf, all -inf). */
LP_AVX512 static int lp_stats_avx512(const float *x, int64_t vocab, float *mx_out,
                                     double *sum_out)
{
    float M = -INFINITY;
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    __mmask16 nan = 0;
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t b0 = 0; b0 < vocab; b0 += LP_BLOCK) {
        const int64_t b1 = b0 + LP_BLOCK < vocab ? b0 + LP_BLOCK : vocab;
        __m512 vm = ninf;
        for (int64_t i = b0; i < b1; i += 16) {
            const __mmask16 m = b1 - i >= 16 ? (__mmask16)0xFFFF
                                             : (__mmask16)((1u << (b1 - i)) - 1);
            const __m512 v = _mm512_mask_loadu_ps(ninf, m, x + i);
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            vm = _mm512_max_ps(vm, v);
        }
        const float bm = _mm512_reduce_max_ps(vm);
        if (bm > M) {
            if (M != -INFINITY) {
                const __m512d f = _mm512_set1_pd(exp((double)M - (double)bm));
                s0 = _mm512_mul_pd(s0, f);
                s1 = _mm512_mul_pd(s1, f);
            }
            M = bm;
        }
        if (M == -INFINITY || M == INFINITY)
            continue;
        const __m512 vM = _mm512_set1_ps(M);
        for (int64_t i = b0; i < b1; i += 16) {
            const __mmask16 m = b1 - i >= 16 ? (__mmask16)0xFFFF
                                             : (__mmask16)((1u << (b1 - i)) - 1);
            const __m512 v = _mm512_mask_loadu_ps(ninf, m, x + i);
            const __m512 e = td_vexp16(_mm512_sub_ps(v, vM));
            s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
            s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(
                                       _mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
        }
    }
    if (nan || !isfinite(M))
        return -1;
    *mx_out = M;
    *sum_out = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    return 0;
}

/* Step 2, AVX-512: y = (x - mx) - lse in place, top-k of y + b. */
LP_AVX512 static void lp_write_topk_avx512(float *x, int64_t vocab, float mx, float lse,
                                           const int32_t *suppress, int n_suppress,
                                           float b, int k, float *val, int32_t *idx)
{
    int cnt = 0;
    const __m512 vmx = _mm512_set1_ps(mx), vlse = _mm512_set1_ps(lse),
                 vb = _mm512_set1_ps(b);
    for (int64_t i = 0; i < vocab; i += 16) {
        const __mmask16 m = vocab - i >= 16 ? (__mmask16)0xFFFF
                                            : (__mmask16)((1u << (vocab - i)) - 1);
        const __m512 y = _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vmx),
                                       vlse);
        _mm512_mask_storeu_ps(x + i, m, y);
        const __m512 z = _mm512_add_ps(y, vb);
        __mmask16 cand = cnt < k ? m
                                 : (__mmask16)(m & _mm512_cmp_ps_mask(
                                                       z, _mm512_set1_ps(val[k - 1]),
                                                       _CMP_GT_OQ));
        if (!cand)
            continue;
        float zz[16];
        _mm512_storeu_ps(zz, z);
        while (cand) {
            const int j = __builtin_ctz(cand);
            cand &= (__mmask16)(cand - 1);
            const int64_t id = i + j;
            const float v = n_suppress && lp_suppressed(suppress, n_suppress, id)
                                ? -INFINITY + b
                                : zz[j];
            lp_push(val, idx, &cnt, k, v, (int32_t)id);
        }
    }
}

LP_AVX2 static inline float lp_hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

/* Step 1, AVX2 (tails in plain C with the same exp). */
LP_AVX2 static int lp_stats_avx2(const float *x, int64_t vocab, float *mx_out,
                                 double *sum_out)
{
    float M = -INFINITY;
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    double tail = 0.0;
    __m256 nan = _mm256_setzero_ps();
    int nan_tail = 0;
    for (int64_t b0 = 0; b0 < vocab; b0 += LP_BLOCK) {
        const int64_t b1 = b0 + LP_BLOCK < vocab ? b0 + LP_BLOCK : vocab;
        __m256 vm = _mm256_set1_ps(-INFINITY);
        int64_t i = b0;
        for (; i + 8 <= b1; i += 8) {
            const __m256 v = _mm256_loadu_ps(x + i);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            vm = _mm256_max_ps(vm, v);
        }
        float bm = lp_hmax8(vm);
        for (; i < b1; i++) {
            nan_tail |= isnan(x[i]);
            bm = x[i] > bm ? x[i] : bm;
        }
        if (bm > M) {
            if (M != -INFINITY) {
                const double f = exp((double)M - (double)bm);
                s0 = _mm256_mul_pd(s0, _mm256_set1_pd(f));
                s1 = _mm256_mul_pd(s1, _mm256_set1_pd(f));
                tail *= f;
            }
            M = bm;
        }
        if (M == -INFINITY || M == INFINITY)
            continue;
        const __m256 vM = _mm256_set1_ps(M);
        for (i = b0; i + 8 <= b1; i += 8) {
            const __m256 e = td_vexp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vM));
            s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
            s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
        }
        if (i < b1) {
            float tx[8], ty[8];
            for (int j = 0; j < 8; j++)
                tx[j] = i + j < b1 ? x[i + j] - M : -INFINITY;
            _mm256_storeu_ps(ty, td_vexp8(_mm256_loadu_ps(tx)));
            for (int j = 0; i + j < b1; j++)
                tail += ty[j];
        }
    }
    if (nan_tail || _mm256_movemask_ps(nan) || !isfinite(M))
        return -1;
    const __m256d s = _mm256_add_pd(s0, s1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    h = _mm_add_sd(h, _mm_unpackhi_pd(h, h));
    *mx_out = M;
    *sum_out = _mm_cvtsd_f64(h) + tail;
    return 0;
}

LP_AVX2 static void lp_write_topk_avx2(float *x, int64_t vocab, float mx, float lse,
                                       const int32_t *suppress, int n_suppress, float b,
                                       int k, float *val, int32_t *idx)
{
    int cnt = 0;
    const __m256 vmx = _mm256_set1_ps(mx), vlse = _mm256_set1_ps(lse),
                 vb = _mm256_set1_ps(b);
    int64_t i = 0;
    for (; i + 8 <= vocab; i += 8) {
        const __m256 y = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx), vlse);
        _mm256_storeu_ps(x + i, y);
        const __m256 z = _mm256_add_ps(y, vb);
        unsigned cand = cnt < k ? 0xFFu
                                : (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(
                                      z, _mm256_set1_ps(val[k - 1]), _CMP_GT_OQ));
        if (!cand)
            continue;
        float zz[8];
        _mm256_storeu_ps(zz, z);
        while (cand) {
            const int j = __builtin_ctz(cand);
            cand &= cand - 1;
            const int64_t id = i + j;
            const float v = n_suppress && lp_suppressed(suppress, n_suppress, id)
                                ? -INFINITY + b
                                : zz[j];
            lp_push(val, idx, &cnt, k, v, (int32_t)id);
        }
    }
    for (; i < vocab; i++) {
        x[i] = (x[i] - mx) - lse;
        const float v = n_suppress && lp_suppressed(suppress, n_suppress, i)
                            ? -INFINITY + b
                            : x[i] + b;
        lp_push(val, idx, &cnt, k, v, (int32_t)i);
    }
}

#endif /* LP_X86 */

void td_cpu_exp_neg(float *y, const float *x, int64_t n)
{
#ifdef LP_X86
    const td_cpu_isa isa = td_cpu_isa_get();
    if (isa == TD_CPU_ISA_AVX512) {
        lp_exp_avx512(y, x, n);
        return;
    }
    if (isa == TD_CPU_ISA_AVX2) {
        lp_exp_avx2(y, x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        y[i] = expf(x[i]);
}

void td_cpu_logprobs_row(float *x, int64_t vocab, const int32_t *suppress,
                         int n_suppress, int forced, int eos_id, float b, int k,
                         float *out_val, int32_t *out_idx)
{
    if (!isfinite(b)) {
        td_cpu_logprobs_row_ref(x, vocab, suppress, n_suppress, forced, eos_id, b, k,
                                out_val, out_idx);
        return;
    }
    if (forced) {
        lp_forced_row(x, vocab, eos_id, b, k, out_val, out_idx);
        return;
    }
#ifdef LP_X86
    const td_cpu_isa isa = td_cpu_isa_get();
    if (isa != TD_CPU_ISA_SCALAR) {
        float mx;
        double sum;
        const int ok = isa == TD_CPU_ISA_AVX512 ? lp_stats_avx512(x, vocab, &mx, &sum)
                                                : lp_stats_avx2(x, vocab, &mx, &sum);
        if (ok == 0) {
            const float lse = (float)log(sum);
            float val[64];
            int32_t idx[64];
            if (isa == TD_CPU_ISA_AVX512)
                lp_write_topk_avx512(x, vocab, mx, lse, suppress, n_suppress, b, k, val,
                                     idx);
            else
                lp_write_topk_avx2(x, vocab, mx, lse, suppress, n_suppress, b, k, val, idx);
            lp_apply_suppress(x, vocab, suppress, n_suppress);
            memcpy(out_val, val, (size_t)k * sizeof(float));
            memcpy(out_idx, idx, (size_t)k * sizeof(int32_t));
            return;
        }
    }
#endif
    td_cpu_logprobs_row_ref(x, vocab, suppress, n_suppress, 0, eos_id, b, k, out_val,
                            out_idx);
}
