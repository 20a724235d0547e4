/*
 * load.c - load generator for `transformerd serve`, in one run:
 *
 *   1. offline: `transformerd translate` on the input lines (the engine's
 *      own batching, no HTTP), timed with the model load subtracted (a run
 *      on empty input measures the load); twice before the daemons and
 *      once after them, the best run counts;
 *   2. the daemon with --scheduler inflight (texts join and leave a running
 *      decode between steps), and
 *   3. the same daemon with --scheduler batch (a batch runs to its end
 *      before the next forms), both with --max-batch-size B; optionally
 *      (--schedulers ...,batch1) the batch scheduler with --max-batch-size 1;
 *      each at every concurrency level (default 1, 8, 64): N keep-alive
 *      clients POST /v1/translate with one line each until every input
 *      line was sent once (or --max-seconds passed). The daemons run side
 *      by side; a round runs each level against each daemon in turn (the
 *      daemons in the order given in odd rounds, in reverse in even ones,
 *      so that none always runs first), and --rounds R pools R rounds (a
 *      change of a shared machine's load then hits every scheduler alike).
 *
 * The input is mixed: the lines are shuffled with a fixed seed (--seed; 0
 * keeps the file's order), so short and long sentences arrive interleaved,
 * and each line gets a length class by its whitespace-separated words:
 * short = the third of the lines with the fewest words, long = the third
 * with the most (ranked by words, ties by position; the middle third counts
 * only in "all").
 *
 * Prints one JSON line per run, then a table per concurrency: sentences/s
 * of both schedulers and their ratio, inflight vs offline, p50/p99 latency
 * of short and long sentences under both, and the short sentences' p99
 * ratio inflight/batch; and a table per run with p50/p99 of all sentences
 * and what the daemon's /metrics say about the level (decode steps, step
 * time, sentences admitted per step, engine batches, mean running rows
 * and queue depth sampled every 100 ms, the share of the wall time the
 * engine ran) and the CPU this load generator took (it shares the machine
 * with the daemon). Loopback only (the daemons are
 * started here on 127.0.0.1, port 0). Every wait is bounded.
 *
 * A scheduler name may end in "@wWtT" (inflight@w2t1): that daemon runs
 * --workers W with --threads T each, for comparing the split of the cores
 * between workers and engine threads (--threads T sets the others).
 *
 *   load --daemon build/transformerd --model DIR --input FILE
 *        [--concurrency 1,8,64] [--schedulers inflight,batch[,batch1][,NAME@wWtT]]
 *        [--threads T] [--batch B] [--requests N] [--rounds R] [--seed S]
 *        [--max-seconds S] [--batch-delay-ms D] [--log-dir DIR] [--device D]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lines.h"
#include "prom.h"

#include <jansson.h>

#include "server/client.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define MAX_LEVELS 16
#define MAX_SCHEDS 6

typedef struct cfg {
    const char *daemon, *model, *input, *log_dir, *device;
    int levels[MAX_LEVELS], n_levels;
    const char *scheds[MAX_SCHEDS]; /* inflight | batch | batch1 */
    int n_scheds;
    int threads, batch, requests, batch_delay_ms, rounds;
    unsigned long long seed;
    double max_seconds;
} cfg;

/* length classes; CL_MID counts only in "all" */
enum { CL_ALL = 0, CL_SHORT = 1, CL_LONG = 2, CL_MID = 3, N_CL = 3 };
static const char *const k_cl_names[N_CL] = {"all", "short", "long"};

static char **g_lines;
static int g_n_lines;
static char **g_bodies; /* the JSON request of each line */
static int *g_class;    /* CL_SHORT, CL_LONG or CL_MID, per line */
static int g_cl_n[N_CL], g_cl_min[N_CL], g_cl_max[N_CL]; /* lines and word range per class */

/* ---- input ------------------------------------------------------------- */

