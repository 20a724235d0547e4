/*
 * test_cpu_ops.c - every op of the CPU backend against a plain
 * double-precision reference written here, on seeded random inputs of
 * awkward shapes (1, 7, 33, 513). A value passes when
 * |got - ref| <= tol_abs + tol_rel*|ref|; any NaN/Inf mismatch fails.
 *
 * Inputs go through alloc/upload/download, so the harness does not depend on
 * the backend keeping host memory.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_backend.h"
#include "cpu_kernels.h"
#include "device.h"

#define TOL_ABS 1e-5
#define TOL_REL 1e-4
#define SENTINEL 1234.5f /* fills padding columns the ops must not touch */

static td_backend *be;

static void setup(void)
{
    char err[256] = "";
    be = td_cpu_backend_create(2, err, sizeof err);
    ck_assert_msg(be != NULL, "td_cpu_backend_create: %s", err);
}

static void teardown(void)
{
    char err[256] = "";
    int rc = be->ops->sync(be, err, sizeof err);
    be->ops->destroy(be);
    be = NULL;
    ck_assert_msg(rc == 0, "sync: %s", err);
}

/* --- helpers ------------------------------------------------------------- */

static uint64_t rng_state;

static void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }

/* Uniform in [-1, 1). xorshift64*. */
static float frand(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
    return (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *frand_vec(size_t n, float scale)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = frand() * scale;
    return v;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

static void *dev_from(const void *host, size_t bytes)
{
    void *d = be->ops->alloc(be, bytes);
    ck_assert_ptr_nonnull(d);
    be->ops->upload(be, d, host, bytes);
    return d;
}

static void to_host(void *host, const void *dev, size_t bytes)
{
    be->ops->download(be, host, dev, bytes);
}

static td_weight weight_from(const float *host, int64_t rows, int64_t cols)
{
    td_weight w;
    char err[256] = "";
    int rc = be->ops->weight_upload(be, &w, host, rows, cols, TD_F32, 1.0f, err,
                                    sizeof err);
    ck_assert_msg(rc == 0, "weight_upload: %s", err);
    ck_assert_int_eq(w.rows, rows);
    ck_assert_int_eq(w.cols, cols);
    return w;
}

/* Number of entries where got differs from ref beyond the tolerance, or in
 * NaN/Inf-ness; the first few are printed. */
static size_t count_bad(const char *what, const float *got, const double *ref,
                        size_t n, double tol_abs, double tol_rel)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        int ok;
        if (isnan(r) || isnan(g))
            ok = isnan(r) && isnan(g);
        else if (isinf(r) || isinf(g))
            ok = g == r;
        else
            ok = fabs(g - r) <= tol_abs + tol_rel * fabs(r);
        if (!ok && bad++ < 5)
            fprintf(stderr, "%s[%zu]: got %.9g, want %.9g\n", what, i, g, r);
    }
    return bad;
}

#define ASSERT_CLOSE(what, got, ref, n, ta, tr)                                \
    do {                                                                       \
        size_t bad_ = count_bad((what), (got), (ref), (n), (ta), (tr));        \
        ck_assert_msg(bad_ == 0, "%s: %zu of %zu values out of tolerance",     \
                      (what), bad_, (size_t)(n));                              \
    } while (0)

/* --- memory, weights and errors ------------------------------------------ */

START_TEST(test_memory)
{
    const size_t n = 513;
    float *h = frand_vec(n, 1.0f), *back = xmalloc(n * sizeof *back);
    float *d = be->ops->alloc(be, n * sizeof(float));
    float *d2 = be->ops->alloc(be, n * sizeof(float));
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(d2);
    ck_assert_uint_eq((uintptr_t)d % 64, 0);
    be->ops->upload(be, d, h, n * sizeof(float));
    be->ops->copy(be, d2, d, n * sizeof(float));
    to_host(back, d2, n * sizeof(float));
    ck_assert_mem_eq(back, h, n * sizeof(float));
    be->ops->memset0(be, d2 + 7, 33 * sizeof(float));
    to_host(back, d2, n * sizeof(float));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += back[i] != ((i >= 7 && i < 40) ? 0.0f : h[i]);
    ck_assert_uint_eq(bad, 0);
    be->ops->dealloc(be, d);
    be->ops->dealloc(be, d2);
    be->ops->dealloc(be, NULL);

    td_weight w = weight_from(h, 19, 27);
    ck_assert_int_eq(w.dtype, TD_F32);
    ck_assert_mem_eq(w.data, h, 19 * 27 * sizeof(float));
    be->ops->weight_free(be, &w);
    ck_assert_ptr_null(w.data);
    be->ops->weight_free(be, &w); /* zeroed weight accepted */
    free(h);
    free(back);
}
END_TEST

START_TEST(test_latched_error)
{
    /* A weight the CPU backend did not make (F16 storage) is refused by
     * linear, and the failure surfaces at sync() exactly once. */
    float x[4] = {1, 2, 3, 4}, y[2] = {0, 0}, wd[8] = {0};
    td_weight w = {.data = wd, .dtype = TD_F16, .rows = 2, .cols = 4};
    char err[256] = "";
    be->ops->linear(be, y, 2, x, 4, 1, &w, NULL);
    ck_assert_int_eq(be->ops->sync(be, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "linear") != NULL, "message: %s", err);
    ck_assert_int_eq(be->ops->sync(be, err, sizeof err), 0);

    char e2[64] = "";
    ck_assert_ptr_null(td_cpu_backend_create(-1, e2, sizeof e2));
    ck_assert_msg(e2[0] != '\0', "no message for n_threads = -1");
}
END_TEST

/* --- linear ------------------------------------------------------------- */

static void check_linear(int64_t n, int64_t out, int64_t in, int64_t pad_x,
                         int64_t pad_y, int with_bias)
{
    const int64_t ld_x = in + pad_x, ld_y = out + pad_y;
    float *x = frand_vec((size_t)(n * ld_x), 1.0f);
    float *w = frand_vec((size_t)(out * in), 1.0f / sqrtf((float)in));
    float *b = frand_vec((size_t)out, 1.0f);
    float *y = xmalloc((size_t)(n * ld_y) * sizeof *y);
    double *ref = xmalloc((size_t)(n * ld_y) * sizeof *ref);
    for (int64_t i = 0; i < n * ld_y; i++)
        y[i] = SENTINEL, ref[i] = SENTINEL;
    for (int64_t r = 0; r < n; r++)
        for (int64_t o = 0; o < out; o++) {
            double s = with_bias ? b[o] : 0.0;
            for (int64_t i = 0; i < in; i++)
                s += (double)x[r * ld_x + i] * w[o * in + i];
            ref[r * ld_y + o] = s;
        }
    td_weight W = weight_from(w, out, in), B = weight_from(b, 1, out);
    float *dx = dev_from(x, (size_t)(n * ld_x) * sizeof(float));
    float *dy = dev_from(y, (size_t)(n * ld_y) * sizeof(float));
    be->ops->linear(be, dy, ld_y, dx, ld_x, n, &W, with_bias ? &B : NULL);
    to_host(y, dy, (size_t)(n * ld_y) * sizeof(float));
    char what[96];
    snprintf(what, sizeof what, "linear n=%lld out=%lld in=%lld bias=%d",
             (long long)n, (long long)out, (long long)in, with_bias);
    ASSERT_CLOSE(what, y, ref, (size_t)(n * ld_y), TOL_ABS, TOL_REL);
    be->ops->weight_free(be, &W);
    be->ops->weight_free(be, &B);
    be->ops->dealloc(be, dx);
    be->ops->dealloc(be, dy);
    free(x), free(w), free(b), free(y), free(ref);
}

START_TEST(test_linear)
{
    rng_seed(1);
    for (int bias = 0; bias <= 1; bias++) {
        check_linear(1, 7, 33, 0, 0, bias);    /* sgemv path */
        check_linear(1, 33, 513, 5, 3, bias);  /* sgemv, strided */
        check_linear(7, 33, 513, 3, 2, bias);
        check_linear(33, 513, 7, 1, 9, bias);
        check_linear(513, 33, 65, 0, 0, bias);
        check_linear(2, 1, 1, 0, 0, bias);
    }
}
END_TEST

/* The packed GEMM (cpu_gemm.c) on the shapes its kernel splits on: 1 and 2
 * rows (one-row kernel), 3..12 and 13, 25 (row blocks of 12 and their
 * tails), out features around the 32-wide panels, in features around the
 * 256-wide k blocks. Under every instruction set: the layout is chosen at
 * upload (packed with AVX-512, row-major for OpenBLAS otherwise); a packed
 * weight used after the instruction set was lowered takes the plain-C
 * kernel over the same layout. */
START_TEST(test_linear_isa)
{
    static const int64_t shapes[][3] = {
        {1, 32, 16}, {2, 33, 257}, {3, 63, 513}, {12, 64, 256}, {13, 100, 600},
        {25, 513, 33}, {128, 96, 300}, {1, 1000, 512}, {7, 32, 1}, {40, 31, 40},
    };
    const td_cpu_isa top = td_cpu_isa_max(), saved = td_cpu_isa_get();
    rng_seed(11);
    for (int up = TD_CPU_ISA_SCALAR; up <= (int)top; up++)
        for (int run = TD_CPU_ISA_SCALAR; run <= up; run++)
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
                td_cpu_isa_set((td_cpu_isa)up);
                /* check_linear uploads, then runs: lower the isa in between
                 * through a second pass over the same weight */
                if (run == up) {
                    check_linear(shapes[i][0], shapes[i][1], shapes[i][2], (int64_t)i % 3,
                                 (int64_t)i % 2, (int)i % 2);
                    continue;
                }
                const int64_t n = shapes[i][0], out = shapes[i][1], in = shapes[i][2];
                float *x = frand_vec((size_t)(n * in), 1.0f);
                float *w = frand_vec((size_t)(out * in), 1.0f);
                float *y = xmalloc((size_t)(n * out) * sizeof *y);
                double *ref = xmalloc((size_t)(n * out) * sizeof *ref);
                for (int64_t r = 0; r < n; r++)
                    for (int64_t o = 0; o < out; o++) {
                        double sum = 0;
                        for (int64_t k = 0; k < in; k++)
                            sum += (double)x[r * in + k] * w[o * in + k];
                        ref[r * out + o] = sum;
                    }
                td_weight W = weight_from(w, out, in);
                td_cpu_isa_set((td_cpu_isa)run);
                float *dx = dev_from(x, (size_t)(n * in) * sizeof(float));
                float *dy = be->ops->alloc(be, (size_t)(n * out) * sizeof(float));
                be->ops->linear(be, dy, out, dx, in, n, &W, NULL);
                to_host(y, dy, (size_t)(n * out) * sizeof(float));
                ASSERT_CLOSE("linear, isa lowered after upload", y, ref, (size_t)(n * out),
                             TOL_ABS, TOL_REL);
                be->ops->weight_free(be, &W);
                be->ops->dealloc(be, dx);
                be->ops->dealloc(be, dy);
                free(x), free(w), free(y), free(ref);
            }
    td_cpu_isa_set(saved);
}
END_TEST

/* The vector kernels of the packed GEMM (AVX2, AVX-512) against the chain
 * of fused multiply-adds they are written to compute, here in plain C
 * with fmaf: three or more rows, each output one FMA chain in k order from
 * zero, then + bias; one or two rows, four partial chains (k mod 4, the
 * tail of k into the first) summed as (p0 + p1) + (p2 + p3), then + bias.
 * Equal bits under every vector instruction set the CPU has, so an AVX2
 * machine computes what an AVX-512 one does. */
static void fma_ref(float *y, const float *x, const float *w, const float *b, int64_t m,
                    int64_t out, int64_t in)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t o = 0; o < out; o++) {
            const float *xi = x + i * in, *wo = w + o * in;
            float r;
            if (m > 2) {
                r = 0.0f;
                for (int64_t k = 0; k < in; k++)
                    r = fmaf(xi[k], wo[k], r);
            } else {
                float p[4] = {0, 0, 0, 0};
                int64_t k = 0;
                for (; k + 4 <= in; k += 4)
                    for (int u = 0; u < 4; u++)
                        p[u] = fmaf(xi[k + u], wo[k + u], p[u]);
                for (; k < in; k++)
                    p[0] = fmaf(xi[k], wo[k], p[0]);
                r = (p[0] + p[1]) + (p[2] + p[3]);
            }
            y[i * out + o] = b ? r + b[o] : r;
        }
}

START_TEST(test_gemm_fma_order)
{
    static const int64_t shapes[][3] = {
        {1, 32, 16}, {2, 33, 257}, {2, 7, 5}, {3, 63, 513}, {6, 64, 256}, {7, 48, 300},
        {13, 100, 600}, {25, 513, 33}, {1, 1000, 512},
    };
    const td_cpu_isa top = td_cpu_isa_max(), saved = td_cpu_isa_get();
    if (top < TD_CPU_ISA_AVX2) {
        printf("test_gemm_fma_order: no AVX2 on this CPU, nothing to check\n");
        return;
    }
    rng_seed(14);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t m = shapes[s][0], out = shapes[s][1], in = shapes[s][2];
        float *x = frand_vec((size_t)(m * in), 1.0f), *w = frand_vec((size_t)(out * in), 1.0f);
        float *b = frand_vec((size_t)out, 1.0f);
        float *P = xmalloc((size_t)td_cpu_packed_floats(out, in) * sizeof *P);
        float *y = xmalloc((size_t)(m * out) * sizeof *y), *ref = xmalloc((size_t)(m * out) * sizeof *ref);
        td_cpu_pack(P, w, out, in, 1.0f);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            fma_ref(ref, x, w, with_bias ? b : NULL, m, out, in);
            for (int isa = TD_CPU_ISA_AVX2; isa <= (int)top; isa++) {
                td_cpu_isa_set((td_cpu_isa)isa);
                const int64_t panels = (out + GEMM_NR - 1) / GEMM_NR;
                td_cpu_gemm_packed(y, out, x, in, m, P, out, in, with_bias ? b : NULL, 0, panels);
                td_cpu_isa_set(saved);
                for (int64_t e = 0; e < m * out; e++)
                    ck_assert_msg(memcmp(&y[e], &ref[e], sizeof(float)) == 0,
                                  "isa %d m=%lld out=%lld in=%lld bias %d: y[%lld] %.9g, the FMA "
                                  "chain gives %.9g", isa, (long long)m, (long long)out,
                                  (long long)in, with_bias, (long long)e, (double)y[e],
                                  (double)ref[e]);
            }
        }
        free(x), free(w), free(b), free(P), free(y), free(ref);
    }
}
END_TEST

