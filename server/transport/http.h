/*
 * http.h - the daemon's transport: libmicrohttpd, its thread pool, and the
 * lifecycle of one HTTP request (read, hand to api.c, suspend while the
 * batcher works, resume, respond, log).
 *
 * Promise: no HTTP thread ever waits on the model. A translation's
 * connection is suspended while its jobs are queued or running, and
 * resumed by the completion of its last job; its request state is freed
 * only after that, by MHD's completion callback. Errors libmicrohttpd
 * answers itself (malformed HTTP, connection limits, an upload past the
 * deadline) are not JSON (docs/api.md, "Errors").
 *
 * Threads: _start, _quiesce and _stop belong to the main thread; _port and
 * _active may be read from any thread.
 */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "state.h"

typedef struct srv_http srv_http;

/* Listens on s->o.host:s->o.port and starts the thread pool; s must
 * outlive the srv_http. On failure *out is NULL and err says why. */
int srv_http_start(srv_http **out, srv_server *s, char *err, size_t errlen);

/* The port actually bound (s->o.port, or the one chosen for port 0). */
uint16_t srv_http_port(const srv_http *h);

/* Requests accepted and not yet completed (logged). */
long srv_http_active(const srv_http *h);

/* Stops accepting connections; the open ones carry on. */
void srv_http_quiesce(srv_http *h);

/* Stops the daemon (every connection closed) and frees h. Every suspended
 * connection must have been resumed (the batchers drained) first. Accepts
 * NULL. */
void srv_http_stop(srv_http *h);

/* Copies s into dst (cap bytes) for the access log: control bytes, DEL,
 * '"', '\\' and bytes that are not valid UTF-8 escaped as \xHH (\" and
 * \\); cut with "..." past cap. */
void srv_log_escape(char *dst, size_t cap, const char *s);

#endif /* SRV_HTTP_H */
