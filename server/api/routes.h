/*
 * routes.h - the route table and the API's side of a call: every dialect
 * (native.c, libre.c, admin.c, probes.c, web.c) has its rows {method, path
 * pattern, handler} (request.h's srv_route), srv_api_new puts them in one
 * table, and the handler the transport calls (transport/call.h) finds a
 * call's row and runs it. A new API is one new file with its rows and one
 * line in srv_api_new's list.
 *
 * At the head of a call, in this order: the route (404 no such endpoint),
 * OPTIONS (204 with Allow: a CORS preflight), the method (405 with Allow),
 * a row answering without its body (GET), then for the rows that say so
 * readiness (503 draining / not_ready), the API key from the headers (401),
 * a DELETE answered here, and the body's type (415 unless the row takes
 * any). Then the body, the row's handler, and after pending work its
 * respond().
 *
 * Threads: the table is built before the daemon serves and read-only
 * after; the handler runs on the HTTP threads.
 */
#ifndef SRV_ROUTES_H
#define SRV_ROUTES_H

#include <stddef.h>

#include "call.h"
#include "request.h"

typedef struct srv_routes srv_routes;

/* Appends copies of n rows. 0, or -1 when out of memory. */
int srv_routes_add(srv_routes *t, const srv_route *rows, int n);

/* The row of a call: the rows of the first pattern matching path, then the
 * one for method (GET rows take HEAD too). NULL when no pattern matches
 * (*allow ""), or when none takes method (*allow the pattern's methods,
 * "GET, HEAD, POST"). */
const srv_route *srv_routes_find(const srv_routes *t, const char *path, const char *method,
                                 char *allow, size_t allow_len);

/* The API as a whole: the route table of every dialect, over s. */
typedef struct srv_api srv_api;
srv_api *srv_api_new(srv_server *s, char *err, size_t errlen);
void srv_api_free(srv_api *a); /* accepts NULL */
const srv_routes *srv_api_routes(const srv_api *a);

/* The handler the transport calls for every call (ctx: a). */
srv_call_handler srv_api_handler(srv_api *a);

#endif /* SRV_ROUTES_H */
