/*
 * metrics.c - Prometheus counters, gauges and histograms of the daemon.
 *
 * Every recorder is a handful of relaxed atomic adds: the HTTP and scheduler
 * threads never take a lock to count. Rendering (an HTTP thread) reads the
 * atomics one by one, so a scrape may see a request counted in one series
 * and not yet in another; Prometheus tolerates that. The model-info lines
 * are written by the main thread before readiness and published by a
 * release store of their count.
 */
#include <dirent.h>
#include <stddef.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "buildinfo.h"
#include "cache.h"
#include "memstat.h"
#include "metrics.h"

static const int k_statuses[] = {200, 204, 400, 401, 403, 404, 405, 408, 413, 415, 422, 429, 500, 503, 504};
#define N_STATUS ((int)(sizeof k_statuses / sizeof k_statuses[0]) + 1) /* + "other" */

static const double k_lat_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                       0.25,  0.5,    1,     2.5,  5,     10,   30};
#define N_LAT ((int)(sizeof k_lat_buckets / sizeof k_lat_buckets[0]))
/* The batch-size and batch-token buckets end at the configured limits
 * (srv_metrics_set_limits): powers of 2 (sizes) or 4 (tokens, from 16)
 * below the limit, then the limit itself. These are the defaults'. */
#define SRV_HIST_MAX 16
static const double k_size_default[] = {1, 2, 4, 8, 16, 32};
static const double k_tok_default[] = {16, 64, 256, 1024, 4096, 8192};
static const double k_admit_buckets[] = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024};
#define N_ADMIT ((int)(sizeof k_admit_buckets / sizeof k_admit_buckets[0]))

/* A histogram with at most 16 finite buckets; sum kept in micro-units so
 * that it can be an integer atomic. */
typedef struct hist {
    atomic_ullong bucket[17]; /* non-cumulative; last = +Inf only */
    atomic_ullong count;
    atomic_ullong sum_micro;
} hist;

struct srv_metrics {
    atomic_ullong requests[SRV_EP_COUNT][N_STATUS];
    hist latency[SRV_EP_COUNT];
    hist queue_wait;
    hist batch_size;
    hist batch_tokens;
    hist batch_seconds;
    atomic_ullong batches;
    atomic_ullong tokens_in, tokens_out;
    atomic_long queue_depth;
    atomic_ullong dropped_timeout, dropped_gone, dropped_shutdown;
    atomic_ullong batches_failed;
    /* the running decodes (--scheduler inflight) */
    hist step_seconds;
    hist step_admitted;
    atomic_ullong steps;
    atomic_ullong short_steps;
    atomic_ullong urgent_steps;
    atomic_long running_rows;
    atomic_long scratch_bytes; /* the workers' arenas now (--scratch on-demand) */
    atomic_long docs_queued, docs_running; /* the document threads' (docpool.h) */
    atomic_ullong docs_refused;
    struct srv_cache *cache; /* the translation cache (the server's metrics only) */
    /* the bounds of batch_size and batch_tokens (set before any batch) */
    double size_buckets[SRV_HIST_MAX], tok_buckets[SRV_HIST_MAX];
    int n_size, n_tok;
    /* A model's (a child's): its name, its transformerd_model_info line
     * (under the parent's lock; NULL while it does not serve), its gauges. */
    char model[128];
    char *info_line;
    atomic_int ready;
    atomic_ullong weight_bytes, worker_bytes;
    atomic_long resident;                   /* --model-idle-unload: 1 loaded, 0 put away */
    atomic_ullong put_away, loaded_again;
    /* The server's: its children, one per model name (under mu). */
    pthread_mutex_t mu;
    struct srv_metrics *children[SRV_METRICS_MAX_MODELS];
    int n_children;
    struct srv_metrics *parent;
};

static const char *k_ep_names[SRV_EP_COUNT] = {
    "/v1/translate", "/translate", "/languages", "/v1/models", "/health/live",
    "/health/ready", "/metrics",   "/openapi.json", "/", "/detect", "/translate_file",
    "/download_file", "/suggest", "/frontend/settings", "/health", "/version",
    "/v1/models/{name}", "/v2/translate", "/v2/languages", "/v2/usage", "/v2/document",
    "other",
};

const char *srv_endpoint_name(srv_endpoint ep)
{
    return ep >= 0 && ep < SRV_EP_COUNT ? k_ep_names[ep] : "other";
}

