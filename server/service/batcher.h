/*
 * batcher.h - the bounded queue of one model, served by the seats of a
 * pool of engine workers (pool.h; sched.c schedules).
 *
 * A job is one text to translate. A submitter (the HTTP layer) hands the
 * batcher its jobs together with a completion: a done(job, ud) callback and
 * its user pointer (redis's aeFileProc + clientData), an optional
 * gone(ud) hook and a deadline. The batcher forms batches, runs the engine
 * on them and finishes every job it accepted exactly once through done. It
 * knows nothing of the transport (no HTTP header, no sockets) and no policy
 * about engine errors: a failed job carries the engine's return code and
 * message, and the submitter decides what that means (see docs/api.md for
 * the statuses the daemon makes of them).
 *
 * Threads: srv_batcher_submit, _queue_depth and _halt may be called from
 * any thread; the pool's seats run batches and call done and gone; _drain
 * and _free belong to the thread that owns the batcher
 * (serve.c's main thread). done and gone are never called with the
 * batcher's lock held.
 */
#ifndef SRV_BATCHER_H
#define SRV_BATCHER_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "translator.h"

typedef enum srv_job_status {
    SRV_JOB_QUEUED = 0,
    SRV_JOB_DONE,      /* res holds the translation */
    SRV_JOB_TIMEOUT,   /* the deadline passed before the job ran */
    SRV_JOB_GONE,      /* gone(ud) said the submitter's client left before the job ran */
    SRV_JOB_SHUTDOWN,  /* the drain deadline passed before the job ran */
    SRV_JOB_FAILED,    /* the engine failed the job's batch: engine_rc, engine_err */
    SRV_JOB_RETIRED,   /* its model was replaced while put away (srv_batcher_retire) */
} srv_job_status;

typedef struct srv_job srv_job;

/* Called exactly once per accepted job, from a scheduler thread (or from
 * the thread in srv_batcher_drain / _free), after status and its outcome
 * fields are written. From the moment done is entered the batcher never
 * touches the job again, so done may free it (or let another thread do
 * so). It must be quick: it runs between two batches of a worker. */
typedef void (*srv_job_done_fn)(srv_job *job, void *ud);

/* Polled from a scheduler thread just before a job runs: nonzero when
 * nobody waits for the result any more (the job is then finished as
 * SRV_JOB_GONE without running). */
typedef int (*srv_job_gone_fn)(void *ud);

/* How a submitter hears from the batcher about the jobs of one submit. */
typedef struct srv_completion {
    srv_job_done_fn done; /* required */
    srv_job_gone_fn gone; /* NULL: never gone */
    void *ud;             /* passed to both; must stay valid until the last done */
    uint64_t owner;       /* who the jobs are for (e.g. a hash of the client's
                             address): its submits share one fair share of
                             the queue; 0: the submit alone */
} srv_completion;

struct srv_job {
    /* Set by the submitter; read-only while the job is the batcher's. src
     * and opts must stay valid until done. */
    int cached;          /* finished already (a cache hit, its res set): not
                            queued by srv_batcher_submit, nor finished by it */
    int urgent;          /* inflight: step its rows more often, first in the
                            decode's row order (srv_inflight_urgent_rows) */
    const int32_t *src;
    int n_src;
    const td_decode_opts *opts;
    /* The outcome, written by the batcher before done and the submitter's
     * after it. */
    srv_job_status status;
    td_result res;        /* SRV_JOB_DONE: the submitter frees it (td_result_free) */
    int engine_rc;        /* SRV_JOB_FAILED: td_translate_batch's code (TD_EDEVICE, ...) */
    char engine_err[256]; /* SRV_JOB_FAILED: the engine's message */
    /* The batcher's own, from submit until done. */
    srv_completion completion;
    double deadline;  /* srv_now() seconds */
    double t_enqueue; /* srv_now() seconds */
    uint64_t vt;      /* its place in the fair order (under the batcher's lock) */
    srv_job *next;    /* queue link, under the batcher's lock */
};

/* Fault injection, for tests only: every batch after the warm-up fails as
 * if the engine had returned this error, without calling the engine. */