/* int8 (cpu_int8.c) on awkward shapes, against plain C written here:
 * - the activation bytes and scales of every instruction set equal a
 *   per-row round(x * 127 / max|x|) + 128;
 * - the GEMM (VNNI when the CPU has it, else the plain-C kernel) equals,
 *   bit for bit, the integer sum and float32 epilogue computed here from
 *   the packed weights' own scales (td_cpu_q8_row gives them back);
 * - and stays within the quantization error of the float32 product:
 *   |y - x W^T| <= 2e-2 * sqrt(k) * max|x| * max|W_j| per output (the two
 *   roundings bound each term by (max|x| |W_jk| + |x_k| max|W_j|) / 254). */
static void check_q8(int64_t m, int64_t out, int64_t in, int with_bias)
{
    float *x = frand_vec((size_t)(m * in), 2.0f);
    float *w = frand_vec((size_t)(out * in), 0.5f);
    float *b = frand_vec((size_t)out, 1.0f);
    if (m > 1) /* an all-zero row: scale 0, y = bias */
        memset(x + in, 0, (size_t)in * sizeof(float));
    if (out > 2)
        memset(w + 2 * in, 0, (size_t)in * sizeof(float));
    const int64_t K4 = td_cpu_q8_k4(in);
    void *P = xmalloc(td_cpu_q8_bytes(out, in));
    td_cpu_q8_pack(P, w, out, in, 1.0f);
    uint8_t *u = xmalloc((size_t)(m * 4 * K4));
    float *xs = xmalloc((size_t)m * sizeof *xs);
    /* activations: every instruction set against the formula */
    const td_cpu_isa top = td_cpu_isa_max(), saved = td_cpu_isa_get();
    for (int isa = TD_CPU_ISA_SCALAR; isa <= (int)top; isa++) {
        td_cpu_isa_set((td_cpu_isa)isa);
        td_cpu_q8_quant_rows(u, xs, x, in, m, in);
        for (int64_t i = 0; i < m; i++) {
            float amax = 0;
            for (int64_t c = 0; c < in; c++)
                amax = fabsf(x[i * in + c]) > amax ? fabsf(x[i * in + c]) : amax;
            ck_assert(xs[i] == amax / 127.0f);
            const float inv = amax > 0 ? 127.0f / amax : 0.0f;
            for (int64_t c = 0; c < 4 * K4; c++) {
                const long want = c < in ? lrintf(x[i * in + c] * inv) + 128 : 128;
                ck_assert_msg(u[i * 4 * K4 + c] == want, "isa %d row %lld col %lld: %d, want %ld",
                              isa, (long long)i, (long long)c, u[i * 4 * K4 + c], want);
            }
        }
    }
    td_cpu_isa_set(saved);
    /* the weights back, and the exact integer product */
    float *wq = xmalloc((size_t)(out * in) * sizeof *wq);
    float *ws = xmalloc((size_t)out * sizeof *ws);
    for (int64_t o = 0; o < out; o++) {
        float amax = 0;
        for (int64_t c = 0; c < in; c++)
            amax = fabsf(w[o * in + c]) > amax ? fabsf(w[o * in + c]) : amax;
        ws[o] = amax / 127.0f;
        td_cpu_q8_row(wq + o * in, P, out, in, o, 1.0f);
    }
    const int64_t ld_y = out + 3;
    float *y = xmalloc((size_t)(m * ld_y) * sizeof *y);
    const int64_t panels = (out + 31) / 32;
    /* the product under every instruction set (AMX and then VNNI where the
     * CPU has them and the isa is AVX-512, the AVX2 kernel, plain C): the
     * same bits. Pass top + 1 is AVX-512 with AMX turned off. */
    const int amx_saved = td_cpu_amx_set(1);
    for (int isa = TD_CPU_ISA_SCALAR; isa <= (int)top + 1; isa++) {
    td_cpu_isa_set(isa > (int)top ? top : (td_cpu_isa)isa);
    if (isa > (int)top && !td_cpu_amx_set(0))
        break; /* AMX was off already: nothing new to run */
    for (int64_t i = 0; i < m * ld_y; i++)
        y[i] = SENTINEL;
    td_cpu_gemm_q8(y, ld_y, u, xs, m, P, out, in, with_bias ? b : NULL, 0, panels / 2);
    td_cpu_gemm_q8(y, ld_y, u, xs, m, P, out, in, with_bias ? b : NULL, panels / 2, panels);
    td_cpu_isa_set(saved);
    td_cpu_amx_set(amx_saved);
    size_t bad = 0;
    for (int64_t i = 0; i < m; i++) {
        float xmax = 0;
        for (int64_t c = 0; c < in; c++)
            xmax = fabsf(x[i * in + c]) > xmax ? fabsf(x[i * in + c]) : xmax;
        for (int64_t o = 0; o < out; o++) {
            int32_t acc = 0, comp = 0;
            double exact = with_bias ? b[o] : 0.0;
            for (int64_t c = 0; c < in; c++) {
                const int32_t q = ws[o] > 0 ? (int32_t)lrintf(wq[o * in + c] / ws[o]) : 0;
                acc += (int32_t)u[i * 4 * K4 + c] * q;
                comp += 128 * q;
                exact += (double)x[i * in + c] * w[o * in + c];
            }
            float want = (float)(acc - comp) * (xs[i] * ws[o]);
            if (with_bias)
                want = want + b[o];
            const float got = y[i * ld_y + o];
            const double bound = 2e-2 * sqrt((double)in) * xmax * ws[o] * 127.0 + 1e-6;
            if ((got != want || fabs(got - exact) > bound) && bad++ < 5)
                fprintf(stderr, "q8 isa %d m=%lld out=%lld in=%lld: y[%lld][%lld] %.9g, want "
                        "%.9g (float32 %.9g, bound %.3g)\n", isa, (long long)m,
                        (long long)out, (long long)in, (long long)i, (long long)o,
                        (double)got, (double)want, exact, bound);
        }
        for (int64_t o = out; o < ld_y; o++)
            ck_assert(y[i * ld_y + o] == SENTINEL);
    }
    ck_assert_msg(bad == 0, "q8 isa %d m=%lld out=%lld in=%lld: %zu wrong", isa, (long long)m,
                  (long long)out, (long long)in, bad);
    }
    free(x), free(w), free(b), free(P), free(u), free(xs), free(wq), free(ws), free(y);
}

START_TEST(test_int8_kernels)
{
    rng_seed(12);
    static const int64_t shapes[][3] = {
        {1, 1, 1}, {1, 7, 33}, {2, 33, 513}, {7, 32, 3}, {12, 64, 256}, {13, 100, 601},
        {33, 513, 7}, {128, 96, 2048}, {25, 31, 40},
        /* k a multiple of 64 (the AMX kernel): row blocks of 32, 16-31 and
         * under 16 rows, partial panels */
        {45, 100, 320}, {17, 33, 64}, {31, 513, 128}, {5, 32, 192}, {64, 64, 64}, {16, 16, 64},
    };
    printf("test_int8_kernels: vnni %d, amx %d\n", td_cpu_has_vnni(), td_cpu_has_amx());
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_q8(shapes[i][0], shapes[i][1], shapes[i][2], (int)i % 2);
}
END_TEST

/* bfloat16 (cpu_bf16.c): the rounding against nearest-even worked out here
 * in float64 from the two neighbouring bfloat16 values; the rows under
 * every instruction set equal it; the product (AMX where the CPU has
 * AMX-BF16 and k is a multiple of 32, plain C with AMX off) within float32
 * rounding of a float64 sum of the same bfloat16 values, and within the
 * bfloat16 rounding of the float32 product; padding untouched. */
static uint16_t bf16_ref(float f)
{
    if (isnan(f))
        return td_cpu_bf16_round(f); /* checked separately: a quiet NaN */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    const double dlo = td_cpu_bf16_float(lo), dhi = td_cpu_bf16_float(hi), d = f;
    if (isinf(d))
        return lo;
    if ((lo & 0x7fff) == 0x7f7f && fabs(d) >= 3.3961775292304690e38) /* rounds past max */
        return (uint16_t)((lo & 0x8000) | 0x7f80);
    const double elo = fabs(d - dlo), ehi = fabs(dhi - d);
    return elo < ehi ? lo : ehi < elo ? hi : (lo & 1) ? hi : lo;
}

START_TEST(test_bf16_round)
{
    rng_seed(21);
    float v[4096];
    for (int i = 0; i < 4096; i++) {
        uint32_t u = (uint32_t)(frand() * 2147483647.0f) ^ ((uint32_t)i << 20);
        if (i % 7 == 0) /* exact ties: the low half 0x8000 */
            u = (u & 0xffff0000u) | 0x8000u;
        memcpy(&v[i], &u, sizeof u);
    }
    const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-40f, -1e-42f, 3.4028235e38f,
                             -3.4028235e38f, INFINITY, -INFINITY, 1.00390625f, 1.01171875f};
    memcpy(v, special, sizeof special);
    for (int i = 0; i < 4096; i++)
        if (!isnan(v[i]))
            ck_assert_msg(td_cpu_bf16_round(v[i]) == bf16_ref(v[i]), "%a: %#x, want %#x",
                          (double)v[i], td_cpu_bf16_round(v[i]), bf16_ref(v[i]));
    const uint16_t qn = td_cpu_bf16_round(NAN);
    ck_assert(isnan(td_cpu_bf16_float(qn)) && (qn & 0x40));
    /* rows under every instruction set: the scalar function's bytes */
    const int64_t k = 4093, K2 = td_cpu_b16_k2(k);
    uint16_t *a = xmalloc((size_t)(2 * K2) * 2);
    const td_cpu_isa top = td_cpu_isa_max(), saved = td_cpu_isa_get();
    for (int isa = TD_CPU_ISA_SCALAR; isa <= (int)top; isa++) {
        td_cpu_isa_set((td_cpu_isa)isa);
        td_cpu_b16_round_rows(a, v, k, 1, k);
        for (int64_t c = 0; c < 2 * K2; c++)
            ck_assert_msg(a[c] == (c < k ? td_cpu_bf16_round(v[c]) : 0),
                          "isa %d col %lld: %#x", isa, (long long)c, a[c]);
    }
    td_cpu_isa_set(saved);
    free(a);
}
END_TEST

static void check_b16(int64_t m, int64_t out, int64_t in, int with_bias)
{
    float *x = frand_vec((size_t)(m * in), 2.0f);
    float *w = frand_vec((size_t)(out * in), 0.5f);
    float *b = frand_vec((size_t)out, 1.0f);
    const int64_t K2 = td_cpu_b16_k2(in);
    void *P = xmalloc(td_cpu_b16_bytes(out, in));
    td_cpu_b16_pack(P, w, out, in, 0.75f);
    float *wr = xmalloc((size_t)in * sizeof *wr);
    for (int64_t o = 0; o < out; o++) {
        td_cpu_b16_row(wr, P, out, in, o, 1.0f);
        for (int64_t c = 0; c < in; c++)
            ck_assert(wr[c] == td_cpu_bf16_float(td_cpu_bf16_round(w[o * in + c] * 0.75f)));
    }
    uint16_t *a = xmalloc((size_t)(m * 2 * K2) * 2);
    td_cpu_b16_round_rows(a, x, in, m, in);
    const int64_t ld_y = out + 3, panels = (out + 31) / 32;
    float *y = xmalloc((size_t)(m * ld_y) * sizeof *y);
    /* pass 0 the fastest kernel (AMX where k allows), 1 without AMX
     * (AVX512-BF16 where the CPU has it), 2 the plain-C one */
    const int amx_saved = td_cpu_amx_set(1);
    const td_cpu_isa isa_saved = td_cpu_isa_get();
    for (int pass = 0; pass < 3; pass++) {
        td_cpu_amx_set(pass == 0);
        if (pass == 2)
            td_cpu_isa_set(TD_CPU_ISA_AVX2);
        for (int64_t i = 0; i < m * ld_y; i++)
            y[i] = SENTINEL;
        td_cpu_gemm_b16(y, ld_y, a, m, P, out, in, with_bias ? b : NULL, 0, panels / 2);
        td_cpu_gemm_b16(y, ld_y, a, m, P, out, in, with_bias ? b : NULL, panels / 2, panels);
        size_t bad = 0;
        for (int64_t i = 0; i < m; i++) {
            for (int64_t o = 0; o < out; o++) {
                double ref = with_bias ? b[o] : 0.0, mag = with_bias ? fabs(b[o]) : 0.0;
                double exact = ref, emag = mag;
                for (int64_t c = 0; c < in; c++) {
                    const double av = td_cpu_bf16_float(a[i * 2 * K2 + c]);
                    const double wv = td_cpu_bf16_float(td_cpu_bf16_round(w[o * in + c] * 0.75f));
                    ref += av * wv;
                    mag += fabs(av * wv);
                    exact += (double)x[i * in + c] * (w[o * in + c] * 0.75f);
                    emag += fabs((double)x[i * in + c] * (w[o * in + c] * 0.75f));
                }
                const double got = y[i * ld_y + o];
                const double bound = (double)(in + 2) * 6.0e-8 * mag + 1e-30;
                const double ebound = 2.0 * 0.00390625 * emag + bound;
                if ((fabs(got - ref) > bound || fabs(got - exact) > ebound) && bad++ < 5)
                    fprintf(stderr, "bf16 pass %d m=%lld out=%lld in=%lld: y[%lld][%lld] %.9g, "
                            "want %.9g (bound %.3g; float32 %.9g)\n", pass,
                            (long long)m, (long long)out, (long long)in, (long long)i,
                            (long long)o, got, ref, bound, exact);
            }
            for (int64_t o = out; o < ld_y; o++)
                ck_assert(y[i * ld_y + o] == SENTINEL);
        }
        ck_assert_msg(bad == 0, "bf16 pass %d m=%lld out=%lld in=%lld: %zu wrong", pass,
                      (long long)m, (long long)out, (long long)in, bad);
    }
    td_cpu_isa_set(isa_saved);
    td_cpu_amx_set(amx_saved);
    free(x), free(w), free(b), free(P), free(wr), free(a), free(y);
}

