/*
 * cpu_ctx.c - the CPU backend's shared machinery (cpu_ctx.h): the failure
 * latch, the split of ops into chunks over the pool, the scratch.
 */
#define _DEFAULT_SOURCE /* madvise */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu_ctx.h"

void cpu_fail(cpu_ctx *c, const char *fmt, ...)
{
    if (c->failed)
        return; /* keep the first failure */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->failed = 1;
}

int64_t cpu_chunks(const cpu_ctx *c, int64_t n, int64_t work, int64_t min_work,
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

int64_t cpu_row_chunks(const cpu_ctx *c, int64_t n, int64_t elems)
{
    return cpu_chunks(c, n, elems, CPU_PAR_MIN_ELEMS, CPU_PAR_CHUNK_ELEMS);
}

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

void cpu_par(cpu_ctx *c, int64_t n, int64_t chunks, cpu_range_fn fn, void *arg)
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

void *cpu_aligned_alloc(size_t bytes)
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

float *cpu_scratch(cpu_ctx *c, size_t floats)
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

size_t cpu_slice(size_t n)
{
    size_t per_line = CPU_ALIGN / sizeof(float);
    return (n + per_line - 1) / per_line * per_line;
}