static unsigned long long splitmix64(unsigned long long *x)
{
    unsigned long long z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int read_lines(const char *path, unsigned long long seed)
{
    if (bench_read_lines(path, &g_lines, &g_n_lines) != 0 || g_n_lines == 0)
        return -1;
    /* interleave short and long: Fisher-Yates with a fixed seed */
    if (seed) {
        unsigned long long st = seed;
        for (int i = g_n_lines - 1; i > 0; i--) {
            int j = (int)(splitmix64(&st) % (unsigned long long)(i + 1));
            char *t = g_lines[i];
            g_lines[i] = g_lines[j];
            g_lines[j] = t;
        }
    }
    /* length classes: thirds by rank of word count (lines.h) */
    int *words = calloc((size_t)g_n_lines, sizeof *words);
    g_class = calloc((size_t)g_n_lines, sizeof *g_class);
    g_bodies = calloc((size_t)g_n_lines, sizeof *g_bodies);
    if (!words || !g_class || !g_bodies ||
        bench_word_thirds(g_lines, g_n_lines, words, g_class) != 0)
        return -1;
    for (int k = 0; k < N_CL; k++) {
        g_cl_n[k] = 0;
        g_cl_min[k] = 1 << 30;
        g_cl_max[k] = 0;
    }
    static const int k_third_cl[3] = {CL_SHORT, CL_MID, CL_LONG};
    for (int i = 0; i < g_n_lines; i++) {
        const int cl = k_third_cl[g_class[i]];
        g_class[i] = cl;
        for (int k = 0; k < N_CL; k++) {
            if (k != CL_ALL && k != cl)
                continue;
            g_cl_n[k]++;
            g_cl_min[k] = words[i] < g_cl_min[k] ? words[i] : g_cl_min[k];
            g_cl_max[k] = words[i] > g_cl_max[k] ? words[i] : g_cl_max[k];
        }
    }
    free(words);
    for (int i = 0; i < g_n_lines; i++) {
        json_t *o = json_pack("{s:s}", "text", g_lines[i]);
        g_bodies[i] = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!g_bodies[i]) {
            fprintf(stderr, "load: line %d is not UTF-8\n", i + 1);
            return -1;
        }
    }
    return 0;
}

/* ---- offline ----------------------------------------------------------- */

/* Runs `daemon translate` with stdin from path (NULL: empty) and returns its
 * wall time, or -1. */
static double run_translate(const cfg *c, const char *path)
{
    char th[16], bs[16];
    snprintf(th, sizeof th, "%d", c->threads);
    snprintf(bs, sizeof bs, "%d", c->batch);
    const char *argv[] = {c->daemon, "translate", "--model", c->model, "--threads", th,
                          "--batch", bs, "--device", c->device, NULL};
    double t0 = now_s();
    pid_t p = fork();
    if (p < 0)
        return -1;
    if (p == 0) {
        int in = open(path ? path : "/dev/null", O_RDONLY);
        int out = open("/dev/null", O_WRONLY);
        if (in < 0 || out < 0)
            _exit(127);
        dup2(in, 0);
        dup2(out, 1);
        execv(c->daemon, (char *const *)argv);
        _exit(127);
    }
    /* bounded: at most 10 minutes */
    int st;
    for (;;) {
        pid_t r = waitpid(p, &st, WNOHANG);
        if (r == p)
            break;
        if (now_s() - t0 > 600) {
            kill(p, SIGKILL);
            waitpid(p, &st, 0);
            return -1;
        }
        struct timespec ts = {0, 2000000L};
        nanosleep(&ts, NULL);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return now_s() - t0;
}

/* The offline runs: each times `translate` on empty input (the model load)
 * and on the requests' lines; the best of each counts. */
typedef struct offline {
    double t_load, t_full;
    double sps[8]; /* each run's sentences/s, load subtracted */
    int n;
} offline;

static int offline_run(const cfg *c, const char *path, offline *o)
{
    double a = run_translate(c, NULL), b = run_translate(c, path);
    if (a < 0 || b < 0) {
        fprintf(stderr, "load: `%s translate` failed\n", c->daemon);
        return -1;
    }
    o->t_load = a < o->t_load ? a : o->t_load;
    o->t_full = b < o->t_full ? b : o->t_full;
    double sps = c->requests / (b - a > 1e-6 ? b - a : 1e-6);
    if (o->n < 8)
        o->sps[o->n++] = sps;
    fprintf(stderr, "load: offline run: %.1f sentences/s\n", sps);
    return 0;
}

/* ---- the daemon's /metrics ---------------------------------------------- */

typedef struct dmetrics {
    double steps, step_sum, step_count;        /* running decodes (inflight) */
    double adm_sum, adm_count, adm_none;       /* sentences admitted per step */
    double batches, bsize_sum, bsize_count;    /* engine batches / admissions */
    double batch_s;                            /* engine time of the batches */
} dmetrics;

static int get_metrics(int port, char **text)
{
    tc_resp r;
    memset(&r, 0, sizeof r);
    *text = NULL;
    if (tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r) != 0 || r.status != 200) {
        tc_resp_free(&r);
        return -1;
    }
    *text = r.body;
    r.body = NULL;
    tc_resp_free(&r);
    return 0;
}

