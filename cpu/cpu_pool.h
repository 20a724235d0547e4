/*
 * cpu_pool.h - the CPU backend's threads (private to cpu/ and its white-box
 * tests): a job is split into chunks that the threads claim one at a time
 * from a shared counter, the calling thread among them.
 *
 * Why not an OpenMP parallel region per op: a region ends in a barrier
 * that every thread of the team must reach, so when another process
 * deschedules one of our threads, the op waits a scheduler time slice for
 * it even when the other threads could have done its share. Here the
 * caller returns as soon as every chunk is done: a thread that was not
 * running when the job was posted either finds work left and helps, or
 * finds none and waits for the next job; nobody waits for it. Only a thread
 * descheduled in the middle of a chunk is waited for, and chunks are small.
 *
 * Waiting: a thread with nothing to do spins for a while (TD_CPU_SPIN_US
 * microseconds, read at creation; docs/decisions.md has the measurement
 * behind the default) and then sleeps on a futex until the next job, so an
 * idle backend does not burn a shared core.
 *
 * Thread safety: cpu_pool_run is called by one thread at a time (the
 * backend's owner); the chunk function runs on several threads at once.
 */
#ifndef TD_CPU_POOL_H
#define TD_CPU_POOL_H

#include <stddef.h>
#include <stdint.h>

/* Chunks of one job: at most this many (the claim word's width). */
#define CPU_POOL_MAX_CHUNKS 65535

typedef struct cpu_pool cpu_pool;

/* Runs chunk `chunk` of a job on participant `tid` (0 = the caller, 1 ..
 * n_threads-1 the pool's threads). One participant runs its chunks one
 * after another, so per-tid scratch needs no lock. */
typedef void (*cpu_pool_fn)(void *arg, int64_t chunk, int tid);

/* A pool of n_threads participants: the caller and n_threads - 1 threads
 * started here (none for 1). The default spin before sleeping is
 * overridden by TD_CPU_SPIN_US in the environment. Returns NULL with a
 * message in err when n_threads < 1 or a thread cannot be started. */
cpu_pool *cpu_pool_create(int n_threads, char *err, size_t errlen);

/* Stops and joins the threads. Accepts NULL. */
void cpu_pool_free(cpu_pool *p);

/* Participants (the n_threads of cpu_pool_create). */
int cpu_pool_threads(const cpu_pool *p);

/* Calls fn(arg, c, tid) once for every chunk c in [0, n_chunks), on the
 * caller and on whichever threads are free to claim one, and returns when
 * all have returned. n_chunks <= 1 or a pool of one runs everything on
 * the caller (tid 0) without touching the threads. n_chunks is clamped to
 * CPU_POOL_MAX_CHUNKS by the caller (asserted). */
void cpu_pool_run(cpu_pool *p, int64_t n_chunks, cpu_pool_fn fn, void *arg);

#endif /* TD_CPU_POOL_H */
