/*
 * pool.h - the engine workers of the daemon, shared by every model of a
 * device: a fixed number of seats, each a thread with one td_worker, and
 * the clients (each model's batcher, batcher.h) that lend them work.
 *
 * A free seat takes the next client that wants one, round robin from the
 * client after the last one taken (so models take turns), and preferring a
 * client no seat serves yet; it serves it (the client's serve callback:
 * binds the seat's worker to the client's model, td_worker_bind, and runs
 * its batches) until the client has nothing more for it, or yields once
 * another client waits and no seat is free (srv_pool_contended), then
 * takes the next. A client
 * never has more seats at once than its max_seats. Memory: a seat's worker
 * is bound to one model at a time; models of one shape share its buffers
 * as they grew, another shape rebuilds them. A seat that idles
 * scratch_idle_s gives its growth back (td_worker_trim).
 *
 * Threads: _attach, _detach, _kick and _contended from any thread (detach
 * not from a seat); the serve callback runs on a seat's thread without the
 * pool's lock; wants runs under it (quick, lock-free reads).
 */
#ifndef SRV_POOL_H
#define SRV_POOL_H

#include <pthread.h>
#include <stddef.h>

#include "translator.h"

struct srv_job;
typedef struct srv_pool srv_pool;

/* One seat: its thread, its worker and the arrays of a batch (sized
 * max_batch), used by the client that serves on it (that thread only). */
typedef struct srv_seat {
    srv_pool *pool;
    int index;
    td_worker *w;              /* NULL until the first client binds it */
    struct srv_job **batch;
    const int32_t **src;
    int *len;
    td_result *res;
    const td_decode_opts **opts;
    td_seq *seq;
    struct srv_job **live;
    td_seq *live_seq;
    size_t arena;              /* td_worker_arena_bytes as last noted */
    size_t arena_first;        /* after the first bind: what a trim goes back to */
    int tried;                 /* under the pool's lock: it made (or tried to make)
                                  its first worker */
    pthread_t th;
    int started;
} srv_seat;

/* A client: a model's batcher. The pool owns the fields after ud while the
 * client is attached. */
typedef struct srv_pool_client {
    int (*wants)(void *ud);                  /* it has work for a seat now */
    void (*serve)(void *ud, srv_seat *seat); /* serves on seat until done or contended */
    void *ud;
    int max_seats;                           /* seats at once, at most */
    int serving;                             /* seats serving it now */
    int attached;
    struct srv_pool_client *next;
} srv_pool_client;

typedef struct srv_pool_opts {
    int seats;            /* threads, one td_worker each */
    int max_batch;        /* texts a seat takes at once (sizes its arrays) */
    int nice;             /* the seats' nice value (0: as created) */
    int scratch_idle_s;   /* idle seconds before a seat trims its worker (0: never) */
    /* the seats' arenas moved by delta bytes (from a seat's thread); NULL: none */
    void (*on_scratch)(long delta, void *ud);
    void *scratch_ud;
} srv_pool_opts;

int srv_pool_init(srv_pool **out, const srv_pool_opts *o, char *err, size_t errlen);
/* Stops and joins the seats, frees their workers; every client detached
 * first. Accepts NULL. */
void srv_pool_free(srv_pool *p);

/* Adds c; the first client's model gets a worker on every seat before
 * this returns (the seats' memory made, and written, before any request). */
void srv_pool_attach(srv_pool *p, srv_pool_client *c);
/* Takes c off the pool and waits until no seat serves it. */
void srv_pool_detach(srv_pool *p, srv_pool_client *c);
/* A client may want a seat now (new work): wakes a free seat. */
void srv_pool_kick(srv_pool *p);
/* Another attached client that no seat serves wants one and none is
 * free: c's seat should stop taking work in (once it has served a slice). */
int srv_pool_contended(srv_pool *p, const srv_pool_client *c);

/* The seats' worker memory now (their arenas), and the seats. */
size_t srv_pool_scratch_bytes(const srv_pool *p);
int srv_pool_seats(const srv_pool *p);
/* The seat's arena as its worker holds it now (after a bind, a growth, a
 * trim; from the seat's thread): the pool's total and on_scratch follow. */
void srv_pool_note_arena(srv_seat *s);

#endif /* SRV_POOL_H */
