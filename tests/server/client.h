/*
 * client.h - a small blocking HTTP/1.1 client and daemon launcher for the
 * server tests. Loopback only; every wait has a timeout.
 */
#ifndef TD_TEST_CLIENT_H
#define TD_TEST_CLIENT_H

#include <stddef.h>
#include <sys/types.h>

typedef struct tc_resp {
    int status;        /* 0 when the exchange failed */
    char *headers;     /* raw header block, malloc'd */
    char *body;        /* malloc'd, NUL-terminated */
    size_t body_len;
} tc_resp;

void tc_resp_free(tc_resp *r);

/* One request on a fresh connection (Connection: close). extra_headers is
 * "Name: value\r\n..." or NULL. */
int tc_request(int port, const char *method, const char *path, const char *extra_headers,
               const char *body, size_t body_len, tc_resp *out);
/* POST with Content-Type: application/json. */
int tc_post_json(int port, const char *path, const char *json, tc_resp *out);

/* Send and receive timeout of every connection opened after it is set
 * (seconds; default 60), times tc_slowness(). A test whose exchanges are
 * long raises it. */
extern int tc_io_timeout_s;

/* How much slower than a quiet machine's optimised build this run may be:
 * the build's factor (3 under AddressSanitizer, 5 under ThreadSanitizer, 1
 * otherwise; from the compiler's __SANITIZE_*__) times the machine's load
 * per core, measured now (the 1-minute load average over the online CPUs,
 * at least 1), capped at 20. Every deadline a test gives a daemon or a
 * socket by default is a quiet machine's times this, never a fixed bet:
 * tc_daemon_spawn starts each daemon with TRANSFORMERD_REQUEST_TIMEOUT_S
 * 60 x this (a test's own --request-timeout-s wins). */
int tc_slowness(void);

/* Keep-alive: open, then send requests one after another on the socket. */
int tc_connect(int port);
int tc_request_on(int fd, const char *method, const char *path, tc_resp *out);
/* Reads one response from fd. */
int tc_read_on(int fd, tc_resp *out);

/* The value of a response header (case-insensitive name) copied into buf,
 * or NULL. */
const char *tc_header(const tc_resp *r, const char *name, char *buf, size_t n);

/* The daemon's Prometheus text (GET /metrics), malloc'd (the caller frees
 * it), or NULL when the exchange failed or did not answer 200. */
char *tc_metrics_text(int port);
/* The value of one sample of Prometheus text: the line that is series (a
 * metric's name, or its name and labels exactly as the daemon writes them:
 * name{a="x",b="y"}) followed by a space; -1 when there is none. */
double tc_metric_in(const char *text, const char *series);
/* The sum of the samples of the metric name, whatever their labels; -1 when
 * there is none. */
double tc_metric_sum_in(const char *text, const char *name);
/* tc_metric_in and tc_metric_sum_in of port's /metrics now; -1 when the
 * exchange failed. */
double tc_metric(int port, const char *series);
double tc_metric_sum(int port, const char *name);

/* Starts `daemon serve --port 0 ARGS...` with stderr to log_path and waits
 * (up to timeout_s) until it reports ready; returns its port, or -1. */
int tc_daemon_start(const char *daemon, const char *const *args, const char *log_path,
                    double timeout_s, pid_t *pid);
/* Starts `daemon serve --port 0 ARGS...` with stderr to log_path and
 * returns its pid (or -1) at once. The daemon is killed when the calling
 * thread exits (PR_SET_PDEATHSIG), so no daemon outlives its test. */
pid_t tc_daemon_spawn(const char *daemon, const char *const *args, const char *log_path);
/* 1 when a line of the file holds needle. */
int tc_log_has(const char *log_path, const char *needle);
/* tc_daemon_start of `daemon serve --model model --threads 1 ARGS...`
 * (args NULL-terminated), its stderr in tmpdir/NAME.log; the daemon tests'
 * way to start one. */
int tc_daemon_start_model(const char *daemon, const char *model, const char *tmpdir,
                          const char *name, const char *const *args, pid_t *pid);
/* tc_daemon_start_model of both bundled models: en_de (models/en-de) as
 * "en-de" and the de-en beside it as "de-en", with args. */
int tc_daemon_start_both(const char *daemon, const char *en_de, const char *tmpdir,
                         const char *name, const char *const *args, pid_t *pid);
/* Waits up to timeout_s for pid to exit; returns its exit status, or -1
 * (killed with SIGKILL) on timeout or abnormal exit. */
int tc_daemon_wait(pid_t pid, double timeout_s);

/* CLOCK_MONOTONIC seconds; sleeps ms milliseconds. */
double tc_now(void);
void tc_sleep_ms(int ms);


/* A multipart/form-data body (boundary TC_BOUNDARY) of n name=value fields
 * kv[2i], kv[2i+1], plus a "file" part named fname with flen bytes of fdata
 * when fname is not NULL, into out (cap bytes). Returns its length. */
#define TC_BOUNDARY "XyZzY0123"
#define TC_MULTIPART "multipart/form-data; boundary=" TC_BOUNDARY
size_t tc_multipart(char *out, size_t cap, const char *const *kv, int n, const char *fname,
                    const char *fdata, size_t flen);

#endif
