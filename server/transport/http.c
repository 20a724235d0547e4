/*
 * http.c - the libmicrohttpd side of the daemon: one access handler and one
 * completion callback, following MHD's own request lifecycle, around a
 * call (call.h) that the handler (the APIs' routes) answers.
 *
 *   1st call    framing (400/501), an encoded NUL in the path (400), then
 *               the handler's head(): a GET or an error is answered here;
 *               a request that wants its body has its Content-Length held
 *               to --max-body-bytes (413) before any body byte is read.
 *   body calls  the raw body is appended to a buffer capped at
 *               --max-body-bytes (no PostProcessor).
 *   last call   the handler's body(): an answer, or pending work under
 *               holds (srv_call_hold), for which the connection is
 *               suspended.
 *   resumed     the last hold was released: the handler's resumed()
 *               answers, or hands the next step out under new holds
 *               (suspended again, as after the body).
 *   completed   the handler's done(), the access-log line, the arena freed.
 *
 * Per-request state lives in *req_cls (http_req, holding the call). Its
 * lifetime while held: holds counts the pending pieces of work plus one
 * held by the transport until the connection is suspended; whoever drops
 * the last one resumes the connection and touches the call no more. Only
 * after that can MHD call the handler again and, once the answer is sent or
 * the connection dies, on_completed, which frees it. So work whose client
 * left, work that expired, work dropped by the drain and failed work all
 * finish while the call is alive, and nothing touches it after its free.
 * The transport's own refusals go through the handler's reject(), which
 * formats them as the API formats its errors.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <time.h>
#include <unistd.h>

#include <malloc.h>

#include <jansson.h>
#include <microhttpd.h>

#include "call.h"
#include "clock.h"
#include "cors.h"
#include "http.h"

/* After an answer of this many bytes or more, malloc_trim (on_completed). */
#define SRV_TRIM_BYTES ((size_t)4 << 20)

/* One open connection, from MHD's NOTIFY_CONNECTION STARTED to CLOSED: the
 * deadline of the phase it is in (the slow-sender watchdog below). */
typedef struct http_conn {
    struct http_conn *prev, *next;
    int fd;
    double deadline;   /* 0: none (its jobs are queued: the batcher's deadline) */
    const char *phase; /* "headers" | "body" | "response" */
    double answer_by;  /* the last answer must have been taken by the client by then
                          (sent and acknowledged: the kernel's send queue empty), even
                          after MHD handed all of it to the kernel; 0: none */
    int cut;           /* the watchdog shut it down */
    int own_fd;        /* MHD closed its descriptor with the answer still in the kernel's
                          send queue: fd is our duplicate, which the watchdog closes (with
                          a reset past answer_by), so that closing cannot leave the rest
                          trickling out to a slow reader unbounded */
} http_conn;

