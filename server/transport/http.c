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
 *               and suspends the connection; a model load or reload goes
 *               to the model manager (models.h) with op_done, suspended
 *               the same way.
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
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "api.h"
#include "batcher.h"
#include "clock.h"
#include "http.h"
#include "libre.h"
#include "reqlimits.h"
#include "metrics.h"
#include "models.h"
#include "state.h"
#include "web.h"

/* One open connection, from MHD's NOTIFY_CONNECTION STARTED to CLOSED: the
 * deadline of the phase it is in (the slow-sender watchdog below). */
typedef struct http_conn {
    struct http_conn *prev, *next;
    int fd;
    double deadline;   /* 0: none (its jobs are queued: the batcher's deadline) */
    const char *phase; /* "headers" | "body" | "response" */
    int cut;           /* the watchdog shut it down */
} http_conn;

struct srv_http {
    srv_server *s;
    struct MHD_Daemon *d;
    uint16_t port;
    int quiesced_fd;       /* MHD_quiesce_daemon's listen socket, closed after stop */
    atomic_long active;    /* requests accepted and not yet completed */
    atomic_ulong next_id;  /* request ids (X-Request-Id, the access log) */
    int json_log;          /* --log-format json */
    /* The watchdog: every open connection and its phase deadline. */
    pthread_mutex_t conns_mu;
    pthread_cond_t stop_cv;
    http_conn *conns;
    int stopping;          /* under conns_mu */
    int watchdog_on;
    pthread_t watchdog;
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
    int started;             /* the handler's first call initialised the rest */
    int nul_in_path;         /* the raw path has %00 (seen by the URI log callback) */
    int close;               /* a framing error: answer with Connection: close */
    unsigned long id;
    char client[64];
    char abs_host[256]; /* the authority of an absolute-form target */
    char *query;        /* the raw query string (on_uri), malloc'd, or NULL */
    double t0;
    http_phase phase;
    size_t body_cap;
    int body_too_large;
    int body_oom;            /* the body buffer could not grow (500) */
    int deferred;            /* a response is recorded; sent when the request is complete */
    struct MHD_Connection *conn;
    int fd;                  /* the client socket, polled for EOF before a job runs */
    atomic_int pending;      /* unfinished jobs + the handler's reference */
} http_req;

static const char *header(struct MHD_Connection *c, const char *name);
static void set_deadline(srv_http *h, struct MHD_Connection *c, const char *phase,
                         double deadline);

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
    char id[24];
    snprintf(id, sizeof id, "%lu", hr->id);
    MHD_add_response_header(resp, "X-Request-Id", id);
    if (hr->close || atomic_load(&r->s->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    /* A slow reader has the request's timeout again to take the answer. */
    set_deadline(hr->h, c, "response", srv_now() + r->s->o.request_timeout_s);
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

/* Sets the phase deadline of c's connection (see the watchdog below). */
static void set_deadline(srv_http *h, struct MHD_Connection *c, const char *phase,
                         double deadline)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    http_conn *hc = ci ? ci->socket_context : NULL;
    if (!hc)
        return;
    pthread_mutex_lock(&h->conns_mu);
    hc->deadline = deadline;
    hc->phase = phase;
    pthread_mutex_unlock(&h->conns_mu);
}

/* What the framing check counts over the request's headers. */
typedef struct framing {
    int n_cl, n_te, n_host, ctl;
    const char *te;
} framing;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH))
        f->n_cl++;
    else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        f->n_te++;
        f->te = value;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_HOST))
        f->n_host++;
    /* A bare CR (MHD ends a line only at CRLF or LF) or any other control
     * byte but HTAB in a name or a value. */
    for (size_t i = 0; i < key_size; i++)
        if ((unsigned char)key[i] < 0x21 || key[i] == 0x7f)
            f->ctl = 1;
    for (size_t i = 0; value && i < value_size; i++)
        if (((unsigned char)value[i] < 0x20 && value[i] != '\t') || value[i] == 0x7f)
            f->ctl = 1;
    return MHD_YES;
}

