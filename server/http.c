/*
 * http.c - the libmicrohttpd side of the daemon: one access handler and one
 * completion callback, following MHD's own request lifecycle.
 *
 *   1st call    route (404/405), readiness (503), API key (401), content
 *               type (415), Content-Length cap (413) - all before any body
 *               byte is read; GET endpoints answer here.
 *   body calls  the raw body is appended to a buffer capped at
 *               --max-body-bytes (no PostProcessor).
 *   last call   api.c parses and tokenizes; a translation submits its jobs
 *               to the model's batcher with job_done as their completion,
 *               and suspends the connection.
 *   resumed     the last job's completion resumed the connection: api.c
 *               builds the response from the results.
 *   completed   access-log line, metrics, free.
 *
 * Per-request state lives in *req_cls (http_req). Its lifetime while jobs
 * are queued: pending counts the unfinished jobs plus one reference held
 * by the handler until the connection is suspended; whoever drops the last
 * reference resumes the connection and touches the request no more. Only
 * after that can MHD call the handler again and, once the response is
 * sent or the connection dies, on_completed, which frees the request. So
 * a job whose client left, a job that expired (504), one dropped by the
 * drain and a failed one all reach job_done while the request is alive,
 * and nothing touches it after its free. Every error is docs/api.md's
 * error object with its status, built by api.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "api.h"
#include "batcher.h"
#include "clock.h"
#include "http.h"
#include "libre.h"
#include "metrics.h"
#include "state.h"
#include "web.h"

struct srv_http {
    srv_server *s;
    struct MHD_Daemon *d;
    uint16_t port;
    int quiesced_fd;       /* MHD_quiesce_daemon's listen socket, closed after stop */
    atomic_long active;    /* requests accepted and not yet completed */
};

typedef enum http_phase {
    HTTP_PH_BODY = 0,   /* reading the body */
    HTTP_PH_QUEUED,     /* jobs submitted, connection suspended */
    HTTP_PH_RESPONDED,  /* a response was queued */
} http_phase;

/* One request. Owned by the HTTP thread running its handler, except while
 * its jobs are the batcher's: then job_done and client_left (scheduler
 * threads) read conn, fd and the api part's model, and drop references. */
typedef struct http_req {
    srv_req api;             /* what the endpoints see; api.body is ours */
    srv_http *h;
    const char *method, *url;  /* MHD's, valid for the request's life */
    char client[64];
    double t0;
    http_phase phase;
    size_t body_cap;
    int body_too_large;
    int deferred;            /* a response is recorded; sent when the request is complete */
    struct MHD_Connection *conn;
    int fd;                  /* the client socket, polled for EOF before a job runs */
    atomic_int pending;      /* unfinished jobs + the handler's reference */
} http_req;

static const char *header(struct MHD_Connection *c, const char *name);

