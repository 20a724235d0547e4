/*
 * docpool.c - the document threads and their bounded queue (docpool.h).
 *
 * One lock guards the queue (continuations at its head, new documents at
 * its tail), its counts and the stop flag; a task runs without it. The
 * gauges move with the counts.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "docpool.h"

struct srv_docpool {
    srv_docpool_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a task queued, or stop */
    pthread_cond_t idle_cv; /* a task finished */
    srv_doc_task *head, *tail;
    int queued;             /* tasks in the list */
    int fresh;              /* of which SRV_DOC_FIRST (the bound counts these) */
    int running;
    int stop;
    int draining;           /* a drain began: the test gate is open */
    pthread_t *th;
    int n_th;
};

/* Under mu: the first task of the list, taken. */
static srv_doc_task *take(srv_docpool *p, int *fresh)
{
    srv_doc_task *t = p->head;
    p->head = t->next;
    if (!p->head)
        p->tail = NULL;
    t->next = NULL;
    /* continuations are at the head, new documents behind them: the head
     * is a new one when no continuation is left in the list */
    *fresh = p->queued == p->fresh;
    p->queued--;
    if (*fresh)
        p->fresh--;
    srv_metrics_documents(p->o.metrics, -1, 0);
    return t;
}

/* FOR TESTS ONLY: waits until the gate file exists or the pool drains or
 * stops. */
static void wait_gate(srv_docpool *p)
{
    while (p->o.test_gate && access(p->o.test_gate, F_OK) != 0) {
        pthread_mutex_lock(&p->mu);
        int stop = p->stop || p->draining;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            return;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* A task a thread took: why it is not run, or SRV_DOC_RUN. */
static srv_doc_outcome outcome_of(const srv_doc_task *t)
{
    if (t->deadline > 0 && srv_now() > t->deadline)
        return SRV_DOC_TIMEOUT;
    if (t->gone && t->gone(t->ud))
        return SRV_DOC_GONE;
    return SRV_DOC_RUN;
}

static void *thread_main(void *arg)
{
    srv_docpool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->head)
            break; /* stopped, nothing left */
        int fresh;
        srv_doc_task *t = take(p, &fresh);
        p->running++;
        srv_metrics_documents(p->o.metrics, 0, 1);
        int stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        wait_gate(p);
        t->run(stop ? SRV_DOC_SHUTDOWN : outcome_of(t), t->ud); /* t is gone after it */
        pthread_mutex_lock(&p->mu);
        p->running--;
        srv_metrics_documents(p->o.metrics, 0, -1);
        pthread_cond_broadcast(&p->idle_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

srv_docpool *srv_docpool_new(const srv_docpool_opts *o, char *err, size_t errlen)
{
    srv_docpool *p = calloc(1, sizeof *p);
    int n = o->threads > 0 ? o->threads : 1;
    pthread_t *th = calloc((size_t)n, sizeof *th);
    if (!p || !th) {
        free(p);
        free(th);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->o = *o;
    if (p->o.max_queue < 1)
        p->o.max_queue = 1;
    p->th = th;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_cond_init(&p->idle_cv, NULL);
    for (; p->n_th < n; p->n_th++)
        if (pthread_create(&p->th[p->n_th], NULL, thread_main, p) != 0) {
            snprintf(err, errlen, "cannot start document thread %d of %d", p->n_th + 1, n);
            srv_docpool_free(p);
            return NULL;
        }
    return p;
}

srv_doc_submit_rc srv_docpool_submit(srv_docpool *p, srv_doc_task *t, int kind)
{
    pthread_mutex_lock(&p->mu);
    srv_doc_submit_rc rc = SRV_DOC_QUEUED;
    if (p->stop) {
        rc = SRV_DOC_STOPPED;
    } else if (kind == SRV_DOC_FIRST && p->fresh >= p->o.max_queue) {
        rc = SRV_DOC_FULL;
    } else {
        t->next = NULL;
        if (kind == SRV_DOC_FIRST) { /* behind everything */
            if (p->tail)
                p->tail->next = t;
            else
                p->head = t;
            p->tail = t;
            p->fresh++;
        } else { /* behind the other continuations, ahead of new documents */
            srv_doc_task **at = &p->head;
            for (int k = p->queued - p->fresh; k > 0; k--)
                at = &(*at)->next;
            t->next = *at;
            *at = t;
            if (!t->next)
                p->tail = t;
        }
        p->queued++;
        srv_metrics_documents(p->o.metrics, 1, 0);
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    if (rc == SRV_DOC_FULL)
        srv_metrics_documents_refused(p->o.metrics);
    return rc;
}

/* Under mu: the waiting tasks finished SRV_DOC_SHUTDOWN (outside the lock). */
static void drop_waiting(srv_docpool *p)
{
    while (p->head) {
        int fresh;
        srv_doc_task *t = take(p, &fresh);
        pthread_mutex_unlock(&p->mu);
        t->run(SRV_DOC_SHUTDOWN, t->ud);
        pthread_mutex_lock(&p->mu);
    }
}

void srv_docpool_drain(srv_docpool *p, double deadline_s)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->draining = 1;
    while (p->head || p->running > 0) {
        if (srv_now() >= deadline_s && p->head) {
            drop_waiting(p);
            continue;
        }
        struct timespec ts = srv_realtime_in(0.05);
        pthread_cond_timedwait(&p->idle_cv, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
}

void srv_docpool_free(srv_docpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    drop_waiting(p);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_th; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->idle_cv);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p);
}
