/*
 * test_file_parts.c - a long file shares the model with the requests made
 * while it is translated (server/api/translate.c's parts, the batcher's
 * fair queue), on the bundled model with one worker, slowed by
 * --test-step-delay-ms so that the file is still running when the others
 * come:
 *   - a file of more sentences than --max-queue (8 here) is translated
 *     whole: it is bounded by --max-file-texts, not by the shared queue;
 *   - while it runs, the queue never holds more than --file-queue-texts (4)
 *     of its sentences;
 *   - a short /translate request made while the file is translating is
 *     answered (200, not 429) before the file's answer comes: checked by
 *     the order in which the two answers arrive, never by a time;
 *   - sizes with suffixes: --max-body-bytes 2K holds /translate's bodies
 *     (413 at 2,049 bytes), --max-file-bytes 64K /translate_file's (the
 *     5 KB file above passes, 65,537 bytes are 413); a size that is no
 *     size, or out of range, stops the daemon at its start;
 *   - a file whose answer's estimate (its sentences' max_length 256 tokens
 *     each) passes --max-response-bytes 1M + --max-file-bytes is refused
 *     400 before it is queued (the documents' entry point's jobs hook);
 *     the long file above is within it;
 *   - a file's finished sentences go into the translation cache: the same
 *     sentences in a later file are hits, counted by /metrics.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/client.h"
#include "server/suite.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif

#define FILE_LINES 96

static char g_tmp[256];
static int g_port = -1;
static atomic_int g_seq;    /* answers so far, in the order they came */
static atomic_int g_file_at; /* the file's answer's place in that order (0: not yet) */
static int g_file_status;

static char g_body[1 << 16];
static size_t g_body_n;

static void *file_main(void *arg)
{
    (void)arg;
    char h[128];
    snprintf(h, sizeof h, "Content-Type: %s\r\n", TC_MULTIPART);
    tc_resp r = {0};
    int rc = tc_request(g_port, "POST", "/translate_file", h, g_body, g_body_n, &r);
    g_file_status = rc == 0 ? r.status : -1;
    atomic_store(&g_file_at, atomic_fetch_add(&g_seq, 1) + 1);
    tc_resp_free(&r);
    return NULL;
}

START_TEST(test_short_request_first)
{
    static char lines[FILE_LINES * 64];
    size_t n = 0;
    for (int i = 0; i < FILE_LINES; i++)
        n += (size_t)snprintf(lines + n, sizeof lines - n,
                              "The window of room %d is open and the door is closed.\n", i + 1);
    const char *kv[] = {"source", "en", "target", "de"};
    g_body_n = tc_multipart(g_body, sizeof g_body, kv, 2, "long.txt", lines, n);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, file_main, NULL), 0);
    /* the file is translating once decoding steps run */
    int polls = 0;
    while (tc_metric_sum(g_port, "transformerd_decode_steps_total") <= 0 && !atomic_load(&g_file_at)) {
        ck_assert_int_lt(polls++, 6000 * tc_slowness());
        tc_sleep_ms(10);
    }
    ck_assert_msg(!atomic_load(&g_file_at), "the file was answered before it ran: %d",
                  g_file_status);
    /* the file's sentences in the queue: at most --file-queue-texts */
    double depth = tc_metric_sum(g_port, "transformerd_queue_depth");
    ck_assert_msg(depth >= 0 && depth <= 4, "the queue holds %g of the file's sentences", depth);
    tc_resp r = {0};
    ck_assert_int_eq(tc_post_json(g_port, "/translate",
                                  "{\"q\":\"Good morning.\",\"source\":\"en\",\"target\":\"de\"}",
                                  &r),
                     0);
    int short_at = atomic_fetch_add(&g_seq, 1) + 1;
    ck_assert_msg(r.status == 200, "the short request: %d %s", r.status, r.body);
    tc_resp_free(&r);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_msg(g_file_status == 200, "the file: %d", g_file_status);
    ck_assert_msg(short_at < atomic_load(&g_file_at),
                  "the short request was answered after the file (answers %d and %d)", short_at,
                  atomic_load(&g_file_at));
}
END_TEST

/* POST /translate_file of a .txt of text; its status. */
static int post_file(const char *name, const char *text, size_t n)
{
    static char body[1 << 15];
    const char *kv[] = {"source", "en", "target", "de"};
    size_t bn = tc_multipart(body, sizeof body, kv, 2, name, text, n);
    char h[128];
    snprintf(h, sizeof h, "Content-Type: %s\r\n", TC_MULTIPART);
    tc_resp r = {0};
    int rc = tc_request(g_port, "POST", "/translate_file", h, body, bn, &r);
    int st = rc == 0 ? r.status : -1;
    tc_resp_free(&r);
    return st;
}

/* A file whose sentences past its first part (--file-queue-texts 4 not in
 * the cache) are all in the cache: they finish at the submit like the
 * first part's (they were left unfinished, and the answer never came);
 * the first file's 6 sentences are answered from the cache the second
 * time (a file's finished sentences go into it). */
