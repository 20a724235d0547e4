/*
 * openapi.h - the body of GET /openapi.json: the HTTP API of docs/api.md as
 * OpenAPI 3.0, made from the template server/api/openapi.json (compiled in) and
 * the running server: the enums of model, source and target are the loaded
 * models', the limits (texts per request, beam size, alternatives,
 * max_length, attention layers and heads) those of its flags and models.
 */
#ifndef SRV_OPENAPI_H
#define SRV_OPENAPI_H

#include "state.h"

/* The template, as compiled in (NUL-terminated JSON). */
extern const char srv_openapi_template[];

/* The document for s (malloc'd JSON), or NULL when out of memory. Before
 * the models are loaded (not ready) the model-dependent enums and limits
 * are left out. Any thread: it reads only what is read-only once s is
 * ready. */
char *srv_openapi_render(const srv_server *s);

#endif /* SRV_OPENAPI_H */