struct srv_http {
    srv_http_opts o;
    srv_call_handler api;
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
 * its call is held: then other threads read conn and fd (client_gone) and
 * release holds. */
typedef struct http_req {
    srv_call call;           /* what the handler sees; call.body is ours */
    srv_http *h;
    const char *method, *url;  /* MHD's, valid for the request's life */
    int started;             /* the handler's first call initialised the rest */
    int nul_in_path;         /* the raw path has %00 (seen by the URI log callback) */
    char client[64];
    char abs_host[256]; /* the authority of an absolute-form target */
    char req_id[SRV_REQ_ID_MAX + 48]; /* call.req_id's storage */
    char *query;        /* the raw query string (on_uri), malloc'd, or NULL */
    double t0;
    http_phase phase;
    size_t body_cap;
    int body_too_large;
    int body_oom;            /* the body buffer could not grow (500) */
    int deferred;            /* a response is recorded; sent when the request is complete */
    struct MHD_Connection *conn;
    int fd;                  /* the client socket, polled for EOF before a job runs */
} http_req;

static const char *header(struct MHD_Connection *c, const char *name);
static void set_deadline(srv_http *h, struct MHD_Connection *c, const char *phase,
                         double deadline, double answer_by);

/* The handler's formatting of a refusal of the transport's own. */
static void reject(http_req *hr, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void reject(http_req *hr, int status, const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hr->h->api.reject(hr->h->api.ctx, &hr->call, status, code, msg);
}

/* The content reader of a streamed answer (MHD's thread): the parts written
 * so far; when none is there, the connection is suspended (under the
 * stream's lock, so that the writer's resume comes after it) until the next
 * part, the end, or the last release (then the handler's resumed() writes
 * the last part). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    http_req *hr = cls;
    srv_call *c = &hr->call;
    pthread_mutex_lock(&c->stream_mu);
    if (c->stream_resumed && !c->stream_final) {
        c->stream_final = 1;
        pthread_mutex_unlock(&c->stream_mu);
        (void)hr->h->api.resumed(hr->h->api.ctx, c); /* a stream's last part */
        /* the work is done and its last part written: what the client has
         * not taken yet has --request-timeout-s, as a whole answer has */
        double by = srv_now() + hr->h->o.request_timeout_s;
        set_deadline(hr->h, hr->conn, "response", by, by);
        pthread_mutex_lock(&c->stream_mu);
    }
    size_t n = c->reply_len - c->stream_off;
    if (n > max)
        n = max;
    if (n) {
        memcpy(buf, c->reply + c->stream_off, n);
        c->stream_off += n;
        pthread_mutex_unlock(&c->stream_mu);
        return (ssize_t)n;
    }
    if (c->stream_ended) {
        pthread_mutex_unlock(&c->stream_mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    c->stream_waiting = 1;
    MHD_suspend_connection(hr->conn);
    pthread_mutex_unlock(&c->stream_mu);
    return 0;
}

/* Queues the call's answer. Returns MHD_NO only when MHD refuses. */
static enum MHD_Result send_resp(struct MHD_Connection *c, http_req *hr)
{
    srv_call *r = &hr->call;
    srv_http *h = hr->h;
    if (!r->status) {
        reject(hr, 500, "internal", "no response was produced");
        if (!r->status)
            return MHD_NO;
    }
    struct MHD_Response *resp;
    if (r->streaming) {
        /* chunked, each part as it comes (stream_read) */
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, hr, NULL);
        if (!resp)
            return MHD_NO;
    } else {
        if (!r->reply && srv_call_write(r, "", 0) != 0)
            return MHD_NO;
        resp = MHD_create_response_from_buffer(r->reply_len, r->reply, MHD_RESPMEM_MUST_FREE);
        if (!resp)
            return MHD_NO;
        r->reply = NULL; /* owned by the response now */
        r->reply_cap = 0;
    }
    if (r->status != 204)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                r->ctype ? r->ctype : "application/json");
    const char *disp = srv_call_reply_header(r, "Content-Disposition");
    if (disp)
        MHD_add_response_header(resp, "Content-Disposition", disp);
    /* CORS (--cors-origins) on every response, preflights included */
    const char *cors[SRV_CORS_MAX][2];
    char cbuf[128];
    int nc = srv_cors_headers(h->o.cors_origins, header(c, "Origin"),
                              !strcmp(hr->method, "OPTIONS"), srv_call_reply_header(r, "Allow"),
                              cors, cbuf, sizeof cbuf);
    for (int i = 0; i < nc; i++)
        MHD_add_response_header(resp, cors[i][0], cors[i][1]);
    for (int i = 0; i < r->n_hdr; i++)
        if (strcasecmp(r->hdr[i].name, "Content-Disposition") != 0)
            MHD_add_response_header(resp, r->hdr[i].name, r->hdr[i].value);
    MHD_add_response_header(resp, "X-Request-Id", r->req_id);
    if (r->close || (h->o.draining && atomic_load(h->o.draining)))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    /* A slow reader has the request's timeout again to take the answer (a
     * stream: the service's deadline while its work runs). */
    double by = r->streaming ? 0 : srv_now() + h->o.request_timeout_s;
    set_deadline(h, c, r->streaming ? "queued" : "response", by, by);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    hr->phase = HTTP_PH_RESPONDED;
    return ret;
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* Sets the phase deadline of c's connection and, answer_by >= 0, when it
 * must have delivered its answer (0: no answer pending); see the watchdog
 * below. */
static void set_deadline(srv_http *h, struct MHD_Connection *c, const char *phase,
                         double deadline, double answer_by)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    http_conn *hc = ci ? ci->socket_context : NULL;
    if (!hc)
        return;
    pthread_mutex_lock(&h->conns_mu);
    hc->deadline = deadline;
    hc->phase = phase;
    if (answer_by >= 0)
        hc->answer_by = answer_by;
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
        hr->call.close = 1;
        reject(hr, 400, "bad_request",
               "malformed request: a NUL byte or a folded line in a header field");
        return 1;
    }
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
        hr->call.close = 1;
        reject(hr, 400, "bad_request", "malformed request: %s", why);
        return 1;
    }
    if (f.n_te && strcasecmp(f.te, "chunked") != 0) {
        hr->call.close = 1;
        reject(hr, 501, "not_implemented", "Transfer-Encoding: only chunked is supported");
        return 1;
    }
    return 0;
}