/* Queues r's recorded response. Returns MHD_NO only when MHD refuses. */
static enum MHD_Result send_resp(struct MHD_Connection *c, http_req *hr)
{
    srv_req *r = &hr->api;
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
    if (r->status != 204)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                r->resp_ctype ? r->resp_ctype : "application/json");
    if (r->disposition)
        MHD_add_response_header(resp, "Content-Disposition", r->disposition);
    /* CORS (--cors-origins) on every response, preflights included */
    const char *cors[SRV_CORS_MAX][2];
    char cbuf[128];
    int nc = srv_libre_cors(&r->s->o, header(c, "Origin"), !strcmp(hr->method, "OPTIONS"),
                            r->allow, cors, cbuf, sizeof cbuf);
    for (int i = 0; i < nc; i++)
        MHD_add_response_header(resp, cors[i][0], cors[i][1]);
    if (r->retry_after > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", r->retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, v);
    }
    if (r->allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    const char *wn, *wv;
    for (int i = 0; r->ep == SRV_EP_WEB && srv_web_header(hr->url, i, &wn, &wv); i++)
        MHD_add_response_header(resp, wn, wv);
    if (r->status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (atomic_load(&r->s->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    hr->phase = HTTP_PH_RESPONDED;
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

/* First call: everything decidable from the request line and headers.
 * Returns 1 when a response was recorded. */
static int first_call(http_req *hr, struct MHD_Connection *c)
{
    srv_req *r = &hr->api;
    srv_server *s = r->s;
    if (srv_web_answer(r, hr->method, hr->url, header(c, MHD_HTTP_HEADER_IF_NONE_MATCH)))
        return 1;
    const srv_route *rt = srv_api_route(hr->url);
    if (!rt) {
        r->ep = SRV_EP_UNKNOWN;
        srv_req_error(r, 404, "not_found", NULL, "no such endpoint: %s", hr->url);
        return 1;
    }
    r->ep = rt->ep;
    int post = rt->method == SRV_METHOD_POST;
    int is_get = !strcmp(hr->method, "GET") || !strcmp(hr->method, "HEAD");
    const char *allow = post ? "POST" : rt->method == SRV_METHOD_GET ? "GET, HEAD"
                                                                    : "GET, HEAD, POST";
    if (!strcmp(hr->method, "OPTIONS")) {
        /* a CORS preflight (or a plain OPTIONS): 204 with Allow and the CORS
         * headers */
        r->allow = allow;
        srv_req_json(r, 204, strdup(""));
        return 1;
    }
    if (rt->method == SRV_METHOD_GET_POST && !strcmp(hr->method, "POST"))
        post = 0, is_get = 1; /* answered as a GET; the body is read and ignored */
    if (post ? strcmp(hr->method, "POST") != 0 : !is_get) {
        r->allow = allow;
        srv_req_error(r, 405, "method_not_allowed", NULL, "%s %s: allowed: %s", hr->method,
                      hr->url, r->allow);
        return 1;
    }
    if (!post) {
        srv_api_get(r);
        return 1;
    }
    /* A device failure is not refused here: it is reported after the body
     * (and the API key in it) was read, by api.c. */
    switch (srv_server_readiness(s, NULL)) {
    case SRV_NOT_READY_DRAINING:
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
        return 1;
    case SRV_NOT_READY_LOADING:
        srv_req_error(r, 503, "not_ready", NULL, "the model is loading");
        r->retry_after = 1;
        return 1;
    case SRV_READY:
    case SRV_NOT_READY_DEVICE:
        break;
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
    /* LibreTranslate's endpoints read JSON, forms and multipart, and treat
     * any other body as no fields (libre.c) */
    if (!json && !srv_libre_endpoint(r->ep)) {
        srv_req_error(r, 415, "unsupported_media_type", NULL,
                      "Content-Type must be application/json (got %s)", ct ? ct : "none");
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
        hr->body_cap = (size_t)v + 1;
        r->body = malloc(hr->body_cap);
        if (!r->body) {
            srv_req_error(r, 500, "internal", NULL, "out of memory");
            return 1;
        }
    }
    return 0;
}

static void append_body(http_req *hr, const char *data, size_t n)
{
    srv_req *r = &hr->api;
    if (hr->body_too_large)
        return;
    if (r->body_len + n > (size_t)r->s->o.max_body_bytes) {
        hr->body_too_large = 1;
        return;
    }
    if (r->body_len + n + 1 > hr->body_cap) {
        size_t cap = hr->body_cap ? hr->body_cap : 4096;
        while (cap < r->body_len + n + 1)
            cap *= 2;
        char *p = realloc(r->body, cap);
        if (!p) {
            hr->body_too_large = 1; /* reported as 500 below */
            free(r->body);
            r->body = NULL;
            r->body_len = 0;
            return;
        }
        r->body = p;
        hr->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = 0;
}

/* Drops one reference to hr's jobs (see the top of the file): the last
 * one resumes the connection, after which hr may be freed at any moment by
 * an HTTP thread, so it is not touched again. */
static void release(http_req *hr)
{
    struct MHD_Connection *c = hr->conn;
    if (atomic_fetch_sub(&hr->pending, 1) == 1)
        MHD_resume_connection(c);
}

/* The completion of every job (a scheduler thread, or the main thread in
 * a drain): api.c takes note of the outcome, then the job's reference is
 * dropped. */
static void job_done(srv_job *j, void *ud)
{
    http_req *hr = ud;
    srv_api_job_finished(&hr->api, j);
    release(hr);
}

/* A client that closed its end shows EOF (or an error) on a peek. Data it
 * pipelined is not EOF. */
static int client_gone(int fd)
{
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL))
        return 1;
    char ch;
    ssize_t k = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* The batcher's gone hook: the connection is suspended (so MHD does not
 * read the socket) and hr is alive while the job is unfinished. */
static int client_left(void *ud)
{
    const http_req *hr = ud;
    return client_gone(hr->fd);
}

/* Submits a parsed translation's jobs and suspends the connection; on a
 * refusal (429, 503) responds at once. */
static enum MHD_Result submit(http_req *hr, struct MHD_Connection *c)
{
    srv_req *r = &hr->api;
    srv_server *s = r->s;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    hr->conn = c;
    hr->fd = ci ? ci->connect_fd : -1;
    /* One reference per job plus the handler's own, dropped once the
     * connection is suspended: no completion can resume it before. */
    atomic_init(&hr->pending, r->n_jobs + 1);
    /* Set before the submit: once queued, the phase is the resumed
     * handler's cue. */
    hr->phase = HTTP_PH_QUEUED;
    const srv_completion done = {.done = job_done, .gone = client_left, .ud = hr};
    srv_submit_rc sr = srv_batcher_submit(r->model->b, r->jobs, r->n_jobs,
                                          hr->t0 + s->o.request_timeout_s, &done);
    if (sr == SRV_SUBMIT_OK) {
        MHD_suspend_connection(c);
        release(hr);
        return MHD_YES; /* the last completion resumes it */
    }
    if (sr == SRV_SUBMIT_FULL) {
        srv_req_error(r, 429, "queue_full", NULL, "the queue is full; retry later");
        r->retry_after = 1;
    } else {
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
    }
    return send_resp(c, hr);
}

/* The body is complete: parse it and (translations) submit the jobs. */
static enum MHD_Result body_done(http_req *hr, struct MHD_Connection *c)
{
    srv_req *r = &hr->api;
    srv_server *s = r->s;
    if (hr->body_too_large) {
        if (r->body)
            srv_req_error(r, 413, "body_too_large", NULL, "the body exceeds %ld bytes",
                          s->o.max_body_bytes);
        else
            srv_req_error(r, 500, "internal", NULL, "out of memory reading the body");
        return send_resp(c, hr);
    }
    if (srv_now() > hr->t0 + s->o.request_timeout_s) {
        srv_req_error(r, 504, "timeout", NULL, "the request took longer than %d s",
                      s->o.request_timeout_s);
        return send_resp(c, hr);
    }
    if (!r->body) {
        r->body = strdup("");
        if (!r->body) {
            srv_req_error(r, 500, "internal", NULL, "out of memory");
            return send_resp(c, hr);
        }
    }
    const char *ct = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
    int rc = r->ep == SRV_EP_TRANSLATE ? srv_api_translate_parse(r, ct, header_key(c))
                                       : srv_libre_parse(r, ct, header_key(c));
    if (rc != 1)
        return send_resp(c, hr);
    return submit(hr, c);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **req_cls)
{
    (void)version;
    srv_http *h = cls;
    srv_server *s = h->s;
    http_req *hr = *req_cls;
    if (!hr) {
        hr = calloc(1, sizeof *hr);
        if (!hr)
            return MHD_NO;
        hr->api.s = s;
        hr->api.path = url;
        hr->api.host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
        hr->h = h;
        hr->method = method;
        hr->url = url;
        hr->t0 = srv_now();
        hr->fd = -1;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && ci->client_addr) {
            const struct sockaddr *sa = ci->client_addr;
            if (sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
                          hr->client, sizeof hr->client);
            else if (sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                          hr->client, sizeof hr->client);
        }
        if (!hr->client[0])
            snprintf(hr->client, sizeof hr->client, "-");
        atomic_fetch_add(&h->active, 1);
        *req_cls = hr;
        if (first_call(hr, c)) {
            /* A GET has no body to refuse: answering on the next call (the
             * request complete) keeps the connection alive. Anything else
             * is answered before its body is read, and MHD closes. */
            if (!strcmp(method, "GET") || !strcmp(method, "HEAD") || hr->api.status < 300)
                hr->deferred = 1;
            else
                return send_resp(c, hr);
        }
        return MHD_YES;
    }
    switch (hr->phase) {
    case HTTP_PH_BODY:
        if (*upload_size > 0) {
            /* The whole-request deadline also bounds a slow upload (the idle
             * timeout alone would let a trickle hold the slot forever); MHD
             * cannot answer mid-body, so the connection is closed. */
            if (srv_now() > hr->t0 + s->o.request_timeout_s)
                return MHD_NO;
            if (!hr->deferred)
                append_body(hr, upload_data, *upload_size);
            *upload_size = 0;
            return MHD_YES;
        }
        if (hr->deferred)
            return send_resp(c, hr);
        return body_done(hr, c);
    case HTTP_PH_QUEUED:
        /* resumed: every job finished (or the submit failed) */
        if (!hr->api.resp)
            srv_api_translate_respond(&hr->api);
        return send_resp(c, hr);
    case HTTP_PH_RESPONDED:
    default:
        *upload_size = 0;
        return MHD_YES;
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    srv_http *h = cls;
    http_req *hr = *req_cls;
    if (!hr)
        return;
    const srv_req *r = &hr->api;
    double dt = srv_now() - hr->t0;
    int status = hr->phase == HTTP_PH_RESPONDED ? r->status : 0;
    srv_metrics_request(h->s->metrics, r->ep, status, dt);
    /* One line per request; one fprintf so lines do not interleave. */
    fprintf(stderr, "%s \"%s %s\" %d %.1fms in=%ld out=%ld%s\n", hr->client, hr->method,
            hr->url, status, dt * 1e3, r->tokens_in, r->tokens_out,
            toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (aborted)");
    srv_api_req_free(&hr->api);
    free(hr->api.body);
    free(hr);
    *req_cls = NULL;
    atomic_fetch_sub(&h->active, 1);
}

int srv_http_start(srv_http **out, srv_server *s, char *err, size_t errlen)
{
    *out = NULL;
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
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    h->s = s;
    h->quiesced_fd = -1;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(
        flags, (uint16_t)s->o.port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->o.http_threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)s->o.max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)s->o.max_connections_per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)s->o.idle_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s:%d", s->o.host, s->o.port);
        free(h);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : (uint16_t)s->o.port;
    *out = h;
    return 0;
}

uint16_t srv_http_port(const srv_http *h)
{
    return h->port;
}

long srv_http_active(const srv_http *h)
{
    return atomic_load(&h->active);
}

void srv_http_quiesce(srv_http *h)
{
    if (!h || !h->d)
        return;
    /* The socket is ours to close, but only after MHD_stop_daemon: a pool
     * thread may still be polling it. */
    h->quiesced_fd = MHD_quiesce_daemon(h->d);
    /* Still open, the socket would let the kernel complete new handshakes
     * into a backlog nobody accepts; shut down, new clients are refused at
     * once (and the descriptor cannot be reused under MHD's feet). */
    if (h->quiesced_fd >= 0)
        shutdown(h->quiesced_fd, SHUT_RDWR);
}

void srv_http_stop(srv_http *h)
{
    if (!h)
        return;
    if (h->d)
        MHD_stop_daemon(h->d);
    if (h->quiesced_fd >= 0)
        close(h->quiesced_fd);
    free(h);
}
