/*
 * test_cpu_threads.c - the CPU backend's threads (cpu/cpu_pool.h) and the
 * ops split into chunks over them.
 *
 * The pool: every chunk of a job runs exactly once, on a participant id
 * below the thread count, for jobs of 0, 1, 2, 3, 33 and 1000 chunks, more
 * threads than chunks, thousands of jobs in a row (the generation
 * protocol), with and without spinning (TD_CPU_SPIN_US=0: every wait
 * sleeps on the futex).
 *
 * The ops: the same inputs through backends of 1, 2, 3 and 8 threads give
 * the same bits (memcmp), on awkward shapes (rows 1, 3, 33, 130; output
 * features not a multiple of 32; more threads than chunks): chunks split
 * the rows or the output features and never a sum.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_backend.h"
#include "cpu_kernels.h"
#include "cpu_pool.h"
#include "device.h"

static uint64_t rng_state;

static void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }

static float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

static float *frand_vec(size_t n, float scale)
{
    float *v = malloc(n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = frand() * scale;
    return v;
}

/* --- the pool ------------------------------------------------------------ */

typedef struct count_job {
    _Atomic int *hits; /* per chunk */
    _Atomic int bad_tid;
    int n_threads;
    int work; /* busy iterations per chunk, so that threads overlap */
} count_job;

static void count_chunk(void *arg, int64_t c, int tid)
{
    count_job *j = arg;
    if (tid < 0 || tid >= j->n_threads)
        atomic_store(&j->bad_tid, 1);
    volatile double x = 0;
    for (int i = 0; i < j->work; i++)
        x += i * 0.5;
    atomic_fetch_add(&j->hits[c], 1);
}

static void check_pool(int n_threads, const char *spin_us)
{
    setenv("TD_CPU_SPIN_US", spin_us, 1);
    char err[256] = "";
    cpu_pool *p = cpu_pool_create(n_threads, err, sizeof err);
    unsetenv("TD_CPU_SPIN_US");
    ck_assert_msg(p != NULL, "cpu_pool_create(%d): %s", n_threads, err);
    ck_assert_int_eq(cpu_pool_threads(p), n_threads);
    static const int64_t sizes[] = {0, 1, 2, 3, 33, 1000};
    _Atomic int *hits = calloc(1000, sizeof *hits);
    ck_assert_ptr_nonnull(hits);
    count_job j = {.hits = hits, .n_threads = n_threads};
    for (int rep = 0; rep < 1200; rep++) {
        const int64_t n = sizes[rep % 6];
        j.work = rep % 7 == 0 ? 2000 : 0;
        for (int64_t c = 0; c < 1000; c++)
            atomic_store(&hits[c], 0);
        cpu_pool_run(p, n, count_chunk, &j);
        for (int64_t c = 0; c < 1000; c++)
            ck_assert_msg(atomic_load(&hits[c]) == (c < n ? 1 : 0),
                          "%d threads, spin %s, job %d of %lld chunks: chunk %lld ran %d times",
                          n_threads, spin_us, rep, (long long)n, (long long)c,
                          atomic_load(&hits[c]));
    }
    ck_assert_msg(!atomic_load(&j.bad_tid), "a participant id out of [0, %d)", n_threads);
    cpu_pool_free(p);
    free(hits);
}

START_TEST(test_pool_chunks)
{
    static const int threads[] = {1, 2, 3, 8};
    for (int i = 0; i < 4; i++) {
        check_pool(threads[i], "100");
        check_pool(threads[i], "0");
    }
}
END_TEST

/* A pool freed right after a job: its threads may already have read the
 * stop's generation while finishing the job, and must still stop. */
START_TEST(test_pool_free_after_job)
{
    _Atomic int hits[4];
    count_job j = {.hits = hits, .n_threads = 3};
    for (int rep = 0; rep < 300; rep++) {
        char err[256] = "";
        setenv("TD_CPU_SPIN_US", rep % 2 ? "0" : "100", 1);
        cpu_pool *p = cpu_pool_create(3, err, sizeof err);
        unsetenv("TD_CPU_SPIN_US");
        ck_assert_msg(p != NULL, "%s", err);
        for (int c = 0; c < 4; c++)
            atomic_store(&hits[c], 0);
        cpu_pool_run(p, 4, count_chunk, &j);
        cpu_pool_free(p);
        for (int c = 0; c < 4; c++)
            ck_assert_int_eq(atomic_load(&hits[c]), 1);
    }
}
END_TEST

