/*
 * probes.c - health, readiness, metrics, the OpenAPI document and the
 * version (probes.h).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buildinfo.h"
#include "openapi.h"
#include "probes.h"

static void probe_live(srv_req *r)
{
    srv_req_json(r, 200, strdup("{\"status\":\"ok\"}"));
}

/* GET /health/ready: readiness as state.c decides it. */
static void probe_ready(srv_req *r)
{
    char why[512];
    if (atomic_load(&r->s->unready)) { /* --drain-delay-s: still serving */
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
        return;
    }
    switch (srv_server_readiness(r->s, why, sizeof why)) {
    case SRV_READY:
        srv_req_json(r, 200, strdup("{\"status\":\"ready\"}"));
        return;
    case SRV_NOT_READY_DRAINING:
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
        return;
    case SRV_NOT_READY_LOADING:
        srv_req_error(r, 503, "not_ready", NULL, "the models are loading");
        return;
    case SRV_NOT_READY_DEVICE:
        srv_req_error(r, 503, "device_error", NULL, "%s", why);
        return;
    }
    srv_req_error(r, 500, "internal", NULL, "unknown readiness");
}
static void probe_metrics(srv_req *r)
{
    srv_server *s = r->s;
    char *t = srv_metrics_render(s->metrics, srv_server_readiness(s, NULL, 0) == SRV_READY);
    if (!t) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return;
    }
    srv_req_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", t, strlen(t));
}

static void probe_version(srv_req *r)
{
    srv_req_object(r, 200, json_pack("{s:s,s:s,s:s}", "name", "transformerd", "version",
                                     srv_version, "commit", srv_commit));
}

static void probe_openapi(srv_req *r)
{
    char *doc = srv_openapi_render(r->s);
    if (!doc)
        srv_req_error(r, 500, "internal", NULL, "out of memory");
    else
        srv_req_json(r, 200, doc);
}

static const srv_route k_probe_routes[] = {
    {"GET", "/health/live", SRV_EP_LIVE, 0, probe_live, NULL, NULL, "/health/live"},
    {"GET", "/v2/health/live", SRV_EP_LIVE, 0, probe_live, NULL, NULL, "/health/live"},
    {"GET", "/health/ready", SRV_EP_READY, 0, probe_ready, NULL, NULL, "/health/ready"},
    {"GET", "/v2/health/ready", SRV_EP_READY, 0, probe_ready, NULL, NULL, "/health/ready"},
    {"GET", "/metrics", SRV_EP_METRICS, 0, probe_metrics, NULL, NULL, "/metrics"},
    {"GET", "/openapi.json", SRV_EP_OPENAPI, 0, probe_openapi, NULL, NULL, "/openapi.json"},
    {"GET", "/spec", SRV_EP_OPENAPI, 0, probe_openapi, NULL, NULL, "/openapi.json"}, /* LibreTranslate's name */
    {"GET", "/version", SRV_EP_VERSION, 0, probe_version, NULL, NULL, "/version"},
};

int srv_probes_routes(srv_route *out, int max)
{
    return srv_routes_copy(k_probe_routes, (int)(sizeof k_probe_routes / sizeof k_probe_routes[0]), out, max);
}
