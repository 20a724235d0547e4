/*
 * serve.c - `transformerd serve`: options, start-up and shutdown.
 *
 * Every flag --foo-bar also reads TRANSFORMERD_FOO_BAR (flags win). Start-up
 * order: seed jansson's hash (before any thread), route SIGTERM/SIGINT/SIGHUP
 * to this thread through a pipe (signals.h: whichever thread receives
 * them), listen (liveness answers, readiness is 503), load the model and
 * tokenizer, make the workers and run a warm-up batch on each, then report
 * ready. On SIGTERM/SIGINT: readiness 503, stop accepting, finish queued and
 * running work within --drain-timeout-s, let every resumed connection get
 * its response, stop, exit 0.
 *
 * The wiring: the state (state.h) is filled here before ready is set;
 * each model gets a batcher (batcher.h) made from the options; the HTTP
 * layer (http.h) is started first and stopped last. Everything in this file
 * runs on the main thread.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "batcher.h"
#include "buildinfo.h"
#include "cache.h"
#include "clock.h"
#include "device.h"
#include "docpool.h"
#include "glossary.h"
#include "http.h"
#include "languages.h"
#include "libre.h"
#include "metrics.h"
#include "models.h"
#include "request.h"
#include "routes.h"
#include "serve.h"
#include "signals.h"
#include "state.h"

typedef enum opt_kind {
    OPT_STR,
    OPT_INT,
    OPT_LONG,
    OPT_FAULT, /* srv_fault: "engine" | "device" ("" or "none": off) */
    OPT_SCHED, /* srv_scheduler: "inflight" | "batch" */
    OPT_SHARE, /* srv_fair_share: "request" | "client" */
    OPT_SCRATCH, /* int: "on-demand" (0) | "full" (1) */
    OPT_MODEL, /* --model [NAME=]DIR, repeatable (the variable: a comma-separated list) */
    OPT_LANGS, /* --model-languages NAME=SRC-TGT, repeatable (likewise) */
    OPT_BYTES, /* a byte count with an optional K, M, G or T suffix (binary) */
    OPT_HTML,  /* srv_html_answer: "escaped" | "unescaped" */
} opt_kind;

typedef struct opt_def {
    const char *flag;
    opt_kind kind;
    size_t off;
    long lo, hi;
    const char *help;
} opt_def;

/* Every option of serve, each part its layer's: the service's (state.h),
 * the API's (api/request.h), the transport's (transport/http.h). */
typedef struct serve_opts {
    srv_opts svc;
    srv_api_opts api;
    srv_http_opts http;
} serve_opts;

