/*
 * serve.c - `transformerd serve`: options, start-up and shutdown.
 *
 * Every flag --foo-bar also reads TRANSFORMERD_FOO_BAR (flags win). Start-up
 * order: seed jansson's hash (before any thread), block SIGTERM/SIGINT (the
 * MHD and batcher threads inherit the mask, so only sigwait() here sees
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
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "batcher.h"
#include "buildinfo.h"
#include "clock.h"
#include "device.h"
#include "http.h"
#include "libre.h"
#include "metrics.h"
#include "segment.h"
#include "serve.h"
#include "state.h"

typedef enum opt_kind {
    OPT_STR,
    OPT_INT,
    OPT_LONG,
    OPT_FAULT, /* srv_fault: "engine" | "device" ("" or "none": off) */
    OPT_SCHED, /* srv_scheduler: "inflight" | "batch" */
} opt_kind;

typedef struct opt_def {
    const char *flag;
    opt_kind kind;
    size_t off;
    long lo, hi;
    const char *help;
} opt_def;

#define OFF(f) offsetof(srv_opts, f)
static const opt_def k_opts[] = {
    {"--model", OPT_STR, OFF(model_dir), 0, 0, "model directory (Hugging Face Marian layout)"},
    {"--device", OPT_STR, OFF(device), 0, 0, "cpu | cuda[:N]"},
    {"--dtype", OPT_STR, OFF(dtype), 0, 0,
     "weight storage: auto (the checkpoint's) | float32 | float16 | bfloat16 (cuda)"},
    {"--precision", OPT_STR, OFF(precision), 0, 0,
     "cuda GEMMs with half weights: full (float32-accurate activations) | half"},
    {"--host", OPT_STR, OFF(host), 0, 0, "address to listen on"},
    {"--port", OPT_INT, OFF(port), 0, 65535, "port (0: any free port, printed)"},
    {"--threads", OPT_INT, OFF(threads), 0, 1024, "engine CPU threads (0: all cores)"},
    {"--http-threads", OPT_INT, OFF(http_threads), 1, 256, "HTTP thread pool size"},
    {"--workers", OPT_INT, OFF(workers), 1, 64, "model workers (scheduler threads)"},
    {"--scheduler", OPT_SCHED, OFF(scheduler), 0, 0,
     "inflight: texts join and leave a worker's running decode between steps | batch: "
     "a batch runs to its end before the next forms"},
    {"--max-batch-tokens", OPT_INT, OFF(max_batch_tokens), 1, 1 << 24,
     "padded source tokens per batch"},
    {"--max-batch-size", OPT_INT, OFF(max_batch_size), 1, 1024, "sentences per batch"},
    {"--max-beam", OPT_INT, OFF(max_beam), 0, TD_MAX_BEAM,
     "largest beam_size a request may ask (0: the model's num_beams); sizes the workers"},
    {"--batch-delay-ms", OPT_INT, OFF(batch_delay_ms), 0, 60000,
     "longest wait of the oldest text for a fuller batch"},
    {"--max-queue", OPT_INT, OFF(max_queue), 1, 1 << 20, "queued texts before 429"},
    {"--max-input-tokens", OPT_INT, OFF(max_input_tokens), 0, 1 << 20,
     "tokens per text incl. </s> (0: the model's max positions)"},
    {"--max-batch-texts", OPT_INT, OFF(max_batch_texts), 1, 1 << 16, "texts per request"},
    {"--max-body-bytes", OPT_LONG, OFF(max_body_bytes), 1, 1L << 30, "request body limit"},
    {"--max-response-bytes", OPT_LONG, OFF(max_response_bytes), 1, 1L << 40,
     "estimated response size one request may ask for (422 response_too_large)"},
    {"--request-timeout-s", OPT_INT, OFF(request_timeout_s), 1, 86400,
     "whole-request deadline (504)"},
    {"--idle-timeout-s", OPT_INT, OFF(idle_timeout_s), 1, 86400, "idle connection timeout"},
    {"--max-connections", OPT_INT, OFF(max_connections), 1, 1 << 20, "connections in all"},
    {"--max-connections-per-ip", OPT_INT, OFF(max_connections_per_ip), 0, 1 << 20,
     "connections per client address (0: no limit)"},
    {"--header-timeout-s", OPT_INT, OFF(header_timeout_s), 1, 86400,
     "time for a request's whole header block, however it trickles in"},
    {"--log-format", OPT_STR, OFF(log_format), 0, 0, "access log: text | json (JSON lines)"},
    {"--drain-timeout-s", OPT_INT, OFF(drain_timeout_s), 0, 86400,
     "SIGTERM: time to finish queued and running work; then running work is cut (503)"},
    {"--api-key", OPT_STR, OFF(api_key), 0, 0, "require this key (Bearer or X-API-Key)"},
    {"--cors-origins", OPT_STR, OFF(cors_origins), 0, 0,
     "CORS: * (any origin), a comma-separated list of origins, or \"\" (no CORS headers)"},
    {"--max-files-bytes", OPT_LONG, OFF(max_files_bytes), 1, 1L << 40,
     "translated files kept in memory for /download_file, in all"},
    {"--file-ttl-s", OPT_INT, OFF(file_ttl_s), 1, 7 * 86400,
     "how long a translated file can be downloaded"},
    {"--textcat-dir", OPT_STR, OFF(textcat_dir), 0, 0,
     "libexttextcat's language fingerprints (<code>.lm), for /detect and source=auto"},
    {"--test-fail-batches", OPT_FAULT, OFF(test_fault), 0, 0,
     "FOR TESTS ONLY: engine | device: every batch after the warm-up fails with that error"},
    {"--test-step-delay-ms", OPT_INT, OFF(test_step_delay_ms), 0, 10000,
     "FOR TESTS ONLY: a worker sleeps this long after each decoding step (or batch)"},
};
#define N_OPTS (sizeof k_opts / sizeof k_opts[0])