#if MHD_VERSION <= 0x00097599
/* A NUL inside a header value: MHD 0.9.75 stores values by strlen, so the
 * bytes after the NUL vanish (a proxy may see them). MHD keeps the header
 * block in place in its read buffer, [method, method + header size), with
 * each ':' and each line end (CR, LF) replaced by NUL: walking the block
 * from header to header, only those NULs may lie between a value's end and
 * the next name (two to four after the last value: its line end and the
 * empty line). Anything else - a client's NUL and what followed it, or a
 * folded line MHD copied elsewhere - fails the walk. */
typedef struct nul_walk {
    const char *end, *pos; /* pos: where the next name must start; NULL: failed */
    int first;
} nul_walk;

static enum MHD_Result walk_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    nul_walk *w = cls;
    if (!w->pos)
        return MHD_NO;
    if (!w->first) { /* the previous line's end: one or two NULs */
        size_t gap = (size_t)(key - w->pos);
        if (key < w->pos || gap < 1 || gap > 2 || w->pos[0] || w->pos[gap - 1]) {
            w->pos = NULL;
            return MHD_NO;
        }
    }
    w->first = 0;
    const char *p = key + key_size;
    if (key < w->pos || p >= w->end || *p || !value || value < p || value > w->end) {
        w->pos = NULL;
        return MHD_NO;
    }
    for (p++; p < value; p++)
        if (*p != ' ' && *p != '\t') {
            w->pos = NULL;
            return MHD_NO;
        }
    w->pos = value + value_size;
    return MHD_YES;
}

static int header_has_nul(struct MHD_Connection *c, const char *method)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (!ci || !method)
        return 0;
    nul_walk w = {.end = method + ci->header_size, .pos = method, .first = 1};
    if (MHD_get_connection_values_n(c, MHD_HEADER_KIND, walk_header, &w) == 0)
        return 0;
    if (!w.pos || w.pos > w.end)
        return 1;
    size_t gap = (size_t)(w.end - w.pos);
    if (gap < 2 || gap > 4)
        return 1;
    for (size_t i = 0; i < gap; i++)
        if (w.pos[i])
            return 1;
    return 0;
}
#else
static int header_has_nul(struct MHD_Connection *c, const char *method)
{
    (void)c;
    (void)method; /* later libmicrohttpd versions refuse a NUL in a header themselves */
    return 0;
}
#endif

/* RFC 9112's framing rules that libmicrohttpd 0.9.75 does not enforce
 * (docs/api.md, "HTTP framing"): one Content-Length at most, never with
 * Transfer-Encoding; Transfer-Encoding only "chunked"; exactly one Host in
 * HTTP/1.1; no control bytes in header fields. Records a 400 (501 for an
 * unknown transfer coding) and returns 1 when the request breaks one; the
 * connection is then closed after the answer, since where its next request
 * starts is unknown. */
static int framing_error(http_req *hr, struct MHD_Connection *c, const char *version)
{
    if (header_has_nul(c, hr->method)) {
        hr->close = 1;
        srv_req_error(&hr->api, 400, "bad_request", NULL,
                      "malformed request: a NUL byte or a folded line in a header field");
        return 1;
    }
    srv_req *r = &hr->api;
    framing f = {0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, count_header, &f);
    const char *why = NULL;
    if (f.n_cl > 1)
        why = "more than one Content-Length header";
    else if (f.n_te > 1)
        why = "more than one Transfer-Encoding header";
    else if (f.n_cl && f.n_te)
        why = "both Content-Length and Transfer-Encoding";
    else if (f.ctl)
        why = "a control character in a header field";
    else if (f.n_host > 1 || (f.n_host == 0 && version && !strcmp(version, "HTTP/1.1")))
        why = f.n_host ? "more than one Host header" : "no Host header";
    if (why) {
        hr->close = 1;
        srv_req_error(r, 400, "bad_request", NULL, "malformed request: %s", why);
        return 1;
    }
    if (f.n_te && strcasecmp(f.te, "chunked") != 0) {
        hr->close = 1;
        srv_req_error(r, 501, "not_implemented", NULL,
                      "Transfer-Encoding: only chunked is supported");
        return 1;
    }
    return 0;
}

