/*
 * gpu_ctx.cu - what every op family of the CUDA backend shares on its
 * context (gpu_internal.cuh): the error latch (the first failure kept for
 * the next sync) and the grow-only GEMM scratch. The op families
 * (gpu_*.cu) and the op table (gpu_backend.cu) call these; these call
 * nothing of them.
 */
#include <stdarg.h>
#include <stdio.h>

#include "gpu_internal.cuh"

void gpu_fail(gpu_ctx *c, const char *fmt, ...)
{
    if (c->failed)
        return; /* keep the first failure */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->failed = 1;
}

void *gpu_scratch(gpu_ctx *c, size_t bytes)
{
    if (bytes <= c->scratch_bytes)
        return c->scratch;
    /* exactly what is asked: workers reserve the worst case at start-up
     * (reserve_linear), so growing later is the exception */
    const size_t want = (bytes + 255) / 256 * 256;
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e == cudaSuccess && c->scratch)
        e = cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    if (e == cudaSuccess)
        e = cudaMalloc(&c->scratch, want);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is not sticky */
        c->scratch = NULL;
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        (void)cudaGetLastError();
        gpu_fail(c, "cuda: cannot grow the GEMM scratch to %zu bytes: %s (%zu of %zu bytes "
                 "free on device %d)", want, cudaGetErrorString(e), free_b, total_b, c->device);
        return NULL;
    }
    c->scratch_bytes = want;
    return c->scratch;
}
