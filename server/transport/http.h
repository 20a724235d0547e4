/*
 * http.h - the daemon's transport: libmicrohttpd, its thread pool, the
 * framing rules, the body and its limit, CORS, the slow-sender watchdog,
 * the access log, and the life of one call (call.h): read, hand to the
 * handler (the APIs' routes), suspend while the call is held, resume,
 * answer, log. It knows nothing of JSON bodies, models or APIs: the
 * handler does.
 *
 * Promise: no HTTP thread ever waits on the model. A call with pending work
 * is suspended while it is held and resumed by its last release; it is
 * freed only after that, by MHD's completion callback. Errors
 * libmicrohttpd answers itself (malformed HTTP, connection limits, an
 * upload past the deadline) are not the handler's (docs/api.md, "Errors").
 *
 * Threads: _start, _quiesce and _stop belong to the main thread; _port and
 * _active may be read from any thread.
 */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>

#include "call.h"

typedef struct srv_http srv_http;

/* The transport's settings (the command line's, docs/api.md). */
typedef struct srv_http_opts {
    const char *host;           /* numeric address or "localhost" */
    int port;                   /* 0: any free port */
    int http_threads;           /* the thread pool */
    int max_connections;
    int max_connections_per_ip; /* 0: no limit */
    int idle_timeout_s;         /* libmicrohttpd's (idle) connection timeout */
    int header_timeout_s;       /* a request's whole header block */
    int request_timeout_s;      /* its body, and its answer's sending */
    long max_body_bytes;
    const char *log_format;     /* access log: "text" | "json" */
    const char *cors_origins;   /* "*", "" or a comma-separated list */
    const char *replica_id;     /* NULL/"": none; else prefixes the request ids made up */
    const atomic_int *draining; /* while set, answers carry Connection: close */
} srv_http_opts;

/* The longest X-Request-Id taken from a client. */
#define SRV_REQ_ID_MAX 64

/* 1 when v (a client's X-Request-Id) is echoed as it is: 1 to
 * SRV_REQ_ID_MAX characters of A-Z a-z 0-9 . _ : -; 0 otherwise (NULL too):
 * the daemon makes up its own. */
int srv_http_req_id_ok(const char *v);

/* Listens on o->host:o->port and starts the thread pool; o, its strings and
 * handler must outlive the srv_http. On failure *out is NULL and err says
 * why. */
int srv_http_start(srv_http **out, const srv_http_opts *o, const srv_call_handler *handler,
                   char *err, size_t errlen);

/* The port actually bound (o->port, or the one chosen for port 0). */
uint16_t srv_http_port(const srv_http *h);

/* Requests accepted and not yet completed (logged). */
long srv_http_active(const srv_http *h);

/* Stops accepting connections; the open ones carry on. */
void srv_http_quiesce(srv_http *h);

/* Stops the daemon (every connection closed) and frees h. Every suspended
 * connection must have been resumed (the batchers drained) first. Accepts
 * NULL. */
void srv_http_stop(srv_http *h);

#endif /* SRV_HTTP_H */
