/*
 * batcher.c - the bounded queue of one model (batcher.h): submits in a fair
 * order, drain, park, halt, and the batcher's place in the pool of seats
 * that serve it (pool.h; its own pool of --workers seats unless it shares
 * the daemon's). The scheduling is sched.c's.
 *
 * Each text of a request is a job. Jobs wait in one queue per model, in a
 * fair order (srv_batcher_submit: virtual time, so that one large request,
 * or one client's many, cannot hold the model for the others); a seat of
 * the pool serves the queue in batches or through its running decode
 * (sched.c). Every accepted job is finished exactly once through its
 * completion's done callback, always outside b->mu.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batcher_impl.h"
#include "clock.h"

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

void srv_batcher_free(srv_batcher *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    b->stop = 1;
    b->draining = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (b->client.attached)
        srv_pool_detach(b->pool, &b->client);
    if (b->own_pool)
        srv_pool_free(b->pool);
    /* Jobs left (none after a drain) are finished so that no submitter
     * waits for ever. */
    srv_job *left = b->head;
    b->head = b->tail = NULL;
    for (srv_job *j = left, *next; j; j = next) {
        next = j->next;
        j->next = NULL;
        srv_sched_finish_job(j, SRV_JOB_SHUTDOWN);
    }
    free(b->cand);
    pthread_cond_destroy(&b->cv);
    pthread_cond_destroy(&b->idle_cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* A worker of the model made once, to size a seat's worker for it (its
 * arena at the maxima: what --max-memory counts) and to run the warm-up
 * batch: the model's lazily built tables and the engine's threads are paid
 * before readiness. It grows on demand, so it stays small. */
static int warm_model(srv_batcher *b, char *err, size_t errlen)
{
    td_worker_opts wo = b->wo;
    wo.grow = 1;
    td_worker *w;
    if (td_worker_init(&w, b->model, &wo, err, errlen) != 0)
        return -1;
    int rc = warm_up(w, &b->o, err, errlen);
    b->worker_bytes = td_worker_max_bytes(w); /* its maxima: grow does not change them */
    td_worker_free(w);
    return rc;
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
    b->fault = o->fault;
    b->scheduler = o->scheduler;
    b->test_step_delay_ms = o->test_step_delay_ms;
    b->short_steps = o->short_steps;
    b->test_on_admit = o->test_on_admit;
    b->test_ud = o->test_ud;
    b->cand_cap = 8 * o->max_batch_size;
    b->cand = calloc((size_t)b->cand_cap, sizeof *b->cand);
    if (!b->cand) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    b->o = *o;
    b->last_active = srv_now();
    b->wo = (td_worker_opts){.max_batch = o->max_batch_size,
                             .max_src_len = o->max_src_len,
                             .max_length = o->max_length,
                             .max_beam = o->max_beam,
                             .n_threads = o->threads,
                             .grow = o->grow};
    int workers = o->workers > 0 ? o->workers : 1;
    if (warm_model(b, err, errlen) != 0)
        goto fail;
    b->pool = o->pool;
    if (!b->pool) {
        const srv_pool_opts po = {.seats = workers,
                                  .max_batch = o->max_batch_size,
                                  .nice = o->worker_nice,
                                  .scratch_idle_s = o->grow ? o->scratch_idle_s : 0,
                                  .on_scratch = o->on_scratch,
                                  .scratch_ud = o->scratch_ud};
        if (srv_pool_init(&b->pool, &po, err, errlen) != 0)
            goto fail;
        b->own_pool = 1;
    }
    b->client = (srv_pool_client){.wants = srv_sched_wants, .serve = srv_sched_serve,
                                  .ud = b, .max_seats = workers};
    srv_pool_attach(b->pool, &b->client);
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
    return b->own_pool ? srv_pool_scratch_bytes(b->pool) : 0;
}

typedef enum queue_bound { QUEUE_BOUNDED, QUEUE_UNBOUNDED } queue_bound;

static srv_submit_rc queue_jobs(srv_batcher *b, srv_job *jobs, int n, double deadline,
                                const srv_completion *c, double now, queue_bound bound);

