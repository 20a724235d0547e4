/*
 * sched.c - a seat of the pool serving a batcher's queue (batcher_impl.h):
 * the batches of --scheduler batch and the running decode of --scheduler
 * inflight, one model at a time.
 *
 * A seat that the pool gave a batcher (srv_sched_serve) binds its worker
 * to the batcher's model (td_worker_bind: a model of the same shape keeps
 * the buffers) and serves until the queue is empty and its running
 * sentences finished, or, once it served SRV_POOL_SLICE_S while another
 * model waits for a seat, takes no more texts in and returns when its
 * running sentences are done.
 *
 * Batches: a seat takes a batch when the first job has company enough
 * (--max-batch-size sentences, or --max-batch-tokens padded source tokens
 * among jobs with the same options) or has waited --batch-delay-ms. The
 * batch always holds the first job (so nothing starves); the rest are the
 * compatible queued jobs closest to it in length (the candidates are
 * sorted by length, and the window grows towards the nearer neighbour),
 * which keeps padding small. Texts of one request can land in different
 * batches; the request reassembles them by index.
 *
 * Before a batch runs, jobs whose deadline passed or whose submitter's
 * gone hook fires are dropped. Every accepted job is finished exactly once
 * through its completion's done callback, always outside b->mu (expired
 * and drained jobs are unlinked under the lock and finished after it is
 * released), so done may take its own locks or wake other threads.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batcher_impl.h"
#include "clock.h"

static int int_arrays_equal(const int *a, int na, const int *b, int nb)
{
    if (na != nb || (!a) != (!b))
        return 0;
    return na == 0 || !a || memcmp(a, b, (size_t)na * sizeof(int)) == 0;
}

static int int32_arrays_equal(const int32_t *a, int na, const int32_t *b, int nb)
{
    if (na != nb)
        return 0;
    return na == 0 || (a && b && memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0);
}

/* Two jobs may share a batch exactly when their options are equal. */
static int decode_opts_equal(const td_decode_opts *a, const td_decode_opts *b)
{
    if (a == b)
        return 1;
    if (a->beam_size != b->beam_size || a->num_hypotheses != b->num_hypotheses ||
        a->max_length != b->max_length || a->return_attention != b->return_attention ||
        memcmp(&a->length_penalty, &b->length_penalty, sizeof(float)) != 0 ||
        !int32_arrays_equal(a->prefix, a->n_prefix, b->prefix, b->n_prefix))
        return 0; /* a forced prefix (a multilingual model's target) is the batch's */
    if (!a->return_attention)
        return 1;
    return int_arrays_equal(a->attn_layers, a->n_attn_layers, b->attn_layers, b->n_attn_layers) &&
           int_arrays_equal(a->attn_heads, a->n_attn_heads, b->attn_heads, b->n_attn_heads);
}

/* Finishes a job: its status, then its submitter's done. Called without
 * b->mu; the job is not touched after done is entered. */
void srv_sched_finish_job(srv_job *j, srv_job_status st)
{
    j->status = st;
    srv_completion c = j->completion;
    c.done(j, c.ud);
}

/* Finishes a chain of jobs unlinked from the queue (linked by next). */
void srv_sched_finish_chain(srv_batcher *b, srv_job *j, srv_job_status st, srv_drop_reason why)
{
    while (j) {
        srv_job *next = j->next;
        j->next = NULL;
        srv_metrics_dropped(b->metrics, why);
        srv_sched_finish_job(j, st);
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
    atomic_store_explicit(&b->pending, b->depth, memory_order_release);
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
            srv_sched_finish_job(j, SRV_JOB_TIMEOUT);
        } else if (j->completion.gone && j->completion.gone(j->completion.ud)) {
            srv_metrics_dropped(b->metrics, SRV_DROP_GONE);
            srv_sched_finish_job(j, SRV_JOB_GONE);
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
            srv_sched_finish_job(j, SRV_JOB_DONE);
        } else {
            j->engine_rc = rc;
            snprintf(j->engine_err, sizeof j->engine_err, "%s", err);
            srv_sched_finish_job(j, SRV_JOB_FAILED);
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
    struct timespec ts = srv_realtime_in(wait_until - now);
    pthread_cond_timedwait(&b->cv, &b->mu, &ts);
}

/* Under mu: the seat's busy flag and the batcher's count of busy seats. */
static void set_busy(srv_worker *wk, int busy)
{
    if (wk->busy != busy)
        wk->b->n_busy += busy ? 1 : -1;
    wk->busy = busy;
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
    set_busy(wk, 1);
    pthread_mutex_unlock(&b->mu);
    srv_sched_finish_chain(b, expired, SRV_JOB_TIMEOUT, SRV_DROP_TIMEOUT);
    pthread_mutex_lock(&b->mu);
    set_busy(wk, wk->n_live > 0);
    pthread_cond_broadcast(&b->idle_cv);
    return 1;
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
        srv_sched_finish_job(j, SRV_JOB_FAILED);
    }
    wk->n_live = 0;
    td_run_reset(wk->w);
}

void srv_sched_fail_jobs(srv_job **jobs, int k, int rc, const char *err)
{
    for (int i = 0; i < k; i++) {
        jobs[i]->engine_rc = rc;
        snprintf(jobs[i]->engine_err, sizeof jobs[i]->engine_err, "%s", err);
        srv_sched_finish_job(jobs[i], SRV_JOB_FAILED);
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
        srv_sched_fail_jobs(wk->batch, k, rc, err);
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
        srv_sched_finish_job(j, st);
    }
}

/* The drain deadline passed: every live job is finished as
 * SRV_JOB_SHUTDOWN and the running decode dropped, between two steps. */
