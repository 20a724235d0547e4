/*
 * libre.h - the LibreTranslate API (LibreTranslate 1.9, as its clients
 * libretranslatepy and libretranslate-aio call it): /translate (JSON, form
 * and multipart bodies; format text and html), /detect, /languages,
 * /translate_file and /download_file/NAME, /suggest, /frontend/settings,
 * /health, LibreTranslate's error shape {"error": message} and its status
 * codes (docs/api.md lists where we still differ from LibreTranslate, and
 * why; CORS is the transport's, for every route).
 *
 * Promise: a LibreTranslate endpoint answers only LibreTranslate's shapes
 * (srv_req_error switches to {"error": message} for its routes); text that is not
 * valid UTF-8 after form decoding is a 400 naming the field; translations
 * go through the same jobs, limits and batcher as /v1/translate.
 *
 * Threads: srv_libre (the store of translated files) is shared by every
 * HTTP thread (it has its own lock); a request's state belongs to the
 * thread that owns the request, as in request.h.
 */
#ifndef SRV_LIBRE_H
#define SRV_LIBRE_H

#include <stddef.h>

#include "files.h"
#include "request.h"
#include "state.h"

/* LibreTranslate's rows into out (up to max); returns how many there are. */
int srv_libre_routes(srv_route *out, int max);

/* A POST endpoint once the body is complete (the fuzz target's entry):
 * records an answer and returns 0, or fills r->jobs and returns 1 for them
 * to be submitted (srv_api_submit), or returns 2 when a file's parse was
 * handed to the document threads (docpool.h) under a hold of the call
 * (without them, r->s->docs NULL, it ran here: never 2). */
int srv_libre_parse(srv_req *r);

#endif /* SRV_LIBRE_H */