static void read_dmetrics(int port, dmetrics *m)
{
    memset(m, 0, sizeof *m);
    char *t;
    if (get_metrics(port, &t) != 0)
        return;
    m->steps = prom_sum(t, "transformerd_decode_steps_total", NULL);
    m->step_sum = prom_sum(t, "transformerd_step_duration_seconds_sum", NULL);
    m->step_count = prom_sum(t, "transformerd_step_duration_seconds_count", NULL);
    m->adm_sum = prom_sum(t, "transformerd_step_admitted_sum", NULL);
    m->adm_count = prom_sum(t, "transformerd_step_admitted_count", NULL);
    m->adm_none = prom_sum(t, "transformerd_step_admitted_bucket", "le=\"0\"");
    m->batches = prom_sum(t, "transformerd_batches_total", NULL);
    m->bsize_sum = prom_sum(t, "transformerd_batch_size_sum", NULL);
    m->bsize_count = prom_sum(t, "transformerd_batch_size_count", NULL);
    m->batch_s = prom_sum(t, "transformerd_batch_duration_seconds_sum", NULL);
    free(t);
}

/* Samples the running rows and the queue depth every 100 ms. */
typedef struct sampler {
    int port;
    atomic_int stop;
    int n;
    double rows, depth;
} sampler;

