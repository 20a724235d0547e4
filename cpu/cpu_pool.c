/*
 * cpu_pool.c - chunks claimed from one atomic word (cpu_pool.h).
 *
 * The claim word holds (generation << 32) | (n_chunks << 16) | next. The
 * caller posts a job by writing fn/arg, clearing `done` and storing a new
 * generation with next = 0 (release). A participant claims chunk `next` with
 * a compare-and-swap that also checks the generation, and only then reads
 * fn/arg: a successful claim means the job is not finished (its chunk is
 * not done), so the caller cannot be writing the next job's fields yet. A
 * thread that saw an older generation fails its swap and reloads; the
 * generation never repeats within any thread's lifetime (2^32 jobs), so a
 * stale swap cannot succeed.
 *
 * Sleeping, both ways, is the classic pair of sequentially consistent
 * stores and loads: a waiter announces itself (sleepers, caller_waits) and
 * then re-checks the word it waits on; the other side changes that word and
 * then looks for waiters. One of the two always sees the other, and the
 * futex's own compare catches a change between the re-check and the sleep.
 */
#define _GNU_SOURCE
#include "cpu_pool.h"

#include <assert.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Microseconds a free thread spins before it sleeps (TD_CPU_SPIN_US
 * overrides): docs/decisions.md, "CPU threads". */
#define CPU_POOL_SPIN_US_DEFAULT 100

/* Contention: the cores are shared when the process's threads are being
 * preempted (involuntary context switches, read at most every
 * CPU_POOL_CHECK_NS: CPU_POOL_PREEMPTS or more in such a window; measured
 * on 2 cores, bench_engine beam 4: about 0.1 a millisecond on the idle
 * machine while spinning, and 2 with a CPU-burning neighbour). Then nobody
 * spins for CPU_POOL_QUIET_NS: a
 * spinning thread would hold a core that a late one of ours, or the
 * neighbour, needs (and with per-session scheduling groups our threads
 * share one slice of the machine); then spinning is tried again. */
#define CPU_POOL_CHECK_NS 10000000L
#define CPU_POOL_PREEMPTS 5
#define CPU_POOL_QUIET_NS 100000000L

typedef struct pool_thread {
    cpu_pool *pool;
    int tid;
    pthread_t th;
    int started;
} pool_thread;

struct cpu_pool {
    int n_threads;
    long spin_ns;           /* configured */
    _Atomic long spin_now;  /* spin_ns, or 0 while the cores look shared */
    long quiet_until;       /* caller only: now_ns() when spinning resumes */
    long checked_at;        /* caller only: the last look at the preemptions */
    long nivcsw;            /* caller only: involuntary switches then */
    /* The job: written by the caller before the claim word's release. */
    cpu_pool_fn fn;
    void *arg;
    uint32_t gen; /* caller only */
    _Atomic uint64_t claim;
    _Atomic uint32_t done;         /* chunks finished in this job */
    _Atomic uint32_t caller_waits; /* the caller sleeps on `done` */
    _Atomic uint32_t wake_seq;     /* futex word of sleeping threads */
    _Atomic uint32_t sleepers;
    _Atomic int stop;
    pool_thread *threads; /* n_threads - 1 */
};

static inline uint32_t w_gen(uint64_t c) { return (uint32_t)(c >> 32); }
static inline uint32_t w_n(uint64_t c) { return (uint32_t)(c >> 16) & 0xFFFFu; }
static inline uint32_t w_next(uint64_t c) { return (uint32_t)c & 0xFFFFu; }