static srv_submit_rc submit(srv_batcher *b, srv_job *jobs, int n, double deadline,
                            const srv_completion *c, queue_bound bound)
{
    double now = srv_now();
    pthread_mutex_lock(&b->mu);
    srv_submit_rc rc = queue_jobs(b, jobs, n, deadline, c, now, bound);
    /* a parked batcher's first submit wakes its owner (outside the lock) */
    int wake = rc == SRV_SUBMIT_OK && b->parked && !b->wake_sent && b->o.on_wake;
    int kick = rc == SRV_SUBMIT_OK && !b->parked;
    b->wake_sent |= wake;
    pthread_mutex_unlock(&b->mu);
    if (kick) /* a free seat takes it (a seat serving the model already has it) */
        srv_pool_kick(b->pool);
    if (wake)
        b->o.on_wake(b->o.wake_ud);
    return rc;
}

srv_submit_rc srv_batcher_submit(srv_batcher *b, srv_job *jobs, int n, double deadline,
                                 const srv_completion *c)
{
    return submit(b, jobs, n, deadline, c, QUEUE_BOUNDED);
}

srv_submit_rc srv_batcher_feed(srv_batcher *b, srv_job *jobs, int n, double deadline,
                               const srv_completion *c)
{
    return submit(b, jobs, n, deadline, c, QUEUE_UNBOUNDED);
}

/* Under mu: srv_batcher_submit's queueing. */
static srv_submit_rc queue_jobs(srv_batcher *b, srv_job *jobs, int n, double deadline,
                                const srv_completion *c, double now, queue_bound bound)
{
    b->last_active = now;
    if (b->draining) {
        return SRV_SUBMIT_DRAINING;
    }
    if (b->retired)
        return SRV_SUBMIT_RETIRED;
    int misses = 0;
    for (int i = 0; i < n; i++)
        misses += !jobs[i].cached;
    if (bound == QUEUE_BOUNDED && b->depth + misses > b->max_queue) {
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
    if (!b->parked) /* a parked queue waits for srv_batcher_unpark */
        atomic_store_explicit(&b->pending, b->depth, memory_order_release);
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
    return !b->parked && !b->head && b->n_busy == 0;
}

int srv_batcher_park(srv_batcher *b)
{
    pthread_mutex_lock(&b->mu);
    /* no seat in it: none reads the model until it is unparked */
    if (!all_idle(b) || b->n_in > 0 || b->draining || b->stop) {
        pthread_mutex_unlock(&b->mu);
        return 0;
    }
    b->parked = 1;
    b->wake_sent = 0;
    pthread_mutex_unlock(&b->mu);
    return 1;
}

int srv_batcher_unpark(srv_batcher *b, char *err, size_t errlen)
{
    if (!b->parked) /* (written by this thread only: park and unpark) */
        return 0;
    (void)err;
    (void)errlen;
    pthread_mutex_lock(&b->mu);
    b->parked = b->wake_sent = 0;
    b->last_active = srv_now();
    atomic_store_explicit(&b->pending, b->depth, memory_order_release);
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    srv_pool_kick(b->pool);
    return 0;
}

/* Under mu: the whole queue, taken out (its jobs finished outside the lock). */
static srv_job *take_queue(srv_batcher *b)
{
    srv_job *left = b->head;
    b->head = b->tail = NULL;
    b->depth = 0;
    atomic_store_explicit(&b->pending, 0, memory_order_release);
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
        srv_sched_fail_jobs(&j, 1, engine_rc, msg);
    }
}

int srv_batcher_retire(srv_batcher *b)
{
    pthread_mutex_lock(&b->mu);
    if (!b->parked) {
        pthread_mutex_unlock(&b->mu);
        return -1;
    }
    b->retired = 1;
    srv_job *left = take_queue(b);
    pthread_mutex_unlock(&b->mu);
    for (srv_job *j = left, *next; j; j = next) {
        next = j->next;
        srv_sched_finish_job(j, SRV_JOB_RETIRED);
    }
    return 0;
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
        if (!b->head && b->n_busy == 0)
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
            srv_sched_finish_chain(b, left, SRV_JOB_SHUTDOWN, SRV_DROP_SHUTDOWN);
            pthread_mutex_lock(&b->mu);
            continue;
        }
        struct timespec ts = srv_realtime_in(0.05);
        pthread_cond_timedwait(&b->idle_cv, &b->mu, &ts);
    }
    pthread_mutex_unlock(&b->mu);
}
