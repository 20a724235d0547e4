/*
 * batcher.c - the bounded queue of one model and its scheduler threads.
 *
 * Each text of a request is a job. Jobs wait in one queue per model, in a
 * fair order (srv_batcher_submit: virtual time, so that one large request,
 * or one client's many, cannot hold the model for the others); each
 * worker (a td_worker with its own scheduler thread) takes a batch when the
 * first job has company enough (--max-batch-size sentences, or
 * --max-batch-tokens padded source tokens among jobs with the same options)
 * or has waited --batch-delay-ms. The batch always holds the first job (so
 * nothing starves); the rest are the compatible queued jobs closest to it in
 * length (the candidates are sorted by length, and the window grows towards
 * the nearer neighbour), which keeps padding small. Texts of one request
 * can land in different batches; the request reassembles them by index.
 *
 * Before a batch runs, jobs whose deadline passed or whose submitter's
 * gone hook fires are dropped. Every accepted job is finished exactly once
 * through its completion's done callback, always outside b->mu (expired
 * and drained jobs are unlinked under the lock and finished after it is
 * released), so done may take its own locks or wake other threads.
 *
 * Locks: b->mu guards the queue, draining, stop and each worker's busy
 * flag; the engine runs without it. The halt state is lock-free (written
 * once, published by an atomic store). Per-batch scratch belongs to its
 * worker's thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "batcher.h"
#include "clock.h"

/* Owners the fair order tells apart at once (a direct-mapped table: two
 * owners in one entry share a share until one's jobs are all taken). */
#define SRV_FAIR_OWNERS 64

typedef struct fair_owner {
    uint64_t owner, last_vt; /* an owner and its last queued job's place */
} fair_owner;

typedef struct srv_worker {
    srv_batcher *b;
    td_worker *w;
    pthread_t th;
    int started;
    int busy;              /* under b->mu: running a batch or finishing jobs */
    /* per-batch scratch, sized max_batch_size (this thread only) */
    srv_job **batch;
    const int32_t **src;
    int *len;
    td_result *res;
    /* the running decode (--scheduler inflight; this thread only): the
     * admitted jobs and their handles, sized max_batch_size */
    const td_decode_opts **opts;
    td_seq *seq;
    srv_job **live;
    td_seq *live_seq;
    int n_live;
    long rows;             /* rows reported to the running-rows gauge */
    int rows_total;        /* the worker's decoder rows (max_batch x max_beam) */
    int deferred;          /* steps the admission of fitting texts was put off
                              (srv_inflight_admit_now) */
    int short_phase;       /* srv_inflight_step_rows's position in its cycle */
    int urgent_phase;      /* srv_inflight_urgent_rows's */
    int urgent_deferred;   /* steps other admissions were put off for urgent
                              texts (urgent_admission) */
    size_t arena;          /* td_worker_arena_bytes as last noted (note_arena) */
    size_t arena_first;    /* ... after the warm-up: what a trim goes back to */
    double idle_since;     /* srv_now() when it last became idle with grown
                              memory (0: busy since) */
} srv_worker;

struct srv_batcher {
    td_model *model;
    srv_metrics *metrics;
    int max_batch_size, max_batch_tokens, batch_delay_ms, max_queue;
    srv_scheduler scheduler;
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* queue changed / stop */
    pthread_cond_t idle_cv;  /* a batch finished (drain waits on it) */
    srv_job *head, *tail;    /* in fair order (vt ascending), under mu */
    long depth;              /* jobs queued, under mu */
    uint64_t vt_taken;       /* under mu: the virtual time of the last job
                                taken from the head */
    fair_owner owners[SRV_FAIR_OWNERS]; /* under mu, indexed by owner % size */
    int draining, stop;      /* under mu */
    int cut;                 /* under mu: the drain deadline passed; running
                                sentences are cancelled (inflight) */
    srv_worker *workers;
    int n_workers;
    struct cand_ord *cand;   /* candidate scratch: max 8*max_batch_size, under mu */
    int cand_cap;
    size_t worker_bytes;     /* one worker's arena, set at init */
    srv_fault fault;         /* tests only */
    int worker_nice;         /* srv_batcher_opts.worker_nice */
    int short_steps;         /* srv_batcher_opts.short_steps */
    srv_batcher_opts o;      /* what the workers are made from (again after a park) */
    int parked;              /* under mu: no workers (srv_batcher_park); submits queue */
    int park;                /* under mu: the scheduler threads are to exit */
    int wake_sent;           /* under mu: on_wake called since the park */
    double last_active;      /* under mu: srv_now() of the last submit or work */
    _Atomic size_t scratch_bytes; /* the workers' arenas now (note_arena) */
    int test_step_delay_ms;  /* tests only */
    void (*test_on_admit)(void *, int, long, int, int, int, srv_job *const *); /* tests only */
    void *test_ud;
    /* srv_batcher_halt: 0 running, 1 a halt is being written, 2 halted
     * (halt_rc and halt_msg written before the store of 2, read after a
     * load of 2). */
    atomic_int halt_state;
    int halt_rc;
    char halt_msg[256];
};

static int int_arrays_equal(const int *a, int na, const int *b, int nb)
{
    if (na != nb || (!a) != (!b))
        return 0;
    return na == 0 || !a || memcmp(a, b, (size_t)na * sizeof(int)) == 0;
}

