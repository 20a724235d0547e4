/*
 * cpu_attention.c - the CPU backend's attention op (backend.h's attention):
 * per (sequence, head) pair with the serial BLAS for enough query rows,
 * else row by row (a decoding step: one query row against the cached
 * keys), AVX2 + FMA where the CPU has them; relative positions (Shaw) and
 * the probabilities a caller asks to keep.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "cpu_ctx.h"
#include "cpu_kernels.h"

/* Attention takes the BLAS path (sgemm for QK^T and for PV per (sequence,
 * head)) from CPU_ATTN_GEMM_MIN_Q query rows and CPU_ATTN_GEMM_MIN_MACS
 * multiply-adds per head: measured on one core, sgemm is ~3x faster than
 * the row loop from 16x16 tokens of 64 dims and even at 8x8. */
#define CPU_ATTN_GEMM_MIN_Q 8
#define CPU_ATTN_GEMM_MIN_MACS ((int64_t)1 << 14)

static inline float cpu_dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* acc += p * v over n floats. */
static inline void cpu_axpy(float *acc, float p, const float *v, int n)
{
#pragma omp simd
    for (int c = 0; c < n; c++)
        acc[c] += p * v[c];
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_AVX2 __attribute__((target("avx2,fma")))
/* The AVX2 + FMA twins of the two, for the attention row loop (a decoding
 * step's attention: one query row against the cached keys). Two chains of
 * 8 lanes for the dot product, summed in a fixed order, the tail in the
 * first lane's chain order; FMAs for both. The same bits on every CPU
 * with AVX2, whatever the thread count. */
/* The two chains of cpu_dot_avx2 summed, in a fixed order. */
CPU_AVX2 static inline float cpu_hsum2_avx2(__m256 s0, __m256 s1)
{
    s0 = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
}

CPU_AVX2 static float cpu_dot_avx2(const float *a, const float *b, int n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = cpu_hsum2_avx2(s0, s1);
    for (; i < n; i++)
        s = fmaf(a[i], b[i], s);
    return s;
}

CPU_AVX2 static void cpu_axpy_avx2(float *acc, float p, const float *v, int n)
{
    const __m256 vp = _mm256_set1_ps(p);
    int c = 0;
    for (; c + 8 <= n; c += 8)
        _mm256_storeu_ps(acc + c, _mm256_fmadd_ps(vp, _mm256_loadu_ps(v + c),
                                                  _mm256_loadu_ps(acc + c)));
    for (; c < n; c++)
        acc[c] = fmaf(p, v[c], acc[c]);
}

static void cpu_softmax_row(float *p, int lim, int width);

#define CPU_ATTN_HD_MAX 64

/* The row loop for a head of hd floats, hd a multiple of 8 up to
 * CPU_ATTN_HD_MAX, without relative terms: the logits are cpu_dot_avx2's
 * chains (8-float block c on chain c % 2, an odd last block on chain 0),
 * four keys at a time so that their chains overlap; the weighted sum keeps
 * the output in registers across the keys, each lane the FMA chain of
 * cpu_axpy_avx2 from zero. So the bits are the generic loop's, without a
 * load and store of the accumulator per key. p: lim floats. */
CPU_AVX2 static void cpu_attn_row_hd_avx2(const float *q, const float *K, const float *V,
                                          int64_t ld, int lim, int hd, float *p, float *o)
{
    const int nb = hd / 8, paired = nb & ~1;
    __m256 qv[CPU_ATTN_HD_MAX / 8];
    for (int c = 0; c < nb; c++)
        qv[c] = _mm256_loadu_ps(q + 8 * c);
    int j = 0;
    for (; j + 4 <= lim; j += 4) {
        __m256 a0[4], a1[4];
        for (int t = 0; t < 4; t++)
            a0[t] = a1[t] = _mm256_setzero_ps();
        for (int c = 0; c < paired; c += 2)
            for (int t = 0; t < 4; t++) {
                const float *k = K + (j + t) * ld + 8 * c;
                a0[t] = _mm256_fmadd_ps(qv[c], _mm256_loadu_ps(k), a0[t]);
                a1[t] = _mm256_fmadd_ps(qv[c + 1], _mm256_loadu_ps(k + 8), a1[t]);
            }
        if (paired < nb)
            for (int t = 0; t < 4; t++)
                a0[t] = _mm256_fmadd_ps(qv[paired], _mm256_loadu_ps(K + (j + t) * ld + 8 * paired),
                                        a0[t]);
        for (int t = 0; t < 4; t++)
            p[j + t] = cpu_hsum2_avx2(a0[t], a1[t]);
    }
    for (; j < lim; j++) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int c = 0; c < paired; c += 2) {
            a0 = _mm256_fmadd_ps(qv[c], _mm256_loadu_ps(K + j * ld + 8 * c), a0);
            a1 = _mm256_fmadd_ps(qv[c + 1], _mm256_loadu_ps(K + j * ld + 8 * c + 8), a1);
        }
        if (paired < nb)
            a0 = _mm256_fmadd_ps(qv[paired], _mm256_loadu_ps(K + j * ld + 8 * paired), a0);
        p[j] = cpu_hsum2_avx2(a0, a1);
    }
    cpu_softmax_row(p, lim, lim);
    __m256 acc[CPU_ATTN_HD_MAX / 8];
    for (int c = 0; c < nb; c++)
        acc[c] = _mm256_setzero_ps();
    for (j = 0; j < lim; j++) {
        const __m256 pj = _mm256_set1_ps(p[j]);
        for (int c = 0; c < nb; c++)
            acc[c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(V + j * ld + 8 * c), acc[c]);
    }
    for (int c = 0; c < nb; c++)
        _mm256_storeu_ps(o + 8 * c, acc[c]);
}
#endif