START_TEST(test_pool_errors)
{
    char err[256] = "";
    ck_assert_ptr_null(cpu_pool_create(0, err, sizeof err));
    ck_assert_msg(err[0] != '\0', "no message for 0 threads");
    cpu_pool_free(NULL);
}
END_TEST

/* --- the ops across thread counts ---------------------------------------- */

#define N_BACKENDS 4
static const int thread_counts[N_BACKENDS] = {1, 2, 3, 8};

static td_backend *make_backend(int n_threads, int int8)
{
    td_device dev;
    char err[256] = "";
    ck_assert_msg(td_device_resolve("cpu", &dev, err, sizeof err) == 0, "%s", err);
    const td_backend_params p = {.n_threads = n_threads,
                                 .store = int8 ? TD_STORE_INT8 : TD_STORE_F32};
    td_backend *b = dev.create(&dev, &p, err, sizeof err);
    ck_assert_msg(b != NULL, "%s", err);
    return b;
}

static void done_backend(td_backend *b)
{
    char err[256] = "";
    ck_assert_msg(b->ops->sync(b, err, sizeof err) == 0, "%s", err);
    b->ops->destroy(b);
}

static void assert_same(const char *what, const void *got, const void *ref, size_t bytes,
                        int n_threads)
{
    ck_assert_msg(memcmp(got, ref, bytes) == 0, "%s: %d threads differ from 1 thread", what,
                  n_threads);
}

/* y = x W^T + b for (n, out, in) on every thread count, float32 and int8. */
static void check_linear_threads(int64_t n, int64_t out, int64_t in, int int8)
{
    float *x = frand_vec((size_t)(n * in), 1.0f), *w = frand_vec((size_t)(out * in), 0.3f);
    float *b = frand_vec((size_t)out, 1.0f);
    const size_t ybytes = (size_t)(n * out) * sizeof(float);
    float *ref = malloc(ybytes), *y = malloc(ybytes);
    ck_assert(ref && y);
    for (int t = 0; t < N_BACKENDS; t++) {
        td_backend *be = make_backend(thread_counts[t], int8);
        char err[256] = "";
        td_weight W, B;
        ck_assert(be->ops->weight_upload(be, &W, w, out, in, TD_F32, 1.0f, err, sizeof err) == 0);
        ck_assert(be->ops->weight_upload(be, &B, b, 1, out, TD_F32, 1.0f, err, sizeof err) == 0);
        be->ops->reserve_linear(be, &W, n);
        float *dx = be->ops->alloc(be, (size_t)(n * in) * sizeof(float));
        float *dy = be->ops->alloc(be, ybytes);
        be->ops->upload(be, dx, x, (size_t)(n * in) * sizeof(float));
        be->ops->linear(be, dy, out, dx, in, n, &W, &B);
        be->ops->download(be, t == 0 ? ref : y, dy, ybytes);
        if (t > 0) {
            char what[96];
            snprintf(what, sizeof what, "%s linear (%lld, %lld, %lld)", int8 ? "int8" : "float32",
                     (long long)n, (long long)out, (long long)in);
            assert_same(what, y, ref, ybytes, thread_counts[t]);
        }
        be->ops->weight_free(be, &W);
        be->ops->weight_free(be, &B);
        be->ops->dealloc(be, dx);
        be->ops->dealloc(be, dy);
        done_backend(be);
    }
    free(x), free(w), free(b), free(ref), free(y);
}

START_TEST(test_linear_threads)
{
    rng_seed(41);
    /* (rows, out, in): panels of 32 features split across threads, a last
     * partial panel, one panel only (more threads than chunks), the
     * vocabulary-sized projection. */
    static const int64_t shapes[][3] = {
        {1, 100, 65},  {3, 40, 513},   {33, 1000, 256}, {130, 257, 512},
        {1, 8000, 256}, {33, 33, 2048}, {3, 31, 64},     {128, 512, 512},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        check_linear_threads(shapes[i][0], shapes[i][1], shapes[i][2], 0);
        check_linear_threads(shapes[i][0], shapes[i][1], shapes[i][2], 1);
    }
}
END_TEST

/* layer_norm (with residual and sum), bias_act, add, gather_rows and
 * logprobs_topk on one input per shape, every thread count. */
