/*
 * load.c - load generator for `transformerd serve`, in one run:
 *
 *   1. offline: `transformerd translate` on the input lines (the engine's
 *      own batching, no HTTP), timed with the model load subtracted (a run
 *      on empty input measures the load);
 *   2. the daemon with --max-batch-size B (dynamic batching), and
 *   3. the same daemon with --max-batch-size 1,
 *      each at every concurrency level (default 1, 8, 64): N keep-alive
 *      clients POST /v1/translate with one line each until every input
 *      line was sent once (or --max-seconds passed);
 *
 * then prints sentences/s, p50/p99 latency and the ratios: daemon vs
 * offline, batched vs --max-batch-size 1. Loopback only (the daemons are
 * started here on 127.0.0.1, port 0). Every wait is bounded.
 *
 *   load --daemon build/transformerd --model DIR --input FILE
 *        [--concurrency 1,8,64] [--threads T] [--batch B] [--requests N]
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "server/client.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct cfg {
    const char *daemon, *model, *input, *log_dir, *device;
    int levels[16], n_levels;
    int threads, batch, requests, batch_delay_ms;
    double max_seconds;
} cfg;

static char **g_lines;
static int g_n_lines;
static char **g_bodies; /* the JSON request of each line */

/* ---- input ------------------------------------------------------------- */

static int read_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int alloc = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if (n == 0)
            continue;
        if (g_n_lines == alloc) {
            alloc = alloc ? 2 * alloc : 256;
            g_lines = realloc(g_lines, (size_t)alloc * sizeof *g_lines);
            if (!g_lines)
                return -1;
        }
        g_lines[g_n_lines++] = strdup(line);
    }
    free(line);
    fclose(f);
    g_bodies = calloc((size_t)g_n_lines, sizeof *g_bodies);
    for (int i = 0; i < g_n_lines; i++) {
        json_t *o = json_pack("{s:s}", "text", g_lines[i]);
        g_bodies[i] = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!g_bodies[i]) {
            fprintf(stderr, "load: line %d is not UTF-8\n", i + 1);
            return -1;
        }
    }
    return g_n_lines > 0 ? 0 : -1;
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

/* ---- HTTP load ----------------------------------------------------------- */

typedef struct level_result {
    int concurrency;
    int sent, ok, errors;
    double seconds;
    long target_tokens;
    double p50_ms, p99_ms;
} level_result;

typedef struct run_state {
    int port;
    int total;            /* requests to send */
    double deadline;
    atomic_int next;      /* next request index */
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

static int run_level(const cfg *c, int port, int conc, level_result *out)
{
    run_state rs;
    memset(&rs, 0, sizeof rs);
    rs.port = port;
    rs.total = c->requests;
    rs.lat = malloc((size_t)rs.total * sizeof *rs.lat);
    if (!rs.lat)
        return -1;
    for (int i = 0; i < rs.total; i++)
        rs.lat[i] = -1;
    pthread_t *th = calloc((size_t)conc, sizeof *th);
    double t0 = now_s();
    rs.deadline = t0 + c->max_seconds;
    for (int i = 0; i < conc; i++)
        pthread_create(&th[i], NULL, client_main, &rs);
    for (int i = 0; i < conc; i++)
        pthread_join(th[i], NULL);
    double wall = now_s() - t0;
    free(th);
    int sent = atomic_load(&rs.next);
    if (sent > rs.total)
        sent = rs.total;
    int ok = 0;
    for (int i = 0; i < rs.total; i++)
        if (rs.lat[i] >= 0)
            rs.lat[ok++] = rs.lat[i];
    qsort(rs.lat, (size_t)ok, sizeof *rs.lat, cmp_double);
    out->concurrency = conc;
    out->sent = sent;
    out->ok = ok;
    out->errors = atomic_load(&rs.errors);
    out->seconds = wall;
    out->target_tokens = atomic_load(&rs.tokens);
    out->p50_ms = ok ? rs.lat[(int)(0.50 * (ok - 1) + 0.5)] * 1e3 : 0;
    out->p99_ms = ok ? rs.lat[(int)(0.99 * (ok - 1) + 0.5)] * 1e3 : 0;
    free(rs.lat);
    return 0;
}

/* Starts a daemon with --max-batch-size mbs, runs every level, stops it. */
static int run_daemon(const cfg *c, int mbs, const char *name, level_result *res)
{
    char th[16], bs[16], dl[16], mq[16], log[1024];
    snprintf(th, sizeof th, "%d", c->threads);
    snprintf(bs, sizeof bs, "%d", mbs);
    snprintf(dl, sizeof dl, "%d", c->batch_delay_ms);
    snprintf(mq, sizeof mq, "%d", 4096);
    snprintf(log, sizeof log, "%s/%s.log", c->log_dir, name);
    const char *args[] = {"--model",       c->model, "--threads", th, "--max-batch-size", bs,
                          "--batch-delay-ms", dl,    "--max-queue", mq, "--max-batch-texts", "1",
                          "--device", c->device, NULL};
    pid_t pid;
    int port = tc_daemon_start(c->daemon, args, log, 120, &pid);
    if (port <= 0) {
        fprintf(stderr, "load: the daemon did not start; see %s\n", log);
        return -1;
    }
    /* warm the connections and the allocator */
    for (int i = 0; i < 8 && i < g_n_lines; i++) {
        tc_resp r;
        if (tc_post_json(port, "/v1/translate", g_bodies[i], &r) != 0 || r.status != 200)
            fprintf(stderr, "load: warm-up request failed (%d)\n", r.status);
        tc_resp_free(&r);
    }
    int rc = 0;
    for (int l = 0; l < c->n_levels && rc == 0; l++) {
        rc = run_level(c, port, c->levels[l], &res[l]);
        const level_result *x = &res[l];
        printf("{\"run\":\"%s\",\"max_batch_size\":%d,\"concurrency\":%d,\"requests\":%d,"
               "\"ok\":%d,\"errors\":%d,\"seconds\":%.3f,\"sentences_per_s\":%.1f,"
               "\"target_tokens_per_s\":%.1f,\"p50_ms\":%.2f,\"p99_ms\":%.2f}\n",
               name, mbs, x->concurrency, x->sent, x->ok, x->errors, x->seconds,
               x->ok / x->seconds, x->target_tokens / x->seconds, x->p50_ms, x->p99_ms);
        fflush(stdout);
    }
    kill(pid, SIGTERM);
    if (tc_daemon_wait(pid, 60) != 0) {
        fprintf(stderr, "load: the daemon did not exit cleanly; see %s\n", log);
        rc = -1;
    }
    return rc;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: load --daemon PATH --model DIR --input FILE [--concurrency 1,8,64]\n"
            "            [--threads T] [--batch B] [--requests N] [--max-seconds S]\n"
            "            [--batch-delay-ms D] [--log-dir DIR] [--device cpu|cuda[:N]]\n");
}

