/*
 * call.c - a call's arena, its answer and its holds (call.h).
 *
 * The arena is a list of blocks, each at least SRV_ARENA_BLOCK bytes:
 * allocations bump through the newest block, one that does not fit starts
 * a block of its own size (or the default, whichever is larger). Nothing is
 * freed before the call ends; then every block at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "call.h"

#define SRV_ARENA_BLOCK 8192
#define SRV_ARENA_ALIGN 16

struct srv_arena_block {
    srv_arena_block *next;
    size_t used, cap;
    _Alignas(SRV_ARENA_ALIGN) unsigned char data[];
};

void *srv_call_alloc(srv_call *c, size_t n)
{
    size_t need = (n + SRV_ARENA_ALIGN - 1) / SRV_ARENA_ALIGN * SRV_ARENA_ALIGN;
    if (need < n)
        return NULL;
    srv_arena_block *b = c->arena;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > SRV_ARENA_BLOCK ? need : SRV_ARENA_BLOCK;
        if (cap > (size_t)-1 - sizeof *b)
            return NULL;
        srv_arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb)
            return NULL;
        nb->used = 0;
        nb->cap = cap;
        /* a big allocation of its own goes behind the current block, so the
         * current block's free space is still used */
        if (b && need > SRV_ARENA_BLOCK) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            c->arena = nb;
        }
        c->arena_blocks++;
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += need;
    memset(p, 0, n);
    return p;
}