START_TEST(test_bf16_kernels)
{
    rng_seed(22);
    static const int64_t shapes[][3] = {
        {1, 1, 1}, {1, 7, 33}, {2, 33, 513}, {7, 32, 3}, {13, 100, 601}, {25, 31, 40},
        /* k a multiple of 32 (the AMX kernel) */
        {12, 64, 256}, {45, 100, 320}, {17, 33, 32}, {31, 513, 96}, {5, 32, 192},
        {64, 64, 64}, {16, 16, 64}, {128, 96, 2048}, {9, 65, 7}, {3, 40, 1024}, {8, 257, 255},
    };
    printf("test_bf16_kernels: amx-bf16 %d, avx512-bf16 %d\n", td_cpu_has_amx_bf16(),
           td_cpu_has_avx512_bf16());
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_b16(shapes[i][0], shapes[i][1], shapes[i][2], (int)i % 2);
}
END_TEST

/* --dtype bfloat16 through the registry: a backend on a CPU with
 * AVX512-BF16 or AMX-BF16 (elsewhere create() refuses it, naming the need), bfloat16 matrices,
 * float32 vectors, linear and embedding lookup within bfloat16 rounding. */
START_TEST(test_bf16_backend)
{
    td_device dev;
    char err[256] = "";
    ck_assert_msg(td_device_resolve("cpu", &dev, err, sizeof err) == 0, "%s", err);
    const td_backend_params p = {.n_threads = 2, .store = TD_STORE_BF16};
    td_backend *hb = dev.create(&dev, &p, err, sizeof err);
    if (!td_cpu_has_bf16()) {
        ck_assert(hb == NULL);
        ck_assert_msg(strstr(err, "AMX-BF16") != NULL, "%s", err);
        printf("test_bf16_backend: no AMX-BF16, refused: %s\n", err);
        return;
    }
    ck_assert_msg(hb != NULL, "%s", err);
    rng_seed(23);
    const int64_t n = 9, out = 70, in = 96;
    float *x = frand_vec((size_t)(n * in), 1.0f), *w = frand_vec((size_t)(out * in), 1.0f);
    float *b = frand_vec((size_t)out, 1.0f);
    td_weight W, B;
    ck_assert(hb->ops->weight_upload(hb, &W, w, out, in, TD_F32, 0.5f, err, sizeof err) == 0);
    ck_assert(hb->ops->weight_upload(hb, &B, b, 1, out, TD_F32, 1.0f, err, sizeof err) == 0);
    ck_assert_int_eq(W.dtype, TD_BF16);
    ck_assert_int_eq(B.dtype, TD_F32);
    hb->ops->reserve_linear(hb, &W, n);
    float *dx = hb->ops->alloc(hb, (size_t)(n * in) * sizeof(float));
    float *dy = hb->ops->alloc(hb, (size_t)(n * out) * sizeof(float));
    hb->ops->upload(hb, dx, x, (size_t)(n * in) * sizeof(float));
    hb->ops->linear(hb, dy, out, dx, in, n, &W, &B);
    float *y = xmalloc((size_t)(n * out) * sizeof *y);
    hb->ops->download(hb, y, dy, (size_t)(n * out) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
            double s = b[o], mag = fabs(b[o]);
            for (int64_t c = 0; c < in; c++) {
                s += (double)x[i * in + c] * (w[o * in + c] * 0.5f);
                mag += fabs((double)x[i * in + c] * (w[o * in + c] * 0.5f));
            }
            ck_assert_msg(fabs(y[i * out + o] - s) <= 2.0 * 0.00390625 * mag + 1e-5,
                          "bf16 linear y[%lld][%lld] %g vs %g", (long long)i, (long long)o,
                          (double)y[i * out + o], s);
        }
    const int32_t ids[3] = {0, 69, 33};
    int32_t *dids = hb->ops->alloc(hb, sizeof ids);
    hb->ops->upload(hb, dids, ids, sizeof ids);
    hb->ops->embed(hb, dy, &W, dids, 3, 2.0f, NULL, NULL);
    hb->ops->download(hb, y, dy, (size_t)(3 * in) * sizeof(float));
    for (int r = 0; r < 3; r++)
        for (int64_t c = 0; c < in; c++) {
            const double want = 2.0 * 0.5 * w[ids[r] * in + c];
            ck_assert(fabs(y[r * in + c] - want) <= 0.00390625 * fabs(want) + 1e-7);
        }
    ck_assert_msg(hb->ops->sync(hb, err, sizeof err) == 0, "%s", err);
    hb->ops->weight_free(hb, &W);
    hb->ops->weight_free(hb, &B);
    hb->ops->dealloc(hb, dx);
    hb->ops->dealloc(hb, dy);
    hb->ops->dealloc(hb, dids);
    hb->ops->destroy(hb);
    free(x), free(w), free(b), free(y);
}
END_TEST

/* A backend made with --dtype int8 (the registry's create): int8 matrices,
 * float32 vectors, linear within the quantization error, embed of a
 * quantized table close to the table, and the scratch reserved. */
START_TEST(test_int8_backend)
{
    td_device dev;
    char err[256] = "";
    ck_assert_msg(td_device_resolve("cpu", &dev, err, sizeof err) == 0, "%s", err);
    const td_backend_params p = {.n_threads = 2, .store = TD_STORE_INT8};
    td_backend *qb = dev.create(&dev, &p, err, sizeof err);
    ck_assert_msg(qb != NULL, "%s", err);
    rng_seed(13);
    const int64_t n = 9, out = 70, in = 67;
    float *x = frand_vec((size_t)(n * in), 1.0f), *w = frand_vec((size_t)(out * in), 1.0f);
    float *b = frand_vec((size_t)out, 1.0f);
    td_weight W, B;
    ck_assert(qb->ops->weight_upload(qb, &W, w, out, in, TD_F32, 0.5f, err, sizeof err) == 0);
    ck_assert(qb->ops->weight_upload(qb, &B, b, 1, out, TD_F32, 1.0f, err, sizeof err) == 0);
    ck_assert_int_eq(W.dtype, TD_I8);
    ck_assert_int_eq(B.dtype, TD_F32);
    qb->ops->reserve_linear(qb, &W, n);
    float *dx = qb->ops->alloc(qb, (size_t)(n * in) * sizeof(float));
    float *dy = qb->ops->alloc(qb, (size_t)(n * out) * sizeof(float));
    qb->ops->upload(qb, dx, x, (size_t)(n * in) * sizeof(float));
    qb->ops->linear(qb, dy, out, dx, in, n, &W, &B);
    float *y = xmalloc((size_t)(n * out) * sizeof *y);
    qb->ops->download(qb, y, dy, (size_t)(n * out) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
            double s = b[o];
            for (int64_t c = 0; c < in; c++)
                s += (double)x[i * in + c] * (w[o * in + c] * 0.5f);
            ck_assert_msg(fabs(y[i * out + o] - s) <= 2e-2 * sqrt((double)in) * 0.5,
                          "int8 linear y[%lld][%lld] %g vs %g", (long long)i, (long long)o,
                          (double)y[i * out + o], s);
        }
    const int32_t ids[3] = {0, 69, 33};
    int32_t *dids = qb->ops->alloc(qb, sizeof ids);
    qb->ops->upload(qb, dids, ids, sizeof ids);
    qb->ops->embed(qb, dy, &W, dids, 3, 2.0f, NULL, NULL);
    qb->ops->download(qb, y, dy, (size_t)(3 * in) * sizeof(float));
    for (int r = 0; r < 3; r++)
        for (int64_t c = 0; c < in; c++)
            ck_assert(fabs(y[r * in + c] - 2.0 * 0.5 * w[ids[r] * in + c]) <= 1.0 / 127 + 1e-6);
    ck_assert_msg(qb->ops->sync(qb, err, sizeof err) == 0, "%s", err);
    qb->ops->weight_free(qb, &W);
    qb->ops->weight_free(qb, &B);
    qb->ops->dealloc(qb, dx);
    qb->ops->dealloc(qb, dy);
    qb->ops->dealloc(qb, dids);
    qb->ops->destroy(qb);
    free(x), free(w), free(b), free(y);
}
END_TEST

/* --- bias_act ----------------------------------------------------------- */

static double ref_act(double v, td_activation act)
{
    switch (act) {
    case TD_ACT_RELU: return v > 0 ? v : 0;
    case TD_ACT_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case TD_ACT_GELU_NEW:
        return 0.5 * v *
               (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) *
                               (v + 0.044715 * v * v * v)));
    case TD_ACT_SILU: return v / (1.0 + exp(-v));
    case TD_ACT_NONE: default: return v;
    }
}

START_TEST(test_bias_act)
{
    rng_seed(2);
    const td_activation acts[] = {TD_ACT_NONE, TD_ACT_RELU, TD_ACT_GELU,
                                  TD_ACT_GELU_NEW, TD_ACT_SILU};
    const int64_t shapes[][2] = {{1, 1}, {7, 33}, {1, 513}, {33, 513}};
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
        for (size_t sh = 0; sh < 4; sh++)
            for (int with_bias = 0; with_bias <= 1; with_bias++) {
                const int64_t n = shapes[sh][0], d = shapes[sh][1];
                float *x = frand_vec((size_t)(n * d), 6.0f);
                float *b = frand_vec((size_t)d, 2.0f);
                double *ref = xmalloc((size_t)(n * d) * sizeof *ref);
                for (int64_t r = 0; r < n; r++)
                    for (int64_t i = 0; i < d; i++)
                        ref[r * d + i] = ref_act(
                            (double)(with_bias ? x[r * d + i] + b[i]
                                               : x[r * d + i]),
                            acts[a]);
                td_weight B = weight_from(b, 1, d);
                float *dx = dev_from(x, (size_t)(n * d) * sizeof(float));
                be->ops->bias_act(be, dx, n, d, with_bias ? &B : NULL, acts[a]);
                to_host(x, dx, (size_t)(n * d) * sizeof(float));
                char what[64];
                snprintf(what, sizeof what, "bias_act act=%d n=%lld d=%lld bias=%d",
                         (int)acts[a], (long long)n, (long long)d, with_bias);
                ASSERT_CLOSE(what, x, ref, (size_t)(n * d), TOL_ABS, TOL_REL);
                be->ops->weight_free(be, &B);
                be->ops->dealloc(be, dx);
                free(x), free(b), free(ref);
            }
}
END_TEST

/* The bias_act row of every instruction set against the plain-C row
 * (td_act per element) on awkward widths (tails of 1..7 lanes), with and
 * without a bias, over [-100, 100] and the edges: 0, -0, NaN, +-inf, the
 * clamp at 88 and just inside it, tiny values. No activation, ReLU and the
 * GELUs give the plain-C bits; SiLU is within 4 ulp of it, or both below
 * 1e-35 in magnitude (v < -88, where the vector row gives -0); NaN where
 * the plain-C row gives NaN. */
START_TEST(test_bias_act_isa)
{
    rng_seed(11);
    const td_activation acts[] = {TD_ACT_NONE, TD_ACT_RELU, TD_ACT_GELU,
                                  TD_ACT_GELU_NEW, TD_ACT_SILU};
    const int64_t widths[] = {1, 7, 8, 9, 33, 1027};
    const float edges[] = {0.0f,   -0.0f,  NAN,     INFINITY, -INFINITY, 88.0f,  -88.0f,
                           88.5f,  -88.5f, 87.9f,   -87.9f,   89.0f,     -89.0f, 1e-30f,
                           -1e-30f, 20.0f, -20.0f,  1e-3f,    -1e-3f,    100.0f, -100.0f};
    const size_t n_edges = sizeof edges / sizeof edges[0];
    const td_cpu_isa top = td_cpu_isa_max(), saved = td_cpu_isa_get();
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (int with_bias = 0; with_bias <= 1; with_bias++) {
                const int64_t d = widths[wi];
                float *x = frand_vec((size_t)d, 100.0f);
                float *b = frand_vec((size_t)d, 1.0f);
                for (int64_t i = 0; i < d; i += 3) /* the edges, spread over the row */
                    x[i] = edges[(size_t)(i / 3) % n_edges];
                float *ref = xmalloc((size_t)d * sizeof *ref), *got = xmalloc((size_t)d * sizeof *got);
                memcpy(ref, x, (size_t)d * sizeof *ref);
                td_cpu_bias_act_row_ref(ref, with_bias ? b : NULL, d, acts[a]);
                for (int isa = TD_CPU_ISA_SCALAR; isa <= (int)top; isa++) {
                    td_cpu_isa_set((td_cpu_isa)isa);
                    memcpy(got, x, (size_t)d * sizeof *got);
                    td_cpu_bias_act_row(got, with_bias ? b : NULL, d, acts[a]);
                    for (int64_t i = 0; i < d; i++) {
#define BA_MSG "isa %d act %d d %lld bias %d col %lld: x %g -> %g, want %g"
#define BA_ARGS isa, (int)acts[a], (long long)d, with_bias, (long long)i, (double)x[i], \
                (double)got[i], (double)ref[i]
                        if (isnan(ref[i])) {
                            ck_assert_msg(isnan(got[i]), BA_MSG, BA_ARGS);
                        } else if (acts[a] != TD_ACT_SILU || isinf(ref[i])) {
                            ck_assert_msg(memcmp(&got[i], &ref[i], sizeof(float)) == 0, BA_MSG, BA_ARGS);
                        } else if (fabsf(ref[i]) < 1e-35f) {
                            ck_assert_msg(fabsf(got[i]) < 1e-35f, BA_MSG, BA_ARGS);
                        } else {
                            ck_assert_msg(fabs((double)got[i] - (double)ref[i]) <=
                                              4 * 1.1920929e-7 * fabs((double)ref[i]),
                                          BA_MSG, BA_ARGS);
                        }
#undef BA_MSG
#undef BA_ARGS
                    }
                }
                td_cpu_isa_set(saved);
                free(x), free(b), free(ref), free(got);
            }
}
END_TEST