int main(int argc, char **argv)
{
    cfg c = {.log_dir = "/tmp", .device = "cpu", .threads = 0, .batch = 32, .requests = 0, .batch_delay_ms = 5,
             .max_seconds = 60};
    const char *levels = "1,8,64";
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
        else if (!strcmp(a, "--threads"))
            c.threads = atoi(v);
        else if (!strcmp(a, "--batch"))
            c.batch = atoi(v);
        else if (!strcmp(a, "--requests"))
            c.requests = atoi(v);
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
    if (!c.daemon || !c.model || !c.input || c.batch < 1 || c.max_seconds <= 0) {
        usage();
        return 2;
    }
    for (const char *p = levels; *p && c.n_levels < 16;) {
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
    signal(SIGPIPE, SIG_IGN);
    if (read_lines(c.input) != 0) {
        fprintf(stderr, "load: cannot read lines from %s\n", c.input);
        return 1;
    }
    if (c.requests <= 0)
        c.requests = g_n_lines;
    fprintf(stderr, "load: %d input lines, %d requests per level, model %s, threads %d\n",
            g_n_lines, c.requests, c.model, c.threads);

    /* 1. offline, on exactly the requests' lines (each line once when
     * requests == lines) */
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/load-input.txt", c.log_dir);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 1;
    for (int i = 0; i < c.requests; i++)
        fprintf(f, "%s\n", g_lines[i % g_n_lines]);
    fclose(f);
    double t_load = 1e9, t_full = 1e9;
    for (int k = 0; k < 2; k++) {
        double a = run_translate(&c, NULL), b = run_translate(&c, tmp);
        if (a < 0 || b < 0) {
            fprintf(stderr, "load: `%s translate` failed\n", c.daemon);
            return 1;
        }
        t_load = a < t_load ? a : t_load;
        t_full = b < t_full ? b : t_full;
    }
    double t_off = t_full - t_load > 1e-6 ? t_full - t_load : 1e-6;
    double off_sps = c.requests / t_off;
    printf("{\"run\":\"offline\",\"batch\":%d,\"sentences\":%d,\"seconds\":%.3f,"
           "\"load_seconds\":%.3f,\"sentences_per_s\":%.1f}\n",
           c.batch, c.requests, t_off, t_load, off_sps);
    fflush(stdout);

    level_result batched[16], single[16];
    memset(batched, 0, sizeof batched);
    memset(single, 0, sizeof single);
    if (run_daemon(&c, c.batch, "batched", batched) != 0 ||
        run_daemon(&c, 1, "batch1", single) != 0)
        return 1;

    printf("\nmodel %s, %d sentences per level, engine threads %d, beam = model default\n",
           c.model, c.requests, c.threads);
    printf("offline `transformerd translate --batch %d`: %.1f sentences/s\n\n", c.batch,
           off_sps);
    printf("| concurrency | daemon (batch %d) sent/s | p50 ms | p99 ms | batch 1 sent/s | p50 ms "
           "| p99 ms | daemon / offline | batched / batch 1 | errors |\n",
           c.batch);
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    int errors = 0;
    for (int l = 0; l < c.n_levels; l++) {
        const level_result *b = &batched[l], *s = &single[l];
        double bs = b->ok / b->seconds, ss = s->ok / s->seconds;
        printf("| %d | %.1f | %.2f | %.2f | %.1f | %.2f | %.2f | %.2fx | %.2fx | %d |\n",
               b->concurrency, bs, b->p50_ms, b->p99_ms, ss, s->p50_ms, s->p99_ms, bs / off_sps,
               ss > 0 ? bs / ss : 0, b->errors + s->errors);
        errors += b->errors + s->errors + (b->sent - b->ok - b->errors) +
                  (s->sent - s->ok - s->errors);
    }
    return errors ? 1 : 0;
}
