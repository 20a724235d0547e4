/*
 * replay.c - the engine under the daemon's schedulers, without HTTP: the
 * lines of a file tokenized once, then
 *
 *   offline   what `transformerd translate --batch B` does with them
 *             (groups of 4 batches sorted by length, td_translate_tokenized)
 *   inflight  the daemon's batcher (server/service/batcher.c) with --scheduler
 *             inflight, fed by C closed-loop clients in this process: a
 *             client submits its next line the moment its last one is done
 *   batch     the same with --scheduler batch
 *
 * (--short-steps: the daemon's option of that name, default 0 as there)
 * and for each, the wall time, the process's CPU time, p50/p99 latency
 * (submit to done) of the short and the long lines (the thirds with the
 * fewest and the most words, as bench_load ranks them), and the batcher's
 * own metrics (decode steps, step time, texts admitted per step, encoder
 * groups and their size). Without the HTTP threads, the sockets and the
 * JSON, what differs between the three is the engine's schedule alone, so
 * this is where the engine time per sentence of the running decode is
 * compared with offline's (docs/benchmarks.md, "The daemon under load").
 *
 *   bench_replay --model DIR --input FILE [--threads T] [--batch B]
 *                [--workers W] [--clients 64,8] [--modes offline,inflight,batch]
 *                [--repeat R] [--batch-delay-ms D] [--short-steps N]
 *
 * Lines are used in the file's order (bench/load/run.sh leaves its shuffled
 * input in OUT/load-input.txt). Prints one JSON line per mode, client count
 * and repetition.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "batcher.h"
#include "clock.h"
#include "lines.h"
#include "prom.h"
#include "metrics.h"
#include "tokenizer.h"
#include "translator.h"

typedef struct cfg {
    const char *model, *input;
    int threads, batch, repeat, delay_ms, workers, short_steps;
    int clients[8], n_clients;
    int offline, inflight, batchmode;
} cfg;

static char **g_lines;
static size_t *g_lens;
static int g_n;
/* the length class of each line by words: 0 short (the third of the
 * lines with the fewest), 2 long (the third with the most), 1 between;
 * each line's latency (submit to done) of the current run */
static int *g_class;
static double *g_latency;

/* ---- the closed-loop clients -------------------------------------------- */

typedef struct driver {
    srv_batcher *b;
    srv_job *jobs;      /* one per line */
    td_tok_ids *ids;    /* the lines' tokens */
    const td_decode_opts *opts;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int next;           /* the next line to submit */
    int done, failed;
} driver;

typedef struct client {
    driver *d;
} client;

/* Under d->mu: the next line, or -1 when every line was sent. */
static int take_line(driver *d)
{
    return d->next < g_n ? d->next++ : -1;
}

static void job_done(srv_job *j, void *ud);