/* First call: everything decidable from the request line and headers.
 * Returns 1 when a response was recorded. */
static int first_call(http_req *hr, struct MHD_Connection *c, const char *version)
{
    srv_req *r = &hr->api;
    srv_server *s = r->s;
    if (framing_error(hr, c, version))
        return 1;
    if (hr->nul_in_path) {
        /* MHD decodes %00 in place: the path would end there. */
        r->ep = SRV_EP_UNKNOWN;
        srv_req_error(r, 400, "bad_request", NULL, "the path contains an encoded NUL byte");
        return 1;
    }
    if (srv_web_answer(r, hr->method, hr->url, header(c, MHD_HTTP_HEADER_IF_NONE_MATCH)))
        return 1;
    const srv_route *rt = srv_api_route(hr->url);
    /* The path and method go into a JSON message: escaped, they are valid
     * UTF-8 (jansson refuses anything else, which would make a 500). */
    char path[256], method[64];
    srv_log_escape(path, sizeof path, hr->url);
    srv_log_escape(method, sizeof method, hr->method);
    if (!rt) {
        r->ep = SRV_EP_UNKNOWN;
        srv_req_error(r, 404, "not_found", NULL, "no such endpoint: %s", path);
        return 1;
    }
    r->ep = rt->ep;
    int post = rt->method == SRV_METHOD_POST;
    int is_get = !strcmp(hr->method, "GET") || !strcmp(hr->method, "HEAD");
    const char *allow = post ? "POST" : rt->method == SRV_METHOD_GET ? "GET, HEAD"
                                                                    : "GET, HEAD, POST";
    /* the model endpoints: GET lists, POST loads; NAME: DELETE unloads,
     * NAME/reload: POST reloads */
    size_t ul = strlen(hr->url);
    int reload = rt->method == SRV_METHOD_ADMIN && ul > 7 && !strcmp(hr->url + ul - 7, "/reload");
    if (rt->method == SRV_METHOD_ADMIN)
        allow = reload ? "POST" : "DELETE";
    int admin = (rt->method == SRV_METHOD_GET_LOAD && !strcmp(hr->method, "POST")) ||
                (rt->method == SRV_METHOD_ADMIN &&
                 !strcmp(hr->method, reload ? "POST" : "DELETE"));
    if (!strcmp(hr->method, "OPTIONS")) {
        /* a CORS preflight (or a plain OPTIONS): 204 with Allow and the CORS
         * headers */
        r->allow = allow;
        srv_req_json(r, 204, strdup(""));
        return 1;
    }
    if (rt->method == SRV_METHOD_GET_POST && !strcmp(hr->method, "POST"))
        post = 0, is_get = 1; /* answered as a GET; the body is read and ignored */
    if (admin) {
        post = 1;
    } else if (rt->method == SRV_METHOD_ADMIN ||
               (post ? strcmp(hr->method, "POST") != 0 : !is_get)) {
        r->allow = allow;
        srv_req_error(r, 405, "method_not_allowed", NULL, "%s %s: allowed: %s", method, path,
                      r->allow);
        return 1;
    }
    if (!post) {
        srv_api_get(r);
        return 1;
    }
    /* A device failure is not refused here: it is reported after the body
     * (and the API key in it) was read, by api.c. */
    switch (srv_server_readiness(s, NULL, 0)) {
    case SRV_NOT_READY_DRAINING:
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
        return 1;
    case SRV_NOT_READY_LOADING:
        srv_req_error(r, 503, "not_ready", NULL, "the models are loading");
        r->retry_after = 1;
        return 1;
    case SRV_READY:
    case SRV_NOT_READY_DEVICE:
        break;
    }
    /* LibreTranslate may carry its key in the body: checked after parsing. */
    if ((r->ep == SRV_EP_TRANSLATE || admin) && !srv_api_key_ok(s, header_key(c))) {
        srv_req_error(r, 401, "unauthorized", NULL, "a valid API key is required");
        return 1;
    }
    if (admin && !strcmp(hr->method, "DELETE")) {
        srv_api_model_delete(r);
        return 1;
    }
    const char *ct = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
    size_t ctl = 0;
    while (ct && ct[ctl] && ct[ctl] != ';' && ct[ctl] != ' ')
        ctl++;
    int json = ct && ctl == 16 && !strncasecmp(ct, "application/json", 16);
    /* LibreTranslate's endpoints read JSON, forms and multipart, and treat
     * any other body as no fields (libre.c) */
    if (!json && !srv_libre_endpoint(r->ep) && r->ep != SRV_EP_MODEL_ADMIN) {
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
            hr->body_oom = 1;
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
    /* --fair-share client: the client's address owns the request's share of
     * the queue (FNV-1a), so that one client's many requests share one; by
     * default (0) each request has its own (behind a proxy, or on
     * loopback, every client has one address) */
    uint64_t owner = 0;
    if (s->o.fair_share == SRV_SHARE_CLIENT) {
        owner = 1469598103934665603ULL;
        for (const char *p = hr->client; *p; p++)
            owner = (owner ^ (unsigned char)*p) * 1099511628211ULL;
        owner += !owner;
    }
    const srv_completion done = {.done = job_done, .gone = client_left, .ud = hr,
                                 .owner = owner};
    srv_submit_rc sr = srv_batcher_submit(r->model->b, r->jobs, r->n_jobs,
                                          hr->t0 + s->o.request_timeout_s, &done);
    if (sr == SRV_SUBMIT_OK) {
        set_deadline(hr->h, c, "queued", 0); /* the batcher's deadline from here */
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

/* The completion of a load or reload (the model manager's thread): the
 * outcome is in the request's op; its reference is dropped. */
static void op_done(srv_model_op *op, void *ud)
{
    (void)op;
    release(ud);
}

/* Hands a parsed load or reload to the model manager and suspends the
 * connection until it is done (a load takes seconds: no HTTP thread waits
 * for it). */
static enum MHD_Result submit_op(http_req *hr, struct MHD_Connection *c)
{
    srv_req *r = &hr->api;
    hr->conn = c;
    atomic_init(&hr->pending, 2); /* the operation's and the handler's */
    hr->phase = HTTP_PH_QUEUED;
    r->op->done = op_done;
    r->op->ud = hr;
    srv_models_submit(r->s->models, r->op);
    set_deadline(hr->h, c, "queued", 0);
    MHD_suspend_connection(c);
    release(hr);
    return MHD_YES;
}

/* The body is complete: parse it and (translations) submit the jobs. */
static enum MHD_Result body_done(http_req *hr, struct MHD_Connection *c)
{
    srv_req *r = &hr->api;
    srv_server *s = r->s;
    if (hr->body_too_large) {
        if (!hr->body_oom)
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
    if (r->ep == SRV_EP_MODELS || r->ep == SRV_EP_MODEL_ADMIN) {
        if (srv_api_admin_parse(r) != 1)
            return send_resp(c, hr);
        return submit_op(hr, c);
    }
    int rc = r->ep == SRV_EP_TRANSLATE ? srv_api_translate_parse(r, ct, header_key(c))
                                       : srv_libre_parse(r, ct, header_key(c));
    if (rc != 1)
        return send_resp(c, hr);
    return submit(hr, c);
}

/* The path of a request target: an absolute-form target ("http://host:port/
 * path", RFC 9112 section 3.2.2, which servers must accept; proxies send it)
 * gives its path ("/" when it has none) and its authority in host (which
 * then stands for the Host header); any other target is its own path and
 * host is "". */
static const char *origin_form(const char *url, char *host, size_t n)
{
    host[0] = 0;
    size_t skip = !strncasecmp(url, "http://", 7) ? 7 : !strncasecmp(url, "https://", 8) ? 8 : 0;
    if (!skip)
        return url;
    const char *auth = url + skip, *slash = strchr(auth, '/');
    size_t alen = slash ? (size_t)(slash - auth) : strlen(auth);
    snprintf(host, n, "%.*s", (int)(alen < n ? alen : n - 1), auth);
    return slash ? slash : "/";
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **req_cls)
{
    srv_http *h = cls;
    srv_server *s = h->s;
    http_req *hr = *req_cls;
    if (!hr || !hr->started) {
        if (!hr)
            hr = calloc(1, sizeof *hr);
        if (!hr)
            return MHD_NO;
        hr->started = 1;
        hr->id = atomic_fetch_add(&h->next_id, 1) + 1;
        hr->api.s = s;
        hr->api.host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
        hr->api.query = hr->query;
        url = origin_form(url, hr->abs_host, sizeof hr->abs_host);
        if (hr->abs_host[0])
            hr->api.host = hr->abs_host;
        hr->api.path = url;
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
        /* The body (or a GET's end) must arrive within the request's
         * deadline however slowly it trickles in. */
        set_deadline(h, c, "body", hr->t0 + s->o.request_timeout_s);
        if (first_call(hr, c, version)) {
            /* A GET has no body to refuse: answering on the next call (the
             * request complete) keeps the connection alive. Anything else
             * is answered before its body is read, and MHD closes. */
            if (!hr->close &&
                (!strcmp(method, "GET") || !strcmp(method, "HEAD") || hr->api.status < 300))
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
            /* A body past --max-body-bytes (chunked: its size was not
             * declared) is not read to its end: MHD 0.9.75 cannot answer
             * mid-upload, so the connection is closed at once. */
            if (hr->body_too_large)
                return MHD_NO;
            return MHD_YES;
        }
        if (hr->deferred)
            return send_resp(c, hr);
        return body_done(hr, c);
    case HTTP_PH_QUEUED:
        /* resumed: every job finished (or the submit failed), or the
         * model operation did */
        if (!hr->api.resp && hr->api.op)
            srv_api_admin_respond(&hr->api);
        else if (!hr->api.resp)
            srv_api_translate_respond(&hr->api);
        return send_resp(c, hr);
    case HTTP_PH_RESPONDED:
    default:
        *upload_size = 0;
        return MHD_YES;
    }
}

/* Copies s into dst (cap bytes, NUL-terminated) for the access log: a
 * control byte, DEL, '"', '\\' and every byte that is not part of valid
 * UTF-8 become \xHH (or \" and \\), so that a client cannot forge lines or
 * send terminal escapes through a path or a method. Cut with "..." when
 * too long. */
void srv_log_escape(char *dst, size_t cap, const char *s)
{
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    if (cap == 0)
        return;
    while (*p) {
        char tmp[8];
        size_t k = 0, adv = 1;
        unsigned c = *p;
        size_t ulen = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2
                      : (c >= 0xe0 && c <= 0xef) ? 3 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
        int valid = ulen > 1;
        for (size_t i = 1; valid && i < ulen; i++)
            valid = (p[i] & 0xc0) == 0x80;
        if (valid && ulen == 3)
            valid = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
        if (valid && ulen == 4)
            valid = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
        if (valid) {
            memcpy(tmp, p, ulen);
            k = adv = ulen;
        } else if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            k = 2;
        } else if (c < 0x20 || c >= 0x7f) {
            k = (size_t)snprintf(tmp, sizeof tmp, "\\x%02X", c);
        } else {
            tmp[0] = (char)c;
            k = 1;
        }
        if (n + k + 4 > cap) { /* room for "..." and the NUL */
            if (cap >= 4) {
                memcpy(dst + n, "...", 3);
                n += 3;
            }
            break;
        }
        memcpy(dst + n, tmp, k);
        n += k;
        p += adv;
    }
    dst[n < cap ? n : cap - 1] = 0;
}

static void log_request(const srv_http *h, const http_req *hr, int status, double dt,
                        int aborted)
{
    const srv_req *r = &hr->api;
    char method[64], path[1024];
    srv_log_escape(method, sizeof method, hr->method);
    srv_log_escape(path, sizeof path, hr->url);
    if (!h->json_log) {
        /* One line per request; one fprintf so lines do not interleave. */
        fprintf(stderr, "%s \"%s %s\" %d %.1fms in=%ld out=%ld%s\n", hr->client, method, path,
                status, dt * 1e3, r->tokens_in, r->tokens_out, aborted ? " (aborted)" : "");
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* The escaped strings are valid UTF-8: json_string cannot refuse them. */
    json_t *j = json_pack("{s:f,s:I,s:s,s:s,s:s,s:o,s:i,s:I,s:I,s:i,s:f,s:b}", "time",
                          (double)ts.tv_sec + ts.tv_nsec * 1e-9, "id", (json_int_t)hr->id,
                          "client", hr->client, "method", method, "path", path, "model",
                          r->model ? json_string(r->model->name) : json_null(), "texts",
                          r->n_jobs, "tokens_in", (json_int_t)r->tokens_in, "tokens_out",
                          (json_int_t)r->tokens_out, "status", status, "latency_ms", dt * 1e3,
                          "aborted", aborted);
    char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (line)
        fprintf(stderr, "%s\n", line);
    free(line);
    json_decref(j);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    srv_http *h = cls;
    http_req *hr = *req_cls;
    if (!hr)
        return;
    *req_cls = NULL;
    /* A keep-alive connection: the next request's headers have the idle
     * timeout to start and --header-timeout-s more to arrive. */
    set_deadline(h, c, "headers",
                 srv_now() + h->s->o.idle_timeout_s + h->s->o.header_timeout_s);
    if (!hr->started) { /* refused by libmicrohttpd after the request line */
        free(hr->query);
        free(hr);
        return;
    }
    const srv_req *r = &hr->api;
    double dt = srv_now() - hr->t0;
    int status = hr->phase == HTTP_PH_RESPONDED ? r->status : 0;
    srv_metrics_request(h->s->metrics, r->ep, status, dt);
    log_request(h, hr, status, dt, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
    size_t resp_len = hr->api.resp_len;
    srv_api_req_free(&hr->api);
    free(hr->api.body);
    free(hr->query);
    free(hr);
    srv_limits_trim(resp_len); /* a large response's heap back to the system */
    atomic_fetch_sub(&h->active, 1);
}

/* MHD's URI log callback: the raw request target, before MHD decodes it in
 * place. Its return value is the request's first *req_cls. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)c;
    http_req *hr = calloc(1, sizeof *hr);
    if (hr && uri) {
        size_t plen = strcspn(uri, "?");
        for (size_t i = 0; i + 2 < plen; i++)
            if (uri[i] == '%' && uri[i + 1] == '0' && uri[i + 2] == '0')
                hr->nul_in_path = 1;
        /* kept raw for LibreTranslate's endpoints, which read parameters
         * from the query string as from a form (its size is bounded by
         * libmicrohttpd's connection memory) */
        if (uri[plen] == '?' && uri[plen + 1])
            hr->query = strdup(uri + plen + 1);
    }
    return hr;
}

/* ---- the slow-sender watchdog ------------------------------------------------
 * libmicrohttpd's connection timeout is an idle timeout: every byte resets
 * it, so a client sending a header byte every few seconds holds its
 * connection forever. Each connection has instead a deadline for the phase
 * it is in: its headers (--header-timeout-s from the connection's start, or
 * after a keep-alive request the idle timeout plus that), its body and
 * its response (--request-timeout-s each); none while its jobs are queued.
 * A thread shuts down (never closes: the descriptor stays MHD's) the socket
 * of a connection past its deadline; MHD then sees the end of the stream
 * and closes it. NOTIFY_CONNECTION CLOSED unlinks a connection under the
 * same lock before MHD closes its descriptor. */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    srv_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        http_conn *hc = calloc(1, sizeof *hc);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!hc)
            return; /* no deadline for this one; MHD's idle timeout still applies */
        hc->fd = ci ? ci->connect_fd : -1;
        hc->deadline = srv_now() + h->s->o.header_timeout_s;
        hc->phase = "headers";
        pthread_mutex_lock(&h->conns_mu);
        hc->next = h->conns;
        if (h->conns)
            h->conns->prev = hc;
        h->conns = hc;
        pthread_mutex_unlock(&h->conns_mu);
        *socket_context = hc;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        http_conn *hc = *socket_context;
        if (!hc)
            return;
        pthread_mutex_lock(&h->conns_mu);
        if (hc->prev)
            hc->prev->next = hc->next;
        else
            h->conns = hc->next;
        if (hc->next)
            hc->next->prev = hc->prev;
        pthread_mutex_unlock(&h->conns_mu);
        free(hc);
        *socket_context = NULL;
    }
}

