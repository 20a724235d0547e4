/*
 * http.c - the libmicrohttpd side of the daemon: one access handler and one
 * completion callback, following MHD's own request lifecycle.
 *
 *   1st call    route (404/405), readiness (503), API key (401), content
 *               type (415), Content-Length cap (413) - all before any body
 *               byte is read; GET endpoints answer here.
 *   body calls  the raw body is appended to a buffer capped at
 *               --max-body-bytes (no PostProcessor).
 *   last call   api.c parses and tokenizes; a translation suspends the
 *               connection and submits its jobs to the model's batcher.
 *   resumed     the batcher resumed the connection after its last job:
 *               api.c builds the response from the results.
 *   completed   access-log line, metrics, free.
 *
 * Per-request state lives in *req_cls (srv_req); no HTTP thread waits on the
 * model. Every error is DESIGN.md's error object with its status.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "server.h"

typedef struct route {
    const char *path;
    srv_endpoint ep;
    int post;            /* 1: POST, 0: GET (and HEAD) */
} route;

static const route k_routes[] = {
    {"/v1/translate", SRV_EP_TRANSLATE, 1}, {"/translate", SRV_EP_LIBRE, 1},
    {"/languages", SRV_EP_LANGUAGES, 0},    {"/v1/models", SRV_EP_MODELS, 0},
    {"/health/live", SRV_EP_LIVE, 0},       {"/v2/health/live", SRV_EP_LIVE, 0},
    {"/health/ready", SRV_EP_READY, 0},     {"/v2/health/ready", SRV_EP_READY, 0},
    {"/metrics", SRV_EP_METRICS, 0},        {"/openapi.json", SRV_EP_OPENAPI, 0},
};

void srv_req_json(srv_req *r, int status, char *body)
{
    free(r->resp);
    r->status = status;
    r->resp = body;
    r->resp_len = body ? strlen(body) : 0;
    r->resp_ctype = "application/json";
}

void srv_req_error(srv_req *r, int status, const char *code, const char *param, const char *fmt,
                   ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:{s:s,s:s,s:o}}", "error", "code", code, "message", msg, "param",
                          param ? json_string(param) : json_null());
    char *body = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    if (!body) {
        /* Out of memory: still an error, never a 200. */
        status = 500;
        body = strdup("{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\","
                      "\"param\":null}}");
    }
    srv_req_json(r, status, body);
}

int srv_server_ready(const srv_server *s)
{
    if (!atomic_load(&s->ready) || atomic_load(&s->draining))
        return 0;
    for (int i = 0; i < s->n_models; i++)
        if (atomic_load(&s->models[i].failed))
            return 0;
    return 1;
}