#define OFF(f) offsetof(serve_opts, f)
static const opt_def k_opts[] = {
    {"--model", OPT_MODEL, OFF(svc.model_specs), 0, 0,
     "[NAME=]DIR: a model directory (Hugging Face Marian layout), named NAME (default: the "
     "directory's name); repeat for several models"},
    {"--models-dir", OPT_STR, OFF(svc.models_dir), 0, 0,
     "serve every model directory below DIR (config.json + weights); "
     "POST /v1/models loads from it at run time"},
    {"--model-languages", OPT_LANGS, OFF(svc.lang_specs), 0, 0,
     "NAME=SRC-TGT: the language pair of model NAME (default: tokenizer_config.json's "
     "source_lang/target_lang, else the directory's name, e.g. opus-mt-en-de)"},
    {"--max-memory", OPT_BYTES, OFF(svc.max_memory), 0, 1L << 50,
     "bytes the models' weights and the shared workers (at their limits) may take on the "
     "device (K, M, G, T suffixes; 0: no limit); a runtime load or reload past it is refused "
     "(507)"},
    {"--cache-bytes", OPT_BYTES, OFF(svc.cache_bytes), 0, 1L << 50,
     "the translation cache: finished sentences kept for their next request, in bytes (K, M, "
     "G, T suffixes; 0: off)"},
    {"--device", OPT_STR, OFF(svc.device), 0, 0, "cpu | cuda[:N]"},
    {"--dtype", OPT_STR, OFF(svc.dtype), 0, 0,
     "weight storage: auto (the checkpoint's) | float32 | float16 (cuda) | bfloat16 (cuda, cpu "
     "with AVX512-BF16 or AMX) | int8 | int8-all (cpu)"},
    {"--precision", OPT_STR, OFF(svc.precision), 0, 0,
     "cuda GEMMs with half weights: full (float32-accurate activations) | half"},
    {"--host", OPT_STR, OFF(http.host), 0, 0, "address to listen on"},
    {"--port", OPT_INT, OFF(http.port), 0, 65535, "port (0: any free port, printed)"},
    {"--threads", OPT_INT, OFF(svc.threads), 0, 1024, "engine CPU threads (0: all cores)"},
    {"--http-threads", OPT_INT, OFF(http.http_threads), 1, 256, "HTTP thread pool size"},
    {"--workers", OPT_INT, OFF(svc.workers), 0, 64,
     "engine workers shared by every model (threads with their own memory; 0: 2 of half the "
     "cores each on a CPU of 2 or more cores, else 1)"},
    {"--scheduler", OPT_SCHED, OFF(svc.scheduler), 0, 0,
     "inflight: texts join and leave a worker's running decode between steps | batch: "
     "a batch runs to its end before the next forms"},
    {"--fair-share", OPT_SHARE, OFF(svc.fair_share), 0, 0,
     "whose share of a model's queue a request takes (a large request never holds the model "
     "for the others): request: its own | client: one per client address, for a daemon that "
     "sees its clients' own addresses (not behind a proxy)"},
    {"--scratch", OPT_SCRATCH, OFF(svc.scratch_full), 0, 0,
     "the workers' memory: on-demand: small at start, grown as requests need it (between two "
     "decodes) and given back after --scratch-idle-s idle | full: allocated for the largest "
     "request at start"},
    {"--model-idle-unload", OPT_INT, OFF(svc.model_idle_unload), 0, 604800,
     "seconds without a request after which a model's weights and workers are freed; the next "
     "request loads them again (and waits for it) (0: never)"},
    {"--preload", OPT_STR, OFF(svc.preload), 0, 0,
     "comma-separated model names that --model-idle-unload never puts away"},
    {"--scratch-idle-s", OPT_INT, OFF(svc.scratch_idle_s), 0, 86400,
     "on-demand: seconds a worker is idle before it gives back the memory it grew (0: never)"},
    {"--worker-nice", OPT_INT, OFF(svc.worker_nice), 0, 19,
     "nice value of the model workers' threads, so that the HTTP threads run first on a "
     "busy CPU (0: the process's own)"},
    {"--short-steps", OPT_INT, OFF(svc.short_steps), 0, 8,
     "inflight: steps of only the texts with the shortest sources (a quarter of the rows) "
     "after each step of every row, once a worker runs 16 rows or more (0: off)"},
    {"--urgent-steps", OPT_INT, OFF(svc.urgent_steps), 0, 16,
     "inflight: steps of only a streamed answer's first sentences after each step of every "
     "row, so that they arrive sooner (0: off)"},
    {"--max-batch-tokens", OPT_INT, OFF(svc.max_batch_tokens), 1, 1 << 24,
     "padded source tokens per batch"},
    {"--max-batch-size", OPT_INT, OFF(svc.max_batch_size), 1, 1024, "sentences per batch"},
    {"--max-beam", OPT_INT, OFF(svc.max_beam), 0, TD_MAX_BEAM,
     "largest beam_size a request may ask (0: the model's num_beams); sizes the workers"},
    {"--batch-delay-ms", OPT_INT, OFF(svc.batch_delay_ms), 0, 60000,
     "longest wait of the oldest text for a fuller batch"},
    {"--max-queue", OPT_INT, OFF(svc.max_queue), 1, 1 << 20, "queued texts before 429"},
    {"--document-threads", OPT_INT, OFF(svc.document_threads), 1, 256,
     "threads that parse uploaded documents and render their translations (/translate_file), "
     "off the HTTP threads"},
    {"--document-queue", OPT_INT, OFF(svc.document_queue), 1, 1 << 16,
     "documents waiting for a document thread before 503"},
    {"--max-input-tokens", OPT_INT, OFF(svc.max_input_tokens), 0, 1 << 20,
     "tokens per text incl. </s> (0: the model's max positions)"},
    {"--max-batch-texts", OPT_INT, OFF(api.max_batch_texts), 1, 1 << 16, "texts per request"},
    {"--max-body-bytes", OPT_BYTES, OFF(http.max_body_bytes), 1, 1L << 30,
     "request body limit (K, M, G suffixes; /translate_file: --max-file-bytes)"},
    {"--max-file-bytes", OPT_BYTES, OFF(api.max_file_bytes), 1, 1L << 34,
     "a /translate_file upload's body (K, M, G suffixes)"},
    {"--max-file-texts", OPT_INT, OFF(svc.max_file_texts), 1, 1 << 22,
     "sentences of one file (/translate_file): a file with more is refused (400)"},
    {"--file-queue-texts", OPT_INT, OFF(svc.file_queue_texts), 1, 1 << 20,
     "a file's sentences in a model's queue at once; the others join as those finish, so "
     "that other requests are answered between them and the file never fills --max-queue"},
    {"--file-timeout-s", OPT_INT, OFF(svc.file_timeout_s), 1, 7 * 86400,
     "a /translate_file request's deadline (its upload, translation and render)"},
    {"--max-response-bytes", OPT_BYTES, OFF(api.max_response_bytes), 1, 1L << 40,
     "estimated response size one request may ask for (422 response_too_large; K, M, G "
     "suffixes)"},
    {"--request-timeout-s", OPT_INT, OFF(svc.request_timeout_s), 1, 86400,
     "whole-request deadline (504)"},
    {"--idle-timeout-s", OPT_INT, OFF(http.idle_timeout_s), 1, 86400, "idle connection timeout"},
    {"--max-connections", OPT_INT, OFF(http.max_connections), 1, 1 << 20, "connections in all"},
    {"--max-connections-per-ip", OPT_INT, OFF(http.max_connections_per_ip), 0, 1 << 20,
     "connections per client address (0: no limit)"},
    {"--header-timeout-s", OPT_INT, OFF(http.header_timeout_s), 1, 86400,
     "time for a request's whole header block, however it trickles in"},
    {"--log-format", OPT_STR, OFF(http.log_format), 0, 0, "access log: text | json (JSON lines)"},
    {"--drain-timeout-s", OPT_INT, OFF(svc.drain_timeout_s), 0, 86400,
     "SIGTERM: time to finish queued and running work; then running work is cut (503)"},
    {"--drain-delay-s", OPT_INT, OFF(svc.drain_delay_s), 0, 3600,
     "SIGTERM: /health/ready answers 503 this long while requests are still served, so that a "
     "load balancer's health check takes the replica out before the drain refuses new ones "
     "(Kubernetes: the preStop sleep does it; 0)"},
    {"--api-key", OPT_STR, OFF(api.api_key), 0, 0,
     "require this key (Bearer, X-API-Key or DeepL-Auth-Key)"},
    {"--cors-origins", OPT_STR, OFF(http.cors_origins), 0, 0,
     "CORS: * (any origin), a comma-separated list of origins, or \"\" (no CORS headers)"},
    {"--libre-html-answer", OPT_HTML, OFF(api.libre_html), 0, 0,
     "LibreTranslate format=html answers: escaped (the HTML as written: a text's &lt;script&gt; "
     "stays text) | unescaped (through html.unescape as LibreTranslate 1.x, which makes it live "
     "markup)"},
    {"--max-files-bytes", OPT_BYTES, OFF(api.max_files_bytes), 1, 1L << 40,
     "translated files kept in memory for /download_file, in all (K, M, G suffixes)"},
    {"--file-ttl-s", OPT_INT, OFF(api.file_ttl_s), 1, 7 * 86400,
     "how long a translated file can be downloaded"},
    {"--deepl-character-limit", OPT_INT, OFF(api.deepl_char_limit), 0, 2147483647,
     "characters the DeepL API (/v2/translate, /v2/document) translates before it answers "
     "456 quota exceeded, as /v2/usage counts them (0: no limit)"},
    {"--replica-id", OPT_STR, OFF(api.replica_id), 0, 0,
     "this replica's name behind a load balancer (1-40 of A-Z a-z 0-9 . _ -; Kubernetes: the "
     "pod's name): in /translate_file's download links (/download_file/ID/...), which the "
     "balancer routes to it, and in the X-Request-Id it makes up (\"\": none)"},
    {"--textcat-dir", OPT_STR, OFF(svc.textcat_dir), 0, 0,
     "libexttextcat's language fingerprints (<code>.lm), for /detect and source=auto"},
    {"--langid-dir", OPT_STR, OFF(svc.langid_dir), 0, 0,
     "word and character profiles (<code>.lid.gz) that detect short texts' language "
     "(default: the langid folder beside the first model's directory; \"\": none)"},
    {"--state-dir", OPT_STR, OFF(svc.state_dir), 0, 0,
     "where the daemon keeps what outlives a restart: the glossaries (DIR/glossaries/, made at "
     "the first one; \"\": none, glossaries kept in memory only)"},
    {"--max-glossaries", OPT_INT, OFF(svc.max_glossaries), 1, 1 << 20,
     "glossaries the daemon keeps; one more is refused until one is deleted"},
    {"--max-glossary-bytes", OPT_BYTES, OFF(svc.max_glossary_bytes), 1, 1L << 32,
     "one glossary's entries as sent, in bytes (K, M, G suffixes)"},
    {"--max-glossary-entries", OPT_INT, OFF(svc.max_glossary_entries), 1, 1 << 24,
     "entries of one glossary (all its dictionaries)"},
    {"--test-fail-batches", OPT_FAULT, OFF(svc.test_fault), 0, 0,
     "FOR TESTS ONLY: engine | device: every batch after the warm-up fails with that error"},
    {"--test-step-delay-ms", OPT_INT, OFF(svc.test_step_delay_ms), 0, 10000,
     "FOR TESTS ONLY: a worker sleeps this long after each decoding step (or batch)"},
    {"--test-document-gate", OPT_STR, OFF(svc.test_document_gate), 0, 0,
     "FOR TESTS ONLY: a document thread that took a document waits until this file exists"},
};
#define N_OPTS (sizeof k_opts / sizeof k_opts[0])

