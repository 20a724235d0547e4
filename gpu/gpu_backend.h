/*
 * gpu_backend.h - the CUDA implementation of td_backend_ops (backend.h):
 * cuBLAS GEMMs with float32 accumulation and one CUDA kernel file per op
 * family (gpu/gpu_*.cu). Plain C11; the all-backends unit and the tests include it,
 * never a CUDA header; model/ reaches it only through the registry (device.h).
 *
 * Memory: alloc() is cudaMalloc (called at start-up only: model load and
 * worker init size everything for the worst case). Each backend owns one
 * CUDA stream and one cuBLAS handle; every op is queued on that stream and
 * returns without waiting, download() and sync() wait for it. The only
 * device memory an op may allocate itself is the backend's grow-only scratch
 * (activation copies in F16/BF16 for the GEMMs): it grows to the high-water
 * mark during warm-up and is never released before destroy().
 *
 * Transfers: upload() copies the source into a ring of pinned host memory
 * (4 MiB per backend) and queues the DMA from there, so it returns at once
 * and the caller may reuse its buffer; a wrap of the ring waits for the
 * uploads queued from it. Larger uploads (over 1 MiB: never a per-step
 * transfer) are cudaMemcpyAsync from the caller's pageable memory (do not
 * pass cudaHostRegister'ed memory). download() goes through the same ring in
 * 4 MiB chunks, each a DMA and a wait for the stream.
 *
 * Weights: weight_upload() keeps a matrix in the checkpoint's dtype (F16 and
 * BF16 stay half precision, F32 stays F32) unless td_cuda_opts.dtype names
 * one storage for every matrix; vectors (rows == 1: biases, layer-norm
 * parameters) are always float32.
 *
 * Precision of the GEMMs with half-precision weights (td_cuda_opts.
 * half_activations): by default the float32 activation x is split into two
 * half-precision terms, hi = half(x) and lo = half(x - hi), stacked as twice
 * the rows of one GEMM whose two float32 results are summed: the product is
 * then as accurate as with float32 activations (hi + lo keeps 22 bits of F16
 * mantissa, 16 of BF16), for twice the tensor-core work but the same weight
 * traffic, which is what a decoding step is bound by. half_activations = 1
 * rounds x once (the usual fp16 inference, faster on large encoder batches;
 * tokens may then differ from float32 near ties).
 *
 * Environment, read by td_cuda_backend_create: TD_GPU_ATTN=flash (default)
 * or naive (the attention kernel, td_cuda_attention_kernel; any other value
 * fails the creation); TD_GPU_PROFILE=1 times every op with CUDA events and
 * prints the totals per op to stderr when the backend is destroyed
 * (docs/benchmarks.md, "Where a step's time goes").
 *
 * Errors: the first failure of an op (a CUDA or cuBLAS error with the
 * statement and file:line, an argument out of the op's contract) is latched
 * and reported by sync(), as backend.h asks. A CUDA error that corrupts the
 * context (illegal address, ...) makes every later call fail too: the
 * caller must treat the backend as dead.
 *
 * Thread safety: one td_backend belongs to one thread; every entry point
 * makes the backend's device current for the calling thread first.
 */
#ifndef TD_GPU_BACKEND_H
#define TD_GPU_BACKEND_H

#include <stddef.h>

#include "backend.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Zeroed = the defaults. */
typedef struct td_cuda_opts {
    td_store store;       /* storage of weight matrices (TD_STORE_AUTO: the
                           * checkpoint's dtype) */
    int half_activations; /* 0: two-term split (float32 accuracy); 1: rounded once */
} td_cuda_opts;

/* Creates a CUDA backend on device `device` (0-based); opts NULL = defaults.
 * Returns NULL with a
 * message in err when there is no usable device (the message names
 * --device cpu), the index is out of range, or the stream / cuBLAS handle
 * cannot be made. The table's name is "cuda" whatever the device (the
 * registry's td_device names the device). Free with be->ops->destroy(be). */
td_backend *td_cuda_backend_create(int device, const td_cuda_opts *opts, char *err,
                                   size_t errlen);

/* The attention kernel the op runs on these arguments: "flash" (the fused
 * kernel, gpu/gpu_attn_flash.cu) or "naive" (one block per query row: when
 * probabilities are captured, head_dim > 256, or TD_GPU_ATTN=naive was set
 * when the backend was created). For tests and profiles; reads no device
 * memory. */
const char *td_cuda_attention_kernel(const td_backend *be, const td_attn_args *a);

/* Number of CUDA devices usable by this process: 0 when there is no device
 * or no driver (never an error). Tests use it to skip. */
int td_cuda_device_count(void);

/* Registers the "cuda" device family (device.h): one device per CUDA
 * device, counted when "cuda" is first resolved (a CPU run never touches
 * CUDA). Called by the executable's start-up code (runtime/backends_all.c). */
int td_cuda_backend_register(void);

/* The same family, for a caller that registers it itself: the module
 * transformerd loads on demand (gpu/cuda_module.c) hands it over. */
const td_device_family *td_cuda_family(void);

#ifdef __cplusplus
}
#endif

#endif /* TD_GPU_BACKEND_H */