/* Queues r's recorded response. Returns MHD_NO only when MHD refuses. */
static enum MHD_Result send_resp(struct MHD_Connection *c, srv_req *r)
{
    if (!r->resp) {
        srv_req_error(r, 500, "internal", NULL, "no response was produced");
        if (!r->resp)
            return MHD_NO;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r->resp_len, r->resp, MHD_RESPMEM_MUST_FREE);
    if (!resp)
        return MHD_NO;
    r->resp = NULL; /* owned by the response now */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            r->resp_ctype ? r->resp_ctype : "application/json");
    if (r->retry_after > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", r->retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, v);
    }
    if (r->allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (atomic_load(&r->s->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    r->phase = SRV_PH_RESPONDED;
    return ret;
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* The API key from "Authorization: Bearer KEY" or "X-API-Key: KEY". */
static const char *header_key(struct MHD_Connection *c)
{
    const char *a = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
    if (a && !strncasecmp(a, "Bearer ", 7))
        return a + 7;
    return header(c, "X-API-Key");
}

static void handle_get(srv_req *r)
{
    srv_server *s = r->s;
    switch (r->ep) {
    case SRV_EP_LIVE:
        srv_req_json(r, 200, strdup("{\"status\":\"ok\"}"));
        return;
    case SRV_EP_READY:
        if (atomic_load(&s->draining)) {
            srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
        } else if (!atomic_load(&s->ready)) {
            srv_req_error(r, 503, "not_ready", NULL, "the model is loading");
        } else {
            for (int i = 0; i < s->n_models; i++)
                if (atomic_load(&s->models[i].failed)) {
                    srv_req_error(r, 503, "device_error", NULL, "model %s: the device failed: %s",
                                  s->models[i].name, s->models[i].failed_msg);
                    return;
                }
            srv_req_json(r, 200, strdup("{\"status\":\"ready\"}"));
        }
        return;
    case SRV_EP_METRICS: {
        char *t = srv_metrics_render(s);
        if (!t) {
            srv_req_error(r, 500, "internal", NULL, "out of memory");
            return;
        }
        srv_req_json(r, 200, t);
        r->resp_ctype = "text/plain; version=0.0.4; charset=utf-8";
        return;
    }
    case SRV_EP_OPENAPI:
        srv_req_json(r, 200, strdup(srv_openapi_json));
        return;
    case SRV_EP_MODELS:
    case SRV_EP_LANGUAGES:
        if (!atomic_load(&s->ready)) {
            srv_req_error(r, 503, "not_ready", NULL, "the model is loading");
            return;
        }
        if (r->ep == SRV_EP_MODELS)
            srv_api_models(r);
        else
            srv_api_languages(r);
        return;
    default:
        srv_req_error(r, 500, "internal", NULL, "unrouted GET");
    }
}

/* First call: everything decidable from the request line and headers.
 * Returns 1 when a response was recorded. */
static int first_call(srv_req *r, struct MHD_Connection *c)
{
    srv_server *s = r->s;
    const route *rt = NULL;
    for (size_t i = 0; i < sizeof k_routes / sizeof k_routes[0]; i++)
        if (!strcmp(r->url, k_routes[i].path))
            rt = &k_routes[i];
    if (!rt) {
        r->ep = SRV_EP_UNKNOWN;
        srv_req_error(r, 404, "not_found", NULL, "no such endpoint: %s", r->url);
        return 1;
    }
    r->ep = rt->ep;
    int is_get = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
    if (rt->post ? strcmp(r->method, "POST") != 0 : !is_get) {
        r->allow = rt->post ? "POST" : "GET, HEAD";
        srv_req_error(r, 405, "method_not_allowed", NULL, "%s %s: allowed: %s", r->method,
                      r->url, r->allow);
        return 1;
    }
    if (!rt->post) {
        handle_get(r);
        return 1;
    }
    if (atomic_load(&s->draining)) {
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
        return 1;
    }
    if (!atomic_load(&s->ready)) {
        srv_req_error(r, 503, "not_ready", NULL, "the model is loading");
        r->retry_after = 1;
        return 1;
    }
    /* LibreTranslate may carry its key in the body: checked after parsing. */
    if (r->ep == SRV_EP_TRANSLATE && !srv_api_key_ok(s, header_key(c))) {
        srv_req_error(r, 401, "unauthorized", NULL, "a valid API key is required");
        return 1;
    }
    const char *ct = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
    size_t ctl = 0;
    while (ct && ct[ctl] && ct[ctl] != ';' && ct[ctl] != ' ')
        ctl++;
    int json = ct && ctl == 16 && !strncasecmp(ct, "application/json", 16);
    int form = ct && ctl == 33 && !strncasecmp(ct, "application/x-www-form-urlencoded", 33);
    if (!(json || (form && r->ep == SRV_EP_LIBRE))) {
        srv_req_error(r, 415, "unsupported_media_type", NULL,
                      "Content-Type must be application/json%s (got %s)",
                      r->ep == SRV_EP_LIBRE ? " or application/x-www-form-urlencoded" : "",
                      ct ? ct : "none");
        return 1;
    }
    const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        unsigned long long v = strtoull(cl, &end, 10);
        if (end == cl || *end || v > (unsigned long long)s->o.max_body_bytes) {
            srv_req_error(r, 413, "body_too_large", NULL, "the body exceeds %ld bytes",
                          s->o.max_body_bytes);
            return 1;
        }
        /* The declared size is capped above, so this allocation is bounded. */
        r->body_cap = (size_t)v + 1;
        r->body = malloc(r->body_cap);
        if (!r->body) {
            srv_req_error(r, 500, "internal", NULL, "out of memory");
            return 1;
        }
    }
    return 0;
}

static void append_body(srv_req *r, const char *data, size_t n)
{
    if (r->body_too_large)
        return;
    if (r->body_len + n > (size_t)r->s->o.max_body_bytes) {
        r->body_too_large = 1;
        return;
    }
    if (r->body_len + n + 1 > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap < r->body_len + n + 1)
            cap *= 2;
        char *p = realloc(r->body, cap);
        if (!p) {
            r->body_too_large = 1; /* reported as 500 below */
            free(r->body);
            r->body = NULL;
            r->body_len = 0;
            return;
        }
        r->body = p;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = 0;
}

/* The body is complete: parse it and (translations) submit the jobs. */
static enum MHD_Result body_done(srv_req *r, struct MHD_Connection *c)
{
    srv_server *s = r->s;
    if (r->body_too_large) {
        if (r->body)
            srv_req_error(r, 413, "body_too_large", NULL, "the body exceeds %ld bytes",
                          s->o.max_body_bytes);
        else
            srv_req_error(r, 500, "internal", NULL, "out of memory reading the body");
        return send_resp(c, r);
    }
    if (srv_now() > r->t0 + s->o.request_timeout_s) {
        srv_req_error(r, 504, "timeout", NULL, "the request took longer than %d s",
                      s->o.request_timeout_s);
        return send_resp(c, r);
    }
    if (!r->body) {
        r->body = strdup("");
        if (!r->body) {
            srv_req_error(r, 500, "internal", NULL, "out of memory");
            return send_resp(c, r);
        }
    }
    const char *ct = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
    int rc = r->ep == SRV_EP_TRANSLATE ? srv_api_translate_parse(r, ct, header_key(c))
                                       : srv_api_libre_parse(r, ct, header_key(c));
    if (rc != 1)
        return send_resp(c, r);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->task.conn = c;
    r->task.fd = ci ? ci->connect_fd : -1;
    r->task.deadline = r->t0 + s->o.request_timeout_s;
    atomic_init(&r->task.pending, r->n_jobs);
    srv_job **jp = malloc((size_t)r->n_jobs * sizeof *jp);
    if (!jp) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return send_resp(c, r);
    }
    for (int i = 0; i < r->n_jobs; i++)
        jp[i] = &r->jobs[i];
    /* Set before the submit: once queued, the phase is the batcher's cue. */
    r->phase = SRV_PH_QUEUED;
    srv_submit_rc sr = srv_batcher_submit(r->model->b, jp, r->n_jobs, c);
    free(jp);
    if (sr == SRV_SUBMIT_OK)
        return MHD_YES; /* suspended; the batcher resumes it */
    if (sr == SRV_SUBMIT_FULL) {
        srv_req_error(r, 429, "queue_full", NULL, "the queue is full; retry later");
        r->retry_after = 1;
    } else {
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
    }
    return send_resp(c, r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **req_cls)
{
    (void)version;
    srv_server *s = cls;
    srv_req *r = *req_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        r->s = s;
        r->method = method;
        r->url = url;
        r->t0 = srv_now();
        r->task.fd = -1;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && ci->client_addr) {
            const struct sockaddr *sa = ci->client_addr;
            if (sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
                          r->client, sizeof r->client);
            else if (sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                          r->client, sizeof r->client);
        }
        if (!r->client[0])
            snprintf(r->client, sizeof r->client, "-");
        atomic_fetch_add(&s->active, 1);
        *req_cls = r;
        if (first_call(r, c)) {
            /* A GET has no body to refuse: answering on the next call (the
             * request complete) keeps the connection alive. Anything else
             * is answered before its body is read, and MHD closes. */
            if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
                r->deferred = 1;
            else
                return send_resp(c, r);
        }
        return MHD_YES;
    }
    switch (r->phase) {
    case SRV_PH_BODY:
        if (*upload_size > 0) {
            /* The whole-request deadline also bounds a slow upload (the idle
             * timeout alone would let a trickle hold the slot forever); MHD
             * cannot answer mid-body, so the connection is closed. */
            if (srv_now() > r->t0 + s->o.request_timeout_s)
                return MHD_NO;
            if (!r->deferred)
                append_body(r, upload_data, *upload_size);
            *upload_size = 0;
            return MHD_YES;
        }
        if (r->deferred)
            return send_resp(c, r);
        return body_done(r, c);
    case SRV_PH_QUEUED:
        /* resumed: every job finished (or the submit failed) */
        if (!r->resp)
            srv_api_translate_respond(r);
        return send_resp(c, r);
    case SRV_PH_RESPONDED:
    default:
        *upload_size = 0;
        return MHD_YES;
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    srv_server *s = cls;
    srv_req *r = *req_cls;
    if (!r)
        return;
    double dt = srv_now() - r->t0;
    int status = r->phase == SRV_PH_RESPONDED ? r->status : 0;
    srv_metrics_request(s->metrics, r->ep, status, dt);
    /* One line per request; one fprintf so lines do not interleave. */
    fprintf(stderr, "%s \"%s %s\" %d %.1fms in=%ld out=%ld%s\n", r->client, r->method, r->url,
            status, dt * 1e3, r->tokens_in, r->tokens_out,
            toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (aborted)");
    srv_api_req_free(r);
    free(r->resp);
    free(r->body);
    free(r);
    *req_cls = NULL;
    atomic_fetch_sub(&s->active, 1);
}

int srv_http_start(srv_server *s, char *err, size_t errlen)
{
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", s->o.port);
    int gai = getaddrinfo(s->o.host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        snprintf(err, errlen, "--host %s: %s", s->o.host, gai_strerror(gai));
        return -1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(
        flags, (uint16_t)s->o.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->o.http_threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)s->o.max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)s->o.max_connections_per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)s->o.idle_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s:%d", s->o.host, s->o.port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : (uint16_t)s->o.port;
    return 0;
}

void srv_http_quiesce(srv_server *s)
{
    if (!s->d)
        return;
    /* The socket is ours to close, but only after MHD_stop_daemon: a pool
     * thread may still be polling it. */
    s->quiesced_fd = MHD_quiesce_daemon(s->d);
    /* Still open, the socket would let the kernel complete new handshakes
     * into a backlog nobody accepts; shut down, new clients are refused at
     * once (and the descriptor cannot be reused under MHD's feet). */
    if (s->quiesced_fd >= 0)
        shutdown(s->quiesced_fd, SHUT_RDWR);
}

void srv_http_stop(srv_server *s)
{
    if (s->d)
        MHD_stop_daemon(s->d);
    s->d = NULL;
    if (s->quiesced_fd >= 0)
        close(s->quiesced_fd);
    s->quiesced_fd = -1;
}
