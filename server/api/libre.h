/*
 * libre.h - the LibreTranslate API (LibreTranslate 1.9, as its clients
 * libretranslatepy and libretranslate-aio call it): /translate (JSON, form
 * and multipart bodies; format text and html), /detect, /languages,
 * /translate_file and /download_file/NAME, /suggest, /frontend/settings,
 * /health, LibreTranslate's error shape {"error": message} and its status
 * codes, and the CORS headers of every response (docs/api.md lists where we
 * still differ from LibreTranslate, and why).
 *
 * Promise: a LibreTranslate endpoint answers only LibreTranslate's shapes
 * (srv_req_error switches to {"error": message} for them); text that is not
 * valid UTF-8 after form decoding is a 400 naming the field; translations
 * go through the same jobs, limits and batcher as /v1/translate.
 *
 * Threads: srv_libre (the detector and the store of translated files) is
 * shared by every HTTP thread (the store has its own lock); a request's
 * state belongs to the thread that owns the request, as in api.h.
 */
#ifndef SRV_LIBRE_H
#define SRV_LIBRE_H

#include <stddef.h>

#include "api.h"
#include "state.h"

typedef struct srv_libre srv_libre;

/* The detector over the languages of the loaded models (s->models, every
 * source and target) and an empty file store sized by s->o. NULL with err
 * when the fingerprints cannot be read or out of memory. */
srv_libre *srv_libre_new(const srv_server *s, char *err, size_t errlen);
void srv_libre_free(srv_libre *l); /* accepts NULL */

/* source=auto: the language of text (n bytes) among the sources of the
 * serving models that translate into tgt (every model's when tgt is NULL),
 * into out. -1 when no model has such a source, or out of memory. */
int srv_libre_detect_source(const srv_server *s, const char *text, size_t n, const char *tgt,
                            char *out, size_t outlen);

/* 1 for the endpoints this file serves (their errors are LibreTranslate's). */
int srv_libre_endpoint(srv_endpoint ep);

/* The route of a LibreTranslate path (exact, or /download_file/NAME), or NULL. */
const srv_route *srv_libre_route(const char *path);

/* A POST endpoint once the body is complete, as srv_api_translate_parse:
 * records a response and returns 0, or fills r->jobs and returns 1.
 * ctype is the Content-Type header, auth_key the key from the headers. */
int srv_libre_parse(srv_req *r, const char *ctype, const char *auth_key);

/* A GET endpoint (also POST /languages): records the response. */
void srv_libre_get(srv_req *r);

/* Every job of a LibreTranslate translation finished (successfully): the
 * 200 answer (or a 500 when out of memory). */
void srv_libre_respond(srv_req *r);

/* Frees r->lr (accepts r->lr NULL). */
void srv_libre_req_free(srv_req *r);

/* The CORS headers of a response to a request with Origin origin (NULL when
 * absent), for --cors-origins o->cors_origins: up to SRV_CORS_MAX name/value
 * pairs into h; returns how many. preflight: an OPTIONS request, allow the
 * methods of its route. The values point into buf or are constants. */
#define SRV_CORS_MAX 8
int srv_libre_cors(const srv_opts *o, const char *origin, int preflight, const char *allow,
                   const char *h[SRV_CORS_MAX][2], char *buf, size_t buflen);

#endif /* SRV_LIBRE_H */