char *srv_call_strndup(srv_call *c, const char *s, size_t n)
{
    if (n == (size_t)-1)
        return NULL;
    char *p = srv_call_alloc(c, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

void srv_call_free_arena(srv_call *c)
{
    for (srv_arena_block *b = c->arena, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    c->arena = NULL;
    c->arena_blocks = 0;
}

const char *srv_call_header(const srv_call *c, const char *name)
{
    return c->io && c->io->header ? c->io->header(c, name) : NULL;
}

const char *srv_call_key(const srv_call *c)
{
    const char *a = srv_call_header(c, "Authorization");
    if (a && !strncasecmp(a, "Bearer ", 7))
        return a + 7;
    if (a && !strncasecmp(a, "DeepL-Auth-Key ", 15)) /* DeepL's clients */
        return a + 15;
    return srv_call_header(c, "X-API-Key");
}

int srv_call_client_gone(const srv_call *c)
{
    if (c->streaming) {
        srv_call *m = (srv_call *)c; /* the lock, not the call, changes */
        pthread_mutex_lock(&m->stream_mu);
        int gone = m->client_left || (c->io && c->io->client_gone && c->io->client_gone(c));
        pthread_mutex_unlock(&m->stream_mu);
        return gone;
    }
    return c->io && c->io->client_gone ? c->io->client_gone(c) : 0;
}

void srv_call_answer(srv_call *c, int status, const char *ctype)
{
    if (c->streaming) { /* an answer instead of the stream (before it went out) */
        pthread_mutex_destroy(&c->stream_mu);
        c->streaming = 0;
    }
    c->status = status;
    c->ctype = ctype;
    c->n_hdr = 0;
    c->reply_len = 0;
}

int srv_call_add_header(srv_call *c, const char *name, const char *value)
{
    if (c->n_hdr == SRV_CALL_MAX_HEADERS)
        return -1;
    char *v = srv_call_strndup(c, value, strlen(value));
    if (!v)
        return -1;
    c->hdr[c->n_hdr].name = name;
    c->hdr[c->n_hdr].value = v;
    c->n_hdr++;
    return 0;
}

const char *srv_call_reply_header(const srv_call *c, const char *name)
{
    for (int i = 0; i < c->n_hdr; i++)
        if (!strcasecmp(c->hdr[i].name, name))
            return c->hdr[i].value;
    return NULL;
}

/* An answer that could not be recorded: the transport answers 500. */
static int lost(srv_call *c)
{
    free(c->reply);
    c->reply = NULL;
    c->reply_len = c->reply_cap = 0;
    c->status = 0;
    return -1;
}

/* Appends n bytes to the reply (NUL-terminated after them), growing it.
 * 0, or -1 when out of memory (the reply as it was). */
static int append(srv_call *c, const void *data, size_t n)
{
    if (c->reply_len + n + 1 > c->reply_cap) {
        size_t cap = c->reply_cap ? c->reply_cap : 256;
        while (cap < c->reply_len + n + 1)
            cap *= 2;
        char *p = realloc(c->reply, cap);
        if (!p)
            return -1;
        c->reply = p;
        c->reply_cap = cap;
    }
    memcpy(c->reply + c->reply_len, data, n);
    c->reply_len += n;
    c->reply[c->reply_len] = 0;
    return 0;
}

int srv_call_write(srv_call *c, const void *data, size_t n)
{
    if (!c->status)
        return -1;
    return append(c, data, n) == 0 ? 0 : lost(c);
}

int srv_call_take(srv_call *c, char *body, size_t len)
{
    if (!body)
        return lost(c);
    if (c->reply_len) { /* after other parts: one more part */
        int rc = srv_call_write(c, body, len);
        free(body);
        return rc;
    }
    free(c->reply);
    c->reply = body;
    c->reply_len = len;
    c->reply_cap = len; /* a later part reallocates */
    return 0;
}

int srv_call_stream(srv_call *c, int status, const char *ctype)
{
    srv_call_answer(c, status, ctype);
    if (pthread_mutex_init(&c->stream_mu, NULL) != 0)
        return -1;
    c->streaming = 1;
    c->stream_off = 0;
    c->stream_ended = c->stream_waiting = c->stream_resumed = c->stream_final = 0;
    return 0;
}

/* Under stream_mu: whether the reader waits for this news (it is then
 * resumed, after the lock is dropped). */
static int wake_reader(srv_call *c)
{
    int w = c->stream_waiting;
    c->stream_waiting = 0;
    return w;
}

int srv_call_stream_write(srv_call *c, const void *data, size_t n)
{
    pthread_mutex_lock(&c->stream_mu);
    int rc = -1, wake = 0;
    if (!c->client_left && !c->stream_ended && append(c, data, n) == 0) {
        rc = 0;
        wake = wake_reader(c);
    }
    pthread_mutex_unlock(&c->stream_mu);
    if (wake && c->io && c->io->resume)
        c->io->resume(c);
    return rc;
}

void srv_call_stream_end(srv_call *c)
{
    pthread_mutex_lock(&c->stream_mu);
    c->stream_ended = 1;
    int wake = wake_reader(c);
    pthread_mutex_unlock(&c->stream_mu);
    if (wake && c->io && c->io->resume)
        c->io->resume(c);
}

void srv_call_hold(srv_call *c, int n)
{
    atomic_fetch_add(&c->holds, n);
}

void srv_call_release(srv_call *c)
{
    if (!c->streaming) {
        if (atomic_fetch_sub(&c->holds, 1) == 1 && c->io && c->io->resume)
            c->io->resume(c);
        return;
    }
    /* a stream: the reader writes the end (resumed() is due), or, when the
     * client already left, the call is finished here */
    pthread_mutex_lock(&c->stream_mu);
    int last = atomic_fetch_sub(&c->holds, 1) == 1, wake = 0, finish = 0;
    if (last && c->orphan)
        finish = 1;
    else if (last) {
        c->stream_resumed = 1;
        wake = wake_reader(c);
    }
    pthread_mutex_unlock(&c->stream_mu);
    if (finish && c->io && c->io->finish)
        c->io->finish(c);
    else if (wake && c->io && c->io->resume)
        c->io->resume(c);
}

/* Copies s into dst (cap bytes, NUL-terminated) for the access log: a
 * control byte, DEL, '"', '\\' and every byte that is not part of valid
 * UTF-8 become \xHH (or \" and \\), so that a client cannot forge lines or
 * send terminal escapes through a path or a method. Cut with "..." when
 * too long. */
void srv_log_escape(char *dst, size_t cap, const char *s)
{
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    if (cap == 0)
        return;
    while (*p) {
        char tmp[8];
        size_t k = 0, adv = 1;
        unsigned c = *p;
        size_t ulen = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2
                      : (c >= 0xe0 && c <= 0xef) ? 3 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
        int valid = ulen > 1;
        for (size_t i = 1; valid && i < ulen; i++)
            valid = (p[i] & 0xc0) == 0x80;
        if (valid && ulen == 3)
            valid = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
        if (valid && ulen == 4)
            valid = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
        if (valid) {
            memcpy(tmp, p, ulen);
            k = adv = ulen;
        } else if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            k = 2;
        } else if (c < 0x20 || c >= 0x7f) {
            k = (size_t)snprintf(tmp, sizeof tmp, "\\x%02X", c);
        } else {
            tmp[0] = (char)c;
            k = 1;
        }
        if (n + k + 4 > cap) { /* room for "..." and the NUL */
            if (cap >= 4) {
                memcpy(dst + n, "...", 3);
                n += 3;
            }
            break;
        }
        memcpy(dst + n, tmp, k);
        n += k;
        p += adv;
    }
    dst[n < cap ? n : cap - 1] = 0;
}