static void defaults(srv_opts *o);

/* An option's default, as usage prints it. */
static void default_text(const opt_def *d, char *out, size_t n)
{
    srv_opts o;
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
    case OPT_SCHED:
        snprintf(out, n, "%s",
                 *(const srv_scheduler *)(const void *)base == SRV_SCHED_BATCH ? "batch"
                                                                               : "inflight");
        break;
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: transformerd serve [--model DIR] [options]\n"
               "every option is also read from TRANSFORMERD_<NAME> (e.g. TRANSFORMERD_PORT); "
               "flags win\n");
    for (size_t i = 0; i < N_OPTS; i++) {
        char def[512];
        default_text(&k_opts[i], def, sizeof def);
        fprintf(f, "  %-26s %s (default: %s)\n", k_opts[i].flag, k_opts[i].help, def);
    }
}

static void defaults(srv_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model_dir = srv_default_model_dir(); /* TRANSFORMERD_MODEL, source tree, installed */
    o->device = "cpu";
    o->dtype = "auto";
    o->precision = "full";
    o->host = "127.0.0.1";
    o->port = 8080;
    o->http_threads = 4;
    o->workers = 1;
    o->max_batch_tokens = 8192;
    o->max_batch_size = 32;
    o->batch_delay_ms = 0; /* docs/decisions.md: batches form while the worker runs */
    o->max_queue = 1024;
    o->max_batch_texts = 64;
    o->max_body_bytes = 1L << 20;
    o->max_response_bytes = 64L << 20;
    o->request_timeout_s = 60;
    o->idle_timeout_s = 30;
    o->max_connections = 1024;
    o->max_connections_per_ip = 64; /* one address cannot take every slot */
    o->header_timeout_s = 10;
    o->log_format = "text";
    o->drain_timeout_s = 30;
    o->cors_origins = "*"; /* as LibreTranslate */
    o->max_files_bytes = 64L << 20;
    o->file_ttl_s = 1800;
    o->textcat_dir = TD_TEXTCAT_DIR;
}