srv_metrics *srv_metrics_new(void)
{
    srv_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return NULL; /* all-zero bits are valid initial atomics on every target we build for */
    m->n_size = (int)(sizeof k_size_default / sizeof k_size_default[0]);
    memcpy(m->size_buckets, k_size_default, sizeof k_size_default);
    m->n_tok = (int)(sizeof k_tok_default / sizeof k_tok_default[0]);
    memcpy(m->tok_buckets, k_tok_default, sizeof k_tok_default);
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

/* Bounds first, first*ratio, ... below limit, then limit (at most
 * SRV_HIST_MAX, the last always the limit). Returns their count. */
static int limit_buckets(double *b, double first, double ratio, long limit)
{
    int n = 0;
    for (double v = first; v < (double)limit && n < SRV_HIST_MAX - 1; v *= ratio)
        b[n++] = v;
    b[n++] = (double)limit;
    return n;
}

void srv_metrics_set_limits(srv_metrics *m, int max_batch_size, long max_batch_tokens)
{
    if (!m || max_batch_size < 1 || max_batch_tokens < 1)
        return;
    m->n_size = limit_buckets(m->size_buckets, 1, 2, max_batch_size);
    m->n_tok = limit_buckets(m->tok_buckets, 16, 4, max_batch_tokens);
}

void srv_metrics_free(srv_metrics *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_children; i++)
        srv_metrics_free(m->children[i]);
    free(m->info_line);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

srv_metrics *srv_metrics_model(srv_metrics *m, const char *name)
{
    if (!m)
        return NULL;
    srv_metrics *c = NULL;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_children && !c; i++)
        if (!strcmp(m->children[i]->model, name))
            c = m->children[i];
    if (!c && m->n_children < SRV_METRICS_MAX_MODELS && (c = srv_metrics_new()) != NULL) {
        snprintf(c->model, sizeof c->model, "%s", name);
        /* the server's bounds (set before any model is made) */
        c->n_size = m->n_size;
        c->n_tok = m->n_tok;
        memcpy(c->size_buckets, m->size_buckets, sizeof c->size_buckets);
        memcpy(c->tok_buckets, m->tok_buckets, sizeof c->tok_buckets);
        c->parent = m;
        m->children[m->n_children++] = c;
    }
    pthread_mutex_unlock(&m->mu);
    return c;
}

void srv_metrics_model_state(srv_metrics *c, const srv_model_info *in, size_t weight_bytes,
                             size_t worker_bytes)
{
    if (!c || !c->parent)
        return;
    char *line = NULL;
    if (in) {
#define MODEL_INFO_FMT                                                                     \
    "transformerd_model_info{model=\"%s\",source=\"%s\",target=\"%s\",device=\"%s\","      \
    "dtype=\"%s\",d_model=\"%d\",encoder_layers=\"%d\",decoder_layers=\"%d\"} 1\n"
        int len = snprintf(NULL, 0, MODEL_INFO_FMT, in->model, in->source, in->target,
                           in->device, in->dtype, in->d_model, in->encoder_layers,
                           in->decoder_layers);
        line = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (line)
            snprintf(line, (size_t)len + 1, MODEL_INFO_FMT, in->model, in->source, in->target,
                     in->device, in->dtype, in->d_model, in->encoder_layers,
                     in->decoder_layers);
#undef MODEL_INFO_FMT
    }
    atomic_store_explicit(&c->weight_bytes, weight_bytes, memory_order_relaxed);
    atomic_store_explicit(&c->worker_bytes, worker_bytes, memory_order_relaxed);
    atomic_store_explicit(&c->resident, in != NULL, memory_order_relaxed);
    atomic_store_explicit(&c->ready, 1, memory_order_relaxed);
    if (!line)
        return;
    pthread_mutex_lock(&c->parent->mu);
    char *old = c->info_line;
    c->info_line = line;
    pthread_mutex_unlock(&c->parent->mu);
    free(old);
}

void srv_metrics_model_resident(srv_metrics *c, int resident)
{
    if (!c)
        return;
    atomic_store_explicit(&c->resident, resident, memory_order_relaxed);
    atomic_fetch_add_explicit(resident ? &c->loaded_again : &c->put_away, 1,
                              memory_order_relaxed);
}