static void check_rowwise_threads(int64_t n, int64_t d)
{
    float *x = frand_vec((size_t)(n * d), 2.0f), *r = frand_vec((size_t)(n * d), 1.0f);
    float *g = frand_vec((size_t)d, 1.0f), *bt = frand_vec((size_t)d, 1.0f);
    const size_t bytes = (size_t)(n * d) * sizeof(float);
    const int k = d < 8 ? (int)d : 8;
    const size_t tk = (size_t)(n * k);
    float *ref_ln = malloc(bytes), *ref_sum = malloc(bytes), *ref_act = malloc(bytes);
    float *ref_lp = malloc(bytes), *ref_val = malloc(tk * sizeof(float));
    int32_t *ref_idx = malloc(tk * sizeof(int32_t));
    float *h = malloc(bytes), *hv = malloc(tk * sizeof(float));
    int32_t *hi = malloc(tk * sizeof(int32_t)), *gidx = malloc((size_t)n * sizeof(int32_t));
    ck_assert(ref_ln && ref_sum && ref_act && ref_lp && ref_val && ref_idx && h && hv && hi &&
              gidx);
    for (int64_t i = 0; i < n; i++)
        gidx[i] = (int32_t)((i * 7 + 3) % n);
    for (int t = 0; t < N_BACKENDS; t++) {
        td_backend *be = make_backend(thread_counts[t], 0);
        char err[256] = "", what[64];
        td_weight G, Bt;
        ck_assert(be->ops->weight_upload(be, &G, g, 1, d, TD_F32, 1.0f, err, sizeof err) == 0);
        ck_assert(be->ops->weight_upload(be, &Bt, bt, 1, d, TD_F32, 1.0f, err, sizeof err) == 0);
        float *dx = be->ops->alloc(be, bytes), *dr = be->ops->alloc(be, bytes);
        float *dy = be->ops->alloc(be, bytes), *ds = be->ops->alloc(be, bytes);
        float *dv = be->ops->alloc(be, tk * sizeof(float));
        int32_t *di = be->ops->alloc(be, tk * sizeof(int32_t));
        int32_t *dg = be->ops->alloc(be, (size_t)n * sizeof(int32_t));
        be->ops->upload(be, dx, x, bytes);
        be->ops->upload(be, dr, r, bytes);
        be->ops->upload(be, dg, gidx, (size_t)n * sizeof(int32_t));

        be->ops->layer_norm(be, dy, dx, dr, ds, n, d, &G, &Bt, 1e-5f);
        be->ops->download(be, t == 0 ? ref_ln : h, dy, bytes);
        snprintf(what, sizeof what, "layer_norm (%lld, %lld)", (long long)n, (long long)d);
        if (t > 0)
            assert_same(what, h, ref_ln, bytes, thread_counts[t]);
        be->ops->download(be, t == 0 ? ref_sum : h, ds, bytes);
        if (t > 0)
            assert_same("layer_norm sum", h, ref_sum, bytes, thread_counts[t]);

        be->ops->add(be, dy, dx, n, d);
        be->ops->bias_act(be, dy, n, d, &Bt, TD_ACT_GELU);
        be->ops->gather_rows(be, ds, dy, dg, n, d, d, NULL);
        be->ops->download(be, t == 0 ? ref_act : h, ds, bytes);
        snprintf(what, sizeof what, "add+bias_act+gather (%lld, %lld)", (long long)n,
                 (long long)d);
        if (t > 0)
            assert_same(what, h, ref_act, bytes, thread_counts[t]);

        be->ops->logprobs_topk(be, ds, n, d, NULL, 0, 0, NULL, 0, NULL, k, dv, di);
        be->ops->download(be, t == 0 ? ref_lp : h, ds, bytes);
        be->ops->download(be, t == 0 ? ref_val : hv, dv, tk * sizeof(float));
        be->ops->download(be, t == 0 ? ref_idx : hi, di, tk * sizeof(int32_t));
        if (t > 0) {
            assert_same("logprobs", h, ref_lp, bytes, thread_counts[t]);
            assert_same("top-k values", hv, ref_val, tk * sizeof(float), thread_counts[t]);
            assert_same("top-k ids", hi, ref_idx, tk * sizeof(int32_t), thread_counts[t]);
        }
        be->ops->weight_free(be, &G);
        be->ops->weight_free(be, &Bt);
        be->ops->dealloc(be, dx), be->ops->dealloc(be, dr), be->ops->dealloc(be, dy);
        be->ops->dealloc(be, ds), be->ops->dealloc(be, dv), be->ops->dealloc(be, di);
        be->ops->dealloc(be, dg);
        done_backend(be);
    }
    free(x), free(r), free(g), free(bt), free(ref_ln), free(ref_sum), free(ref_act);
    free(ref_lp), free(ref_val), free(ref_idx), free(h), free(hv), free(hi), free(gidx);
}

