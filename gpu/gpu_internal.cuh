/*
 * gpu_internal.cuh - shared by the .cu files of gpu/ only (CUDA C++): the
 * backend context, the error macros and the entry points of each op family.
 * Not a public header (model/ never sees it).
 */
#ifndef TD_GPU_INTERNAL_CUH
#define TD_GPU_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* Which attention kernel the op runs (TD_GPU_ATTN, gpu_attention.cu). */
typedef enum gpu_attn_kind {
    GPU_ATTN_AUTO = 0, /* flash unless probabilities are captured */
    GPU_ATTN_NAIVE,    /* always the row-per-block kernel */
} gpu_attn_kind;

/* The ops TD_GPU_PROFILE times (gpu_profile.cu), one row each. */
typedef enum gpu_prof_op {
    GPU_PROF_LINEAR = 0,
    GPU_PROF_BIAS_ACT,
    GPU_PROF_LAYER_NORM,
    GPU_PROF_ADD,
    GPU_PROF_EMBED,
    GPU_PROF_ROPE,
    GPU_PROF_ROPE_ROWS,
    GPU_PROF_ATTN_FLASH,
    GPU_PROF_ATTN_NAIVE,
    GPU_PROF_LOGPROBS_TOPK,
    GPU_PROF_GATHER_ROWS,
    GPU_PROF_SCATTER_ROWS,
    GPU_PROF_BEAM_STEP,
    GPU_PROF_UPLOAD,
    GPU_PROF_DOWNLOAD,
    GPU_PROF_COPY,
    GPU_PROF_MEMSET0,
    GPU_PROF_SYNC,
    GPU_PROF_N
} gpu_prof_op;

typedef struct gpu_prof gpu_prof;

/* One backend: everything here is touched only by the thread that owns the
 * backend (backend.h). */
typedef struct gpu_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *scratch;          /* grow-only device scratch, see gpu_scratch() */
    size_t scratch_bytes;
    int max_smem_optin;     /* cudaDevAttrMaxSharedMemoryPerBlockOptin */
    td_store store;         /* storage of weight matrices (td_cuda_opts) */
    int half_activations;   /* GEMMs with half weights: round x once, no split */
    gpu_attn_kind attn_kernel; /* TD_GPU_ATTN at creation */
    gpu_prof *prof;         /* TD_GPU_PROFILE: per-op timings, or NULL */
    int failed;             /* latched failure, cleared by sync() */
    char err[512];
    int graphs;             /* TD_GPU_GRAPHS (default 1; 0 with TD_GPU_PROFILE):
                             * decoder steps captured as CUDA graphs */
    int capturing;          /* between step_begin and step_end, capturing */
    int graph_fails;        /* captures that failed in a row (3: graphs off) */
    cudaGraphExec_t step_exec; /* the last step's graph, updated in place */
} gpu_ctx;

