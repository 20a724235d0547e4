/*
 * gpu_op_test.h - the fixture and helpers of the GPU op tests
 * (test_gpu_ops.c, test_gpu_attention.c): a CPU backend (the reference) and
 * a CUDA backend per test, seeded random inputs, buffers on both backends
 * with the same contents, and the comparison |gpu - cpu| <= tol_abs +
 * tol_rel*|cpu| that fails on any NaN/Inf mismatch. Included by exactly one
 * file of each test program, so its static definitions are that program's.
 */
#ifndef TD_GPU_OP_TEST_H
#define TD_GPU_OP_TEST_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_backend.h"
#include "gpu_backend.h"

#define SKIP_CODE 77
#define SENTINEL 1234.5f

static td_backend *bc; /* CPU: the reference */
static td_backend *bg; /* CUDA */

static const int SHAPES[4] __attribute__((unused)) = {1, 7, 33, 513};

static inline void setup(void)
{
    char err[512] = "";
    bc = td_cpu_backend_create(2, err, sizeof err);
    ck_assert_msg(bc != NULL, "cpu: %s", err);
    bg = td_cuda_backend_create(0, NULL, err, sizeof err);
    ck_assert_msg(bg != NULL, "cuda: %s", err);
}

static inline void teardown(void)
{
    char err[512] = "";
    int rc_c = bc->ops->sync(bc, err, sizeof err);
    ck_assert_msg(rc_c == 0, "cpu sync: %s", err);
    int rc_g = bg->ops->sync(bg, err, sizeof err);
    ck_assert_msg(rc_g == 0, "cuda sync: %s", err);
    bc->ops->destroy(bc);
    bg->ops->destroy(bg);
}

/* --- helpers ------------------------------------------------------------- */

static uint64_t rng_state;

static inline void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }

static inline float frand(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
    return (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline int irand(int n) { return (int)((frand() + 1.0f) * 0.5f * (float)n) % n; }

static inline void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

static inline float *frand_vec(size_t n, float scale)
{
    float *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = frand() * scale;
    return v;
}

/* The value a float32 has after rounding to F16 / BF16 (nearest even), so
 * that both backends hold the same weights. */
static inline float round_f16(float f)
{
    if (fabsf(f) < 6.103515625e-05f) /* F16 subnormal: quantum 2^-24 */
        return (float)(rint((double)f * 16777216.0) / 16777216.0);
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x0FFFu + ((u >> 13) & 1u);
    u &= ~0x1FFFu;
    memcpy(&f, &u, 4);
    return f;
}

static inline float round_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* A buffer on both backends with the same contents. */
typedef struct pair {
    void *c, *g;
    size_t bytes;
} pair;

static inline pair pair_from(const void *host, size_t bytes)
{
    pair p = {bc->ops->alloc(bc, bytes), bg->ops->alloc(bg, bytes), bytes};
    ck_assert_ptr_nonnull(p.c);
    ck_assert_ptr_nonnull(p.g);
    if (host && bytes) {
        bc->ops->upload(bc, p.c, host, bytes);
        bg->ops->upload(bg, p.g, host, bytes);
    }
    return p;
}

static inline void pair_free(pair *p)
{
    bc->ops->dealloc(bc, p->c);
    bg->ops->dealloc(bg, p->g);
    memset(p, 0, sizeof *p);
}

typedef struct wpair {
    td_weight c, g;
} wpair;

/* Weights from host data already rounded to `dt` (see round_f16). */
static inline wpair wpair_scaled(const float *host, int64_t rows, int64_t cols, td_dtype dt,
                          float scale)
{
    wpair w;
    char err[512] = "";
    ck_assert_msg(bc->ops->weight_upload(bc, &w.c, host, rows, cols, dt, scale, err,
                                         sizeof err) == 0,
                  "cpu weight: %s", err);
    ck_assert_msg(bg->ops->weight_upload(bg, &w.g, host, rows, cols, dt, scale, err,
                                         sizeof err) == 0,
                  "cuda weight: %s", err);
    if (rows > 1)
        ck_assert_int_eq((int)w.g.dtype, (int)dt);
    return w;
}

static inline wpair wpair_from(const float *host, int64_t rows, int64_t cols, td_dtype dt)
{
    return wpair_scaled(host, rows, cols, dt, 1.0f);
}

static inline void wpair_free(wpair *w)
{
    bc->ops->weight_free(bc, &w->c);
    bg->ops->weight_free(bg, &w->g);
}

static inline void sync_both(const char *what)
{
    char err[512] = "";
    ck_assert_msg(bc->ops->sync(bc, err, sizeof err) == 0, "%s: cpu: %s", what, err);
    ck_assert_msg(bg->ops->sync(bg, err, sizeof err) == 0, "%s: cuda: %s", what, err);
}

static inline int close_f(float g, float c, double ta, double tr)
{
    if (isnan(c) || isnan(g))
        return isnan(c) && isnan(g);
    if (isinf(c) || isinf(g))
        return g == c;
    return fabs((double)g - (double)c) <= ta + tr * fabs((double)c);
}

/* Downloads `count` floats of cpu_p (CPU backend) and of gpu_p (GPU
 * backend gb, which shares bg's device) and compares them. */
static inline void check_gpu(const char *what, td_backend *gb, const void *gpu_p, const void *cpu_p,
                      size_t count, double ta, double tr)
{
    char err[512] = "";
    sync_both(what);
    ck_assert_msg(gb->ops->sync(gb, err, sizeof err) == 0, "%s: cuda: %s", what, err);
    float *hc = xmalloc(count * sizeof(float)), *hg = xmalloc(count * sizeof(float));
    bc->ops->download(bc, hc, cpu_p, count * sizeof(float));
    gb->ops->download(gb, hg, gpu_p, count * sizeof(float));
    sync_both(what);
    ck_assert_msg(gb->ops->sync(gb, err, sizeof err) == 0, "%s: cuda: %s", what, err);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++)
        if (!close_f(hg[i], hc[i], ta, tr)) {
            if (!bad)
                first = i;
            if (bad++ < 5)
                fprintf(stderr, "%s: [%zu] cuda %.9g cpu %.9g\n", what, i, (double)hg[i],
                        (double)hc[i]);
        }
    ck_assert_msg(bad == 0, "%s: %zu of %zu values differ (first at %zu: cuda %.9g, cpu %.9g)",
                  what, bad, count, first, (double)hg[first], (double)hc[first]);
    free(hc);
    free(hg);
}

/* Downloads `count` floats of p from both backends and compares them. */
static inline void check_pair(const char *what, const pair *p, size_t count, double ta, double tr)
{
    check_gpu(what, bg, p->g, p->c, count, ta, tr);
}

static inline float *filled(size_t n, float v)
{
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = v;
    return p;
}

/* The main() of a GPU op test: exits 77 (ctest's skip) without a device,
 * else runs the suite without fork (main has initialised CUDA, and a forked
 * child of such a process cannot use it; ctest sets CK_FORK=no too, this
 * keeps a direct run of the binary correct), then done() (may be NULL). */
static inline int gpu_op_test_main(const char *prog, Suite *(*make)(void), void (*done)(void))
{
    if (td_cuda_device_count() <= 0) {
        char err[512] = "";
        td_backend *b = td_cuda_backend_create(0, NULL, err, sizeof err);
        if (b)
            b->ops->destroy(b);
        printf("%s: no CUDA device (%s): skipped\n", prog, err);
        return SKIP_CODE;
    }
    SRunner *sr = srunner_create(make());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (done)
        done();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* A test case with the fixture (fresh CPU and CUDA backends per test). */
static inline TCase *gpu_op_tcase(Suite *s, const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    suite_add_tcase(s, tc);
    return tc;
}

#endif /* TD_GPU_OP_TEST_H */