static void defaults(serve_opts *all);

/* An option's default, as usage prints it. */
static void default_text(const opt_def *d, char *out, size_t n)
{
    serve_opts o;
    defaults(&o);
    const char *base = (const char *)&o + d->off;
    switch (d->kind) {
    case OPT_STR: {
        const char *v = *(const char *const *)(const void *)base;
        snprintf(out, n, "%s", !v ? "none" : !*v ? "\"\"" : v);
        break;
    }
    case OPT_INT: snprintf(out, n, "%d", *(const int *)(const void *)base); break;
    case OPT_LONG: snprintf(out, n, "%ld", *(const long *)(const void *)base); break;
    case OPT_FAULT: snprintf(out, n, "none"); break;
    case OPT_MODEL: snprintf(out, n, "%s", srv_default_model_dir()); break;
    case OPT_LANGS: snprintf(out, n, "none"); break;
    case OPT_BYTES: snprintf(out, n, "%ld", *(const long *)(const void *)base); break;
    case OPT_SCHED:
        snprintf(out, n, "%s",
                 *(const srv_scheduler *)(const void *)base == SRV_SCHED_BATCH ? "batch"
                                                                               : "inflight");
        break;
    case OPT_SHARE:
        snprintf(out, n, "%s",
                 *(const srv_fair_share *)(const void *)base == SRV_SHARE_CLIENT ? "client"
                                                                                 : "request");
        break;
    case OPT_SCRATCH:
        snprintf(out, n, "%s", *(const int *)(const void *)base ? "full" : "on-demand");
        break;
    case OPT_HTML:
        snprintf(out, n, "%s",
                 *(const srv_html_answer *)(const void *)base == SRV_HTML_UNESCAPED ? "unescaped"
                                                                                    : "escaped");
        break;
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: transformerd serve [--model [NAME=]DIR]... [--models-dir DIR] [options]\n"
               "every option is also read from TRANSFORMERD_<NAME> (e.g. TRANSFORMERD_PORT; "
               "repeatable ones as a comma-separated list); flags win\n");
    for (size_t i = 0; i < N_OPTS; i++) {
        char def[512];
        default_text(&k_opts[i], def, sizeof def);
        fprintf(f, "  %-26s %s (default: %s)\n", k_opts[i].flag, k_opts[i].help, def);
    }
}

/* $XDG_DATA_HOME/transformerd, else $HOME/.local/share/transformerd, else
 * "" (no state directory). */
static const char *default_state_dir(void)
{
    static char dir[4096];
    const char *x = getenv("XDG_DATA_HOME"), *h = getenv("HOME");
    if (x && x[0] == '/')
        snprintf(dir, sizeof dir, "%s/transformerd", x);
    else if (h && h[0] == '/')
        snprintf(dir, sizeof dir, "%s/.local/share/transformerd", h);
    else
        dir[0] = 0;
    return dir;
}

