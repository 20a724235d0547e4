/*
 * cpu_backend.c - td_backend_ops on the host: our packed GEMM (OpenBLAS
 * without AVX2) for the products, row loops for the rest, split into
 * chunks that the backend's threads claim (cpu_pool.h).
 *
 * Every op is synchronous. Failures inside ops (scratch allocation, a weight
 * in a dtype this backend did not make) are latched in the context and
 * reported by sync(), as backend.h asks.
 */
#define _DEFAULT_SOURCE /* madvise */
#include "activation.h"
#include "cpu_backend.h"
#include "cpu_kernels.h"
#include "cpu_pool.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CPU_ALIGN 64

/* Attention takes the BLAS path (sgemm for QK^T and for PV per (sequence,
 * head)) from CPU_ATTN_GEMM_MIN_Q query rows and CPU_ATTN_GEMM_MIN_MACS
 * multiply-adds per head: measured on one core, sgemm is ~3x faster than
 * the row loop from 16x16 tokens of 64 dims and even at 8x8. */
#define CPU_ATTN_GEMM_MIN_Q 8
#define CPU_ATTN_GEMM_MIN_MACS ((int64_t)1 << 14)

/* Threading: one pool of threads per backend (cpu_pool.h). OpenBLAS is set
 * to one thread and every op splits itself into chunks that the pool's
 * threads claim as they come free: a linear layer into runs of 32-feature
 * output panels (each a serial GEMM call on whole panels, so the sums are
 * the 1-thread sums), attention into (sequence, head) pairs or query rows,
 * the row-wise ops into runs of rows. A thread that another process has
 * descheduled does not hold an op up: the others take its chunks. Two
 * pools (pthread OpenBLAS + ours) handing the cores back and forth would
 * spin and yield against each other: measured 2-4x slower on 2 cores. */

/* A linear layer with fewer multiply-adds than CPU_LINEAR_PAR_MACS runs on
 * the caller alone, and a chunk of a larger one has at least
 * CPU_LINEAR_CHUNK_MACS (a chunk's claim and its cache misses cost well
 * under a microsecond; a floor of 1 << 16 for both cost 10% of greedy
 * batch 1 on the bundled model). */
#define CPU_LINEAR_PAR_MACS ((int64_t)1 << 15)
#define CPU_LINEAR_CHUNK_MACS ((int64_t)1 << 14)

/* Output features per OpenBLAS call on the row-major path (a multiple of
 * 16: slices start on cache lines). */
#define CPU_BLAS_SLICE 128

/* Row-wise loops with fewer elements than this run on the caller alone:
 * waking the threads costs more than the work. A chunk of a larger loop
 * has at least CPU_PAR_CHUNK_ELEMS elements. */
#define CPU_PAR_MIN_ELEMS ((int64_t)1 << 14)
#define CPU_PAR_CHUNK_ELEMS ((int64_t)1 << 12)

/* Chunks per thread in a split job: enough that a thread running late
 * leaves the others work to take over, few enough that claiming stays
 * cheap. */
#define CPU_CHUNKS_PER_THREAD 8

typedef struct cpu_ctx {
    int n_threads;
    cpu_pool *pool; /* n_threads participants, the calling thread one of them */
    /* Scratch owned by the (single) calling thread; grown only outside
     * pool jobs. Per-thread slices are carved out of it inside ops. */
    float *scratch;
    size_t scratch_cap; /* floats */
    int int8;           /* --dtype int8: matrices quantized at upload */
    int int8_all;       /* --dtype int8-all: keep_float (backend.h) ignored */
    int bf16;           /* --dtype bfloat16: matrices rounded at upload */
    uint8_t *q8;        /* quantized activation rows of an int8 linear */
    size_t q8_cap;      /* bytes */
    int failed;         /* latched failure, cleared by sync() */
    char err[256];
} cpu_ctx;

static void cpu_fail(cpu_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void cpu_fail(cpu_ctx *c, const char *fmt, ...)
{
    if (c->failed)
        return; /* keep the first failure */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->failed = 1;
}

static void cpu_set_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
}

/* Chunks for a job of n items and `work` elements (or multiply-adds) in
 * all: 1 (the caller alone) below min_work, else up to
 * CPU_CHUNKS_PER_THREAD per thread with at least chunk_work each. */
static int64_t cpu_chunks(const cpu_ctx *c, int64_t n, int64_t work, int64_t min_work,
                          int64_t chunk_work)
{
    if (c->n_threads <= 1 || work < min_work || n <= 1)
        return 1;
    int64_t k = (int64_t)c->n_threads * CPU_CHUNKS_PER_THREAD;
    if (k > work / chunk_work)
        k = work / chunk_work;
    if (k > n)
        k = n;
    if (k > CPU_POOL_MAX_CHUNKS)
        k = CPU_POOL_MAX_CHUNKS;
    return k < 1 ? 1 : k;
}

