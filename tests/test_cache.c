/*
 * test_cache.c - the translation cache (--cache-bytes, server/service/
 * cache.c) through the daemon: a sentence seen again is answered from the
 * cache, byte for byte as the engine answered it (attention, hypotheses and
 * tokens included); a reload drops the model's entries; the cache stays
 * within its bytes under a random workload, answering as a daemon without a
 * cache does; 32 clients at once get the answers one client gets.
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/client.h"
#include "server/suite.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif

static char g_tmp[256];
static char g_model[512];
static int g_port = -1;    /* --cache-bytes 64M (the default) */
static pid_t g_pid = -1;

static char *answer(int port, const char *json)
{
    tc_resp r;
    ck_assert_int_eq(tc_post_json(port, "/v1/translate", json, &r), 0);
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
    char *b = strdup(r.body);
    tc_resp_free(&r);
    return b;
}

static const char *const k_requests[] = {
    "{\"text\":\"Hello world.\"}",
    "{\"text\":[\"Good morning.\",\"Thank you.\"],\"return_tokens\":true}",
    "{\"text\":\"The house is green.\",\"return_attention\":true}",
    "{\"text\":\"The house is green.\",\"return_attention\":true,\"attention_layers\":[-1],"
    "\"attention_heads\":[0]}",
    "{\"text\":\"Where is the station? It is far.\",\"num_hypotheses\":2,\"beam_size\":2}",
    "{\"text\":\"Hello world.\",\"beam_size\":1}",
    "{\"text\":\"Hello world.\",\"length_penalty\":0.5}",
    "{\"text\":\"Hello world.\",\"max_length\":3}",
};
#define N_REQ (int)(sizeof k_requests / sizeof k_requests[0])

/* Each request twice: the second is answered from the cache (hits grow by
 * its sentences, misses do not), and is the first's bytes. Options that
 * change the result are other entries (the same text with beam 1, another
 * length penalty, a shorter max_length: misses). */
START_TEST(test_cache_exact)
{
    for (int i = 0; i < N_REQ; i++) {
        double h0 = tc_metric(g_port, "transformerd_cache_hits_total");
        double m0 = tc_metric(g_port, "transformerd_cache_misses_total");
        char *a = answer(g_port, k_requests[i]);
        double h1 = tc_metric(g_port, "transformerd_cache_hits_total");
        double m1 = tc_metric(g_port, "transformerd_cache_misses_total");
        char *b = answer(g_port, k_requests[i]);
        double h2 = tc_metric(g_port, "transformerd_cache_hits_total");
        double m2 = tc_metric(g_port, "transformerd_cache_misses_total");
        ck_assert_msg(!strcmp(a, b), "request %d: from the cache\n%s\nnot\n%s", i, b, a);
        ck_assert_msg(h1 == h0 && m1 > m0, "request %d: first a miss (hits %g->%g, misses "
                      "%g->%g)", i, h0, h1, m0, m1);
        ck_assert_msg(h2 - h1 == m1 - m0 && m2 == m1, "request %d: then every sentence a hit "
                      "(hits %g->%g, misses %g->%g)", i, h1, h2, m1, m2);
        free(a);
        free(b);
    }
    ck_assert_double_gt(tc_metric(g_port, "transformerd_cache_bytes"), 0);
    ck_assert_double_gt(tc_metric(g_port, "transformerd_cache_entries"), 0);
}
END_TEST

/* A reload: the old model's entries go with it, and the new one misses. */
START_TEST(test_cache_reload)
{
    char *a = answer(g_port, k_requests[0]);
    char *b = answer(g_port, k_requests[0]); /* a hit */
    ck_assert_str_eq(a, b);
    tc_resp r;
    ck_assert_int_eq(tc_post_json(g_port, "/v1/models/marian_en_de/reload", "", &r), 0);
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
    tc_resp_free(&r);
    /* the old generation is freed once nothing holds it */
    double e = -1;
    for (int i = 0; i < 400 && e != 0; i++) {
        e = tc_metric(g_port, "transformerd_cache_entries");
        if (e != 0)
            tc_sleep_ms(25);
    }
    ck_assert_msg(e == 0, "%g entries after the reload", e);
    double m0 = tc_metric(g_port, "transformerd_cache_misses_total");
    char *c = answer(g_port, k_requests[0]);
    ck_assert_double_gt(tc_metric(g_port, "transformerd_cache_misses_total"), m0);
    ck_assert_str_eq(a, c);
    free(a);
    free(b);
    free(c);
}
END_TEST

