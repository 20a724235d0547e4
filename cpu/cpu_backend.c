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
#include "beam_rules.h"
#include "cpu_backend.h"
#include "cpu_ctx.h"
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


static void cpu_set_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
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
    for (int64_t r = r0; r < r1; r++) {
        /* the token forced on row r, -1: none (force_eos: eos on every row) */
        const int fid = j->force_eos ? j->eos_id : j->force_rows ? j->force_rows[r] : -1;
        td_cpu_logprobs_row(j->logits + r * j->vocab, j->vocab, j->suppress, j->n_suppress,
                            fid >= 0, fid, j->row_bias ? j->row_bias[r] : 0.0f, j->k,
                            j->out_val + r * j->k, j->out_idx + r * j->k);
    }
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

/* The CPU twin of gpu/gpu_beam.cu: the same rules (beam_rules.h), one
 * sentence after another (a few hundred comparisons each: no threads). */
static void cpu_beam_step(td_backend *be, const td_beam_args *a)
{
    cpu_ctx *c = be->ctx;
    if (a->max_beam < 1 || a->max_beam > TD_BEAM_MAX || a->ks < 1) {
        cpu_fail(c, "cpu: beam_step: max_beam %d (1..%d), ks %d", a->max_beam, TD_BEAM_MAX,
                 a->ks);
        return;
    }
    /* every sentence, as the CUDA kernel's blocks: one out of contract
     * leaves the others stepped */
    for (int i = 0; i < a->n_sent; i++)
        if (td_beam_sent_step(a, i) != 0)
            cpu_fail(c, "cpu: beam_step: sentence %d of %d is out of the op's contract", i,
                     a->n_sent);
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
    .beam_step = cpu_beam_step,
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