/* The call's body limit and deadline: its route's (set by the API's head)
 * or the daemon's. */
static long body_limit(const http_req *hr)
{
    return hr->call.max_body > 0 ? hr->call.max_body : hr->h->o.max_body_bytes;
}

static int call_timeout(const http_req *hr)
{
    return hr->call.timeout_s > 0 ? hr->call.timeout_s : hr->h->o.request_timeout_s;
}

/* First call: everything decidable from the request line and headers.
 * Returns 1 when an answer was recorded. */
static int first_call(http_req *hr, struct MHD_Connection *c, const char *version)
{
    srv_http *h = hr->h;
    if (framing_error(hr, c, version))
        return 1;
    if (hr->nul_in_path) {
        /* MHD decodes %00 in place: the path would end there. */
        reject(hr, 400, "bad_request", "the path contains an encoded NUL byte");
        return 1;
    }
    if (h->api.head(h->api.ctx, &hr->call) != SRV_NEXT_BODY)
        return 1;
    const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        unsigned long long v = strtoull(cl, &end, 10);
        if (end == cl || *end || v > (unsigned long long)body_limit(hr)) {
            reject(hr, 413, "body_too_large", "the body exceeds %ld bytes", body_limit(hr));
            return 1;
        }
        /* The declared size is capped above, so this allocation is bounded. */
        hr->body_cap = (size_t)v + 1;
        hr->call.body = malloc(hr->body_cap);
        if (!hr->call.body) {
            reject(hr, 500, "internal", "out of memory");
            return 1;
        }
    }
    return 0;
}

