/*
 * test_stream.c - streamed answers of POST /v1/translate ("stream": true,
 * Accept: text/event-stream or application/x-ndjson) on the bundled model:
 * one event a finished sentence, then the whole answer exactly as the
 * request without "stream" answers it; events out before the request
 * completes (seen by the daemon's own running rows, not by a clock); a
 * client that leaves mid-stream frees its rows; errors before the first
 * byte as usual, after it as the stream's last event.
 */
#define _DEFAULT_SOURCE /* strndup, strcasestr */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "server/client.h"
#include "server/suite.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif

static char g_tmp[256];
static int g_port = -1;
static pid_t g_pid = -1;

/* A chunked body (Transfer-Encoding: chunked) put back together; malloc'd. */
static char *dechunk(const char *b, size_t n, size_t *out_len)
{
    char *out = malloc(n + 1);
    size_t k = 0;
    const char *p = b, *end = b + n;
    while (out && p < end) {
        char *e;
        unsigned long len = strtoul(p, &e, 16);
        const char *data = strstr(e, "\r\n");
        if (!data || len == 0)
            break;
        data += 2;
        if (data + len > end)
            len = (unsigned long)(end - data);
        memcpy(out + k, data, len);
        k += len;
        p = data + len + 2;
    }
    if (out)
        out[k] = 0;
    *out_len = k;
    return out;
}

/* POST /v1/translate with extra headers; the body (dechunked when it was). */
static int translate(const char *headers, const char *json, tc_resp *r)
{
    char h[512];
    snprintf(h, sizeof h, "Content-Type: application/json\r\n%s", headers ? headers : "");
    if (tc_request(g_port, "POST", "/v1/translate", h, json, strlen(json), r) != 0)
        return -1;
    char te[64];
    if (tc_header(r, "Transfer-Encoding", te, sizeof te) && strstr(te, "chunked")) {
        size_t n;
        char *b = dechunk(r->body, r->body_len, &n);
        free(r->body);
        r->body = b;
        r->body_len = n;
    }
    return 0;
}

/* The events of a streamed body: names[i] and datas[i] (malloc'd), at most
 * max; returns how many. SSE or NDJSON. */
static int events(const char *body, int ndjson, char **names, char **datas, int max)
{
    int n = 0;
    const char *p = body;
    while (*p && n < max) {
        if (ndjson) {
            const char *nl = strchr(p, '\n');
            if (!nl)
                break;
            json_error_t je;
            json_t *o = json_loadb(p, (size_t)(nl - p), 0, &je);
            ck_assert_msg(o && json_is_string(json_object_get(o, "event")) &&
                              json_object_get(o, "data") && json_object_size(o) == 2,
                          "not an event line: %.*s", (int)(nl - p), p);
            names[n] = strdup(json_string_value(json_object_get(o, "event")));
            datas[n] = json_dumps(json_object_get(o, "data"),
                                  JSON_COMPACT | JSON_REAL_PRECISION(9) | JSON_ENCODE_ANY);
            json_decref(o);
            n++;
            p = nl + 1;
        } else {
            ck_assert_msg(!strncmp(p, "event: ", 7), "not an SSE event: %.60s", p);
            const char *nl = strchr(p, '\n');
            ck_assert_ptr_nonnull(nl);
            names[n] = strndup(p + 7, (size_t)(nl - p - 7));
            ck_assert_msg(!strncmp(nl + 1, "data: ", 6), "no data line: %.60s", nl + 1);
            const char *d = nl + 7, *dend = strstr(d, "\n\n");
            ck_assert_ptr_nonnull(dend);
            datas[n] = strndup(d, (size_t)(dend - d));
            n++;
            p = dend + 2;
        }
    }
    return n;
}

static void free_events(char **names, char **datas, int n)
{
    for (int i = 0; i < n; i++) {
        free(names[i]);
        free(datas[i]);
    }
}

static const char *const k_sentences[] = {
    "Hello world.", "How are you today?", "The weather is nice.", "Good morning.",
    "I would like a cup of coffee, please.", "Where is the station?", "Thank you.",
    "The house is green and very old.", "We are going home now!", "Is it far from here?",
};