#ifdef __cplusplus
extern "C" {
#endif

/* Latches the first failure (printf-style message); later ones are dropped. */
void gpu_fail(gpu_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* TD_GPU_PROFILE (gpu_profile.cu). init: c->prof set when the variable
 * asks for it (0, or -1 when the events cannot be made); begin/end bracket
 * one op on c's stream (no-ops without a profile); harvest reads the
 * recorded times (waits for the stream); free prints the table to stderr
 * and releases the profile (accepts none). */
int gpu_prof_init(gpu_ctx *c);
void gpu_prof_begin(gpu_ctx *c, gpu_prof_op op);
void gpu_prof_end(gpu_ctx *c, gpu_prof_op op, size_t bytes);
void gpu_prof_harvest(gpu_ctx *c);
void gpu_prof_free(gpu_ctx *c);

/* At least `bytes` of device scratch or NULL (failure latched). The old
 * contents are not kept; growing waits for the stream first, so work queued
 * on the old buffer finishes before it is freed. */
void *gpu_scratch(gpu_ctx *c, size_t bytes);

/* Op entry points, one family per file. Arguments as in backend.h. */
void gpu_op_linear(gpu_ctx *c, float *y, int64_t ld_y, const float *x, int64_t ld_x,
                   int64_t n, const td_weight *w, const td_weight *bias);
void gpu_op_reserve_linear(gpu_ctx *c, const td_weight *w, int64_t rows);
void gpu_op_bias_act(gpu_ctx *c, float *x, int64_t n, int64_t d, const td_weight *bias,
                     td_activation act);
void gpu_op_add(gpu_ctx *c, float *y, const float *x, int64_t n, int64_t d);
void gpu_op_gather_rows(gpu_ctx *c, float *dst, const float *src, const int32_t *index,
                        int64_t n, int64_t row_elems, int64_t ld, const int32_t *row_len);
void gpu_op_scatter_rows(gpu_ctx *c, float *dst, int64_t ld_dst, const float *src,
                         int64_t ld_src, const int32_t *index, int64_t n, int64_t row_elems);
void gpu_op_layer_norm(gpu_ctx *c, float *y, const float *x, const float *res,
                       float *sum_out, int64_t n, int64_t d, const td_weight *gamma,
                       const td_weight *beta, float eps);
void gpu_op_embed(gpu_ctx *c, float *y, const td_weight *table, const int32_t *ids,
                  int64_t n, float scale, const float *pos, const int32_t *positions);
void gpu_op_rope(gpu_ctx *c, float *x, int n_seq, int n_t, int64_t ld, int64_t seq_stride,
                 int n_heads, int head_dim, int pos0, const float *cos_sin);
void gpu_op_rope_rows(gpu_ctx *c, float *x, int64_t n, int64_t ld, int n_heads, int head_dim,
                      const int32_t *pos, const float *cos_sin);
void gpu_op_attention(gpu_ctx *c, const td_attn_args *a);
/* 1 when the op would run the flash kernel on these arguments. */
int gpu_attn_use_flash(const gpu_ctx *c, const td_attn_args *a);
/* The flash kernel (gpu_attn_flash.cu): fits says whether it can take the
 * call (head_dim, relative table, shared memory); no capture. */
int gpu_attn_flash_fits(const gpu_ctx *c, const td_attn_args *a);
void gpu_attn_flash(gpu_ctx *c, const td_attn_args *a);
void gpu_op_logprobs_topk(gpu_ctx *c, float *logits, int64_t n, int64_t vocab,
                          const int32_t *suppress, int n_suppress, int force_eos,
                          const int32_t *force_rows, int eos_id, const float *row_bias, int k,
                          float *out_val, int32_t *out_idx);
void gpu_op_beam_step(gpu_ctx *c, const td_beam_args *a);
/* Decoder steps as CUDA graphs (gpu_graph.cu), the step_begin/step_end of
 * backend.h: init reads TD_GPU_GRAPHS; free releases the graph (accepts
 * none). */
void gpu_graph_init(gpu_ctx *c);
int gpu_graph_begin(gpu_ctx *c);
int gpu_graph_end(gpu_ctx *c);
void gpu_graph_free(gpu_ctx *c);

#ifdef __cplusplus
}
#endif

/* CUDA_CHECK / CUBLAS_CHECK: on failure latch "statement: error (file:line,
 * device N)" in the context `c` in scope and `return` from the function (void
 * functions only; use the _RET forms elsewhere). */
#define CUDA_CHECK(x)                                                              \
    do {                                                                           \
        cudaError_t e_ = (x);                                                      \
        if (e_ != cudaSuccess) {                                                   \
            gpu_fail(c, "cuda: %s: %s (%s:%d, device %d)", #x, cudaGetErrorString(e_), \
                     __FILE__, __LINE__, c->device);                               \
            return;                                                                \
        }                                                                          \
    } while (0)

#define CUBLAS_CHECK(x)                                                            \
    do {                                                                           \
        cublasStatus_t s_ = (x);                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                         \
            gpu_fail(c, "cublas: %s: %s (%s:%d, device %d)", #x,                   \
                     cublasGetStatusString(s_), __FILE__, __LINE__, c->device);    \
            return;                                                                \
        }                                                                          \
    } while (0)

/* After each kernel launch (launch configuration errors, sticky errors). */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

/* Grid size for `total` items at `per_block` per block, capped for
 * grid-stride loops. */
static inline unsigned gpu_blocks(int64_t total, int per_block)
{
    int64_t b = (total + per_block - 1) / per_block;
    if (b < 1)
        b = 1;
    if (b > 65535LL * 32)
        b = 65535LL * 32;
    return (unsigned)b;
}

#ifdef __CUDACC__
/* Element i of a weight stored as dtype dt, in float32. */
static __device__ __forceinline__ float gpu_wload(const void *p, td_dtype dt, int64_t i)
{
    if (dt == TD_F16)
        return __half2float(((const __half *)p)[i]);
    if (dt == TD_BF16)
        return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

/* Block-wide sum / max (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result. red: 32 floats of shared memory, reusable right
 * after the call. */
static __device__ __forceinline__ float gpu_block_sum(float v, float *red)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    __syncthreads(); /* red may still be read by the previous call */
    if (lane == 0)
        red[wid] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float gpu_block_max(float v, float *red)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0)
        red[wid] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
#endif

#endif /* TD_GPU_INTERNAL_CUH */