/* Absolute position of query row 0 of sequence s (backend.h: pos(s, 0)). */
static inline int64_t cpu_attn_pos0(const td_attn_args *a, int s)
{
    return a->q_pos ? (int64_t)a->q_pos[s] : (int64_t)a->q_pos0;
}

/* Keys [0, cpu_attn_keys()) of sequence s may be visible to some query row:
 * kv_len and, when causal, the last query's position. Key rows beyond are
 * never read, so an unwritten cache tail (even NaN) cannot leak in. */
static int cpu_attn_keys(const td_attn_args *a, int s)
{
    int64_t L = a->n_k;
    if (a->kv_len && a->kv_len[s] < L)
        L = a->kv_len[s];
    if (a->causal && cpu_attn_pos0(a, s) + a->n_q < L)
        L = cpu_attn_pos0(a, s) + a->n_q;
    return L < 0 ? 0 : (int)L;
}

/* Visible keys of query row i of sequence s, given the sequence's key bound
 * L. */
static inline int cpu_attn_row_keys(const td_attn_args *a, int s, int L, int i)
{
    const int64_t lim = cpu_attn_pos0(a, s) + i + 1;
    if (a->causal && lim < L)
        return lim < 0 ? 0 : (int)lim;
    return L;
}

/* In-place softmax of p[0, lim) (lim > 0) and zeros in p[lim, width). */
static void cpu_softmax_row(float *p, int lim, int width)
{
    float mx = p[0];
    for (int j = 1; j < lim; j++)
        mx = p[j] > mx ? p[j] : mx;
    double sum = 0.0;
    for (int j = 0; j < lim; j++) {
        p[j] = expf(p[j] - mx);
        sum += p[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int j = 0; j < lim; j++)
        p[j] *= inv;
    for (int j = lim; j < width; j++)
        p[j] = 0.0f;
}

static void cpu_attn_store_probs(const td_attn_args *a, int s, int h, int i,
                                 const float *p, int width)
{
    float *dst = a->probs +
                 (((int64_t)s * a->n_heads + h) * a->n_q + i) * a->probs_ld;
    if (width > 0)
        memcpy(dst, p, (size_t)width * sizeof(float));
    for (int j = width; j < a->n_k; j++)
        dst[j] = 0.0f;
}

/* The BLAS path works on one (sequence, head) pair pr = s*n_heads + h at a
 * time in three steps over S, the pair's (n_q, L) logits: cpu_attn_qk,
 * cpu_attn_softmax for each row, cpu_attn_pv. Relative terms are not
 * supported there. */

/* S = Q K^T for pair pr, S of row stride L = cpu_attn_keys(). */
static void cpu_attn_qk(const td_attn_args *a, int64_t pr, float *S)
{
    const int s = (int)(pr / a->n_heads), h = (int)(pr % a->n_heads);
    const int ks = a->kv_index ? a->kv_index[s] : s;
    const int hd = a->head_dim, L = cpu_attn_keys(a, s);
    if (L == 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->n_q, L, hd, 1.0f,
                a->q + s * a->q_seq_stride + (int64_t)h * hd, (blasint)a->ld_q,
                a->k + ks * a->kv_seq_stride + (int64_t)h * hd,
                (blasint)a->ld_kv, 0.0f, S, L);
}

/* Softmax of row i of S in place (masked and empty rows all zero), probs
 * capture, and the zero output of a pair that sees no key at all. */
static void cpu_attn_softmax(const td_attn_args *a, int64_t pr, int i, float *S)
{
    const int s = (int)(pr / a->n_heads), h = (int)(pr % a->n_heads);
    const int L = cpu_attn_keys(a, s), lim = cpu_attn_row_keys(a, s, L, i);
    float *p = S + (int64_t)i * L;
    if (lim > 0)
        cpu_softmax_row(p, lim, L);
    else if (L > 0)
        memset(p, 0, (size_t)L * sizeof(float));
    if (a->probs)
        cpu_attn_store_probs(a, s, h, i, p, lim > 0 ? L : 0);
    if (L == 0) /* cpu_attn_pv() skips this pair */
        memset(a->out + s * a->out_seq_stride + i * a->ld_out +
                   (int64_t)h * a->head_dim,
               0, (size_t)a->head_dim * sizeof(float));
}

/* O = P V for pair pr. Rows with no visible key are all-zero in S, so their
 * output is 0. */
static void cpu_attn_pv(const td_attn_args *a, int64_t pr, const float *S)
{
    const int s = (int)(pr / a->n_heads), h = (int)(pr % a->n_heads);
    const int ks = a->kv_index ? a->kv_index[s] : s;
    const int hd = a->head_dim, L = cpu_attn_keys(a, s);
    if (L == 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a->n_q, hd, L, 1.0f,
                S, L, a->v + ks * a->kv_seq_stride + (int64_t)h * hd,
                (blasint)a->ld_kv, 0.0f,
                a->out + s * a->out_seq_stride + (int64_t)h * hd,
                (blasint)a->ld_out);
}

/* One query row by plain loops (decoding, relative positions, small
 * problems). p has room for n_k floats, acc for head_dim. */
static void cpu_attn_row(const td_attn_args *a, int s, int h, int i, float *p,
                         float *acc)
{
    const int hd = a->head_dim, R = a->rel_max;
    const int ks = a->kv_index ? a->kv_index[s] : s;
    const int lim = cpu_attn_row_keys(a, s, cpu_attn_keys(a, s), i);
    const float *q = a->q + s * a->q_seq_stride + i * a->ld_q + (int64_t)h * hd;
    const float *K = a->k + ks * a->kv_seq_stride + (int64_t)h * hd;
    const float *V = a->v + ks * a->kv_seq_stride + (int64_t)h * hd;
    float *o = a->out + s * a->out_seq_stride + i * a->ld_out + (int64_t)h * hd;
    const int64_t qpos = cpu_attn_pos0(a, s) + i;

    if (lim == 0) {
        memset(o, 0, (size_t)hd * sizeof(float));
        if (a->probs)
            cpu_attn_store_probs(a, s, h, i, NULL, 0);
        return;
    }
    float (*dot)(const float *, const float *, int) = cpu_dot;
    void (*axpy)(float *, float, const float *, int) = cpu_axpy;
#ifdef CPU_AVX2
    if (td_cpu_isa_get() >= TD_CPU_ISA_AVX2) {
        if (!a->rel_k && !a->rel_v && hd % 8 == 0 && hd <= CPU_ATTN_HD_MAX) {
            cpu_attn_row_hd_avx2(q, K, V, a->ld_kv, lim, hd, p, o);
            if (a->probs)
                cpu_attn_store_probs(a, s, h, i, p, lim);
            return;
        }
        dot = cpu_dot_avx2;
        axpy = cpu_axpy_avx2;
    }
#endif
    for (int j = 0; j < lim; j++) {
        float l = dot(q, K + j * a->ld_kv, hd);
        if (a->rel_k) {
            int64_t r = j - qpos;
            r = r < -R ? -R : (r > R ? R : r);
            l += dot(q, a->rel_k + (r + R) * hd, hd);
        }
        p[j] = l;
    }
    cpu_softmax_row(p, lim, lim);
    for (int c = 0; c < hd; c++)
        acc[c] = 0.0f;
    for (int j = 0; j < lim; j++) {
        const float pj = p[j];
        axpy(acc, pj, V + j * a->ld_kv, hd);
        if (a->rel_v) {
            int64_t r = j - qpos;
            r = r < -R ? -R : (r > R ? R : r);
            axpy(acc, pj, a->rel_v + (r + R) * hd, hd);
        }
    }
    memcpy(o, acc, (size_t)hd * sizeof(float));
    if (a->probs)
        cpu_attn_store_probs(a, s, h, i, p, lim);
}

typedef struct attn_job {
    const td_attn_args *a;
    float *scratch;     /* a slice per thread */
    size_t slice;       /* floats */
    size_t slice_p;     /* the row path: probabilities, then the accumulator */
} attn_job;

static void attn_pairs_range(void *arg, int64_t p0, int64_t p1, int tid)
{
    const attn_job *j = arg;
    float *S = j->scratch + j->slice * (size_t)tid;
    for (int64_t pr = p0; pr < p1; pr++) {
        cpu_attn_qk(j->a, pr, S);
        for (int i = 0; i < j->a->n_q; i++)
            cpu_attn_softmax(j->a, pr, i, S);
        cpu_attn_pv(j->a, pr, S);
    }
}

/* Rows ordered (sequence, head, query): a chunk's consecutive rows share
 * the same K/V head. */
static void attn_rows_range(void *arg, int64_t r0, int64_t r1, int tid)
{
    const attn_job *j = arg;
    const td_attn_args *a = j->a;
    float *p = j->scratch + j->slice * (size_t)tid;
    for (int64_t r = r0; r < r1; r++) {
        const int i = (int)(r % a->n_q);
        const int h = (int)(r / a->n_q % a->n_heads);
        const int s = (int)(r / a->n_q / a->n_heads);
        cpu_attn_row(a, s, h, i, p, p + j->slice_p);
    }
}

void cpu_attention(td_backend *be, const td_attn_args *a)
{
    cpu_ctx *c = be->ctx;
    if (a->n_seq <= 0 || a->n_q <= 0 || a->n_heads <= 0 || a->head_dim <= 0)
        return;
    if ((a->rel_k || a->rel_v) && a->rel_max < 0) {
        cpu_fail(c, "cpu: attention: rel_max %d < 0", a->rel_max);
        return;
    }
    const int64_t macs = (int64_t)a->n_q * a->n_k * a->head_dim;
    const int64_t pairs = (int64_t)a->n_seq * a->n_heads;
    const int64_t pair_floats = (int64_t)a->n_q * (a->n_k > 0 ? a->n_k : 1);
    if (!a->rel_k && !a->rel_v && a->n_q >= CPU_ATTN_GEMM_MIN_Q &&
        macs >= CPU_ATTN_GEMM_MIN_MACS) {
        /* Whole pairs per chunk, each thread with its own S and the
         * serial BLAS. */
        const size_t slice = cpu_slice((size_t)pair_floats);
        float *scratch = cpu_scratch(c, slice * (size_t)c->n_threads);
        if (!scratch)
            return;
        attn_job j = {.a = a, .scratch = scratch, .slice = slice};
        cpu_par(c, pairs, pairs < CPU_POOL_MAX_CHUNKS ? pairs : CPU_POOL_MAX_CHUNKS,
                attn_pairs_range, &j);
        return;
    }
    const int64_t rows = (int64_t)a->n_seq * a->n_heads * a->n_q;
    const size_t slice_p = cpu_slice((size_t)(a->n_k > 0 ? a->n_k : 1));
    const size_t slice = slice_p + cpu_slice((size_t)a->head_dim);
    float *scratch = cpu_scratch(c, slice * (size_t)c->n_threads);
    if (!scratch)
        return;
    attn_job j = {.a = a, .scratch = scratch, .slice = slice, .slice_p = slice_p};
    cpu_par(c, rows, cpu_row_chunks(c, rows, rows * (macs / a->n_q + 1)), attn_rows_range, &j);
}