/* Chunks of a row-wise loop over n rows of `elems` elements in all. */
static int64_t cpu_row_chunks(const cpu_ctx *c, int64_t n, int64_t elems)
{
    return cpu_chunks(c, n, elems, CPU_PAR_MIN_ELEMS, CPU_PAR_CHUNK_ELEMS);
}

/* fn over the items [i0, i1) on participant tid. */
typedef void (*cpu_range_fn)(void *arg, int64_t i0, int64_t i1, int tid);

typedef struct cpu_range_job {
    cpu_range_fn fn;
    void *arg;
    int64_t n, chunks;
} cpu_range_job;

static void cpu_range_chunk(void *arg, int64_t k, int tid)
{
    const cpu_range_job *j = arg;
    const int64_t i0 = j->n * k / j->chunks, i1 = j->n * (k + 1) / j->chunks;
    if (i0 < i1)
        j->fn(j->arg, i0, i1, tid);
}

/* Runs fn over [0, n) in `chunks` even runs (cpu_chunks), claimed by the
 * pool's threads; one chunk runs on the caller without the pool. */
static void cpu_par(cpu_ctx *c, int64_t n, int64_t chunks, cpu_range_fn fn, void *arg)
{
    if (n <= 0)
        return;
    if (chunks <= 1) {
        fn(arg, 0, n, 0);
        return;
    }
    cpu_range_job j = {.fn = fn, .arg = arg, .n = n, .chunks = chunks};
    cpu_pool_run(c->pool, chunks, cpu_range_chunk, &j);
}

/* Buffers of CPU_HUGE bytes or more (weight matrices, the worker's caches
 * and scratch) start on a 2 MiB boundary and ask for transparent huge
 * pages (where the kernel's THP mode is "madvise", only asked-for memory
 * gets them): one TLB entry covers 2 MiB of a streamed weight or cache
 * instead of 4 KiB. TD_CPU_HUGE=0 in the environment asks for none. */
#define CPU_HUGE ((size_t)4 << 20)
#define CPU_HUGE_ALIGN ((size_t)2 << 20)

static void *cpu_aligned_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0)
        bytes = CPU_ALIGN;
    const char *off = getenv("TD_CPU_HUGE");
    const int huge = bytes >= CPU_HUGE && !(off && !strcmp(off, "0"));
    if (posix_memalign(&p, huge ? CPU_HUGE_ALIGN : CPU_ALIGN, bytes) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (huge)
        (void)madvise(p, bytes / CPU_HUGE_ALIGN * CPU_HUGE_ALIGN, MADV_HUGEPAGE);
#endif
    return p;
}

/* At least `floats` floats of scratch, or NULL (failure latched). Must not
 * be called inside a pool job. The old contents are not kept. */
static float *cpu_scratch(cpu_ctx *c, size_t floats)
{
    if (floats <= c->scratch_cap)
        return c->scratch;
    if (floats > SIZE_MAX / sizeof(float)) {
        cpu_fail(c, "cpu: scratch of %zu floats overflows", floats);
        return NULL;
    }
    free(c->scratch);
    c->scratch_cap = 0;
    c->scratch = cpu_aligned_alloc(floats * sizeof(float));
    if (!c->scratch) {
        cpu_fail(c, "cpu: out of memory for %zu bytes of scratch",
                 floats * sizeof(float));
        return NULL;
    }
    c->scratch_cap = floats;
    return c->scratch;
}

/* Per-thread slice length: n floats rounded up to a cache line. */
static size_t cpu_slice(size_t n)
{
    size_t per_line = CPU_ALIGN / sizeof(float);
    return (n + per_line - 1) / per_line * per_line;
}

/* The float32 data of a weight this backend made, or NULL (latched). */
static const float *cpu_wdata(cpu_ctx *c, const td_weight *w, const char *op)
{
    if (w->dtype != TD_F32 || !w->data) {
        cpu_fail(c, "cpu: %s: weight is not a float32 CPU weight (dtype %d)",
                 op, (int)w->dtype);
        return NULL;
    }
    return (const float *)w->data;
}

/* --- memory ------------------------------------------------------------- */

static void cpu_destroy(td_backend *be)
{
    if (!be)
        return;
    cpu_ctx *c = be->ctx;
    if (c) {
        cpu_pool_free(c->pool);
        free(c->scratch);
        free(c->q8);
    }
    free(c);
    free(be);
}

static void *cpu_alloc(td_backend *be, size_t bytes)
{
    (void)be;
    return cpu_aligned_alloc(bytes);
}

static void cpu_dealloc(td_backend *be, void *p)
{
    (void)be;
    free(p);
}

static void cpu_memcpy(td_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes)
        memcpy(dst, src, bytes);
}

static void cpu_memset0(td_backend *be, void *dst, size_t bytes)
{
    (void)be;
    if (bytes)
        memset(dst, 0, bytes);
}

static int cpu_sync(td_backend *be, char *err, size_t errlen)
{
    cpu_ctx *c = be->ctx;
    if (!c->failed)
        return 0;
    cpu_set_err(err, errlen, c->err);
    c->failed = 0;
    c->err[0] = '\0';
    return -1;
}