START_TEST(test_rowwise_threads)
{
    rng_seed(42);
    static const int64_t shapes[][2] = {{1, 8000}, {3, 513}, {33, 1000}, {130, 256}, {7, 5}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_rowwise_threads(shapes[i][0], shapes[i][1]);
}
END_TEST

/* Self-attention of n_seq sequences, n_q query rows each: n_q 1 takes the
 * row path (decoding), n_q 24 the pair path (sgemm per (sequence, head)). */
static void check_attention_threads(int n_seq, int n_q, int n_heads, int hd)
{
    const int n_k = n_q + 5, d = n_heads * hd;
    const size_t qf = (size_t)n_seq * n_q * d, kf = (size_t)n_seq * n_k * d;
    float *q = frand_vec(qf, 1.0f), *k = frand_vec(kf, 1.0f), *v = frand_vec(kf, 1.0f);
    float *ref = malloc(qf * sizeof(float)), *o = malloc(qf * sizeof(float));
    int32_t *kv_len = malloc((size_t)n_seq * sizeof(int32_t));
    ck_assert(ref && o && kv_len);
    for (int s = 0; s < n_seq; s++)
        kv_len[s] = n_k - s % 4;
    for (int t = 0; t < N_BACKENDS; t++) {
        td_backend *be = make_backend(thread_counts[t], 0);
        float *dq = be->ops->alloc(be, qf * sizeof(float)), *dk = be->ops->alloc(be, kf * 4);
        float *dv = be->ops->alloc(be, kf * sizeof(float)), *dout = be->ops->alloc(be, qf * 4);
        int32_t *dl = be->ops->alloc(be, (size_t)n_seq * sizeof(int32_t));
        be->ops->upload(be, dq, q, qf * sizeof(float));
        be->ops->upload(be, dk, k, kf * sizeof(float));
        be->ops->upload(be, dv, v, kf * sizeof(float));
        be->ops->upload(be, dl, kv_len, (size_t)n_seq * sizeof(int32_t));
        td_attn_args a = {
            .q = dq, .k = dk, .v = dv, .out = dout, .n_seq = n_seq, .n_q = n_q, .n_k = n_k,
            .n_heads = n_heads, .head_dim = hd, .ld_q = d, .ld_kv = d, .ld_out = d,
            .q_seq_stride = (int64_t)n_q * d, .kv_seq_stride = (int64_t)n_k * d,
            .out_seq_stride = (int64_t)n_q * d, .kv_len = dl, .causal = 1, .q_pos0 = 5,
        };
        be->ops->attention(be, &a);
        be->ops->download(be, t == 0 ? ref : o, dout, qf * sizeof(float));
        if (t > 0) {
            char what[80];
            snprintf(what, sizeof what, "attention (seq %d, q %d, heads %d, dim %d)", n_seq, n_q,
                     n_heads, hd);
            assert_same(what, o, ref, qf * sizeof(float), thread_counts[t]);
        }
        be->ops->dealloc(be, dq), be->ops->dealloc(be, dk), be->ops->dealloc(be, dv);
        be->ops->dealloc(be, dout), be->ops->dealloc(be, dl);
        done_backend(be);
    }
    free(q), free(k), free(v), free(ref), free(o), free(kv_len);
}

START_TEST(test_attention_threads)
{
    rng_seed(43);
    check_attention_threads(1, 1, 1, 64);  /* one pair, one row */
    check_attention_threads(3, 1, 4, 64);  /* decoding rows */
    check_attention_threads(33, 1, 8, 32); /* many rows */
    check_attention_threads(3, 24, 4, 64); /* pairs, sgemm */
    check_attention_threads(1, 24, 3, 33); /* fewer pairs than threads */
}
END_TEST

static Suite *cpu_threads_suite(void)
{
    Suite *s = suite_create("cpu_threads");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_pool_chunks);
    tcase_add_test(tc, test_pool_free_after_job);
    tcase_add_test(tc, test_pool_errors);
    tcase_add_test(tc, test_linear_threads);
    tcase_add_test(tc, test_rowwise_threads);
    tcase_add_test(tc, test_attention_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cpu_threads_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