typedef enum srv_fault {
    SRV_FAULT_NONE = 0,
    SRV_FAULT_ENGINE, /* TD_EINVAL: only that batch fails */
    SRV_FAULT_DEVICE, /* TD_EDEVICE */
} srv_fault;

/* How a worker runs the engine (docs/api.md, --scheduler). */
typedef enum srv_scheduler {
    SRV_SCHED_INFLIGHT = 0, /* one running decode per worker: texts join and
                               leave it between decoding steps (td_run_*) */
    SRV_SCHED_BATCH,        /* a batch runs to its end before the next forms */
} srv_scheduler;

/* Whose share of a model's queue a request's texts take (srv_completion's
 * owner, set by the HTTP layer). */
typedef enum srv_fair_share {
    SRV_SHARE_REQUEST = 0, /* each request its own share */
    SRV_SHARE_CLIENT,      /* a client address's requests one share together */
} srv_fair_share;

/* --scheduler inflight: when a running decode takes queued texts in.
 * Each admission runs the encoder once over the admitted texts, and on a
 * CPU an encoder call costs about as much again for its fixed part
 * (reading every encoder weight) as for a typical text's rows. Taking one
 * or two texts at every step, as a deep queue would, pays that fixed part
 * for each; waiting until a quarter of the rows is free takes them in
 * groups of several. Waiting never holds a text back for long: at most
 * SRV_ADMIT_MAX_DEFER steps, and not at all when every queued text fits
 * (a shallow queue: nothing to group, latency first) or the decode is idle.
 * fit: queued texts (oldest first) that fit the free rows and slots now;
 * queued: texts in the queue; free_rows, rows: the worker's free and total
 * decoder rows; deferred: steps the admission was put off so far. */
#define SRV_ADMIT_ROWS_DIVISOR 4
#define SRV_ADMIT_MAX_DEFER 4
static inline int srv_inflight_admit_now(int fit, long queued, int free_rows, int rows,
                                         int deferred)
{
    if (fit <= 0)
        return 0;
    return fit >= queued || free_rows * SRV_ADMIT_ROWS_DIVISOR >= rows ||
           deferred >= SRV_ADMIT_MAX_DEFER;
}

/* --scheduler inflight, --short-steps N: the rows of the next decoding
 * step. On a CPU a step costs about in proportion to its rows, so a short
 * text decoding next to long ones pays for their rows at every step. Once a
 * running decode holds SRV_SHORT_MIN_ROWS rows or more, each step of every
 * row is followed by N steps of the texts with the shortest sources only,
 * as many as fill a quarter of the rows (td_run_step_shortest): they
 * advance N + 1 tokens while the others advance one, for about 1 + N / 4
 * the time of a step of all rows. Results do not change (each row computes
 * what it computes alone). live_rows: the decode's rows now; *phase: the
 * worker's position in the cycle (0 before a step of every row). Returns
 * max_rows for td_run_step_shortest (INT_MAX: every row). */
#define SRV_SHORT_ROWS_DIVISOR 4
#define SRV_SHORT_MIN_ROWS 16
static inline int srv_inflight_step_rows(int live_rows, int short_steps, int *phase)
{
    if (short_steps <= 0 || live_rows < SRV_SHORT_MIN_ROWS) {
        *phase = 0;
        return INT_MAX;
    }
    int p = *phase;
    *phase = p >= short_steps ? 0 : p + 1;
    return p == 0 ? INT_MAX : live_rows / SRV_SHORT_ROWS_DIVISOR;
}

/* --scheduler inflight, --urgent-steps N: the rows of the next decoding
 * step when urgent texts run (a streamed answer's first sentences, marked
 * by the submitter: the client waits for them to show anything). Each step
 * of every row is followed by N steps of the urgent texts' rows only
 * (td_run_urge puts them first in the row order), so an urgent text
 * advances N + 1 tokens while the others advance one; on a CPU a step of a
 * few rows costs a fraction of a step of all, so the first sentence of a
 * long streamed text arrives several times sooner and the whole answer a
 * little later. Results do not change. urgent_rows: td_run_urgent_rows;
 * *phase: the worker's position in the cycle. Returns max_rows for
 * td_run_step_shortest, or 0 when this step is not an urgent one. */
