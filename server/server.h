/*
 * server.h - the transformerd daemon (`transformerd serve`): the types the
 * files of server/ share. Prefix srv_. Not a public API of the engine.
 *
 *   serve.c    options (flags + TRANSFORMERD_* env), model load, warm-up,
 *              signals and the drain on SIGTERM/SIGINT
 *   http.c     libmicrohttpd: routing, body reading, limits, error
 *              objects, suspend/resume, access log
 *   api.c      the endpoints: JSON <-> jobs, LibreTranslate, models, health
 *   batcher.c  the bounded queue and one scheduler thread per worker
 *   metrics.c  Prometheus counters and histograms (atomics, no lock)
 *   openapi.c  GET /openapi.json
 *
 * Threads: MHD's pool threads run the handlers (parse, validate, tokenize,
 * enqueue, suspend); the batcher threads run the model and resume
 * connections; the main thread loads, then waits for a signal and drains.
 * No HTTP thread ever waits on the model.
 */
#ifndef SRV_SERVER_H
#define SRV_SERVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"
#include "translator.h"

struct MHD_Connection;
struct MHD_Daemon;

/* ---- options ------------------------------------------------------------- */

typedef struct srv_opts {
    const char *model_dir;
    const char *device;       /* "cpu" | "cuda[:N]" */
    const char *dtype;        /* weight storage: auto | float32 | float16 | bfloat16 */
    const char *precision;    /* half-weight GEMMs on cuda: full | half */
    const char *host;         /* numeric address or "localhost" */
    int port;                 /* 0: any free port (printed on stderr) */
    int threads;              /* engine CPU threads; 0 = all cores */
    int http_threads;         /* MHD thread pool size */
    int workers;              /* td_workers (scheduler threads) per model */
    int max_batch_tokens;     /* padded source tokens per batch */
    int max_batch_size;       /* sentences per batch */
    int max_beam;             /* largest beam_size a request may ask; 0 = the model's
                                 num_beams (capped at TD_MAX_BEAM) */
    int batch_delay_ms;       /* longest wait of the oldest job for company */
    int max_queue;            /* texts waiting in a model's queue */
    int max_input_tokens;     /* per text, incl. </s>; 0 = max positions */
    int max_batch_texts;      /* texts per request */
    long max_body_bytes;
    int request_timeout_s;    /* whole-request deadline */
    int idle_timeout_s;       /* MHD connection (idle) timeout */
    int max_connections;
    int max_connections_per_ip; /* 0 = no per-IP limit */
    int drain_timeout_s;      /* SIGTERM: time to finish queued work */
    const char *api_key;      /* NULL or "" = no key */
} srv_opts;

/* ---- metrics ------------------------------------------------------------- */

typedef enum srv_endpoint {
    SRV_EP_TRANSLATE = 0,  /* POST /v1/translate */
    SRV_EP_LIBRE,          /* POST /translate */
    SRV_EP_LANGUAGES,      /* GET /languages */
    SRV_EP_MODELS,         /* GET /v1/models */
    SRV_EP_LIVE,           /* /health/live, /v2/health/live */
    SRV_EP_READY,          /* /health/ready, /v2/health/ready */
    SRV_EP_METRICS,
    SRV_EP_OPENAPI,
    SRV_EP_UNKNOWN,        /* 404s */
    SRV_EP_COUNT
} srv_endpoint;

const char *srv_endpoint_name(srv_endpoint ep);

typedef struct srv_metrics srv_metrics;

srv_metrics *srv_metrics_new(void); /* NULL when out of memory */
void srv_metrics_free(srv_metrics *m); /* accepts NULL */
/* All recorders are lock-free and callable from any thread. */
void srv_metrics_request(srv_metrics *m, srv_endpoint ep, int status, double seconds);
void srv_metrics_queue_wait(srv_metrics *m, double seconds);
void srv_metrics_batch(srv_metrics *m, int n_sentences, long padded_tokens, double seconds);
void srv_metrics_tokens(srv_metrics *m, long in, long out);
void srv_metrics_queue_depth(srv_metrics *m, long depth);
void srv_metrics_dropped(srv_metrics *m, const char *reason); /* "timeout" | "gone" | "shutdown" */
void srv_metrics_batch_failed(srv_metrics *m);

struct srv_server;
/* Prometheus text exposition (malloc'd, NUL-terminated), or NULL. */
char *srv_metrics_render(const struct srv_server *s);

/* ---- batcher ------------------------------------------------------------- */

typedef enum srv_job_state {
    SRV_JOB_QUEUED = 0,
    SRV_JOB_DONE,      /* res is filled */
    SRV_JOB_TIMEOUT,   /* the request's deadline passed before it ran */
    SRV_JOB_GONE,      /* the client closed its connection */
    SRV_JOB_SHUTDOWN,  /* the drain deadline passed */
    SRV_JOB_FAILED,    /* the engine returned an error (task->err) */
} srv_job_state;

/* What jobs of one request share. The connection stays suspended while
 * pending > 0; the batcher that brings pending to 0 resumes it and touches
 * the task no more. */
typedef struct srv_task {
    atomic_int pending;
    struct MHD_Connection *conn;
    int fd;              /* the client socket, polled for EOF before a run */
    double deadline;     /* monotonic seconds */
    char err[256];       /* SRV_JOB_FAILED: the engine's message (one writer wins) */
    atomic_flag err_set;
} srv_task;

/* One text of a request. src and opts are owned by the request and outlive
 * the job; state and res are written by the batcher only while queued or
 * running, and read by the HTTP thread after the task's pending reached 0. */