static void defaults(serve_opts *all)
{
    memset(all, 0, sizeof *all);
    srv_opts *o = &all->svc;
    srv_api_opts *a = &all->api;
    srv_http_opts *h = &all->http;
    o->model_dir = srv_default_model_dir(); /* TRANSFORMERD_MODEL, source tree, installed */
    o->device = "cpu";
    o->dtype = "auto";
    o->precision = "full";
    h->host = "127.0.0.1";
    h->port = 8080;
    h->http_threads = 4;
    o->workers = 0; /* resolve_workers(): docs/decisions.md, "CPU threads" */
    o->worker_nice = 5; /* docs/decisions.md, "Worker threads at nice 5" */
    o->short_steps = 0; /* docs/decisions.md, "Steps of the shortest texts only" */
    o->urgent_steps = 4; /* docs/decisions.md, "A streamed answer's first sentences" */
    o->scratch_idle_s = 30; /* docs/decisions.md, "Workers' memory on demand" */
    o->max_batch_tokens = 8192;
    o->max_batch_size = 32;
    o->batch_delay_ms = 0; /* docs/decisions.md: batches form while the worker runs */
    o->max_queue = 1024;
    o->document_threads = 2;
    o->document_queue = 32;
    a->max_batch_texts = 64;
    h->max_body_bytes = 1L << 20;
    /* a 50 MB office file; a feature film's 3,000 cues and an EPUB novel's
     * tens of thousands of sentences; an hour of one CPU worker for them
     * (docs/api.md, "Limits that fit files") */
    a->max_file_bytes = 64L << 20;
    o->max_file_texts = 100000;
    o->file_queue_texts = 64;
    o->file_timeout_s = 3600;
    a->max_response_bytes = 64L << 20;
    o->request_timeout_s = 60;
    h->idle_timeout_s = 30;
    h->max_connections = 1024;
    h->max_connections_per_ip = 64; /* one address cannot take every slot */
    h->header_timeout_s = 10;
    h->log_format = "text";
    o->drain_timeout_s = 30;
    h->cors_origins = "*"; /* as LibreTranslate */
    a->max_files_bytes = 64L << 20;
    o->cache_bytes = 64L << 20;
    a->file_ttl_s = 1800;
    o->textcat_dir = TD_TEXTCAT_DIR;
    o->state_dir = default_state_dir(); /* docs/decisions.md, "Glossaries" */
    o->max_glossaries = 1000;
    o->max_glossary_bytes = 10L << 20; /* DeepL's bound of one glossary */
    o->max_glossary_entries = 100000;
}

/* "8G", "512MiB", "1000": bytes (binary multiples); -1 when malformed. */
static long parse_bytes(const char *v)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || x < 0)
        return -1;
    static const char sfx[] = "KMGT";
    const char *p = *end ? strchr(sfx, toupper((unsigned char)*end)) : NULL;
    if (*end && !p)
        return -1;
    if (p) {
        for (int i = 0; i <= (int)(p - sfx); i++)
            x *= 1024;
        end++;
        if (!strcmp(end, "i") || !strcmp(end, "iB") || !strcmp(end, "B"))
            end += strlen(end);
    }
    if (*end || x > (double)(1L << 50))
        return -1;
    return (long)x;
}

static int set_opt(serve_opts *all, const opt_def *d, const char *v, const char *from)
{
    srv_opts *o = &all->svc;
    char *base = (char *)all + d->off;
    if (d->kind == OPT_STR) {
        *(const char **)(void *)base = v;
        return 0;
    }
    if (d->kind == OPT_MODEL || d->kind == OPT_LANGS) {
        int *n = d->kind == OPT_MODEL ? &o->n_model_specs : &o->n_lang_specs;
        if (*n >= SRV_MAX_MODEL_SPECS) {
            fprintf(stderr, "transformerd: %s: at most %d\n", from, SRV_MAX_MODEL_SPECS);
            return -1;
        }
        ((const char **)(void *)base)[(*n)++] = v;
        return 0;
    }
    if (d->kind == OPT_BYTES) {
        long x = parse_bytes(v);
        if (x < 0 || x < d->lo || x > d->hi) {
            fprintf(stderr,
                    "transformerd: %s: expected bytes in %ld..%ld (e.g. 8G, 512M, 1000), got "
                    "'%s'\n",
                    from, d->lo, d->hi, v);
            return -1;
        }
        *(long *)(void *)base = x;
        return 0;
    }
    if (d->kind == OPT_FAULT) {
        srv_fault f = !strcmp(v, "engine")             ? SRV_FAULT_ENGINE
                      : !strcmp(v, "device")           ? SRV_FAULT_DEVICE
                      : !*v || !strcmp(v, "none")      ? SRV_FAULT_NONE
                                                       : (srv_fault)-1;
        if ((int)f < 0) {
            fprintf(stderr, "transformerd: %s: expected engine or device, got '%s'\n", from, v);
            return -1;
        }
        *(srv_fault *)(void *)base = f;
        return 0;
    }
    if (d->kind == OPT_SCHED) {
        srv_scheduler sc = !strcmp(v, "inflight") ? SRV_SCHED_INFLIGHT
                           : !strcmp(v, "batch")  ? SRV_SCHED_BATCH
                                                  : (srv_scheduler)-1;
        if ((int)sc < 0) {
            fprintf(stderr, "transformerd: %s: expected inflight or batch, got '%s'\n", from, v);
            return -1;
        }
        *(srv_scheduler *)(void *)base = sc;
        return 0;
    }
    if (d->kind == OPT_SCRATCH) {
        if (strcmp(v, "on-demand") && strcmp(v, "full")) {
            fprintf(stderr, "transformerd: %s: expected on-demand or full, got '%s'\n", from, v);
            return -1;
        }
        *(int *)(void *)base = !strcmp(v, "full");
        return 0;
    }
    if (d->kind == OPT_HTML) {
        srv_html_answer h = !strcmp(v, "escaped")     ? SRV_HTML_ESCAPED
                            : !strcmp(v, "unescaped") ? SRV_HTML_UNESCAPED
                                                      : (srv_html_answer)-1;
        if ((int)h < 0) {
            fprintf(stderr, "transformerd: %s: expected escaped or unescaped, got '%s'\n", from,
                    v);
            return -1;
        }
        *(srv_html_answer *)(void *)base = h;
        return 0;
    }
    if (d->kind == OPT_SHARE) {
        srv_fair_share sh = !strcmp(v, "request")  ? SRV_SHARE_REQUEST
                            : !strcmp(v, "client") ? SRV_SHARE_CLIENT
                                                   : (srv_fair_share)-1;
        if ((int)sh < 0) {
            fprintf(stderr, "transformerd: %s: expected request or client, got '%s'\n", from, v);
            return -1;
        }
        *(srv_fair_share *)(void *)base = sh;
        return 0;
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < d->lo || x > d->hi) {
        fprintf(stderr, "transformerd: %s: expected an integer in %ld..%ld, got '%s'\n", from,
                d->lo, d->hi, v);
        return -1;
    }
    if (d->kind == OPT_INT)
        *(int *)(void *)base = (int)x;
    else
        *(long *)(void *)base = x;
    return 0;
}

