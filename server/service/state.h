/*
 * state.h - what the daemon's modules share: the options of `serve`, the
 * loaded models, the server's lifecycle flags, readiness, and the
 * device-failed policy.
 *
 * Promise: readiness is decided here and only here (srv_server_readiness),
 * and so is what an engine error means for a model (srv_model_engine_error:
 * after TD_EDEVICE the model is failed for good; docs/api.md, "Errors" and
 * GET /health/ready).
 *
 * Threads: the main thread (serve.c) fills srv_opts before any other thread
 * starts; it is read-only after that. The models are the model set's
 * (models.h): each srv_model is reference-counted, read-only once it takes
 * requests except its atomics and its failed state, which the policy sets
 * from a scheduler thread (via a job's completion) and any thread reads.
 */
#ifndef SRV_STATE_H
#define SRV_STATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "batcher.h"
#include "metrics.h"
#include "tokenizer.h"
#include "translator.h"

/* The options of `transformerd serve` (flags and TRANSFORMERD_* variables,
 * docs/api.md "Command line and environment"). */
#define SRV_MAX_MODEL_SPECS 64

/* format=html answers of the LibreTranslate endpoints (--libre-html-answer). */
typedef enum srv_html_answer {
    SRV_HTML_ESCAPED = 0, /* the HTML as serialized: &lt;script&gt; stays text */
    SRV_HTML_UNESCAPED,   /* through html.unescape, as LibreTranslate 1.x: live markup */
} srv_html_answer;

typedef struct srv_opts {
    const char *model_dir;    /* the default model, when no --model or --models-dir is given */
    const char *model_specs[SRV_MAX_MODEL_SPECS]; /* --model [NAME=]DIR, in order */
    int n_model_specs;
    const char *lang_specs[SRV_MAX_MODEL_SPECS];  /* --model-languages NAME=SRC-TGT */
    int n_lang_specs;
    const char *models_dir;   /* --models-dir: every model below it; runtime loads from it */
    long max_memory;          /* --max-memory: bytes of models (weights + workers) on the
                                 device, 0 = no budget */
    long cache_bytes;         /* --cache-bytes: the translation cache (cache.h), 0 = off */
    const char *device;       /* "cpu" | "cuda[:N]" */
    const char *dtype;        /* weight storage: auto | float32 | float16 | bfloat16 */
    const char *precision;    /* half-weight GEMMs on cuda: full | half */
    const char *host;         /* numeric address or "localhost" */
    int port;                 /* 0: any free port (printed on stderr) */
    int threads;              /* engine CPU threads; 0 = all cores */
    int http_threads;         /* MHD thread pool size */
    int workers;              /* td_workers (scheduler threads) per model */
    srv_scheduler scheduler;  /* inflight (default) | batch */
    srv_fair_share fair_share; /* --fair-share: request (default) | client */
    int worker_nice;          /* --worker-nice: the scheduler threads' nice value */
    int short_steps;          /* --short-steps: inflight steps of the shortest texts only */
    int urgent_steps;         /* --urgent-steps: inflight steps of urgent texts only */
    int scratch_full;         /* --scratch full: workers allocated for their maxima */
    int scratch_idle_s;       /* --scratch-idle-s: idle seconds before a worker shrinks */
    int model_idle_unload;    /* --model-idle-unload: idle seconds before a model's weights
                                 are freed (0: never) */
    const char *preload;      /* --preload: comma-separated names kept resident */
    int test_step_delay_ms;   /* tests only: sleep after each step / batch */
    int document_threads;     /* --document-threads: threads parsing and rendering
                                 documents (docpool.h) */
    int document_queue;       /* --document-queue: documents waiting for one before 503 */
    const char *test_document_gate; /* tests only: a document thread waits for this file */
    int max_batch_tokens;     /* padded source tokens per batch */
    int max_batch_size;       /* sentences per batch */
    int max_beam;             /* largest beam_size a request may ask; 0 = the model's
                                 num_beams (capped at TD_MAX_BEAM) */
    int batch_delay_ms;       /* longest wait of the oldest job for company */
    int max_queue;            /* texts waiting in a model's queue */
    int max_input_tokens;     /* per text, incl. </s>; 0 = max positions */
    int max_batch_texts;      /* texts per request */
    long max_body_bytes;
    long max_file_bytes;      /* --max-file-bytes: a /translate_file upload's body */
    int max_file_texts;       /* --max-file-texts: sentences of one file */
    int file_queue_texts;     /* --file-queue-texts: a file's sentences queued at once */
    int file_timeout_s;       /* --file-timeout-s: a /translate_file request's deadline */
    long max_response_bytes;  /* estimated response of one request (reqlimits.h) */
    int request_timeout_s;    /* whole-request deadline */
    int idle_timeout_s;       /* MHD connection (idle) timeout */
    int max_connections;
    int max_connections_per_ip; /* 0 = no per-IP limit */
    int header_timeout_s;     /* whole header phase of a request (slow senders) */
    const char *log_format;   /* access log: "text" | "json" */
    int drain_timeout_s;      /* SIGTERM: time to finish queued work */
    int drain_delay_s;        /* SIGTERM: unready but serving this long before the drain */
    const char *api_key;      /* NULL or "" = no key */
    const char *cors_origins; /* "*", "" (no CORS headers) or a comma-separated list */
    srv_html_answer libre_html; /* --libre-html-answer: escaped (default) | unescaped */
    long max_files_bytes;     /* translated files kept for /download_file, in all */
    int file_ttl_s;           /* how long a translated file is kept */
    int deepl_char_limit;     /* --deepl-character-limit: characters the DeepL API
                                 translates before 456 (0: no limit) */
    const char *replica_id;   /* --replica-id: this replica's name behind a balancer
                                 (download links, request ids); NULL/"": none */
    const char *textcat_dir;  /* libexttextcat's fingerprints (<code>.lm) */
    const char *langid_dir;   /* our profiles (<code>.lid.gz); NULL: beside the models */
    srv_fault test_fault;     /* --test-fail-batches: tests only */
} srv_opts;