static int set_opt(srv_opts *o, const opt_def *d, const char *v, const char *from)
{
    char *base = (char *)o + d->off;
    if (d->kind == OPT_STR) {
        *(const char **)(void *)base = v;
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

static int parse_opts(srv_opts *o, int argc, char **argv)
{
    defaults(o);
    for (size_t i = 0; i < N_OPTS; i++) {
        char name[64];
        env_name(k_opts[i].flag, name, sizeof name);
        const char *v = getenv(name);
        if (v && set_opt(o, &k_opts[i], v, name))
            return -1;
    }
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
        if (set_opt(o, d, v, d->flag))
            return -1;
    }
    const char *dev = o->device;
    if (strcmp(dev, "cpu") && strcmp(dev, "cuda") &&
        !(strncmp(dev, "cuda:", 5) == 0 && dev[5] && strspn(dev + 5, "0123456789") == strlen(dev + 5))) {
        fprintf(stderr, "transformerd: --device: expected cpu, cuda or cuda:N, got '%s'\n", dev);
        return -1;
    }
    char nerr[256];
    const td_load_opts lo = {.dtype = o->dtype, .precision = o->precision};
    if (td_load_opts_check(&lo, nerr, sizeof nerr) != 0) {
        fprintf(stderr, "transformerd: %s\n", nerr); /* names --dtype / --precision's value */
        return -1;
    }
    if (o->max_batch_texts > o->max_queue) {
        fprintf(stderr, "transformerd: --max-batch-texts (%d) exceeds --max-queue (%d)\n",
                o->max_batch_texts, o->max_queue);
        return -1;
    }
    return 0;
}

/* Name = the directory's base name; languages = its last two parts when they
 * look like language codes ("opus-mt-en-de", "marian_en_de", "en-de"). */
static void describe_model(srv_model *sm, const char *dir)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", dir);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/')
        tmp[--n] = 0;
    const char *base = strrchr(tmp, '/') ? strrchr(tmp, '/') + 1 : tmp;
    snprintf(sm->name, sizeof sm->name, "%.127s", base);
    for (char *p = sm->name; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = '_';
    snprintf(sm->src_lang, sizeof sm->src_lang, "und");
    snprintf(sm->tgt_lang, sizeof sm->tgt_lang, "und");
    char parts[8][16];
    int np = 0;
    const char *p = sm->name;
    while (*p && np < 8) {
        size_t k = strcspn(p, "-_");
        if (k < sizeof parts[0]) {
            memcpy(parts[np], p, k);
            parts[np][k] = 0;
        } else {
            parts[np][0] = 0;
        }
        np++;
        p += k;
        if (*p)
            p++;
    }
    if (np >= 2) {
        const char *a = parts[np - 2], *b = parts[np - 1];
        int ok = 1;
        for (const char *q = a; *q; q++)
            ok &= islower((unsigned char)*q) != 0;
        for (const char *q = b; *q; q++)
            ok &= islower((unsigned char)*q) != 0;
        size_t la = strlen(a), lb = strlen(b);
        if (ok && la >= 2 && la <= 3 && lb >= 2 && lb <= 3) {
            snprintf(sm->src_lang, sizeof sm->src_lang, "%s", a);
            snprintf(sm->tgt_lang, sizeof sm->tgt_lang, "%s", b);
        }
    }
}

static int load_model(srv_server *s, srv_model *sm, char *err, size_t errlen)
{
    const srv_opts *o = &s->o;
    describe_model(sm, o->model_dir);
    char e2[512];
    td_device dev;
    if (td_device_resolve(o->device, &dev, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s", e2);
        return -1;
    }
    snprintf(sm->device, sizeof sm->device, "%s", dev.name);
    td_load_opts lo = {.n_threads = o->threads, .dtype = o->dtype, .precision = o->precision};
    if (td_model_load_on(&sm->m, o->model_dir, &dev, &lo, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s: %s", o->model_dir, e2);
        return -1;
    }
    /* what is resident, not what the checkpoint says */
    snprintf(sm->dtype, sizeof sm->dtype, "%s", td_model_weight_dtype(sm->m));
    if (td_model_tokenizer_load(sm->m, o->model_dir, &sm->tok, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s: %s", o->model_dir, e2);
        return -1;
    }
    const td_config *c = td_model_config(sm->m);
    td_decode_opts_default(sm->m, &sm->defaults);
    if (sm->defaults.beam_size < 1 || sm->defaults.beam_size > TD_MAX_BEAM)
        sm->defaults.beam_size = 4;
    sm->defaults.num_hypotheses = 1;
    /* Each worker is allocated for max_batch x max_beam rows of max_length
     * tokens, so the beam limit is a flag rather than always TD_MAX_BEAM. */
    sm->max_beam = o->max_beam > 0 ? o->max_beam : sm->defaults.beam_size;
    if (sm->defaults.beam_size > sm->max_beam) {
        fprintf(stderr, "transformerd: the model's default beam_size %d exceeds --max-beam %d; "
                        "requests without beam_size use %d\n",
                sm->defaults.beam_size, sm->max_beam, sm->max_beam);
        sm->defaults.beam_size = sm->max_beam;
    }
    int maxpos = c->max_position_embeddings;
    sm->max_input_tokens = o->max_input_tokens > 0 && o->max_input_tokens < maxpos
                               ? o->max_input_tokens
                               : maxpos;
    sm->max_length = td_generated_cap(td_model_config(sm->m));
    const srv_batcher_opts bo = {.model = sm->m,
                                 .warm_up = sm->defaults,
                                 .warm_up_token = td_tok_eos_id(sm->tok),
                                 .workers = o->workers,
                                 .threads = o->threads,
                                 .max_batch_size = o->max_batch_size,
                                 .max_batch_tokens = o->max_batch_tokens,
                                 .batch_delay_ms = o->batch_delay_ms,
                                 .max_queue = o->max_queue,
                                 .max_src_len = sm->max_input_tokens,
                                 .max_length = sm->max_length,
                                 .max_beam = sm->max_beam,
                                 .scheduler = o->scheduler,
                                 .fault = o->test_fault,
                                 .test_step_delay_ms = o->test_step_delay_ms};
    if (srv_batcher_init(&sm->b, &bo, s->metrics, err, errlen) != 0)
        return -1;
    /* the sentence splitter's ICU data for the source language, loaded now
     * rather than by the first request (tokenizer/segment.h) */
    td_sentence *warm_sent = NULL;
    if (td_segment(sm->src_lang, "A. B.", 5, &warm_sent, err, errlen) < 0)
        return -1;
    free(warm_sent);
    sm->worker_bytes = srv_batcher_worker_bytes(sm->b);
    const srv_model_info info = {.model = sm->name,
                                 .source = sm->src_lang,
                                 .target = sm->tgt_lang,
                                 .device = sm->device,
                                 .dtype = sm->dtype,
                                 .d_model = c->d_model,
                                 .encoder_layers = c->encoder_layers,
                                 .decoder_layers = c->decoder_layers};
    if (srv_metrics_add_model(s->metrics, &info) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static void free_models(srv_server *s)
{
    for (int i = 0; s->models && i < s->n_models; i++) {
        srv_batcher_free(s->models[i].b);
        td_tok_free(s->models[i].tok);
        td_model_free(s->models[i].m);
    }
    free(s->models);
    s->models = NULL;
}

/* The model directory is there and holds readable model files, before the
 * daemon listens: a wrong --model is exit 1 with the path, not a daemon
 * that is live but never ready. (The files' contents are checked by the
 * load.) */
static int check_model_dir(const char *dir)
{
    static const char *const files[] = {"config.json", "model.safetensors", "source.spm",
                                        "target.spm", "vocab.json"};
    struct stat st;
    errno = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr,
                "transformerd: model directory '%s': %s (set --model or TRANSFORMERD_MODEL)\n",
                dir, errno ? strerror(errno) : "not a directory");
        return -1;
    }
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        errno = 0;
        FILE *f = fopen(p, "rb");
        int ok = f && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
        int e = errno;
        if (f)
            fclose(f);
        if (!ok) {
            fprintf(stderr, "transformerd: model directory '%s': %s: %s\n", dir, files[i],
                    e ? strerror(e) : "not a regular file");
            return -1;
        }
    }
    return 0;
}

int srv_main(int argc, char **argv)
{
    /* jansson's hash seed must be set before any thread may create objects. */
    json_object_seed(0);
    srv_server s;
    memset(&s, 0, sizeof s);
    srv_http *http = NULL;
    int prc = parse_opts(&s.o, argc, argv);
    if (prc)
        return prc > 0 ? 0 : 2;
    if (check_model_dir(s.o.model_dir) != 0)
        return 1;

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[1024];
    s.metrics = srv_metrics_new();
    s.models = calloc(1, sizeof *s.models);
    srv_metrics_set_limits(s.metrics, s.o.max_batch_size, s.o.max_batch_tokens);
    if (!s.metrics || !s.models) {
        fprintf(stderr, "transformerd: out of memory\n");
        free(s.models);
        srv_metrics_free(s.metrics);
        return 1;
    }
    if (srv_http_start(&http, &s, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        free(s.models);
        srv_metrics_free(s.metrics);
        return 1;
    }
    fprintf(stderr, "transformerd: listening on http://%s:%u\n", s.o.host,
            (unsigned)srv_http_port(http));
    double t0 = srv_now();
    s.n_models = 1;
    if (load_model(&s, &s.models[0], err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        srv_http_stop(http);
        free_models(&s);
        srv_metrics_free(s.metrics);
        return 1;
    }
    s.libre = srv_libre_new(&s, err, sizeof err);
    if (!s.libre) {
        fprintf(stderr, "transformerd: %s\n", err);
        srv_http_stop(http);
        free_models(&s);
        srv_metrics_free(s.metrics);
        return 1;
    }
    atomic_store(&s.ready, 1);
    fprintf(stderr,
            "transformerd: ready: model %s (%s -> %s) on %s, loaded and warmed in %.2f s; "
            "%d %s worker(s) of %.1f MiB each (batch %d x beam %d x length %d, source %d)\n",
            s.models[0].name, s.models[0].src_lang, s.models[0].tgt_lang, s.o.device,
            srv_now() - t0, s.o.workers,
            s.o.scheduler == SRV_SCHED_BATCH ? "batch" : "inflight", (double)s.models[0].worker_bytes / (1 << 20),
            s.o.max_batch_size, s.models[0].max_beam, s.models[0].max_length,
            s.models[0].max_input_tokens);

    int sig = 0;
    while (sigwait(&set, &sig) != 0)
        ;
    fprintf(stderr, "transformerd: %s: draining\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    atomic_store(&s.draining, 1);
    srv_http_quiesce(http);
    double deadline = srv_now() + s.o.drain_timeout_s;
    for (int i = 0; i < s.n_models; i++)
        srv_batcher_drain(s.models[i].b, deadline);
    /* Every job has finished and every connection was resumed; give the
     * responses a bounded time to be written before the daemon stops. */
    double until = srv_now() + 5;
    while (srv_http_active(http) > 0 && srv_now() < until) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    srv_http_stop(http);
    free_models(&s);
    srv_libre_free(s.libre);
    srv_metrics_free(s.metrics);
    fprintf(stderr, "transformerd: stopped\n");
    return 0;
}