/* TRANSFORMERD_MAX_BATCH_TOKENS for --max-batch-tokens. */
static void env_name(const char *flag, char *out, size_t n)
{
    size_t k = (size_t)snprintf(out, n, "TRANSFORMERD_");
    for (const char *p = flag + 2; *p && k + 1 < n; p++)
        out[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    out[k] = 0;
}

/* A list variable (TRANSFORMERD_MODEL=a,b=dir2): each item set in turn;
 * the copies live as long as the process (the options point into them). */
static int set_list_env(serve_opts *o, const opt_def *d, const char *v, const char *name)
{
    char *copy = strdup(v);
    if (!copy)
        return -1;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (set_opt(o, d, t, name))
            return -1;
    return 0; /* copy is referenced by o */
}

/* --workers 0 (the default): on the CPU two workers of half the cores each
 * (--threads 0), or of --threads each when two of them fit the cores; one
 * worker otherwise and on a GPU. Two single-thread workers served 1.4-1.7x
 * the sentences/s of one two-thread worker on 2 cores at 8 and 64 clients
 * (0.84-0.93x for a lone client; docs/decisions.md, "CPU threads"): each
 * overlaps its host-side work (search, tokenizing, HTTP) with the other's
 * products, and neither waits on a partner thread. */
static void resolve_workers(srv_opts *o)
{
    if (o->workers > 0)
        return;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o->workers = 1;
    if (strcmp(o->device, "cpu") || cores < 2 || (o->threads > 0 && 2L * o->threads > cores))
        return;
    o->workers = 2;
    if (o->threads == 0)
        o->threads = (int)(cores / 2 < 1024 ? cores / 2 : 1024);
}

static int parse_opts(serve_opts *all, int argc, char **argv)
{
    srv_opts *o = &all->svc;
    defaults(all);
    for (size_t i = 0; i < N_OPTS; i++) {
        char name[64];
        env_name(k_opts[i].flag, name, sizeof name);
        const char *v = getenv(name);
        int list = k_opts[i].kind == OPT_MODEL || k_opts[i].kind == OPT_LANGS;
        if (v && (list ? set_list_env(all, &k_opts[i], v, name) : set_opt(all, &k_opts[i], v, name)))
            return -1;
    }
    /* a repeatable flag replaces its variable's list (flags win) */
    int flag_models = 0, flag_langs = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 1;
        }
        const opt_def *d = NULL;
        const char *v = NULL;
        for (size_t k = 0; k < N_OPTS; k++) {
            size_t fl = strlen(k_opts[k].flag);
            if (!strcmp(argv[i], k_opts[k].flag)) {
                d = &k_opts[k];
                if (i + 1 >= argc) {
                    fprintf(stderr, "transformerd: %s needs a value\n", argv[i]);
                    return -1;
                }
                v = argv[++i];
            } else if (!strncmp(argv[i], k_opts[k].flag, fl) && argv[i][fl] == '=') {
                d = &k_opts[k];
                v = argv[i] + fl + 1;
            }
            if (d)
                break;
        }
        if (!d) {
            fprintf(stderr, "transformerd: serve: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return -1;
        }
        if (d->kind == OPT_MODEL && !flag_models++)
            o->n_model_specs = 0;
        if (d->kind == OPT_LANGS && !flag_langs++)
            o->n_lang_specs = 0;
        if (set_opt(all, d, v, d->flag))
            return -1;
    }
    if (o->models_dir && !*o->models_dir)
        o->models_dir = NULL;
    td_device_kind dev_kind;
    int dev_index;
    char derr[160];
    if (td_device_parse(o->device, &dev_kind, &dev_index, derr, sizeof derr) != 0) {
        fprintf(stderr, "transformerd: --device: %s\n", derr);
        return -1;
    }
    resolve_workers(o);
    char nerr[256];
    const td_load_opts lo = {.dtype = o->dtype, .precision = o->precision};
    if (td_load_opts_check(&lo, nerr, sizeof nerr) != 0) {
        fprintf(stderr, "transformerd: %s\n", nerr); /* names --dtype / --precision's value */
        return -1;
    }
    if (all->api.max_batch_texts > o->max_queue) {
        fprintf(stderr, "transformerd: --max-batch-texts (%d) exceeds --max-queue (%d)\n",
                all->api.max_batch_texts, o->max_queue);
        return -1;
    }
    return 0;
}

/* 1 when path (a file of the model directory dir) opens for reading and is a
 * regular file; else 0, said on stderr. */
static int readable(const char *dir, const char *path)
{
    struct stat st;
    errno = 0;
    FILE *f = fopen(path, "rb");
    int ok = f && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    int e = errno;
    if (f)
        fclose(f);
    if (!ok)
        fprintf(stderr, "transformerd: model directory '%s': %s: %s\n", dir, path,
                e ? strerror(e) : "not a regular file");
    return ok;
}

/* The model directory is there and holds a model's files (td_model_probe:
 * the configuration, weights in a known format, the tokenizer's), each
 * readable, before the daemon listens: a wrong --model is exit 1 with the
 * path, not a daemon that is live but never ready. (The files' contents are
 * checked by the load.) */
static int check_model_dir(const char *dir)
{
    struct stat st;
    errno = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr,
                "transformerd: model directory '%s': %s (set --model or TRANSFORMERD_MODEL)\n",
                dir, errno ? strerror(errno) : "not a directory");
        return -1;
    }
    td_probe pr;
    if (!td_model_probe(dir, &pr)) {
        fprintf(stderr, "transformerd: model directory '%s': %s: %s\n", dir, pr.missing,
                "not there (or not a regular file)");
        return -1;
    }
    /* readable: the weight file, the configuration, the tokenizer's files */
    if (!readable(dir, pr.weights))
        return -1;
    /* the configuration beside the weights (an Argos package's in model/;
     * a format that carries its architecture may have none) */
    char fdir[4200], cfg[4400];
    td_model_files_dir(dir, fdir, sizeof fdir);
    snprintf(cfg, sizeof cfg, "%s/config.json", fdir);
    if (access(cfg, F_OK) == 0 && !readable(dir, cfg))
        return -1;
    char files[200];
    snprintf(files, sizeof files, "%s", pr.tokenizer);
    for (char *save = NULL, *name = strtok_r(files, " ", &save); name;
         name = strtok_r(NULL, " ", &save)) {
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, name);
        if (!readable(dir, p))
            return -1;
    }
    return 0;
}