static void cut_live(srv_worker *wk)
{
    srv_batcher *b = wk->b;
    for (int i = 0; i < wk->n_live; i++) {
        srv_metrics_dropped(b->metrics, SRV_DROP_SHUTDOWN);
        srv_sched_finish_job(wk->live[i], SRV_JOB_SHUTDOWN);
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
        srv_pool_note_arena(wk->seat);
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
                srv_sched_fail_jobs(&j, 1, TD_EINVAL, "out of host memory building the result");
                continue;
            }
            j->res = r;
            srv_metrics_tokens(b->metrics, j->n_src, r.n_hyps > 0 ? r.hyps[0].n_tokens : 0);
            srv_sched_finish_job(j, SRV_JOB_DONE);
        }
    }
    test_delay(b);
}


/* Under mu: another model has waited for a seat while this one served a
 * slice: no more texts in. */
static void check_yield(srv_worker *wk, double now)
{
    srv_batcher *b = wk->b;
    if (!wk->yield && b->head && now - wk->since >= SRV_POOL_SLICE_S &&
        srv_pool_contended(b->pool, &b->client))
        wk->yield = 1;
}

/* --scheduler batch: batches taken and run to their end. */
static void batch_serve(srv_worker *wk)
{
    srv_batcher *b = wk->b;
    pthread_mutex_lock(&b->mu);
    while (b->head && !wk->yield) {
        double now = srv_now(), wait_until = 0;
        if (finish_expired(wk, now))
            continue;
        int n = take_batch(b, wk->batch, now, &wait_until);
        if (n == 0) {
            timed_wait(b, now, wait_until);
            continue;
        }
        set_busy(wk, 1);
        pthread_mutex_unlock(&b->mu);
        run_batch(wk, n);
        srv_pool_note_arena(wk->seat);
        pthread_mutex_lock(&b->mu);
        set_busy(wk, 0);
        b->last_active = srv_now();
        pthread_cond_broadcast(&b->idle_cv);
        check_yield(wk, b->last_active);
    }
    pthread_mutex_unlock(&b->mu);
}

/* --scheduler inflight: the running decode, its admissions and steps. */
static void inflight_serve(srv_worker *wk)
{
    srv_batcher *b = wk->b;
    pthread_mutex_lock(&b->mu);
    while (wk->n_live > 0 || (b->head && !wk->yield)) {
        double now = srv_now(), wait_until = 0;
        if (finish_expired(wk, now))
            continue;
        check_yield(wk, now);
        int cut = b->cut;
        int k = b->head && !cut && !wk->yield ? take_admission(wk, now, &wait_until) : 0;
        if (k == 0 && wk->n_live == 0) {
            if (b->head && !wk->yield) /* the first waits for company: wake at its due time */
                timed_wait(b, now, wait_until);
            continue;
        }
        set_busy(wk, 1);
        pthread_mutex_unlock(&b->mu);
        inflight_step(wk, k, cut);
        pthread_mutex_lock(&b->mu);
        set_busy(wk, wk->n_live > 0); /* a drain waits for running sentences */
        b->last_active = srv_now();
        pthread_cond_broadcast(&b->idle_cv);
    }
    pthread_mutex_unlock(&b->mu);
}

int srv_sched_wants(void *ud)
{
    return atomic_load_explicit(&((srv_batcher *)ud)->pending, memory_order_acquire) > 0;
}

void srv_sched_serve(void *ud, srv_seat *seat)
{
    srv_batcher *b = ud;
    pthread_mutex_lock(&b->mu);
    if (b->parked) { /* put away: its model is not read */
        pthread_mutex_unlock(&b->mu);
        return;
    }
    b->n_in++;
    pthread_mutex_unlock(&b->mu);
    char err[256];
    size_t before = seat->arena;
    int made = !seat->w;
    int rc = seat->w ? td_worker_bind(seat->w, b->model, &b->wo, err, sizeof err)
                     : td_worker_init(&seat->w, b->model, &b->wo, err, sizeof err);
    if (rc != 0) {
        /* no worker for this model: its queue cannot run (the next seat
         * tries again with the next texts) */
        td_worker_free(seat->w);
        seat->w = NULL;
        fprintf(stderr, "transformerd: no worker for a batch: %s\n", err);
    }
    srv_pool_note_arena(seat);
    if (rc == 0 && (made || seat->arena != before)) /* made for this model: where a trim goes back */
        seat->arena_first = seat->arena;
    srv_worker wk = {.b = b, .seat = seat, .w = seat->w, .batch = seat->batch,
                     .src = seat->src, .len = seat->len, .res = seat->res, .opts = seat->opts,
                     .seq = seat->seq, .live = seat->live, .live_seq = seat->live_seq,
                     .since = srv_now()};
    if (rc == 0) {
        int free_slots;
        td_run_free(wk.w, &free_slots, &wk.rows_total);
        if (b->scheduler == SRV_SCHED_BATCH)
            batch_serve(&wk);
        else
            inflight_serve(&wk);
        if (td_run_live(wk.w) > 0) /* cancelled sentences nobody waits for */
            td_run_reset(wk.w);
        srv_metrics_running_rows(b->metrics, -wk.rows);
    }
    pthread_mutex_lock(&b->mu);
    srv_job *failed = rc != 0 ? b->head : NULL;
    if (failed) {
        b->head = b->tail = NULL;
        b->depth = 0;
        atomic_store_explicit(&b->pending, 0, memory_order_release);
        srv_metrics_queue_depth(b->metrics, 0);
    }
    b->n_in--;
    pthread_cond_broadcast(&b->idle_cv);
    pthread_mutex_unlock(&b->mu);
    for (srv_job *j = failed, *next; j; j = next) {
        next = j->next;
        j->next = NULL;
        srv_sched_fail_jobs(&j, 1, TD_EINVAL, err);
    }
}
