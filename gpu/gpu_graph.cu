/*
 * gpu_graph.cu - a decoder step as one CUDA graph (backend.h's
 * step_begin/step_end; TD_GPU_GRAPHS, default on, 0 = off; off under
 * TD_GPU_PROFILE, whose events time ops one by one).
 *
 * model/decode.c brackets the ops of a step between its uploads and its
 * download (step_device: the running scores' gather, the decoder layers,
 * log-probabilities and top-k, beam_step). step_begin starts a capture of
 * the stream; the ops record their kernels and cuBLAS calls instead of
 * launching them; step_end ends the capture and launches the graph. A
 * step's shapes (rows, keys, top-k width) and the caches' pointers (they
 * rotate at each reordering, td_cache_reorder) change from step to step, so
 * every step is captured again and the executable graph updated in place
 * (cudaGraphExecUpdate, as llama.cpp's CUDA backend does per token); one
 * whose topology changed is instantiated again. What this saves is the
 * launch of each kernel, a few microseconds each, dozens per step.
 *
 * A capture that fails (an op that would wait for the host, such as a
 * scratch buffer grown in the middle of a step) ran nothing: step_end
 * clears what it latched and returns 1, and the caller issues the step
 * again without a graph. Three failures in a row turn graphs off.
 *
 * tests/test_op_record.c holds decode.c to the contract (the same ops
 * however launched, nothing that waits for the host in the bracket, the
 * retry after a failed capture); this file has not run on a device yet:
 * tools/gpu-check.sh runs the GPU tests with TD_GPU_GRAPHS=1 and 0.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.cuh"

#define GPU_GRAPH_MAX_FAILS 3

extern "C" void gpu_graph_init(gpu_ctx *c)
{
    const char *v = getenv("TD_GPU_GRAPHS");
    c->graphs = !(v && !strcmp(v, "0")) && !c->prof;
    c->capturing = 0;
    c->graph_fails = 0;
    c->step_exec = NULL;
}

extern "C" void gpu_graph_free(gpu_ctx *c)
{
    if (c->step_exec)
        (void)cudaGraphExecDestroy(c->step_exec);
    c->step_exec = NULL;
}

extern "C" int gpu_graph_begin(gpu_ctx *c)
{
    if (!c->graphs || c->capturing || c->failed)
        return 0; /* a latched failure is the caller's to see at sync */
    if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
        (void)cudaGetLastError();
        c->graphs = 0;
        return 0;
    }
    c->capturing = 1;
    return 1;
}

/* A capture that ran nothing: its latched errors dropped, 1 returned. */
static int graph_failed(gpu_ctx *c, cudaGraph_t g)
{
    if (g)
        (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();
    c->failed = 0;
    c->err[0] = 0;
    if (++c->graph_fails >= GPU_GRAPH_MAX_FAILS)
        c->graphs = 0;
    return 1;
}

extern "C" int gpu_graph_end(gpu_ctx *c)
{
    if (!c->capturing)
        return 0;
    c->capturing = 0;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    if (e != cudaSuccess || !g || c->failed)
        return graph_failed(c, g);
    if (c->step_exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(c->step_exec, g, &info) != cudaSuccess) {
            (void)cudaGetLastError();
            (void)cudaGraphExecDestroy(c->step_exec);
            c->step_exec = NULL;
        }
    }
    if (!c->step_exec && cudaGraphInstantiate(&c->step_exec, g, 0) != cudaSuccess) {
        c->step_exec = NULL;
        return graph_failed(c, g);
    }
    c->graph_fails = 0;
    e = cudaGraphLaunch(c->step_exec, c->stream);
    (void)cudaGraphDestroy(g);
    if (e != cudaSuccess)
        gpu_fail(c, "cuda: cudaGraphLaunch: %s (device %d)", cudaGetErrorString(e), c->device);
    return 0;
}