/* Loads specs[i] at start-up, kept at specs[*kept] when it loads. A model
 * named by --model that fails stops the daemon (-1, said); one found under
 * --models-dir (a LibreTranslate packages folder may hold a broken one) is
 * left out, said why, and the others serve. */
static int load_initial(srv_server *s, srv_model_spec *specs, int i, int *kept, char *err,
                        size_t errlen)
{
    if (srv_models_load_initial(s->models, &specs[i], err, errlen) == 0) {
        if (*kept != i)
            specs[*kept] = specs[i];
        (*kept)++;
        return 0;
    }
    if (specs[i].scanned) {
        fprintf(stderr, "transformerd: --models-dir: model %s: not served: %s\n",
                specs[i].name, err);
        return 0;
    }
    fprintf(stderr, "transformerd: model %s: %s\n", specs[i].name, err);
    return -1;
}

/* A model's name from a directory: its base name, with every character
 * outside [A-Za-z0-9._-] made '_' (names go into paths and labels). */
static void name_of_dir(const char *dir, char *out, size_t n)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    size_t k = strlen(tmp);
    while (k > 1 && tmp[k - 1] == '/')
        tmp[--k] = 0;
    const char *base = strrchr(tmp, '/') ? strrchr(tmp, '/') + 1 : tmp;
    snprintf(out, n, "%.127s", base);
    for (char *p = out; *p; p++)
        if (!srv_model_name_char(*p))
            *p = '_';
}

/* "[NAME=]DIR" into spec; -1 with a message for a bad name. */
static int spec_of(const char *v, srv_model_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    const char *eq = strchr(v, '=');
    size_t nl = eq ? (size_t)(eq - v) : 0;
    if (eq && !memchr(v, '/', nl)) {
        if (nl == 0 || nl >= sizeof spec->name) {
            fprintf(stderr, "transformerd: --model %s: empty or too long a name\n", v);
            return -1;
        }
        memcpy(spec->name, v, nl);
        snprintf(spec->dir, sizeof spec->dir, "%s", eq + 1);
        if (!srv_model_name_ok(spec->name)) {
            fprintf(stderr, "transformerd: --model %s: a name is 1..127 of A-Z a-z 0-9 . _ -\n",
                    v);
            return -1;
        }
        return 0;
    }
    snprintf(spec->dir, sizeof spec->dir, "%s", v);
    name_of_dir(v, spec->name, sizeof spec->name);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every subdirectory of dir with config.json and weights in a known format
 * (td_model_probe), in name order, appended to specs (at most max). Returns the new count, or
 * -1 when dir cannot be read. */
static int scan_models_dir(const char *dir, srv_model_spec *specs, int n, int max)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "transformerd: --models-dir '%s': %s\n", dir, strerror(errno));
        return -1;
    }
    char *names[SRV_MAX_MODEL_SPECS];
    int k = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && k < SRV_MAX_MODEL_SPECS;) {
        char p[4200];
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        td_probe pr;
        int whole = td_model_probe(p, &pr);
        int has = pr.has_config && pr.format && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
        char meta[4300];
        snprintf(meta, sizeof meta, "%s/metadata.json", p);
        int package = access(meta, F_OK) == 0; /* an Argos package, model/ or not */
        if (!whole && (has || package))
            fprintf(stderr, "transformerd: --models-dir: %s: not served: %s missing\n",
                    e->d_name, package && !td_tok_argos_package(p) ? "model/"
                               : pr.missing[0] ? pr.missing : "a file");
        if (!whole)
            has = 0;
        if (has && (names[k] = strdup(e->d_name)) != NULL)
            k++;
    }
    closedir(d);
    qsort(names, (size_t)k, sizeof *names, cmp_names);
    for (int i = 0; i < k; i++) {
        if (n < max) {
            memset(&specs[n], 0, sizeof specs[n]);
            snprintf(specs[n].dir, sizeof specs[n].dir, "%s/%s", dir, names[i]);
            name_of_dir(names[i], specs[n].name, sizeof specs[n].name);
            specs[n].scanned = 1;
            n++;
        }
        free(names[i]);
    }
    return n;
}

/* The models of the configuration: --model in order, then --models-dir's,
 * then --model-languages applied; the default model when none is given.
 * Returns how many, or -1 (a message was printed). */
static int model_specs(const srv_opts *o, srv_model_spec *specs, int max)
{
    int n = 0;
    for (int i = 0; i < o->n_model_specs && n < max; i++)
        if (spec_of(o->model_specs[i], &specs[n++]) != 0)
            return -1;
    if (o->models_dir) {
        n = scan_models_dir(o->models_dir, specs, n, max);
        if (n < 0)
            return -1;
    }
    if (n == 0 && !o->models_dir && spec_of(o->model_dir, &specs[n++]) != 0)
        return -1;
    if (n == 0) {
        fprintf(stderr, "transformerd: --models-dir '%s': no model directory (config.json and "
                        "weights) in it\n", o->models_dir);
        return -1;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < i; k++)
            if (!strcmp(specs[i].name, specs[k].name)) {
                fprintf(stderr, "transformerd: two models are named '%s' (%s and %s); name one "
                                "with --model NAME=DIR\n", specs[i].name, specs[k].dir,
                        specs[i].dir);
                return -1;
            }
    for (int l = 0; l < o->n_lang_specs; l++) {
        const char *v = o->lang_specs[l], *eq = strchr(v, '=');
        int hit = 0;
        for (int i = 0; eq && i < n; i++)
            if (strlen(specs[i].name) == (size_t)(eq - v) && !strncmp(specs[i].name, v, (size_t)(eq - v))) {
                snprintf(specs[i].langs, sizeof specs[i].langs, "%s", eq + 1);
                hit = 1;
            }
        if (!hit || !srv_model_langs_ok(eq + 1)) {
            fprintf(stderr, "transformerd: --model-languages %s: expected NAME=SRC-TGT with the "
                            "name of a configured model and 2- or 3-letter codes\n", v);
            return -1;
        }
    }
    return n;
}

