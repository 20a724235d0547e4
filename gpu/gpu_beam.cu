/*
 * gpu_beam.cu - the beam_step op (backend.h, td_beam_args): one decoding
 * step's search bookkeeping on the device, so that the state (running
 * scores, finished lists, back-pointers) never leaves it between steps.
 * The rules are beam_rules.h's, compiled for the device: the CPU backend's
 * op (cpu/cpu_backend.c) runs the same function on the host, and
 * tests/test_beam_op.c holds the two to the same bits.
 *
 * One thread block per sentence, one thread of it working: a step is a few
 * hundred comparisons per sentence (2B candidates of B rows merged, 3B
 * sorted), far below a launch's cost; the point is that the decode's only
 * per-step transfer to the host shrinks to the rows' back-pointers and
 * tokens.
 */
#include "beam_rules.h"
#include "gpu_internal.cuh"

/* Sentence blockIdx.x of a; a sentence out of the op's contract writes -1
 * as its end flag (beam_rules.h), which decode.c reports. */
static __global__ void k_beam_step(td_beam_args a)
{
    if (threadIdx.x == 0 && (int)blockIdx.x < a.n_sent)
        (void)td_beam_sent_step(&a, (int)blockIdx.x);
}

extern "C" void gpu_op_beam_step(gpu_ctx *c, const td_beam_args *a)
{
    if (a->max_beam < 1 || a->max_beam > TD_BEAM_MAX || a->ks < 1) {
        gpu_fail(c, "cuda: beam_step: max_beam %d (1..%d), ks %d", a->max_beam, TD_BEAM_MAX,
                 a->ks);
        return;
    }
    if (a->n_sent <= 0)
        return;
    k_beam_step<<<(unsigned)a->n_sent, 32, 0, c->stream>>>(*a);
    CUDA_CHECK_LAUNCH();
}
