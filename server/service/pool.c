/*
 * pool.c - the shared engine workers (pool.h): seats, their threads and the
 * round robin over the clients that want them.
 *
 * Locks: p->mu guards the client list, each client's serving count and
 * attached flag, the round-robin position, the free seats and stop. A
 * seat's worker and arrays are its thread's; the arena total is atomic.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "pool.h"

struct srv_pool {
    srv_pool_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* work may be there, or stop */
    pthread_cond_t done_cv; /* a seat finished serving a client (detach waits) */
    srv_pool_client *clients;
    srv_pool_client *rr;    /* the client after which the next pick starts (NULL: the first) */
    int free_seats;
    int stop;
    srv_seat *seats;
    _Atomic size_t scratch;
};

/* Under mu: the next client that wants a seat, from the one after rr:
 * first one no seat serves, else one with room for another seat. */
static srv_pool_client *pick(srv_pool *p)
{
    if (!p->clients)
        return NULL;
    srv_pool_client *start = p->rr && p->rr->next ? p->rr->next : p->clients;
    for (int pass = 0; pass < 2; pass++) {
        srv_pool_client *c = start;
        do {
            int room = pass == 0 ? c->serving == 0 : c->serving < c->max_seats;
            if (room && c->wants(c->ud)) {
                p->rr = c;
                return c;
            }
            c = c->next ? c->next : p->clients;
        } while (c != start);
    }
    return NULL;
}

void srv_pool_note_arena(srv_seat *s)
{
    size_t now = s->w ? td_worker_arena_bytes(s->w) : 0;
    if (now == s->arena)
        return;
    long delta = (long)now - (long)s->arena;
    atomic_fetch_add_explicit(&s->pool->scratch, (size_t)delta, memory_order_relaxed);
    if (s->pool->o.on_scratch)
        s->pool->o.on_scratch(delta, s->pool->o.scratch_ud);
    s->arena = now;
}

/* Under mu, nothing to serve: waits for work; a seat whose worker grew
 * gives the growth back after scratch_idle_s (outside the lock). */
static void idle(srv_pool *p, srv_seat *s, double *idle_since)
{
    if (p->o.scratch_idle_s <= 0 || !s->w || s->arena <= s->arena_first) {
        pthread_cond_wait(&p->cv, &p->mu);
        return;
    }
    double now = srv_now();
    if (*idle_since == 0)
        *idle_since = now;
    double due = *idle_since + p->o.scratch_idle_s;
    if (now < due) {
        struct timespec ts = srv_realtime_in(due - now > 0.2 ? 0.2 : due - now);
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        return;
    }
    p->free_seats--; /* trimming: not free for a client meanwhile */
    pthread_mutex_unlock(&p->mu);
    char err[256];
    if (td_worker_trim(s->w, err, sizeof err) < 0) {
        fprintf(stderr, "transformerd: a worker could not shrink its memory: %s\n", err);
        td_worker_free(s->w); /* unusable: the next client makes another */
        s->w = NULL;
    }
    /* what the worker gave back, back to the system: glibc keeps freed
     * blocks below its (raised) mmap threshold in its arenas (a 100 KB
     * document's growth left ~60 MiB of free heap in the RSS) */
    malloc_trim(0);
    srv_pool_note_arena(s);
    pthread_mutex_lock(&p->mu);
    p->free_seats++;
    *idle_since = 0;
}

static void *seat_main(void *arg)
{
    srv_seat *s = arg;
    srv_pool *p = s->pool;
#ifdef __linux__
    if (p->o.nice > 0) { /* Linux gives a nice value to the calling thread alone */
        /* above the process's own (a daemon started under nice keeps its
         * workers below its HTTP threads); the kernel caps it at 19 */
        errno = 0;
        const int base = getpriority(PRIO_PROCESS, 0);
        (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid),
                          (errno ? 0 : base) + p->o.nice);
    }