static void fx_wait(_Atomic uint32_t *a, uint32_t v)
{
    syscall(SYS_futex, (uint32_t *)a, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void fx_wake(_Atomic uint32_t *a, int n)
{
    syscall(SYS_futex, (uint32_t *)a, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Claims and runs chunks of the job in c (a claim word just read) until
 * none is left; returns the generation last seen. */
static uint32_t pool_work(cpu_pool *p, uint64_t c, int tid)
{
    for (;;) {
        const uint32_t n = w_n(c);
        if (w_next(c) >= n)
            return w_gen(c);
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* c now holds the current word */
        p->fn(p->arg, (int64_t)w_next(c), tid);
        const uint32_t d = atomic_fetch_add(&p->done, 1) + 1;
        if (d == n && atomic_load(&p->caller_waits))
            fx_wake(&p->done, 1);
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

/* Waits for a generation other than `seen`: spins, then sleeps. */
static uint64_t pool_wait_job(cpu_pool *p, uint32_t seen)
{
    uint64_t c;
    const long spin = atomic_load_explicit(&p->spin_now, memory_order_relaxed);
    if (spin > 0) {
        const long until = now_ns() + spin;
        for (int i = 0;; i++) {
            c = atomic_load_explicit(&p->claim, memory_order_acquire);
            if (w_gen(c) != seen)
                return c;
            cpu_relax();
            if ((i & 31) == 31 && now_ns() > until)
                break;
        }
    }
    for (;;) {
        const uint32_t s = atomic_load(&p->wake_seq);
        atomic_fetch_add(&p->sleepers, 1);
        c = atomic_load(&p->claim);
        if (w_gen(c) == seen)
            fx_wait(&p->wake_seq, s);
        atomic_fetch_sub(&p->sleepers, 1);
        c = atomic_load(&p->claim);
        if (w_gen(c) != seen)
            return c;
    }
}

static void *pool_main(void *argp)
{
    pool_thread *t = argp;
    cpu_pool *p = t->pool;
    uint32_t seen = 0;
    for (;;) {
        const uint64_t c = pool_wait_job(p, seen);
        if (atomic_load(&p->stop))
            return NULL;
        seen = pool_work(p, c, t->tid);
        /* pool_work may have read the stop's generation already: then no
         * other generation comes to wake us */
        if (atomic_load(&p->stop))
            return NULL;
    }
}

/* Posts a job of n chunks (n may be 0: the stop). */
static uint64_t pool_post(cpu_pool *p, uint32_t n)
{
    atomic_store(&p->done, 0);
    atomic_store(&p->caller_waits, 0);
    p->gen++;
    const uint64_t c = (uint64_t)p->gen << 32 | (uint64_t)n << 16;
    atomic_store(&p->claim, c);
    if (atomic_load(&p->sleepers) > 0) {
        atomic_fetch_add(&p->wake_seq, 1);
        fx_wake(&p->wake_seq, INT_MAX);
    }
    return c;
}

void cpu_pool_run(cpu_pool *p, int64_t n_chunks, cpu_pool_fn fn, void *arg)
{
    assert(n_chunks <= CPU_POOL_MAX_CHUNKS);
    if (n_chunks <= 0)
        return;
    if (n_chunks == 1 || p->n_threads == 1) {
        for (int64_t i = 0; i < n_chunks; i++)
            fn(arg, i, 0);
        return;
    }
    const uint32_t n = (uint32_t)n_chunks;
    const long t0 = now_ns();
    if (p->quiet_until) {
        /* the quiet time's own futex wake-ups preempt us too: count anew */
        if (t0 > p->quiet_until) {
            p->quiet_until = 0;
            p->checked_at = 0;
            atomic_store_explicit(&p->spin_now, p->spin_ns, memory_order_relaxed);
        }
    } else if (p->spin_ns > 0 && t0 - p->checked_at > CPU_POOL_CHECK_NS) {
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0) {
            /* CPU_POOL_PREEMPTS per window, however long since the last look */
            const long win = t0 - p->checked_at, d = ru.ru_nivcsw - p->nivcsw;
            if (p->checked_at && d >= CPU_POOL_PREEMPTS &&
                d * CPU_POOL_CHECK_NS >= CPU_POOL_PREEMPTS * win) {
                p->quiet_until = t0 + CPU_POOL_QUIET_NS;
                atomic_store_explicit(&p->spin_now, 0, memory_order_relaxed);
            }
            p->nivcsw = ru.ru_nivcsw;
        }
        p->checked_at = t0;
    }
    p->fn = fn;
    p->arg = arg;
    pool_work(p, pool_post(p, n), 0);
    /* Every chunk is claimed; wait for those still running elsewhere. */
    if (atomic_load_explicit(&p->done, memory_order_acquire) == n)
        return;
    const long spin = atomic_load_explicit(&p->spin_now, memory_order_relaxed);
    int finished = 0;
    if (spin > 0) {
        const long until = now_ns() + spin;
        for (int i = 0;; i++) {
            if (atomic_load_explicit(&p->done, memory_order_acquire) == n) {
                finished = 1;
                break;
            }
            cpu_relax();
            if ((i & 31) == 31 && now_ns() > until)
                break;
        }
    }
    if (!finished) {
        atomic_store(&p->caller_waits, 1);
        for (;;) {
            const uint32_t d = atomic_load(&p->done);
            if (d == n)
                break;
            fx_wait(&p->done, d);
        }
    }
}

int cpu_pool_threads(const cpu_pool *p)
{
    return p->n_threads;
}

void cpu_pool_free(cpu_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, 1);
    pool_post(p, 0);
    for (int i = 0; i < p->n_threads - 1; i++)
        if (p->threads[i].started)
            pthread_join(p->threads[i].th, NULL);
    free(p->threads);
    free(p);
}

cpu_pool *cpu_pool_create(int n_threads, char *err, size_t errlen)
{
    if (n_threads < 1) {
        if (err && errlen)
            snprintf(err, errlen, "cpu: a pool needs at least 1 thread (got %d)", n_threads);
        return NULL;
    }
    cpu_pool *p = calloc(1, sizeof *p);
    if (!p || (n_threads > 1 && !(p->threads = calloc((size_t)n_threads - 1,
                                                       sizeof *p->threads)))) {
        free(p);
        if (err && errlen)
            snprintf(err, errlen, "cpu: out of memory for a pool of %d threads", n_threads);
        return NULL;
    }
    p->n_threads = n_threads;
    long us = CPU_POOL_SPIN_US_DEFAULT;
    const char *env = getenv("TD_CPU_SPIN_US");
    if (env && *env) {
        char *end;
        const long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 0 && v <= 1000000)
            us = v;
    }
    p->spin_ns = us * 1000L;
    atomic_store(&p->spin_now, p->spin_ns);
    for (int i = 0; i < n_threads - 1; i++) {
        pool_thread *t = &p->threads[i];
        t->pool = p;
        t->tid = i + 1;
        if (pthread_create(&t->th, NULL, pool_main, t) != 0) {
            if (err && errlen)
                snprintf(err, errlen, "cpu: cannot start thread %d of %d", i + 2, n_threads);
            cpu_pool_free(p);
            return NULL;
        }
        t->started = 1;
    }
    return p;
}
