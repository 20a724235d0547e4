/*
 * call.h - one HTTP call as the layers above the transport see it: what
 * came in (method, path, query, headers, body), the answer going out
 * (status, headers, the body in one or more parts), an arena for everything
 * the call allocates, and the API's state behind one pointer. It knows no
 * libmicrohttpd, no JSON, no model: the transport (http.c) fills and sends
 * it, the APIs (server/api/) read and answer it through the functions
 * below, and a call's pending work (jobs queued, a model loading) holds it
 * open until the last hold is released, from any thread.
 *
 * The handler (srv_call_handler) is what the transport calls, in the order
 * of a call's life:
 *   head     the request line and headers are in: answer (a GET, an error)
 *            or ask for the body (SRV_NEXT_BODY);
 *   body     the body is complete: answer, or hand work to the service and
 *            return SRV_NEXT_PENDING after srv_call_hold for each piece;
 *   resumed  the last hold was released: answer now, or hand the next
 *            step's work out under new holds (SRV_NEXT_PENDING: a parse
 *            on the document threads, then the model's jobs, then the
 *            render); not for a streamed answer, whose resumed() writes
 *            its last part;
 *   reject   the transport's own refusals (malformed framing, a body over
 *            its limit, a deadline), formatted as the API formats errors;
 *   done     the answer was sent or the connection went away: the last
 *            word (metrics), after which the arena is freed.
 *
 * A streamed answer (srv_call_stream) goes out as it is written: its status
 * and headers at once, then each part as soon as it is written, from any
 * thread, until srv_call_stream_end. While such a call is held, the last
 * release has the transport call resumed() on an HTTP thread (to write the
 * last part and end the stream); a client that leaves mid-stream is seen by
 * srv_call_client_gone, and the call is freed only after its last release.
 *
 * Threads: a call belongs to the HTTP thread running its handler; while it
 * is held, only srv_call_release, srv_call_client_gone and (streamed)
 * srv_call_stream_write and srv_call_stream_end may be called from other
 * threads (and whatever the API guards itself).
 */
#ifndef SRV_CALL_H
#define SRV_CALL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#define SRV_CALL_MAX_HEADERS 12

typedef struct srv_call srv_call;

/* What the transport gives a call: its headers and its client's socket. */
typedef struct srv_call_io {
    const char *(*header)(const srv_call *c, const char *name);
    int (*client_gone)(const srv_call *c);
    void (*resume)(srv_call *c); /* the last hold was released, or a streamed part came */
    void (*finish)(srv_call *c); /* a streamed call whose client left: its last release */
} srv_call_io;

/* A block of the call's arena (call.c): bump allocation, freed at once. */
typedef struct srv_arena_block srv_arena_block;

typedef struct srv_header {
    const char *name, *value;
} srv_header;

struct srv_call {
    /* in: set by the transport before head() */
    const char *method;
    const char *path;   /* the path (an absolute-form target's path), decoded */
    const char *query;  /* the raw query string (after '?'), or NULL */
    const char *host;   /* the Host header, or an absolute-form target's authority */
    const char *client; /* the client's address, "-" when unknown */
    unsigned long id;   /* the access log's number */
    const char *req_id; /* X-Request-Id: the client's when sane, else made up
                           ("REPLICA-N", or N without --replica-id) */
    double t0;          /* srv_now() at the head */
    /* set by the API's head for its route (0: the transport's own limits) */
    long max_body;      /* the body limit in bytes */
    int timeout_s;      /* the whole-request deadline after t0 */
    char *body;         /* at body(): the complete body, NUL-terminated (never NULL);
                           the API may modify it in place */
    size_t body_len;
    /* the API's state of this call (in the arena), or NULL */
    void *api;
    /* out: the answer */
    int status;         /* 0 until answered */
    const char *ctype;  /* Content-Type (NULL: none, as for 204) */
    srv_header hdr[SRV_CALL_MAX_HEADERS];
    int n_hdr;
    char *reply;        /* the body's parts so far, malloc'd (the transport takes it) */
    size_t reply_len, reply_cap;
    int close;          /* answer with Connection: close */
    /* what the access log says of it (set by the API) */
    const char *log_model;
    long log_texts, tokens_in, tokens_out;
    /* a streamed answer (srv_call_stream): the transport's reader takes
     * reply[stream_off, reply_len) as the parts come; all under stream_mu */
    int streaming;
    pthread_mutex_t stream_mu;
    size_t stream_off;
    int stream_ended;    /* srv_call_stream_end: nothing more comes */
    int stream_waiting;  /* the reader found nothing and suspended the connection */
    int stream_resumed;  /* the last hold was released: resumed() is due */
    int stream_final;    /* resumed() was called */
    int client_left;     /* the connection ended before the stream did */
    int orphan;          /* ... while holds remained: the last release frees the call */
    /* the transport's */
    const srv_call_io *io;
    void *io_ctx;
    atomic_int holds;
    srv_arena_block *arena;
    size_t arena_blocks;
};