START_TEST(test_cached_tail)
{
    char a[1024], b[2048];
    size_t na = 0, nb = 0;
    for (int i = 0; i < 6; i++)
        na += (size_t)snprintf(a + na, sizeof a - na, "The red car number %d is parked outside.\n",
                               i + 1);
    ck_assert_int_eq(post_file("first.txt", a, na), 200);
    for (int i = 0; i < 4; i++)
        nb += (size_t)snprintf(b + nb, sizeof b - nb, "The blue house number %d has a garden.\n",
                               i + 1);
    memcpy(b + nb, a, na);
    nb += na;
    double hits = tc_metric(g_port, "transformerd_cache_hits_total");
    ck_assert_int_eq(post_file("second.txt", b, nb), 200);
    double now = tc_metric(g_port, "transformerd_cache_hits_total");
    ck_assert_msg(hits >= 0 && now - hits >= 6, "cache hits %g then %g", hits, now);
}
END_TEST

/* 600 one-word sentences: about 600 x 2,112 bytes estimated, over 1M + 64K. */
START_TEST(test_response_estimate)
{
    static char text[600 * 4 + 1];
    size_t n = 0;
    for (int i = 0; i < 600; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "Hi.\n");
    static char body[1 << 14];
    const char *kv[] = {"source", "en", "target", "de"};
    size_t bn = tc_multipart(body, sizeof body, kv, 2, "many.txt", text, n);
    char h[128];
    snprintf(h, sizeof h, "Content-Type: %s\r\n", TC_MULTIPART);
    tc_resp r = {0};
    ck_assert_int_eq(tc_request(g_port, "POST", "/translate_file", h, body, bn, &r), 0);
    ck_assert_msg(r.status == 400 && strstr(r.body, "--max-response-bytes + --max-file-bytes") &&
                      strstr(r.body, "600 texts"),
                  "%d %s", r.status, r.body);
    tc_resp_free(&r);
}
END_TEST

/* A JSON /translate body of exactly n bytes. */
static int translate_of_size(size_t n)
{
    char *b = malloc(n + 1);
    const char *head = "{\"source\":\"en\",\"target\":\"de\",\"q\":\"", *tail = "\"}";
    size_t h = strlen(head), t = strlen(tail);
    memcpy(b, head, h);
    memset(b + h, 'a', n - h - t);
    memcpy(b + n - t, tail, t + 1);
    tc_resp r = {0};
    ck_assert_int_eq(tc_post_json(g_port, "/translate", b, &r), 0);
    int st = r.status;
    tc_resp_free(&r);
    free(b);
    return st;
}

START_TEST(test_size_suffixes)
{
    ck_assert_int_eq(translate_of_size(2049), 413);
    ck_assert_int_ne(translate_of_size(2048), 413);
    /* an upload of 65,537 bytes against --max-file-bytes 64K */
    static char big[70000];
    const char *kv[] = {"source", "en", "target", "de"};
    static char data[65536];
    memset(data, 'x', sizeof data);
    size_t n = tc_multipart(big, sizeof big, kv, 2, "big.txt", data, sizeof data);
    ck_assert_uint_gt(n, 65536);
    char h[128];
    snprintf(h, sizeof h, "Content-Type: %s\r\n", TC_MULTIPART);
    tc_resp r = {0};
    ck_assert_int_eq(tc_request(g_port, "POST", "/translate_file", h, big, n, &r), 0);
    ck_assert_msg(r.status == 413 && strstr(r.body, "65536 bytes"), "%d %s", r.status, r.body);
    tc_resp_free(&r);
    /* not a size, or past the option's range: refused at the start */
    const char *const bad[][2] = {{"--max-body-bytes", "2X"},
                                  {"--max-file-bytes", "17G"},
                                  {"--max-files-bytes", "0"},
                                  {"--max-response-bytes", "1.5Q"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {bad[i][0], bad[i][1], NULL};
        char log[400];
        snprintf(log, sizeof log, "%s/bad%zu.log", g_tmp, i);
        pid_t pid = tc_daemon_spawn(TD_DAEMON, args, log);
        ck_assert_int_gt(pid, 0);
        ck_assert_msg(tc_daemon_wait(pid, 60) != 0, "%s %s was taken", bad[i][0], bad[i][1]);
        ck_assert_msg(tc_log_has(log, "expected bytes"), "%s %s: no message", bad[i][0],
                      bad[i][1]);
    }
}
END_TEST

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_file_parts.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    tc_io_timeout_s = 600;
    /* a file whose later parts never went out answers 504 at its deadline */
    char deadline[32];
    snprintf(deadline, sizeof deadline, "%d", 120 * tc_slowness());
    const char *args[] = {"--workers",          "1", "--max-queue",          "8",
                          "--max-batch-texts",  "8", "--file-queue-texts",   "4",
                          "--test-step-delay-ms", "5", "--max-body-bytes", "2K",
                          "--max-file-bytes", "64K", "--file-timeout-s", deadline,
                          "--max-response-bytes", "1M", NULL};
    pid_t pid;
    g_port = tc_daemon_start_model(TD_DAEMON, TD_BUNDLED_MODEL, g_tmp, "parts", args, &pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s\n", g_tmp);
        return 1;
    }
    Suite *s = suite_create("file_parts");
    TCase *tc = tcase_create("parts");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_short_request_first);
    tcase_add_test(tc, test_size_suffixes);
    tcase_add_test(tc, test_cached_tail);
    tcase_add_test(tc, test_response_estimate);
    suite_add_tcase(s, tc);
    return tc_run_suite(s, pid, g_tmp);
}