/* One line per model, then the ready line. */
static void report_ready(srv_server *s, double t0)
{
    srv_model *all[SRV_MAX_MODEL_SPECS];
    int n = srv_models_snapshot(s->models, all, SRV_MAX_MODEL_SPECS);
    size_t used, budget;
    srv_models_memory(s->models, &used, &budget);
    for (int i = 0; i < n; i++) {
        const srv_model *sm = all[i];
        fprintf(stderr,
                "transformerd: model %s (%s -> %s) from %s on %s: weights %.1f MiB; a worker "
                "of it %.1f MiB at most (batch %d x beam %d x length %d, source %d)\n",
                sm->name, sm->src_lang, sm->tgt_lang, sm->dir, sm->device,
                (double)sm->weight_bytes / (1 << 20), (double)sm->worker_bytes / (1 << 20),
                s->o.max_batch_size, sm->max_beam, sm->max_length, sm->max_input_tokens);
        srv_model_put(all[i]);
    }
    char b[64] = "no limit";
    if (budget)
        snprintf(b, sizeof b, "--max-memory %.1f MiB", (double)budget / (1 << 20));
    srv_workers_info wi;
    srv_models_workers(s->models, &wi);
    fprintf(stderr,
            "transformerd: ready: %d model(s) on %s, loaded and warmed in %.2f s; %d %s "
            "worker(s) shared by every model, %.1f MiB now; %.1f MiB of models and workers at "
            "their maxima (%s)\n",
            n, s->o.device, srv_now() - t0, wi.seats,
            s->o.scheduler == SRV_SCHED_BATCH ? "batch" : "inflight",
            (double)wi.scratch_bytes / (1 << 20), (double)used / (1 << 20), b);
}

/* SIGHUP's reload of every model: its outcome goes to the log. */
static void hup_done(srv_model_op *op, void *ud)
{
    (void)ud;
    fprintf(stderr, "transformerd: SIGHUP: %s\n", op->msg);
    free(op);
}

static void stop_all(srv_server *s, srv_http *http, srv_api *api)
{
    srv_http_stop(http);
    srv_docpool_free(s->docs); /* none waits after a drain */
    srv_api_free(api);
    srv_models_free(s->models);
    srv_cache_free(s->cache); /* after the models, which drop their entries */
    srv_libre_free(s->libre);
    srv_langid_free(s->langid);
    srv_glossaries_close(s->glossaries); /* requests hold their own references */
    srv_metrics_free(s->metrics);
}

/* The transport's settings, from the command line's. */
static srv_http_opts http_opts(const srv_server *s, const serve_opts *all)
{
    srv_http_opts h = all->http;
    h.request_timeout_s = s->o.request_timeout_s;
    h.replica_id = all->api.replica_id;
    h.draining = &s->draining;
    return h;
}

/* The options and the models they name (specs, *n): -1 to go on, or the
 * exit status (0 after --help, 2 for a bad option, 1 for a model
 * directory that is not one). */
static int read_opts(srv_server *s, serve_opts *all, int argc, char **argv,
                     srv_model_spec *specs, int *n)
{
    int prc = parse_opts(all, argc, argv);
    if (prc)
        return prc > 0 ? 0 : 2;
    s->o = all->svc;
    s->api = &all->api;
    *n = model_specs(&s->o, specs, SRV_MAX_MODEL_SPECS);
    if (*n < 0)
        return 2;
    for (int i = 0; i < *n; i++)
        if (check_model_dir(specs[i].dir) != 0)
            return 1;
    return -1;
}

/* Metrics, the cache and the (empty) model set. 0, or -1 (said). */
static int new_service(srv_server *s)
{
    s->metrics = srv_metrics_new();
    srv_metrics_set_limits(s->metrics, s->o.max_batch_size, s->o.max_batch_tokens);
    s->cache = srv_cache_new((size_t)s->o.cache_bytes);
    if (s->metrics)
        srv_metrics_set_cache(s->metrics, s->cache);
    s->models = s->metrics ? srv_models_new(s) : NULL;
    if (!s->metrics || !s->models) {
        fprintf(stderr, "transformerd: out of memory\n");
        return -1;
    }
    const srv_gloss_limits gl = {s->o.max_glossaries, s->o.max_glossary_bytes,
                                 s->o.max_glossary_entries};
    char warn[600], err[600];
    s->glossaries = srv_glossaries_open(s->o.state_dir, &gl, warn, sizeof warn, err, sizeof err);
    if (!s->glossaries) {
        fprintf(stderr, "transformerd: --state-dir: %s\n", err);
        return -1;
    }
    if (warn[0])
        fprintf(stderr, "transformerd: %s\n", warn);
    if (!srv_glossaries_persistent(s->glossaries))
        fprintf(stderr, "transformerd: no --state-dir: glossaries are kept in memory only\n");
    return 0;
}

/* After the models loaded: the detector (--langid-dir by default beside
 * the first model's directory: models/langid for models/en-de, in buf),
 * the file store, the model manager. 0, or -1 (said). */
static int start_rest(srv_server *s, const srv_model_spec *specs, int n_specs, char *buf,
                      size_t n)
{
    if (!s->o.langid_dir && n_specs > 0) {
        snprintf(buf, n, "%s", specs[0].dir);
        char *slash = strrchr(buf, '/');
        if (slash && slash[1] == 0) { /* "models/en-de/" */
            *slash = 0;
            slash = strrchr(buf, '/');
        }
        if (slash)
            snprintf(slash + 1, n - (size_t)(slash + 1 - buf), "langid");
        else
            snprintf(buf, n, "langid");
        s->o.langid_dir = buf;
    }
    char err[1024];
    s->langid = srv_detector_new(s, err, sizeof err);
    s->libre = s->langid ? srv_libre_new(s, err, sizeof err) : NULL;
    const srv_docpool_opts dopts = {.threads = s->o.document_threads,
                                    .max_queue = s->o.document_queue,
                                    .metrics = s->metrics,
                                    .test_gate = s->o.test_document_gate};
    s->docs = s->libre ? srv_docpool_new(&dopts, err, sizeof err) : NULL;
    if (!s->docs || srv_models_start(s->models) != 0) {
        fprintf(stderr, "transformerd: %s\n", s->docs ? "cannot start the model manager" : err);
        return -1;
    }
    return 0;
}