void srv_metrics_model_ready(srv_metrics *c, int ready)
{
    if (c)
        atomic_store_explicit(&c->ready, ready, memory_order_relaxed);
}

void srv_metrics_model_unloaded(srv_metrics *c)
{
    if (!c || !c->parent)
        return;
    atomic_store_explicit(&c->ready, 0, memory_order_relaxed);
    atomic_store_explicit(&c->resident, 0, memory_order_relaxed);
    atomic_store_explicit(&c->weight_bytes, 0, memory_order_relaxed);
    atomic_store_explicit(&c->worker_bytes, 0, memory_order_relaxed);
    pthread_mutex_lock(&c->parent->mu);
    char *old = c->info_line;
    c->info_line = NULL;
    pthread_mutex_unlock(&c->parent->mu);
    free(old);
}

static void hist_add(hist *h, const double *bounds, int nb, double v)
{
    int i = 0;
    while (i < nb && v > bounds[i])
        i++;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    if (v > 0)
        atomic_fetch_add_explicit(&h->sum_micro, (unsigned long long)(v * 1e6 + 0.5),
                                  memory_order_relaxed);
}

void srv_metrics_request(srv_metrics *m, srv_endpoint ep, int status, double seconds)
{
    if (!m)
        return;
    if (ep < 0 || ep >= SRV_EP_COUNT)
        ep = SRV_EP_UNKNOWN;
    int si = N_STATUS - 1;
    for (int i = 0; i < N_STATUS - 1; i++)
        if (k_statuses[i] == status)
            si = i;
    atomic_fetch_add_explicit(&m->requests[ep][si], 1, memory_order_relaxed);
    hist_add(&m->latency[ep], k_lat_buckets, N_LAT, seconds);
}

void srv_metrics_queue_wait(srv_metrics *m, double seconds)
{
    if (m)
        hist_add(&m->queue_wait, k_lat_buckets, N_LAT, seconds);
}

void srv_metrics_step(srv_metrics *m, int admitted, srv_step_kind kind, double seconds)
{
    if (!m)
        return;
    atomic_fetch_add_explicit(&m->steps, 1, memory_order_relaxed);
    if (kind == SRV_STEP_SHORTEST)
        atomic_fetch_add_explicit(&m->short_steps, 1, memory_order_relaxed);
    if (kind == SRV_STEP_URGENT)
        atomic_fetch_add_explicit(&m->urgent_steps, 1, memory_order_relaxed);
    hist_add(&m->step_seconds, k_lat_buckets, N_LAT, seconds);
    hist_add(&m->step_admitted, k_admit_buckets, N_ADMIT, admitted);
}

void srv_metrics_scratch(srv_metrics *m, long delta)
{
    if (m)
        atomic_fetch_add_explicit(&m->scratch_bytes, delta, memory_order_relaxed);
}

void srv_metrics_documents(srv_metrics *m, long queued, long running)
{
    if (!m)
        return;
    atomic_fetch_add_explicit(&m->docs_queued, queued, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->docs_running, running, memory_order_relaxed);
}

void srv_metrics_documents_refused(srv_metrics *m)
{
    if (m)
        atomic_fetch_add_explicit(&m->docs_refused, 1, memory_order_relaxed);
}

void srv_metrics_running_rows(srv_metrics *m, long delta)
{
    if (m)
        atomic_fetch_add_explicit(&m->running_rows, delta, memory_order_relaxed);
}

void srv_metrics_batch(srv_metrics *m, int n, long padded_tokens, double seconds)
{
    if (!m)
        return;
    atomic_fetch_add_explicit(&m->batches, 1, memory_order_relaxed);
    hist_add(&m->batch_size, m->size_buckets, m->n_size, n);
    hist_add(&m->batch_tokens, m->tok_buckets, m->n_tok, (double)padded_tokens);
    hist_add(&m->batch_seconds, k_lat_buckets, N_LAT, seconds);
}

void srv_metrics_tokens(srv_metrics *m, long in, long out)
{
    if (!m)
        return;
    atomic_fetch_add_explicit(&m->tokens_in, (unsigned long long)in, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->tokens_out, (unsigned long long)out, memory_order_relaxed);
}

void srv_metrics_queue_depth(srv_metrics *m, long depth)
{
    if (m)
        atomic_store_explicit(&m->queue_depth, depth, memory_order_relaxed);
}