/* --- layer_norm --------------------------------------------------------- */

enum ln_alias { LN_SEPARATE, LN_Y_IS_X, LN_Y_IS_RES, LN_SUM_IS_RES };

static void check_layer_norm(int64_t n, int64_t d, int with_res, int with_sum,
                             enum ln_alias alias)
{
    const size_t nd = (size_t)(n * d), bytes = nd * sizeof(float);
    float *x = frand_vec(nd, 3.0f), *res = frand_vec(nd, 1.0f);
    for (size_t i = 0; i < nd; i++)
        x[i] += 0.5f; /* a non-zero mean */
    float *g = frand_vec((size_t)d, 1.0f), *bt = frand_vec((size_t)d, 1.0f);
    double *ref = xmalloc(nd * sizeof *ref), *ref_sum = xmalloc(nd * sizeof *ref_sum);
    const float eps = 1e-5f;
    for (int64_t r = 0; r < n; r++) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; i++) {
            /* the sum is a float32 tensor in the model */
            float s = with_res ? x[r * d + i] + res[r * d + i] : x[r * d + i];
            ref_sum[r * d + i] = s;
            mean += s;
        }
        mean /= (double)d;
        for (int64_t i = 0; i < d; i++)
            var += (ref_sum[r * d + i] - mean) * (ref_sum[r * d + i] - mean);
        var /= (double)d;
        for (int64_t i = 0; i < d; i++)
            ref[r * d + i] =
                (ref_sum[r * d + i] - mean) / sqrt(var + eps) * g[i] + bt[i];
    }
    td_weight G = weight_from(g, 1, d), B = weight_from(bt, 1, d);
    float *dx = dev_from(x, bytes), *dres = dev_from(res, bytes);
    float *dy = be->ops->alloc(be, bytes), *dsum = be->ops->alloc(be, bytes);
    ck_assert_ptr_nonnull(dy);
    ck_assert_ptr_nonnull(dsum);
    float *y = dy;
    if (alias == LN_Y_IS_X)
        y = dx;
    else if (alias == LN_Y_IS_RES)
        y = dres;
    float *sum_out = !with_sum ? NULL : alias == LN_SUM_IS_RES ? dres : dsum;
    be->ops->layer_norm(be, y, dx, with_res ? dres : NULL, sum_out, n, d, &G,
                        &B, eps);
    float *got = xmalloc(bytes);
    char what[96];
    snprintf(what, sizeof what, "layer_norm n=%lld d=%lld res=%d sum=%d alias=%d",
             (long long)n, (long long)d, with_res, with_sum, (int)alias);
    to_host(got, y, bytes);
    ASSERT_CLOSE(what, got, ref, nd, TOL_ABS, TOL_REL);
    if (with_sum) {
        to_host(got, sum_out, bytes);
        ASSERT_CLOSE(what, got, ref_sum, nd, 0.0, 0.0); /* exact float sum */
    }
    be->ops->weight_free(be, &G);
    be->ops->weight_free(be, &B);
    be->ops->dealloc(be, dx);
    be->ops->dealloc(be, dres);
    be->ops->dealloc(be, dy);
    be->ops->dealloc(be, dsum);
    free(x), free(res), free(g), free(bt), free(ref), free(ref_sum), free(got);
}

START_TEST(test_layer_norm)
{
    rng_seed(3);
    const int64_t shapes[][2] = {{1, 7}, {7, 33}, {33, 513}, {513, 33}, {3, 1}};
    for (size_t sh = 0; sh < 5; sh++) {
        const int64_t n = shapes[sh][0], d = shapes[sh][1];
        check_layer_norm(n, d, 0, 0, LN_SEPARATE);
        check_layer_norm(n, d, 0, 0, LN_Y_IS_X);
        check_layer_norm(n, d, 1, 0, LN_SEPARATE);
        check_layer_norm(n, d, 1, 1, LN_SEPARATE);
        check_layer_norm(n, d, 1, 1, LN_Y_IS_X);
        check_layer_norm(n, d, 1, 0, LN_Y_IS_RES);
        check_layer_norm(n, d, 1, 1, LN_Y_IS_RES);
        check_layer_norm(n, d, 1, 1, LN_SUM_IS_RES);
        check_layer_norm(n, d, 0, 1, LN_SEPARATE);
    }
}
END_TEST

/* --- add, embed, rope, gather_rows, scatter_rows, rope_rows -------------- */

START_TEST(test_add)
{
    rng_seed(4);
    const int64_t n = 33, d = 513;
    const size_t nd = (size_t)(n * d);
    float *x = frand_vec(nd, 1.0f), *y = frand_vec(nd, 1.0f);
    double *ref = xmalloc(nd * sizeof *ref);
    for (size_t i = 0; i < nd; i++)
        ref[i] = (float)(y[i] + x[i]);
    float *dx = dev_from(x, nd * sizeof(float)), *dy = dev_from(y, nd * sizeof(float));
    be->ops->add(be, dy, dx, n, d);
    to_host(y, dy, nd * sizeof(float));
    ASSERT_CLOSE("add", y, ref, nd, 0.0, 0.0);
    be->ops->dealloc(be, dx);
    be->ops->dealloc(be, dy);
    free(x), free(y), free(ref);
}
END_TEST

START_TEST(test_embed)
{
    rng_seed(5);
    const int64_t vocab = 37, d = 33, n = 7, max_pos = 13;
    float *table = frand_vec((size_t)(vocab * d), 1.0f);
    float *pos = frand_vec((size_t)(max_pos * d), 1.0f);
    const int32_t ids[7] = {0, 36, 5, 5, 17, 1, 36};
    const int32_t positions[7] = {0, 1, 2, 12, 0, 7, 3};
    const float scale = sqrtf((float)d);
    td_weight T = weight_from(table, vocab, d);
    float *dpos = dev_from(pos, (size_t)(max_pos * d) * sizeof(float));
    int32_t *dids = dev_from(ids, sizeof ids), *dposi = dev_from(positions, sizeof positions);
    float *dy = be->ops->alloc(be, (size_t)(n * d) * sizeof(float));
    ck_assert_ptr_nonnull(dy);
    float *y = xmalloc((size_t)(n * d) * sizeof *y);
    double *ref = xmalloc((size_t)(n * d) * sizeof *ref);
    for (int with_pos = 0; with_pos <= 1; with_pos++) {
        for (int64_t r = 0; r < n; r++)
            for (int64_t i = 0; i < d; i++)
                ref[r * d + i] = (double)table[ids[r] * d + i] * scale +
                                 (with_pos ? pos[positions[r] * d + i] : 0.0);
        be->ops->embed(be, dy, &T, dids, n, scale, with_pos ? dpos : NULL,
                       with_pos ? dposi : NULL);
        to_host(y, dy, (size_t)(n * d) * sizeof(float));
        ASSERT_CLOSE(with_pos ? "embed+pos" : "embed", y, ref, (size_t)(n * d),
                     TOL_ABS, TOL_REL);
    }
    be->ops->weight_free(be, &T);
    be->ops->dealloc(be, dpos);
    be->ops->dealloc(be, dids);
    be->ops->dealloc(be, dposi);
    be->ops->dealloc(be, dy);
    free(table), free(pos), free(y), free(ref);
}
END_TEST

START_TEST(test_rope)
{
    rng_seed(6);
    const int n_seq = 2, n_t = 7, n_heads = 3, hd = 10, half = hd / 2, pos0 = 5;
    const int64_t ld = n_heads * hd + 3, seq_stride = (n_t + 1) * ld;
    const int max_pos = pos0 + n_t;
    float *cs = xmalloc((size_t)(max_pos * hd) * sizeof *cs);
    for (int p = 0; p < max_pos; p++)
        for (int i = 0; i < half; i++) {
            double theta = pow(10000.0, -2.0 * i / hd);
            cs[p * hd + i] = (float)cos(p * theta);
            cs[p * hd + half + i] = (float)sin(p * theta);
        }
    const size_t total = (size_t)(n_seq * seq_stride);
    float *x = frand_vec(total, 1.0f);
    double *ref = xmalloc(total * sizeof *ref);
    for (size_t i = 0; i < total; i++)
        ref[i] = x[i]; /* padding stays as it was */
    for (int s = 0; s < n_seq; s++)
        for (int t = 0; t < n_t; t++)
            for (int h = 0; h < n_heads; h++)
                for (int i = 0; i < half; i++) {
                    const int64_t o = s * seq_stride + t * ld + h * hd;
                    const double c = cs[(pos0 + t) * hd + i];
                    const double sn = cs[(pos0 + t) * hd + half + i];
                    const double x1 = x[o + i], x2 = x[o + half + i];
                    ref[o + i] = x1 * c - x2 * sn;
                    ref[o + half + i] = x2 * c + x1 * sn;
                }
    float *dx = dev_from(x, total * sizeof(float));
    float *dcs = dev_from(cs, (size_t)(max_pos * hd) * sizeof(float));
    be->ops->rope(be, dx, n_seq, n_t, ld, seq_stride, n_heads, hd, pos0, dcs);
    to_host(x, dx, total * sizeof(float));
    ASSERT_CLOSE("rope", x, ref, total, TOL_ABS, TOL_REL);
    be->ops->dealloc(be, dx);
    be->ops->dealloc(be, dcs);
    free(cs), free(x), free(ref);
}
END_TEST

START_TEST(test_gather_rows)
{
    rng_seed(7);
    const int64_t n_src = 9, n = 7, row_elems = 33, ld = 40;
    float *src = frand_vec((size_t)(n_src * ld), 1.0f);
    const int32_t index[7] = {8, 0, 0, 3, 7, 8, 1};
    float *dst = xmalloc((size_t)(n * ld) * sizeof *dst);
    double *ref = xmalloc((size_t)(n * ld) * sizeof *ref);
    for (int64_t i = 0; i < n * ld; i++)
        dst[i] = SENTINEL, ref[i] = SENTINEL;
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < row_elems; i++)
            ref[r * ld + i] = src[index[r] * ld + i];
    float *dsrc = dev_from(src, (size_t)(n_src * ld) * sizeof(float));
    float *ddst = dev_from(dst, (size_t)(n * ld) * sizeof(float));
    int32_t *didx = dev_from(index, sizeof index);
    be->ops->gather_rows(be, ddst, dsrc, didx, n, row_elems, ld, NULL);
    to_host(dst, ddst, (size_t)(n * ld) * sizeof(float));
    ASSERT_CLOSE("gather_rows", dst, ref, (size_t)(n * ld), 0.0, 0.0);

    /* with a length per row: only each row's prefix is copied (0, short,
     * odd, beyond row_elems = all of it, negative = nothing) */
    const int32_t lens[7] = {0, 5, 33, 1, 100, 17, -3};
    for (int64_t i = 0; i < n * ld; i++)
        dst[i] = SENTINEL, ref[i] = SENTINEL;
    for (int64_t r = 0; r < n; r++) {
        int64_t len = lens[r] < 0 ? 0 : lens[r] > row_elems ? row_elems : lens[r];
        for (int64_t i = 0; i < len; i++)
            ref[r * ld + i] = src[index[r] * ld + i];
    }
    be->ops->upload(be, ddst, dst, (size_t)(n * ld) * sizeof(float));
    int32_t *dlen = dev_from(lens, sizeof lens);
    be->ops->gather_rows(be, ddst, dsrc, didx, n, row_elems, ld, dlen);
    to_host(dst, ddst, (size_t)(n * ld) * sizeof(float));
    ASSERT_CLOSE("gather_rows with row_len", dst, ref, (size_t)(n * ld), 0.0, 0.0);
    be->ops->dealloc(be, dlen);
    be->ops->dealloc(be, dsrc);
    be->ops->dealloc(be, ddst);
    be->ops->dealloc(be, didx);
    free(src), free(dst), free(ref);
}
END_TEST

/* Scatter n rows (the inverse of gather_rows) into n + 3 destination rows
 * through a permutation, with different source and destination strides:
 * the named rows get the source rows, the others keep their contents. */