/* The memory of a converted (rows, cols) weight, its fields set, or NULL
 * with the error naming the shape and the kind. */
static void *cpu_weight_alloc(td_weight *w, size_t bytes, td_dtype dtype, int layout,
                              int64_t rows, int64_t cols, const char *kind, char *err,
                              size_t errlen)
{
    void *q = cpu_aligned_alloc(bytes);
    if (!q) {
        if (err && errlen)
            snprintf(err, errlen, "cpu: out of memory for a (%lld, %lld) %s weight",
                     (long long)rows, (long long)cols, kind);
        return NULL;
    }
    w->data = q;
    w->dtype = dtype;
    w->layout = layout;
    w->rows = rows;
    w->cols = cols;
    return q;
}

static int cpu_weight_upload(td_backend *be, td_weight *w, const float *host,
                             int64_t rows, int64_t cols, td_dtype want, float scale,
                             char *err, size_t errlen)
{
    const cpu_ctx *c = be->ctx;
    (void)want; /* the CPU computes in float32 (or int8) whatever the checkpoint holds */
    memset(w, 0, sizeof *w);
    if (rows < 0 || cols < 0 ||
        (cols > 0 && (uint64_t)rows > SIZE_MAX / sizeof(float) / (uint64_t)cols)) {
        if (err && errlen)
            snprintf(err, errlen, "cpu: bad weight shape (%lld, %lld)",
                     (long long)rows, (long long)cols);
        return -1;
    }
    const float s = scale == 0.0f ? 1.0f : scale;
    if (c->int8 && (!be->keep_float || c->int8_all) && rows > 1 && cols > 0) {
        /* quantized once here (cpu_int8.c) */
        void *q = cpu_weight_alloc(w, td_cpu_q8_bytes(rows, cols), TD_I8, TD_CPU_LAYOUT_INT8,
                                   rows, cols, "int8", err, errlen);
        if (!q)
            return -1;
        td_cpu_q8_pack(q, host, rows, cols, s);
        return 0;
    }
    if (c->bf16 && rows > 1 && cols > 0) {
        /* rounded once here (cpu_bf16.c); keep_float does not apply: the
         * tied embedding / output projection is bfloat16 too */
        void *q = cpu_weight_alloc(w, td_cpu_b16_bytes(rows, cols), TD_BF16,
                                   TD_CPU_LAYOUT_BF16, rows, cols, "bfloat16", err, errlen);
        if (!q)
            return -1;
        td_cpu_b16_pack(q, host, rows, cols, s);
        return 0;
    }
    const int pack = rows > 1 && td_cpu_pack_wanted(rows, cols);
    const size_t floats = pack ? (size_t)td_cpu_packed_floats(rows, cols)
                               : (size_t)rows * (size_t)cols;
    float *p = cpu_aligned_alloc(floats * sizeof(float));
    if (!p) {
        if (err && errlen)
            snprintf(err, errlen, "cpu: out of memory for a (%lld, %lld) weight",
                     (long long)rows, (long long)cols);
        return -1;
    }
    if (pack) {
        /* packed once here, so that no linear repacks (cpu_gemm.c) */
        td_cpu_pack(p, host, rows, cols, s);
        w->layout = TD_CPU_LAYOUT_PACKED;
    } else if (s == 1.0f) {
        if (floats)
            memcpy(p, host, floats * sizeof(float));
    } else {
        for (size_t i = 0; i < floats; i++)
            p[i] = host[i] * s; /* float32: folded (w->scale stays 0) */
    }
    w->data = p;
    w->dtype = TD_F32;
    w->rows = rows;
    w->cols = cols;
    return 0;
}

static void cpu_weight_free(td_backend *be, td_weight *w)
{
    (void)be;
    if (!w)
        return;
    free(w->data);
    memset(w, 0, sizeof *w);
}

/* --- dense ops ------------------------------------------------------------ */

/* Bytes of one activation row of a linear with the int8 or bfloat16
 * weight w: quantized to 4*K4 bytes, or rounded to 2*K2 bfloat16s. */
static size_t cpu_lowp_row(const td_weight *w)
{
    return w->layout == TD_CPU_LAYOUT_BF16 ? (size_t)td_cpu_b16_k2(w->cols) * 4
                                           : (size_t)td_cpu_q8_k4(w->cols) * 4;
}

/* Room for n quantized (int8) or rounded (bfloat16) activation rows of a
 * linear with the weight w, or NULL (latched). On the calling thread only,
 * before a job. */
static uint8_t *cpu_q8_scratch(cpu_ctx *c, int64_t n, const td_weight *w)
{
    const size_t row = cpu_lowp_row(w);
    const size_t bytes = (size_t)n * row + cpu_slice((size_t)n) * sizeof(float) + CPU_ALIGN;
    if (bytes <= c->q8_cap)
        return c->q8;
    free(c->q8);
    c->q8_cap = 0;
    c->q8 = cpu_aligned_alloc(bytes);
    if (!c->q8) {
        cpu_fail(c, "cpu: out of memory for %zu bytes of int8 scratch", bytes);
        return NULL;
    }
    c->q8_cap = bytes;
    return c->q8;
}

