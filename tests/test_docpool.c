/*
 * test_docpool.c - documents parsed and rendered on the document threads
 * (server/service/docpool.c), never on an HTTP thread, on the bundled
 * model. The daemon runs with --document-threads 2 --document-queue 6 and
 * the test gate (--test-document-gate): a document thread that took a
 * document waits until the gate file exists, so every state below is
 * reached by counting (/metrics), not by timing:
 *   - 8 uploads at once of a .docx whose document.xml has one element of
 *     40,000 attributes (libxml2's quadratic case: tens of seconds of CPU
 *     each), more than --http-threads (4): 2 taken by the document
 *     threads, 6 waiting; meanwhile /health/live and a small /translate
 *     are answered, and no upload has been answered yet;
 *   - a 9th upload finds the queue full: 503 with Retry-After at once,
 *     counted in transformerd_documents_refused_total;
 *   - the 8 clients leave, the gate opens: their documents are dropped
 *     unparsed (the client is gone), every call ends (counted by
 *     transformerd_requests_total), the gauges go back to 0;
 *   - a .txt and a .srt file are then translated as before (200, their
 *     file downloadable);
 *   - a 300-line .txt whose client leaves while it waits at the gate is
 *     dropped: its call ends and the engine runs no step for it
 *     (transformerd_decode_steps_total; its 300 sentences would take
 *     hundreds).
 * The daemon dies with the test however it ends (PR_SET_PDEATHSIG,
 * tests/server/client.c), and a drain opens the gate.
 */
#include <check.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zip.h>

#include "server/client.h"
#include "server/suite.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif

#define N_UPLOADS 8
#define N_ATTRS 40000

static char g_tmp[256], g_gate[300];
static int g_port = -1;

/* The pathological .docx (malloc'd, *len bytes), made with libzip. */
static char *bad_docx(size_t *len)
{
    size_t cap = 200 + (size_t)N_ATTRS * 16;
    char *xml = malloc(cap);
    ck_assert_ptr_nonnull(xml);
    size_t n = (size_t)snprintf(xml, cap,
                                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<w:document xmlns:w="
                                "\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">"
                                "<w:body><w:p");
    for (int i = 0; i < N_ATTRS; i++)
        n += (size_t)snprintf(xml + n, cap - n, " a%d=\"x\"", i);
    n += (size_t)snprintf(xml + n, cap - n,
                          "><w:r><w:t>Save the file.</w:t></w:r></w:p></w:body></w:document>");
    char path[512];
    snprintf(path, sizeof path, "%s/bad.docx", g_tmp);
    int err = 0;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    ck_assert_ptr_nonnull(z);
    zip_source_t *src = zip_source_buffer(z, xml, n, 1); /* takes xml */
    ck_assert_ptr_nonnull(src);
    ck_assert_int_ge(zip_file_add(z, "word/document.xml", src, ZIP_FL_ENC_UTF_8), 0);
    ck_assert_int_eq(zip_close(z), 0);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc(*len);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_eq(fread(data, 1, *len, f), *len);
    fclose(f);
    return data;
}

/* POST /translate_file of name with data: the request sent on a fresh
 * connection, its answer not read; returns the socket. */