static void check_scatter(int64_t n, int64_t row_elems, int64_t ld_src,
                          int64_t ld_dst)
{
    const int64_t n_dst = n + 3;
    float *src = frand_vec((size_t)(n * ld_src), 1.0f);
    int32_t *index = xmalloc((size_t)(n ? n : 1) * sizeof *index);
    int32_t *perm = xmalloc((size_t)n_dst * sizeof *perm);
    for (int64_t i = 0; i < n_dst; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = n_dst - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)((frand() + 1.0f) * 0.5f * (float)(i + 1));
        j = j > i ? i : j;
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int64_t r = 0; r < n; r++)
        index[r] = perm[r];
    const size_t nd = (size_t)(n_dst * ld_dst);
    float *dst = xmalloc(nd * sizeof *dst);
    double *ref = xmalloc(nd * sizeof *ref);
    for (size_t i = 0; i < nd; i++)
        dst[i] = SENTINEL, ref[i] = SENTINEL;
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < row_elems; i++)
            ref[index[r] * ld_dst + i] = src[r * ld_src + i];
    float *dsrc = dev_from(src, (size_t)(n ? n * ld_src : 1) * sizeof(float));
    float *ddst = dev_from(dst, nd * sizeof(float));
    int32_t *didx = dev_from(index, (size_t)(n ? n : 1) * sizeof(int32_t));
    be->ops->scatter_rows(be, ddst, ld_dst, dsrc, ld_src, didx, n, row_elems);
    to_host(dst, ddst, nd * sizeof(float));
    char what[96];
    snprintf(what, sizeof what, "scatter_rows n=%lld elems=%lld ld_src=%lld ld_dst=%lld",
             (long long)n, (long long)row_elems, (long long)ld_src, (long long)ld_dst);
    ASSERT_CLOSE(what, dst, ref, nd, 0.0, 0.0);
    /* gather_rows with the same index brings the rows back (same ld) */
    if (ld_src == ld_dst && n > 0) {
        float *back = xmalloc((size_t)(n * ld_src) * sizeof *back);
        double *want = xmalloc((size_t)(n * ld_src) * sizeof *want);
        for (int64_t i = 0; i < n * ld_src; i++)
            back[i] = SENTINEL, want[i] = SENTINEL;
        for (int64_t r = 0; r < n; r++)
            for (int64_t i = 0; i < row_elems; i++)
                want[r * ld_src + i] = src[r * ld_src + i];
        float *dback = dev_from(back, (size_t)(n * ld_src) * sizeof(float));
        be->ops->gather_rows(be, dback, ddst, didx, n, row_elems, ld_src, NULL);
        to_host(back, dback, (size_t)(n * ld_src) * sizeof(float));
        ASSERT_CLOSE("gather_rows after scatter_rows", back, want,
                     (size_t)(n * ld_src), 0.0, 0.0);
        be->ops->dealloc(be, dback);
        free(back), free(want);
    }
    be->ops->dealloc(be, dsrc);
    be->ops->dealloc(be, ddst);
    be->ops->dealloc(be, didx);
    free(src), free(index), free(perm), free(dst), free(ref);
}

START_TEST(test_scatter_rows)
{
    rng_seed(8);
    static const int64_t ns[5] = {0, 1, 7, 33, 513};
    static const int64_t elems[4] = {1, 7, 33, 513};
    for (int a = 0; a < 5; a++)
        for (int e = 0; e < 4; e++) {
            check_scatter(ns[a], elems[e], elems[e], elems[e] + 3);
            check_scatter(ns[a], elems[e], elems[e] + 5, elems[e] + 5);
        }
    check_scatter(7, 0, 4, 4); /* row_elems 0: nothing to copy */
}
END_TEST

/* The cos|sin table of rope for max_pos positions of head_dim. */
static float *rope_table(int max_pos, int hd)
{
    const int half = hd / 2;
    float *cs = xmalloc((size_t)(max_pos * hd) * sizeof *cs);
    for (int p = 0; p < max_pos; p++)
        for (int i = 0; i < half; i++) {
            double theta = pow(10000.0, -2.0 * i / hd);
            cs[p * hd + i] = (float)cos(p * theta);
            cs[p * hd + half + i] = (float)sin(p * theta);
        }
    return cs;
}

/* rope_rows on n rows at scattered positions: against the double
 * reference, and bit for bit against rope applied to each row alone at
 * the same position (backend.h promises the same arithmetic). */
static void check_rope_rows(int64_t n, int n_heads, int hd)
{
    const int half = hd / 2, max_pos = 70;
    const int64_t ld = n_heads * hd + 3;
    float *cs = rope_table(max_pos, hd);
    int32_t *pos = xmalloc((size_t)(n ? n : 1) * sizeof *pos);
    for (int64_t r = 0; r < n; r++) /* repeated, descending, the last row */
        pos[r] = r == 0 ? max_pos - 1 : (int32_t)((r * 37 + 11) % max_pos);
    const size_t total = (size_t)(n * ld);
    float *x = frand_vec(total, 1.0f);
    double *ref = xmalloc((total ? total : 1) * sizeof *ref);
    for (size_t i = 0; i < total; i++)
        ref[i] = x[i]; /* padding stays as it was */
    for (int64_t r = 0; r < n; r++)
        for (int h = 0; h < n_heads; h++)
            for (int i = 0; i < half; i++) {
                const int64_t o = r * ld + h * hd;
                const double c = cs[pos[r] * hd + i], sn = cs[pos[r] * hd + half + i];
                const double x1 = x[o + i], x2 = x[o + half + i];
                ref[o + i] = x1 * c - x2 * sn;
                ref[o + half + i] = x2 * c + x1 * sn;
            }
    float *dx = dev_from(x, (total ? total : 1) * sizeof(float));
    float *dx1 = dev_from(x, (total ? total : 1) * sizeof(float));
    float *dcs = dev_from(cs, (size_t)(max_pos * hd) * sizeof(float));
    int32_t *dpos = dev_from(pos, (size_t)(n ? n : 1) * sizeof(int32_t));
    be->ops->rope_rows(be, dx, n, ld, n_heads, hd, dpos, dcs);
    for (int64_t r = 0; r < n; r++)
        be->ops->rope(be, dx1 + r * ld, 1, 1, ld, ld, n_heads, hd, pos[r], dcs);
    float *got = xmalloc((total ? total : 1) * sizeof *got);
    float *one = xmalloc((total ? total : 1) * sizeof *one);
    to_host(got, dx, total * sizeof(float));
    to_host(one, dx1, total * sizeof(float));
    char what[96];
    snprintf(what, sizeof what, "rope_rows n=%lld heads=%d hd=%d", (long long)n,
             n_heads, hd);
    ASSERT_CLOSE(what, got, ref, total, TOL_ABS, TOL_REL);
    size_t diff = 0;
    for (size_t i = 0; i < total; i++)
        diff += memcmp(&got[i], &one[i], sizeof(float)) != 0;
    ck_assert_msg(diff == 0, "%s: %zu of %zu values not bit-identical to rope", what,
                  diff, total);
    be->ops->dealloc(be, dx);
    be->ops->dealloc(be, dx1);
    be->ops->dealloc(be, dcs);
    be->ops->dealloc(be, dpos);
    free(cs), free(pos), free(x), free(ref), free(got), free(one);
}

START_TEST(test_rope_rows)
{
    rng_seed(9);
    static const int64_t ns[5] = {0, 1, 7, 33, 513};
    static const int hds[3] = {2, 10, 64};
    for (int a = 0; a < 5; a++)
        for (int h = 0; h < 3; h++)
            check_rope_rows(ns[a], 1 + (a + h) % 3, hds[h]);

    /* one call over a (n_seq, n_t) block: the same bits as rope over it */
    const int n_seq = 3, n_t = 7, heads = 2, hd = 64, pos0 = 9, max_pos = 20;
    const int64_t ld = heads * hd + 1, ss = n_t * ld; /* rows contiguous */
    const size_t total = (size_t)(n_seq * ss);
    float *cs = rope_table(max_pos, hd), *x = frand_vec(total, 1.0f);
    int32_t pos[3 * 7];
    for (int r = 0; r < n_seq * n_t; r++)
        pos[r] = pos0 + r % n_t;
    float *da = dev_from(x, total * sizeof(float)), *db = dev_from(x, total * sizeof(float));
    float *dcs = dev_from(cs, (size_t)(max_pos * hd) * sizeof(float));
    int32_t *dpos = dev_from(pos, sizeof pos);
    be->ops->rope(be, da, n_seq, n_t, ld, ss, heads, hd, pos0, dcs);
    be->ops->rope_rows(be, db, (int64_t)n_seq * n_t, ld, heads, hd, dpos, dcs);
    float *a = xmalloc(total * sizeof *a), *b = xmalloc(total * sizeof *b);
    to_host(a, da, total * sizeof(float));
    to_host(b, db, total * sizeof(float));
    ck_assert_msg(memcmp(a, b, total * sizeof(float)) == 0,
                  "rope_rows over a block differs from rope");
    be->ops->dealloc(be, da);
    be->ops->dealloc(be, db);
    be->ops->dealloc(be, dcs);
    be->ops->dealloc(be, dpos);
    free(cs), free(x), free(a), free(b);
}
END_TEST

/* --- attention ------------------------------------------------------------ */

typedef struct attn_spec {
    const char *name;
    int n_seq, n_kseq, n_q, n_k, kv_cap, n_heads, head_dim;
    int pad_q, pad_kv, pad_out, pad_probs; /* extra columns per row */
    const int32_t *kv_index;               /* host, (n_seq) or NULL */
    const int32_t *kv_len;                 /* host, (n_seq) or NULL */
    int causal, q_pos0;
    const int32_t *q_pos;                  /* host, (n_seq) or NULL */
    int rel_max, use_rel_k, use_rel_v;
    int capture;
    /* Fill key/value rows that no query may see with NaN: the CPU backend
     * promises never to read them (an unwritten KV cache tail). */
    int nan_tail;
} attn_spec;

/* Absolute position of query row i of sequence s (backend.h: pos(s, i)). */
static int attn_pos(const attn_spec *sp, int s, int i)
{
    return (sp->q_pos ? sp->q_pos[s] : sp->q_pos0) + i;
}

static int attn_visible(const attn_spec *sp, int s, int i, int j)
{
    if (j >= sp->n_k)
        return 0;
    if (sp->kv_len && j >= sp->kv_len[s])
        return 0;
    if (sp->causal && j > attn_pos(sp, s, i))
        return 0;
    return 1;
}

static int attn_rel_index(const attn_spec *sp, int s, int i, int j)
{
    int r = j - attn_pos(sp, s, i);
    r = r < -sp->rel_max ? -sp->rel_max : r > sp->rel_max ? sp->rel_max : r;
    return r + sp->rel_max;
}

/* Runs one attention case on the backend and compares out (including the
 * untouched padding) and, when captured, probs with a double reference. */
static void check_attention_isa(const attn_spec *sp);

/* Every attention case under every instruction set the CPU has (the row
 * loop's dot products and sums are AVX2 twins where the CPU allows). */
static void check_attention(const attn_spec *sp)
{
    const td_cpu_isa top = td_cpu_isa_max(), saved = td_cpu_isa_get();
    for (int isa = TD_CPU_ISA_SCALAR; isa <= (int)top; isa++) {
        td_cpu_isa_set((td_cpu_isa)isa);
        check_attention_isa(sp);
    }
    td_cpu_isa_set(saved);
}

