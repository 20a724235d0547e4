/*
 * metrics.h - the daemon's Prometheus counters, gauges and histograms
 * (GET /metrics; the series are listed in docs/api.md, "Metrics").
 *
 * Promise: every recorder is a few relaxed atomic operations, callable from
 * any thread (HTTP pool threads, scheduler threads, the main thread) without
 * a lock; a NULL srv_metrics is accepted and ignored. The module knows
 * nothing of HTTP, models or the queue: callers hand it numbers, and the
 * readiness gauge is passed to srv_metrics_render by whoever renders.
 *
 * Per model: the server's srv_metrics has one child srv_metrics per model
 * name (srv_metrics_model), which that model's batcher records into; the
 * series the batchers record (queue, batches, steps, tokens, drops,
 * failures) are rendered once per child with a model label. The request
 * series (per endpoint) are the server's own.
 */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <stddef.h>

/* The endpoints, as the label of the request series. */
typedef enum srv_endpoint {
    SRV_EP_TRANSLATE = 0,  /* POST /v1/translate */
    SRV_EP_LIBRE,          /* POST /translate */
    SRV_EP_LANGUAGES,      /* GET /languages */
    SRV_EP_MODELS,         /* GET /v1/models; POST /v1/models (a load) */
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
    SRV_EP_MODEL_ADMIN,    /* DELETE /v1/models/NAME, POST /v1/models/NAME/reload */
    SRV_EP_DEEPL_TRANSLATE, /* POST /v2/translate (DeepL's API, as the rest) */
    SRV_EP_DEEPL_LANGUAGES, /* /v2/languages */
    SRV_EP_DEEPL_USAGE,     /* /v2/usage */
    SRV_EP_DEEPL_DOCUMENT,  /* /v2/document, /v2/document/ID[/result] */
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
/* Which rows a step of a running decode stepped. */
typedef enum srv_step_kind {
    SRV_STEP_ALL = 0,
    SRV_STEP_SHORTEST, /* the shortest texts only (--short-steps) */
    SRV_STEP_URGENT,   /* the urgent texts only (--urgent-steps) */
} srv_step_kind;
/* One step of a running decode: the sentences admitted before it, which
 * rows it stepped, its time. */
void srv_metrics_step(srv_metrics *m, int admitted, srv_step_kind kind, double seconds);
/* A model put away (0) or loaded again (1): the gauge and its counter. */
void srv_metrics_model_resident(srv_metrics *c, int resident);
/* The shared workers' scratch bytes gauge (the server's metrics: pool.h) moves by
 * delta (a worker adds what it grows, takes off what it gives back). */
void srv_metrics_scratch(srv_metrics *m, long delta);
/* The document threads' gauges (docpool.h) move by these deltas. */
void srv_metrics_documents(srv_metrics *m, long queued, long running);
/* A document refused for a full document queue. */
void srv_metrics_documents_refused(srv_metrics *m);
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

/* The series of the model named name: a child of m, made at the first call
 * for that name and kept (with its counters) as long as m, so that every
 * generation of a reloaded model counts into the same series. Hand it to
 * the model's batcher. NULL (nothing recorded) when out of memory or past
 * SRV_METRICS_MAX_MODELS names. Any thread. */
#define SRV_METRICS_MAX_MODELS 64
srv_metrics *srv_metrics_model(srv_metrics *m, const char *name);

/* A model of child's name serves (info: transformerd_model_info's labels,
 * copied) with these bytes, or (info NULL) only its bytes change. Its
 * ready gauge turns 1. Any thread. */
void srv_metrics_model_state(srv_metrics *child, const srv_model_info *info,
                             size_t weight_bytes, size_t worker_bytes);
/* The model's ready gauge (0 once its device failed). */
void srv_metrics_model_ready(srv_metrics *child, int ready);
/* The name serves no more (unloaded): no model_info, ready 0, no bytes;
 * its counters stay. */
void srv_metrics_model_unloaded(srv_metrics *child);

/* Prometheus text exposition format 0.0.4 (malloc'd, NUL-terminated), or
 * NULL when out of memory. ready is the value of transformerd_ready. */
/* The translation cache whose counters /metrics shows (NULL: off); set
 * before any thread renders. */
struct srv_cache;
void srv_metrics_set_cache(srv_metrics *m, struct srv_cache *c);

char *srv_metrics_render(srv_metrics *m, int ready);

#endif /* SRV_METRICS_H */
