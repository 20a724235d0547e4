/*
 * docpool.h - the document threads: a few threads and a bounded queue for
 * the per-document work that is not the model's (an uploaded file parsed
 * into its texts, the translated document rendered back: libxml2, libzip,
 * cmark), so that a costly document never runs on an HTTP thread.
 *
 * A task is the caller's (no allocation here: it lives in the request's
 * memory until its run callback); it is run once, on a document thread,
 * with SRV_DOC_RUN, or told why it was not run: its deadline passed or its
 * client left while it waited (checked when a thread takes it), or the
 * pool stopped first (srv_docpool_drain past its deadline,
 * srv_docpool_free). The run callback is the completion: it releases
 * whatever the task holds (the call's hold) and touches the task no more.
 *
 * Bounds: --document-threads threads; at most --document-queue tasks wait
 * for one (SRV_DOC_FULL past it, at once: a submitter never waits). A
 * continuation (SRV_DOC_NEXT: the render of a document whose parse was
 * admitted) is taken before the waiting parses and never refused for the
 * bound: each admitted document has one at a time.
 *
 * Metrics: transformerd_documents_queued and _running (gauges),
 * transformerd_documents_refused_total.
 *
 * Threads: submit, drain and the gauges from any thread; free from the
 * thread that made the pool, once nothing submits any more.
 */
#ifndef SRV_DOCPOOL_H
#define SRV_DOCPOOL_H

#include <stddef.h>

#include "metrics.h"

typedef enum srv_doc_outcome {
    SRV_DOC_RUN = 0,  /* a thread runs it: do the work */
    SRV_DOC_TIMEOUT,  /* its deadline passed while it waited */
    SRV_DOC_GONE,     /* its client left while it waited */
    SRV_DOC_SHUTDOWN, /* the pool stopped before it ran */
} srv_doc_outcome;

typedef struct srv_doc_task {
    void (*run)(srv_doc_outcome why, void *ud); /* exactly once */
    int (*gone)(void *ud);                      /* its client left (NULL: never) */
    void *ud;
    double deadline;                            /* srv_now() seconds; 0: none */
    struct srv_doc_task *next;                  /* the pool's */
} srv_doc_task;

typedef enum srv_doc_submit_rc {
    SRV_DOC_QUEUED = 0,
    SRV_DOC_FULL,    /* --document-queue tasks wait already: retry later */
    SRV_DOC_STOPPED, /* the pool is being freed */
} srv_doc_submit_rc;

#define SRV_DOC_FIRST 0 /* a new document: counts against the bound */
#define SRV_DOC_NEXT 1  /* the continuation of an admitted one */

typedef struct srv_docpool_opts {
    int threads;           /* >= 1 */
    int max_queue;         /* tasks waiting for a thread, >= 1 */
    srv_metrics *metrics;  /* NULL: none */
    /* FOR TESTS ONLY (--test-document-gate): a thread that took a task waits
     * until this file exists before it looks at the task; NULL: none */
    const char *test_gate;
} srv_docpool_opts;

typedef struct srv_docpool srv_docpool;

/* Starts the threads. NULL with the reason in err. */
srv_docpool *srv_docpool_new(const srv_docpool_opts *o, char *err, size_t errlen);
/* Queues t (kind SRV_DOC_FIRST or SRV_DOC_NEXT); when refused, t's run is
 * never called. */
srv_doc_submit_rc srv_docpool_submit(srv_docpool *p, srv_doc_task *t, int kind);
/* Waits until no task waits or runs; at deadline_s the waiting ones are
 * finished SRV_DOC_SHUTDOWN (a running one is waited for). Tasks submitted
 * meanwhile are still taken. */
void srv_docpool_drain(srv_docpool *p, double deadline_s);
/* Finishes the waiting tasks SRV_DOC_SHUTDOWN, waits for the running ones,
 * joins the threads. Accepts NULL. */
void srv_docpool_free(srv_docpool *p);

#endif /* SRV_DOCPOOL_H */
