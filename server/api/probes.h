/*
 * probes.h - what probes, scrapers and tools read: /health/live,
 * /health/ready (and their /v2 names), /metrics, /openapi.json (and
 * LibreTranslate's name for it, /spec), /version. None takes a key.
 */
#ifndef SRV_PROBES_H
#define SRV_PROBES_H

#include "routes.h"

/* Adds the probes' rows to t. 0, or -1 when out of memory. */
int srv_probes_register(srv_routes *t);

#endif /* SRV_PROBES_H */