static void check_attention_isa(const attn_spec *sp)
{
    const int H = sp->n_heads, hd = sp->head_dim;
    const int64_t ld_q = H * hd + sp->pad_q, ld_kv = H * hd + sp->pad_kv;
    const int64_t ld_out = H * hd + sp->pad_out;
    const int64_t q_ss = sp->n_q * ld_q, kv_ss = sp->kv_cap * ld_kv;
    const int64_t out_ss = sp->n_q * ld_out, probs_ld = sp->n_k + sp->pad_probs;
    const size_t nq_all = (size_t)(sp->n_seq * q_ss);
    const size_t nkv_all = (size_t)(sp->n_kseq * kv_ss);
    const size_t nout = (size_t)(sp->n_seq * out_ss);
    const size_t nprobs = (size_t)sp->n_seq * H * sp->n_q * probs_ld;
    const int n_rel = 2 * sp->rel_max + 1;

    float *q = frand_vec(nq_all, 1.0f / sqrtf((float)hd));
    float *k = frand_vec(nkv_all, 1.0f), *v = frand_vec(nkv_all, 1.0f);
    float *rk = frand_vec((size_t)(n_rel * hd), 0.5f);
    float *rv = frand_vec((size_t)(n_rel * hd), 0.5f);
    if (sp->nan_tail)
        for (int ks = 0; ks < sp->n_kseq; ks++)
            for (int j = 0; j < sp->kv_cap; j++) {
                int seen = 0;
                for (int s = 0; s < sp->n_seq && !seen; s++)
                    if ((sp->kv_index ? sp->kv_index[s] : s) == ks)
                        for (int i = 0; i < sp->n_q && !seen; i++)
                            seen = attn_visible(sp, s, i, j);
                if (!seen)
                    for (int64_t c = 0; c < ld_kv; c++)
                        k[ks * kv_ss + j * ld_kv + c] = NAN,
                        v[ks * kv_ss + j * ld_kv + c] = NAN;
            }

    double *ref = xmalloc(nout * sizeof *ref);
    double *ref_p = xmalloc((nprobs ? nprobs : 1) * sizeof *ref_p);
    double *l = xmalloc((size_t)(sp->n_k ? sp->n_k : 1) * sizeof *l);
    float *out = xmalloc(nout * sizeof *out);
    float *probs = xmalloc((nprobs ? nprobs : 1) * sizeof *probs);
    for (size_t i = 0; i < nout; i++)
        out[i] = SENTINEL, ref[i] = SENTINEL;
    for (size_t i = 0; i < nprobs; i++)
        probs[i] = SENTINEL, ref_p[i] = SENTINEL;

    for (int s = 0; s < sp->n_seq; s++) {
        const int ks = sp->kv_index ? sp->kv_index[s] : s;
        for (int h = 0; h < H; h++)
            for (int i = 0; i < sp->n_q; i++) {
                const float *qi = q + s * q_ss + i * ld_q + h * hd;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < sp->n_k; j++) {
                    if (!attn_visible(sp, s, i, j))
                        continue;
                    const float *kj = k + ks * kv_ss + j * ld_kv + h * hd;
                    const float *rkj = rk + attn_rel_index(sp, s, i, j) * hd;
                    double t = 0;
                    for (int c = 0; c < hd; c++)
                        t += (double)qi[c] *
                             (kj[c] + (sp->use_rel_k ? (double)rkj[c] : 0.0));
                    l[j] = t;
                    mx = t > mx ? t : mx;
                }
                for (int j = 0; j < sp->n_k; j++)
                    if (attn_visible(sp, s, i, j))
                        sum += exp(l[j] - mx);
                double *o = ref + s * out_ss + i * ld_out + h * hd;
                double *pr = ref_p + (((int64_t)s * H + h) * sp->n_q + i) * probs_ld;
                for (int c = 0; c < hd; c++)
                    o[c] = 0.0;
                for (int j = 0; j < sp->n_k; j++) {
                    const int vis = attn_visible(sp, s, i, j);
                    const double p = vis ? exp(l[j] - mx) / sum : 0.0;
                    pr[j] = p;
                    if (!vis)
                        continue;
                    const float *vj = v + ks * kv_ss + j * ld_kv + h * hd;
                    const float *rvj = rv + attn_rel_index(sp, s, i, j) * hd;
                    for (int c = 0; c < hd; c++)
                        o[c] += p * (vj[c] + (sp->use_rel_v ? (double)rvj[c] : 0.0));
                }
            }
    }

    float *dq = dev_from(q, nq_all * sizeof(float));
    float *dk = dev_from(k, nkv_all * sizeof(float));
    float *dv = dev_from(v, nkv_all * sizeof(float));
    float *drk = dev_from(rk, (size_t)(n_rel * hd) * sizeof(float));
    float *drv = dev_from(rv, (size_t)(n_rel * hd) * sizeof(float));
    float *dout = dev_from(out, nout * sizeof(float));
    float *dprobs = dev_from(probs, (nprobs ? nprobs : 1) * sizeof(float));
    int32_t *dkvi = sp->kv_index ? dev_from(sp->kv_index, (size_t)sp->n_seq * 4) : NULL;
    int32_t *dkvl = sp->kv_len ? dev_from(sp->kv_len, (size_t)sp->n_seq * 4) : NULL;
    int32_t *dqpos = sp->q_pos ? dev_from(sp->q_pos, (size_t)sp->n_seq * 4) : NULL;
    td_attn_args a = {
        .q = dq, .k = dk, .v = dv, .out = dout,
        .n_seq = sp->n_seq, .n_q = sp->n_q, .n_k = sp->n_k,
        .n_heads = H, .head_dim = hd,
        .ld_q = ld_q, .q_seq_stride = q_ss,
        .ld_kv = ld_kv, .kv_seq_stride = kv_ss,
        .ld_out = ld_out, .out_seq_stride = out_ss,
        .kv_index = dkvi, .kv_len = dkvl,
        .causal = sp->causal, .q_pos0 = sp->q_pos0, .q_pos = dqpos,
        .rel_k = sp->use_rel_k ? drk : NULL,
        .rel_v = sp->use_rel_v ? drv : NULL,
        .rel_max = sp->rel_max,
        .probs = sp->capture ? dprobs : NULL, .probs_ld = probs_ld,
    };
    be->ops->attention(be, &a);
    to_host(out, dout, nout * sizeof(float));
    to_host(probs, dprobs, (nprobs ? nprobs : 1) * sizeof(float));

    char what[128];
    snprintf(what, sizeof what, "attention[%s] out", sp->name);
    ASSERT_CLOSE(what, out, ref, nout, TOL_ABS, TOL_REL);
    snprintf(what, sizeof what, "attention[%s] probs", sp->name);
    if (sp->capture) {
        ASSERT_CLOSE(what, probs, ref_p, nprobs, TOL_ABS, TOL_REL);
        /* (libcheck records every assertion, so loops count and assert once) */
        size_t bad = 0;
        for (size_t row = 0; row < nprobs / (size_t)probs_ld; row++) {
            const float *pr = probs + row * (size_t)probs_ld;
            const double *rp = ref_p + row * (size_t)probs_ld;
            double sum = 0, want = 0;
            for (int j = 0; j < sp->n_k; j++) {
                sum += pr[j];
                want += rp[j];
                /* masked entries are exactly zero */
                if (rp[j] == 0.0 && pr[j] != 0.0f && bad++ < 5)
                    fprintf(stderr, "%s: row %zu key %d masked but %g\n", what,
                            row, j, (double)pr[j]);
            }
            /* want is 1 for a row with a visible key, 0 otherwise */
            if (!(fabs(sum - want) <= 1e-5 &&
                  (want == 0.0 || fabs(want - 1.0) < 1e-12)) && bad++ < 5)
                fprintf(stderr, "%s: row %zu sums to %.9g, want %g\n", what,
                        row, sum, want);
        }
        ck_assert_msg(bad == 0, "%s: %zu masked entries or row sums wrong", what,
                      bad);
    } else {
        for (size_t i = 0; i < nprobs; i++)
            ref_p[i] = SENTINEL;
        ASSERT_CLOSE(what, probs, ref_p, nprobs, 0.0, 0.0); /* untouched */
    }

    be->ops->dealloc(be, dq);
    be->ops->dealloc(be, dk);
    be->ops->dealloc(be, dv);
    be->ops->dealloc(be, drk);
    be->ops->dealloc(be, drv);
    be->ops->dealloc(be, dout);
    be->ops->dealloc(be, dprobs);
    be->ops->dealloc(be, dkvi);
    be->ops->dealloc(be, dkvl);
    be->ops->dealloc(be, dqpos);
    free(q), free(k), free(v), free(rk), free(rv);
    free(ref), free(ref_p), free(l), free(out), free(probs);
}

START_TEST(test_attention_padding)
{
    rng_seed(10);
    /* Encoder self-attention over a padded batch; sequence 2 is empty, so
     * its rows see no key at all and must come out as zeros. */
    const int32_t kv_len[3] = {7, 3, 0};
    attn_spec sp = {.name = "padding", .n_seq = 3, .n_kseq = 3, .n_q = 7,
                    .n_k = 7, .kv_cap = 7, .n_heads = 3, .head_dim = 33,
                    .pad_q = 5, .pad_kv = 3, .pad_out = 2, .pad_probs = 4,
                    .kv_len = kv_len, .capture = 1};
    check_attention(&sp);
    sp.name = "padding nan-tail", sp.nan_tail = 1;
    check_attention(&sp);
    sp.name = "no kv_len", sp.kv_len = NULL, sp.capture = 0, sp.nan_tail = 0;
    check_attention(&sp);
    sp.name = "single", sp.n_seq = sp.n_kseq = 1, sp.n_q = sp.n_k = sp.kv_cap = 1;
    sp.n_heads = 1, sp.head_dim = 1, sp.capture = 1;
    check_attention(&sp);
}
END_TEST

START_TEST(test_attention_causal)
{
    rng_seed(11);
    /* Decoder self-attention: a prefix of 4 rows, then one decode step at
     * position 6 against a cache of capacity 9 (rows 7.. unwritten). */
    attn_spec sp = {.name = "causal prefix", .n_seq = 2, .n_kseq = 2, .n_q = 4,
                    .n_k = 4, .kv_cap = 9, .n_heads = 2, .head_dim = 7,
                    .pad_q = 1, .pad_probs = 1, .causal = 1, .capture = 1,
                    .nan_tail = 1};
    check_attention(&sp);
    sp.name = "causal decode", sp.n_q = 1, sp.n_k = 7, sp.q_pos0 = 6;
    check_attention(&sp);
    /* n_k covers the whole cache, the causal mask alone hides the tail */
    sp.name = "causal decode n_k=cap", sp.n_k = 9;
    check_attention(&sp);
    /* several new rows at once after a cached prefix */
    sp.name = "causal chunk", sp.n_q = 3, sp.n_k = 8, sp.q_pos0 = 4;
    check_attention(&sp);
    /* causal and kv_len together: kv_len hides more than the causal mask */
    const int32_t kv_len[2] = {5, 2};
    sp.name = "causal + kv_len", sp.kv_len = kv_len;
    check_attention(&sp);
}
END_TEST

START_TEST(test_attention_kv_index)
{
    rng_seed(12);
    /* Cross-attention: 2 sentences x 3 beams read their sentence's K/V. */
    const int32_t kv_index[6] = {0, 0, 0, 1, 1, 1};
    const int32_t kv_len[6] = {33, 33, 33, 20, 20, 20};
    attn_spec sp = {.name = "kv_index decode", .n_seq = 6, .n_kseq = 2,
                    .n_q = 1, .n_k = 33, .kv_cap = 33, .n_heads = 4,
                    .head_dim = 16, .pad_out = 3, .kv_index = kv_index,
                    .kv_len = kv_len, .capture = 1, .nan_tail = 1};
    check_attention(&sp);
    /* a reordered mapping, several query rows */
    const int32_t kv_index2[6] = {1, 0, 1, 0, 0, 1};
    const int32_t kv_len2[6] = {20, 33, 20, 33, 33, 20};
    sp.name = "kv_index prefix", sp.kv_index = kv_index2, sp.kv_len = kv_len2;
    sp.n_q = 7;
    check_attention(&sp);
}
END_TEST

/* The AVX2 row kernel for head dims of whole 8-float blocks up to 64 (no
 * relative terms) against the generic AVX2 row loop, bit for bit: the
 * generic loop is what a zero relative table selects (adding dot(q, 0) = +0
 * to a logit and fma(p, 0, acc) to a sum changes no value), so the two
 * calls differ only in the kernel. Decoder-step shapes: one or three query
 * rows, cached keys through kv_index and kv_len, key counts around the
 * four-key groups, head dims with and without an odd last block, and probs
 * captured. */
START_TEST(test_attention_row_bits)
{
    if (td_cpu_isa_max() < TD_CPU_ISA_AVX2)
        return;
    const td_cpu_isa saved = td_cpu_isa_set(TD_CPU_ISA_AVX2);
    rng_seed(29);
    const int hds[] = {8, 16, 24, 40, 64};
    const int nks[] = {1, 3, 4, 5, 8, 9, 13, 31};
    const int32_t kv_index[3] = {2, 0, 2};
    for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
        for (size_t ki = 0; ki < sizeof nks / sizeof nks[0]; ki++)
            for (int n_q = 1; n_q <= 3; n_q += 2) {
                const int hd = hds[hi], H = 2, n_k = nks[ki], n_seq = 3, R = 2;
                const int64_t ld = H * hd + 3, cap = n_k + 2;
                const int32_t kv_len[3] = {n_k, n_k > 1 ? n_k - 1 : 1, n_k};
                const size_t nq = (size_t)(n_seq * n_q * ld), nkv = (size_t)(3 * cap * ld);
                const size_t nprobs = (size_t)(n_seq * H * n_q * n_k);
                float *q = frand_vec(nq, 0.5f), *k = frand_vec(nkv, 1.0f), *v = frand_vec(nkv, 1.0f);
                float *zero = xmalloc((size_t)((2 * R + 1) * hd) * sizeof *zero);
                memset(zero, 0, (size_t)((2 * R + 1) * hd) * sizeof *zero);
                float *out[2], *probs[2];
                for (int pass = 0; pass < 2; pass++) {
                    float *dq = dev_from(q, nq * sizeof(float)), *dk = dev_from(k, nkv * sizeof(float));
                    float *dv = dev_from(v, nkv * sizeof(float));
                    float *dz = dev_from(zero, (size_t)((2 * R + 1) * hd) * sizeof(float));
                    float *dout = be->ops->alloc(be, (size_t)(n_seq * n_q * ld) * sizeof(float));
                    float *dprobs = be->ops->alloc(be, nprobs * sizeof(float));
                    int32_t *dkvi = dev_from(kv_index, sizeof kv_index);
                    int32_t *dkvl = dev_from(kv_len, sizeof kv_len);
                    td_attn_args a = {
                        .q = dq, .k = dk, .v = dv, .out = dout,
                        .n_seq = n_seq, .n_q = n_q, .n_k = n_k, .n_heads = H, .head_dim = hd,
                        .ld_q = ld, .q_seq_stride = n_q * ld, .ld_kv = ld, .kv_seq_stride = cap * ld,
                        .ld_out = ld, .out_seq_stride = n_q * ld,
                        .kv_index = dkvi, .kv_len = dkvl,
                        .rel_k = pass ? dz : NULL, .rel_v = pass ? dz : NULL, .rel_max = R,
                        .probs = dprobs, .probs_ld = n_k,
                    };
                    be->ops->attention(be, &a);
                    out[pass] = xmalloc((size_t)(n_seq * n_q * ld) * sizeof(float));
                    probs[pass] = xmalloc(nprobs * sizeof(float));
                    to_host(out[pass], dout, (size_t)(n_seq * n_q * ld) * sizeof(float));
                    to_host(probs[pass], dprobs, nprobs * sizeof(float));
                    be->ops->dealloc(be, dq), be->ops->dealloc(be, dk), be->ops->dealloc(be, dv);
                    be->ops->dealloc(be, dz), be->ops->dealloc(be, dout), be->ops->dealloc(be, dprobs);
                    be->ops->dealloc(be, dkvi), be->ops->dealloc(be, dkvl);
                }
                size_t bad = 0;
                for (int s = 0; s < n_seq; s++)
                    for (int i = 0; i < n_q; i++)
                        for (int c = 0; c < H * hd; c++) {
                            const size_t at = (size_t)((s * n_q + i) * ld + c);
                            bad += !(out[0][at] == out[1][at]);
                        }
                for (size_t i = 0; i < nprobs; i++)
                    bad += !(probs[0][i] == probs[1][i]);
                ck_assert_msg(bad == 0, "head_dim %d n_k %d n_q %d: %zu values differ", hd, n_k,
                              n_q, bad);
                for (int pass = 0; pass < 2; pass++)
                    free(out[pass]), free(probs[pass]);
                free(q), free(k), free(v), free(zero);
            }
    td_cpu_isa_set(saved);
}
END_TEST

START_TEST(test_attention_relative)
{
    rng_seed(13);
    const int32_t kv_len[2] = {7, 5};
    attn_spec sp = {.name = "rel_k small", .n_seq = 2, .n_kseq = 2, .n_q = 7,
                    .n_k = 7, .kv_cap = 7, .n_heads = 2, .head_dim = 9,
                    .pad_kv = 2, .pad_probs = 2, .kv_len = kv_len,
                    .rel_max = 2, .use_rel_k = 1, .capture = 1};
    check_attention(&sp);
    sp.name = "rel_k large", sp.rel_max = 16;
    check_attention(&sp);
    sp.name = "rel_k+v small", sp.rel_max = 2, sp.use_rel_v = 1;
    check_attention(&sp);
    sp.name = "rel_k+v large", sp.rel_max = 16;
    check_attention(&sp);
    sp.name = "rel_k+v zero", sp.rel_max = 0;
    check_attention(&sp);
    /* decoder: causal, decode step with a cache, relative keys and values */
    sp.name = "rel causal decode", sp.kv_len = NULL, sp.causal = 1;
    sp.n_q = 1, sp.n_k = 6, sp.kv_cap = 9, sp.q_pos0 = 5, sp.rel_max = 3;
    sp.nan_tail = 1;
    check_attention(&sp);
    /* large enough for the BLAS path if there were no relative terms */
    sp.name = "rel large", sp.causal = 0, sp.q_pos0 = 0, sp.nan_tail = 0;
    sp.n_seq = sp.n_kseq = 1, sp.n_q = sp.n_k = sp.kv_cap = 129;
    sp.head_dim = 64, sp.rel_max = 8;
    check_attention(&sp);
}
END_TEST