static void append_body(http_req *hr, const char *data, size_t n)
{
    srv_call *r = &hr->call;
    if (hr->body_too_large)
        return;
    if (r->body_len + n > (size_t)body_limit(hr)) {
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

/* The last hold of a call was released (any thread): the connection is
 * suspended (the transport's own hold went last), so resume it; the call
 * may be freed at any moment after, so it is not touched again. */
static void call_resume(srv_call *call)
{
    http_req *hr = (http_req *)call;
    MHD_resume_connection(hr->conn);
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

/* The call's client_gone: its connection is suspended while it is held (so
 * MHD does not read the socket), and the call is alive. */
static int call_client_gone(const srv_call *call)
{
    return client_gone(((const http_req *)call)->fd);
}

static const char *call_header(const srv_call *call, const char *name)
{
    return header(((const http_req *)call)->conn, name);
}

static void call_finish(srv_call *call);
static const srv_call_io k_io = {call_header, call_client_gone, call_resume, call_finish};

/* Work was handed out under holds: the connection waits suspended, and
 * the transport's own hold goes last. */
static enum MHD_Result suspend(srv_http *h, struct MHD_Connection *c, srv_call *r)
{
    set_deadline(h, c, "queued", 0, -1); /* the service's deadline from here */
    MHD_suspend_connection(c);
    srv_call_release(r);
    return MHD_YES; /* the last release resumes it */
}

/* The body is complete: the handler answers or hands the work out. */
static enum MHD_Result body_done(http_req *hr, struct MHD_Connection *c)
{
    srv_call *r = &hr->call;
    srv_http *h = hr->h;
    if (hr->body_too_large) {
        if (!hr->body_oom)
            reject(hr, 413, "body_too_large", "the body exceeds %ld bytes", body_limit(hr));
        else
            reject(hr, 500, "internal", "out of memory reading the body");
        return send_resp(c, hr);
    }
    if (srv_now() > r->t0 + call_timeout(hr)) {
        reject(hr, 504, "timeout", "the request took longer than %d s", call_timeout(hr));
        return send_resp(c, hr);
    }
    if (!r->body) {
        r->body = strdup("");
        if (!r->body) {
            reject(hr, 500, "internal", "out of memory");
            return send_resp(c, hr);
        }
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    hr->fd = ci ? ci->connect_fd : -1;
    /* The transport's own hold, dropped once the connection is suspended:
     * no release can resume it before. Set before the handler hands work
     * out: once out, the phase is the resumed handler's cue. */
    atomic_init(&r->holds, 1);
    hr->phase = HTTP_PH_QUEUED;
    if (h->api.body(h->api.ctx, r) != SRV_NEXT_PENDING) {
        hr->phase = HTTP_PH_BODY;
        return send_resp(c, hr);
    }
    if (r->streaming) {
        /* the answer goes out as its parts come: not suspended here */
        enum MHD_Result ret = send_resp(c, hr);
        srv_call_release(r);
        return ret;
    }
    return suspend(h, c, r);
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

/* Whether a client's X-Request-Id can be echoed and logged as it is: 1 to
 * SRV_REQ_ID_MAX of A-Z a-z 0-9 . _ : - (no spaces, quotes or controls). */
int srv_http_req_id_ok(const char *v)
{
    if (!v)
        return 0;
    size_t n = strlen(v);
    if (n == 0 || n > SRV_REQ_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)v[i]) && !strchr("._:-", v[i]))
            return 0;
    return 1;
}

/* The request's id: the client's X-Request-Id when sane (a retry keeps its
 * id across replicas), else REPLICA-N (--replica-id) or N. In buf. */
static const char *request_id(const srv_http *h, struct MHD_Connection *c, unsigned long n,
                              char *buf, size_t len)
{
    const char *given = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    if (srv_http_req_id_ok(given))
        snprintf(buf, len, "%s", given);
    else if (h->o.replica_id && h->o.replica_id[0])
        snprintf(buf, len, "%s-%lu", h->o.replica_id, n);
    else
        snprintf(buf, len, "%lu", n);
    return buf;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **req_cls)
{
    srv_http *h = cls;
    http_req *hr = *req_cls;
    if (!hr || !hr->started) {
        if (!hr)
            hr = calloc(1, sizeof *hr);
        if (!hr)
            return MHD_NO;
        srv_call *r = &hr->call;
        hr->started = 1;
        hr->h = h;
        hr->conn = c;
        hr->fd = -1;
        r->io = &k_io;
        r->id = atomic_fetch_add(&h->next_id, 1) + 1;
        r->req_id = request_id(h, c, r->id, hr->req_id, sizeof hr->req_id);
        r->host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
        r->query = hr->query;
        url = origin_form(url, hr->abs_host, sizeof hr->abs_host);
        if (hr->abs_host[0])
            r->host = hr->abs_host;
        r->path = url;
        r->method = method;
        hr->method = method;
        hr->url = url;
        r->t0 = srv_now();
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
        r->client = hr->client;
        atomic_fetch_add(&h->active, 1);
        *req_cls = hr;
        /* The body (or a GET's end) must arrive within the request's
         * deadline however slowly it trickles in. */
        set_deadline(h, c, "body", r->t0 + h->o.request_timeout_s, -1);
        int answered = first_call(hr, c, version);
        if (r->timeout_s > 0) /* the route's own deadline (an uploaded file's) */
            set_deadline(h, c, "body", r->t0 + r->timeout_s, -1);
        if (answered) {
            /* A GET has no body to refuse: answering on the next call (the
             * request complete) keeps the connection alive. Anything else
             * is answered before its body is read, and MHD closes. */
            if (!r->close &&
                (!strcmp(method, "GET") || !strcmp(method, "HEAD") || r->status < 300))
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
            if (srv_now() > hr->call.t0 + call_timeout(hr))
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
        /* resumed: every piece of pending work finished; the handler
         * answers, or hands the next step out (the transport's own hold
         * again until the connection is suspended) */
        atomic_store(&hr->call.holds, 1);
        if (h->api.resumed(h->api.ctx, &hr->call) == SRV_NEXT_PENDING && !hr->call.streaming)
            return suspend(h, c, &hr->call);
        return send_resp(c, hr);
    case HTTP_PH_RESPONDED:
    default:
        *upload_size = 0;
        return MHD_YES;
    }
}

static void log_request(const srv_http *h, const http_req *hr, int status, double dt,
                        int aborted)
{
    const srv_call *r = &hr->call;
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
    json_t *j = json_pack("{s:f,s:I,s:s,s:s,s:s,s:s,s:o,s:i,s:I,s:I,s:i,s:f,s:b}", "time",
                          (double)ts.tv_sec + ts.tv_nsec * 1e-9, "id", (json_int_t)r->id,
                          "request_id", r->req_id ? r->req_id : "", "client", hr->client, "method", method, "path", path, "model",
                          r->log_model ? json_string(r->log_model) : json_null(), "texts",
                          (int)r->log_texts, "tokens_in", (json_int_t)r->tokens_in, "tokens_out",
                          (json_int_t)r->tokens_out, "status", status, "latency_ms", dt * 1e3,
                          "aborted", aborted);
    char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (line)
        fprintf(stderr, "%s\n", line);
    free(line);
    json_decref(j);
}

/* The end of a call: the handler's last word, the access-log line, the
 * call freed (its arena at once). */
static void complete(http_req *hr, int aborted)
{
    srv_http *h = hr->h;
    srv_call *r = &hr->call;
    double dt = srv_now() - r->t0;
    int status = hr->phase == HTTP_PH_RESPONDED ? r->status : 0;
    h->api.done(h->api.ctx, r, status, dt);
    log_request(h, hr, status, dt, aborted);
    size_t resp_len = r->reply_len;
    if (r->streaming)
        pthread_mutex_destroy(&r->stream_mu);
    free(r->reply);
    srv_call_free_arena(r);
    free(r->body);
    free(hr->query);
    free(hr);
    /* After a large answer the freed heap goes back to the system, so one
     * large request does not leave the daemon's RSS at its peak. */
    if (resp_len >= SRV_TRIM_BYTES)
        malloc_trim(0);
    atomic_fetch_sub(&h->active, 1);
}

/* A streamed call whose client left while it was held: its last release
 * (a scheduler thread) ends it. */
static void call_finish(srv_call *call)
{
    complete((http_req *)call, 1);
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
    set_deadline(h, c, "headers", srv_now() + h->o.idle_timeout_s + h->o.header_timeout_s,
                 -1);
    if (!hr->started) { /* refused by libmicrohttpd after the request line */
        free(hr->query);
        free(hr);
        return;
    }
    srv_call *r = &hr->call;
    if (r->streaming) {
        /* the connection is gone: no more parts, no poll of its socket;
         * with work still out, the last release finishes the call */
        pthread_mutex_lock(&r->stream_mu);
        r->client_left = 1;
        r->stream_waiting = 0;
        int held = atomic_load(&r->holds) > 0;
        if (held) {
            /* the access log's strings are MHD's, gone with the connection */
            const char *m = srv_call_strndup(r, hr->method, strlen(hr->method));
            const char *u = srv_call_strndup(r, hr->url, strlen(hr->url));
            hr->method = m ? m : "-";
            hr->url = u ? u : "-";
            r->method = r->path = r->host = r->query = NULL;
        }
        r->orphan = held;
        pthread_mutex_unlock(&r->stream_mu);
        if (held)
            return;
    }
    complete(hr, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
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
 * An answer MHD has handed to the kernel is not yet taken: the kernel's send
 * buffer (up to megabytes) would trickle it out to a slow reader for as long
 * as it likes, so the answer's deadline holds until the send queue is empty
 * (SIOCOUTQ). A thread shuts down (never closes: the descriptor stays MHD's)
 * the socket of a connection past its deadline, with SO_LINGER 0 so that
 * MHD's close then resets it and drops what was not taken; MHD sees the end
 * of the stream and closes it. NOTIFY_CONNECTION CLOSED unlinks a connection under the
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
        hc->deadline = srv_now() + h->o.header_timeout_s;
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
        *socket_context = NULL;
        pthread_mutex_lock(&h->conns_mu);
        /* MHD closes after an answer it handed to the kernel (its idle
         * timeout, Connection: close): a close would let the kernel send
         * the rest for as long as the client takes. The socket is kept
         * through a duplicate until the answer is taken or its deadline
         * passes (the watchdog). */
        int unsent = 0;
        if (!hc->cut && !h->stopping && hc->fd >= 0 && hc->answer_by > srv_now() &&
            ioctl(hc->fd, SIOCOUTQ, &unsent) == 0 && unsent > 0) {
            int d = fcntl(hc->fd, F_DUPFD_CLOEXEC, 0);
            if (d >= 0) {
                hc->fd = d;
                hc->own_fd = 1;
                hc->deadline = 0;
                hc->phase = "response";
                pthread_mutex_unlock(&h->conns_mu);
                return;
            }
        }
        if (hc->prev)
            hc->prev->next = hc->next;
        else
            h->conns = hc->next;
        if (hc->next)
            hc->next->prev = hc->prev;
        pthread_mutex_unlock(&h->conns_mu);
        free(hc);
    }
}

/* Under conns_mu: unlinks hc and frees it (closing our duplicate). */
static void conn_drop(srv_http *h, http_conn *hc)
{
    if (hc->prev)
        hc->prev->next = hc->next;
    else
        h->conns = hc->next;
    if (hc->next)
        hc->next->prev = hc->prev;
    if (hc->own_fd)
        close(hc->fd);
    free(hc);
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
        for (http_conn *hc = h->conns, *next; hc && !h->stopping; hc = next) {
            next = hc->next;
            if (hc->cut || hc->fd < 0)
                continue;
            const char *why = hc->deadline > 0 && now > hc->deadline ? hc->phase : NULL;
            int unsent = 0;
            int queued = hc->answer_by > 0 && ioctl(hc->fd, SIOCOUTQ, &unsent) == 0 && unsent > 0;
            if (!why && hc->answer_by > 0 && now > hc->answer_by) {
                if (queued)
                    why = "response";
                else
                    hc->answer_by = 0; /* taken */
            }
            if (!why) {
                if (hc->own_fd && !queued) /* MHD closed it and it is all taken */
                    conn_drop(h, hc);
                continue;
            }
            hc->cut = 1;
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            (void)setsockopt(hc->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            shutdown(hc->fd, SHUT_RDWR);
            fprintf(stderr, "transformerd: a connection took too long in its %s; closed\n", why);
            if (hc->own_fd) /* ours alone: the close resets it */
                conn_drop(h, hc);
        }
    }
    pthread_mutex_unlock(&h->conns_mu);
    return NULL;
}

int srv_http_start(srv_http **out, const srv_http_opts *o, const srv_call_handler *handler,
                   char *err, size_t errlen)
{
    *out = NULL;
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        snprintf(err, errlen, "--host %s: %s", o->host, gai_strerror(gai));
        return -1;
    }
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    h->o = *o;
    h->api = *handler;
    h->quiesced_fd = -1;
    const char *lf = o->log_format ? o->log_format : "text";
    if (strcmp(lf, "text") != 0 && strcmp(lf, "json") != 0) {
        snprintf(err, errlen, "--log-format: expected text or json, got '%s'", lf);
        freeaddrinfo(ai);
        free(h);
        return -1;
    }
    h->json_log = !strcmp(lf, "json");
    const char *rid = o->replica_id ? o->replica_id : "";
    if (strlen(rid) > 40 || strspn(rid, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789._-") != strlen(rid) || rid[0] == '.') {
        snprintf(err, errlen, "--replica-id: 1 to 40 of A-Z a-z 0-9 . _ - (not starting with "
                 "'.'), got '%.60s'", rid);
        freeaddrinfo(ai);
        free(h);
        return -1;
    }
    pthread_mutex_init(&h->conns_mu, NULL);
    pthread_cond_init(&h->stop_cv, NULL);
    /* poll(), not epoll: 0.9.75's MHD_quiesce_daemon takes the listen
     * socket out of each pool thread's epoll set while that thread may be
     * taking it out itself, and aborts the process when it lost the race
     * (ENOENT); with poll a quiesce is a wake-up through the ITC. */
    unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)o->http_threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)o->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)o->max_connections_per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)o->idle_timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s:%d", o->host, o->port);
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
    h->port = di ? di->port : (uint16_t)o->port;
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
    /* what remains is ours: answers MHD closed still in the kernel */
    while (h->conns)
        conn_drop(h, h->conns);
    pthread_cond_destroy(&h->stop_cv);
    pthread_mutex_destroy(&h->conns_mu);
    if (h->quiesced_fd >= 0)
        close(h->quiesced_fd);
    free(h);
}
