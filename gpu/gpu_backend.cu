/*
 * gpu_backend.cu - the td_backend_ops table of the CUDA backend: lifetime,
 * memory, weight upload, and thin wrappers that make the backend's device
 * current and call the op families (gpu_*.cu).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_backend.h"
#include "gpu_internal.cuh"

/* cuBLAS workspace set once per handle (NVIDIA recommends 32 MiB on
 * Hopper), so no GEMM ever allocates behind our back. */
#define GPU_BLAS_WORKSPACE ((size_t)32 << 20)

/* Pinned host staging for upload() and download() (cudaHostAlloc): an
 * upload is copied into the ring and queued from there, so the copy is a
 * true asynchronous DMA and the caller's buffer is free at once; a download
 * lands in the ring and is copied out after the stream is synchronised. */
#define GPU_STAGE_BYTES ((size_t)4 << 20)

typedef struct gpu_owner {
    gpu_ctx c;
    void *blas_ws;          /* GPU_BLAS_WORKSPACE bytes */
    char *stage;            /* GPU_STAGE_BYTES of pinned host memory */
    size_t stage_head;      /* first free byte: [0, stage_head) may still be
                             * read by queued uploads */
    cudaEvent_t stage_done; /* recorded after the latest upload from stage */
} gpu_owner;

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* The context of `be` with its device made current for this thread. */
static gpu_ctx *enter(td_backend *be)
{
    gpu_ctx *c = (gpu_ctx *)be->ctx;
    cudaError_t e = cudaSetDevice(c->device);
    if (e != cudaSuccess)
        gpu_fail(c, "cuda: cudaSetDevice(%d): %s", c->device, cudaGetErrorString(e));
    return c;
}

/* --- lifetime ----------------------------------------------------------- */

static void gpu_destroy(td_backend *be)
{
    if (!be)
        return;
    gpu_owner *o = (gpu_owner *)be->ctx;
    if (o) {
        gpu_ctx *c = &o->c;
        (void)cudaSetDevice(c->device);
        if (c->stream)
            (void)cudaStreamSynchronize(c->stream);
        gpu_prof_free(c);
        gpu_graph_free(c);
        if (c->blas)
            (void)cublasDestroy(c->blas);
        (void)cudaFree(o->blas_ws);
        if (o->stage_done)
            (void)cudaEventDestroy(o->stage_done);
        (void)cudaFreeHost(o->stage);
        (void)cudaFree(c->scratch);
        if (c->stream)
            (void)cudaStreamDestroy(c->stream);
        (void)cudaGetLastError();
        free(o);
    }
    free(be);
}

/* --- memory ------------------------------------------------------------- */

static void *gpu_alloc(td_backend *be, size_t bytes)
{
    gpu_ctx *c = enter(be);
    void *p = NULL;
    if (bytes == 0)
        bytes = 256;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is not sticky */
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        (void)cudaGetLastError();
        /* NULL tells the caller; the latched message (sync) has the numbers */
        gpu_fail(c, "cuda: cudaMalloc(%zu bytes): %s (%zu of %zu bytes free on device %d)",
                 bytes, cudaGetErrorString(e), free_b, total_b, c->device);
        return NULL;
    }
    return p;
}

static void gpu_dealloc(td_backend *be, void *p)
{
    if (!p)
        return;
    gpu_ctx *c = enter(be);
    CUDA_CHECK(cudaFree(p));
}

/* The stream has run everything queued: the staging ring is free. */
static void stage_idle(gpu_owner *o)
{
    o->stage_head = 0;
}

static void gpu_upload(td_backend *be, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *c = enter(be);
    gpu_owner *o = (gpu_owner *)be->ctx;
    if (!bytes)
        return;
    gpu_prof_begin(c, GPU_PROF_UPLOAD);
    if (bytes > GPU_STAGE_BYTES / 4) { /* not a per-step transfer: pageable */
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    } else {
        size_t off = (o->stage_head + 15) / 16 * 16;
        if (off + bytes > GPU_STAGE_BYTES) { /* wrap: the ring's uploads must have run */
            CUDA_CHECK(cudaEventSynchronize(o->stage_done));
            off = 0;
        }
        if (off + bytes > GPU_STAGE_BYTES) { /* cannot happen (bytes <= a quarter) */
            gpu_fail(c, "cuda: upload: staging overrun (%zu + %zu bytes of %zu)", off, bytes,
                     GPU_STAGE_BYTES);
            return;
        }
        memcpy(o->stage + off, src, bytes);
        CUDA_CHECK(cudaMemcpyAsync(dst, o->stage + off, bytes, cudaMemcpyHostToDevice,
                                   c->stream));
        CUDA_CHECK(cudaEventRecord(o->stage_done, c->stream));
        o->stage_head = off + bytes;
    }
    gpu_prof_end(c, GPU_PROF_UPLOAD, bytes);
}