int srv_run_local(int argc, char **argv, srv_local_fn run, void *ud)
{
    json_object_seed(0);
    srv_server s;
    memset(&s, 0, sizeof s);
    serve_opts all; /* the service's part copied into s.o, the API's pointed at */
    static srv_model_spec specs[SRV_MAX_MODEL_SPECS];
    int n_specs, st = read_opts(&s, &all, argc, argv, specs, &n_specs);
    if (st >= 0)
        return st;
    if (new_service(&s) != 0) {
        stop_all(&s, NULL, NULL);
        return 1;
    }
    char err[1024], langid_dir[4096];
    srv_api *api = srv_api_new(&s, err, sizeof err);
    if (!api)
        fprintf(stderr, "transformerd: %s\n", err);
    int kept = 0;
    for (int i = 0; api && i < n_specs; i++)
        if (load_initial(&s, specs, i, &kept, err, sizeof err) != 0) {
            stop_all(&s, NULL, api);
            return 1;
        }
    if (api && kept == 0) {
        fprintf(stderr, "transformerd: no model could be loaded\n");
        stop_all(&s, NULL, api);
        return 1;
    }
    n_specs = kept;
    if (!api || start_rest(&s, specs, n_specs, langid_dir, sizeof langid_dir) != 0) {
        stop_all(&s, NULL, api);
        return 1;
    }
    atomic_store(&s.ready, 1);
    const srv_call_handler h = srv_api_handler(api);
    int rc = run(&s, &h, ud);
    atomic_store(&s.draining, 1);
    srv_models_stop(s.models);
    srv_docpool_drain(s.docs, srv_now() + s.o.drain_timeout_s);
    srv_models_drain(s.models, srv_now() + s.o.drain_timeout_s);
    stop_all(&s, NULL, api);
    return rc;
}

int srv_main(int argc, char **argv)
{
    /* jansson's hash seed must be set before any thread may create objects. */
    json_object_seed(0);
    srv_server s;
    memset(&s, 0, sizeof s);
    serve_opts all; /* the service's part copied into s.o, the API's pointed at */
    srv_http *http = NULL;
    srv_api *api = NULL;
    static srv_model_spec specs[SRV_MAX_MODEL_SPECS];
    int n_specs, st = read_opts(&s, &all, argc, argv, specs, &n_specs);
    if (st >= 0)
        return st;

    char err[1024];
    if (srv_signals_init(err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);

    if (new_service(&s) != 0) {
        stop_all(&s, NULL, NULL);
        return 1;
    }
    /* the APIs' routes over the service, then the transport that calls them */
    api = srv_api_new(&s, err, sizeof err);
    const srv_http_opts ho = http_opts(&s, &all);
    const srv_call_handler handler = api ? srv_api_handler(api) : (srv_call_handler){0};
    if (!api || srv_http_start(&http, &ho, &handler, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        stop_all(&s, NULL, api);
        return 1;
    }
    fprintf(stderr, "transformerd: listening on http://%s:%u\n", all.http.host,
            (unsigned)srv_http_port(http));
    double t0 = srv_now();
    /* signals during start-up: SIGTERM/SIGINT stop it after the model
     * being loaded; SIGHUP reloads every model once they serve (a file
     * may have changed after it was read) */
    int hup = 0, sig = 0, kept = 0;
    for (int i = 0; i <= n_specs; i++) {
        while ((sig = srv_signals_next(0)) == SIGHUP) {
            fprintf(stderr, "transformerd: SIGHUP during start-up: every model reloads once "
                            "ready\n");
            hup = 1;
        }
        if (sig) {
            fprintf(stderr, "transformerd: %s during start-up: stopping\n",
                    sig == SIGINT ? "SIGINT" : "SIGTERM");
            stop_all(&s, http, api);
            fprintf(stderr, "transformerd: stopped\n");
            return 0;
        }
        if (i < n_specs && load_initial(&s, specs, i, &kept, err, sizeof err) != 0) {
            stop_all(&s, http, api);
            return 1;
        }
    }
    if (kept == 0) {
        fprintf(stderr, "transformerd: no model could be loaded\n");
        stop_all(&s, http, api);
        return 1;
    }
    n_specs = kept;
    char langid_dir[4096];
    if (start_rest(&s, specs, n_specs, langid_dir, sizeof langid_dir) != 0) {
        stop_all(&s, http, api);
        return 1;
    }
    atomic_store(&s.ready, 1);
    report_ready(&s, t0);

    for (;;) {
        sig = hup ? SIGHUP : srv_signals_next(1);
        hup = 0;
        if (!sig)
            continue;
        if (sig != SIGHUP)
            break;
        srv_model_op *op = calloc(1, sizeof *op);
        if (!op) {
            fprintf(stderr, "transformerd: SIGHUP: out of memory\n");
            continue;
        }
        fprintf(stderr, "transformerd: SIGHUP: reloading every model\n");
        op->kind = SRV_OP_RELOAD_ALL;
        op->done = hup_done;
        srv_models_submit(s.models, op);
    }
    if (s.o.drain_delay_s > 0) {
        /* lame duck: out of the balancer's rotation first, then the drain */
        fprintf(stderr, "transformerd: %s: unready for %d s before draining\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM", s.o.drain_delay_s);
        atomic_store(&s.unready, 1);
        double until = srv_now() + s.o.drain_delay_s;
        while (srv_now() < until) {
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    fprintf(stderr, "transformerd: %s: draining\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    atomic_store(&s.draining, 1);
    srv_http_quiesce(http);
    /* a load or reload under way finishes first; queued ones are refused */
    srv_models_stop(s.models);
    /* the documents being parsed first (their texts still go to the
     * models), then the models' work; the renders after it are taken by
     * the document threads until they stop (stop_all) */
    double drain_until = srv_now() + s.o.drain_timeout_s;
    srv_docpool_drain(s.docs, drain_until);
    srv_models_drain(s.models, drain_until);
    /* Every job has finished and every connection was resumed; give the
     * responses a bounded time to be written before the daemon stops. */
    double until = srv_now() + 5;
    while (srv_http_active(http) > 0 && srv_now() < until) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    stop_all(&s, http, api);
    fprintf(stderr, "transformerd: stopped\n");
    return 0;
}