/* An int8 (or bfloat16) linear in two jobs: the rows quantized (rounded)
 * in runs of rows, then the products in runs of 32-feature panels, all rows
 * each. */
typedef struct q8_job {
    float *y;
    int64_t ld_y;
    const float *x;
    int64_t ld_x, n, in, out, panels, chunks;
    uint8_t *u;
    size_t row; /* bytes of a quantized row */
    float *xs;
    const void *W;
    const float *b;
    int bf16; /* TD_CPU_LAYOUT_BF16: u holds bfloat16 rows, xs unused */
} q8_job;

static void q8_quant_range(void *arg, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    const q8_job *j = arg;
    if (j->bf16)
        td_cpu_b16_round_rows((uint16_t *)(void *)(j->u + (size_t)r0 * j->row),
                              j->x + r0 * j->ld_x, j->ld_x, r1 - r0, j->in);
    else
        td_cpu_q8_quant_rows(j->u + (size_t)r0 * j->row, j->xs + r0, j->x + r0 * j->ld_x,
                             j->ld_x, r1 - r0, j->in);
}

static void q8_gemm_range(void *arg, int64_t p0, int64_t p1, int tid)
{
    (void)tid;
    const q8_job *j = arg;
    if (j->bf16)
        td_cpu_gemm_b16(j->y, j->ld_y, (const uint16_t *)(const void *)j->u, j->n, j->W, j->out,
                        j->in, j->b, p0, p1);
    else
        td_cpu_gemm_q8(j->y, j->ld_y, j->u, j->xs, j->n, j->W, j->out, j->in, j->b, p0, p1);
}

static void cpu_linear_q8(cpu_ctx *c, float *y, int64_t ld_y, const float *x, int64_t ld_x,
                          int64_t n, const td_weight *w, const td_weight *bias)
{
    const float *b = bias ? cpu_wdata(c, bias, "linear bias") : NULL;
    if ((bias && !b) || n <= 0 || w->rows == 0 || !w->data)
        return;
    const int64_t out = w->rows, in = w->cols;
    uint8_t *u = cpu_q8_scratch(c, n, w);
    if (!u)
        return;
    const int bf16 = w->layout == TD_CPU_LAYOUT_BF16;
    const size_t row = cpu_lowp_row(w);
    q8_job j = {.y = y, .ld_y = ld_y, .x = x, .ld_x = ld_x, .n = n, .in = in, .out = out,
                .panels = (out + 31) / 32, .u = u, .row = row, .W = w->data, .b = b,
                .bf16 = bf16};
    j.xs = (float *)(u + ((size_t)n * row + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN);
    const int64_t macs = n * out * in;
    cpu_par(c, n, cpu_row_chunks(c, n, n * in), q8_quant_range, &j);
    cpu_par(c, j.panels,
            cpu_chunks(c, j.panels, macs, CPU_LINEAR_PAR_MACS, CPU_LINEAR_CHUNK_MACS),
            q8_gemm_range, &j);
}

static void cpu_reserve_linear(td_backend *be, const td_weight *w, int64_t rows)
{
    cpu_ctx *c = be->ctx;
    if ((w->layout == TD_CPU_LAYOUT_INT8 || w->layout == TD_CPU_LAYOUT_BF16) && rows > 0)
        cpu_q8_scratch(c, rows, w);
}

/* A float32 linear: y (n, out) = x (n, in) W^T + b, split over output
 * features. */
typedef struct linear_job {
    float *y;
    int64_t ld_y;
    const float *x;
    int64_t ld_x, n, in, out;
    const float *W, *b;
    int64_t slice; /* row-major path: output features per BLAS call */
} linear_job;

static void linear_packed_range(void *arg, int64_t p0, int64_t p1, int tid)
{
    (void)tid;
    const linear_job *j = arg;
    td_cpu_gemm_packed(j->y, j->ld_y, j->x, j->ld_x, j->n, j->W, j->out, j->in, j->b, p0, p1);
}

/* Output features [i slice, (i+1) slice) by the serial BLAS, then the
 * bias. */
static void linear_blas_slice(void *arg, int64_t i, int tid)
{
    (void)tid;
    const linear_job *j = arg;
    const int64_t o0 = i * j->slice, o1 = o0 + j->slice < j->out ? o0 + j->slice : j->out;
    const float *Ws = j->W + o0 * j->in;
    if (j->n == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)(o1 - o0), (blasint)j->in, 1.0f, Ws,
                    (blasint)j->in, j->x, 1, 0.0f, j->y + o0, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)j->n, (blasint)(o1 - o0),
                    (blasint)j->in, 1.0f, j->x, (blasint)j->ld_x, Ws, (blasint)j->in, 0.0f,
                    j->y + o0, (blasint)j->ld_y);
    if (j->b)
        for (int64_t r = 0; r < j->n; r++) {
            float *yr = j->y + r * j->ld_y;
            for (int64_t o = o0; o < o1; o++)
                yr[o] += j->b[o];
        }
}

