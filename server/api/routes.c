/*
 * routes.c - the route table and the API's handler of a call (routes.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "admin.h"
#include "deepl.h"
#include "glossaries.h"
#include "libre.h"
#include "models.h"
#include "native.h"
#include "probes.h"
#include "routes.h"
#include "web.h"

struct srv_routes {
    srv_route *rows;
    int n, cap;
};

/* The statuses the request series count one by one (metrics.h): every one
 * a route or the transport answers (those /openapi.json documents, with
 * 201 of a glossary made, 456 of DeepL's quotas, 507 of --max-memory; 204
 * of a preflight, 304 of the page's ETag, 405 of a wrong method, 408 of a
 * slow client, 421 of another replica's file, 501 of an unknown
 * Transfer-Encoding); another (0: the client left before its answer)
 * counts as "other". */
static const int k_statuses[] = {200, 201, 204, 304, 400, 401, 403, 404, 405, 408, 409,
                                 413, 415, 421, 422, 429, 456, 500, 501, 503, 504, 507};

int srv_routes_add(srv_routes *t, const srv_route *rows, int n)
{
    if (t->n + n > t->cap) {
        int cap = t->cap ? t->cap : 32;
        while (cap < t->n + n)
            cap *= 2;
        srv_route *p = realloc(t->rows, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        t->rows = p;
        t->cap = cap;
    }
    memcpy(t->rows + t->n, rows, (size_t)n * sizeof *rows);
    t->n += n;
    return 0;
}

/* Whether path matches pattern: exact, or around its one '*' (a non-empty
 * run of any characters). */
static int path_matches(const char *pattern, const char *path)
{
    const char *star = strchr(pattern, '*');
    if (!star)
        return !strcmp(pattern, path);
    size_t pre = (size_t)(star - pattern), suf = strlen(star + 1), n = strlen(path);
    return n > pre + suf && !strncmp(path, pattern, pre) && !strcmp(path + n - suf, star + 1);
}

/* Whether a row of method m takes the request's method (GET takes HEAD). */
static int method_takes(const char *m, const char *method)
{
    return !strcmp(m, method) || (!strcmp(m, "GET") && !strcmp(method, "HEAD"));
}

const srv_route *srv_routes_find(const srv_routes *t, const char *path, const char *method,
                                 char *allow, size_t allow_len)
{
    const char *pattern = NULL;
    const srv_route *hit = NULL;
    size_t at = 0;
    if (allow_len)
        allow[0] = 0;
    for (int i = 0; i < t->n; i++) {
        const srv_route *rt = &t->rows[i];
        if (pattern ? strcmp(rt->path, pattern) != 0 : !path_matches(rt->path, path))
            continue;
        pattern = rt->path;
        if (!hit && method_takes(rt->method, method))
            hit = rt;
        int k = snprintf(allow + at, allow_len > at ? allow_len - at : 0, "%s%s%s",
                         at ? ", " : "", rt->method, strcmp(rt->method, "GET") ? "" : ", HEAD");
        if (k > 0 && at + (size_t)k < allow_len)
            at += (size_t)k;
    }
    return hit;
}

/* The first row of the first pattern matching path (its endpoint and
 * dialect answer a wrong method), or NULL. */
static const srv_route *first_of(const srv_routes *t, const char *path)
{
    for (int i = 0; i < t->n; i++)
        if (path_matches(t->rows[i].path, path))
            return &t->rows[i];
    return NULL;
}

/* ---- the API -------------------------------------------------------------- */

struct srv_api {
    srv_server *s;
    srv_routes routes;
    int *label;        /* per row: its metrics label's number (metrics.h) */
    int other;         /* the label of a request no row took */
};

/* Each row's label and the statuses, registered with the metrics. 0, or
 * -1 when a row has no label. */
static int metrics_labels(srv_api *a, char *err, size_t errlen)
{
    srv_metrics *m = a->s->metrics;
    srv_metrics_statuses(m, k_statuses, (int)(sizeof k_statuses / sizeof k_statuses[0]));
    a->label = calloc((size_t)(a->routes.n ? a->routes.n : 1), sizeof *a->label);
    if (!a->label) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < a->routes.n; i++) {
        const srv_route *rt = &a->routes.rows[i];
        if (!rt->label) {
            snprintf(err, errlen, "route %s %s: no metrics label", rt->method, rt->path);
            return -1;
        }
        a->label[i] = srv_metrics_label(m, rt->label);
    }
    a->other = srv_metrics_label(m, "other");
    return 0;
}