/* Text i of request q: 0 to 3 sentences (0: an empty text). */
static void make_text(int q, int i, char *out, size_t n)
{
    int ns = (q * 7 + i * 3) % 4, at = 0;
    out[0] = 0;
    for (int s = 0; s < ns; s++)
        at += snprintf(out + at, n - (size_t)at, "%s%s", s ? " " : "",
                       k_sentences[(q * 5 + i * 3 + s) % 10]);
}

static const char *const k_options[] = {
    "",
    ",\"beam_size\":1",
    ",\"return_tokens\":true",
    ",\"num_hypotheses\":2,\"beam_size\":2",
    ",\"return_attention\":true,\"attention_layers\":[-1],\"attention_heads\":[0,2]",
    ",\"split_sentences\":false",
    ",\"length_penalty\":0.6,\"max_length\":40",
    ",\"return_tokens\":true,\"num_hypotheses\":2",
    ",\"beam_size\":2,\"return_attention\":true",
    ",\"beam_size\":3",
};

/* 10 requests of 5 texts (50 texts), each with its options: the streamed
 * answer's last event is the plain answer, byte for byte (SSE and NDJSON,
 * by "stream" and by Accept); one event a sentence that ran, each the
 * sentence's own translation with its indexes, and for a text of one job
 * that text's translation as the answer has it. */
START_TEST(test_stream_equals_answer)
{
    for (int q = 0; q < 10; q++) {
        char texts[2048] = "", t[512];
        int at = 0;
        for (int i = 0; i < 5; i++) {
            make_text(q, i, t, sizeof t);
            at += snprintf(texts + at, sizeof texts - (size_t)at, "%s\"%s\"", i ? "," : "", t);
        }
        char plain[4096], streamed[4096];
        snprintf(plain, sizeof plain, "{\"text\":[%s]%s}", texts, k_options[q]);
        snprintf(streamed, sizeof streamed, "{\"text\":[%s]%s,\"stream\":true}", texts,
                 k_options[q]);
        tc_resp a, b;
        ck_assert_int_eq(translate(NULL, plain, &a), 0);
        ck_assert_msg(a.status == 200, "%d %s", a.status, a.body);
        int ndjson = q % 2;
        ck_assert_int_eq(translate(ndjson ? "Accept: application/x-ndjson\r\n" : NULL,
                                   streamed, &b), 0);
        ck_assert_msg(b.status == 200, "%d %s", b.status, b.body);
        char ct[128];
        ck_assert_ptr_nonnull(tc_header(&b, "Content-Type", ct, sizeof ct));
        ck_assert_str_eq(ct, ndjson ? "application/x-ndjson" : "text/event-stream");
        char *names[64], *datas[64];
        int n = events(b.body, ndjson, names, datas, 64);
        ck_assert_int_ge(n, 1);
        ck_assert_str_eq(names[n - 1], "done");
        ck_assert_msg(!strcmp(datas[n - 1], a.body), "request %d: the last event\n%s\nis not "
                      "the answer\n%s", q, datas[n - 1], a.body);
        json_error_t je;
        json_t *ans = json_loads(a.body, 0, &je);
        json_t *tr = json_object_get(ans, "translations");
        /* each text's sentence events, by sentence index */
        const char *got[5][4] = {{0}};
        int count[5] = {0};
        json_t *evs[64];
        for (int e = 0; e < n - 1; e++) {
            ck_assert_str_eq(names[e], "sentence");
            evs[e] = json_loads(datas[e], 0, &je);
            ck_assert_ptr_nonnull(evs[e]);
            json_int_t ti = json_integer_value(json_object_get(evs[e], "text_index"));
            json_int_t si = json_integer_value(json_object_get(evs[e], "sentence_index"));
            ck_assert(ti >= 0 && ti < 5 && si >= 0 && si < 4);
            ck_assert_msg(!got[ti][si], "two events of text %lld sentence %lld", (long long)ti,
                          (long long)si);
            got[ti][si] = json_string_value(json_object_get(evs[e], "text"));
            count[ti]++;
        }
        int unsplit = strstr(k_options[q], "split_sentences") != NULL;
        for (int i = 0; i < 5; i++) {
            make_text(q, i, t, sizeof t);
            int ns = (q * 7 + i * 3) % 4; /* make_text's sentences */
            json_t *ti = json_array_get(tr, (size_t)i);
            const char *whole = json_string_value(json_object_get(ti, "text"));
            if (ns == 0) { /* empty: not run, no event */
                ck_assert_int_eq(count[i], 0);
            } else if (ns == 1 || unsplit) { /* one job: its event is the text's */
                ck_assert_int_eq(count[i], 1);
                ck_assert_str_eq(got[i][0], whole);
            } else { /* its sentences, put back between the text's spaces */
                ck_assert_int_eq(count[i], ns);
                char joined[1024] = "";
                int jn = 0;
                for (int k = 0; k < ns; k++)
                    jn += snprintf(joined + jn, sizeof joined - (size_t)jn, "%s%s", k ? " " : "",
                                   got[i][k]);
                ck_assert_str_eq(joined, whole);
            }
        }
        for (int e = 0; e < n - 1; e++)
            json_decref(evs[e]);
        json_decref(ans);
        free_events(names, datas, n);
        tc_resp_free(&a);
        tc_resp_free(&b);
    }
}
END_TEST

