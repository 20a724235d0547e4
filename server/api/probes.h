/*
 * probes.h - what probes, scrapers and tools read: /health/live,
 * /health/ready (and their /v2 names), /metrics, /openapi.json (and
 * LibreTranslate's name for it, /spec), /version. None takes a key.
 */
#ifndef SRV_PROBES_H
#define SRV_PROBES_H

#include "request.h"

/* The probes' rows into out (up to max); returns how many there are. */
int srv_probes_routes(srv_route *out, int max);

#endif /* SRV_PROBES_H */