srv_api *srv_api_new(srv_server *s, char *err, size_t errlen)
{
    srv_api *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->s = s;
    /* the page first (its paths are its own), then each API's rows */
    static int (*const k_dialects[])(srv_route *out, int max) = {
        srv_web_routes, srv_native_routes, srv_admin_routes, srv_probes_routes,
        srv_libre_routes, srv_deepl_routes, srv_glossary_routes,
    };
    for (size_t d = 0; d < sizeof k_dialects / sizeof k_dialects[0]; d++) {
        int n = k_dialects[d](NULL, 0);
        srv_route *rows = n > 0 ? calloc((size_t)n, sizeof *rows) : NULL;
        int ok = n <= 0 || (rows && k_dialects[d](rows, n) == n &&
                            srv_routes_add(&a->routes, rows, n) == 0);
        free(rows);
        if (!ok) {
            snprintf(err, errlen, "out of memory");
            srv_api_free(a);
            return NULL;
        }
    }
    if (metrics_labels(a, err, errlen) != 0) {
        srv_api_free(a);
        return NULL;
    }
    return a;
}

void srv_api_free(srv_api *a)
{
    if (!a)
        return;
    free(a->routes.rows);
    free(a->label);
    free(a);
}

const srv_routes *srv_api_routes(const srv_api *a)
{
    return &a->routes;
}

/* ---- the handler ---------------------------------------------------------- */

/* The API's state of call c, made (in its arena) on first use; NULL when
 * out of memory. */
static srv_req *req_of(srv_api *a, srv_call *c)
{
    srv_req *r = c->api;
    if (r)
        return r;
    r = srv_call_alloc(c, sizeof *r);
    if (!r)
        return NULL;
    r->s = a->s;
    r->call = c;
    r->ep = SRV_EP_UNKNOWN;
    r->path = c->path;
    r->host = c->host;
    r->query = c->query;
    c->api = r;
    return r;
}

/* Whether the request's body is JSON by its Content-Type. */
static int body_is_json(const srv_call *c)
{
    const char *ct = srv_call_header(c, "Content-Type");
    size_t ctl = 0;
    while (ct && ct[ctl] && ct[ctl] != ';' && ct[ctl] != ' ')
        ctl++;
    return ct && ctl == 16 && !strncasecmp(ct, "application/json", 16);
}

/* Readiness of a row that serves (SRV_ROUTE_SERVING): 1 with a 503
 * recorded while the models load or the daemon drains. A device failure is
 * not refused here: it is reported after the body (and the API key in it)
 * was read. */
static int not_serving(srv_req *r)
{
    switch (srv_server_readiness(r->s, NULL, 0)) {
    case SRV_NOT_READY_DRAINING:
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
        return 1;
    case SRV_NOT_READY_LOADING:
        srv_req_error(r, 503, "not_ready", NULL, "the models are loading");
        srv_req_header(r, "Retry-After", "1");
        return 1;
    case SRV_READY:
    case SRV_NOT_READY_DEVICE:
        break;
    }
    return 0;
}