static void cpu_linear(td_backend *be, float *y, int64_t ld_y, const float *x,
                       int64_t ld_x, int64_t n, const td_weight *w,
                       const td_weight *bias)
{
    cpu_ctx *c = be->ctx;
    if (w->layout == TD_CPU_LAYOUT_INT8 || w->layout == TD_CPU_LAYOUT_BF16) {
        cpu_linear_q8(c, y, ld_y, x, ld_x, n, w, bias);
        return;
    }
    const float *W = cpu_wdata(c, w, "linear");
    const float *b = bias ? cpu_wdata(c, bias, "linear bias") : NULL;
    if (!W || (bias && !b) || n <= 0 || w->rows == 0)
        return;
    const int64_t out = w->rows, in = w->cols;
    if (in == 0) {
        for (int64_t r = 0; r < n; r++) {
            for (int64_t o = 0; o < out; o++)
                y[r * ld_y + o] = b ? b[o] : 0.0f;
        }
        return;
    }
    linear_job j = {.y = y, .ld_y = ld_y, .x = x, .ld_x = ld_x, .n = n, .in = in,
                    .out = out, .W = W, .b = b};
    const int64_t macs = n * out * in;
    if (w->layout == TD_CPU_LAYOUT_PACKED) {
        /* Packed at load: runs of whole panels, no repacking. */
        const int64_t panels = (out + GEMM_NR - 1) / GEMM_NR;
        cpu_par(c, panels, cpu_chunks(c, panels, macs, CPU_LINEAR_PAR_MACS, CPU_LINEAR_CHUNK_MACS),
                linear_packed_range, &j);
        return;
    }
    /* Row-major weights: slices of CPU_BLAS_SLICE output features, each a
     * serial BLAS call. OpenBLAS's sums depend on where a call's columns
     * start and end, so the slices follow from the shape alone (never from
     * the thread count) and the result is the same on any number of
     * threads; a small product is one call. */
    const int64_t slices = macs < CPU_LINEAR_PAR_MACS ? 1
                                                      : (out + CPU_BLAS_SLICE - 1) / CPU_BLAS_SLICE;
    j.slice = slices == 1 ? out : CPU_BLAS_SLICE;
    cpu_pool_run(c->pool, slices < CPU_POOL_MAX_CHUNKS ? slices : CPU_POOL_MAX_CHUNKS,
                 linear_blas_slice, &j);
}

typedef struct bias_act_job {
    float *x;
    int64_t d;
    const float *b;
    td_activation act;
} bias_act_job;

static void bias_act_range(void *arg, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    const bias_act_job *j = arg;
    for (int64_t r = r0; r < r1; r++)
        td_cpu_bias_act_row(j->x + r * j->d, j->b, j->d, j->act);
}

static void cpu_bias_act(td_backend *be, float *x, int64_t n, int64_t d,
                         const td_weight *bias, td_activation act)
{
    cpu_ctx *c = be->ctx;
    const float *b = bias ? cpu_wdata(c, bias, "bias_act") : NULL;
    if (bias && !b)
        return;
    if (!b && act == TD_ACT_NONE)
        return;
    bias_act_job j = {.x = x, .d = d, .b = b, .act = act};
    cpu_par(c, n, cpu_row_chunks(c, n, n * d), bias_act_range, &j);
}

typedef struct layer_norm_job {
    float *y, *sum_out;
    const float *x, *res, *g, *bt;
    int64_t d;
    float eps;
} layer_norm_job;

static void layer_norm_range(void *arg, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    const layer_norm_job *j = arg;
    const int64_t d = j->d;
    for (int64_t r = r0; r < r1; r++) {
        /* The sum is built in the output row itself: every element is read
         * (x, res) before it is written at the same index, so y, sum_out, x
         * and res may be the same memory. */
        float *s = j->y + r * d;
        const float *xr = j->x + r * d;
        const float *rr = j->res ? j->res + r * d : NULL;
        double mean = 0.0;
        for (int64_t i = 0; i < d; i++) {
            s[i] = rr ? xr[i] + rr[i] : xr[i];
            mean += s[i];
        }
        mean /= (double)d;
        double var = 0.0;
        for (int64_t i = 0; i < d; i++) {
            double t = s[i] - mean;
            var += t * t;
        }
        var /= (double)d; /* biased, as torch.nn.LayerNorm */
        const float fmean = (float)mean;
        const float rstd = (float)(1.0 / sqrt(var + (double)j->eps));
        if (j->sum_out && j->sum_out != j->y)
            memcpy(j->sum_out + r * d, s, (size_t)d * sizeof(float));
        for (int64_t i = 0; i < d; i++)
            s[i] = (s[i] - fmean) * rstd * j->g[i] + j->bt[i];
    }
}