static const char *const k_words[] = {"house", "green", "world", "morning", "station",
                                      "coffee", "friend", "water", "city", "book"};

/* A small cache (6 KB) under 300 random requests: its bytes never above
 * the bound, entries evicted, every answer the one of a daemon without a
 * cache. */
START_TEST(test_cache_bound)
{
    const char *a1[] = {"--cache-bytes", "6K", NULL};
    const char *a0[] = {"--cache-bytes", "0", NULL};
    pid_t p1, p0;
    int small = tc_daemon_start_model(TD_DAEMON, g_model, g_tmp, "small", a1, &p1);
    int none = tc_daemon_start_model(TD_DAEMON, g_model, g_tmp, "none", a0, &p0);
    ck_assert(small > 0 && none > 0);
    ck_assert_double_eq(tc_metric(none, "transformerd_cache_hits_total"), -1); /* off: no series */
    srand(7);
    for (int i = 0; i < 300; i++) {
        char json[256];
        snprintf(json, sizeof json, "{\"text\":\"The %s is near the %s.\"%s}",
                 k_words[rand() % 10], k_words[rand() % 4],
                 rand() % 3 == 0 ? ",\"return_attention\":true" : rand() % 2 ? ",\"beam_size\":1"
                                                                             : "");
        char *a = answer(small, json), *b = answer(none, json);
        ck_assert_msg(!strcmp(a, b), "%s:\n%s\nwithout the cache:\n%s", json, a, b);
        free(a);
        free(b);
        double bytes = tc_metric(small, "transformerd_cache_bytes");
        ck_assert_msg(bytes >= 0 && bytes <= 6 * 1024, "%g bytes (bound 6144)", bytes);
    }
    ck_assert_double_gt(tc_metric(small, "transformerd_cache_evictions_total"), 0);
    ck_assert_double_gt(tc_metric(small, "transformerd_cache_hits_total"), 0);
    kill(p1, SIGTERM);
    kill(p0, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(p1, 60), 0);
    ck_assert_int_eq(tc_daemon_wait(p0, 60), 0);
}
END_TEST

typedef struct client {
    int id, failed;
    char *want[N_REQ];
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    for (int k = 0; k < 12; k++) {
        int i = (c->id + k) % N_REQ;
        tc_resp r;
        if (tc_post_json(g_port, "/v1/translate", k_requests[i], &r) != 0 || r.status != 200 ||
            strcmp(r.body, c->want[i]) != 0)
            c->failed++;
        if (r.status)
            tc_resp_free(&r);
    }
    return NULL;
}

/* 32 clients at once over the same requests (hits and misses mixed, entries
 * stored while others are read): each answer is the one a client alone got. */
START_TEST(test_cache_concurrent)
{
    char *want[N_REQ];
    for (int i = 0; i < N_REQ; i++)
        want[i] = answer(g_port, k_requests[i]);
    client c[32];
    pthread_t th[32];
    for (int t = 0; t < 32; t++) {
        c[t] = (client){.id = t};
        memcpy(c[t].want, want, sizeof want);
        ck_assert_int_eq(pthread_create(&th[t], NULL, client_main, &c[t]), 0);
    }
    for (int t = 0; t < 32; t++) {
        pthread_join(th[t], NULL);
        ck_assert_msg(c[t].failed == 0, "client %d: %d answers differ", t, c[t].failed);
    }
    for (int i = 0; i < N_REQ; i++)
        free(want[i]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("cache");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_cache_exact);
    tcase_add_test(tc, test_cache_concurrent);
    tcase_add_test(tc, test_cache_reload);
    tcase_add_test(tc, test_cache_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_cache_test.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    snprintf(g_model, sizeof g_model, "%s/text/marian_en_de", TD_TEST_DATA);
    const char *args[] = {NULL};
    g_port = tc_daemon_start_model(TD_DAEMON, g_model, g_tmp, "main", args, &g_pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s/main.log\n", g_tmp);
        return 1;
    }
    return tc_run_suite(suite(), g_pid, g_tmp);
}