/* One loaded model: a name, a language pair, its engine objects and its
 * own batcher (workers and queue). Reference-counted (models.h): the model
 * set holds one reference while the model takes new requests, each request
 * one from routing to its completion; the last reference lets the model
 * set free it. Everything but the atomics and the failed state is written
 * before the model is published and read-only afterwards. */
struct srv_models;

typedef struct srv_model {
    char name[128];
    char src_lang[16], tgt_lang[16];
    int n_langs;           /* its tokenizer's languages (td_tok_n_langs): > 0 for a
                              multilingual model, which serves every pair of them
                              (src_lang and tgt_lang are then "mul") */
    char langs_given[40];  /* "SRC-TGT" from --model-languages / the load request, or "" */
    int package;           /* an Argos Translate package (service/argos.h): its pair from
                              metadata.json, decoded as argos-translate asks CTranslate2 */
    char dtype[16];
    char device[32];
    char dir[4096];        /* where it was loaded from; a reload reads it again */
    unsigned generation;   /* 1 for the first load of its name, +1 per reload */
    td_model *m;
    td_tokenizer *tok;
    td_decode_opts defaults;
    int max_input_tokens;  /* effective per-text limit */
    int max_length;        /* largest max_length a request may ask */
    int max_beam;          /* largest beam_size a request may ask (--max-beam) */
    size_t worker_bytes;   /* arena of one worker */
    int workers;
    size_t weight_bytes;   /* td_model_weight_bytes */
    size_t bytes;          /* weights + every worker: what --max-memory counts */
    srv_batcher *b;
    srv_metrics *metrics;  /* its name's series (srv_metrics_model), shared by every
                              generation of the name; owned by the server's metrics */
    atomic_int refs;       /* the model set's + one per request routed to it */
    atomic_int resident;   /* its weights and workers are there (0: put away while
                              idle, --model-idle-unload; loaded again on demand) */
    atomic_int wake;       /* a request queued while it was put away */
    int preload;           /* --preload: never put away */
    uint64_t files_sig;    /* its directory's entries when loaded (srv_models' dir
                              signature): a model put away wakes only on the same files */
    struct srv_models *set; /* the model set it belongs to (models.h) */
    /* Set by srv_model_engine_error, never cleared: failed_claim picks the
     * one writer of failed_msg, failed (set after the message is written)
     * publishes it. */
    atomic_int failed_claim;
    atomic_int failed;
    char failed_msg[256];
} srv_model;

typedef struct srv_server {
    srv_opts o;
    struct srv_models *models; /* the model set (models.h), made before any thread starts */
    srv_metrics *metrics;
    struct srv_langid *langid; /* the language detector (languages.h), made before
                                  the daemon serves */
    struct srv_cache *cache;   /* the translation cache (cache.h), or NULL (off); made
                                  before any thread, freed after the models */
    struct srv_libre *libre; /* the LibreTranslate API's file store (api/libre.h), opaque
                                here; written before ready is set */
    struct srv_docpool *docs; /* the document threads (docpool.h), made before the daemon
                                 serves; NULL: documents are parsed on the caller's thread */
    atomic_int ready;      /* every configured model loaded and warmed (set once by the
                              main thread) */
    atomic_int draining;   /* SIGTERM/SIGINT received (set once by the main thread) */
    atomic_int unready;    /* --drain-delay-s after SIGTERM: /health/ready says 503
                              while requests are still served (main thread) */
} srv_server;

typedef enum srv_readiness {
    SRV_READY = 0,
    SRV_NOT_READY_DRAINING,  /* after SIGTERM/SIGINT */
    SRV_NOT_READY_LOADING,   /* the configured models are loading or warming */
    SRV_NOT_READY_DEVICE,    /* a model's device failed */
} srv_readiness;

/* Whether the server takes work, and if not why, in that order of
 * precedence. With SRV_NOT_READY_DEVICE and why non-NULL, why receives
 * "model NAME: the device failed: MESSAGE" of the first failed model.
 * Any thread. */
srv_readiness srv_server_readiness(const srv_server *s, char *why, size_t why_len);

#endif /* SRV_STATE_H */