typedef struct srv_job {
    const int32_t *src;
    int n_src;
    const td_decode_opts *opts;
    srv_task *task;
    srv_job_state state;
    td_result res;
    double t_enqueue;      /* set by srv_batcher_submit */
    struct srv_job *next;  /* queue link, under the batcher's lock */
} srv_job;

typedef struct srv_batcher srv_batcher;
struct srv_model;

typedef enum srv_submit_rc {
    SRV_SUBMIT_OK = 0,
    SRV_SUBMIT_FULL,      /* 429 */
    SRV_SUBMIT_DRAINING,  /* 503 */
} srv_submit_rc;

/* Makes the workers (td_worker_init), runs one warm-up batch on each and
 * starts one scheduler thread per worker. */
int srv_batcher_init(srv_batcher **out, struct srv_model *sm, const srv_opts *o,
                     srv_metrics *metrics, char *err, size_t errlen);
/* Enqueues n jobs of one task atomically (all or none) and suspends conn
 * (from the connection's handler) before any of them can run. On anything
 * but SRV_SUBMIT_OK nothing was queued and conn is not suspended. */
srv_submit_rc srv_batcher_submit(srv_batcher *b, srv_job *const *jobs, int n,
                                 struct MHD_Connection *conn);
/* Stops taking jobs, waits up to deadline_s for queued and running jobs,
 * then drops what is left (SRV_JOB_SHUTDOWN), resuming every connection. */
void srv_batcher_drain(srv_batcher *b, double deadline_s);
long srv_batcher_queue_depth(srv_batcher *b);
void srv_batcher_free(srv_batcher *b); /* stops and joins; accepts NULL */

/* Two jobs may share a batch exactly when their options are equal. */
int srv_opts_equal(const td_decode_opts *a, const td_decode_opts *b);

/* ---- the server ---------------------------------------------------------- */

typedef struct srv_model {
    char name[128];
    char src_lang[16], tgt_lang[16];
    char dtype[16];
    char device[32];
    td_model *m;
    td_tokenizer *tok;
    td_decode_opts defaults;
    int max_input_tokens;  /* effective per-text limit */
    int max_length;        /* largest max_length a request may ask */
    int max_beam;          /* largest beam_size a request may ask (--max-beam) */
    size_t worker_bytes;   /* arena of one worker (td_worker_arena_bytes) */
    /* Set (never cleared) when a batch failed with a device error: the
     * device is presumed unusable, readiness is 503 and translations are
     * refused with 503 so that an orchestrator replaces the process. */
    atomic_int failed;
    char failed_msg[256];  /* written once before failed is set */
    srv_batcher *b;
} srv_model;

typedef struct srv_server {
    srv_opts o;
    srv_model *models;     /* written before ready is set, read-only after */
    int n_models;
    srv_metrics *metrics;
    struct MHD_Daemon *d;
    uint16_t port;
    int quiesced_fd;       /* MHD_quiesce_daemon's listen socket, closed after stop */
    atomic_int ready;      /* loaded and warmed */
    atomic_int draining;
    atomic_long active;    /* requests accepted and not yet completed */
} srv_server;

/* 1 when loaded, warmed, not draining and no model's device failed. */
int srv_server_ready(const srv_server *s);

/* http.c */
int srv_http_start(srv_server *s, char *err, size_t errlen);
void srv_http_quiesce(srv_server *s); /* stop accepting connections */
void srv_http_stop(srv_server *s);

/* monotonic clock, seconds */
double srv_now(void);

/* ---- requests (http.c <-> api.c) ----------------------------------------- */

typedef enum srv_phase {
    SRV_PH_BODY = 0,   /* reading the body */
    SRV_PH_QUEUED,     /* jobs submitted, connection suspended */
    SRV_PH_RESPONDED,  /* a response was queued */
} srv_phase;

typedef struct srv_req {
    srv_server *s;
    srv_endpoint ep;
    const char *method, *url;  /* MHD's, valid for the request's life */
    char client[64];
    double t0;
    srv_phase phase;
    char *body;
    size_t body_len, body_cap;
    int body_too_large;
    int deferred;            /* a response is recorded; sent when the request is complete */
    /* the response */
    int status;
    char *resp;              /* malloc'd */
    size_t resp_len;
    const char *resp_ctype;
    int retry_after;         /* seconds, 0 = no header */
    const char *allow;       /* 405: the Allow header */
    /* translation */
    srv_model *model;
    srv_task task;
    srv_job *jobs;
    int n_jobs;
    int32_t **src;           /* per text, owned */
    td_decode_opts opts;     /* this request's own copy of the defaults */
    int *attn_layers, *attn_heads;
    int return_tokens, return_attention;
    int libre, libre_list, libre_auto, alternatives;
    long tokens_in, tokens_out;
} srv_req;

/* Records an error object as the response. */
void srv_req_error(srv_req *r, int status, const char *code, const char *param,
                   const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
/* Records body (taken, malloc'd) as a JSON response with status. */
void srv_req_json(srv_req *r, int status, char *body);

/* api.c: each either records a response, or (translation) fills r->jobs and
 * returns 1 to ask the caller to suspend and submit. */
int srv_api_translate_parse(srv_req *r, const char *ctype, const char *auth_key);
int srv_api_libre_parse(srv_req *r, const char *ctype, const char *auth_key);
void srv_api_translate_respond(srv_req *r); /* after all jobs finished */
void srv_api_models(srv_req *r);
void srv_api_languages(srv_req *r);
void srv_api_req_free(srv_req *r);
int srv_api_key_ok(const srv_server *s, const char *given); /* constant time */

/* openapi.c */
extern const char srv_openapi_json[];

/* serve.c */
int srv_main(int argc, char **argv);

#endif /* SRV_SERVER_H */
