/*
 * metrics.h - the daemon's Prometheus counters, gauges and histograms
 * (GET /metrics; the series are listed in docs/api.md, "Metrics").
 *
 * Promise: every recorder is a few relaxed atomic operations, callable from
 * any thread (HTTP pool threads, scheduler threads, the main thread) without
 * a lock; a NULL srv_metrics is accepted and ignored. The module knows
 * nothing of HTTP, models or the queue: callers hand it numbers, and the
 * readiness gauge is passed to srv_metrics_render by whoever renders.
 */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

/* The endpoints, as the label of the request series. */
typedef enum srv_endpoint {
    SRV_EP_TRANSLATE = 0,  /* POST /v1/translate */
    SRV_EP_LIBRE,          /* POST /translate */
    SRV_EP_LANGUAGES,      /* GET /languages */
    SRV_EP_MODELS,         /* GET /v1/models */
    SRV_EP_LIVE,           /* /health/live, /v2/health/live */
    SRV_EP_READY,          /* /health/ready, /v2/health/ready */
    SRV_EP_METRICS,
    SRV_EP_OPENAPI,
    SRV_EP_WEB,            /* the page: / and /web/NAME */
    SRV_EP_DETECT,         /* POST /detect (LibreTranslate, as the rest) */
    SRV_EP_TRANSLATE_FILE, /* POST /translate_file */
    SRV_EP_DOWNLOAD,       /* GET /download_file/NAME */
    SRV_EP_SUGGEST,        /* POST /suggest */
    SRV_EP_SETTINGS,       /* GET /frontend/settings */
    SRV_EP_HEALTH,         /* GET /health */
    SRV_EP_VERSION,        /* GET /version */
    SRV_EP_UNKNOWN,        /* 404s */
    SRV_EP_COUNT
} srv_endpoint;

/* The endpoint's path as its label ("other" for SRV_EP_UNKNOWN). */
const char *srv_endpoint_name(srv_endpoint ep);

typedef struct srv_metrics srv_metrics;

srv_metrics *srv_metrics_new(void);    /* NULL when out of memory */
void srv_metrics_free(srv_metrics *m); /* accepts NULL */
/* The batch-size and batch-token histograms' buckets end at these limits
 * (--max-batch-size, --max-batch-tokens). Called once, before any batch
 * is recorded (the main thread, at start-up). */
void srv_metrics_set_limits(srv_metrics *m, int max_batch_size, long max_batch_tokens);

void srv_metrics_request(srv_metrics *m, srv_endpoint ep, int status, double seconds);
void srv_metrics_queue_wait(srv_metrics *m, double seconds);
void srv_metrics_batch(srv_metrics *m, int n_sentences, long padded_tokens, double seconds);
void srv_metrics_tokens(srv_metrics *m, long in, long out);
void srv_metrics_queue_depth(srv_metrics *m, long depth);
void srv_metrics_batch_failed(srv_metrics *m);
/* One step of a running decode: the sentences admitted before it, its time. */
void srv_metrics_step(srv_metrics *m, int admitted, double seconds);
/* The running rows gauge moves by delta (workers add theirs). */
void srv_metrics_running_rows(srv_metrics *m, long delta);

/* Why a job left the queue without running (transformerd_jobs_dropped_total). */
typedef enum srv_drop_reason {
    SRV_DROP_TIMEOUT = 0, /* its request's deadline passed */
    SRV_DROP_GONE,        /* its client left */
    SRV_DROP_SHUTDOWN,    /* the drain deadline passed */
} srv_drop_reason;

void srv_metrics_dropped(srv_metrics *m, srv_drop_reason reason);

/* The labels of one transformerd_model_info series; strings are copied. */
typedef struct srv_model_info {
    const char *model, *source, *target, *device, *dtype;
    int d_model, encoder_layers, decoder_layers;
} srv_model_info;

/* Adds a loaded model to transformerd_model_info. Called by the main thread
 * once a model is loaded (before readiness); a render on another thread
 * sees the series whole or not at all. Returns -1 when out of memory or
 * past the few models the table holds. */
int srv_metrics_add_model(srv_metrics *m, const srv_model_info *info);

/* Prometheus text exposition format 0.0.4 (malloc'd, NUL-terminated), or
 * NULL when out of memory. ready is the value of transformerd_ready. */
char *srv_metrics_render(srv_metrics *m, int ready);

#endif /* SRV_METRICS_H */