/* Through the staging ring in chunks: the stream runs every queued upload
 * before the copy that overwrites their bytes (one stream, in order). */
static void gpu_download(td_backend *be, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *c = enter(be);
    gpu_owner *o = (gpu_owner *)be->ctx;
    if (!bytes)
        return;
    gpu_prof_begin(c, GPU_PROF_DOWNLOAD);
    for (size_t done = 0; done < bytes;) {
        const size_t n = bytes - done < GPU_STAGE_BYTES ? bytes - done : GPU_STAGE_BYTES;
        CUDA_CHECK(cudaMemcpyAsync(o->stage, (const char *)src + done, n,
                                   cudaMemcpyDeviceToHost, c->stream));
        CUDA_CHECK(cudaStreamSynchronize(c->stream));
        stage_idle(o);
        memcpy((char *)dst + done, o->stage, n);
        done += n;
    }
    gpu_prof_end(c, GPU_PROF_DOWNLOAD, bytes);
    gpu_prof_harvest(c);
}

static void gpu_copy(td_backend *be, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *c = enter(be);
    if (!bytes)
        return;
    gpu_prof_begin(c, GPU_PROF_COPY);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
    gpu_prof_end(c, GPU_PROF_COPY, bytes);
}

static void gpu_memset0(td_backend *be, void *dst, size_t bytes)
{
    gpu_ctx *c = enter(be);
    if (!bytes)
        return;
    gpu_prof_begin(c, GPU_PROF_MEMSET0);
    CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, c->stream));
    gpu_prof_end(c, GPU_PROF_MEMSET0, bytes);
}

static void sync_stream(gpu_ctx *c)
{
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    CUDA_CHECK(cudaGetLastError());
}

static int gpu_sync(td_backend *be, char *err, size_t errlen)
{
    gpu_ctx *c = enter(be);
    gpu_prof_begin(c, GPU_PROF_SYNC);
    sync_stream(c);
    gpu_prof_end(c, GPU_PROF_SYNC, 0);
    if (!c->failed) {
        stage_idle((gpu_owner *)be->ctx);
        gpu_prof_harvest(c);
        return 0;
    }
    set_err(err, errlen, "%s", c->err);
    c->failed = 0;
    c->err[0] = '\0';
    return -1;
}

/* --- weights ------------------------------------------------------------ */