/* Two jobs may share a batch exactly when their options are equal. */
static int decode_opts_equal(const td_decode_opts *a, const td_decode_opts *b)
{
    if (a == b)
        return 1;
    if (a->beam_size != b->beam_size || a->num_hypotheses != b->num_hypotheses ||
        a->max_length != b->max_length || a->return_attention != b->return_attention ||
        memcmp(&a->length_penalty, &b->length_penalty, sizeof(float)) != 0)
        return 0;
    if (!a->return_attention)
        return 1;
    return int_arrays_equal(a->attn_layers, a->n_attn_layers, b->attn_layers, b->n_attn_layers) &&
           int_arrays_equal(a->attn_heads, a->n_attn_heads, b->attn_heads, b->n_attn_heads);
}

/* Finishes a job: its status, then its submitter's done. Called without
 * b->mu; the job is not touched after done is entered. */
static void finish_job(srv_job *j, srv_job_status st)
{
    j->status = st;
    srv_completion c = j->completion;
    c.done(j, c.ud);
}

/* Finishes a chain of jobs unlinked from the queue (linked by next). */
static void finish_chain(srv_batcher *b, srv_job *j, srv_job_status st, srv_drop_reason why)
{
    while (j) {
        srv_job *next = j->next;
        j->next = NULL;
        srv_metrics_dropped(b->metrics, why);
        finish_job(j, st);
        j = next;
    }
}