static void *watchdog_main(void *arg)
{
    srv_http *h = arg;
    pthread_mutex_lock(&h->conns_mu);
    while (!h->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->stop_cv, &h->conns_mu, &ts);
        double now = srv_now();
        for (http_conn *hc = h->conns; hc && !h->stopping; hc = hc->next) {
            if (hc->cut || hc->deadline <= 0 || now <= hc->deadline || hc->fd < 0)
                continue;
            hc->cut = 1;
            shutdown(hc->fd, SHUT_RDWR);
            fprintf(stderr, "transformerd: a connection took too long in its %s; closed\n",
                    hc->phase);
        }
    }
    pthread_mutex_unlock(&h->conns_mu);
    return NULL;
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
    const char *lf = s->o.log_format ? s->o.log_format : "text";
    if (strcmp(lf, "text") != 0 && strcmp(lf, "json") != 0) {
        snprintf(err, errlen, "--log-format: expected text or json, got '%s'", lf);
        freeaddrinfo(ai);
        free(h);
        return -1;
    }
    h->json_log = !strcmp(lf, "json");
    pthread_mutex_init(&h->conns_mu, NULL);
    pthread_cond_init(&h->stop_cv, NULL);
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
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s:%d", s->o.host, s->o.port);
        pthread_cond_destroy(&h->stop_cv);
        pthread_mutex_destroy(&h->conns_mu);
        free(h);
        return -1;
    }
    h->watchdog_on = pthread_create(&h->watchdog, NULL, watchdog_main, h) == 0;
    if (!h->watchdog_on) {
        snprintf(err, errlen, "cannot start the connection watchdog");
        srv_http_stop(h);
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
        MHD_stop_daemon(h->d); /* every connection unlinked itself */
    if (h->watchdog_on) {
        pthread_mutex_lock(&h->conns_mu);
        h->stopping = 1;
        pthread_cond_signal(&h->stop_cv);
        pthread_mutex_unlock(&h->conns_mu);
        pthread_join(h->watchdog, NULL);
    }
    pthread_cond_destroy(&h->stop_cv);
    pthread_mutex_destroy(&h->conns_mu);
    if (h->quiesced_fd >= 0)
        close(h->quiesced_fd);
    free(h);
}