static long running_rows(int port)
{
    return (long)tc_metric_sum(port, "transformerd_running_rows");
}

/* Texts of the daemon at port still to run: running rows and queued. */
static long unfinished(int port)
{
    return running_rows(port) + (long)tc_metric_sum(port, "transformerd_queue_depth");
}

static long urgent_steps(int port)
{
    return (long)tc_metric_sum(port, "transformerd_decode_urgent_steps_total");
}

/* Sends a streamed request of 40 sentences on a raw socket and reads until
 * its first sentence event; returns the socket. */
static int first_event(int port)
{
    char text[4096] = "";
    int at = 0;
    for (int i = 0; i < 40; i++)
        at += snprintf(text + at, sizeof text - (size_t)at, "%sThis is sentence number %d of "
                       "a long text.", i ? " " : "", i);
    char body[4200], req[4600];
    int bn = snprintf(body, sizeof body, "{\"text\":\"%s\",\"stream\":true}", text);
    int rn = snprintf(req, sizeof req, "POST /v1/translate HTTP/1.1\r\nHost: t\r\n"
                      "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", bn, body);
    int fd = tc_connect(port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(send(fd, req, (size_t)rn, 0), rn);
    char buf[65536];
    size_t n = 0;
    while (n < sizeof buf - 1) {
        ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        ck_assert_msg(k > 0, "the stream ended before its first event");
        n += (size_t)k;
        buf[n] = 0;
        if (strstr(buf, "event: sentence"))
            break;
    }
    ck_assert_msg(strstr(buf, "HTTP/1.1 200") == buf, "%s", buf);
    ck_assert_ptr_null(strstr(buf, "event: done"));
    return fd;
}

/* A daemon whose steps take a while (--test-step-delay-ms): the first
 * sentence's event comes while the request still has rows running, after
 * steps of the first sentences alone (not for a plain answer), and a
 * client that leaves after it gives its rows back. */
START_TEST(test_stream_early_and_gone)
{
    /* the same text twice: no cache, so that it runs again */
    const char *args[] = {"--test-step-delay-ms", "20", "--workers", "1", "--cache-bytes", "0",
                          NULL};
    pid_t pid;
    int port = tc_daemon_start_model(TD_DAEMON, TD_BUNDLED_MODEL, g_tmp, "slow", args, &pid);
    ck_assert_int_gt(port, 0);
    int saved = g_port;
    g_port = port;
    /* a plain answer has no urgent sentences; a streamed one's first
     * sentences are (--urgent-steps: steps of theirs alone) */
    tc_resp plain;
    ck_assert_int_eq(translate(NULL, "{\"text\":\"One. Two. Three. Four.\"}", &plain), 0);
    ck_assert_int_eq(plain.status, 200);
    tc_resp_free(&plain);
    ck_assert_int_eq(urgent_steps(port), 0);
    int fd = first_event(port);
    ck_assert_int_gt(urgent_steps(port), 0);
    /* the event is out and the request is not done: its other sentences
     * still run or wait */
    ck_assert_int_gt(unfinished(port), 0);
    /* reading on: the whole answer comes, once */
    char buf[1 << 16];
    size_t n = 0;
    for (;;) {
        ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        if (k <= 0)
            break;
        n += (size_t)k;
        buf[n] = 0;
        if (strstr(buf, "event: done") && strstr(buf, "\r\n0\r\n\r\n"))
            break;
    }
    ck_assert_ptr_nonnull(strstr(buf, "event: done"));
    close(fd);
    ck_assert_int_eq(running_rows(port), 0);
    /* again, and this client leaves after the first event */
    fd = first_event(port);
    ck_assert_int_gt(unfinished(port), 0);
    close(fd);
    long rows = -1;
    for (int i = 0; i < 400 && rows != 0; i++) {
        tc_sleep_ms(25);
        rows = unfinished(port);
    }
    ck_assert_msg(rows == 0, "%ld rows or texts still running or queued after the client left",
                  rows);
    /* and the daemon serves on */
    tc_resp r;
    ck_assert_int_eq(translate(NULL, "{\"text\":\"Hello world.\",\"stream\":true}", &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "event: done"));
    tc_resp_free(&r);
    g_port = saved;
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 60), 0);
}
END_TEST