static int gpu_weight_upload(td_backend *be, td_weight *w, const float *host, int64_t rows,
                             int64_t cols, td_dtype want, float scale, char *err,
                             size_t errlen)
{
    gpu_ctx *c = enter(be);
    memset(w, 0, sizeof *w);
    if (rows < 0 || cols < 0 ||
        (cols > 0 && (uint64_t)rows > SIZE_MAX / sizeof(float) / (uint64_t)cols)) {
        set_err(err, errlen, "cuda: bad weight shape (%lld, %lld)", (long long)rows,
                (long long)cols);
        return -1;
    }
    if (c->failed) {
        set_err(err, errlen, "%s", c->err);
        return -1;
    }
    /* Vectors stay float32 (cheap, and they are added to float32
     * activations); matrices keep the checkpoint's dtype unless a storage
     * was asked for. */
    td_dtype dt = TD_F32;
    if (rows > 1) {
        switch (c->store) {
        case TD_STORE_F32: dt = TD_F32; break;
        case TD_STORE_F16: dt = TD_F16; break;
        case TD_STORE_BF16: dt = TD_BF16; break;
        default: dt = want == TD_F16 || want == TD_BF16 ? want : TD_F32; break;
        }
    }
    const size_t count = (size_t)rows * (size_t)cols;
    const size_t esize = dt == TD_F32 ? 4 : 2;
    const size_t bytes = count * esize;
    const int scaled = scale != 0.0f && scale != 1.0f;
    void *staged = (void *)host;
    if (dt == TD_F32 && scaled && count) { /* float32: fold the scale */
        float *f = (float *)malloc(bytes);
        if (!f) {
            set_err(err, errlen, "cuda: out of host memory scaling a (%lld, %lld) weight",
                    (long long)rows, (long long)cols);
            return -1;
        }
        for (size_t i = 0; i < count; i++)
            f[i] = host[i] * scale;
        staged = f;
    } else if (dt != TD_F32 && count) { /* half: the values as they are */
        staged = malloc(bytes);
        if (!staged) {
            set_err(err, errlen, "cuda: out of host memory converting a (%lld, %lld) weight",
                    (long long)rows, (long long)cols);
            return -1;
        }
        if (dt == TD_F16) {
            __half *h = (__half *)staged;
            for (size_t i = 0; i < count; i++)
                h[i] = __float2half_rn(host[i]);
        } else {
            __nv_bfloat16 *h = (__nv_bfloat16 *)staged;
            for (size_t i = 0; i < count; i++)
                h[i] = __float2bfloat16_rn(host[i]);
        }
    }
    void *dev = NULL;
    cudaError_t e = cudaMalloc(&dev, bytes ? bytes : 256);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        set_err(err, errlen,
                "cuda: out of device memory for a (%lld, %lld) weight (%zu bytes; %zu of %zu "
                "bytes free on device %d)",
                (long long)rows, (long long)cols, bytes, free_b, total_b, c->device);
        if (staged != host)
            free(staged);
        return -1;
    }
    if (bytes) {
        e = cudaMemcpyAsync(dev, staged, bytes, cudaMemcpyHostToDevice, c->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(c->stream);
    }
    if (staged != host)
        free(staged);
    if (e != cudaSuccess) {
        set_err(err, errlen, "cuda: uploading a (%lld, %lld) weight: %s", (long long)rows,
                (long long)cols, cudaGetErrorString(e));
        (void)cudaFree(dev);
        return -1;
    }
    w->data = dev;
    w->dtype = dt;
    w->rows = rows;
    w->cols = cols;
    w->scale = dt != TD_F32 && scaled ? scale : 0.0f; /* applied by linear */
    return 0;
}

static void gpu_weight_free(td_backend *be, td_weight *w)
{
    if (!w)
        return;
    if (w->data) {
        gpu_ctx *c = enter(be);
        cudaError_t e = cudaFree(w->data);
        if (e != cudaSuccess)
            gpu_fail(c, "cuda: cudaFree(weight): %s", cudaGetErrorString(e));
    }
    memset(w, 0, sizeof *w);
}

/* --- compute: device made current, then the op family (timed under
 * TD_GPU_PROFILE) -------------------------------------------------------- */

#define TIMED(c, op, call)                                                         \
    do {                                                                           \
        gpu_prof_begin(c, op);                                                     \
        call;                                                                      \
        gpu_prof_end(c, op, 0);                                                    \
    } while (0)

static void t_linear(td_backend *be, float *y, int64_t ld_y, const float *x, int64_t ld_x,
                     int64_t n, const td_weight *w, const td_weight *bias)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_LINEAR, gpu_op_linear(c, y, ld_y, x, ld_x, n, w, bias));
}

static void t_bias_act(td_backend *be, float *x, int64_t n, int64_t d, const td_weight *bias,
                       td_activation act)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_BIAS_ACT, gpu_op_bias_act(c, x, n, d, bias, act));
}

static void t_layer_norm(td_backend *be, float *y, const float *x, const float *res,
                         float *sum_out, int64_t n, int64_t d, const td_weight *gamma,
                         const td_weight *beta, float eps)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_LAYER_NORM,
          gpu_op_layer_norm(c, y, x, res, sum_out, n, d, gamma, beta, eps));
}

static void t_add(td_backend *be, float *y, const float *x, int64_t n, int64_t d)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_ADD, gpu_op_add(c, y, x, n, d));
}

static void t_embed(td_backend *be, float *y, const td_weight *table, const int32_t *ids,
                    int64_t n, float scale, const float *pos, const int32_t *positions)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_EMBED, gpu_op_embed(c, y, table, ids, n, scale, pos, positions));
}

static void t_rope(td_backend *be, float *x, int n_seq, int n_t, int64_t ld, int64_t seq_stride,
                   int n_heads, int head_dim, int pos0, const float *cos_sin)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_ROPE,
          gpu_op_rope(c, x, n_seq, n_t, ld, seq_stride, n_heads, head_dim, pos0, cos_sin));
}