START_TEST(test_attention_medium)
{
    rng_seed(15);
    /* Shapes for the backend's per-pair sgemm path (each OpenMP thread does
     * whole heads): 33 query rows, a few thousand multiply-adds per head. */
    const int32_t kv_len[4] = {33, 20, 0, 1};
    attn_spec sp = {.name = "medium padding", .n_seq = 4, .n_kseq = 4,
                    .n_q = 33, .n_k = 33, .kv_cap = 40, .n_heads = 3,
                    .head_dim = 33, .pad_q = 1, .pad_kv = 2, .pad_out = 3,
                    .pad_probs = 1, .kv_len = kv_len, .capture = 1,
                    .nan_tail = 1};
    check_attention(&sp);
    sp.name = "medium causal chunk", sp.kv_len = NULL, sp.causal = 1;
    sp.n_q = 17, sp.q_pos0 = 16, sp.n_k = 40;
    check_attention(&sp);
    const int32_t kv_index[4] = {3, 3, 0, 0};
    const int32_t kv_len2[4] = {7, 7, 33, 33};
    sp.name = "medium kv_index", sp.causal = 0, sp.q_pos0 = 0, sp.n_q = 33;
    sp.n_k = 33, sp.kv_index = kv_index, sp.kv_len = kv_len2;
    check_attention(&sp);
}
END_TEST

START_TEST(test_attention_large)
{
    rng_seed(14);
    /* Shapes big enough for the backend's sgemm path (n_q * n_k * head_dim
     * over a million), with padding masks, capture and strides. */
    const int32_t kv_len[2] = {513, 300};
    attn_spec sp = {.name = "large padding", .n_seq = 2, .n_kseq = 2,
                    .n_q = 513, .n_k = 513, .kv_cap = 513, .n_heads = 2,
                    .head_dim = 64, .pad_q = 3, .pad_kv = 1, .pad_out = 5,
                    .pad_probs = 3, .kv_len = kv_len, .capture = 1,
                    .nan_tail = 1};
    check_attention(&sp);
    const int32_t kv_len0[2] = {0, 129};
    sp.name = "large empty sequence", sp.kv_len = kv_len0;
    check_attention(&sp);
    sp.name = "large causal chunk", sp.kv_len = NULL, sp.causal = 1;
    sp.n_q = 257, sp.q_pos0 = 256, sp.kv_cap = 600, sp.head_dim = 32;
    check_attention(&sp);
    /* the cache holds more rows than the chunk has seen: only the causal
     * mask bounds the keys (rows 513.. are NaN) */
    sp.name = "large causal cache", sp.n_k = 600;
    check_attention(&sp);
    sp.name = "large causal kv_index", sp.q_pos0 = 0, sp.n_k = 257;
    const int32_t kv_index[2] = {1, 1};
    sp.kv_index = kv_index, sp.capture = 0;
    check_attention(&sp);
    /* more heads than the backend keeps logits for at once (32 MiB) */
    const int32_t kv_len3[5] = {513, 1, 0, 400, 257};
    attn_spec many = {.name = "large many heads", .n_seq = 5, .n_kseq = 5,
                      .n_q = 513, .n_k = 513, .kv_cap = 513, .n_heads = 8,
                      .head_dim = 2, .kv_len = kv_len3, .capture = 1};
    check_attention(&many);
}
END_TEST

START_TEST(test_attention_q_pos)
{
    rng_seed(16);
    /* In-flight decoding: every sequence at its own step (q_pos), one new
     * row each, against a cache of capacity 9 whose rows beyond each
     * sequence's position are unwritten (NaN). q_pos0 is garbage: q_pos
     * must replace it. */
    const int32_t q_pos[4] = {0, 3, 8, 5};
    attn_spec sp = {.name = "q_pos decode", .n_seq = 4, .n_kseq = 4, .n_q = 1,
                    .n_k = 9, .kv_cap = 9, .n_heads = 3, .head_dim = 7,
                    .pad_q = 1, .pad_kv = 2, .pad_probs = 3, .causal = 1,
                    .q_pos0 = 1000, .q_pos = q_pos, .capture = 1, .nan_tail = 1};
    check_attention(&sp);
    /* kv_len per sequence, below and above the causal bound (0: no key) */
    const int32_t kv_len[4] = {1, 2, 9, 0};
    sp.name = "q_pos decode + kv_len", sp.kv_len = kv_len;
    check_attention(&sp);
    /* relative keys and values: distances from each sequence's own position */
    sp.name = "q_pos rel decode", sp.kv_len = NULL, sp.rel_max = 3;
    sp.use_rel_k = 1, sp.use_rel_v = 1;
    check_attention(&sp);
    /* several rows per sequence (a chunk after a prefix) with relative
     * terms, and without the causal mask (positions only in the distances) */
    const int32_t q_pos3[3] = {0, 2, 5};
    sp.name = "q_pos rel chunk", sp.n_seq = sp.n_kseq = 3, sp.n_q = 7;
    sp.n_k = 12, sp.kv_cap = 13, sp.q_pos = q_pos3, sp.rel_max = 2;
    check_attention(&sp);
    sp.name = "q_pos rel non-causal", sp.causal = 0, sp.nan_tail = 0;
    check_attention(&sp);
    /* the BLAS path (n_q >= 8, no relative terms): q_pos bounds the keys of
     * each sequence and of each row; 17 x 40 x 33 multiply-adds per head */
    const int32_t q_pos4[4] = {0, 16, 23, 5};
    const int32_t kv_len4[4] = {40, 40, 30, 40};
    sp = (attn_spec){.name = "q_pos blas causal", .n_seq = 4, .n_kseq = 4,
                     .n_q = 17, .n_k = 40, .kv_cap = 41, .n_heads = 3,
                     .head_dim = 33, .pad_q = 1, .pad_kv = 2, .pad_out = 3,
                     .pad_probs = 1, .causal = 1, .q_pos0 = -7, .q_pos = q_pos4,
                     .capture = 1, .nan_tail = 1};
    check_attention(&sp);
    sp.name = "q_pos blas causal + kv_len", sp.kv_len = kv_len4;
    check_attention(&sp);
    /* beams sharing their sentence's cache through kv_index, each at its
     * own position */
    const int32_t kv_index[4] = {1, 1, 0, 0};
    const int32_t q_pos5[4] = {2, 9, 0, 20};
    sp.name = "q_pos blas kv_index", sp.kv_len = NULL, sp.kv_index = kv_index;
    sp.q_pos = q_pos5, sp.n_q = 13; /* 13 x 40 x 33 >= the BLAS threshold */
    check_attention(&sp);
}
END_TEST

/* --- logprobs_topk ---------------------------------------------------------- */

/* Runs logprobs_topk on host rows and returns the in-place scores and the
 * top-k through the caller's buffers. */
static void run_topk(float *logits, int64_t n, int64_t vocab,
                     const int32_t *suppress, int n_suppress, int force_eos,
                     const int32_t *force_rows, int eos_id,
                     const float *row_bias, int k, float *val, int32_t *idx)
{
    const size_t lb = (size_t)(n * vocab) * sizeof(float);
    float *dl = dev_from(logits, lb);
    int32_t *dfr = force_rows ? dev_from(force_rows, (size_t)n * 4) : NULL;
    int32_t *ds = n_suppress ? dev_from(suppress, (size_t)n_suppress * 4) : NULL;
    float *db = row_bias ? dev_from(row_bias, (size_t)n * sizeof(float)) : NULL;
    float *dv = be->ops->alloc(be, (size_t)(n * k) * sizeof(float));
    int32_t *di = be->ops->alloc(be, (size_t)(n * k) * sizeof(int32_t));
    ck_assert_ptr_nonnull(dv);
    ck_assert_ptr_nonnull(di);
    be->ops->logprobs_topk(be, dl, n, vocab, ds, n_suppress, force_eos, dfr,
                           eos_id, db, k, dv, di);
    to_host(logits, dl, lb);
    to_host(val, dv, (size_t)(n * k) * sizeof(float));
    to_host(idx, di, (size_t)(n * k) * sizeof(int32_t));
    be->ops->dealloc(be, dl);
    be->ops->dealloc(be, dfr);
    be->ops->dealloc(be, ds);
    be->ops->dealloc(be, db);
    be->ops->dealloc(be, dv);
    be->ops->dealloc(be, di);
}

START_TEST(test_logprobs_topk_literal)
{
    /* log_softmax of {1, 3, 3, 2, 0}: ties between ids 1 and 2 go to 1. */
    float logits[5] = {1, 3, 3, 2, 0};
    float val[3];
    int32_t idx[3];
    run_topk(logits, 1, 5, NULL, 0, 0, NULL, 0, NULL, 3, val, idx);
    const double lse = log(exp(1.0) + 2 * exp(3.0) + exp(2.0) + exp(0.0));
    ck_assert_int_eq(idx[0], 1);
    ck_assert_int_eq(idx[1], 2);
    ck_assert_int_eq(idx[2], 3);
    ck_assert_msg(fabs(val[0] - (3.0 - lse)) < 1e-6, "val[0] %g", (double)val[0]);
    ck_assert_msg(fabs(val[2] - (2.0 - lse)) < 1e-6, "val[2] %g", (double)val[2]);

    /* suppress the best one, bias the row: ids 2, 3, 0 */
    float logits2[5] = {1, 3, 3, 2, 0}, bias = -10.0f;
    const int32_t sup[1] = {1};
    run_topk(logits2, 1, 5, sup, 1, 0, NULL, 0, &bias, 3, val, idx);
    ck_assert_int_eq(idx[0], 2);
    ck_assert_int_eq(idx[1], 3);
    ck_assert_int_eq(idx[2], 0);
    ck_assert(logits2[1] == -INFINITY);
    ck_assert(val[0] == logits2[2] + bias);

    /* forced EOS: eos first with 0 + bias, then -inf from the lowest ids */
    float logits3[5] = {1, 3, 3, 2, 0};
    run_topk(logits3, 1, 5, NULL, 0, 1, NULL, 3, &bias, 3, val, idx);
    ck_assert_int_eq(idx[0], 3);
    ck_assert(val[0] == -10.0f);
    ck_assert_int_eq(idx[1], 0);
    ck_assert_int_eq(idx[2], 1);
    ck_assert(val[1] == -INFINITY && val[2] == -INFINITY);
    for (int t = 0; t < 5; t++)
        ck_assert(logits3[t] == (t == 3 ? 0.0f : -INFINITY));

    /* forced per row: row 1 of 3 ends (its forced token, 3, is eos_id's),
     * rows 0 and 2 score as usual (-1: not forced) */
    float logits4[15] = {1, 3, 3, 2, 0, 1, 3, 3, 2, 0, 1, 3, 3, 2, 0};
    const int32_t force_rows[3] = {-1, 3, -1};
    float val4[8];
    int32_t idx4[8];
    run_topk(logits4, 3, 5, NULL, 0, 0, force_rows, 3, NULL, 2, val4, idx4);
    ck_assert_int_eq(idx4[0], 1);
    ck_assert_int_eq(idx4[1], 2);
    ck_assert_int_eq(idx4[2], 3);
    ck_assert(val4[2] == 0.0f);
    ck_assert_int_eq(idx4[3], 0);
    ck_assert(val4[3] == -INFINITY);
    ck_assert_int_eq(idx4[4], 1);
    ck_assert_int_eq(idx4[5], 2);
    ck_assert_msg(fabs(val4[4] - (3.0 - lse)) < 1e-6, "val4[4] %g", (double)val4[4]);
    for (int t = 0; t < 5; t++)
        ck_assert(logits4[5 + t] == (t == 3 ? 0.0f : -INFINITY));
    ck_assert(logits4[3] != -INFINITY && logits4[13] != -INFINITY);

    /* a target prefix: each row its own token, whatever eos_id says; id 0
     * is a token like any other; a token outside the vocabulary leaves the
     * row all -inf (ids from the lowest) */
    float logits5[20] = {1, 3, 3, 2, 0, 1, 3, 3, 2, 0, 1, 3, 3, 2, 0, 1, 3, 3, 2, 0};
    const int32_t prefix_rows[4] = {4, 0, -1, 9};
    run_topk(logits5, 4, 5, NULL, 0, 0, prefix_rows, 3, NULL, 2, val4 /* 8 */, idx4);
    ck_assert_int_eq(idx4[0], 4);
    ck_assert(val4[0] == 0.0f);
    ck_assert_int_eq(idx4[1], 0);
    ck_assert(val4[1] == -INFINITY);
    ck_assert_int_eq(idx4[2], 0);
    ck_assert(val4[2] == 0.0f);
    ck_assert_int_eq(idx4[3], 1);
    ck_assert_int_eq(idx4[4], 1);
    ck_assert_msg(fabs(val4[4] - (3.0 - lse)) < 1e-6, "val4[4] %g", (double)val4[4]);
    ck_assert_int_eq(idx4[6], 0);
    ck_assert_int_eq(idx4[7], 1);
    ck_assert(val4[6] == -INFINITY && val4[7] == -INFINITY);
    for (int t = 0; t < 5; t++) {
        ck_assert(logits5[t] == (t == 4 ? 0.0f : -INFINITY));
        ck_assert(logits5[5 + t] == (t == 0 ? 0.0f : -INFINITY));
        ck_assert(logits5[15 + t] == -INFINITY);
    }
}
END_TEST