#define SRV_URGENT_MAX_DEFER 32 /* steps other admissions wait for urgent texts */
static inline int srv_inflight_urgent_rows(int urgent_rows, int urgent_steps, int *phase)
{
    if (urgent_steps <= 0 || urgent_rows <= 0) {
        *phase = 0;
        return 0;
    }
    int p = *phase;
    *phase = p >= urgent_steps ? 0 : p + 1;
    return p == 0 ? 0 : urgent_rows;
}

typedef struct srv_batcher_opts {
    td_model *model;          /* loaded; outlives the batcher */
    td_decode_opts warm_up;   /* the model's defaults (the warm-up runs them greedy, <= 4 tokens) */
    int32_t warm_up_token;    /* the source of the warm-up batch: two of it (</s>) */
    struct srv_pool *pool;    /* the seats that serve it, shared with other models
                                 (pool.h); NULL: a pool of its own of `workers` seats */
    int workers;              /* seats it takes at once (its own pool's seats) */
    int threads;              /* engine CPU threads per worker; 0 = all cores */
    int max_batch_size;       /* sentences per batch; sizes the workers */
    int max_batch_tokens;     /* padded source tokens per batch */
    int batch_delay_ms;       /* longest wait of the oldest job for company */
    int max_queue;            /* jobs waiting before SRV_SUBMIT_FULL */
    int max_src_len, max_length, max_beam; /* size the workers (td_worker_opts) */
    srv_scheduler scheduler;
    int worker_nice;          /* its own pool's seats' nice value (0: as created) */
    int short_steps;          /* inflight: steps of the shortest texts only after each
                                 step of every row (srv_inflight_step_rows) */
    int urgent_steps;         /* inflight: steps of the urgent texts only after each
                                 step of every row (srv_inflight_urgent_rows) */
    int grow;                 /* workers' memory on demand (td_worker_opts.grow) */
    /* its own pool: the seats' arenas moved by delta bytes (pool.h) */
    void (*on_scratch)(long delta, void *ud);
    void *scratch_ud;
    int scratch_idle_s;       /* grow: idle seconds before a worker gives back what it
                                 grew (td_worker_trim; 0: never) */
    /* called (from a submitting thread, no lock held) by the first submit
     * to a parked batcher: its owner should load the model's weights
     * again and srv_batcher_unpark; NULL: nobody parks it */
    void (*on_wake)(void *ud);
    void *wake_ud;
    srv_fault fault;          /* SRV_FAULT_NONE outside tests */
    int test_step_delay_ms;   /* tests only: a worker sleeps this long after each
                                 decoding step (inflight) or batch (batch) */
    /* tests only (NULL outside them): called by an inflight worker, under
     * the batcher's lock, at each admission decision while its decode runs:
     * the arguments of srv_inflight_admit_now but the count of deferrals,
     * how many texts it took (0 or fit) and which (taken[0..admitted)). */
    void (*test_on_admit)(void *ud, int fit, long queued, int free_rows, int rows,
                          int admitted, srv_job *const *taken);
    void *test_ud;
} srv_batcher_opts;

typedef struct srv_batcher srv_batcher;

/* Runs a warm-up batch on a worker of the model (sized as a seat's will be
 * bound: srv_batcher_worker_bytes) and attaches the queue to o->pool, or to
 * a pool of its own of o->workers seats. metrics may be NULL. On failure
 * *out is NULL and err says why. */
int srv_batcher_init(srv_batcher **out, const srv_batcher_opts *o, srv_metrics *metrics,
                     char *err, size_t errlen);

/* Bytes of one worker's arena at its maxima (td_worker_max_bytes: what
 * --max-memory counts for it). */
size_t srv_batcher_worker_bytes(const srv_batcher *b);
/* Bytes the workers' arenas of its own pool hold now, all together (they
 * grow and shrink with grow); 0 on a shared pool (srv_pool_scratch_bytes). */
size_t srv_batcher_scratch_bytes(const srv_batcher *b);

