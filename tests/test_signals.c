/*
 * test_signals.c - SIGTERM, SIGINT and SIGHUP at the moments the main thread
 * is not waiting for them (server/signals.h): during start-up, between
 * listening and ready, and during the drain. A thread that OpenBLAS starts
 * before main() blocks no signal; when the main thread was busy the kernel
 * gave the signal to that thread, whose default action killed the daemon
 * (exit 129 for SIGHUP, 143 for SIGTERM) with every request in flight.
 *
 * Start-up: the bundled model (its workers' scratch pre-touched takes a
 * while) and a signal sent as soon as the daemon listens; whether it came
 * before ready is read from the daemon's own log, and the start is tried
 * again (at most 10 times) until one did. No time is asserted: every wait
 * counts lines of the log or answers, up to a bound only a broken daemon
 * reaches.
 */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/client.h"
#include "server/suite.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif
#ifndef TD_BUNDLED_MODEL
#error "TD_BUNDLED_MODEL (models/en-de) must be defined"
#endif

#define WAIT_S 120.0

static char g_tmp[256];

/* Waits until the log holds needle; 0, or -1 when the daemon exited first
 * or the bound passed. */
static int wait_log(const char *log, const char *needle, pid_t pid)
{
    for (double end = tc_now() + WAIT_S; tc_now() < end;) {
        if (tc_log_has(log, needle))
            return 0;
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return -1;
        tc_sleep_ms(1);
    }
    return -1;
}

static int log_port(const char *log)
{
    FILE *f = fopen(log, "r");
    char line[2048];
    int port = -1;
    const char *key = "listening on http://127.0.0.1:";
    while (f && fgets(line, sizeof line, f)) {
        const char *q = strstr(line, key);
        if (q)
            port = atoi(q + strlen(key));
    }
    if (f)
        fclose(f);
    return port;
}

/* Starts the daemon, sends sig as soon as it listens, and checks the
 * outcome: SIGTERM/SIGINT stop it with status 0; after SIGHUP it becomes
 * ready, answers, and (when the signal came during start-up) reloads every
 * model. Returns 1 when the signal came during start-up. */
static int signal_at_startup(int sig, int attempt)
{
    char log[512];
    snprintf(log, sizeof log, "%s/startup_%d_%d.log", g_tmp, sig, attempt);
    const char *args[] = {"--model", TD_BUNDLED_MODEL, "--threads", "1", NULL};
    pid_t pid = tc_daemon_spawn(TD_DAEMON, args, log);
    ck_assert_int_gt(pid, 0);
    ck_assert_msg(wait_log(log, "transformerd: listening on", pid) == 0,
                  "the daemon did not listen; see %s", log);
    ck_assert_int_eq(kill(pid, sig), 0);
    if (sig != SIGHUP) {
        int st = tc_daemon_wait(pid, WAIT_S);
        ck_assert_msg(st == 0, "%s at start-up: exit %d (-1: killed by a signal); see %s",
                      strsignal(sig), st, log);
        ck_assert(tc_log_has(log, "transformerd: stopped"));
        return tc_log_has(log, "during start-up: stopping");
    }
    ck_assert_msg(wait_log(log, "transformerd: ready", pid) == 0,
                  "SIGHUP at start-up: the daemon never became ready; see %s", log);
    int early = tc_log_has(log, "SIGHUP during start-up");
    /* the reload it asked for, once ready (either way: a SIGHUP after
     * ready reloads too) */
    ck_assert_msg(wait_log(log, "transformerd: SIGHUP: ", pid) == 0, "no reload; see %s", log);
    tc_resp r;
    ck_assert_int_eq(tc_request(log_port(log), "GET", "/health/ready", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    ck_assert_int_eq(tc_daemon_wait(pid, WAIT_S), 0);
    return early;
}

static void startup_case(int sig)
{
    int early = 0;
    for (int attempt = 0; attempt < 10 && !early; attempt++)
        early = signal_at_startup(sig, attempt);
    ck_assert_msg(early, "%s never came between listening and ready in 10 starts",
                  strsignal(sig));
}

START_TEST(test_sighup_at_startup)
{
    startup_case(SIGHUP);
}
END_TEST

START_TEST(test_sigterm_at_startup)
{
    startup_case(SIGTERM);
}
END_TEST

START_TEST(test_sigint_at_startup)
{
    startup_case(SIGINT);
}
END_TEST

typedef struct long_req {
    int port;
    tc_resp r;
} long_req;

static void *long_main(void *p)
{
    long_req *q = p;
    tc_post_json(q->port, "/v1/translate",
                 "{\"text\":\"Hello world\",\"max_length\":128,\"beam_size\":4}", &q->r);
    return NULL;
}

/* The daemon's descriptors that are epoll instances. */
static int count_epoll_fds(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot list %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[320], to[256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t k = readlink(path, to, sizeof to - 1);
        if (k > 0) {
            to[k] = 0;
            n += strstr(to, "eventpoll") != NULL;
        }
    }
    closedir(d);
    return n;
}

/* Signals during the drain: a request still running, SIGTERM, then SIGHUP,
 * SIGINT and SIGTERM again once the daemon drains. The request is answered
 * and the daemon exits 0. */
START_TEST(test_signals_during_drain)
{
    char model[512], log[512];
    snprintf(model, sizeof model, "%s/text/marian_en_de", TD_TEST_DATA);
    snprintf(log, sizeof log, "%s/drain.log", g_tmp);
    const char *args[] = {"--model", model, "--threads", "1", "--workers", "1",
                          "--test-step-delay-ms", "20", NULL};
    pid_t pid;
    int port = tc_daemon_start(TD_DAEMON, args, log, WAIT_S, &pid);
    ck_assert_int_gt(port, 0);
    long_req q = {.port = port};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, long_main, &q), 0);
    double rows = 0;
    for (double end = tc_now() + WAIT_S; tc_now() < end && !(rows > 0);) {
        rows = tc_metric(port, "transformerd_running_rows{model=\"marian_en_de\"}");
        if (!(rows > 0))
            tc_sleep_ms(5);
    }
    ck_assert_msg(rows > 0, "the request never ran");
    /* libmicrohttpd 0.9.75 quiescing epoll pool threads may abort the
     * process (docs/decisions.md, "poll(), not epoll"): no epoll instance */
    ck_assert_msg(count_epoll_fds(pid) == 0, "the daemon has an epoll descriptor");
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    ck_assert_int_eq(wait_log(log, "SIGTERM: draining", pid), 0);
    int more[] = {SIGHUP, SIGINT, SIGTERM};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(kill(pid, more[i]), 0);
    pthread_join(th, NULL);
    ck_assert_msg(q.r.status == 200, "the request in flight: %d %s", q.r.status,
                  q.r.body ? q.r.body : "");
    tc_resp_free(&q.r);
    int st = tc_daemon_wait(pid, WAIT_S);
    ck_assert_msg(st == 0, "exit %d (-1: killed by a signal); see %s", st, log);
}
END_TEST

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_signals_test.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    /* the daemons get OpenBLAS's own threads, which the fault needs (ctest
     * runs the unit tests with OPENBLAS_NUM_THREADS=1) */
    setenv("OPENBLAS_NUM_THREADS", "4", 1);
    Suite *s = suite_create("signals");
    TCase *tc = tcase_create("signals");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_sighup_at_startup);
    tcase_add_test(tc, test_sigterm_at_startup);
    tcase_add_test(tc, test_sigint_at_startup);
    tcase_add_test(tc, test_signals_during_drain);
    suite_add_tcase(s, tc);
    return tc_run_suite(s, -1, g_tmp); /* each test starts and stops its daemons */
}