static void *sampler_main(void *arg)
{
    sampler *s = arg;
    while (!atomic_load(&s->stop)) {
        char *t;
        if (get_metrics(s->port, &t) == 0) {
            s->rows += prom_sum(t, "transformerd_running_rows", NULL);
            s->depth += prom_sum(t, "transformerd_queue_depth", NULL);
            s->n++;
            free(t);
        }
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* ---- HTTP load ----------------------------------------------------------- */

/* One scheduler at one concurrency, pooled over the rounds. */
typedef struct level_result {
    int concurrency;
    int sent, ok, errors;
    double seconds, cpu;
    long target_tokens;
    double *lat[N_CL]; /* seconds, per class */
    int n[N_CL], cap[N_CL];
    dmetrics d;        /* the daemon's counters: increase over the levels */
    double rows_sum, depth_sum;
    int samples;
    /* set by finish_result */
    double p50_ms[N_CL], p99_ms[N_CL];
    double steps, step_ms, admitted_per_step, steps_admitting, batches, batch_mean;
    double rows_mean, depth_mean;
    double engine_busy; /* engine time (steps or batches) / wall time */
    double client_cpu;  /* this process's CPU time / wall time (cores) */
} level_result;

typedef struct run_state {
    int port;
    int total;            /* requests to send */
    double deadline;
    atomic_int next;      /* next request index */
    atomic_int sent;      /* requests sent */
    double *lat;          /* per request, seconds; <0 = not completed */
    atomic_int errors;
    atomic_long tokens;
} run_state;

static int post_on(int fd, const char *body, tc_resp *out)
{
    char head[256];
    size_t bl = strlen(body);
    int hl = snprintf(head, sizeof head,
                      "POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                      bl);
    if (send(fd, head, (size_t)hl, MSG_NOSIGNAL | MSG_MORE) != hl)
        return -1;
    size_t off = 0;
    while (off < bl) {
        ssize_t k = send(fd, body + off, bl - off, MSG_NOSIGNAL);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -1;
        }
        off += (size_t)k;
    }
    return tc_read_on(fd, out);
}

static void *client_main(void *arg)
{
    run_state *rs = arg;
    int fd = -1;
    for (;;) {
        int i = atomic_fetch_add(&rs->next, 1);
        if (i >= rs->total || now_s() > rs->deadline)
            break;
        if (fd < 0)
            fd = tc_connect(rs->port);
        atomic_fetch_add(&rs->sent, 1);
        const char *body = g_bodies[i % g_n_lines];
        double t0 = now_s();
        tc_resp r;
        memset(&r, 0, sizeof r);
        int rc = fd >= 0 ? post_on(fd, body, &r) : -1;
        double dt = now_s() - t0;
        char conn[32];
        int reconnect = rc != 0 || r.status == 0 ||
                        (tc_header(&r, "Connection", conn, sizeof conn) && !strcmp(conn, "close"));
        if (rc == 0 && r.status == 200) {
            rs->lat[i] = dt;
            json_error_t je;
            json_t *j = json_loads(r.body, 0, &je);
            json_t *u = json_object_get(json_object_get(j, "usage"), "target_tokens");
            atomic_fetch_add(&rs->tokens, (long)json_integer_value(u));
            json_decref(j);
        } else {
            atomic_fetch_add(&rs->errors, 1);
            if (atomic_load(&rs->errors) <= 3)
                fprintf(stderr, "load: request %d: status %d %s\n", i, r.status,
                        r.body ? r.body : "");
        }
        tc_resp_free(&r);
        if (reconnect && fd >= 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50 and p99 (nearest rank) of the n latencies in v, sorted here, in ms */
static void percentiles(double *v, int n, double *p50, double *p99)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *p50 = n ? v[(int)(0.50 * (n - 1) + 0.5)] * 1e3 : 0;
    *p99 = n ? v[(int)(0.99 * (n - 1) + 0.5)] * 1e3 : 0;
}

static int push_lat(level_result *o, int k, double v)
{
    if (o->n[k] == o->cap[k]) {
        int cap = o->cap[k] ? 2 * o->cap[k] : 1024;
        double *g = realloc(o->lat[k], (size_t)cap * sizeof *g);
        if (!g)
            return -1;
        o->lat[k] = g;
        o->cap[k] = cap;
    }
    o->lat[k][o->n[k]++] = v;
    return 0;
}

/* One level against the daemon on port; adds to *out. */
static int run_level(const cfg *c, int port, int conc, level_result *out)
{
    run_state rs;
    memset(&rs, 0, sizeof rs);
    rs.port = port;
    rs.total = c->requests;
    rs.lat = malloc((size_t)rs.total * sizeof *rs.lat);
    pthread_t *th = calloc((size_t)conc, sizeof *th);
    if (!rs.lat || !th) {
        free(rs.lat);
        free(th);
        return -1;
    }
    for (int i = 0; i < rs.total; i++)
        rs.lat[i] = -1;
    dmetrics m0, m1;
    read_dmetrics(port, &m0);
    sampler sm;
    memset(&sm, 0, sizeof sm);
    sm.port = port;
    pthread_t sth;
    int sampling = pthread_create(&sth, NULL, sampler_main, &sm) == 0;
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now_s();
    rs.deadline = t0 + c->max_seconds;
    int started = 0;
    for (; started < conc; started++)
        if (pthread_create(&th[started], NULL, client_main, &rs) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    double wall = now_s() - t0;
    getrusage(RUSAGE_SELF, &ru1);
    free(th);
    if (sampling) {
        atomic_store(&sm.stop, 1);
        pthread_join(sth, NULL);
    }
    read_dmetrics(port, &m1);
    int rc = 0;
    out->concurrency = conc;
    out->sent += atomic_load(&rs.sent);
    out->errors += atomic_load(&rs.errors);
    out->seconds += wall;
    out->target_tokens += atomic_load(&rs.tokens);
    for (int i = 0; i < rs.total && rc == 0; i++)
        if (rs.lat[i] >= 0) {
            out->ok++;
            rc |= push_lat(out, CL_ALL, rs.lat[i]);
            int k = g_class[i % g_n_lines];
            if (k != CL_MID)
                rc |= push_lat(out, k, rs.lat[i]);
        }
    out->d.steps += m1.steps - m0.steps;
    out->d.step_sum += m1.step_sum - m0.step_sum;
    out->d.step_count += m1.step_count - m0.step_count;
    out->d.adm_sum += m1.adm_sum - m0.adm_sum;
    out->d.adm_count += m1.adm_count - m0.adm_count;
    out->d.adm_none += m1.adm_none - m0.adm_none;
    out->d.batches += m1.batches - m0.batches;
    out->d.bsize_sum += m1.bsize_sum - m0.bsize_sum;
    out->d.bsize_count += m1.bsize_count - m0.bsize_count;
    out->d.batch_s += m1.batch_s - m0.batch_s;
    out->rows_sum += sm.rows;
    out->depth_sum += sm.depth;
    out->samples += sm.n;
#define TV(t) ((double)(t).tv_sec + (double)(t).tv_usec * 1e-6)
    out->cpu += TV(ru1.ru_utime) - TV(ru0.ru_utime) + TV(ru1.ru_stime) - TV(ru0.ru_stime);
#undef TV
    free(rs.lat);
    return rc;
}

static void finish_result(level_result *x)
{
    for (int k = 0; k < N_CL; k++)
        percentiles(x->lat[k], x->n[k], &x->p50_ms[k], &x->p99_ms[k]);
    const dmetrics *d = &x->d;
    x->steps = d->steps;
    x->step_ms = d->step_count > 0 ? d->step_sum / d->step_count * 1e3 : 0;
    x->admitted_per_step = d->adm_count > 0 ? d->adm_sum / d->adm_count : 0;
    x->steps_admitting = d->adm_count > 0 ? 1.0 - d->adm_none / d->adm_count : 0;
    x->batches = d->batches;
    x->batch_mean = d->bsize_count > 0 ? d->bsize_sum / d->bsize_count : 0;
    x->rows_mean = x->samples ? x->rows_sum / x->samples : 0;
    x->depth_mean = x->samples ? x->depth_sum / x->samples : 0;
    x->engine_busy = x->seconds > 0 ? (d->step_sum + d->batch_s) / x->seconds : 0;
    x->client_cpu = x->seconds > 0 ? x->cpu / x->seconds : 0;
}

static double sps(const level_result *x)
{
    return x->seconds > 0 ? x->ok / x->seconds : 0;
}

/* A daemon of the run: inflight, inflight-full (its workers' memory
 * allocated at start: --scratch full; the others' on demand), batch, or
 * batch1 (batch with --max-batch-size 1), optionally with "@wWtT":
 * --workers W --threads T instead of one worker of --threads threads (e.g.
 * inflight@w2t1). */
typedef struct daemon_t {
    const char *name, *sched;
    int mbs, port, workers, threads;
    pid_t pid;
    char log[1024];
} daemon_t;

static int start_daemon(const cfg *c, const char *name, daemon_t *d)
{
    d->name = name;
    const size_t base = strcspn(name, "@");
    d->workers = 1;
    d->threads = c->threads;
    if (name[base] && sscanf(name + base, "@w%dt%d", &d->workers, &d->threads) != 2)
        return -1; /* checked when parsed */
    d->mbs = !strncmp(name, "batch1", base) && base == 6 ? 1 : c->batch;
    const int full = !strncmp(name, "inflight-full", base) && base == 13;
    d->sched = full || (!strncmp(name, "inflight", base) && base == 8) ? "inflight" : "batch";
    char th[16], bs[16], dl[16], mq[16], wk[16];
    snprintf(th, sizeof th, "%d", d->threads);
    snprintf(wk, sizeof wk, "%d", d->workers);
    snprintf(bs, sizeof bs, "%d", d->mbs);
    snprintf(dl, sizeof dl, "%d", c->batch_delay_ms);
    snprintf(mq, sizeof mq, "%d", 4096);
    snprintf(d->log, sizeof d->log, "%s/%s.log", c->log_dir, name);
    const char *args[] = {"--model",       c->model, "--threads", th, "--max-batch-size", bs,
                          "--scheduler",   d->sched,
                          "--batch-delay-ms", dl,    "--max-queue", mq, "--max-batch-texts", "1",
                          /* every client is 127.0.0.1: no per-address cap */
                          "--max-connections-per-ip", "0",
                          "--device", c->device, "--workers", wk,
                          "--scratch", full ? "full" : "on-demand", NULL};
    /* the engine under load, not the translation cache (a repeated line
     * would be a hit); by the environment, which daemons before the cache
     * ignore */
    setenv("TRANSFORMERD_CACHE_BYTES", "0", 1);
    d->port = tc_daemon_start(c->daemon, args, d->log, 120, &d->pid);
    if (d->port <= 0) {
        fprintf(stderr, "load: the daemon did not start; see %s\n", d->log);
        return -1;
    }
    /* warm the connections and the allocator */
    for (int i = 0; i < 8 && i < g_n_lines; i++) {
        tc_resp r;
        if (tc_post_json(d->port, "/v1/translate", g_bodies[i], &r) != 0 || r.status != 200)
            fprintf(stderr, "load: warm-up request failed (%d)\n", r.status);
        tc_resp_free(&r);
    }
    return 0;
}

/* Saves the daemon's final /metrics next to its log and stops it. */
static int stop_daemon(const cfg *c, daemon_t *d)
{
    char *t, mpath[1100];
    snprintf(mpath, sizeof mpath, "%s/%s.metrics", c->log_dir, d->name);
    if (get_metrics(d->port, &t) == 0) {
        FILE *mf = fopen(mpath, "w");
        if (mf) {
            fputs(t, mf);
            fclose(mf);
        }
        free(t);
    }
    kill(d->pid, SIGTERM);
    if (tc_daemon_wait(d->pid, 60) != 0) {
        fprintf(stderr, "load: the daemon did not exit cleanly; see %s\n", d->log);
        return -1;
    }
    return 0;
}

static void print_json(const cfg *c, const daemon_t *d, const level_result *x)
{
    printf("{\"run\":\"%s\",\"scheduler\":\"%s\",\"max_batch_size\":%d,\"concurrency\":%d,"
           "\"rounds\":%d,\"requests\":%d,\"ok\":%d,\"errors\":%d,\"seconds\":%.3f,"
           "\"sentences_per_s\":%.1f,\"target_tokens_per_s\":%.1f",
           d->name, d->sched, d->mbs, x->concurrency, c->rounds, x->sent, x->ok, x->errors,
           x->seconds, sps(x), x->seconds > 0 ? x->target_tokens / x->seconds : 0);
    for (int k = 0; k < N_CL; k++)
        printf(",\"%s_n\":%d,\"%s_p50_ms\":%.2f,\"%s_p99_ms\":%.2f", k_cl_names[k], x->n[k],
               k_cl_names[k], x->p50_ms[k], k_cl_names[k], x->p99_ms[k]);
    printf(",\"decode_steps\":%.0f,\"step_ms_mean\":%.3f,\"admitted_per_step\":%.3f,"
           "\"steps_admitting\":%.3f,\"batches\":%.0f,\"batch_size_mean\":%.2f,"
           "\"running_rows_mean\":%.1f,\"queue_depth_mean\":%.1f,\"engine_busy\":%.3f,"
           "\"client_cpu_cores\":%.2f}\n",
           x->steps, x->step_ms, x->admitted_per_step, x->steps_admitting, x->batches,
           x->batch_mean, x->rows_mean, x->depth_mean, x->engine_busy, x->client_cpu);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: load --daemon PATH --model DIR --input FILE [--concurrency 1,8,64]\n"
            "            [--schedulers inflight,batch[,batch1]] [--threads T] [--batch B]\n"
            "            [--requests N] [--rounds R] [--seed S (0: file order)]\n"
            "            [--max-seconds S per level and round]\n"
            "            [--batch-delay-ms D] [--log-dir DIR] [--device cpu|cuda[:N]]\n");
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

int main(int argc, char **argv)
{
    cfg c = {.log_dir = "/tmp", .device = "cpu", .threads = 0, .batch = 32, .requests = 0,
             .batch_delay_ms = 0, .rounds = 1, .seed = 1, .max_seconds = 60};
    const char *levels = "1,8,64";
    char scheds[128] = "inflight,batch";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return 2;
        }
        i++;
        if (!strcmp(a, "--daemon"))
            c.daemon = v;
        else if (!strcmp(a, "--model"))
            c.model = v;
        else if (!strcmp(a, "--input"))
            c.input = v;
        else if (!strcmp(a, "--concurrency"))
            levels = v;
        else if (!strcmp(a, "--schedulers"))
            snprintf(scheds, sizeof scheds, "%s", v);
        else if (!strcmp(a, "--threads"))
            c.threads = atoi(v);
        else if (!strcmp(a, "--batch"))
            c.batch = atoi(v);
        else if (!strcmp(a, "--requests"))
            c.requests = atoi(v);
        else if (!strcmp(a, "--rounds"))
            c.rounds = atoi(v);
        else if (!strcmp(a, "--seed"))
            c.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--max-seconds"))
            c.max_seconds = atof(v);
        else if (!strcmp(a, "--batch-delay-ms"))
            c.batch_delay_ms = atoi(v);
        else if (!strcmp(a, "--log-dir"))
            c.log_dir = v;
        else if (!strcmp(a, "--device"))
            c.device = v;
        else {
            usage();
            return 2;
        }
    }
    if (!c.daemon || !c.model || !c.input || c.batch < 1 || c.max_seconds <= 0 ||
        c.rounds < 1 || c.rounds > 100) {
        usage();
        return 2;
    }
    for (const char *p = levels; *p && c.n_levels < MAX_LEVELS;) {
        int v = atoi(p);
        if (v < 1 || v > 1024) {
            fprintf(stderr, "load: bad --concurrency %s\n", levels);
            return 2;
        }
        c.levels[c.n_levels++] = v;
        p += strcspn(p, ",");
        if (*p)
            p++;
    }
    for (char *save = NULL, *tok = strtok_r(scheds, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        const size_t base = strcspn(tok, "@");
        int w = 0, t = 0;
        char tail;
        if ((strncmp(tok, "inflight", base) || base != 8) &&
            (strncmp(tok, "inflight-full", base) || base != 13) &&
            (strncmp(tok, "batch", base) || base != 5) && (strncmp(tok, "batch1", base) || base != 6)) {
            fprintf(stderr, "load: bad scheduler %s (inflight, inflight-full, batch, batch1)\n", tok);
            return 2;
        }
        if (tok[base] && (sscanf(tok + base, "@w%dt%d%c", &w, &t, &tail) != 2 || w < 1 ||
                          w > 64 || t < 1 || t > 1024)) {
            fprintf(stderr, "load: bad scheduler %s (NAME@wWtT: W workers of T threads)\n",
                    tok);
            return 2;
        }
        if (c.n_scheds == MAX_SCHEDS) {
            fprintf(stderr, "load: at most %d --schedulers\n", MAX_SCHEDS);
            return 2;
        }
        c.scheds[c.n_scheds++] = tok;
    }
    if (c.n_scheds == 0) {
        usage();
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (read_lines(c.input, c.seed) != 0) {
        fprintf(stderr, "load: cannot read lines from %s\n", c.input);
        return 1;
    }
    if (c.requests <= 0)
        c.requests = g_n_lines;
    fprintf(stderr, "load: %d input lines, %d requests per level, model %s, threads %d\n",
            g_n_lines, c.requests, c.model, c.threads);

    /* 1. offline, on exactly the requests' lines in the same order (each
     * line once when requests == lines) */
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/load-input.txt", c.log_dir);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 1;
    for (int i = 0; i < c.requests; i++)
        fprintf(f, "%s\n", g_lines[i % g_n_lines]);
    fclose(f);
    offline off = {.t_load = 1e9, .t_full = 1e9};
    for (int k = 0; k < 2; k++)
        if (offline_run(&c, tmp, &off) != 0)
            return 1;

    /* 2. the daemons, all started at once; each round runs every level
     * against each in turn, so that a change of the machine's load hits
     * both schedulers alike (the idle daemon waits on its queue) */
    static level_result res[MAX_SCHEDS][MAX_LEVELS];
    daemon_t dm[MAX_SCHEDS];
    int n_up = 0, rc = 0;
    for (; n_up < c.n_scheds; n_up++)
        if (start_daemon(&c, c.scheds[n_up], &dm[n_up]) != 0) {
            rc = 1;
            break;
        }
    /* compared pairs: each inflight daemon with the batch daemon of the
     * same split (inflight with batch, inflight@w2t1 with batch@w2t1) */
    int pair_i[MAX_SCHEDS], pair_b[MAX_SCHEDS], n_pairs = 0;
    for (int s = 0; s < n_up; s++)
        for (int t = 0; t < n_up && strcmp(dm[s].sched, "inflight") == 0; t++) {
            const char *ss = strchr(c.scheds[s], '@'), *ts = strchr(c.scheds[t], '@');
            if (!strcmp(dm[t].sched, "batch") && dm[t].mbs != 1 &&
                (ss && ts ? !strcmp(ss, ts) : ss == ts)) {
                pair_i[n_pairs] = s;
                pair_b[n_pairs++] = t;
                break;
            }
        }
    for (int r = 0; r < c.rounds && rc == 0; r++)
        for (int l = 0; l < c.n_levels && rc == 0; l++)
            for (int k = 0; k < c.n_scheds && rc == 0; k++) {
                /* every other round in reverse: the first run of a level
                 * after the previous level is measured slower on these
                 * machines, whichever scheduler it is */
                int s = r % 2 ? c.n_scheds - 1 - k : k;
                level_result *x = &res[s][l];
                int ok0 = x->ok;
                double t0 = x->seconds;
                if (run_level(&c, dm[s].port, c.levels[l], x) != 0) {
                    rc = 1;
                    break;
                }
                fprintf(stderr, "load: round %d, %s, concurrency %d: %.1f sentences/s\n", r + 1,
                        dm[s].name, c.levels[l], (x->ok - ok0) / (x->seconds - t0));
            }
    for (int s = 0; s < n_up; s++)
        if (stop_daemon(&c, &dm[s]) != 0)
            rc = 1;
    if (rc)
        return 1;
    for (int s = 0; s < c.n_scheds; s++)
        for (int l = 0; l < c.n_levels; l++) {
            finish_result(&res[s][l]);
            print_json(&c, &dm[s], &res[s][l]);
        }
    /* offline once more, after the daemons: on shared cores one slow
     * offline run would flatter every daemon/offline ratio */
    if (offline_run(&c, tmp, &off) != 0)
        return 1;
    double t_off = off.t_full - off.t_load > 1e-6 ? off.t_full - off.t_load : 1e-6;
    double off_sps = c.requests / t_off;
    printf("{\"run\":\"offline\",\"batch\":%d,\"sentences\":%d,\"seconds\":%.3f,"
           "\"load_seconds\":%.3f,\"sentences_per_s\":%.1f,\"runs_sentences_per_s\":[",
           c.batch, c.requests, t_off, off.t_load, off_sps);
    for (int k = 0; k < off.n; k++)
        printf("%s%.1f", k ? "," : "", off.sps[k]);
    printf("]}\n");
    fflush(stdout);

    /* the comparison, also as JSON */
    for (int q = 0; q < n_pairs * c.n_levels; q++) {
        const int ii = pair_i[q / c.n_levels], ib = pair_b[q / c.n_levels], l = q % c.n_levels;
        const level_result *a = &res[ii][l], *b = &res[ib][l];
        printf("{\"run\":\"compare\",\"inflight\":\"%s\",\"batch\":\"%s\",\"concurrency\":%d,"
               "\"inflight_sentences_per_s\":%.1f,"
               "\"batch_sentences_per_s\":%.1f,\"offline_sentences_per_s\":%.1f,"
               "\"inflight_over_batch\":%.3f,\"inflight_over_offline\":%.3f",
               c.scheds[ii], c.scheds[ib], a->concurrency, sps(a), sps(b), off_sps,
               ratio(sps(a), sps(b)), ratio(sps(a), off_sps));
        for (int k = 0; k < N_CL; k++)
            printf(",\"inflight_%s_p50_ms\":%.2f,\"inflight_%s_p99_ms\":%.2f,"
                   "\"batch_%s_p50_ms\":%.2f,\"batch_%s_p99_ms\":%.2f",
                   k_cl_names[k], a->p50_ms[k], k_cl_names[k], a->p99_ms[k], k_cl_names[k],
                   b->p50_ms[k], k_cl_names[k], b->p99_ms[k]);
        printf(",\"short_p99_inflight_over_batch\":%.3f}\n",
               ratio(a->p99_ms[CL_SHORT], b->p99_ms[CL_SHORT]));
    }
    printf("\nmodel %s, %d sentences per level and round (shuffled, seed %llu), %d round%s "
           "(levels and schedulers interleaved), engine threads %d, --max-batch-size %d, "
           "--batch-delay-ms %d, beam = model default\n",
           c.model, c.requests, c.seed, c.rounds, c.rounds > 1 ? "s" : "", c.threads, c.batch,
           c.batch_delay_ms);
    printf("length classes by whitespace-separated source words: short = the %d lines with "
           "the fewest (%d-%d words), long = the %d with the most (%d-%d words), all = %d "
           "lines (%d-%d words)\n",
           g_cl_n[CL_SHORT], g_cl_min[CL_SHORT], g_cl_max[CL_SHORT], g_cl_n[CL_LONG],
           g_cl_min[CL_LONG], g_cl_max[CL_LONG], g_cl_n[CL_ALL], g_cl_min[CL_ALL],
           g_cl_max[CL_ALL]);
    printf("offline `transformerd translate --batch %d`: %.1f sentences/s\n\n", c.batch,
           off_sps);
    for (int q = 0; q < n_pairs; q++) {
        const int ii = pair_i[q], ib = pair_b[q];
        printf("%s against %s:\n\n", c.scheds[ii], c.scheds[ib]);
        printf("| concurrency | inflight sent/s | batch sent/s | inflight / batch "
               "| inflight / offline | inflight short p50 / p99 ms | inflight long p50 / p99 ms "
               "| batch short p50 / p99 ms | batch long p50 / p99 ms "
               "| short p99 inflight / batch |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|\n");
        for (int l = 0; l < c.n_levels; l++) {
            const level_result *a = &res[ii][l], *b = &res[ib][l];
            double as = sps(a), bs = sps(b);
            printf("| %d | %.1f | %.1f | %.2fx | %.2fx | %.1f / %.1f | %.1f / %.1f "
                   "| %.1f / %.1f | %.1f / %.1f | %.2fx |\n",
                   a->concurrency, as, bs, ratio(as, bs), ratio(as, off_sps),
                   a->p50_ms[CL_SHORT], a->p99_ms[CL_SHORT], a->p50_ms[CL_LONG],
                   a->p99_ms[CL_LONG], b->p50_ms[CL_SHORT], b->p99_ms[CL_SHORT],
                   b->p50_ms[CL_LONG], b->p99_ms[CL_LONG],
                   ratio(a->p99_ms[CL_SHORT], b->p99_ms[CL_SHORT]));
        }
        printf("\n");
    }
    printf("| run | concurrency | sent/s | all p50 / p99 ms | short p50 / p99 ms "
           "| long p50 / p99 ms | decode steps | step ms | admitted / step "
           "| steps admitting | batches | mean batch | mean running rows "
           "| mean queue depth | engine busy | load cores | errors |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int errors = 0;
    for (int s = 0; s < c.n_scheds; s++)
        for (int l = 0; l < c.n_levels; l++) {
            const level_result *x = &res[s][l];
            /* the batch scheduler has no decode steps nor running rows */
            char steps[96] = "- | - | - | -", rows[32] = "-";
            if (x->steps > 0) {
                snprintf(steps, sizeof steps, "%.0f | %.2f | %.2f | %.0f%%", x->steps,
                         x->step_ms, x->admitted_per_step, 100 * x->steps_admitting);
                snprintf(rows, sizeof rows, "%.1f", x->rows_mean);
            }
            printf("| %s | %d | %.1f | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | %s | %.0f "
                   "| %.1f | %s | %.1f | %.0f%% | %.2f | %d |\n",
                   c.scheds[s], x->concurrency, sps(x), x->p50_ms[CL_ALL],
                   x->p99_ms[CL_ALL], x->p50_ms[CL_SHORT], x->p99_ms[CL_SHORT],
                   x->p50_ms[CL_LONG], x->p99_ms[CL_LONG], steps, x->batches, x->batch_mean,
                   rows, x->depth_mean, 100 * x->engine_busy, x->client_cpu, x->errors);
            errors += x->errors + (x->sent - x->ok - x->errors);
        }
    return errors ? 1 : 0;
}