/* An idle model put away (--model-idle-unload), by the thread that owns
 * the model's lifetime (the model manager). _park: when nothing is queued
 * or running and no seat serves it, no seat reads the model any more (the
 * caller may then free the weights: td_model_unload); returns 1, or 0 when
 * the batcher is busy (nothing changed). Submits go on queueing, unserved;
 * the first calls on_wake. _unpark (the weights loaded again first): the
 * queue is served again. 0, or -1 with err (still parked). _idle_s: seconds since the last submit or work when
 * nothing is queued or running, else -1 (also while parked). */
int srv_batcher_park(srv_batcher *b);
int srv_batcher_unpark(srv_batcher *b, char *err, size_t errlen);
/* Finishes every queued job as SRV_JOB_FAILED with engine_rc and msg (a
 * parked model that cannot be loaded again). */
void srv_batcher_fail_queued(srv_batcher *b, int engine_rc, const char *msg);
/* A parked batcher whose model was replaced by another generation (files
 * changed while it was put away, or a reload): its queued jobs finish as
 * SRV_JOB_RETIRED now and every later submit is SRV_SUBMIT_RETIRED, so no
 * request waits on a queue nobody will wake. Returns 0, or -1 when the
 * batcher is not parked (nothing changed: a serving queue drains itself). */
int srv_batcher_retire(srv_batcher *b);
double srv_batcher_idle_s(srv_batcher *b);

typedef enum srv_submit_rc {
    SRV_SUBMIT_OK = 0,
    SRV_SUBMIT_FULL,     /* the queue holds max_queue jobs */
    SRV_SUBMIT_DRAINING, /* srv_batcher_drain was called */
    SRV_SUBMIT_RETIRED,  /* srv_batcher_retire was called */
} srv_submit_rc;

/* Queues the n jobs of jobs[] atomically (all or none), each with the
 * deadline and the completion c (copied). On SRV_SUBMIT_OK every job will
 * be finished through c->done, possibly before this returns; on anything
 * else nothing was queued and done will not be called.
 *
 * Fairness: the queue is kept in virtual-time order (start-time fair
 * queueing, one unit per job): a submit's jobs take the places after the
 * last job taken from the queue (or after its owner's last job still
 * ahead, c->owner), one per unit, and go after the jobs already queued at
 * the same places. A short request that comes while a long one (or many
 * of one owner) is queued is taken in within about one job of it, not
 * after all of them; jobs of one submit keep their order. */
srv_submit_rc srv_batcher_submit(srv_batcher *b, srv_job *jobs, int n, double deadline,
                                 const srv_completion *c);

/* srv_batcher_submit without the max_queue bound: the next part of a long
 * submit fed as its earlier jobs finish (a file's sentences, a few queued
 * at a time: translate.c), which took its place in the queue when it was
 * admitted. May be called from a done callback. */
srv_submit_rc srv_batcher_feed(srv_batcher *b, srv_job *jobs, int n, double deadline,
                               const srv_completion *c);

/* From now on every batch fails at once with engine_rc and msg without
 * calling the engine (the engine is presumed unusable); its jobs still
 * finish through done. The first call wins; lock-free, so a done callback
 * may call it. */
void srv_batcher_halt(srv_batcher *b, int engine_rc, const char *msg);

/* Stops taking jobs, waits until deadline_s (srv_now() seconds) for queued
 * and running jobs, then finishes what is still queued as
 * SRV_JOB_SHUTDOWN and (--scheduler inflight) has each worker cancel its
 * running sentences at the next step boundary, finished as
 * SRV_JOB_SHUTDOWN too (a batch of --scheduler batch runs to its end);
 * returns when no batch runs any more. */
void srv_batcher_drain(srv_batcher *b, double deadline_s);

long srv_batcher_queue_depth(srv_batcher *b);

/* Stops and joins the threads; jobs still queued (none after a drain) are
 * finished as SRV_JOB_SHUTDOWN. Accepts NULL and a half-built batcher. */
void srv_batcher_free(srv_batcher *b);

#endif /* SRV_BATCHER_H */
