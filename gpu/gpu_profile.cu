/*
 * gpu_profile.cu - where a decoding step's time goes on the GPU: with
 * TD_GPU_PROFILE=1 in the environment when a backend is created, every op
 * of its table is bracketed by two CUDA events on its stream (the device
 * time of the op's kernels, GEMMs and copies) and by the host clock (the
 * time the calling thread spent in the op: launch overhead, and for
 * download() and sync() the wait for the GPU). The totals per op are
 * printed to stderr when the backend is destroyed (docs/benchmarks.md,
 * "Where a step's time goes").
 *
 * Events are recorded into a ring of GPU_PROF_RING pairs; the ring's
 * elapsed times are read when it is full (one wait for the stream) and
 * whenever the stream is idle anyway (download, sync, destroy). Without
 * the variable nothing here runs beyond one NULL test per op.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_internal.cuh"

#define GPU_PROF_RING 1024

static const char *const prof_names[GPU_PROF_N] = {
    "linear",          "bias_act",        "layer_norm", "add",        "embed",
    "rope",            "rope_rows",       "attention (flash)", "attention (naive)",
    "logprobs_topk",   "gather_rows",     "scatter_rows", "beam_step", "upload",   "download",
    "copy",            "memset0",         "sync",
};

struct gpu_prof {
    cudaEvent_t start[GPU_PROF_RING], stop[GPU_PROF_RING];
    int op[GPU_PROF_RING];
    int pending; /* slots recorded since the last harvest */
    int open_op; /* the op between begin and end, or -1 */
    double host_t0;
    long long calls[GPU_PROF_N];
    double gpu_ms[GPU_PROF_N];
    double host_ms[GPU_PROF_N];
    double bytes[GPU_PROF_N];
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

extern "C" int gpu_prof_init(gpu_ctx *c)
{
    const char *v = getenv("TD_GPU_PROFILE");
    c->prof = NULL;
    if (!v || !*v || !strcmp(v, "0"))
        return 0;
    gpu_prof *p = (gpu_prof *)calloc(1, sizeof *p);
    if (!p)
        return -1;
    for (int i = 0; i < GPU_PROF_RING; i++)
        if (cudaEventCreate(&p->start[i]) != cudaSuccess ||
            cudaEventCreate(&p->stop[i]) != cudaSuccess) {
            (void)cudaGetLastError();
            for (int j = 0; j <= i; j++) {
                if (p->start[j])
                    (void)cudaEventDestroy(p->start[j]);
                if (p->stop[j])
                    (void)cudaEventDestroy(p->stop[j]);
            }
            free(p);
            return -1;
        }
    p->open_op = -1;
    c->prof = p;
    return 0;
}

/* Adds the device times of the recorded slots (waits for the last one). */
extern "C" void gpu_prof_harvest(gpu_ctx *c)
{
    gpu_prof *p = c->prof;
    if (!p || !p->pending)
        return;
    if (cudaEventSynchronize(p->stop[p->pending - 1]) == cudaSuccess)
        for (int i = 0; i < p->pending; i++) {
            float ms = 0.0f;
            if (cudaEventElapsedTime(&ms, p->start[i], p->stop[i]) == cudaSuccess)
                p->gpu_ms[p->op[i]] += ms;
        }
    (void)cudaGetLastError(); /* a failed profile read is not the op's error */
    p->pending = 0;
}

extern "C" void gpu_prof_begin(gpu_ctx *c, gpu_prof_op op)
{
    gpu_prof *p = c->prof;
    if (!p)
        return;
    if (p->pending == GPU_PROF_RING)
        gpu_prof_harvest(c);
    p->open_op = (int)op;
    p->host_t0 = now_ms();
    (void)cudaEventRecord(p->start[p->pending], c->stream);
}

extern "C" void gpu_prof_end(gpu_ctx *c, gpu_prof_op op, size_t bytes)
{
    gpu_prof *p = c->prof;
    if (!p || p->open_op != (int)op)
        return;
    (void)cudaEventRecord(p->stop[p->pending], c->stream);
    p->op[p->pending++] = (int)op;
    p->calls[op]++;
    p->bytes[op] += (double)bytes;
    p->host_ms[op] += now_ms() - p->host_t0;
    p->open_op = -1;
}

/* Prints the table (device time share first) and frees the profile. */
extern "C" void gpu_prof_free(gpu_ctx *c)
{
    gpu_prof *p = c->prof;
    if (!p)
        return;
    gpu_prof_harvest(c);
    double total = 0.0;
    for (int i = 0; i < GPU_PROF_N; i++)
        total += p->gpu_ms[i];
    fprintf(stderr, "transformerd cuda profile, device %d (TD_GPU_PROFILE): device time of "
            "the ops %.3f ms\n", c->device, total);
    fprintf(stderr, "%-18s %10s %12s %10s %7s %12s %10s\n", "op", "calls", "device ms",
            "device us", "share", "host ms", "MiB");
    for (int i = 0; i < GPU_PROF_N; i++) {
        if (!p->calls[i])
            continue;
        const double n = (double)p->calls[i];
        fprintf(stderr, "%-18s %10lld %12.3f %10.2f %6.1f%% %12.3f %10.2f\n", prof_names[i],
                p->calls[i], p->gpu_ms[i], p->gpu_ms[i] * 1e3 / n,
                total > 0.0 ? 100.0 * p->gpu_ms[i] / total : 0.0,
                p->host_ms[i], p->bytes[i] / (1024.0 * 1024.0));
    }
    for (int i = 0; i < GPU_PROF_RING; i++) {
        (void)cudaEventDestroy(p->start[i]);
        (void)cudaEventDestroy(p->stop[i]);
    }
    (void)cudaGetLastError();
    free(p);
    c->prof = NULL;
}