void srv_metrics_dropped(srv_metrics *m, srv_drop_reason reason)
{
    if (!m)
        return;
    atomic_ullong *c = reason == SRV_DROP_TIMEOUT ? &m->dropped_timeout
                       : reason == SRV_DROP_GONE  ? &m->dropped_gone
                                                  : &m->dropped_shutdown;
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

void srv_metrics_batch_failed(srv_metrics *m)
{
    if (m)
        atomic_fetch_add_explicit(&m->batches_failed, 1, memory_order_relaxed);
}

/* ---- rendering ----------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)k + 1;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static unsigned long long ld(atomic_ullong *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static void render_hist(sbuf *b, const char *name, const char *labels, hist *h,
                        const double *bounds, int nb)
{
    unsigned long long cum = 0;
    const char *sep = labels[0] ? "," : "";
    for (int i = 0; i < nb; i++) {
        cum += ld(&h->bucket[i]);
        sb_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bounds[i], cum);
    }
    cum += ld(&h->bucket[nb]);
    sb_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, cum);
    if (labels[0]) {
        sb_printf(b, "%s_sum{%s} %.6f\n", name, labels, (double)ld(&h->sum_micro) / 1e6);
        sb_printf(b, "%s_count{%s} %llu\n", name, labels, ld(&h->count));
    } else {
        sb_printf(b, "%s_sum %.6f\n", name, (double)ld(&h->sum_micro) / 1e6);
        sb_printf(b, "%s_count %llu\n", name, ld(&h->count));
    }
}

/* The standard process_* series (as Prometheus' client libraries export
 * them), read from /proc/self at each scrape; a series whose source cannot
 * be read is left out. */
static void render_process(sbuf *b)
{
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    /* fields after the command name (which may hold spaces and parens):
     * 3 state ... 14 utime 15 stime ... 22 starttime 23 vsize 24 rss */
    const char *p = strrchr(buf, ')');
    unsigned long long v[25] = {0};
    int field = 2, ok = p != NULL && tick > 0 && page > 0;
    for (p = ok ? p + 1 : NULL; p && *p && field < 24;) {
        while (*p == ' ')
            p++;
        field++;
        char *end;
        v[field] = strtoull(p, &end, 10);
        p = strchr(p, ' ');
    }
    ok &= field >= 24;
    double btime = -1;
    f = fopen("/proc/stat", "r");
    while (f && fgets(buf, sizeof buf, f))
        if (!strncmp(buf, "btime ", 6))
            btime = strtod(buf + 6, NULL);
    if (f)
        fclose(f);
    if (ok) {
        sb_printf(b,
                  "# HELP process_cpu_seconds_total Total user and system CPU time spent in "
                  "seconds.\n"
                  "# TYPE process_cpu_seconds_total counter\n"
                  "process_cpu_seconds_total %.2f\n"
                  "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
                  "# TYPE process_virtual_memory_bytes gauge\n"
                  "process_virtual_memory_bytes %llu\n"
                  "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                  "# TYPE process_resident_memory_bytes gauge\n"
                  "process_resident_memory_bytes %llu\n",
                  (double)(v[14] + v[15]) / (double)tick, v[23],
                  v[24] * (unsigned long long)page);
        if (btime >= 0)
            sb_printf(b,
                      "# HELP process_start_time_seconds Start time of the process since unix "
                      "epoch in seconds.\n"
                      "# TYPE process_start_time_seconds gauge\n"
                      "process_start_time_seconds %.2f\n",
                      btime + (double)v[22] / (double)tick);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        long fds = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            fds += e->d_name[0] != '.';
        closedir(d);
        sb_printf(b,
                  "# HELP process_open_fds Number of open file descriptors.\n"
                  "# TYPE process_open_fds gauge\n"
                  "process_open_fds %ld\n",
                  fds - 1); /* not the directory's own descriptor */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        sb_printf(b,
                  "# HELP process_max_fds Maximum number of open file descriptors.\n"
                  "# TYPE process_max_fds gauge\n"
                  "process_max_fds %.0f\n",
                  rl.rlim_cur == RLIM_INFINITY ? -1.0 : (double)rl.rlim_cur);
}

/* One HELP and TYPE, then the family's line(s) of every model. */
typedef enum fam_kind { FAM_HIST, FAM_COUNTER, FAM_GAUGE } fam_kind;

typedef struct family {
    const char *name, *help;
    fam_kind kind;
    size_t off;   /* of the hist, or of the atomic (counter: unsigned long long; gauge: long
                     or unsigned long long as is_long says) */
    int is_long;  /* gauge of type atomic_long */
    int buckets;  /* FAM_HIST: 0 latency, 1 size, 2 tokens, 3 admitted */
} family;

#define MOFF(f) offsetof(srv_metrics, f)
static const family k_families[] = {
    {"transformerd_queue_wait_seconds", "Time a text waited in its model's queue (until it "
     "joined a running decode, or its batch ran).", FAM_HIST, MOFF(queue_wait), 0, 0},
    {"transformerd_batch_size", "Sentences per engine batch.", FAM_HIST, MOFF(batch_size), 0, 1},
    {"transformerd_batch_tokens", "Padded source tokens per engine batch.", FAM_HIST,
     MOFF(batch_tokens), 0, 2},
    {"transformerd_batch_duration_seconds", "Engine time per batch.", FAM_HIST,
     MOFF(batch_seconds), 0, 0},
    {"transformerd_step_duration_seconds", "Time of one decoding step of a running decode "
     "(admission included).", FAM_HIST, MOFF(step_seconds), 0, 0},
    {"transformerd_step_admitted", "Sentences that joined a running decode before a step.",
     FAM_HIST, MOFF(step_admitted), 0, 3},
    {"transformerd_decode_steps_total", "Decoding steps of the running decodes.", FAM_COUNTER,
     MOFF(steps), 0, 0},
    {"transformerd_decode_short_steps_total", "Of those, steps of the texts with the shortest "
     "sources only (--short-steps).", FAM_COUNTER, MOFF(short_steps), 0, 0},
    {"transformerd_decode_urgent_steps_total", "Of those, steps of a streamed answer's first "
     "sentences only (--urgent-steps).", FAM_COUNTER, MOFF(urgent_steps), 0, 0},
    {"transformerd_running_rows", "Decoder rows (sentences x beams) in the running decodes.",
     FAM_GAUGE, MOFF(running_rows), 1, 0},
    {"transformerd_model_resident", "1 while the model's weights and workers are loaded, 0 "
     "while it is put away for idleness (--model-idle-unload).", FAM_GAUGE, MOFF(resident), 1,
     0},
    {"transformerd_model_put_away_total", "Times the model was put away for idleness "
     "(--model-idle-unload).", FAM_COUNTER, MOFF(put_away), 0, 0},
    {"transformerd_model_loaded_again_total", "Times a request loaded the model again after it "
     "was put away.", FAM_COUNTER, MOFF(loaded_again), 0, 0},
    {"transformerd_batches_total", "Engine batches run.", FAM_COUNTER, MOFF(batches), 0, 0},
    {"transformerd_queue_depth", "Texts waiting in the model's queue.", FAM_GAUGE,
     MOFF(queue_depth), 1, 0},
    {"transformerd_tokens_in_total", "Source tokens translated.", FAM_COUNTER, MOFF(tokens_in),
     0, 0},
    {"transformerd_tokens_out_total", "Target tokens generated.", FAM_COUNTER,
     MOFF(tokens_out), 0, 0},
    {"transformerd_batches_failed_total", "Engine batches that returned an error (their "
     "requests got 500).", FAM_COUNTER, MOFF(batches_failed), 0, 0},
    {"transformerd_model_ready", "1 while the model serves and its device has not failed.",
     FAM_GAUGE, MOFF(ready), 2, 0},
    {"transformerd_model_weight_bytes", "Bytes of the serving model's weights on its device.",
     FAM_GAUGE, MOFF(weight_bytes), 0, 0},
    {"transformerd_model_worker_bytes", "Bytes of the serving model's workers (all of them) "
     "on its device.", FAM_GAUGE, MOFF(worker_bytes), 0, 0},
};
#undef MOFF

static void render_family(sbuf *b, const family *f, srv_metrics *const *ch, int n)
{
    static const char *const types[] = {"histogram", "counter", "gauge"};
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, types[f->kind]);
    for (int i = 0; i < n; i++) {
        char *base = (char *)ch[i] + f->off;
        char lab[160];
        snprintf(lab, sizeof lab, "model=\"%s\"", ch[i]->model);
        if (f->kind == FAM_HIST) {
            const double *bounds = f->buckets == 1   ? ch[i]->size_buckets
                                   : f->buckets == 2 ? ch[i]->tok_buckets
                                   : f->buckets == 3 ? k_admit_buckets
                                                     : k_lat_buckets;
            int nb = f->buckets == 1   ? ch[i]->n_size
                     : f->buckets == 2 ? ch[i]->n_tok
                     : f->buckets == 3 ? N_ADMIT
                                       : N_LAT;
            render_hist(b, f->name, lab, (hist *)(void *)base, bounds, nb);
        } else if (f->is_long == 1) {
            sb_printf(b, "%s{%s} %ld\n", f->name, lab,
                      atomic_load_explicit((atomic_long *)(void *)base, memory_order_relaxed));
        } else if (f->is_long == 2) {
            sb_printf(b, "%s{%s} %d\n", f->name, lab,
                      atomic_load_explicit((atomic_int *)(void *)base, memory_order_relaxed));
        } else {
            sb_printf(b, "%s{%s} %llu\n", f->name, lab, ld((atomic_ullong *)(void *)base));
        }
    }
}

/* The per-model series of every child (the parent's lock held). */
static void render_models(sbuf *b, srv_metrics *const *ch, int n)
{
    for (size_t f = 0; f < sizeof k_families / sizeof k_families[0]; f++)
        render_family(b, &k_families[f], ch, n);
    sb_printf(b, "# HELP transformerd_jobs_dropped_total Texts dropped before they ran.\n"
                 "# TYPE transformerd_jobs_dropped_total counter\n");
    for (int i = 0; i < n; i++)
        sb_printf(b,
                  "transformerd_jobs_dropped_total{model=\"%s\",reason=\"timeout\"} %llu\n"
                  "transformerd_jobs_dropped_total{model=\"%s\",reason=\"gone\"} %llu\n"
                  "transformerd_jobs_dropped_total{model=\"%s\",reason=\"shutdown\"} %llu\n",
                  ch[i]->model, ld(&ch[i]->dropped_timeout), ch[i]->model,
                  ld(&ch[i]->dropped_gone), ch[i]->model, ld(&ch[i]->dropped_shutdown));
    sb_printf(b, "# HELP transformerd_model_info The serving models.\n"
                 "# TYPE transformerd_model_info gauge\n");
    for (int i = 0; i < n; i++)
        if (ch[i]->info_line)
            sb_printf(b, "%s", ch[i]->info_line);
}

void srv_metrics_set_cache(srv_metrics *m, struct srv_cache *c)
{
    m->cache = c;
}

/* The translation cache's counters (none when it is off). */
static void render_cache(sbuf *b, struct srv_cache *c)
{
    if (!c)
        return;
    srv_cache_stats st;
    srv_cache_stats_get(c, &st);
    sb_printf(b, "# HELP transformerd_cache_hits_total Sentences answered from the translation "
                 "cache.\n# TYPE transformerd_cache_hits_total counter\n"
                 "transformerd_cache_hits_total %llu\n"
                 "# HELP transformerd_cache_misses_total Sentences looked up in the translation "
                 "cache and not found.\n# TYPE transformerd_cache_misses_total counter\n"
                 "transformerd_cache_misses_total %llu\n"
                 "# HELP transformerd_cache_evictions_total Entries the translation cache dropped "
                 "to stay within --cache-bytes.\n"
                 "# TYPE transformerd_cache_evictions_total counter\n"
                 "transformerd_cache_evictions_total %llu\n"
                 "# HELP transformerd_cache_bytes Bytes the translation cache holds.\n"
                 "# TYPE transformerd_cache_bytes gauge\ntransformerd_cache_bytes %zu\n"
                 "# HELP transformerd_cache_max_bytes The translation cache's bound "
                 "(--cache-bytes).\n# TYPE transformerd_cache_max_bytes gauge\n"
                 "transformerd_cache_max_bytes %zu\n"
                 "# HELP transformerd_cache_entries Sentences the translation cache holds.\n"
                 "# TYPE transformerd_cache_entries gauge\ntransformerd_cache_entries %ld\n",
              (unsigned long long)st.hits, (unsigned long long)st.misses,
              (unsigned long long)st.evictions, st.bytes, st.max_bytes, st.entries);
}

char *srv_metrics_render(srv_metrics *m, int ready)
{
    sbuf b = {malloc(8192), 0, 8192, 0};
    if (!b.p)
        return NULL;
    b.p[0] = 0;
    sb_printf(&b, "# HELP transformerd_requests_total HTTP requests by endpoint and status.\n"
                  "# TYPE transformerd_requests_total counter\n");
    for (int e = 0; e < SRV_EP_COUNT; e++)
        for (int i = 0; i < N_STATUS; i++) {
            unsigned long long v = ld(&m->requests[e][i]);
            if (!v)
                continue;
            if (i < N_STATUS - 1)
                sb_printf(&b, "transformerd_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
                          k_ep_names[e], k_statuses[i], v);
            else
                sb_printf(&b,
                          "transformerd_requests_total{endpoint=\"%s\",status=\"other\"} %llu\n",
                          k_ep_names[e], v);
        }
    sb_printf(&b, "# HELP transformerd_request_duration_seconds Time from the request's first "
                  "byte to its response.\n"
                  "# TYPE transformerd_request_duration_seconds histogram\n");
    for (int e = 0; e < SRV_EP_COUNT; e++) {
        if (!ld(&m->latency[e].count))
            continue;
        char lab[64];
        snprintf(lab, sizeof lab, "endpoint=\"%s\"", k_ep_names[e]);
        render_hist(&b, "transformerd_request_duration_seconds", lab, &m->latency[e],
                    k_lat_buckets, N_LAT);
    }
    pthread_mutex_lock(&m->mu);
    render_models(&b, m->children, m->n_children);
    pthread_mutex_unlock(&m->mu);
    render_cache(&b, m->cache);
    sb_printf(&b, "# HELP transformerd_ready 1 when every configured model is loaded and warm "
                  "(and neither draining nor failed), 0 otherwise.\n"
                  "# TYPE transformerd_ready gauge\n"
                  "transformerd_ready %d\n",
              ready);
    sb_printf(&b, "# HELP transformerd_build_info The version and git commit of this "
                  "executable.\n"
                  "# TYPE transformerd_build_info gauge\n"
                  "transformerd_build_info{version=\"%s\",commit=\"%s\"} 1\n",
              srv_version, srv_commit);
    sb_printf(&b, "# HELP transformerd_workers_scratch_bytes Bytes the engine workers, shared "
                  "by every model, hold now for their decoding (grown as requests need, given "
                  "back when idle: --scratch on-demand).\n"
                  "# TYPE transformerd_workers_scratch_bytes gauge\n"
                  "transformerd_workers_scratch_bytes %ld\n",
              (long)atomic_load_explicit(&m->scratch_bytes, memory_order_relaxed));
    sb_printf(&b, "# HELP transformerd_documents_queued Documents (a parse, or a render after the "
                  "translation) waiting for a document thread (--document-queue).\n"
                  "# TYPE transformerd_documents_queued gauge\n"
                  "transformerd_documents_queued %ld\n"
                  "# HELP transformerd_documents_running Documents a document thread works on "
                  "(--document-threads).\n"
                  "# TYPE transformerd_documents_running gauge\n"
                  "transformerd_documents_running %ld\n"
                  "# HELP transformerd_documents_refused_total Documents refused with 503 for a "
                  "full document queue.\n"
                  "# TYPE transformerd_documents_refused_total counter\n"
                  "transformerd_documents_refused_total %llu\n",
              (long)atomic_load_explicit(&m->docs_queued, memory_order_relaxed),
              (long)atomic_load_explicit(&m->docs_running, memory_order_relaxed),
              ld(&m->docs_refused));
    render_process(&b);
    srv_memstat ms;
    srv_memstat_read(&ms);
    sb_printf(&b, "# HELP transformerd_memory_bytes The resident set's parts (memstat.h): file "
                  "(file-backed: code, libraries), heap (the C library's heap in use: weights, "
                  "workers, profiles, cache, requests), heap_free (free in the heap's arenas).\n"
                  "# TYPE transformerd_memory_bytes gauge\n"
                  "transformerd_memory_bytes{part=\"file\"} %zu\n"
                  "transformerd_memory_bytes{part=\"heap\"} %zu\n"
                  "transformerd_memory_bytes{part=\"heap_free\"} %zu\n",
              ms.file, ms.heap, ms.heap_free);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
