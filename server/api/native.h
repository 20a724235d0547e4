/*
 * native.h - the native API: POST /v1/translate (docs/api.md).
 */
#ifndef SRV_NATIVE_H
#define SRV_NATIVE_H

#include "request.h"

/* The native API's rows into out (up to max); returns how many there are. */
int srv_native_routes(srv_route *out, int max);

/* POST /v1/translate's body (the fuzz target's entry): records an answer
 * and returns 0, or fills r->jobs (validated, tokenized) and returns 1 for
 * them to be submitted (srv_api_submit). */
int srv_native_parse(srv_req *r);

#endif /* SRV_NATIVE_H */