static int send_upload(const char *name, const char *data, size_t len)
{
    size_t cap = len + 4096;
    char *body = malloc(cap), head[256];
    const char *kv[] = {"source", "en", "target", "de"};
    size_t n = tc_multipart(body, cap, kv, 2, name, data, len);
    int hn = snprintf(head, sizeof head,
                      "POST /translate_file HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      TC_MULTIPART, n);
    int fd = tc_connect(g_port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(send(fd, head, (size_t)hn, MSG_NOSIGNAL), hn);
    for (size_t off = 0; off < n;) {
        ssize_t k = send(fd, body + off, n - off, MSG_NOSIGNAL);
        ck_assert_int_gt(k, 0);
        off += (size_t)k;
    }
    free(body);
    return fd;
}

/* Waits (by counting, polling /metrics) until name is want; fails after
 * a generous while. */
static void wait_metric(const char *name, double want)
{
    double until = tc_now() + 120, v = -1;
    double last = -2;
    while (tc_now() < until && (v = tc_metric(g_port, name)) != want) {
        if (getenv("TD_DEBUG") && v != last)
            fprintf(stderr, "%.3f %s = %g\n", tc_now(), name, v), last = v;
        tc_sleep_ms(20);
    }
    ck_assert_msg(v == want, "%s is %g, expected %g", name, v, want);
}

/* Whether the server has written anything (or closed) on fd yet. */
static int answered(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* /translate_file of a small file: 200 and its translation downloadable. */
static void small_file(const char *name, const char *data)
{
    char body[4096], h[128];
    const char *kv[] = {"source", "en", "target", "de"};
    size_t n = tc_multipart(body, sizeof body, kv, 2, name, data, strlen(data));
    snprintf(h, sizeof h, "Content-Type: %s\r\n", TC_MULTIPART);
    tc_resp r = {0};
    ck_assert_int_eq(tc_request(g_port, "POST", "/translate_file", h, body, n, &r), 0);
    ck_assert_msg(r.status == 200, "%s: %d %s", name, r.status, r.body);
    const char *u = strstr(r.body, "/download_file/");
    ck_assert_ptr_nonnull(u);
    char path[256];
    snprintf(path, sizeof path, "%.*s", (int)strcspn(u, "\""), u);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(g_port, "GET", path, NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_gt(r.body_len, 0);
    tc_resp_free(&r);
}

START_TEST(test_documents_off_http_threads)
{
    size_t len;
    char *docx = bad_docx(&len);
    int fd[N_UPLOADS];
    /* counted, not timed: 2 documents on the threads (taken before the
     * others come, so that the queue holds the 6 others), 6 waiting */
    for (int i = 0; i < N_UPLOADS; i++) {
        fd[i] = send_upload("bad.docx", docx, len);
        if (i == 1)
            wait_metric("transformerd_documents_running", 2);
    }
    wait_metric("transformerd_documents_queued", 6);

    /* the HTTP threads answer while every upload is in flight */
    tc_resp r = {0};
    ck_assert_int_eq(tc_request(g_port, "GET", "/health/live", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    ck_assert_int_eq(
        tc_post_json(g_port, "/translate", "{\"q\":\"Hello.\",\"source\":\"en\",\"target\":\"de\"}",
                     &r),
        0);
    ck_assert_msg(r.status == 200 && strstr(r.body, "translatedText"), "%d %s", r.status, r.body);
    tc_resp_free(&r);
    for (int i = 0; i < N_UPLOADS; i++)
        ck_assert_msg(!answered(fd[i]), "upload %d was answered before the gate opened", i);

    /* the queue is full: refused at once, not waited for */
    tc_io_timeout_s = 60; /* answered at once; a mutant that queues it waits less */
    int extra = send_upload("more.txt", "Hello.\n", 7);
    tc_io_timeout_s = 300;
    ck_assert_int_eq(tc_read_on(extra, &r), 0);
    char ra[32];
    ck_assert_msg(r.status == 503 && strstr(r.body, "document queue is full"), "%d %s", r.status,
                  r.body);
    ck_assert_ptr_nonnull(tc_header(&r, "Retry-After", ra, sizeof ra));
    tc_resp_free(&r);
    close(extra);
    ck_assert(tc_metric(g_port, "transformerd_documents_refused_total") == 1);
    ck_assert(tc_metric(g_port, "transformerd_documents_queued") == 6);

    /* the clients leave, the gate opens: the documents are dropped
     * unparsed, every call ends */
    for (int i = 0; i < N_UPLOADS; i++)
        close(fd[i]);
    FILE *g = fopen(g_gate, "w");
    ck_assert_ptr_nonnull(g);
    fclose(g);
    wait_metric("transformerd_documents_queued", 0);
    wait_metric("transformerd_documents_running", 0);
    /* each call ended: answered 503 (client_gone; the queue-full one), or
     * ended by the transport on finding the client gone (status 0,
     * "other") */
    const char *s503 = "transformerd_requests_total{endpoint=\"/translate_file\",status=\"503\"}";
    const char *s0 = "transformerd_requests_total{endpoint=\"/translate_file\",status=\"other\"}";
    double until = tc_now() + 300, ended = 0;
    while (tc_now() < until && ended != N_UPLOADS + 1) {
        double a = tc_metric(g_port, s503), b = tc_metric(g_port, s0);
        ended = (a > 0 ? a : 0) + (b > 0 ? b : 0);
        tc_sleep_ms(20);
    }
    ck_assert_msg(ended == N_UPLOADS + 1, "%g of %d uploads ended", ended, N_UPLOADS + 1);
    free(docx);

    /* and files go through as before */
    small_file("a.txt", "Hello.\nThe house is small.\n");
    small_file("b.srt", "1\n00:00:01,000 --> 00:00:02,000\nHello.\n");
    wait_metric("transformerd_documents_running", 0); /* after the answer: counted */

    /* a client that leaves its document on a document thread: the
     * document is dropped, its sentences never translated (counted by the
     * engine's decoding steps, once its call has ended) */
    ck_assert_int_eq(unlink(g_gate), 0);
    enum { LINES = 300 };
    char *txt = malloc(LINES * 64);
    ck_assert_ptr_nonnull(txt);
    size_t tn = 0;
    for (int i = 0; i < LINES; i++)
        tn += (size_t)snprintf(txt + tn, 64, "Line %d of a long document that nobody reads.\n", i);
    const double steps0 = tc_metric_sum(g_port, "transformerd_decode_steps_total");
    const double end0 = tc_metric(g_port, s0) > 0 ? tc_metric(g_port, s0) : 0;
    int left = send_upload("left.txt", txt, tn);
    wait_metric("transformerd_documents_running", 1); /* on a thread, at the gate */
    close(left);
    g = fopen(g_gate, "w");
    ck_assert_ptr_nonnull(g);
    fclose(g);
    until = tc_now() + 300;
    while (tc_now() < until && tc_metric(g_port, s0) < end0 + 1)
        tc_sleep_ms(20);
    ck_assert_msg(tc_metric(g_port, s0) == end0 + 1, "the left document's call did not end");
    wait_metric("transformerd_documents_running", 0);
    const double took = tc_metric_sum(g_port, "transformerd_decode_steps_total") - steps0;
    ck_assert_msg(took < 20, "%g decoding steps run for a client that left", took);
    free(txt);
}
END_TEST

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_docpool.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    snprintf(g_gate, sizeof g_gate, "%s/gate", g_tmp);
    tc_io_timeout_s = 300;
    const char *args[] = {"--workers", "1", "--http-threads", "4", "--document-threads", "2",
                          "--document-queue", "6", "--test-document-gate", g_gate, NULL};
    pid_t pid;
    g_port = tc_daemon_start_model(TD_DAEMON, TD_BUNDLED_MODEL, g_tmp, "docpool", args, &pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s\n", g_tmp);
        return 1;
    }
    Suite *s = suite_create("docpool");
    TCase *tc = tcase_create("documents");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_documents_off_http_threads);
    suite_add_tcase(s, tc);
    return tc_run_suite(s, pid, g_tmp);
}
