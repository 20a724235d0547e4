/*
 * batcher_impl.h - the inside of a batcher (batcher.h), shared by
 * batcher.c (the queue's life: submit, drain, park, init and free) and
 * sched.c (the scheduling: a seat of the pool serving the queue).
 *
 * Locks: b->mu guards the queue, draining, stop, cut, parked and the
 * counts of seats in and busy; the engine runs without it. The pool's lock
 * may be taken under b->mu (srv_pool_contended), never the other way.
 */
#ifndef SRV_BATCHER_IMPL_H
#define SRV_BATCHER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "batcher.h"
#include "pool.h"

/* Owners the fair order tells apart at once (a direct-mapped table: two
 * owners in one entry share a share until one's jobs are all taken). */
#define SRV_FAIR_OWNERS 64

/* How long a seat serves one model before it takes no more of its texts
 * in while another model waits for a seat (srv_pool_contended): its
 * running sentences then finish and the seat goes to the other model. */
#define SRV_POOL_SLICE_S 0.2

typedef struct fair_owner {
    uint64_t owner, last_vt; /* an owner and its last queued job's place */
} fair_owner;

/* A candidate of a batch (sched.c's take_batch). */
typedef struct cand_ord {
    srv_job *j;
    int seq; /* FIFO position */
} cand_ord;

/* A seat serving the batcher: from the seat's thread, between the bind and
 * the return to the pool (sched.c). */
typedef struct srv_worker {
    srv_batcher *b;
    srv_seat *seat;
    td_worker *w;          /* the seat's, bound to b's model */
    /* the seat's arrays, sized max_batch_size */
    srv_job **batch;
    const int32_t **src;
    int *len;
    td_result *res;
    const td_decode_opts **opts;
    td_seq *seq;
    srv_job **live;        /* the running decode's jobs (--scheduler inflight) */
    td_seq *live_seq;
    int n_live;
    int busy;              /* under b->mu: running a batch, finishing jobs or
                              holding running sentences (counted in b->n_busy) */
    long rows;             /* rows reported to the running-rows gauge */
    int rows_total;        /* the worker's decoder rows (max_batch x max_beam) */
    int deferred;          /* steps the admission of fitting texts was put off
                              (srv_inflight_admit_now) */
    int short_phase;       /* srv_inflight_step_rows's position in its cycle */
    int urgent_phase;      /* srv_inflight_urgent_rows's */
    int urgent_deferred;   /* steps other admissions were put off for urgent
                              texts (urgent_admission) */
    double since;          /* srv_now() when it began serving b */
    int yield;             /* another model waits: take no more texts in */
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
    atomic_long pending;     /* depth as the pool reads it (written under mu) */
    uint64_t vt_taken;       /* under mu: the virtual time of the last job
                                taken from the head */
    fair_owner owners[SRV_FAIR_OWNERS]; /* under mu, indexed by owner % size */
    int draining, stop;      /* under mu */
    int cut;                 /* under mu: the drain deadline passed; running
                                sentences are cancelled (inflight) */
    int n_in;                /* under mu: seats serving it now */
    int n_busy;              /* under mu: of them, busy (srv_worker.busy) */
    srv_pool *pool;          /* the seats it is served by */
    int own_pool;            /* made for it (srv_batcher_opts.pool NULL) */
    srv_pool_client client;  /* its place in the pool */
    td_worker_opts wo;       /* what a seat's worker is bound with */
    struct cand_ord *cand;   /* candidate scratch: max 8*max_batch_size, under mu */
    int cand_cap;
    size_t worker_bytes;     /* one worker's arena at its maxima, set at init */
    srv_fault fault;         /* tests only */
    int short_steps;         /* srv_batcher_opts.short_steps */
    srv_batcher_opts o;
    int parked;              /* under mu: put away (srv_batcher_park); submits queue */
    int wake_sent;           /* under mu: on_wake called since the park */
    int retired;             /* under mu: srv_batcher_retire (parked for good) */
    double last_active;      /* under mu: srv_now() of the last submit or work */
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

/* sched.c: the pool's callbacks (srv_pool_client) for a batcher. */
int srv_sched_wants(void *b);
void srv_sched_serve(void *b, srv_seat *seat);

/* sched.c: finishing jobs outside b->mu. A job: its status, then its
 * submitter's done. A chain unlinked from the queue (linked by next), with
 * the drop recorded. Jobs failed with the engine's code and message. */
void srv_sched_finish_job(srv_job *j, srv_job_status st);
void srv_sched_finish_chain(srv_batcher *b, srv_job *j, srv_job_status st, srv_drop_reason why);
void srv_sched_fail_jobs(srv_job **jobs, int k, int rc, const char *err);

#endif /* SRV_BATCHER_IMPL_H */
