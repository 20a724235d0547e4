/*
 * openapi.h - the body of GET /openapi.json: the HTTP API of docs/api.md as
 * OpenAPI 3.0. A constant; any thread may read it.
 */
#ifndef SRV_OPENAPI_H
#define SRV_OPENAPI_H

extern const char srv_openapi_json[];

#endif /* SRV_OPENAPI_H */