static void cpu_layer_norm(td_backend *be, float *y, const float *x,
                           const float *res, float *sum_out, int64_t n,
                           int64_t d, const td_weight *gamma,
                           const td_weight *beta, float eps)
{
    cpu_ctx *c = be->ctx;
    const float *g = cpu_wdata(c, gamma, "layer_norm gamma");
    const float *bt = cpu_wdata(c, beta, "layer_norm beta");
    if (!g || !bt || n <= 0 || d <= 0)
        return;
    layer_norm_job j = {.y = y, .sum_out = sum_out, .x = x, .res = res, .g = g, .bt = bt,
                        .d = d, .eps = eps};
    cpu_par(c, n, cpu_row_chunks(c, n, n * d), layer_norm_range, &j);
}

typedef struct add_job {
    float *y;
    const float *x;
} add_job;

static void add_range(void *arg, int64_t i0, int64_t i1, int tid)
{
    (void)tid;
    const add_job *j = arg;
    for (int64_t i = i0; i < i1; i++)
        j->y[i] += j->x[i];
}

static void cpu_add(td_backend *be, float *y, const float *x, int64_t n,
                    int64_t d)
{
    cpu_ctx *c = be->ctx;
    const int64_t total = n * d;
    add_job j = {.y = y, .x = x};
    cpu_par(c, total, cpu_row_chunks(c, total, total), add_range, &j);
}

typedef struct embed_job {
    float *y;
    const td_weight *table;
    const void *T;
    const int32_t *ids, *positions;
    const float *pos;
    float scale;
} embed_job;

static void embed_range(void *arg, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    const embed_job *j = arg;
    const td_weight *table = j->table;
    const int64_t d = table->cols;
    for (int64_t r = r0; r < r1; r++) {
        const float *p = j->pos ? j->pos + (int64_t)j->positions[r] * d : NULL;
        float *yr = j->y + r * d;
        const int lay = table->layout;
        if (lay == TD_CPU_LAYOUT_INT8 || lay == TD_CPU_LAYOUT_BF16 || lay == TD_CPU_LAYOUT_PACKED) {
            /* a row back in float32 (packed: a tied output projection) */
            if (lay == TD_CPU_LAYOUT_INT8)
                td_cpu_q8_row(yr, j->T, table->rows, d, j->ids[r], j->scale);
            else if (lay == TD_CPU_LAYOUT_BF16)
                td_cpu_b16_row(yr, j->T, table->rows, d, j->ids[r], j->scale);
            else
                td_cpu_packed_row(yr, j->T, d, j->ids[r], j->scale);
            if (p)
                for (int64_t i = 0; i < d; i++)
                    yr[i] += p[i];
            continue;
        }
        const float *e = (const float *)j->T + (int64_t)j->ids[r] * d;
        for (int64_t i = 0; i < d; i++)
            yr[i] = p ? e[i] * j->scale + p[i] : e[i] * j->scale;
    }
}

static void cpu_embed(td_backend *be, float *y, const td_weight *table,
                      const int32_t *ids, int64_t n, float scale,
                      const float *pos, const int32_t *positions)
{
    cpu_ctx *c = be->ctx;
    const void *T = table->layout == TD_CPU_LAYOUT_INT8 || table->layout == TD_CPU_LAYOUT_BF16
                        ? table->data
                        : cpu_wdata(c, table, "embed");
    if (!T)
        return;
    embed_job j = {.y = y, .table = table, .T = T, .ids = ids, .positions = positions,
                   .pos = pos, .scale = scale};
    cpu_par(c, n, cpu_row_chunks(c, n, n * table->cols), embed_range, &j);
}

/* Rotate-half RoPE of one row's n_heads heads with the table row cs. rope
 * and rope_rows both go through here, so that a row comes out the same
 * from either (backend.h). */
static inline void cpu_rope_row(float *row, const float *cs, int n_heads,
                                int head_dim)
{
    const int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *x1 = row + (int64_t)h * head_dim, *x2 = x1 + half;
        for (int i = 0; i < half; i++) {
            const float co = cs[i], si = cs[half + i];
            const float a = x1[i], b = x2[i];
            x1[i] = a * co - b * si;
            x2[i] = b * co + a * si;
        }
    }
}

/* rope and rope_rows: rows of x, each at pos0 + its t (rope) or at pos[r]
 * (rope_rows, pos set). */
typedef struct rope_job {
    float *x;
    int64_t ld, seq_stride;
    int n_t, n_heads, head_dim, pos0;
    const int32_t *pos;
    const float *cos_sin;
} rope_job;

