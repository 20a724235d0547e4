/*
 * test_request_alloc.c - the daemon's own allocations per request: the
 * daemon (srv_main, the real one) runs in a thread of this process, its
 * sources compiled with tests/alloc_count.h so that every malloc, calloc,
 * realloc, strdup and strndup of server/ is counted; the test's thread
 * sends requests over loopback and its own allocations are not counted.
 *
 * A native request of one short text costs at most 4 allocations of the
 * daemon's code (the connection's watchdog record, the transport's request,
 * its body, the call's arena): everything else the request holds lives in
 * the arena. The translation cache is off: a hit copies the stored result
 * (its hypotheses and their tokens), as the engine allocates a fresh one.
 * The libraries' allocations (jansson's JSON, libmicrohttpd's connection)
 * and the engine's (its results; test_alloc holds those to no allocation
 * per step) are not the daemon's code and are not counted.
 */
#define _DEFAULT_SOURCE /* usleep, strndup */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/client.h"
#include "serve.h"

/* this file's own calls are the real ones (the system headers declared
 * the counters under their names: alloc_count.h came first) */
#undef malloc
#undef calloc
#undef realloc
#undef strdup
#undef strndup
void *malloc(size_t n);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t n);
char *strdup(const char *s);
char *strndup(const char *s, size_t n);

static atomic_long g_allocs;
static atomic_int g_counting;
static _Thread_local int t_client; /* the test's thread: not counted */

int main(void);

/* TD_ALLOC_TRACE=1 in the environment: each counted call's caller (for
 * addr2line -f -e test_request_alloc) on stdout. */
#define count() count_from(__builtin_return_address(0))
static void count_from(void *caller)
{
    if (atomic_load(&g_counting) && !t_client) {
        atomic_fetch_add(&g_allocs, 1);
        if (getenv("TD_ALLOC_TRACE"))
            printf("alloc from main%+td\n", (char *)caller - (char *)(void *)main);
    }
}

void *tc_count_malloc(size_t n)
{
    count();
    return malloc(n);
}

void *tc_count_calloc(size_t n, size_t size)
{
    count();
    return calloc(n, size);
}

void *tc_count_realloc(void *p, size_t n)
{
    count();
    return realloc(p, n);
}

char *tc_count_strdup(const char *s)
{
    count();
    return strdup(s);
}

char *tc_count_strndup(const char *s, size_t n)
{
    count();
    return strndup(s, n);
}

static char g_log[] = "/tmp/td-request-alloc.XXXXXX";
static pthread_t g_daemon;
static int g_port;

static void *daemon_main(void *arg)
{
    (void)arg;
    char *argv[] = {"--model", TD_TEST_DATA "/text/marian_en_de",
                    "--host", "127.0.0.1", "--port", "0", "--threads", "1", "--workers", "1",
                    "--http-threads", "1", NULL};
    return (void *)(intptr_t)srv_main((int)(sizeof argv / sizeof argv[0]) - 1, argv);
}

/* The daemon's port once it logged "ready:", or 0. */
static int wait_ready(void)
{
    for (int i = 0; i < 600; i++) {
        FILE *f = fopen(g_log, "r");
        char line[512];
        int port = 0, ready = 0;
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "listening on http://127.0.0.1:");
            if (p)
                port = atoi(p + strlen("listening on http://127.0.0.1:"));
            ready |= strstr(line, "ready:") != NULL;
        }
        if (f)
            fclose(f);
        if (port && ready)
            return port;
        usleep(100 * 1000);
    }
    return 0;
}

static void setup(void)
{
    t_client = 1;
    /* the request path's own allocations: a cache hit would add its copy
     * of the result (as the engine allocates one), so the cache is off */
    setenv("TRANSFORMERD_CACHE_BYTES", "0", 1);
    int fd = mkstemp(g_log);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
    close(fd);
    ck_assert_int_eq(pthread_create(&g_daemon, NULL, daemon_main, NULL), 0);
    g_port = wait_ready();
    ck_assert_msg(g_port > 0, "the daemon did not get ready (log: %s)", g_log);
}

static void teardown(void)
{
    /* the daemon's handler takes it (this thread does not block it) */
    kill(getpid(), SIGTERM);
    void *rc = NULL;
    pthread_join(g_daemon, &rc);
    ck_assert_int_eq((int)(intptr_t)rc, 0);
    unlink(g_log);
}

/* The daemon's allocations of one POST: from before it is sent until the
 * daemon completed it (its access-log line, the last thing it does). */
static long one_request(const char *path, const char *body, int want_status)
{
    tc_resp r;
    atomic_store(&g_allocs, 0);
    atomic_store(&g_counting, 1);
    ck_assert_int_eq(tc_post_json(g_port, path, body, &r), 0);
    ck_assert_msg(r.status == want_status, "%s: %d %s", path, r.status, r.body);
    tc_resp_free(&r);
    /* the completion callback runs after the answer is on the wire: give
     * it the moment it needs (one request at a time, nothing else runs) */
    usleep(200 * 1000);
    atomic_store(&g_counting, 0);
    return atomic_load(&g_allocs);
}

START_TEST(test_native_four)
{
    const char *body = "{\"text\":\"Hello world.\"}";
    one_request("/v1/translate", body, 200); /* first use: metrics series, caches */
    for (int i = 0; i < 5; i++) {
        long n = one_request("/v1/translate", body, 200);
        printf("native request %d: %ld allocations of the daemon's code\n", i, n);
        ck_assert_msg(n <= 4, "a native request made %ld allocations (at most 4)", n);
    }
}
END_TEST

START_TEST(test_native_list_and_options)
{
    const char *body = "{\"text\":[\"Hello world.\",\"Good morning.\",\"Yes.\"],"
                       "\"return_tokens\":true,\"beam_size\":2,\"num_hypotheses\":2}";
    one_request("/v1/translate", body, 200);
    long n = one_request("/v1/translate", body, 200);
    printf("native request of 3 texts with tokens and hypotheses: %ld allocations\n", n);
    ck_assert_msg(n <= 4, "%ld allocations (at most 4)", n);
}
END_TEST

START_TEST(test_errors_cheap)
{
    long n = one_request("/v1/translate", "{\"text\":", 400);
    printf("an invalid body: %ld allocations\n", n);
    ck_assert_msg(n <= 4, "%ld allocations (at most 4)", n);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("request_alloc");
    TCase *tc = tcase_create("native");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_native_four);
    tcase_add_test(tc, test_native_list_and_options);
    tcase_add_test(tc, test_errors_cheap);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