static void t_rope_rows(td_backend *be, float *x, int64_t n, int64_t ld, int n_heads,
                        int head_dim, const int32_t *pos, const float *cos_sin)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_ROPE_ROWS, gpu_op_rope_rows(c, x, n, ld, n_heads, head_dim, pos, cos_sin));
}

static void t_attention(td_backend *be, const td_attn_args *a)
{
    gpu_ctx *c = enter(be);
    const gpu_prof_op op =
        c->prof && gpu_attn_use_flash(c, a) ? GPU_PROF_ATTN_FLASH : GPU_PROF_ATTN_NAIVE;
    TIMED(c, op, gpu_op_attention(c, a));
}

static void t_logprobs_topk(td_backend *be, float *logits, int64_t n, int64_t vocab,
                            const int32_t *suppress, int n_suppress, int force_eos,
                            const int32_t *force_rows, int eos_id, const float *row_bias, int k,
                            float *out_val, int32_t *out_idx)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_LOGPROBS_TOPK,
          gpu_op_logprobs_topk(c, logits, n, vocab, suppress, n_suppress, force_eos, force_rows,
                               eos_id, row_bias, k, out_val, out_idx));
}

static void t_gather_rows(td_backend *be, float *dst, const float *src, const int32_t *index,
                          int64_t n, int64_t row_elems, int64_t ld, const int32_t *row_len)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_GATHER_ROWS,
          gpu_op_gather_rows(c, dst, src, index, n, row_elems, ld, row_len));
}

static void t_scatter_rows(td_backend *be, float *dst, int64_t ld_dst, const float *src,
                           int64_t ld_src, const int32_t *index, int64_t n, int64_t row_elems)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_SCATTER_ROWS,
          gpu_op_scatter_rows(c, dst, ld_dst, src, ld_src, index, n, row_elems));
}

static void t_beam_step(td_backend *be, const td_beam_args *a)
{
    gpu_ctx *c = enter(be);
    TIMED(c, GPU_PROF_BEAM_STEP, gpu_op_beam_step(c, a));
}

static int t_step_begin(td_backend *be)
{
    return gpu_graph_begin(enter(be));
}

static int t_step_end(td_backend *be)
{
    return gpu_graph_end(enter(be));
}

static void t_reserve_linear(td_backend *be, const td_weight *w, int64_t rows)
{
    gpu_op_reserve_linear(enter(be), w, rows);
}

/* Positional (C++17 has no designated initializers): the order of the
 * fields of td_backend_ops in backend.h. */
static const td_backend_ops gpu_ops = {
    "cuda",          gpu_destroy,     gpu_alloc,      gpu_dealloc,     gpu_upload,
    gpu_download,    gpu_copy,        gpu_memset0,    gpu_sync,        gpu_weight_upload,
    gpu_weight_free, t_linear,        t_bias_act,     t_layer_norm,    t_add,
    t_embed,         t_rope,          t_rope_rows,    t_attention,     t_logprobs_topk,
    t_gather_rows,   t_scatter_rows,  t_beam_step,    t_step_begin,    t_step_end,
    t_reserve_linear,
};

const char *td_cuda_attention_kernel(const td_backend *be, const td_attn_args *a)
{
    const gpu_ctx *c = (const gpu_ctx *)be->ctx;
    return gpu_attn_use_flash(c, a) ? "flash" : "naive";
}

int td_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

/* The registry's count(): td_cuda_device_count with the reason for none. */
static int gpu_device_count(char *why, size_t whylen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        (void)cudaGetLastError();
        set_err(why, whylen, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no device found");
        return 0;
    }
    return n;
}

static td_backend *gpu_device_create(const td_device *dev, const td_backend_params *p,
                                     char *err, size_t errlen)
{
    td_cuda_opts co = {};
    co.store = p->store;
    co.half_activations = p->half_activations;
    return td_cuda_backend_create(dev->index, &co, err, errlen);
}

static const td_device_family gpu_family = {"cuda", TD_DEVICE_CUDA, gpu_device_count,
                                            gpu_device_create};

const td_device_family *td_cuda_family(void)
{
    return &gpu_family;
}

int td_cuda_backend_register(void)
{
    return td_device_register(&gpu_family);
}