typedef struct topk_ent {
    float v;
    int32_t id;
} topk_ent;

static int topk_cmp(const void *pa, const void *pb)
{
    const topk_ent *a = pa, *b = pb;
    if (a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* force_rows: 0 none, 1 every third row forced (rows 0, 3, ...) to a token
 * of its own, 2 all but every third row (to eos_id), -1 elsewhere. */
static void check_topk_case(int64_t n, int64_t vocab, int k, int with_sup,
                            int force_eos, int with_bias, int quantised,
                            int force_rows)
{
    const size_t nv = (size_t)(n * vocab);
    float *logits = frand_vec(nv, 4.0f);
    if (quantised) /* few distinct values: many exact ties */
        for (size_t i = 0; i < nv; i++)
            logits[i] = floorf(logits[i]) * 0.5f;
    const int32_t sup[3] = {0, 3, (int32_t)(vocab - 1)};
    const int n_sup = with_sup ? 3 : 0, eos = (int)(vocab / 2);
    float *bias = frand_vec((size_t)n, 1.0f);
    for (int64_t r = 0; r < n; r++)
        bias[r] = bias[r] * 3.0f - 2.0f;
    int32_t *frows = xmalloc((size_t)n * sizeof *frows);
    for (int64_t r = 0; r < n; r++)
        frows[r] = force_rows == 1   ? (r % 3 == 0 ? (int32_t)((r * 7 + 1) % vocab) : -1)
                   : force_rows == 2 ? (r % 3 != 0 ? eos : -1)
                                     : -1;
    double *ref = xmalloc(nv * sizeof *ref);
    for (int64_t r = 0; r < n; r++) {
        const float *x = logits + r * vocab;
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < vocab; t++)
            mx = x[t] > mx ? x[t] : mx;
        for (int64_t t = 0; t < vocab; t++)
            sum += exp(x[t] - mx);
        for (int64_t t = 0; t < vocab; t++)
            ref[r * vocab + t] = x[t] - mx - log(sum);
        for (int i = 0; i < n_sup; i++)
            ref[r * vocab + sup[i]] = -INFINITY;
        const int64_t f = force_eos ? eos : frows[r];
        if (f >= 0)
            for (int64_t t = 0; t < vocab; t++)
                ref[r * vocab + t] = t == f ? 0.0 : -INFINITY;
    }
    float *val = xmalloc((size_t)(n * k) * sizeof *val);
    int32_t *idx = xmalloc((size_t)(n * k) * sizeof *idx);
    run_topk(logits, n, vocab, sup, n_sup, force_eos,
             force_rows ? frows : NULL, eos, with_bias ? bias : NULL, k, val, idx);
    char what[128];
    snprintf(what, sizeof what,
             "logprobs n=%lld vocab=%lld k=%d sup=%d eos=%d rows=%d bias=%d q=%d",
             (long long)n, (long long)vocab, k, with_sup, force_eos, force_rows,
             with_bias, quantised);
    ASSERT_CLOSE(what, logits, ref, nv, TOL_ABS, TOL_REL);

    /* The order is checked exactly against a full sort of the returned
     * scores plus the bias, added in float32. */
    topk_ent *all = xmalloc((size_t)vocab * sizeof *all);
    size_t bad = 0;
    for (int64_t r = 0; r < n; r++) {
        const float b = with_bias ? bias[r] : 0.0f;
        for (int64_t t = 0; t < vocab; t++)
            all[t] = (topk_ent){logits[r * vocab + t] + b, (int32_t)t};
        qsort(all, (size_t)vocab, sizeof *all, topk_cmp);
        for (int i = 0; i < k; i++)
            if (!(idx[r * k + i] == all[i].id && val[r * k + i] == all[i].v) &&
                bad++ < 5)
                fprintf(stderr, "%s: row %lld rank %d: got (%d, %g), want (%d, %g)\n",
                        what, (long long)r, i, idx[r * k + i],
                        (double)val[r * k + i], all[i].id, (double)all[i].v);
    }
    ck_assert_msg(bad == 0, "%s: %zu top-k entries wrong", what, bad);
    free(logits), free(bias), free(frows), free(ref), free(val), free(idx), free(all);
}

START_TEST(test_logprobs_topk_random)
{
    rng_seed(20);
    for (int q = 0; q <= 1; q++)
        for (int sup = 0; sup <= 1; sup++)
            for (int bias = 0; bias <= 1; bias++) {
                check_topk_case(7, 513, 33, sup, 0, bias, q, 0);
                check_topk_case(7, 513, 1, sup, 0, bias, q, 0);
                check_topk_case(1, 7, 7, sup, 0, bias, q, 0); /* k == vocab */
                check_topk_case(33, 513, 7, sup, 1, bias, q, 0);
                check_topk_case(3, 33, 33, sup, 1, bias, q, 0);
            }
    check_topk_case(2, 4099, 64, 1, 0, 1, 1, 0);
}
END_TEST

/* A mix of forced and unforced rows (force_rows), alone and under the
 * batch-wide force_eos, which forces every row whatever force_rows says. */
START_TEST(test_logprobs_topk_force_rows)
{
    rng_seed(21);
    for (int q = 0; q <= 1; q++)
        for (int mode = 1; mode <= 2; mode++) {
            check_topk_case(7, 513, 33, 1, 0, 1, q, mode);
            check_topk_case(33, 513, 7, 0, 0, 1, q, mode);
            check_topk_case(1, 7, 7, 1, 0, 0, q, mode);
            check_topk_case(33, 33, 33, 1, 0, 0, q, mode);
            check_topk_case(7, 33, 4, 1, 1, 1, q, mode);
        }
    check_topk_case(2, 4099, 64, 1, 0, 1, 1, 1);
}
END_TEST

/* The random cases again under every instruction set the CPU has (the
 * plain-C rows, AVX2, AVX-512): each must pass the same exact checks. */
START_TEST(test_logprobs_topk_isa)
{
    const td_cpu_isa top = td_cpu_isa_max(), saved = td_cpu_isa_get();
    for (int isa = TD_CPU_ISA_SCALAR; isa <= (int)top; isa++) {
        td_cpu_isa_set((td_cpu_isa)isa);
        rng_seed(30 + (uint64_t)isa);
        for (int q = 0; q <= 1; q++)
            for (int sup = 0; sup <= 1; sup++) {
                check_topk_case(7, 513, 33, sup, 0, 1, q, 0);
                check_topk_case(3, 2049, 5, sup, 0, 1, q, 0); /* one block + 1 */
                check_topk_case(2, 4111, 64, sup, 0, 0, q, 1);
                check_topk_case(1, 7, 7, sup, 0, 1, q, 0);
                check_topk_case(5, 33, 4, sup, 1, 1, q, 2);
            }
    }
    td_cpu_isa_set(saved);
}
END_TEST

/* The polynomial exp against exp() in double over [-100, 0] and at -inf:
 * within 3 ulp where the result is normal, 0 (or below FLT_MIN) under. */
START_TEST(test_exp_neg)
{
    const td_cpu_isa top = td_cpu_isa_max(), saved = td_cpu_isa_get();
    enum { N = 200003 };
    float *x = xmalloc(N * sizeof *x), *y = xmalloc(N * sizeof *y);
    for (int i = 0; i < N; i++)
        x[i] = -100.0f * (float)i / (float)(N - 2);
    x[N - 1] = -INFINITY;
    for (int isa = TD_CPU_ISA_SCALAR; isa <= (int)top; isa++) {
        td_cpu_isa_set((td_cpu_isa)isa);
        for (int64_t n = 1; n <= 33; n += 16) { /* tails */
            td_cpu_exp_neg(y, x + 1000, n);
            for (int64_t i = 0; i < n; i++)
                ck_assert(fabs(y[i] - exp((double)x[1000 + i])) <=
                          3.6e-7 * exp((double)x[1000 + i]));
        }
        td_cpu_exp_neg(y, x, N);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            const double ref = exp((double)x[i]);
            if (ref < 1.17549435e-38) {
                ck_assert_msg(y[i] < 1.2e-38f && y[i] >= 0.0f, "isa %d: exp(%g) = %g",
                              isa, (double)x[i], (double)y[i]);
                continue;
            }
            const double rel = fabs(y[i] - ref) / ref;
            worst = rel > worst ? rel : worst;
        }
        ck_assert_msg(worst <= 3 * 1.1920929e-7, "isa %d: exp worst relative error %g",
                      isa, worst);
    }
    td_cpu_isa_set(saved);
    free(x), free(y);
}
END_TEST

/* Each instruction set's row against the plain-C row on vocabulary-sized
 * rows (8003 and 32000, several L1 blocks), with -inf logits, a NaN row, a
 * +inf row and an all -inf row: log-probs within 1e-6 relative, the same
 * top-k ids, the same NaN-ness. */
START_TEST(test_logprobs_row_vs_ref)
{
    const td_cpu_isa top = td_cpu_isa_max(), saved = td_cpu_isa_get();
    const int64_t vocabs[2] = {8003, 32000};
    const int32_t sup[2] = {0, 5};
    rng_seed(40);
    for (int vi = 0; vi < 2; vi++) {
        const int64_t V = vocabs[vi];
        for (int kind = 0; kind < 6; kind++) {
            float *x0 = frand_vec((size_t)V, 12.0f);
            if (kind == 1) /* the max late in the row: rescaled sums */
                for (int64_t t = 0; t < V; t++)
                    x0[t] += 20.0f * (float)t / (float)V;
            if (kind == 2)
                for (int64_t t = 0; t < V; t += 3)
                    x0[t] = -INFINITY;
            if (kind == 3)
                x0[V / 2] = NAN;
            if (kind == 4)
                x0[V - 1] = INFINITY;
            if (kind == 5)
                for (int64_t t = 0; t < V; t++)
                    x0[t] = -INFINITY;
            float *xr = xmalloc((size_t)V * sizeof *xr), *xv = xmalloc((size_t)V * sizeof *xv);
            for (int isa = TD_CPU_ISA_SCALAR; isa <= (int)top; isa++) {
                const int k = 1 + (kind * 13 + isa * 7) % 64;
                const float b = kind == 1 ? -3.25f : 0.0f;
                float vr[64], vv[64];
                int32_t ir[64], iv[64];
                memcpy(xr, x0, (size_t)V * sizeof *xr);
                memcpy(xv, x0, (size_t)V * sizeof *xv);
                td_cpu_logprobs_row_ref(xr, V, sup, 2, 0, 3, b, k, vr, ir);
                td_cpu_isa_set((td_cpu_isa)isa);
                td_cpu_logprobs_row(xv, V, sup, 2, 0, 3, b, k, vv, iv);
                td_cpu_isa_set(saved);
                size_t bad = 0;
                for (int64_t t = 0; t < V; t++) {
                    const double g = xv[t], r = xr[t];
                    int ok = isnan(r) ? isnan(g) : isinf(r) ? g == r
                                                            : fabs(g - r) <= 1e-6 * fabs(r) + 1e-6;
                    if (!ok && bad++ < 3)
                        fprintf(stderr, "row V=%lld kind %d isa %d: x[%lld] %g vs ref %g\n",
                                (long long)V, kind, isa, (long long)t, g, r);
                }
                for (int i = 0; i < k; i++) {
                    int ok = iv[i] == ir[i] &&
                             (isnan(vr[i]) ? isnan(vv[i])
                                           : isinf(vr[i]) ? vv[i] == vr[i]
                                                          : fabs(vv[i] - vr[i]) <= 1e-6 * fabs(vr[i]) + 1e-6);
                    if (!ok && bad++ < 3)
                        fprintf(stderr, "row V=%lld kind %d isa %d: top %d (%d, %g) vs ref (%d, %g)\n",
                                (long long)V, kind, isa, i, iv[i], (double)vv[i], ir[i],
                                (double)vr[i]);
                }
                ck_assert_msg(bad == 0, "V=%lld kind %d isa %d: %zu differences",
                              (long long)V, kind, isa, bad);
            }
            free(x0), free(xr), free(xv);
        }
    }
}
END_TEST

static Suite *cpu_ops_suite(void)
{
    Suite *s = suite_create("cpu_ops");
    TCase *tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_memory);
    tcase_add_test(tc, test_latched_error);
    tcase_add_test(tc, test_linear);
    tcase_add_test(tc, test_linear_isa);
    tcase_add_test(tc, test_gemm_fma_order);
    tcase_add_test(tc, test_int8_kernels);
    tcase_add_test(tc, test_int8_backend);
    tcase_add_test(tc, test_bf16_round);
    tcase_add_test(tc, test_bf16_kernels);
    tcase_add_test(tc, test_bf16_backend);
    tcase_add_test(tc, test_bias_act);
    tcase_add_test(tc, test_bias_act_isa);
    tcase_add_test(tc, test_layer_norm);
    tcase_add_test(tc, test_add);
    tcase_add_test(tc, test_embed);
    tcase_add_test(tc, test_rope);
    tcase_add_test(tc, test_gather_rows);
    tcase_add_test(tc, test_scatter_rows);
    tcase_add_test(tc, test_rope_rows);
    tcase_add_test(tc, test_attention_padding);
    tcase_add_test(tc, test_attention_causal);
    tcase_add_test(tc, test_attention_kv_index);
    tcase_add_test(tc, test_attention_relative);
    tcase_add_test(tc, test_attention_row_bits);
    tcase_add_test(tc, test_attention_medium);
    tcase_add_test(tc, test_attention_large);
    tcase_add_test(tc, test_attention_q_pos);
    tcase_add_test(tc, test_logprobs_topk_literal);
    tcase_add_test(tc, test_logprobs_topk_random);
    tcase_add_test(tc, test_logprobs_topk_force_rows);
    tcase_add_test(tc, test_logprobs_topk_isa);
    tcase_add_test(tc, test_exp_neg);
    tcase_add_test(tc, test_logprobs_row_vs_ref);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cpu_ops_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