#endif
    double idle_since = 0;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        srv_pool_client *c = pick(p);
        if (!c && !s->tried && p->clients)
            c = p->clients; /* no worker yet: made now for the first model, before work */
        if (!c) {
            idle(p, s, &idle_since);
            continue;
        }
        c->serving++;
        p->free_seats--;
        pthread_mutex_unlock(&p->mu);
        c->serve(c->ud, s);
        pthread_mutex_lock(&p->mu);
        c->serving--;
        p->free_seats++;
        s->tried = 1;
        idle_since = 0;
        pthread_cond_broadcast(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int srv_pool_init(srv_pool **out, const srv_pool_opts *o, char *err, size_t errlen)
{
    *out = NULL;
    srv_pool *p = calloc(1, sizeof *p);
    int n = o->seats > 0 ? o->seats : 1;
    size_t B = (size_t)(o->max_batch > 0 ? o->max_batch : 1);
    if (!p || !(p->seats = calloc((size_t)n, sizeof *p->seats))) {
        free(p);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    p->o = *o;
    p->o.seats = n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    for (int i = 0; i < n; i++) {
        srv_seat *s = &p->seats[i];
        s->pool = p;
        s->index = i;
        s->batch = calloc(B, sizeof *s->batch);
        s->src = calloc(B, sizeof *s->src);
        s->len = calloc(B, sizeof *s->len);
        s->res = calloc(B, sizeof *s->res);
        s->opts = calloc(B, sizeof *s->opts);
        s->seq = calloc(B, sizeof *s->seq);
        s->live = calloc(B, sizeof *s->live);
        s->live_seq = calloc(B, sizeof *s->live_seq);
        if (!s->batch || !s->src || !s->len || !s->res || !s->opts || !s->seq || !s->live ||
            !s->live_seq) {
            snprintf(err, errlen, "out of memory");
            srv_pool_free(p);
            return -1;
        }
    }
    p->free_seats = n;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&p->seats[i].th, NULL, seat_main, &p->seats[i]) != 0) {
            snprintf(err, errlen, "cannot start a worker thread");
            srv_pool_free(p);
            return -1;
        }
        p->seats[i].started = 1;
    }
    *out = p;
    return 0;
}

void srv_pool_free(srv_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->o.seats; i++) {
        srv_seat *s = &p->seats[i];
        if (s->started)
            pthread_join(s->th, NULL);
        td_worker_free(s->w);
        s->w = NULL;
        srv_pool_note_arena(s);
        free(s->batch);
        free(s->src);
        free(s->len);
        free(s->res);
        free((void *)s->opts);
        free(s->seq);
        free(s->live);
        free(s->live_seq);
    }
    free(p->seats);
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->done_cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Under mu: a seat has not yet made its worker (or tried). */
static int unprepared(const srv_pool *p)
{
    for (int i = 0; i < p->o.seats; i++)
        if (!p->seats[i].tried)
            return 1;
    return 0;
}

void srv_pool_attach(srv_pool *p, srv_pool_client *c)
{
    pthread_mutex_lock(&p->mu);
    c->serving = 0;
    c->attached = 1;
    c->next = p->clients;
    p->clients = c;
    pthread_cond_broadcast(&p->cv);
    /* the first client: every seat makes its worker for it now, so that
     * the memory is there (and written) before the first request */
    while (unprepared(p) && !p->stop)
        pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void srv_pool_detach(srv_pool *p, srv_pool_client *c)
{
    pthread_mutex_lock(&p->mu);
    for (srv_pool_client **q = &p->clients; *q; q = &(*q)->next)
        if (*q == c) {
            *q = c->next;
            break;
        }
    if (p->rr == c)
        p->rr = NULL;
    c->attached = 0;
    while (c->serving > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void srv_pool_kick(srv_pool *p)
{
    pthread_mutex_lock(&p->mu);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

int srv_pool_contended(srv_pool *p, const srv_pool_client *c)
{
    int waits = 0;
    pthread_mutex_lock(&p->mu);
    for (srv_pool_client *d = p->free_seats == 0 ? p->clients : NULL; d && !waits; d = d->next)
        waits = d != c && d->serving == 0 && d->wants(d->ud);
    pthread_mutex_unlock(&p->mu);
    return waits;
}

size_t srv_pool_scratch_bytes(const srv_pool *p)
{
    return atomic_load_explicit(&p->scratch, memory_order_relaxed);
}

int srv_pool_seats(const srv_pool *p)
{
    return p->o.seats;
}