static srv_call_next api_head(void *ctx, srv_call *c)
{
    srv_api *a = ctx;
    srv_req *r = req_of(a, c);
    if (!r)
        return SRV_NEXT_ANSWERED; /* no answer: the transport's 500 */
    char allow[64];
    const srv_route *rt = srv_routes_find(&a->routes, c->path, c->method, allow, sizeof allow);
    const srv_route *any = rt ? rt : first_of(&a->routes, c->path);
    /* The path and method go into a JSON message: escaped, they are valid
     * UTF-8 (jansson refuses anything else, which would make a 500). */
    char path[256], method[64];
    srv_log_escape(path, sizeof path, c->path);
    srv_log_escape(method, sizeof method, c->method);
    if (!any) {
        srv_req_error(r, 404, "not_found", NULL, "no such endpoint: %s", path);
        return SRV_NEXT_ANSWERED;
    }
    r->route = any;
    r->ep = any->ep;
    if (!strcmp(c->method, "OPTIONS")) {
        /* a CORS preflight (or a plain OPTIONS): 204 with Allow (and the
         * transport's CORS headers) */
        srv_req_json(r, 204, strdup(""));
        srv_req_header(r, "Allow", allow);
        return SRV_NEXT_ANSWERED;
    }
    if (!rt) {
        srv_req_error(r, 405, "method_not_allowed", NULL, "%s %s: allowed: %s", method, path,
                      allow);
        srv_req_header(r, "Allow", allow);
        return SRV_NEXT_ANSWERED;
    }
    r->route = rt;
    r->ep = rt->ep;
    if (rt->flags & SRV_ROUTE_FILE) { /* a whole file: its own limits */
        c->max_body = r->s->api->max_file_bytes;
        c->timeout_s = r->s->o.file_timeout_s;
    }
    if ((rt->flags & SRV_ROUTE_SERVING) && not_serving(r))
        return SRV_NEXT_ANSWERED;
    /* LibreTranslate may carry its key in the body: checked after parsing. */
    if ((rt->flags & SRV_ROUTE_KEY) && !srv_api_key_ok(r->s, srv_call_key(c))) {
        srv_req_error(r, 401, "unauthorized", NULL, "a valid API key is required");
        return SRV_NEXT_ANSWERED;
    }
    if (rt->answer) {
        rt->answer(r);
        return SRV_NEXT_ANSWERED;
    }
    /* LibreTranslate's endpoints read JSON, forms and multipart, and treat
     * any other body as no fields (libre.c) */
    if (!(rt->flags & (SRV_ROUTE_LIBRE | SRV_ROUTE_ANY_BODY)) && !body_is_json(c)) {
        const char *ct = srv_call_header(c, "Content-Type");
        srv_req_error(r, 415, "unsupported_media_type", NULL,
                      "Content-Type must be application/json (got %s)", ct ? ct : "none");
        return SRV_NEXT_ANSWERED;
    }
    return SRV_NEXT_BODY;
}

static srv_call_next api_body(void *ctx, srv_call *c)
{
    srv_req *r = req_of(ctx, c);
    if (!r || !r->route || !r->route->body)
        return SRV_NEXT_ANSWERED;
    r->body = c->body;
    r->body_len = c->body_len;
    return r->route->body(r);
}

static srv_call_next api_resumed(void *ctx, srv_call *c)
{
    srv_req *r = req_of(ctx, c);
    if (r && r->route && r->route->respond)
        return r->route->respond(r);
    return SRV_NEXT_ANSWERED;
}

static void api_reject(void *ctx, srv_call *c, int status, const char *code, const char *msg)
{
    srv_req *r = req_of(ctx, c);
    if (r)
        srv_req_error(r, status, code, NULL, "%s", msg);
}

static void api_done(void *ctx, srv_call *c, int status, double seconds)
{
    srv_api *a = ctx;
    srv_req *r = c->api;
    /* the label of the row that took the call (or of its path's first) */
    const int row = r && r->route ? (int)(r->route - a->routes.rows) : -1;
    srv_metrics_request(a->s->metrics, row >= 0 ? a->label[row] : a->other, status, seconds);
    if (!r)
        return;
    /* what the access log says, kept past the model's reference */
    if (r->model)
        c->log_model = srv_call_strndup(c, r->model->name, strlen(r->model->name));
    c->log_texts = r->pipe.n_jobs + r->doc_jobs;
    c->tokens_in = r->pipe.tokens_in + r->doc_tokens_in;
    c->tokens_out = r->tokens_out;
    srv_req_free(r);
}

srv_call_handler srv_api_handler(srv_api *a)
{
    srv_call_handler h = {a, api_head, api_body, api_resumed, api_reject, api_done};
    return h;
}