static void rope_range(void *arg, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    const rope_job *j = arg;
    for (int64_t r = r0; r < r1; r++) {
        if (j->pos) {
            cpu_rope_row(j->x + r * j->ld, j->cos_sin + (int64_t)j->pos[r] * j->head_dim,
                         j->n_heads, j->head_dim);
            continue;
        }
        const int64_t s = r / j->n_t, t = r % j->n_t;
        cpu_rope_row(j->x + s * j->seq_stride + t * j->ld,
                     j->cos_sin + (int64_t)(j->pos0 + t) * j->head_dim, j->n_heads,
                     j->head_dim);
    }
}

static void cpu_rope(td_backend *be, float *x, int n_seq, int n_t, int64_t ld,
                     int64_t seq_stride, int n_heads, int head_dim, int pos0,
                     const float *cos_sin)
{
    cpu_ctx *c = be->ctx;
    const int64_t rows = (int64_t)n_seq * n_t;
    rope_job j = {.x = x, .ld = ld, .seq_stride = seq_stride, .n_t = n_t, .n_heads = n_heads,
                  .head_dim = head_dim, .pos0 = pos0, .cos_sin = cos_sin};
    cpu_par(c, rows, cpu_row_chunks(c, rows, rows * n_heads * head_dim), rope_range, &j);
}

static void cpu_rope_rows(td_backend *be, float *x, int64_t n, int64_t ld,
                          int n_heads, int head_dim, const int32_t *pos,
                          const float *cos_sin)
{
    cpu_ctx *c = be->ctx;
    if (n <= 0 || n_heads <= 0 || head_dim < 2)
        return;
    if (!pos) {
        cpu_fail(c, "cpu: rope_rows: %lld rows but no positions", (long long)n);
        return;
    }
    rope_job j = {.x = x, .ld = ld, .n_heads = n_heads, .head_dim = head_dim, .pos = pos,
                  .cos_sin = cos_sin};
    cpu_par(c, n, cpu_row_chunks(c, n, n * n_heads * head_dim), rope_range, &j);
}

/* --- attention ------------------------------------------------------------ */

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

static void cpu_attention(td_backend *be, const td_attn_args *a)
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

/* --- decoding scores ------------------------------------------------------ */

/* One row at a time (cpu_logprobs.c: log-softmax, suppression, forced EOS
 * and top-k fused, vectorised where the CPU allows), runs of rows across
 * threads. */
typedef struct topk_job {
    float *logits;
    int64_t vocab;
    const int32_t *suppress, *force_rows;
    int n_suppress, force_eos, eos_id, k;
    const float *row_bias;
    float *out_val;
    int32_t *out_idx;
} topk_job;

static void topk_range(void *arg, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    const topk_job *j = arg;
    for (int64_t r = r0; r < r1; r++)
        td_cpu_logprobs_row(j->logits + r * j->vocab, j->vocab, j->suppress, j->n_suppress,
                            j->force_eos || (j->force_rows && j->force_rows[r]), j->eos_id,
                            j->row_bias ? j->row_bias[r] : 0.0f, j->k, j->out_val + r * j->k,
                            j->out_idx + r * j->k);
}

static void cpu_logprobs_topk(td_backend *be, float *logits, int64_t n,
                              int64_t vocab, const int32_t *suppress,
                              int n_suppress, int force_eos,
                              const int32_t *force_rows, int eos_id,
                              const float *row_bias, int k, float *out_val,
                              int32_t *out_idx)
{
    cpu_ctx *c = be->ctx;
    if (n <= 0 || vocab <= 0)
        return;
    if (k < 1 || k > vocab || k > 64) {
        cpu_fail(c, "cpu: logprobs_topk: k %d out of [1, min(vocab %lld, 64)]",
                 k, (long long)vocab);
        return;
    }
    topk_job j = {.logits = logits, .vocab = vocab, .suppress = suppress,
                  .n_suppress = n_suppress, .force_eos = force_eos, .force_rows = force_rows,
                  .eos_id = eos_id, .row_bias = row_bias, .k = k, .out_val = out_val,
                  .out_idx = out_idx};
    cpu_par(c, n, cpu_row_chunks(c, n, n * vocab), topk_range, &j);
}

/* gather_rows and scatter_rows: row r of src at index[r] (gather: from
 * there; scatter: to there). */
typedef struct rows_job {
    float *dst;
    const float *src;
    const int32_t *index, *row_len;
    int64_t row_elems, ld_dst, ld_src;
} rows_job;

static void gather_range(void *arg, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    const rows_job *j = arg;
    for (int64_t r = r0; r < r1; r++) {
        int64_t len = j->row_len ? (int64_t)j->row_len[r] : j->row_elems;
        len = len < 0 ? 0 : len > j->row_elems ? j->row_elems : len;
        memcpy(j->dst + r * j->ld_dst, j->src + (int64_t)j->index[r] * j->ld_src,
               (size_t)len * sizeof(float));
    }
}

static void scatter_range(void *arg, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    const rows_job *j = arg;
    for (int64_t r = r0; r < r1; r++)
        memcpy(j->dst + (int64_t)j->index[r] * j->ld_dst, j->src + r * j->ld_src,
               (size_t)j->row_elems * sizeof(float));
}