/* Errors before the first byte are the usual answers; after it, the
 * stream's last event. */
START_TEST(test_stream_errors)
{
    tc_resp r;
    ck_assert_int_eq(translate(NULL, "{\"text\":[],\"stream\":true}", &r), 0);
    ck_assert_int_eq(r.status, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "\"out_of_range\""));
    tc_resp_free(&r);
    ck_assert_int_eq(translate(NULL, "{\"text\":\"x\",\"stream\":\"yes\"}", &r), 0);
    ck_assert_int_eq(r.status, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "\"param\":\"stream\""));
    tc_resp_free(&r);
    ck_assert_int_eq(translate("Accept: text/event-stream\r\n", "{\"text\":\"x\",\"beam_size\":0}",
                               &r), 0);
    ck_assert_int_eq(r.status, 400);
    tc_resp_free(&r);
    /* "stream": false wins over Accept */
    ck_assert_int_eq(translate("Accept: text/event-stream\r\n",
                               "{\"text\":\"Yes.\",\"stream\":false}", &r), 0);
    ck_assert_int_eq(r.status, 200);
    char ct[128];
    ck_assert_ptr_nonnull(tc_header(&r, "Content-Type", ct, sizeof ct));
    ck_assert_str_eq(ct, "application/json");
    ck_assert_msg(!strncmp(r.body, "{\"model\":", 9), "not the plain answer: %.80s", r.body);
    tc_resp_free(&r);
    /* a daemon whose batches fail: 200, then the error event */
    const char *args[] = {"--test-fail-batches", "engine", NULL};
    pid_t pid;
    int port = tc_daemon_start_model(TD_DAEMON, TD_BUNDLED_MODEL, g_tmp, "fail", args, &pid);
    ck_assert_int_gt(port, 0);
    int saved = g_port;
    g_port = port;
    ck_assert_int_eq(translate(NULL, "{\"text\":\"Hello world.\",\"stream\":true}", &r), 0);
    ck_assert_int_eq(r.status, 200);
    char *names[4], *datas[4];
    int n = events(r.body, 0, names, datas, 4);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(names[0], "error");
    ck_assert_ptr_nonnull(strstr(datas[0], "\"code\":\"internal\""));
    free_events(names, datas, n);
    tc_resp_free(&r);
    g_port = saved;
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 60), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("stream");
    TCase *tc = tcase_create("stream");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_stream_equals_answer);
    tcase_add_test(tc, test_stream_errors);
    tcase_add_test(tc, test_stream_early_and_gone);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_stream_test.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    const char *args[] = {NULL};
    g_port = tc_daemon_start_model(TD_DAEMON, TD_BUNDLED_MODEL, g_tmp, "main", args, &g_pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s/main.log\n", g_tmp);
        return 1;
    }
    return tc_run_suite(suite(), g_pid, g_tmp);
}