typedef enum srv_call_next {
    SRV_NEXT_ANSWERED = 0, /* an answer was recorded: send it */
    SRV_NEXT_BODY,         /* read the body, then call body() */
    SRV_NEXT_PENDING,      /* work was handed out under holds: wait for resumed() */
} srv_call_next;

typedef struct srv_call_handler {
    void *ctx;
    srv_call_next (*head)(void *ctx, srv_call *c);
    srv_call_next (*body)(void *ctx, srv_call *c);
    srv_call_next (*resumed)(void *ctx, srv_call *c);
    void (*reject)(void *ctx, srv_call *c, int status, const char *code, const char *msg);
    void (*done)(void *ctx, srv_call *c, int status, double seconds);
} srv_call_handler;

/* ---- the arena ------------------------------------------------------------ */

/* n zeroed bytes that live until the call ends; NULL when out of memory. */
void *srv_call_alloc(srv_call *c, size_t n);
/* A copy of s (n bytes, NUL-terminated) in the arena; NULL when out of memory. */
char *srv_call_strndup(srv_call *c, const char *s, size_t n);
/* Frees the arena (the transport, after done()). */
void srv_call_free_arena(srv_call *c);

/* ---- the request ---------------------------------------------------------- */

/* A request header's value, or NULL (any case of the name). */
const char *srv_call_header(const srv_call *c, const char *name);
/* The API key of "Authorization: Bearer KEY" or "X-API-Key: KEY", or NULL. */
const char *srv_call_key(const srv_call *c);
/* Whether the client closed its end (any thread, while the call is held). */
int srv_call_client_gone(const srv_call *c);

/* ---- the answer ----------------------------------------------------------- */

/* Starts the answer: status and Content-Type (NULL: none); drops any answer
 * recorded before (its parts and headers). */
void srv_call_answer(srv_call *c, int status, const char *ctype);
/* A response header; value is copied into the arena. 0, or -1 when the
 * table is full or out of memory. */
int srv_call_add_header(srv_call *c, const char *name, const char *value);
/* The value of a response header already added, or NULL. */
const char *srv_call_reply_header(const srv_call *c, const char *name);
/* Appends a part of the body. 0, or -1 when out of memory (the answer is
 * then the transport's 500). */
int srv_call_write(srv_call *c, const void *data, size_t n);
/* The whole body at once: takes body (malloc'd, len bytes; NULL: out of
 * memory, recorded as for srv_call_write) instead of copying it. */
int srv_call_take(srv_call *c, char *body, size_t len);

/* ---- a streamed answer ----------------------------------------------------- */

/* Makes the answer a stream: status and type (headers may be added until the
 * handler returns), the body in parts written by srv_call_stream_write as
 * they come. An answer recorded after it (srv_call_answer, an error before
 * any work was handed out) replaces it. 0, or -1 when out of memory. */
int srv_call_stream(srv_call *c, int status, const char *ctype);
/* A part of a streamed answer, from any thread. 0, or -1 when out of memory
 * or the client left (the part is dropped). */
int srv_call_stream_write(srv_call *c, const void *data, size_t n);
/* The streamed answer is complete (any thread). */
void srv_call_stream_end(srv_call *c);

/* ---- pending work --------------------------------------------------------- */

/* n more pieces of work hold the call open (before they are handed out). */
void srv_call_hold(srv_call *c, int n);
/* One piece finished (any thread): the last release resumes the call, after
 * which it may be freed at any moment, so the caller touches it no more. */
void srv_call_release(srv_call *c);

/* ---- text from the client ------------------------------------------------ */

/* Copies s into dst (cap bytes) for a log line or a message: control bytes,
 * DEL, '"', '\\' and bytes that are not valid UTF-8 escaped as \xHH (\" and
 * \\); cut with "..." past cap. The result is valid UTF-8. */
void srv_log_escape(char *dst, size_t cap, const char *s);

#endif /* SRV_CALL_H */
