/*
 * cpu_ctx.h - what the CPU backend's files share (private to cpu/ and its
 * tests): the backend's context, its latched failure, its scratch, and the
 * split of an op into chunks run by the backend's pool (cpu_pool.h).
 *
 * Threads: a context belongs to its backend's one calling thread; inside
 * a pool job (cpu_par) only the job's own slices of the scratch are
 * touched.
 */
#ifndef TD_CPU_CTX_H
#define TD_CPU_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cpu_pool.h"

#define CPU_ALIGN 64

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

/* Latches the first failure of the context (reported by the next sync). */
void cpu_fail(cpu_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Chunks for a job of n items and `work` elements (or multiply-adds) in
 * all: 1 (the caller alone) below min_work, else up to
 * CPU_CHUNKS_PER_THREAD per thread with at least chunk_work each. */
int64_t cpu_chunks(const cpu_ctx *c, int64_t n, int64_t work, int64_t min_work,
                   int64_t chunk_work);

/* Chunks of a row-wise loop over n rows of `elems` elements in all. */
int64_t cpu_row_chunks(const cpu_ctx *c, int64_t n, int64_t elems);

/* fn over the items [i0, i1) on participant tid. */
typedef void (*cpu_range_fn)(void *arg, int64_t i0, int64_t i1, int tid);

/* Runs fn over [0, n) in `chunks` even runs (cpu_chunks), claimed by the
 * pool's threads; one chunk runs on the caller without the pool. */
void cpu_par(cpu_ctx *c, int64_t n, int64_t chunks, cpu_range_fn fn, void *arg);

/* bytes at CPU_ALIGN (large buffers on 2 MiB, asking for huge pages), or
 * NULL. Free with free(). */
void *cpu_aligned_alloc(size_t bytes);

/* At least `floats` floats of scratch, or NULL (failure latched). Must not
 * be called inside a pool job. The old contents are not kept. */
float *cpu_scratch(cpu_ctx *c, size_t floats);

/* Per-thread slice length: n floats rounded up to a cache line. */
size_t cpu_slice(size_t n);

/* The attention op (cpu_attention.c). */
void cpu_attention(td_backend *be, const td_attn_args *a);

#endif /* TD_CPU_CTX_H */