static void cpu_gather_rows(td_backend *be, float *dst, const float *src,
                            const int32_t *index, int64_t n, int64_t row_elems,
                            int64_t ld, const int32_t *row_len)
{
    cpu_ctx *c = be->ctx;
    if (row_elems <= 0)
        return;
    rows_job j = {.dst = dst, .src = src, .index = index, .row_len = row_len,
                  .row_elems = row_elems, .ld_dst = ld, .ld_src = ld};
    cpu_par(c, n, cpu_row_chunks(c, n, n * row_elems), gather_range, &j);
}

static void cpu_scatter_rows(td_backend *be, float *dst, int64_t ld_dst,
                             const float *src, int64_t ld_src,
                             const int32_t *index, int64_t n, int64_t row_elems)
{
    cpu_ctx *c = be->ctx;
    if (n <= 0 || row_elems <= 0)
        return;
    if (!index) {
        cpu_fail(c, "cpu: scatter_rows: %lld rows but no index", (long long)n);
        return;
    }
    /* index entries are distinct (backend.h): no two threads write a row */
    rows_job j = {.dst = dst, .src = src, .index = index, .row_elems = row_elems,
                  .ld_dst = ld_dst, .ld_src = ld_src};
    cpu_par(c, n, cpu_row_chunks(c, n, n * row_elems), scatter_range, &j);
}

static const td_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .dealloc = cpu_dealloc,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .memset0 = cpu_memset0,
    .sync = cpu_sync,
    .weight_upload = cpu_weight_upload,
    .weight_free = cpu_weight_free,
    .linear = cpu_linear,
    .bias_act = cpu_bias_act,
    .layer_norm = cpu_layer_norm,
    .add = cpu_add,
    .embed = cpu_embed,
    .rope = cpu_rope,
    .rope_rows = cpu_rope_rows,
    .attention = cpu_attention,
    .logprobs_topk = cpu_logprobs_topk,
    .gather_rows = cpu_gather_rows,
    .scatter_rows = cpu_scatter_rows,
    .reserve_linear = cpu_reserve_linear, /* int8: the quantized activations */
};

td_backend *td_cpu_backend_create(int n_threads, char *err, size_t errlen)
{
    if (n_threads < 0) {
        if (err && errlen)
            snprintf(err, errlen, "cpu: n_threads must be >= 0 (got %d)",
                     n_threads);
        return NULL;
    }
    if (n_threads == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = online > 0 ? (int)(online < 1024 ? online : 1024) : 1;
    }
    td_backend *be = calloc(1, sizeof *be);
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        cpu_set_err(err, errlen, "cpu: out of memory for the backend");
        return NULL;
    }
    c->n_threads = n_threads;
    c->pool = cpu_pool_create(n_threads, err, errlen);
    if (!c->pool) {
        free(be);
        free(c);
        return NULL;
    }
    be->ops = &cpu_ops;
    be->ctx = c;
    /* Serial BLAS inside our own chunks (see the top of the file);
     * process-wide, and the same for every CPU backend. */
    openblas_set_num_threads(1);
    return be;
}

/* The registry's create(): the CPU keeps float32 (or int8) weights, and
 * bfloat16 where the CPU multiplies it (AVX512-BF16, or AMX-BF16 tiles);
 * float16 storage, and bfloat16 on other CPUs, is a request for another
 * device. */
static td_backend *cpu_device_create(const td_device *dev, const td_backend_params *p, char *err,
                                     size_t errlen)
{
    (void)dev;
    if (p->store == TD_STORE_F16 || (p->store == TD_STORE_BF16 && !td_cpu_has_bf16())) {
        if (err && errlen)
            snprintf(err, errlen, "dtype %s needs --device cuda%s: the CPU backend keeps "
                     "float32 or int8 weights (use --dtype auto, float32, int8 or int8-all)",
                     p->store == TD_STORE_F16 ? "float16" : "bfloat16",
                     p->store == TD_STORE_F16 ? "" : " or a CPU with AVX512-BF16 or AMX-BF16");
        return NULL;
    }
    td_backend *be = td_cpu_backend_create(p->n_threads, err, errlen);
    if (be && (p->store == TD_STORE_INT8 || p->store == TD_STORE_INT8_ALL)) {
        ((cpu_ctx *)be->ctx)->int8 = 1;
        ((cpu_ctx *)be->ctx)->int8_all = p->store == TD_STORE_INT8_ALL;
    }
    if (be && p->store == TD_STORE_BF16)
        ((cpu_ctx *)be->ctx)->bf16 = 1;
    return be;
}

static int cpu_device_count(char *why, size_t whylen)
{
    (void)why;
    (void)whylen;
    return 1;
}

static const td_device_family cpu_family = {
    .name = "cpu",
    .kind = TD_DEVICE_CPU,
    .count = cpu_device_count,
    .create = cpu_device_create,
};

int td_cpu_backend_register(void)
{
    return td_device_register(&cpu_family);
}