static void submit_line(driver *d, client *c, int i)
{
    srv_job *j = &d->jobs[i];
    memset(j, 0, sizeof *j);
    j->src = d->ids[i].ids;
    j->n_src = d->ids[i].n;
    j->opts = d->opts;
    srv_completion comp = {.done = job_done, .ud = c};
    if (srv_batcher_submit(d->b, j, 1, srv_now() + 3600, &comp) != SRV_SUBMIT_OK) {
        pthread_mutex_lock(&d->mu);
        d->failed++;
        d->done++;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
}

/* A line is done: its client sends the next at once. */
static void job_done(srv_job *j, void *ud)
{
    client *c = ud;
    driver *d = c->d;
    if (j->status == SRV_JOB_DONE)
        td_result_free(&j->res);
    g_latency[j - d->jobs] = srv_now() - j->t_enqueue;
    pthread_mutex_lock(&d->mu);
    d->failed += j->status != SRV_JOB_DONE;
    d->done++;
    int i = take_line(d);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (i >= 0)
        submit_line(d, c, i);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50 and p99 in ms of the latencies of class cl (-1: every line). */
static void class_pcts(int cl, double *p50, double *p99)
{
    double *v = malloc((size_t)g_n * sizeof *v);
    int n = 0;
    for (int i = 0; v && i < g_n; i++)
        if (cl < 0 || g_class[i] == cl)
            v[n++] = g_latency[i];
    *p50 = *p99 = 0;
    if (n > 0) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        *p50 = 1e3 * v[(n - 1) / 2];
        *p99 = 1e3 * v[(int)((n - 1) * 0.99)];
    }
    free(v);
}

static void print_result(const char *mode, int clients, double wall, double cpu, int failed,
                         const char *metrics)
{
    printf("{\"mode\":\"%s\",\"clients\":%d,\"sentences\":%d,\"failed\":%d,\"seconds\":%.3f,"
           "\"sentences_per_s\":%.1f,\"cpu_seconds\":%.3f,\"cpu_ms_per_sentence\":%.2f",
           mode, clients, g_n, failed, wall, g_n / wall, cpu, 1e3 * cpu / g_n);
    if (clients > 0) {
        static const char *const names[] = {"short", "mid", "long"};
        for (int cl = 0; cl < 3; cl += 2) {
            double p50, p99;
            class_pcts(cl, &p50, &p99);
            printf(",\"%s_p50_ms\":%.1f,\"%s_p99_ms\":%.1f", names[cl], p50, names[cl], p99);
        }
    }
    if (metrics) {
        double steps = prom_sum(metrics, "transformerd_decode_steps_total", NULL);
        double ssum = prom_sum(metrics, "transformerd_step_duration_seconds_sum", NULL);
        double asum = prom_sum(metrics, "transformerd_step_admitted_sum", NULL);
        double groups = prom_sum(metrics, "transformerd_batches_total", NULL);
        double gsum = prom_sum(metrics, "transformerd_batch_size_sum", NULL);
        printf(",\"decode_steps\":%.0f,\"step_ms_mean\":%.3f,\"admitted_per_step\":%.3f,"
               "\"engine_groups\":%.0f,\"group_size_mean\":%.2f",
               steps, steps > 0 ? 1e3 * ssum / steps : 0.0, steps > 0 ? asum / steps : 0.0,
               groups, groups > 0 ? gsum / groups : 0.0);
    }
    printf("}\n");
    fflush(stdout);
}

static int run_batcher(const cfg *c, td_model *m, td_tok_ids *ids, int clients,
                       srv_scheduler sched)
{
    char err[512];
    /* the batcher records into a model's child, as in the daemon (only the
     * children are rendered) */
    srv_metrics *met = srv_metrics_new();
    srv_metrics *mm = met ? srv_metrics_model(met, "replay") : NULL;
    if (!mm) {
        srv_metrics_free(met);
        return -1;
    }
    srv_metrics_set_limits(mm, c->batch, 8192);
    const td_config *mc = td_model_config(m);
    srv_batcher_opts bo = {.model = m,
                           .warm_up_token = (int32_t)mc->eos_token_id,
                           .workers = c->workers,
                           .threads = c->threads,
                           .max_batch_size = c->batch,
                           .max_batch_tokens = 8192,
                           .batch_delay_ms = c->delay_ms,
                           .max_queue = g_n + 1,
                           .max_src_len = mc->max_position_embeddings,
                           .short_steps = c->short_steps,
                           .scheduler = sched};
    td_decode_opts_default(m, &bo.warm_up);
    bo.max_length = bo.warm_up.max_length;
    bo.max_beam = bo.warm_up.beam_size;
    driver d = {.ids = ids, .opts = &bo.warm_up};
    if (srv_batcher_init(&d.b, &bo, mm, err, sizeof err) != 0) {
        fprintf(stderr, "replay: %s\n", err);
        srv_metrics_free(met);
        return -1;
    }
    d.jobs = calloc((size_t)g_n, sizeof *d.jobs);
    client *cl = calloc((size_t)clients, sizeof *cl);
    if (!d.jobs || !cl) {
        srv_batcher_free(d.b);
        srv_metrics_free(met);
        free(d.jobs);
        free(cl);
        return -1;
    }
    pthread_mutex_init(&d.mu, NULL);
    pthread_cond_init(&d.cv, NULL);
    double t0 = srv_now(), c0 = cpu_seconds();
    for (int k = 0; k < clients; k++) {
        cl[k].d = &d;
        pthread_mutex_lock(&d.mu);
        int i = take_line(&d);
        pthread_mutex_unlock(&d.mu);
        if (i >= 0)
            submit_line(&d, &cl[k], i);
    }
    pthread_mutex_lock(&d.mu);
    while (d.done < g_n)
        pthread_cond_wait(&d.cv, &d.mu);
    pthread_mutex_unlock(&d.mu);
    double wall = srv_now() - t0, cpu = cpu_seconds() - c0;
    char *text = srv_metrics_render(met, 1);
    print_result(sched == SRV_SCHED_INFLIGHT ? "inflight" : "batch", clients, wall, cpu,
                 d.failed, text);
    free(text);
    srv_batcher_drain(d.b, srv_now() + 10);
    srv_batcher_free(d.b);
    srv_metrics_free(met);
    pthread_mutex_destroy(&d.mu);
    pthread_cond_destroy(&d.cv);
    free(d.jobs);
    free(cl);
    return 0;
}

/* ---- offline ------------------------------------------------------------- */

static int run_offline(const cfg *c, td_model *m, const td_tokenizer *tok, const td_tok_ids *ids)
{
    char err[512];
    td_decode_opts o;
    td_decode_opts_default(m, &o);
    td_worker_opts wo = {.max_batch = c->batch, .max_length = o.max_length,
                         .max_beam = o.beam_size, .n_threads = c->threads};
    td_worker *w = NULL;
    if (td_worker_init(&w, m, &wo, err, sizeof err) != 0) {
        fprintf(stderr, "replay: %s\n", err);
        return -1;
    }
    const int group = 4 * c->batch;
    td_tok_ids *cp = calloc((size_t)group, sizeof *cp);
    td_text_result *res = calloc((size_t)group, sizeof *res);
    int rc = cp && res ? 0 : -1;
    double t0 = srv_now(), c0 = cpu_seconds();
    for (int g0 = 0; rc == 0 && g0 < g_n; g0 += group) {
        int n = g_n - g0 < group ? g_n - g0 : group;
        for (int i = 0; i < n; i++) { /* td_translate_tokenized takes the ids */
            cp[i] = ids[g0 + i];
            cp[i].ids = malloc((size_t)cp[i].n * sizeof(int32_t));
            if (!cp[i].ids)
                return -1;
            memcpy(cp[i].ids, ids[g0 + i].ids, (size_t)cp[i].n * sizeof(int32_t));
        }
        rc = td_translate_tokenized(w, tok, cp, n, &o, res, err, sizeof err);
        for (int i = 0; rc == 0 && i < n; i++)
            td_text_result_free(&res[i]);
    }
    double wall = srv_now() - t0, cpu = cpu_seconds() - c0;
    if (rc == 0)
        print_result("offline", 0, wall, cpu, 0, NULL);
    else
        fprintf(stderr, "replay: offline: %s\n", err);
    free(cp);
    free(res);
    td_worker_free(w);
    return rc;
}

/* ---- main ------------------------------------------------------------------ */

static int read_lines(const char *path)
{
    if (bench_read_lines(path, &g_lines, &g_n) != 0 || g_n == 0)
        return -1;
    g_lens = malloc((size_t)g_n * sizeof *g_lens);
    if (!g_lens)
        return -1;
    for (int i = 0; i < g_n; i++)
        g_lens[i] = strlen(g_lines[i]);
    return 0;
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 100000)
            return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv)
{
    cfg c = {.threads = 1, .batch = 32, .repeat = 1, .workers = 1, .short_steps = 0,
             .clients = {64, 8}, .n_clients = 2, .offline = 1, .inflight = 1, .batchmode = 1};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--model"))
            c.model = v;
        else if (!strcmp(a, "--input"))
            c.input = v;
        else if (!strcmp(a, "--threads"))
            c.threads = atoi(v);
        else if (!strcmp(a, "--batch"))
            c.batch = atoi(v);
        else if (!strcmp(a, "--workers"))
            c.workers = atoi(v);
        else if (!strcmp(a, "--repeat"))
            c.repeat = atoi(v);
        else if (!strcmp(a, "--batch-delay-ms"))
            c.delay_ms = atoi(v);
        else if (!strcmp(a, "--short-steps"))
            c.short_steps = atoi(v);
        else if (!strcmp(a, "--clients")) {
            if ((c.n_clients = parse_list(v, c.clients, 8)) < 1) {
                fprintf(stderr, "replay: bad --clients %s\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--modes")) {
            c.offline = strstr(v, "offline") != NULL;
            c.inflight = strstr(v, "inflight") != NULL;
            c.batchmode = strstr(v, "batch") != NULL;
        } else {
            fprintf(stderr, "replay: unknown option %s\n", a);
            return 2;
        }
    }
    if (!c.model || !c.input || c.batch < 1 || c.repeat < 1 || c.workers < 1) {
        fprintf(stderr, "usage: bench_replay --model DIR --input FILE [--threads T] [--batch B]\n"
                        "       [--workers W] [--clients 64,8] [--modes offline,inflight,batch] "
                        "[--repeat R] [--batch-delay-ms D] [--short-steps N]\n");
        return 2;
    }
    if (read_lines(c.input) != 0) {
        fprintf(stderr, "replay: cannot read lines from %s\n", c.input);
        return 1;
    }
    char err[512];
    td_model *m = NULL;
    td_load_opts lo = {.n_threads = c.threads};
    td_tokenizer *tok = NULL;
    if (td_model_load(&m, c.model, &lo, err, sizeof err) != 0 ||
        td_model_tokenizer_load(m, c.model, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "replay: %s: %s\n", c.model, err);
        return 1;
    }
    td_tok_ids *ids = calloc((size_t)g_n, sizeof *ids);
    if (!ids || td_tok_encode_batch(tok, (const char *const *)g_lines, g_lens, g_n,
                                    td_model_config(m)->max_position_embeddings,
                                    TD_LONG_SOURCE_TRUNCATE, ids, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "replay: tokenizing: %s\n", err);
        return 1;
    }
    /* length classes as bench_load's: thirds of the lines by rank of their
     * whitespace-separated words, ties by position */
    g_class = malloc((size_t)g_n * sizeof *g_class);
    g_latency = calloc((size_t)g_n, sizeof *g_latency);
    int *words = malloc((size_t)g_n * sizeof *words);
    if (!g_class || !g_latency || !words || bench_word_thirds(g_lines, g_n, words, g_class) != 0)
        return 1;
    free(words);
    int rc = 0;
    for (int r = 0; rc == 0 && r < c.repeat; r++) {
        if (c.offline)
            rc |= run_offline(&c, m, tok, ids);
        for (int k = 0; rc == 0 && k < c.n_clients; k++) {
            if (c.inflight)
                rc |= run_batcher(&c, m, ids, c.clients[k], SRV_SCHED_INFLIGHT);
            if (c.batchmode && rc == 0)
                rc |= run_batcher(&c, m, ids, c.clients[k], SRV_SCHED_BATCH);
        }
    }
    td_tok_ids_free(ids, g_n);
    free(ids);
    td_tok_free(tok);
    td_model_free(m);
    for (int i = 0; i < g_n; i++)
        free(g_lines[i]);
    free(g_lines);
    free(g_lens);
    free(g_class);
    free(g_latency);
    return rc ? 1 : 0;
}