/* --test-step-delay-ms: a slow engine, for tests that need work in flight. */
static void test_delay(const srv_batcher *b)
{
    if (b->test_step_delay_ms > 0) {
        struct timespec ts = {b->test_step_delay_ms / 1000,
                              (long)(b->test_step_delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void unlink_job(srv_batcher *b, srv_job *prev, srv_job *j)
{
    if (prev)
        prev->next = j->next;
    else
        b->head = j->next;
    if (b->tail == j)
        b->tail = prev;
    j->next = NULL;
    b->depth--;
}

/* Under mu: unlinks the queued jobs whose deadline passed and returns them
 * as a chain, for the caller to finish once it released the lock. */
static srv_job *take_expired(srv_batcher *b, double now)
{
    srv_job *expired = NULL, **tail = &expired;
    srv_job *prev = NULL, *j = b->head;
    while (j) {
        srv_job *next = j->next;
        if (now >= j->deadline) {
            unlink_job(b, prev, j);
            *tail = j;
            tail = &j->next;
        } else {
            prev = j;
        }
        j = next;
    }
    srv_metrics_queue_depth(b->metrics, b->depth);
    return expired;
}

typedef struct cand_ord {
    srv_job *j;
    int seq; /* FIFO position */
} cand_ord;

static int cand_cmp(const void *x, const void *y)
{
    const cand_ord *a = x, *c = y;
    if (a->j->n_src != c->j->n_src)
        return a->j->n_src < c->j->n_src ? -1 : 1;
    return a->seq - c->seq;
}

/* Under mu, queue non-empty: chooses the batch of the first job into
 * out[] (removing it from the queue) when it is due, and returns its size;
 * returns 0 and sets *wait_until when the first should wait for company. */
static int take_batch(srv_batcher *b, srv_job **out, double now, double *wait_until)
{
    srv_job *old = b->head;
    int nc = 0;
    long tokens = 0;
    cand_ord *ord = b->cand;
    for (srv_job *j = b->head; j && nc < b->cand_cap; j = j->next)
        if (decode_opts_equal(j->opts, old->opts)) {
            ord[nc].j = j;
            ord[nc].seq = nc;
            nc++;
            tokens += j->n_src;
        }
    double due = old->t_enqueue + b->batch_delay_ms * 1e-3;
    if (!b->draining && now < due && nc < b->max_batch_size && tokens < b->max_batch_tokens) {
        *wait_until = due;
        return 0;
    }
    qsort(ord, (size_t)nc, sizeof ord[0], cand_cmp);
    int p = 0;
    while (ord[p].j != old)
        p++;
    int lo = p, hi = p;
    const int L = old->n_src;
    for (;;) {
        int n = hi - lo + 1;
        if (n >= b->max_batch_size)
            break;
        int can_l = lo > 0 && (long)ord[hi].j->n_src * (n + 1) <= b->max_batch_tokens;
        int can_r = hi + 1 < nc && (long)ord[hi + 1].j->n_src * (n + 1) <= b->max_batch_tokens;
        if (can_l && can_r) {
            if (L - ord[lo - 1].j->n_src <= ord[hi + 1].j->n_src - L)
                lo--;
            else
                hi++;
        } else if (can_l) {
            lo--;
        } else if (can_r) {
            hi++;
        } else {
            break;
        }
    }
    int n = 0;
    for (int i = lo; i <= hi; i++)
        out[n++] = ord[i].j;
    if (old->vt > b->vt_taken)
        b->vt_taken = old->vt;
    /* unlink the chosen jobs */
    for (int i = 0; i < n; i++) {
        srv_job *prev = NULL;
        for (srv_job *j = b->head; j; prev = j, j = j->next)
            if (j == out[i]) {
                unlink_job(b, prev, j);
                break;
            }
    }
    srv_metrics_queue_depth(b->metrics, b->depth);
    return n;
}

/* When the engine must not be called (halted: presumed unusable; or under
 * fault injection) the code to fail with, and its message; else 0. */
static int engine_blocked(srv_batcher *b, char *err, size_t errlen)
{
    if (atomic_load(&b->halt_state) == 2) {
        snprintf(err, errlen, "%s", b->halt_msg);
        return b->halt_rc;
    }
    if (b->fault != SRV_FAULT_NONE) {
        snprintf(err, errlen, "%s (--test-fail-batches)",
                 b->fault == SRV_FAULT_DEVICE ? "cuda: injected device failure"
                                              : "injected engine failure");
        return b->fault == SRV_FAULT_DEVICE ? TD_EDEVICE : TD_EINVAL;
    }
    return 0;
}

/* The engine call of a batch, or its stand-in once halted or under fault
 * injection. Returns td_translate_batch's code; err holds its message. */
static int translate(srv_worker *wk, int k, char *err, size_t errlen)
{
    int rc = engine_blocked(wk->b, err, errlen);
    if (rc)
        return rc;
    return td_translate_batch(wk->w, wk->src, wk->len, k, wk->batch[0]->opts, wk->res, err,
                              errlen);
}

/* Stage 1 of a batch: finishes the jobs that expired or were given up
 * while queued, compacts the rest to the front of wk->batch and returns
 * their count. */
static int drop_stale(srv_worker *wk, int n)
{
    srv_batcher *b = wk->b;
    double now = srv_now();
    int k = 0;
    for (int i = 0; i < n; i++) {
        srv_job *j = wk->batch[i];
        srv_metrics_queue_wait(b->metrics, now - j->t_enqueue);
        if (now >= j->deadline) {
            srv_metrics_dropped(b->metrics, SRV_DROP_TIMEOUT);
            finish_job(j, SRV_JOB_TIMEOUT);
        } else if (j->completion.gone && j->completion.gone(j->completion.ud)) {
            srv_metrics_dropped(b->metrics, SRV_DROP_GONE);
            finish_job(j, SRV_JOB_GONE);
        } else {
            wk->batch[k++] = j;
        }
    }
    return k;
}

/* Runs one batch outside the lock: drops stale jobs, translates the rest,
 * records metrics, finishes every job. */
static void run_batch(srv_worker *wk, int n)
{
    srv_batcher *b = wk->b;
    int k = drop_stale(wk, n);
    if (k == 0)
        return;
    long maxlen = 0, tin = 0, tout = 0;
    for (int i = 0; i < k; i++) {
        wk->src[i] = wk->batch[i]->src;
        wk->len[i] = wk->batch[i]->n_src;
        if (wk->len[i] > maxlen)
            maxlen = wk->len[i];
        tin += wk->len[i];
    }
    char err[256];
    double t0 = srv_now();
    int rc = translate(wk, k, err, sizeof err);
    double dt = srv_now() - t0;
    if (rc == 0)
        srv_metrics_batch(b->metrics, k, maxlen * k, dt);
    else
        srv_metrics_batch_failed(b->metrics);
    /* What an engine error means (host memory, or a device presumed lost)
     * is the submitter's to decide: each job carries the code. */
    for (int i = 0; i < k; i++) {
        srv_job *j = wk->batch[i];
        if (rc == 0) {
            j->res = wk->res[i];
            tout += j->res.n_hyps > 0 ? j->res.hyps[0].n_tokens : 0;
            finish_job(j, SRV_JOB_DONE);
        } else {
            j->engine_rc = rc;
            snprintf(j->engine_err, sizeof j->engine_err, "%s", err);
            finish_job(j, SRV_JOB_FAILED);
        }
    }
    if (rc == 0)
        srv_metrics_tokens(b->metrics, tin, tout);
    else
        fprintf(stderr, "transformerd: batch of %d failed: %s\n", k, err);
    test_delay(b);
}

/* Under mu: waits on the queue until wait_until (the first job's due
 * time), at most 0.2 s (deadlines are checked on waking). */
static void timed_wait(srv_batcher *b, double now, double wait_until)
{
    if (wait_until > now + 0.2 || wait_until <= now)
        wait_until = now + 0.2;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double d = wait_until - now;
    ts.tv_sec += (time_t)d;
    ts.tv_nsec += (long)((d - floor(d)) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&b->cv, &b->mu, &ts);
}

/* Under mu: finishes (outside the lock) the queued jobs whose deadline
 * passed; returns 1 when there were any. The worker counts as busy while
 * their completions run: a drain must not return (and let the transport
 * stop) before they are finished. */
static int finish_expired(srv_worker *wk, double now)
{
    srv_batcher *b = wk->b;
    srv_job *expired = take_expired(b, now);
    if (!expired)
        return 0;
    wk->busy = 1;
    pthread_mutex_unlock(&b->mu);
    finish_chain(b, expired, SRV_JOB_TIMEOUT, SRV_DROP_TIMEOUT);
    pthread_mutex_lock(&b->mu);
    wk->busy = wk->n_live > 0;
    pthread_cond_broadcast(&b->idle_cv);
    return 1;
}

/* The worker's arena after an admission, a batch or a trim (its thread):
 * the batcher's total and the model's gauge follow it. */
static void note_arena(srv_worker *wk)
{
    size_t now = td_worker_arena_bytes(wk->w);
    if (now == wk->arena)
        return;
    atomic_fetch_add_explicit(&wk->b->scratch_bytes, now - wk->arena, memory_order_relaxed);
    srv_metrics_scratch(wk->b->metrics, (long)now - (long)wk->arena);
    wk->arena = now;
}

/* Under mu, with nothing to do: waits for work. A worker whose memory grew
 * gives it back once it has been idle --scratch-idle-s (td_worker_trim,
 * outside the lock; busy meanwhile, so a drain waits for it). */
static void idle_wait(srv_worker *wk)
{
    srv_batcher *b = wk->b;
    if (b->o.scratch_idle_s <= 0 || wk->arena <= wk->arena_first || b->stop) {
        pthread_cond_wait(&b->cv, &b->mu);
        return;
    }
    double now = srv_now();
    if (wk->idle_since == 0)
        wk->idle_since = now;
    if (now < wk->idle_since + b->o.scratch_idle_s) {
        timed_wait(b, now, wk->idle_since + b->o.scratch_idle_s);
        return;
    }
    wk->busy = 1;
    pthread_mutex_unlock(&b->mu);
    char err[256];
    if (td_worker_trim(wk->w, err, sizeof err) < 0)
        fprintf(stderr, "transformerd: a worker could not shrink its memory: %s\n", err);
    note_arena(wk);
    pthread_mutex_lock(&b->mu);
    wk->busy = 0;
    wk->idle_since = 0;
    pthread_cond_broadcast(&b->idle_cv);
}

/* --scheduler batch: a worker takes a batch and runs it to its end. */
/* A scheduler thread lowers its own priority to --worker-nice (Linux
 * applies a nice value to the calling thread alone): the HTTP threads,
 * which answer a finished text and read the next request, then run
 * before the rest of a decoding step on a busy CPU (docs/decisions.md,
 * "Worker threads at nice 5"). Raising the value never needs a
 * privilege; a failure leaves the thread as it was. */
static void worker_thread_nice(const srv_batcher *b)
{
#ifdef __linux__
    if (b->worker_nice > 0)
        (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), b->worker_nice);
#else
    (void)b;
#endif
}

static void *worker_main(void *arg)
{
    srv_worker *wk = arg;
    srv_batcher *b = wk->b;
    worker_thread_nice(b);
    pthread_mutex_lock(&b->mu);
    for (;;) {
        if ((b->stop && !b->head) || b->park)
            break;
        if (!b->head) {
            idle_wait(wk);
            continue;
        }
        double now = srv_now(), wait_until = 0;
        if (finish_expired(wk, now))
            continue;
        int n = take_batch(b, wk->batch, now, &wait_until);
        if (n == 0) {
            timed_wait(b, now, wait_until);
            continue;
        }
        wk->busy = 1;
        wk->idle_since = 0;
        pthread_mutex_unlock(&b->mu);
        run_batch(wk, n);
        note_arena(wk);
        pthread_mutex_lock(&b->mu);
        wk->busy = 0;
        b->last_active = srv_now();
        pthread_cond_broadcast(&b->idle_cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* ---- --scheduler inflight ------------------------------------------------
 * Each worker keeps one running decode (td_run_*). Between two steps its
 * thread admits queued jobs in the queue's fair order, as long as the first fits the
 * free rows and slots (a job that does not fit is not overtaken, so nothing
 * starves); while the decode runs and the queue holds more than fits, it
 * admits them in groups (srv_inflight_admit_now: a quarter of the rows
 * free, or a few steps put off); an idle worker lets the first wait
 * --batch-delay-ms for company as the batch scheduler does. Jobs whose client left or whose deadline
 * passed are cancelled mid-decode; every finished sentence is handed to its
 * job at once. A drain lets the running sentences finish until its
 * deadline; then (b->cut) each worker cancels its live jobs at the next step
 * boundary and finishes them as SRV_JOB_SHUTDOWN. */

/* Under mu, --urgent-steps: the admission of urgent texts (a streamed
 * answer's first sentences). When the fitting prefix of the queue (fit
 * texts) holds urgent ones, returns how many of it to take: up to the last
 * of them, so that the encoder runs over a small group and not over a
 * whole batch before they can start. While urgent texts decode, returns -1
 * to put every other admission off (an admission's encoder stalls the
 * running decode), at most SRV_URGENT_MAX_DEFER steps; 0 otherwise. */
static int urgent_admission(srv_worker *wk, int fit)
{
    srv_batcher *b = wk->b;
    if (b->o.urgent_steps <= 0 || b->draining)
        return 0;
    int last = 0, k = 0;
    for (const srv_job *j = b->head; j && k < fit; j = j->next)
        if (k++, j->urgent)
            last = k;
    if (last > 0) {
        wk->urgent_deferred = 0;
        return last;
    }
    int urgent_live = 0;
    for (int i = 0; i < wk->n_live && !urgent_live; i++)
        urgent_live = wk->live[i]->urgent;
    if (fit > 0 && urgent_live && wk->urgent_deferred < SRV_URGENT_MAX_DEFER) {
        wk->urgent_deferred++;
        return -1;
    }
    return 0;
}

/* Under mu: pops from the queue the jobs to admit into wk->batch and
 * returns their number; 0 with *wait_until when an idle worker's first
 * job should wait for company. */
static int take_admission(srv_worker *wk, double now, double *wait_until)
{
    srv_batcher *b = wk->b;
    if (wk->n_live == 0 && b->head && !b->draining) {
        double due = b->head->t_enqueue + b->batch_delay_ms * 1e-3;
        if (now < due && b->depth < b->max_batch_size) {
            *wait_until = due;
            return 0;
        }
    }
    int free_slots, free_rows, k = 0, fit = 0;
    td_run_free(wk->w, &free_slots, &free_rows);
    int rows = free_rows;
    for (srv_job *j = b->head; j && fit < free_slots && j->opts->beam_size <= rows; j = j->next) {
        rows -= j->opts->beam_size;
        fit++;
    }
    int take = fit;
    int urgent = urgent_admission(wk, fit);
    if (urgent > 0) {
        take = urgent; /* the urgent texts in a group of their own */
    } else if (urgent < 0) {
        take = 0;
    } else if (wk->n_live > 0 && !b->draining &&
               !srv_inflight_admit_now(fit, b->depth, free_rows, wk->rows_total, wk->deferred)) {
        wk->deferred += fit > 0;
        take = 0;
    } else {
        wk->deferred = 0;
    }
    long queued = b->depth;
    while (k < take) {
        srv_job *j = b->head;
        if (j->vt > b->vt_taken)
            b->vt_taken = j->vt;
        unlink_job(b, NULL, j);
        wk->batch[k++] = j;
    }
    if (wk->n_live > 0 && b->test_on_admit)
        b->test_on_admit(b->test_ud, fit, queued, free_rows, wk->rows_total, take, wk->batch);
    srv_metrics_queue_depth(b->metrics, b->depth);
    return k;
}

/* Finishes every live job as failed (the running decode is reset). */
static void fail_live(srv_worker *wk, int rc, const char *err)
{
    for (int i = 0; i < wk->n_live; i++) {
        srv_job *j = wk->live[i];
        j->engine_rc = rc;
        snprintf(j->engine_err, sizeof j->engine_err, "%s", err);
        finish_job(j, SRV_JOB_FAILED);
    }
    wk->n_live = 0;
    td_run_reset(wk->w);
}

static void fail_jobs(srv_job **jobs, int k, int rc, const char *err)
{
    for (int i = 0; i < k; i++) {
        jobs[i]->engine_rc = rc;
        snprintf(jobs[i]->engine_err, sizeof jobs[i]->engine_err, "%s", err);
        finish_job(jobs[i], SRV_JOB_FAILED);
    }
}


/* Admits the k jobs of wk->batch (after dropping the stale ones). */
static void admit(srv_worker *wk, int k)
{
    srv_batcher *b = wk->b;
    k = drop_stale(wk, k); /* records each job's wait before joining */
    if (k == 0)
        return;
    char err[256];
    int rc = engine_blocked(b, err, sizeof err);
    long maxlen = 0;
    for (int i = 0; i < k; i++) {
        wk->src[i] = wk->batch[i]->src;
        wk->len[i] = wk->batch[i]->n_src;
        wk->opts[i] = wk->batch[i]->opts;
        maxlen = wk->len[i] > maxlen ? wk->len[i] : maxlen;
    }
    if (rc == 0)
        rc = td_run_add(wk->w, wk->src, wk->len, k, wk->opts, wk->seq, err, sizeof err);
    if (rc != 0) {
        srv_metrics_batch_failed(b->metrics);
        fprintf(stderr, "transformerd: %d texts failed to join the running decode: %s\n", k,
                err);
        fail_jobs(wk->batch, k, rc, err);
        if (rc == TD_EDEVICE)
            fail_live(wk, rc, err);
        return;
    }
    srv_metrics_batch(b->metrics, k, maxlen * k, 0);
    for (int i = 0; i < k; i++) {
        if (wk->batch[i]->urgent && b->o.urgent_steps > 0)
            td_run_urge(wk->w, wk->seq[i]);
        wk->live[wk->n_live] = wk->batch[i];
        wk->live_seq[wk->n_live++] = wk->seq[i];
    }
}

/* Cancels the live jobs whose client left or whose deadline passed. */
static void cancel_stale(srv_worker *wk, double now)
{
    srv_batcher *b = wk->b;
    for (int i = 0; i < wk->n_live;) {
        srv_job *j = wk->live[i];
        srv_job_status st = SRV_JOB_QUEUED;
        if (now >= j->deadline)
            st = SRV_JOB_TIMEOUT;
        else if (j->completion.gone && j->completion.gone(j->completion.ud))
            st = SRV_JOB_GONE;
        if (st == SRV_JOB_QUEUED) {
            i++;
            continue;
        }
        td_run_cancel(wk->w, wk->live_seq[i]);
        srv_metrics_dropped(b->metrics, st == SRV_JOB_TIMEOUT ? SRV_DROP_TIMEOUT : SRV_DROP_GONE);
        wk->live[i] = wk->live[wk->n_live - 1];
        wk->live_seq[i] = wk->live_seq[wk->n_live - 1];
        wk->n_live--;
        finish_job(j, st);
    }
}

/* The drain deadline passed: every live job is finished as
 * SRV_JOB_SHUTDOWN and the running decode dropped, between two steps. */
static void cut_live(srv_worker *wk)
{
    srv_batcher *b = wk->b;
    for (int i = 0; i < wk->n_live; i++) {
        srv_metrics_dropped(b->metrics, SRV_DROP_SHUTDOWN);
        finish_job(wk->live[i], SRV_JOB_SHUTDOWN);
    }
    wk->n_live = 0;
    td_run_reset(wk->w);
    srv_metrics_running_rows(b->metrics, -wk->rows);
    wk->rows = 0;
}

/* One step of the running decode, outside the lock: admission of the k
 * jobs taken, cancellations, the step, the finished sentences handed out.
 * cut: the drain deadline passed (read under the lock): no step, every
 * live job cancelled (cut_live). */
static void inflight_step(srv_worker *wk, int k, int cut)
{
    srv_batcher *b = wk->b;
    if (cut) { /* nothing was taken for admission (inflight_main) */
        (void)k;
        cut_live(wk);
        return;
    }
    double t0 = srv_now();
    int admitted_before = wk->n_live;
    if (k > 0) {
        admit(wk, k);
        note_arena(wk);
    }
    int admitted = wk->n_live - admitted_before;
    cancel_stale(wk, srv_now());
    char err[256];
    int rc = wk->n_live > 0 ? engine_blocked(b, err, sizeof err) : 0;
    int stepped = rc == 0 && (wk->n_live > 0 || td_run_live(wk->w) > 0);
    int max_rows = INT_MAX; /* the cycles move on only with the steps they schedule */
    srv_step_kind kind = SRV_STEP_ALL;
    if (stepped) {
        int urgent = srv_inflight_urgent_rows(td_run_urgent_rows(wk->w), b->o.urgent_steps,
                                              &wk->urgent_phase);
        if (urgent > 0) {
            max_rows = urgent;
            kind = SRV_STEP_URGENT;
        } else {
            max_rows = srv_inflight_step_rows(td_run_rows(wk->w), b->short_steps,
                                              &wk->short_phase);
            kind = max_rows != INT_MAX ? SRV_STEP_SHORTEST : SRV_STEP_ALL;
        }
        rc = td_run_step_shortest(wk->w, max_rows, err, sizeof err);
    }
    /* the gauge before any job finishes: a client that has its answer sees
     * its rows gone */
    long rows = rc < 0 ? 0 : td_run_rows(wk->w);
    srv_metrics_running_rows(b->metrics, rows - wk->rows);
    wk->rows = rows;
    if (stepped)
        srv_metrics_step(b->metrics, admitted, kind, srv_now() - t0);
    if (rc < 0) {
        srv_metrics_batch_failed(b->metrics);
        fprintf(stderr, "transformerd: a decoding step failed: %s\n", err);
        fail_live(wk, rc, err);
    } else {
        td_seq q;
        td_result r;
        int t;
        while ((t = td_run_take(wk->w, &q, &r)) != 0) {
            int i = 0;
            while (i < wk->n_live && wk->live_seq[i] != q)
                i++;
            if (i == wk->n_live) { /* cancelled meanwhile: nobody waits */
                td_result_free(&r);
                continue;
            }
            srv_job *j = wk->live[i];
            wk->live[i] = wk->live[wk->n_live - 1];
            wk->live_seq[i] = wk->live_seq[wk->n_live - 1];
            wk->n_live--;
            if (t < 0) {
                fail_jobs(&j, 1, TD_EINVAL, "out of host memory building the result");
                continue;
            }
            j->res = r;
            srv_metrics_tokens(b->metrics, j->n_src, r.n_hyps > 0 ? r.hyps[0].n_tokens : 0);
            finish_job(j, SRV_JOB_DONE);
        }
    }
    test_delay(b);
}

static void *inflight_main(void *arg)
{
    srv_worker *wk = arg;
    srv_batcher *b = wk->b;
    worker_thread_nice(b);
    pthread_mutex_lock(&b->mu);
    for (;;) {
        if ((b->stop && !b->head && wk->n_live == 0) || (b->park && wk->n_live == 0))
            break;
        if (!b->head && wk->n_live == 0) {
            idle_wait(wk);
            continue;
        }
        double now = srv_now(), wait_until = 0;
        if (finish_expired(wk, now))
            continue;
        int cut = b->cut;
        int k = b->head && !cut ? take_admission(wk, now, &wait_until) : 0;
        if (k == 0 && wk->n_live == 0) {
            /* idle, the first waits for company: wake at its due time */
            timed_wait(b, now, wait_until);
            continue;
        }
        wk->busy = 1;
        wk->idle_since = 0;
        pthread_mutex_unlock(&b->mu);
        inflight_step(wk, k, cut);
        pthread_mutex_lock(&b->mu);
        wk->busy = wk->n_live > 0; /* a drain waits for running sentences */
        b->last_active = srv_now();
        pthread_cond_broadcast(&b->idle_cv);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* One tiny greedy batch, so that first-touch page faults, BLAS thread
 * start-up and lazily built tables are paid before readiness. */
static int warm_up(td_worker *w, const srv_batcher_opts *bo, char *err, size_t errlen)
{
    int32_t src[2] = {bo->warm_up_token, bo->warm_up_token};
    const int32_t *srcs[1] = {src};
    int len[1] = {2};
    td_decode_opts o = bo->warm_up;
    o.beam_size = 1;
    o.num_hypotheses = 1;
    o.max_length = o.max_length < 4 ? o.max_length : 4;
    td_result r;
    if (td_translate_batch(w, srcs, len, 1, &o, &r, err, errlen) != 0)
        return -1;
    td_result_free(&r);
    return 0;
}

static void stop_workers(srv_batcher *b);

void srv_batcher_free(srv_batcher *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    b->stop = 1;
    b->draining = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    stop_workers(b);
    for (int i = 0; b->workers && i < b->n_workers; i++) {
        srv_worker *wk = &b->workers[i];
        free(wk->batch);
        free(wk->src);
        free(wk->len);
        free(wk->res);
        free((void *)wk->opts);
        free(wk->seq);
        free(wk->live);
        free(wk->live_seq);
    }
    /* Jobs left (none after a drain) are finished so that no submitter
     * waits for ever. */
    srv_job *left = b->head;
    b->head = b->tail = NULL;
    for (srv_job *j = left, *next; j; j = next) {
        next = j->next;
        j->next = NULL;
        finish_job(j, SRV_JOB_SHUTDOWN);
    }
    free(b->workers);
    free(b->cand);
    pthread_cond_destroy(&b->cv);
    pthread_cond_destroy(&b->idle_cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Engine workers made (warmed up), scheduler threads started (init, unpark). */
static int start_workers(srv_batcher *b, char *err, size_t errlen)
{
    const srv_batcher_opts *o = &b->o;
    for (int i = 0; i < b->n_workers; i++) {
        srv_worker *wk = &b->workers[i];
        td_worker_opts wo = {.max_batch = o->max_batch_size,
                             .max_src_len = o->max_src_len,
                             .max_length = o->max_length,
                             .max_beam = o->max_beam,
                             .n_threads = o->threads,
                             .grow = o->grow};
        if (td_worker_init(&wk->w, o->model, &wo, err, errlen) != 0)
            return -1;
        int free_slots;
        td_run_free(wk->w, &free_slots, &wk->rows_total);
        b->worker_bytes = td_worker_max_bytes(wk->w);
        if (warm_up(wk->w, o, err, errlen) != 0)
            return -1;
        note_arena(wk);
        wk->arena_first = wk->arena;
        wk->idle_since = 0;
    }
    for (int i = 0; i < b->n_workers; i++) {
        void *(*main_fn)(void *) = b->scheduler == SRV_SCHED_BATCH ? worker_main : inflight_main;
        if (pthread_create(&b->workers[i].th, NULL, main_fn, &b->workers[i]) != 0) {
            snprintf(err, errlen, "cannot start a scheduler thread");
            return -1;
        }
        b->workers[i].started = 1;
    }
    return 0;
}

/* Joins the scheduler threads (told to exit) and frees the engine workers. */
static void stop_workers(srv_batcher *b)
{
    for (int i = 0; b->workers && i < b->n_workers; i++) {
        srv_worker *wk = &b->workers[i];
        if (wk->started)
            pthread_join(wk->th, NULL);
        wk->started = 0;
        srv_metrics_scratch(b->metrics, -(long)wk->arena);
        atomic_fetch_sub_explicit(&b->scratch_bytes, wk->arena, memory_order_relaxed);
        wk->arena = 0;
        td_worker_free(wk->w);
        wk->w = NULL;
    }
}

int srv_batcher_init(srv_batcher **out, const srv_batcher_opts *o, srv_metrics *metrics,
                     char *err, size_t errlen)
{
    *out = NULL;
    srv_batcher *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    pthread_cond_init(&b->idle_cv, NULL);
    b->model = o->model;
    b->metrics = metrics;
    b->max_batch_size = o->max_batch_size;
    b->max_batch_tokens = o->max_batch_tokens;
    b->batch_delay_ms = o->batch_delay_ms;
    b->max_queue = o->max_queue;
    b->n_workers = o->workers > 0 ? o->workers : 1;
    b->fault = o->fault;
    b->scheduler = o->scheduler;
    b->test_step_delay_ms = o->test_step_delay_ms;
    b->worker_nice = o->worker_nice;
    b->short_steps = o->short_steps;
    b->test_on_admit = o->test_on_admit;
    b->test_ud = o->test_ud;
    b->cand_cap = 8 * o->max_batch_size;
    b->cand = calloc((size_t)b->cand_cap, sizeof *b->cand);
    b->workers = calloc((size_t)b->n_workers, sizeof *b->workers);
    if (!b->cand || !b->workers) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    b->o = *o;
    b->last_active = srv_now();
    const size_t B = (size_t)o->max_batch_size;
    for (int i = 0; i < b->n_workers; i++) {
        srv_worker *wk = &b->workers[i];
        wk->b = b;
        wk->batch = calloc(B, sizeof *wk->batch);
        wk->src = calloc(B, sizeof *wk->src);
        wk->len = calloc(B, sizeof *wk->len);
        wk->res = calloc(B, sizeof *wk->res);
        wk->opts = calloc(B, sizeof *wk->opts);
        wk->seq = calloc(B, sizeof *wk->seq);
        wk->live = calloc(B, sizeof *wk->live);
        wk->live_seq = calloc(B, sizeof *wk->live_seq);
        if (!wk->batch || !wk->src || !wk->len || !wk->res || !wk->opts || !wk->seq ||
            !wk->live || !wk->live_seq) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
    }
    if (start_workers(b, err, errlen) != 0)
        goto fail;
    *out = b;
    return 0;
fail:
    srv_batcher_free(b);
    return -1;
}

size_t srv_batcher_worker_bytes(const srv_batcher *b)
{
    return b->worker_bytes;
}

size_t srv_batcher_scratch_bytes(const srv_batcher *b)
{
    return atomic_load_explicit(&b->scratch_bytes, memory_order_relaxed);
}

static srv_submit_rc queue_jobs(srv_batcher *b, srv_job *jobs, int n, double deadline,
                                const srv_completion *c, double now);

srv_submit_rc srv_batcher_submit(srv_batcher *b, srv_job *jobs, int n, double deadline,
                                 const srv_completion *c)
{
    double now = srv_now();
    pthread_mutex_lock(&b->mu);
    srv_submit_rc rc = queue_jobs(b, jobs, n, deadline, c, now);
    /* a parked batcher's first submit wakes its owner (outside the lock) */
    int wake = rc == SRV_SUBMIT_OK && b->parked && !b->wake_sent && b->o.on_wake;
    b->wake_sent |= wake;
    pthread_mutex_unlock(&b->mu);
    if (wake)
        b->o.on_wake(b->o.wake_ud);
    return rc;
}

/* Under mu: srv_batcher_submit's queueing. */
static srv_submit_rc queue_jobs(srv_batcher *b, srv_job *jobs, int n, double deadline,
                                const srv_completion *c, double now)
{
    b->last_active = now;
    if (b->draining) {
        return SRV_SUBMIT_DRAINING;
    }
    int misses = 0;
    for (int i = 0; i < n; i++)
        misses += !jobs[i].cached;
    if (b->depth + misses > b->max_queue) {
        return SRV_SUBMIT_FULL;
    }
    /* the places of the jobs: after the last taken, or after the owner's
     * last still ahead of it */
    uint64_t base = b->vt_taken;
    fair_owner *ow = c->owner ? &b->owners[c->owner % SRV_FAIR_OWNERS] : NULL;
    if (ow && ow->owner == c->owner && ow->last_vt > base)
        base = ow->last_vt;
    if (ow) {
        ow->owner = c->owner;
        ow->last_vt = base + (uint64_t)misses;
    }
    /* merged into the queue in one pass (both in vt order); a job goes
     * after those already queued at its place */
    srv_job *prev = NULL, *at = b->head;
    for (int i = 0, q = 0; i < n; i++) {
        srv_job *j = &jobs[i];
        if (j->cached)
            continue; /* the submitter finishes it */
        j->status = SRV_JOB_QUEUED;
        j->completion = *c;
        j->deadline = deadline;
        j->t_enqueue = now;
        j->vt = base + 1 + (uint64_t)q++;
        while (at && at->vt <= j->vt) {
            prev = at;
            at = at->next;
        }
        j->next = at;
        if (prev)
            prev->next = j;
        else
            b->head = j;
        if (!at)
            b->tail = j;
        prev = j;
        b->depth++;
    }
    srv_metrics_queue_depth(b->metrics, b->depth);
    pthread_cond_broadcast(&b->cv);
    return SRV_SUBMIT_OK;
}

void srv_batcher_halt(srv_batcher *b, int engine_rc, const char *msg)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&b->halt_state, &expected, 1))
        return;
    b->halt_rc = engine_rc;
    snprintf(b->halt_msg, sizeof b->halt_msg, "%s", msg ? msg : "");
    atomic_store(&b->halt_state, 2);
}

long srv_batcher_queue_depth(srv_batcher *b)
{
    pthread_mutex_lock(&b->mu);
    long d = b->depth;
    pthread_mutex_unlock(&b->mu);
    return d;
}

/* Under mu: nothing queued or running and not parked. */
static int all_idle(const srv_batcher *b)
{
    int idle = !b->parked && !b->head;
    for (int i = 0; idle && i < b->n_workers; i++)
        idle = !b->workers[i].busy && b->workers[i].n_live == 0;
    return idle;
}

int srv_batcher_park(srv_batcher *b)
{
    pthread_mutex_lock(&b->mu);
    if (!all_idle(b) || b->draining || b->stop) {
        pthread_mutex_unlock(&b->mu);
        return 0;
    }
    b->park = b->parked = 1;
    b->wake_sent = 0;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    stop_workers(b);
    pthread_mutex_lock(&b->mu);
    b->park = 0;
    pthread_mutex_unlock(&b->mu);
    return 1;
}

int srv_batcher_unpark(srv_batcher *b, char *err, size_t errlen)
{
    if (!b->parked) /* (written by this thread only: park and unpark) */
        return 0;
    if (start_workers(b, err, errlen) != 0) {
        stop_workers(b);
        return -1;
    }
    pthread_mutex_lock(&b->mu);
    b->parked = b->wake_sent = 0;
    b->last_active = srv_now();
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

/* Under mu: the whole queue, taken out (its jobs finished outside the lock). */
static srv_job *take_queue(srv_batcher *b)
{
    srv_job *left = b->head;
    b->head = b->tail = NULL;
    b->depth = 0;
    srv_metrics_queue_depth(b->metrics, 0);
    return left;
}

void srv_batcher_fail_queued(srv_batcher *b, int engine_rc, const char *msg)
{
    pthread_mutex_lock(&b->mu);
    srv_job *left = take_queue(b);
    pthread_mutex_unlock(&b->mu);
    for (srv_job *j = left, *next; j; j = next) {
        next = j->next;
        fail_jobs(&j, 1, engine_rc, msg);
    }
}

double srv_batcher_idle_s(srv_batcher *b)
{
    pthread_mutex_lock(&b->mu);
    double t = all_idle(b) ? srv_now() - b->last_active : -1;
    pthread_mutex_unlock(&b->mu);
    return t;
}

void srv_batcher_drain(srv_batcher *b, double deadline_s)
{
    pthread_mutex_lock(&b->mu);
    b->draining = 1; /* due at once: no more waiting for company */
    pthread_cond_broadcast(&b->cv);
    for (;;) {
        int busy = 0;
        for (int i = 0; i < b->n_workers; i++)
            busy |= b->workers[i].busy;
        if (!b->head && !busy)
            break;
        double now = srv_now();
        if (now >= deadline_s && !b->cut) {
            /* Out of time: the inflight workers cancel their running
             * sentences at the next step (a batch of --scheduler batch
             * runs to its end). */
            b->cut = 1;
            pthread_cond_broadcast(&b->cv);
        }
        if (now >= deadline_s && b->head) {
            /* Out of time: drop what still waits (finished outside the
             * lock). */
            srv_job *left = take_queue(b);
            pthread_mutex_unlock(&b->mu);
            finish_chain(b, left, SRV_JOB_SHUTDOWN, SRV_DROP_SHUTDOWN);
            pthread_mutex_lock(&b->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&b->idle_cv, &b->mu, &ts);
    }
    pthread_mutex_unlock(&b->mu);
}