td_backend *td_cuda_backend_create(int device, const td_cuda_opts *opts, char *err,
                                   size_t errlen)
{
    const td_cuda_opts co = opts ? *opts : td_cuda_opts{};
    if (co.store == TD_STORE_INT8 || co.store == TD_STORE_INT8_ALL) {
        set_err(err, errlen, "dtype int8 and int8-all are CPU-only (--device cpu); use float32, float16 "
                "or bfloat16 on cuda");
        return NULL;
    }
    if (co.store < TD_STORE_AUTO || co.store > TD_STORE_BF16) {
        set_err(err, errlen, "cuda: unknown weight storage %d", (int)co.store);
        return NULL;
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        (void)cudaGetLastError();
        set_err(err, errlen, "cuda: no usable CUDA device (%s); use --device cpu",
                e != cudaSuccess ? cudaGetErrorString(e) : "no device found");
        return NULL;
    }
    if (device < 0 || device >= count) {
        set_err(err, errlen, "cuda: device %d does not exist (%d device%s: cuda:0..cuda:%d); "
                "or use --device cpu", device, count, count == 1 ? "" : "s", count - 1);
        return NULL;
    }
    td_backend *be = (td_backend *)calloc(1, sizeof *be);
    gpu_owner *o = (gpu_owner *)calloc(1, sizeof *o);
    if (!be || !o) {
        free(be);
        free(o);
        set_err(err, errlen, "cuda: out of host memory for the backend");
        return NULL;
    }
    gpu_ctx *c = &o->c;
    c->device = device;
    c->store = co.store;
    c->half_activations = co.half_activations != 0;
    const char *attn = getenv("TD_GPU_ATTN");
    if (!attn || !*attn || !strcmp(attn, "flash")) {
        c->attn_kernel = GPU_ATTN_AUTO;
    } else if (!strcmp(attn, "naive")) {
        c->attn_kernel = GPU_ATTN_NAIVE;
    } else {
        set_err(err, errlen, "cuda: TD_GPU_ATTN is '%.40s'; use flash (the default) or naive",
                attn);
        free(be);
        free(o);
        return NULL;
    }
    be->ops = &gpu_ops;
    be->ctx = o; /* gpu_ctx is the first member */

    const char *what = NULL;
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    if ((e = cudaSetDevice(device)) != cudaSuccess)
        what = "cudaSetDevice";
    else if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess)
        what = "cudaStreamCreate";
    else if ((e = cudaDeviceGetAttribute(&c->max_smem_optin,
                                         cudaDevAttrMaxSharedMemoryPerBlockOptin, device)) !=
             cudaSuccess)
        what = "cudaDeviceGetAttribute";
    else if ((e = cudaMalloc(&o->blas_ws, GPU_BLAS_WORKSPACE)) != cudaSuccess)
        what = "cudaMalloc(cuBLAS workspace)";
    else if ((e = cudaHostAlloc((void **)&o->stage, GPU_STAGE_BYTES, cudaHostAllocDefault)) !=
             cudaSuccess)
        what = "cudaHostAlloc(transfer staging)";
    else if ((e = cudaEventCreateWithFlags(&o->stage_done, cudaEventDisableTiming)) !=
             cudaSuccess)
        what = "cudaEventCreate";
    else if (gpu_prof_init(c) != 0) {
        what = "TD_GPU_PROFILE (its CUDA events)";
        e = cudaErrorMemoryAllocation;
    }
    else if ((bs = cublasCreate(&c->blas)) != CUBLAS_STATUS_SUCCESS)
        what = "cublasCreate";
    else if ((bs = cublasSetStream(c->blas, c->stream)) != CUBLAS_STATUS_SUCCESS)
        what = "cublasSetStream";
    else if ((bs = cublasSetWorkspace(c->blas, o->blas_ws, GPU_BLAS_WORKSPACE)) !=
             CUBLAS_STATUS_SUCCESS)
        what = "cublasSetWorkspace";
    /* Pure float32 GEMMs for float32 weights (no TF32): the F32 goldens are
     * token-exact. */
    else if ((bs = cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
        what = "cublasSetMathMode";
    if (what) {
        (void)cudaGetLastError();
        set_err(err, errlen, "cuda: %s on device %d: %s; use --device cpu if this machine has no "
                "working GPU", what, device,
                bs != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(bs) : cudaGetErrorString(e));
        gpu_destroy(be);
        return NULL;
    }
    gpu_graph_init(c); /* after the profile: TD_GPU_PROFILE turns graphs off */
    return be;
}
