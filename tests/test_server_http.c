/*
 * test_server_http.c - `transformerd serve` end to end on loopback: every
 * endpoint and error status of docs/api.md, batching across 32 concurrent
 * clients against the answers of the same requests sent one by one, and
 * SIGTERM with requests queued and running.
 *
 * The model is tests/data/text/marian_en_de when present; otherwise a
 * stand-in built here: the marian_tied fixture's weights with a small
 * SentencePiece model from tests/data/spm and a vocab.json mapping its first
 * pieces onto the fixture's 64 ids (translations are nonsense, but
 * deterministic, which is all these tests compare).
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "server/client.h"
#include "server/suite.h"
#include "spm.h"
#include "run_capture.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif

static char g_model[512];
static char g_tmp[256];
static int g_port = -1; /* the main daemon */
static pid_t g_pid = -1;

/* ---- fixture ------------------------------------------------------------- */

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int make_model_dir(void)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/text/marian_en_de/config.json", TD_TEST_DATA);
    if (file_exists(p)) {
        snprintf(g_model, sizeof g_model, "%s/text/marian_en_de", TD_TEST_DATA);
        return 0;
    }
    snprintf(g_model, sizeof g_model, "%s/marian_en_de", g_tmp);
    if (mkdir(g_model, 0755) != 0)
        return -1;
    const char *links[][2] = {{"fixtures/marian_tied/config.json", "config.json"},
                              {"fixtures/marian_tied/generation_config.json",
                               "generation_config.json"},
                              {"fixtures/marian_tied/model.safetensors", "model.safetensors"},
                              {"spm/unigram_identity.model", "source.spm"},
                              {"spm/unigram_identity.model", "target.spm"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        char from[1024], to[1024];
        snprintf(from, sizeof from, "%s/%s", TD_TEST_DATA, links[i][0]);
        snprintf(to, sizeof to, "%s/%s", g_model, links[i][1]);
        if (symlink(from, to) != 0)
            return -1;
    }
    /* vocab.json: </s>=0, <unk>=1, <pad>=63 (the fixture's ids), spm pieces
     * 3..63 -> 2..62. */
    spm_model *sp = NULL;
    char err[256], path[1024];
    snprintf(path, sizeof path, "%s/spm/unigram_identity.model", TD_TEST_DATA);
    if (spm_load(&sp, path, err, sizeof err) != 0)
        return -1;
    json_t *v = json_pack("{s:i,s:i,s:i}", "</s>", 0, "<unk>", 1, "<pad>", 63);
    for (int id = 3; id <= 63 && id < spm_size(sp); id++)
        json_object_set_new(v, spm_id_to_piece(sp, id), json_integer(id - 1));
    spm_free(sp);
    snprintf(path, sizeof path, "%s/vocab.json", g_model);
    int rc = json_dump_file(v, path, 0);
    json_decref(v);
    return rc;
}

static int start(const char *const *args, const char *name, pid_t *pid)
{
    return tc_daemon_start_model(TD_DAEMON, g_model, g_tmp, name, args, pid);
}

/* ---- helpers ------------------------------------------------------------- */

static json_t *body_json(const tc_resp *r)
{
    json_error_t je;
    return json_loads(r->body ? r->body : "", 0, &je);
}

/* Asserts status and, for errors, docs/api.md's error object with code and
 * param (NULL: JSON null). */
static void expect_error(const tc_resp *r, int status, const char *param)
{
    ck_assert_int_eq(r->status, status);
    json_t *j = body_json(r);
    ck_assert_msg(j != NULL, "error body is not JSON: %s", r->body);
    json_t *e = json_object_get(j, "error");
    ck_assert(json_is_object(e));
    ck_assert(json_is_string(json_object_get(e, "code")));
    ck_assert(json_is_string(json_object_get(e, "message")));
    json_t *p = json_object_get(e, "param");
    if (param) {
        ck_assert_msg(json_is_string(p) && !strcmp(json_string_value(p), param),
                      "param: want %s in %s", param, r->body);
    } else {
        ck_assert_msg(json_is_null(p), "param: want null in %s", r->body);
    }
    ck_assert_int_eq(json_object_size(e), 3);
    json_decref(j);
}

/* Asserts status and LibreTranslate's error shape {"error": message} with
 * a message containing want. */
static void expect_libre_error(const tc_resp *r, int status, const char *want)
{
    ck_assert_int_eq(r->status, status);
    json_t *j = body_json(r);
    ck_assert_msg(j != NULL, "error body is not JSON: %s", r->body);
    json_t *e = json_object_get(j, "error");
    ck_assert_msg(json_is_string(e) && json_object_size(j) == 1, "not {\"error\": message}: %s",
                  r->body);
    ck_assert_msg(strstr(json_string_value(e), want) != NULL, "'%s' lacks '%s'",
                  json_string_value(e), want);
    json_decref(j);
}

static void post_expect(const char *json, int status, const char *param)
{
    tc_resp r;
    ck_assert_int_eq(tc_post_json(g_port, "/v1/translate", json, &r), 0);
    expect_error(&r, status, param);
    tc_resp_free(&r);
}

static json_t *translate_ok(int port, const char *json)
{
    tc_resp r;
    ck_assert_int_eq(tc_post_json(port, "/v1/translate", json, &r), 0);
    ck_assert_msg(r.status == 200, "%d %s for %s", r.status, r.body, json);
    char ct[128];
    ck_assert_ptr_nonnull(tc_header(&r, "Content-Type", ct, sizeof ct));
    ck_assert_str_eq(ct, "application/json");
    json_t *j = body_json(&r);
    tc_resp_free(&r);
    ck_assert_ptr_nonnull(j);
    return j;
}

/* Same tokens and text; scores within 1e-4 (batch composition may change
 * the float summation order). */
static int same_field(json_t *a, json_t *b, const char *key)
{
    json_t *x = json_object_get(a, key), *y = json_object_get(b, key);
    return (!x && !y) || (x && y && json_equal(x, y)); /* json_equal(NULL, NULL) is 0 */
}

static int same_translation(json_t *a, json_t *b)
{
    if (!same_field(a, b, "text") || !same_field(a, b, "tokens") ||
        !same_field(a, b, "source_tokens"))
        return 0;
    double sa = json_number_value(json_object_get(a, "score"));
    double sb = json_number_value(json_object_get(b, "score"));
    if (!(fabs(sa - sb) <= 1e-4)) /* NaN fails */
        return 0;
    json_t *ha = json_object_get(a, "hypotheses"), *hb = json_object_get(b, "hypotheses");
    if ((ha == NULL) != (hb == NULL) || json_array_size(ha) != json_array_size(hb))
        return 0;
    for (size_t i = 0; i < json_array_size(ha); i++)
        if (!same_translation(json_array_get(ha, i), json_array_get(hb, i)))
            return 0;
    return 1;
}

static int same_response(json_t *a, json_t *b)
{
    json_t *ta = json_object_get(a, "translations"), *tb = json_object_get(b, "translations");
    if (!json_is_array(ta) || !json_is_array(tb) || json_array_size(ta) != json_array_size(tb))
        return 0;
    for (size_t i = 0; i < json_array_size(ta); i++)
        if (!same_translation(json_array_get(ta, i), json_array_get(tb, i)))
            return 0;
    return json_equal(json_object_get(a, "usage"), json_object_get(b, "usage"));
}

/* The value of a series once it reaches at least min: a request's counters
 * are recorded when libmicrohttpd reports it completed, which may be just
 * after the client has read the response. Polls /metrics for up to 5 s;
 * returns the last value seen. */
static double wait_metric(int port, const char *series, double min)
{
    double v = -1;
    for (int i = 0; i < 100; i++) {
        v = tc_metric(port, series);
        if (v >= min)
            break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return v;
}

/* Resident set size of a process in kB (VmRSS), or -1. */
static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

/* ---- endpoints ----------------------------------------------------------- */

START_TEST(test_health_and_info)
{
    const char *ok[] = {"/health/live", "/v2/health/live", "/health/ready", "/v2/health/ready"};
    for (int i = 0; i < 4; i++) {
        tc_resp r;
        ck_assert_int_eq(tc_request(g_port, "GET", ok[i], NULL, NULL, 0, &r), 0);
        ck_assert_int_eq(r.status, 200);
        json_t *j = body_json(&r);
        ck_assert_str_eq(json_string_value(json_object_get(j, "status")), i < 2 ? "ok" : "ready");
        json_decref(j);
        tc_resp_free(&r);
    }
    tc_resp r;
    ck_assert_int_eq(tc_request(g_port, "GET", "/v1/models", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    json_t *j = body_json(&r);
    json_t *m = json_array_get(json_object_get(j, "models"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(m, "name")), "marian_en_de");
    ck_assert_str_eq(json_string_value(json_object_get(m, "device")), "cpu");
    /* what is resident: the CPU computes in float32 whatever the checkpoint */
    ck_assert_str_eq(json_string_value(json_object_get(m, "dtype")), "float32");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(m, "languages"), "source")), "en");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(m, "architecture"),
                                                        "decoder_layers")),
                     2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(m, "limits"),
                                                        "max_beam_size")),
                     4);
    json_decref(j);
    tc_resp_free(&r);

    ck_assert_int_eq(tc_request(g_port, "GET", "/languages", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    j = body_json(&r);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 0), "code")), "en");
    ck_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(json_array_get(j, 0), "targets"), 0)),
                     "de");
    json_decref(j);
    tc_resp_free(&r);

    /* openapi.json lists every routed path */
    ck_assert_int_eq(tc_request(g_port, "GET", "/openapi.json", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    j = body_json(&r);
    ck_assert_ptr_nonnull(j);
    const char *paths[] = {"/v1/translate", "/translate",     "/languages",
                           "/v1/models",    "/health/live",   "/health/ready",
                           "/v2/health/live", "/v2/health/ready", "/metrics",
                           "/openapi.json"};
    for (int i = 0; i < 10; i++)
        ck_assert_msg(json_object_get(json_object_get(j, "paths"), paths[i]) != NULL, "%s",
                      paths[i]);
    json_decref(j);
    tc_resp_free(&r);

    ck_assert_int_eq(tc_request(g_port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    char ct[128];
    ck_assert_ptr_nonnull(tc_header(&r, "Content-Type", ct, sizeof ct));
    ck_assert(!strncmp(ct, "text/plain; version=0.0.4", 25));
    ck_assert_ptr_nonnull(strstr(r.body, "transformerd_requests_total{endpoint=\"/health/live\",status=\"200\"}"));
    ck_assert_ptr_nonnull(strstr(r.body, "transformerd_queue_depth{model=\"marian_en_de\"} "));
    ck_assert_ptr_nonnull(strstr(r.body, "transformerd_model_info{model=\"marian_en_de\""));
    tc_resp_free(&r);
}
END_TEST

START_TEST(test_translate)
{
    json_t *one = translate_ok(g_port, "{\"text\":\"the test.\"}");
    ck_assert_str_eq(json_string_value(json_object_get(one, "model")), "marian_en_de");
    json_t *t0 = json_array_get(json_object_get(one, "translations"), 0);
    ck_assert(json_is_string(json_object_get(t0, "text")));
    ck_assert(json_is_number(json_object_get(t0, "score")));
    ck_assert_ptr_null(json_object_get(t0, "tokens"));
    ck_assert_ptr_null(json_object_get(t0, "attention"));

    /* several texts: one translation each, in order, the same as alone */
    json_t *many = translate_ok(g_port, "{\"text\":[\"a\",\"the test.\",\"se ro te an ar\"],"
                                        "\"return_tokens\":true}");
    json_t *tr = json_object_get(many, "translations");
    ck_assert_int_eq(json_array_size(tr), 3);
    ck_assert(json_equal(json_object_get(json_array_get(tr, 1), "text"),
                         json_object_get(t0, "text")));
    long src_total = 0, tgt_total = 0;
    for (size_t i = 0; i < 3; i++) {
        json_t *t = json_array_get(tr, i);
        json_t *st = json_object_get(t, "source_tokens"), *tt = json_object_get(t, "tokens");
        ck_assert(json_array_size(st) >= 1 && json_array_size(tt) >= 1);
        ck_assert_str_eq(json_string_value(json_array_get(st, json_array_size(st) - 1)), "</s>");
        src_total += (long)json_array_size(st);
        tgt_total += (long)json_array_size(tt);
    }
    json_t *usage = json_object_get(many, "usage");
    ck_assert_int_eq(json_integer_value(json_object_get(usage, "source_tokens")), src_total);
    ck_assert_int_eq(json_integer_value(json_object_get(usage, "target_tokens")), tgt_total);
    json_decref(many);
    json_decref(one);

    /* attention with layer and head selection */
    json_t *att = translate_ok(g_port, "{\"text\":\"the test.\",\"return_attention\":true,"
                                       "\"attention_layers\":[-1],\"attention_heads\":[0,2],"
                                       "\"beam_size\":1}");
    json_t *t = json_array_get(json_object_get(att, "translations"), 0);
    json_t *a = json_object_get(t, "attention");
    ck_assert(json_is_object(a));
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(a, "layers"), 0)), 1);
    ck_assert_int_eq(json_array_size(json_object_get(a, "heads")), 2);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(a, "heads"), 1)), 2);
    json_t *cross = json_object_get(a, "cross");
    size_t T = json_array_size(json_object_get(t, "tokens"));
    size_t S = json_array_size(json_object_get(t, "source_tokens"));
    ck_assert_int_eq(json_array_size(cross), 1);
    ck_assert_int_eq(json_array_size(json_array_get(cross, 0)), 2);
    for (size_t h = 0; h < 2; h++) {
        json_t *W = json_array_get(json_array_get(cross, 0), h);
        ck_assert_int_eq(json_array_size(W), T);
        for (size_t ti = 0; ti < T; ti++) {
            json_t *row = json_array_get(W, ti);
            ck_assert_int_eq(json_array_size(row), S);
            double sum = 0;
            for (size_t s = 0; s < S; s++)
                sum += json_number_value(json_array_get(row, s));
            ck_assert_msg(fabs(sum - 1) < 1e-4, "row sums to %g", sum);
        }
    }
    json_decref(att);

    /* hypotheses, best first */
    json_t *hy = translate_ok(g_port, "{\"text\":\"the test.\",\"beam_size\":4,"
                                      "\"num_hypotheses\":3}");
    t = json_array_get(json_object_get(hy, "translations"), 0);
    json_t *hs = json_object_get(t, "hypotheses");
    ck_assert_int_eq(json_array_size(hs), 3);
    ck_assert(json_equal(json_object_get(json_array_get(hs, 0), "text"), json_object_get(t, "text")));
    for (size_t i = 1; i < 3; i++)
        ck_assert(json_number_value(json_object_get(json_array_get(hs, i - 1), "score")) >=
                  json_number_value(json_object_get(json_array_get(hs, i), "score")));
    json_decref(hy);

    /* max_length bounds the output */
    json_t *ml = translate_ok(g_port, "{\"text\":\"the test.\",\"max_length\":2,"
                                      "\"return_tokens\":true}");
    t = json_array_get(json_object_get(ml, "translations"), 0);
    ck_assert(json_array_size(json_object_get(t, "tokens")) <= 2);
    json_decref(ml);
}
END_TEST

/* ---- offsets ------------------------------------------------------------- */

/* The byte index of code point k of s. */
static size_t cp_byte(const char *s, size_t k)
{
    size_t b = 0;
    for (size_t c = 0; s[b] && c < k; c++)
        do
            b++;
        while (((unsigned char)s[b] & 0xC0) == 0x80);
    return b;
}

static size_t cp_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* offsets (pairs of code points) cover text exactly and, when exact, each
 * piece with U+2581 read as a space (the text's first one dropped) is the
 * text it covers (special tokens and <unk> excepted). */
static void check_offsets(const char *text, json_t *pieces, json_t *offsets, int exact)
{
    ck_assert_msg(json_array_size(offsets) == json_array_size(pieces), "%zu offsets, %zu pieces",
                  json_array_size(offsets), json_array_size(pieces));
    size_t prev = 0;
    for (size_t i = 0; i < json_array_size(offsets); i++) {
        json_t *o = json_array_get(offsets, i);
        ck_assert_int_eq(json_array_size(o), 2);
        size_t a = (size_t)json_integer_value(json_array_get(o, 0));
        size_t b = (size_t)json_integer_value(json_array_get(o, 1));
        ck_assert_msg(a == prev && b >= a, "'%s': token %zu is [%zu, %zu) after %zu", text, i, a,
                      b, prev);
        prev = b;
        const char *p = json_string_value(json_array_get(pieces, i));
        if (!exact || !strcmp(p, "</s>") || !strcmp(p, "<unk>"))
            continue;
        char want[256];
        size_t w = 0;
        for (const char *q = p; *q && w + 1 < sizeof want;) {
            if (!strncmp(q, "\xE2\x96\x81", 3)) {
                if (a > 0 || q != p)
                    want[w++] = ' ';
                q += 3;
            } else {
                want[w++] = *q++;
            }
        }
        want[w] = 0;
        size_t ba = cp_byte(text, a), bb = cp_byte(text, b);
        ck_assert_msg(bb - ba == w && !memcmp(text + ba, want, w),
                      "'%s': token %zu '%s' covers '%.*s'", text, i, p, (int)(bb - ba), text + ba);
    }
    ck_assert_msg(prev == cp_len(text), "'%s': the offsets end at %zu of %zu", text, prev,
                  cp_len(text));
}

START_TEST(test_offsets)
{
    /* exact: ASCII with single spaces (what the normalizer leaves alone) */
    static const char *const texts[][2] = {
        {"Hello world", "1"},         {"The cat sat on the mat.", "1"},
        {"  two   spaces  ", "0"},    {"caf\xC3\xA9 \xEF\xAC\x81ne \xEF\xBC\xA8\x65llo", "0"},
        {"a</s> <unk>b", "0"},        {">>de<< x", "0"},
        {"", "0"},                    {"   ", "0"}};
    const size_t n = sizeof texts / sizeof texts[0];
    json_t *req = json_pack("{s:[],s:b,s:i,s:i}", "text", "return_tokens", 1, "beam_size", 4,
                            "num_hypotheses", 2);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(json_object_get(req, "text"), json_string(texts[i][0]));
    char *js = json_dumps(req, JSON_COMPACT);
    json_t *res = translate_ok(g_port, js);
    free(js);
    json_decref(req);
    json_t *tr = json_object_get(res, "translations");
    ck_assert_int_eq(json_array_size(tr), n);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(tr, i);
        check_offsets(texts[i][0], json_object_get(t, "source_tokens"),
                      json_object_get(t, "source_offsets"), texts[i][1][0] == '1');
        check_offsets(json_string_value(json_object_get(t, "text")),
                      json_object_get(t, "tokens"), json_object_get(t, "offsets"), 1);
        /* an empty text is not run: its one hypothesis is "" */
        json_t *hs = json_object_get(t, "hypotheses");
        size_t nh = i < 6 ? 2 : 1;
        ck_assert_int_eq(json_array_size(hs), nh);
        for (size_t k = 0; k < nh; k++) {
            json_t *h = json_array_get(hs, k);
            check_offsets(json_string_value(json_object_get(h, "text")),
                          json_object_get(h, "tokens"), json_object_get(h, "offsets"), 1);
        }
    }
    json_decref(res);
    /* without return_tokens: no offsets */
    res = translate_ok(g_port, "{\"text\":\"Hello world\"}");
    json_t *t = json_array_get(json_object_get(res, "translations"), 0);
    ck_assert_ptr_null(json_object_get(t, "offsets"));
    ck_assert_ptr_null(json_object_get(t, "source_offsets"));
    json_decref(res);
}
END_TEST

/* ---- order of a list's answers --------------------------------------------- */

/* Texts whose translations all differ with this model, so that an answer at
 * the wrong index cannot pass for the right one. */
static const char *const k_distinct[] = {"se ro te an ar", "Hello world",
                                         "The cat sat on the mat.", "I like it",
                                         "red green blue"};
#define N_DISTINCT ((int)(sizeof k_distinct / sizeof k_distinct[0]))

/* The shape of an attention object: layers, heads, rows and columns. */
static void attention_shape(json_t *t, size_t dims[4])
{
    json_t *a = json_object_get(t, "attention");
    ck_assert(json_is_object(a));
    json_t *cross = json_object_get(a, "cross");
    dims[0] = json_array_size(cross);
    dims[1] = json_array_size(json_array_get(cross, 0));
    dims[2] = json_array_size(json_array_get(json_array_get(cross, 0), 0));
    dims[3] = json_array_size(json_array_get(json_array_get(json_array_get(cross, 0), 0), 0));
}

START_TEST(test_list_order)
{
    char js[1024];
    /* native API: every index equals its text translated alone */
    size_t n = (size_t)snprintf(js, sizeof js, "{\"text\":[");
    for (int i = 0; i < N_DISTINCT; i++)
        n += (size_t)snprintf(js + n, sizeof js - n, "%s\"%s\"", i ? "," : "", k_distinct[i]);
    snprintf(js + n, sizeof js - n, "],\"return_tokens\":true,\"return_attention\":true}");
    json_t *many = translate_ok(g_port, js);
    json_t *tr = json_object_get(many, "translations");
    ck_assert_int_eq(json_array_size(tr), N_DISTINCT);
    for (int i = 0; i < N_DISTINCT; i++) {
        json_t *ti = json_array_get(tr, i);
        for (int k = 0; k < i; k++)
            ck_assert_msg(!json_equal(json_object_get(ti, "text"),
                                      json_object_get(json_array_get(tr, k), "text")),
                          "texts %d and %d translate alike: pick other texts", k, i);
        snprintf(js, sizeof js, "{\"text\":\"%s\",\"return_tokens\":true,"
                 "\"return_attention\":true}", k_distinct[i]);
        json_t *one = translate_ok(g_port, js);
        json_t *t1 = json_array_get(json_object_get(one, "translations"), 0);
        ck_assert_msg(same_translation(ti, t1), "index %d differs from \"%s\" alone", i,
                      k_distinct[i]);
        size_t da[4], db[4];
        attention_shape(ti, da);
        attention_shape(t1, db);
        for (int d = 0; d < 4; d++)
            ck_assert_int_eq(da[d], db[d]);
        ck_assert_int_eq(da[2], json_array_size(json_object_get(ti, "tokens")));
        ck_assert_int_eq(da[3], json_array_size(json_object_get(ti, "source_tokens")));
        json_decref(one);
    }
    json_decref(many);

    /* LibreTranslate: q as a list, JSON and form, against q alone */
    n = (size_t)snprintf(js, sizeof js, "{\"q\":[");
    for (int i = 0; i < N_DISTINCT; i++)
        n += (size_t)snprintf(js + n, sizeof js - n, "%s\"%s\"", i ? "," : "", k_distinct[i]);
    snprintf(js + n, sizeof js - n, "],\"source\":\"en\",\"target\":\"de\"}");
    tc_resp r;
    ck_assert_int_eq(tc_post_json(g_port, "/translate", js, &r), 0);
    ck_assert_int_eq(r.status, 200);
    json_t *lt = body_json(&r);
    tc_resp_free(&r);
    json_t *list = json_object_get(lt, "translatedText");
    ck_assert_int_eq(json_array_size(list), N_DISTINCT);
    for (int i = 0; i < N_DISTINCT; i++) {
        snprintf(js, sizeof js, "{\"q\":\"%s\",\"source\":\"en\",\"target\":\"de\"}",
                 k_distinct[i]);
        ck_assert_int_eq(tc_post_json(g_port, "/translate", js, &r), 0);
        ck_assert_int_eq(r.status, 200);
        json_t *one = body_json(&r);
        tc_resp_free(&r);
        ck_assert_msg(json_equal(json_array_get(list, i), json_object_get(one, "translatedText")),
                      "LibreTranslate index %d differs from \"%s\" alone", i, k_distinct[i]);
        json_decref(one);
    }
    json_decref(lt);
}
END_TEST

START_TEST(test_libretranslate)
{
    tc_resp r;
    const char *js = "{\"q\":\"the test.\",\"source\":\"en\",\"target\":\"de\"}";
    ck_assert_int_eq(tc_post_json(g_port, "/translate", js, &r), 0);
    ck_assert_int_eq(r.status, 200);
    json_t *j = body_json(&r);
    json_t *native = translate_ok(g_port, "{\"text\":\"the test.\"}");
    ck_assert(json_equal(json_object_get(j, "translatedText"),
                         json_object_get(json_array_get(json_object_get(native, "translations"), 0),
                                         "text")));
    json_decref(j);
    tc_resp_free(&r);

    const char *form = "q=the+test%2E&source=auto&target=de&alternatives=2";
    ck_assert_int_eq(tc_request(g_port, "POST", "/translate",
                                "Content-Type: application/x-www-form-urlencoded\r\n", form,
                                strlen(form), &r),
                     0);
    ck_assert_int_eq(r.status, 200);
    j = body_json(&r);
    ck_assert(json_is_string(json_object_get(j, "translatedText")));
    ck_assert_int_eq(json_array_size(json_object_get(j, "alternatives")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "detectedLanguage"),
                                                       "language")),
                     "en");
    json_decref(j);
    tc_resp_free(&r);

    ck_assert_int_eq(tc_post_json(g_port, "/translate", "{\"q\":[\"a\",\"the test.\"],"
                                                        "\"source\":\"en\",\"target\":\"de\"}",
                                  &r),
                     0);
    ck_assert_int_eq(r.status, 200);
    j = body_json(&r);
    json_t *list = json_object_get(j, "translatedText");
    ck_assert_int_eq(json_array_size(list), 2);
    ck_assert(json_equal(json_array_get(list, 1),
                         json_object_get(json_array_get(json_object_get(native, "translations"), 0),
                                         "text")));
    json_decref(j);
    json_decref(native);
    tc_resp_free(&r);

    /* LibreTranslate's errors: {"error": message}, its messages */
    ck_assert_int_eq(tc_post_json(g_port, "/translate",
                                  "{\"q\":\"a\",\"source\":\"en\",\"target\":\"fr\"}", &r),
                     0);
    expect_libre_error(&r, 400, "fr is not supported");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(g_port, "/translate",
                                  "{\"q\":\"a\",\"source\":\"fr\",\"target\":\"de\"}", &r),
                     0);
    expect_libre_error(&r, 400, "fr is not supported");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(g_port, "/translate",
                                  "{\"q\":\"a\",\"source\":7,\"target\":\"de\"}", &r),
                     0);
    expect_libre_error(&r, 400, "source must be a string");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(g_port, "/translate", "{\"source\":\"en\"}", &r), 0);
    expect_libre_error(&r, 400, "Invalid request: missing q parameter");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(g_port, "/translate", "{\"q\":\"a\",\"target\":\"de\"}", &r),
                     0);
    expect_libre_error(&r, 400, "Invalid request: missing source parameter");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(g_port, "/translate", "{\"q\":\"a\",\"source\":\"en\"}", &r),
                     0);
    expect_libre_error(&r, 400, "Invalid request: missing target parameter");
    tc_resp_free(&r);
    /* alternatives + 1 beams must fit --max-beam (4 here): 3 is the most */
    ck_assert_int_eq(tc_post_json(g_port, "/translate",
                                  "{\"q\":\"a\",\"source\":\"en\",\"target\":\"de\","
                                  "\"alternatives\":4}",
                                  &r),
                     0);
    expect_libre_error(&r, 400, "alternatives must be an integer in 0..3");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(g_port, "/translate",
                                  "{\"q\":\"a\",\"source\":\"en\",\"target\":\"de\","
                                  "\"alternatives\":3}",
                                  &r),
                     0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(g_port, "/translate",
                                  "{\"q\":\"a\",\"source\":\"en\",\"target\":\"de\","
                                  "\"format\":\"pdf\"}",
                                  &r),
                     0);
    expect_libre_error(&r, 400, "pdf format is not supported");
    tc_resp_free(&r);
}
END_TEST

START_TEST(test_errors)
{
    post_expect("{\"text\":", 400, NULL);
    post_expect("[\"a\"]", 400, NULL);
    post_expect("{\"text\":\"a\",\"text\":\"b\"}", 400, NULL);
    post_expect("{\"text\":\"a\",\"beam\":2}", 400, "beam");
    post_expect("{}", 400, "text");
    post_expect("{\"text\":[]}", 400, "text");
    post_expect("{\"text\":[1]}", 400, "text");
    post_expect("{\"text\":7}", 400, "text");
    post_expect("{\"text\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]}", 400, "text");
    post_expect("{\"text\":\"a\",\"beam_size\":\"4\"}", 400, "beam_size");
    post_expect("{\"text\":\"a\",\"beam_size\":17}", 400, "beam_size");
    post_expect("{\"text\":\"a\",\"beam_size\":0}", 400, "beam_size");
    post_expect("{\"text\":\"a\",\"beam_size\":2.5}", 400, "beam_size");
    post_expect("{\"text\":\"a\",\"beam_size\":2,\"num_hypotheses\":3}", 400, "num_hypotheses");
    /* within 1..16 but over --max-beam (default: the fixture's num_beams, 4) */
    post_expect("{\"text\":\"a\",\"beam_size\":5}", 400, "beam_size");
    post_expect("{\"text\":\"a\",\"length_penalty\":\"1\"}", 400, "length_penalty");
    post_expect("{\"text\":\"a\",\"max_length\":0}", 400, "max_length");
    post_expect("{\"text\":\"a\",\"max_length\":100000}", 400, "max_length");
    /* the cap is the model's positions (128 here) */
    post_expect("{\"text\":\"a\",\"max_length\":129}", 400, "max_length");
    json_decref(translate_ok(g_port, "{\"text\":\"a\",\"max_length\":128}"));
    post_expect("{\"text\":\"a\",\"return_tokens\":1}", 400, "return_tokens");
    post_expect("{\"text\":\"a\",\"return_attention\":\"yes\"}", 400, "return_attention");
    post_expect("{\"text\":\"a\",\"attention_layers\":[2]}", 400, "attention_layers");
    post_expect("{\"text\":\"a\",\"attention_layers\":[-3]}", 400, "attention_layers");
    post_expect("{\"text\":\"a\",\"attention_layers\":3}", 400, "attention_layers");
    post_expect("{\"text\":\"a\",\"attention_heads\":[4]}", 400, "attention_heads");
    post_expect("{\"text\":\"a\",\"model\":\"nope\"}", 400, "model");

    /* 422: over --max-input-tokens (48) */
    char big[512] = "{\"text\":[\"a\",\"";
    for (int i = 0; i < 60; i++)
        strcat(big, "x y ");
    strcat(big, "\"]}");
    post_expect(big, 422, "text");

    tc_resp r;
    /* a parse error quoting half a UTF-8 character of the body (fuzz_request
     * found it answered 500): the error must stay a 400 */
    static const char cut[] = "{\"text\":[\"Hello world Hello world Hellnullo world\"],\"beam_size\":8,\"num_hypotheses\":8,\"return_attention\":true,\"ma\\\xc6\x8b\x00\x10" "a\x00\x00\":128}";
    ck_assert_int_eq(tc_request(g_port, "POST", "/v1/translate",
                                "Content-Type: application/json\r\n", cut, sizeof cut - 1, &r),
                     0);
    expect_error(&r, 400, NULL);
    tc_resp_free(&r);
    /* 404, 405 with Allow */
    ck_assert_int_eq(tc_request(g_port, "GET", "/nope", NULL, NULL, 0, &r), 0);
    expect_error(&r, 404, NULL);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(g_port, "GET", "/v1/translate", NULL, NULL, 0, &r), 0);
    expect_error(&r, 405, NULL);
    char allow[64];
    ck_assert_ptr_nonnull(tc_header(&r, "Allow", allow, sizeof allow));
    ck_assert_str_eq(allow, "POST");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(g_port, "POST", "/health/live",
                                "Content-Type: application/json\r\n", "{}", 2, &r),
                     0);
    expect_error(&r, 405, NULL);
    tc_resp_free(&r);

    /* 415 */
    ck_assert_int_eq(tc_request(g_port, "POST", "/v1/translate", "Content-Type: text/plain\r\n",
                                "{\"text\":\"a\"}", 12, &r),
                     0);
    expect_error(&r, 415, NULL);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(g_port, "POST", "/v1/translate", NULL, "{\"text\":\"a\"}", 12, &r),
                     0);
    expect_error(&r, 415, NULL);
    tc_resp_free(&r);

    /* 413 from the declared Content-Length alone (--max-body-bytes 65536):
     * headers only, not one body byte sent; the answer must come without
     * the daemon waiting for (or allocating) what the client declared. */
    long rss_before = rss_kb(g_pid);
    int fd = tc_connect(g_port);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const char *head = "POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       "Content-Type: application/json\r\nContent-Length: 200000000\r\n\r\n";
    ck_assert_int_eq(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
    ck_assert_int_eq(tc_read_on(fd, &r), 0);
    expect_error(&r, 413, NULL);
    tc_resp_free(&r);
    close(fd);
    long rss_after = rss_kb(g_pid);
    ck_assert_msg(rss_before > 0 && rss_after - rss_before < 4096,
                  "daemon RSS %ld kB -> %ld kB", rss_before, rss_after);

    /* A body without Content-Length (chunked) over the limit: the
     * connection is closed as the limit passes (MHD 0.9.75 cannot answer
     * mid-body), without a response */
    fd = tc_connect(g_port);
    ck_assert_int_ge(fd, 0);
    const char *chead = "POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    ck_assert_int_eq(send(fd, chead, strlen(chead), MSG_NOSIGNAL), (ssize_t)strlen(chead));
    char chunk[8192 + 16];
    int cl = snprintf(chunk, sizeof chunk, "2000\r\n");
    memset(chunk + cl, ' ', 8192);
    memcpy(chunk + cl + 8192, "\r\n", 2);
    for (int i = 0; i < 9; i++) /* 73,728 bytes > 65,536 */
        if (send(fd, chunk, (size_t)cl + 8194, MSG_NOSIGNAL) != cl + 8194)
            break;
    ck_assert_int_ne(tc_read_on(fd, &r), 0);
    tc_resp_free(&r);
    close(fd);

    /* the errors were counted by status */
    ck_assert_int_eq(tc_request(g_port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    ck_assert(wait_metric(g_port, "transformerd_requests_total{endpoint=\"/v1/translate\",status=\"400\"}", 20) >= 20);
    ck_assert(tc_metric_in(r.body, "transformerd_requests_total{endpoint=\"other\",status=\"404\"}") >= 1);
    tc_resp_free(&r);
}
END_TEST

START_TEST(test_api_key)
{
    pid_t pid;
    const char *args[] = {"--api-key", "s3cret", NULL};
    int port = start(args, "apikey", &pid);
    ck_assert_int_gt(port, 0);
    tc_resp r;
    const char *js = "{\"text\":\"a\"}";
    ck_assert_int_eq(tc_post_json(port, "/v1/translate", js, &r), 0);
    expect_error(&r, 401, NULL);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(port, "POST", "/v1/translate",
                                "Content-Type: application/json\r\nAuthorization: Bearer s3cre\r\n",
                                js, strlen(js), &r),
                     0);
    expect_error(&r, 401, NULL);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(port, "POST", "/v1/translate",
                                "Content-Type: application/json\r\nAuthorization: Bearer s3cret\r\n",
                                js, strlen(js), &r),
                     0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(port, "POST", "/v1/translate",
                                "Content-Type: application/json\r\nX-API-Key: s3cret\r\n", js,
                                strlen(js), &r),
                     0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(port, "/translate",
                                  "{\"q\":\"a\",\"source\":\"en\",\"target\":\"de\","
                                  "\"api_key\":\"s3cret\"}",
                                  &r),
                     0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    /* LibreTranslate: a wrong key is 403, a missing one 400 */
    ck_assert_int_eq(tc_post_json(port, "/translate",
                                  "{\"q\":\"a\",\"source\":\"en\",\"target\":\"de\","
                                  "\"api_key\":\"x\"}",
                                  &r),
                     0);
    expect_libre_error(&r, 403, "Invalid API key");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(port, "/detect", "{\"q\":\"a\",\"api_key\":\"s3cre\"}", &r), 0);
    expect_libre_error(&r, 403, "Invalid API key");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(port, "/translate",
                                  "{\"q\":\"a\",\"source\":\"en\",\"target\":\"de\"}", &r),
                     0);
    expect_libre_error(&r, 400, "get an API key");
    tc_resp_free(&r);
    /* the native API keeps 401 */
    ck_assert_int_eq(tc_post_json(port, "/v1/translate", "{\"text\":\"a\",\"api_key\":\"x\"}",
                                  &r),
                     0);
    expect_error(&r, 401, NULL);
    tc_resp_free(&r);
    /* near misses, each by every way a key is given: the key extended
     * (a comparison over the configured key's length alone accepts it), a
     * prefix, the last byte changed, another case, empty */
    const char *wrong[] = {"s3cretXYZ", "s3cret0", "s3cre", "s3creT", "S3cret", ""};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        char h[160], body[160];
        snprintf(h, sizeof h, "Content-Type: application/json\r\nX-API-Key: %s\r\n", wrong[i]);
        ck_assert_int_eq(tc_request(port, "POST", "/v1/translate", h, js, strlen(js), &r), 0);
        ck_assert_msg(r.status == 401, "X-API-Key '%s': %d", wrong[i], r.status);
        tc_resp_free(&r);
        snprintf(h, sizeof h, "Content-Type: application/json\r\nAuthorization: Bearer %s\r\n",
                 wrong[i]);
        ck_assert_int_eq(tc_request(port, "POST", "/v1/translate", h, js, strlen(js), &r), 0);
        ck_assert_msg(r.status == 401, "Bearer '%s': %d", wrong[i], r.status);
        tc_resp_free(&r);
        snprintf(body, sizeof body,
                 "{\"q\":\"a\",\"source\":\"en\",\"target\":\"de\",\"api_key\":\"%s\"}",
                 wrong[i]);
        ck_assert_int_eq(tc_post_json(port, "/translate", body, &r), 0);
        /* LibreTranslate: an empty key is a missing one (400), else 403 */
        ck_assert_msg(r.status == (*wrong[i] ? 403 : 400), "api_key '%s': %d", wrong[i],
                      r.status);
        tc_resp_free(&r);
    }
    ck_assert_int_eq(tc_request(port, "GET", "/health/ready", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
}
END_TEST

/* ---- 429 and 504 ----------------------------------------------------------- */

typedef struct async_req {
    pthread_t th;
    int port;
    const char *path;
    char *json;
    tc_resp r;
} async_req;

static void *async_main(void *p)
{
    async_req *a = p;
    tc_post_json(a->port, a->path, a->json, &a->r);
    return NULL;
}

/* As async_main, but the answer must come within 20 s. */
static void *async_main_20s(void *p)
{
    async_req *a = p;
    int fd = tc_connect(a->port);
    if (fd < 0)
        return NULL;
    struct timeval tv = {20, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char head[256];
    int hl = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n", a->path, strlen(a->json));
    if (send(fd, head, (size_t)hl, MSG_NOSIGNAL) == hl &&
        send(fd, a->json, strlen(a->json), MSG_NOSIGNAL) == (ssize_t)strlen(a->json))
        tc_read_on(fd, &a->r);
    close(fd);
    return NULL;
}

START_TEST(test_queue_full_and_timeout)
{
    pid_t pid;
    /* The first request's texts would wait 60 s for company, far beyond
     * the 1 s deadline: they are still queued when the second arrives, and
     * their 504 must come from the deadline, not from the batch that would
     * form after a minute (the client gives up after 20 s). */
    const char *args[] = {"--max-queue", "4", "--max-batch-texts", "4", "--batch-delay-ms",
                          "60000", "--request-timeout-s", "1", "--max-batch-size", "64", NULL};
    int port = start(args, "queue", &pid);
    ck_assert_int_gt(port, 0);
    async_req a = {.port = port, .path = "/v1/translate",
                   .json = strdup("{\"text\":[\"a\",\"b\",\"c\"]}")};
    pthread_create(&a.th, NULL, async_main_20s, &a);
    tc_resp r;
    int depth_seen = 0;
    for (int i = 0; i < 100 && !depth_seen; i++) {
        ck_assert_int_eq(tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
        depth_seen = tc_metric_in(r.body, "transformerd_queue_depth{model=\"marian_en_de\"}") == 3;
        tc_resp_free(&r);
        if (!depth_seen) {
            struct timespec ts = {0, 5000000L};
            nanosleep(&ts, NULL);
        }
    }
    ck_assert(depth_seen);
    ck_assert_int_eq(tc_post_json(port, "/v1/translate", "{\"text\":[\"d\",\"e\"]}", &r), 0);
    expect_error(&r, 429, NULL);
    char ra[16];
    ck_assert_ptr_nonnull(tc_header(&r, "Retry-After", ra, sizeof ra));
    ck_assert_int_ge(atoi(ra), 1);
    tc_resp_free(&r);
    pthread_join(a.th, NULL);
    expect_error(&a.r, 504, NULL);
    tc_resp_free(&a.r);
    free(a.json);
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
}
END_TEST

/* ---- start-up errors ------------------------------------------------------------ */

/* Runs the daemon with extra arguments (and an optional environment
 * assignment) on a free port; returns its exit status, its output in out. */
static int run_daemon_fail(const char *env, const char *args, char *out, size_t outlen)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s '%s' serve --model '%s' --threads 1 --host 127.0.0.1 "
             "--port 0 %s 2>&1 </dev/null", env ? env : "", TD_DAEMON, g_model, args);
    return run_capture(cmd, out, outlen);
}

START_TEST(test_startup_errors)
{
    char out[4096];
    /* the CPU keeps float32: asking for float16 weights there is an error */
    ck_assert_int_eq(run_daemon_fail(NULL, "--dtype float16", out, sizeof out), 1);
    ck_assert_msg(strstr(out, "needs --device cuda") != NULL, "%s", out);
    /* bfloat16 too, on a CPU without AVX512-BF16 or AMX-BF16 (TD_CPU_ISA=avx2
     * makes every CPU one) */
    ck_assert_int_eq(run_daemon_fail("TRANSFORMERD_DTYPE=bfloat16 TD_CPU_ISA=avx2", "", out,
                                     sizeof out), 1);
    ck_assert_msg(strstr(out, "needs --device cuda") != NULL, "%s", out);
    /* a bad value: rejected with the other flags, before anything loads (exit 2) */
    ck_assert_int_eq(run_daemon_fail(NULL, "--precision quarter", out, sizeof out), 2);
    ck_assert_msg(strstr(out, "expected full or half") != NULL, "%s", out);
}
END_TEST

/* ---- --max-beam and failing batches ------------------------------------------ */

START_TEST(test_max_beam)
{
    pid_t pid;
    const char *args[] = {"--max-beam", "16", "--max-batch-size", "2", NULL};
    int port = start(args, "maxbeam16", &pid);
    ck_assert_int_gt(port, 0);
    json_t *j = translate_ok(port, "{\"text\":\"the test.\",\"beam_size\":16,"
                                   "\"num_hypotheses\":16}");
    json_t *t = json_array_get(json_object_get(j, "translations"), 0);
    ck_assert_int_eq(json_array_size(json_object_get(t, "hypotheses")), 16);
    json_decref(j);
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);

    /* from the environment; the model's default beam (4) is capped to it */
    setenv("TRANSFORMERD_MAX_BEAM", "2", 1);
    const char *none[] = {NULL};
    port = start(none, "maxbeam2", &pid);
    unsetenv("TRANSFORMERD_MAX_BEAM");
    ck_assert_int_gt(port, 0);
    tc_resp r;
    ck_assert_int_eq(tc_post_json(port, "/v1/translate", "{\"text\":\"a\",\"beam_size\":3}", &r), 0);
    expect_error(&r, 400, "beam_size");
    tc_resp_free(&r);
    j = translate_ok(port, "{\"text\":\"the test.\"}");
    json_decref(j);
    j = translate_ok(port, "{\"text\":\"the test.\",\"beam_size\":2,\"num_hypotheses\":2}");
    json_decref(j);
    ck_assert_int_eq(tc_request(port, "GET", "/v1/models", NULL, NULL, 0, &r), 0);
    j = body_json(&r);
    json_t *m = json_array_get(json_object_get(j, "models"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(m, "limits"),
                                                        "max_beam_size")),
                     2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(m, "defaults"),
                                                        "beam_size")),
                     2);
    json_decref(j);
    tc_resp_free(&r);
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
}
END_TEST

/* TRANSFORMERD_TEST_FAIL_BATCHES makes every batch after the warm-up fail. */
START_TEST(test_failing_batches)
{
    const char *none[] = {NULL};
    pid_t pid;
    tc_resp r;
    /* an engine error: 500 for the request, the server stays ready */
    setenv("TRANSFORMERD_TEST_FAIL_BATCHES", "engine", 1);
    int port = start(none, "failengine", &pid);
    unsetenv("TRANSFORMERD_TEST_FAIL_BATCHES");
    ck_assert_int_gt(port, 0);
    ck_assert_int_eq(tc_post_json(port, "/v1/translate", "{\"text\":[\"a\",\"b c\"]}", &r), 0);
    expect_error(&r, 500, NULL);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(port, "/translate",
                                  "{\"q\":\"a\",\"source\":\"en\",\"target\":\"de\"}", &r),
                     0);
    expect_libre_error(&r, 500, "");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(port, "GET", "/health/ready", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    ck_assert(tc_metric_in(r.body, "transformerd_batches_failed_total{model=\"marian_en_de\"}") >= 2);
    ck_assert(wait_metric(port, "transformerd_requests_total{endpoint=\"/v1/translate\",status=\"500\"}", 1) == 1);
    ck_assert(tc_metric_in(r.body, "transformerd_ready") == 1);
    tc_resp_free(&r);
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);

    /* a device error: 500, then readiness 503 and translations refused */
    setenv("TRANSFORMERD_TEST_FAIL_BATCHES", "device", 1);
    port = start(none, "faildevice", &pid);
    unsetenv("TRANSFORMERD_TEST_FAIL_BATCHES");
    ck_assert_int_gt(port, 0);
    ck_assert_int_eq(tc_post_json(port, "/v1/translate", "{\"text\":\"a\"}", &r), 0);
    expect_error(&r, 500, NULL);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(port, "GET", "/health/ready", NULL, NULL, 0, &r), 0);
    expect_error(&r, 503, NULL);
    ck_assert_ptr_nonnull(strstr(r.body, "device_error"));
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(port, "GET", "/v2/health/ready", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 503);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(port, "GET", "/health/live", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(port, "/v1/translate", "{\"text\":\"a\"}", &r), 0);
    expect_error(&r, 503, NULL);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_post_json(port, "/translate",
                                  "{\"q\":\"a\",\"source\":\"en\",\"target\":\"de\"}", &r),
                     0);
    expect_libre_error(&r, 503, "device");
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    ck_assert(tc_metric_in(r.body, "transformerd_ready") == 0);
    tc_resp_free(&r);
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
}
END_TEST

/* Every histogram of a /metrics text is well-formed: its buckets, in the
 * order listed, never decrease, and the +Inf bucket equals _count. Returns
 * the number of histograms seen. */
static int check_histograms(const char *text)
{
    int n_hist = 0;
    char prev_key[512] = "";
    double prev = -1;
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < 511 ? len : 511), line);
        line = eol ? eol + 1 : NULL;
        char *b = strstr(buf, "_bucket{");
        if (buf[0] == '#' || !b)
            continue;
        char *le = strstr(b, "le=\"");
        char *close = strrchr(buf, '}');
        ck_assert_msg(le && close, "bucket without le: %s", buf);
        /* the series' key: name and labels without le */
        char key[512];
        char *q = strchr(le + 4, '"');
        ck_assert_ptr_nonnull(q);
        snprintf(key, sizeof key, "%.*s%s", (int)(le - buf), buf, q + 1);
        double v = strtod(close + 1, NULL);
        if (strcmp(key, prev_key) != 0) {
            snprintf(prev_key, sizeof prev_key, "%s", key);
            prev = -1;
            n_hist++;
        }
        ck_assert_msg(v >= prev, "histogram bucket decreases: %s (previous %g)", buf, prev);
        prev = v;
        if (!strncmp(le, "le=\"+Inf\"", 9)) {
            /* NAME_count{labels} equals the +Inf bucket (labels: those
             * before le, without its comma) */
            char count[512];
            const char *brace = strchr(buf, '{');
            int nl = (int)(le - brace - 1);
            if (nl <= 0)
                snprintf(count, sizeof count, "%.*s_count", (int)(b - buf), buf);
            else
                snprintf(count, sizeof count, "%.*s_count{%.*s}", (int)(b - buf), buf, nl - 1,
                         brace + 1);
            double want = tc_metric_in(text, count);
            ck_assert_msg(want == v, "%s: +Inf bucket %g, count %g", buf, v, want);
        }
    }
    return n_hist;
}

/* ---- concurrency ----------------------------------------------------------- */

#define N_CLIENTS 32
#define N_PER_CLIENT 20

static const char *const k_texts[] = {
    "\"a\"", "\"the test.\"", "\"se ro te an ar\"", "\"the d, c p n - : r f y b k m g l.\"",
    "\"er le in es al or an ar se ro te ri ed\"", "[\"a\",\"the test.\",\"te\"]",
    "\"s.\"", "\"the the the the the the the the\"",
};
static const char *const k_options[] = {
    "", ",\"beam_size\":1", ",\"beam_size\":2,\"num_hypotheses\":2", ",\"max_length\":5",
    ",\"return_tokens\":true", ",\"length_penalty\":0.5,\"beam_size\":3",
};
#define N_TEXTS ((int)(sizeof k_texts / sizeof k_texts[0]))
#define N_VARIANTS (N_TEXTS * (int)(sizeof k_options / sizeof k_options[0]))

static char *variant(int v)
{
    char *s = malloc(512);
    snprintf(s, 512, "{\"text\":%s%s}", k_texts[v % N_TEXTS], k_options[v / N_TEXTS]);
    return s;
}

static json_t *g_expected[N_VARIANTS];
static int g_conc_port; /* the daemon the clients of test_concurrency call */

typedef struct client {
    pthread_t th;
    int id, mismatches, failures;
} client;

static void *client_main(void *p)
{
    client *c = p;
    /* staggered arrivals: sentences join running decodes at different steps */
    struct timespec st = {0, (long)(c->id % 7) * 3000000L};
    nanosleep(&st, NULL);
    for (int k = 0; k < N_PER_CLIENT; k++) {
        int v = (c->id * 7 + k * 5) % N_VARIANTS;
        char *js = variant(v);
        tc_resp r;
        if (tc_post_json(g_conc_port, "/v1/translate", js, &r) != 0 || r.status != 200) {
            c->failures++;
        } else {
            json_t *j = body_json(&r);
            if (!j || !same_response(j, g_expected[v])) {
                c->mismatches++;
                fprintf(stderr, "mismatch for %s:\n  got  %s\n", js, r.body);
            }
            json_decref(j);
        }
        tc_resp_free(&r);
        free(js);
    }
    return NULL;
}

/* _i 0: the main daemon; 1: a daemon with --short-steps 1 (steps of the
 * shortest texts only between the steps of every row), whose answers are
 * the same as the main daemon's one by one. */
START_TEST(test_concurrency)
{
    tc_resp r;
    pid_t pid = 0;
    g_conc_port = g_port;
    if (_i == 1) {
        const char *args[] = {"--short-steps", "1", NULL};
        g_conc_port = start(args, "short_steps", &pid);
        ck_assert_int_gt(g_conc_port, 0);
    }
    ck_assert_int_eq(tc_request(g_conc_port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    double b1_before = tc_metric_in(r.body, "transformerd_batch_size_bucket{model=\"marian_en_de\",le=\"1\"}");
    double n_before = tc_metric_in(r.body, "transformerd_batch_size_count{model=\"marian_en_de\"}");
    tc_resp_free(&r);
    for (int v = 0; v < N_VARIANTS; v++) {
        char *js = variant(v);
        g_expected[v] = translate_ok(g_port, js);
        free(js);
    }
    static client cl[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++) {
        cl[i].id = i;
        ck_assert_int_eq(pthread_create(&cl[i].th, NULL, client_main, &cl[i]), 0);
    }
    int mism = 0, fail = 0;
    for (int i = 0; i < N_CLIENTS; i++) {
        pthread_join(cl[i].th, NULL);
        mism += cl[i].mismatches;
        fail += cl[i].failures;
    }
    for (int v = 0; v < N_VARIANTS; v++)
        json_decref(g_expected[v]);
    ck_assert_int_eq(fail, 0);
    ck_assert_int_eq(mism, 0);
    ck_assert_int_eq(tc_request(g_conc_port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    double b1 = tc_metric_in(r.body, "transformerd_batch_size_bucket{model=\"marian_en_de\",le=\"1\"}") - b1_before;
    double n = tc_metric_in(r.body, "transformerd_batch_size_count{model=\"marian_en_de\"}") - n_before;
    double short_steps =
        tc_metric_in(r.body, "transformerd_decode_short_steps_total{model=\"marian_en_de\"}");
    ck_assert_int_ge(check_histograms(r.body), 2);
    tc_resp_free(&r);
    if (_i == 0) {
        ck_assert_msg(short_steps == 0, "short steps %g without --short-steps", short_steps);
    } else {
        ck_assert_msg(short_steps > 0, "no step of the shortest texts only");
        kill(pid, SIGTERM);
        ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
    }
    /* some batches held more than one sentence */
    ck_assert_msg(n > b1, "batches %g, of them single %g", n, b1);
}
END_TEST

/* --scheduler batch waits up to --batch-delay-ms for company: a request
 * waits in the queue until a second comes (the batch full at 2), and the
 * two run as one batch of two, never as two of one. The delay (20 s) is a
 * bound a full batch never waits for. */
START_TEST(test_batch_delay_gathers)
{
    pid_t pid;
    const char *args[] = {"--scheduler", "batch", "--batch-delay-ms", "20000",
                          "--max-batch-size", "2", "--workers", "1", NULL};
    int port = start(args, "batch_delay", &pid);
    ck_assert_int_gt(port, 0);
    tc_resp r;
    ck_assert_int_eq(tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    double n0 = tc_metric_in(r.body, "transformerd_batch_size_count{model=\"marian_en_de\"}");
    double s0 = tc_metric_in(r.body, "transformerd_batch_size_sum{model=\"marian_en_de\"}");
    tc_resp_free(&r);
    async_req a[2] = {{.port = port, .path = "/v1/translate", .json = strdup("{\"text\":\"Hello world\"}")},
                      {.port = port, .path = "/v1/translate", .json = strdup("{\"text\":\"the test.\"}")}};
    /* the first, then the second once the first waits in the queue (a
     * batcher that does not wait would have run it alone by then) */
    ck_assert_int_eq(pthread_create(&a[0].th, NULL, async_main, &a[0]), 0);
    double depth = 0;
    for (double end = tc_now() + 60; tc_now() < end && depth != 1;) {
        ck_assert_int_eq(tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
        depth = tc_metric_in(r.body, "transformerd_queue_depth{model=\"marian_en_de\"}");
        tc_resp_free(&r);
        if (depth != 1)
            tc_sleep_ms(5);
    }
    ck_assert_msg(depth == 1, "the first request never waited in the queue");
    /* and it still waits a moment later: a worker that does not wait for
     * company would have taken it by then (the correct one keeps it for up
     * to 20 s, so this pause cannot fail it) */
    tc_sleep_ms(300);
    ck_assert_int_eq(tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    depth = tc_metric_in(r.body, "transformerd_queue_depth{model=\"marian_en_de\"}");
    tc_resp_free(&r);
    ck_assert_msg(depth == 1, "the first request left the queue alone (depth %g)", depth);
    ck_assert_int_eq(pthread_create(&a[1].th, NULL, async_main, &a[1]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(a[i].th, NULL);
        ck_assert_msg(a[i].r.status == 200, "%d %s", a[i].r.status, a[i].r.body ? a[i].r.body : "");
        tc_resp_free(&a[i].r);
        free(a[i].json);
    }
    ck_assert_int_eq(tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    double n = tc_metric_in(r.body, "transformerd_batch_size_count{model=\"marian_en_de\"}") - n0;
    double sum = tc_metric_in(r.body, "transformerd_batch_size_sum{model=\"marian_en_de\"}") - s0;
    tc_resp_free(&r);
    ck_assert_msg(n == 1 && sum == 2, "%g batches of %g sentences in all, want one of two", n, sum);
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
}
END_TEST

/* ---- in-flight scheduling ------------------------------------------------------ */

/* Records the order in which async requests complete. */
static int g_done_order[8], g_n_done;
static pthread_mutex_t g_done_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct ordered_req {
    async_req a;
    int id;
} ordered_req;

static void *ordered_main(void *p)
{
    ordered_req *o = p;
    tc_post_json(o->a.port, o->a.path, o->a.json, &o->a.r);
    pthread_mutex_lock(&g_done_mu);
    g_done_order[g_n_done++] = o->id;
    pthread_mutex_unlock(&g_done_mu);
    return NULL;
}

/* The running-rows gauge once it is positive (want_positive) or 0, or
 * exactly `exact` when exact > 0 (polls up to 10 s). */
static double wait_rows_eq(int port, int want_positive, double exact)
{
    double v = -1;
    for (int i = 0; i < 500; i++) {
        tc_resp r;
        if (tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r) == 0) {
            v = tc_metric_in(r.body, "transformerd_running_rows{model=\"marian_en_de\"}");
            tc_resp_free(&r);
            if (exact > 0 ? v == exact : want_positive ? v > 0 : v == 0)
                break;
        }
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    return v;
}

static double wait_rows(int port, int want_positive)
{
    return wait_rows_eq(port, want_positive, 0);
}

/* A short request sent while a long one decodes (one worker, 10 ms a step,
 * the long one 120 steps) joins the running decode and completes first;
 * under --scheduler batch the same short request waits for the long one.
 * Decided by the order of completion, not by time. */
START_TEST(test_inflight_short_overtakes_long)
{
    for (int mode = 0; mode < 2; mode++) {
        pid_t pid;
        /* mode 0: the default scheduler, which is inflight */
        const char *args[] = {"--test-step-delay-ms", mode == 0 ? "10" : "0",
                              "--max-batch-size", "4", mode == 0 ? NULL : "--scheduler",
                              "batch", NULL};
        int port = start(args, mode == 0 ? "inflight_order" : "batch_order", &pid);
        ck_assert_int_gt(port, 0);
        g_n_done = 0;
        ordered_req lg = {.a = {.port = port, .path = "/v1/translate",
                                .json = strdup("{\"text\":\"Hello world\",\"max_length\":120,"
                                               "\"beam_size\":1,\"return_tokens\":true}")},
                          .id = 1};
        ordered_req sh = {.a = {.port = port, .path = "/v1/translate",
                                .json = strdup("{\"text\":\"a\",\"max_length\":2,"
                                               "\"beam_size\":2}")},
                          .id = 2};
        pthread_create(&lg.a.th, NULL, ordered_main, &lg);
        if (mode == 0) {
            /* the long one is decoding */
            ck_assert(wait_rows(port, 1) > 0);
            pthread_create(&sh.a.th, NULL, ordered_main, &sh);
            pthread_join(sh.a.th, NULL);
            pthread_join(lg.a.th, NULL);
            ck_assert_int_eq(g_n_done, 2);
            ck_assert_msg(g_done_order[0] == 2, "the short request finished after the long one");
        } else {
            pthread_join(lg.a.th, NULL);
        }
        ck_assert_int_eq(lg.a.r.status, 200);
        json_t *j = body_json(&lg.a.r);
        ck_assert_int_eq(json_array_size(json_object_get(
                             json_array_get(json_object_get(j, "translations"), 0), "tokens")),
                         120);
        json_decref(j);
        if (mode == 0) {
            ck_assert_int_eq(sh.a.r.status, 200);
            tc_resp_free(&sh.a.r);
        }
        tc_resp_free(&lg.a.r);
        free(lg.a.json);
        free(sh.a.json);
        tc_resp r;
        ck_assert_int_eq(tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
        double steps = tc_metric_in(r.body, "transformerd_decode_steps_total{model=\"marian_en_de\"}");
        ck_assert_msg(mode == 0 ? steps >= 120 : steps == 0, "decode steps %g", steps);
        tc_resp_free(&r);
        kill(pid, SIGTERM);
        ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
    }
}
END_TEST

/* A client that leaves mid-decode frees its rows (the gauge drops to 0,
 * the sentence counted as gone) and the next answers are unaffected. */
START_TEST(test_inflight_client_leaves)
{
    pid_t pid;
    const char *args[] = {"--test-step-delay-ms", "10", NULL};
    int port = start(args, "inflight_gone", &pid);
    ck_assert_int_gt(port, 0);
    json_t *before = translate_ok(port, "{\"text\":[\"the test.\",\"Hello world\"],"
                                        "\"beam_size\":3,\"return_tokens\":true}");
    int fd = tc_connect(port);
    ck_assert_int_ge(fd, 0);
    const char *body = "{\"text\":\"Hello world\",\"max_length\":120,\"beam_size\":4}";
    char req[512];
    int n = snprintf(req, sizeof req, "POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    ck_assert(wait_rows_eq(port, 1, 4) == 4);
    close(fd);
    ck_assert_msg(wait_rows(port, 0) == 0, "the rows of a client that left stay");
    ck_assert(wait_metric(port, "transformerd_jobs_dropped_total{model=\"marian_en_de\",reason=\"gone\"}", 1) >= 1);
    json_t *after = translate_ok(port, "{\"text\":[\"the test.\",\"Hello world\"],"
                                       "\"beam_size\":3,\"return_tokens\":true}");
    ck_assert(same_response(before, after));
    json_decref(before);
    json_decref(after);
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
}
END_TEST

/* A client that leaves while another client's sentence runs beside its
 * own cancels its own sentence, never the other: the one that stays gets
 * the answer it gets alone, and the rows drop to its own (3) until it
 * ends. Both orders of joining, so that neither the first nor the last
 * live job is the one taken by mistake. */
START_TEST(test_inflight_other_client_stays)
{
    pid_t pid;
    /* one worker: both sentences in one running decode */
    const char *args[] = {"--test-step-delay-ms", "20", "--workers", "1", NULL};
    int port = start(args, "inflight_two", &pid);
    ck_assert_int_gt(port, 0);
    const char *stay_json = "{\"text\":\"Hello world\",\"max_length\":128,\"beam_size\":3,"
                            "\"return_tokens\":true}";
    json_t *alone = translate_ok(port, stay_json);
    const char *body = "{\"text\":\"the test.\",\"max_length\":128,\"beam_size\":4}";
    char req[512];
    int n = snprintf(req, sizeof req, "POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    for (int leaver_first = 0; leaver_first < 2; leaver_first++) {
        async_req stay = {.port = port, .path = "/v1/translate", .json = strdup(stay_json)};
        int fd = -1;
        if (leaver_first) {
            fd = tc_connect(port);
            ck_assert_int_ge(fd, 0);
            ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
            ck_assert(wait_rows_eq(port, 1, 4) == 4);
        }
        pthread_create(&stay.th, NULL, async_main, &stay);
        ck_assert(wait_rows_eq(port, 1, leaver_first ? 7 : 3) == (leaver_first ? 7 : 3));
        if (!leaver_first) {
            fd = tc_connect(port);
            ck_assert_int_ge(fd, 0);
            ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
            ck_assert(wait_rows_eq(port, 1, 7) == 7);
        }
        close(fd);
        double rows = wait_rows_eq(port, 1, 3);
        ck_assert_msg(rows == 3, "order %d: %g rows after the client left, want the 3 of the "
                                 "one that stays", leaver_first, rows);
        pthread_join(stay.th, NULL);
        ck_assert_msg(stay.r.status == 200, "order %d: %d %s", leaver_first, stay.r.status,
                      stay.r.body ? stay.r.body : "");
        json_t *got = body_json(&stay.r);
        ck_assert_msg(same_response(alone, got), "order %d: the client that stayed got %s",
                      leaver_first, stay.r.body);
        json_decref(got);
        tc_resp_free(&stay.r);
        free(stay.json);
        ck_assert(wait_rows(port, 0) == 0);
    }
    ck_assert(wait_metric(port, "transformerd_jobs_dropped_total{model=\"marian_en_de\",reason=\"gone\"}", 2) >= 2);
    json_decref(alone);
    kill(pid, SIGTERM);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
}
END_TEST

/* ---- SIGTERM ----------------------------------------------------------------- */

START_TEST(test_sigterm_drains)
{
    pid_t pid;
    /* 20 ms a step: the requests are still running when the signal comes */
    const char *args[] = {"--batch-delay-ms", "300", "--max-batch-size", "4",
                          "--test-step-delay-ms", "20", NULL};
    int port = start(args, "sigterm", &pid);
    ck_assert_int_gt(port, 0);
    int ka = tc_connect(port); /* kept alive across the signal */
    ck_assert_int_ge(ka, 0);
    tc_resp r;
    ck_assert_int_eq(tc_request_on(ka, "GET", "/health/ready", &r), 0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    enum { N = 12 };
    static async_req a[N];
    for (int i = 0; i < N; i++) {
        a[i].port = port;
        a[i].path = "/v1/translate";
        a[i].json = variant(i);
        pthread_create(&a[i].th, NULL, async_main, &a[i]);
    }
    /* wait until work is queued, then signal */
    int queued = 0;
    for (int i = 0; i < 200 && !queued; i++) {
        ck_assert_int_eq(tc_request(port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
        queued = tc_metric_in(r.body, "transformerd_queue_depth{model=\"marian_en_de\"}") > 0;
        tc_resp_free(&r);
        struct timespec ts = {0, 5000000L};
        nanosleep(&ts, NULL);
    }
    ck_assert(queued);
    /* A request whose body is half sent holds the daemon in its drain (it
     * waits for accepted requests), so the checks below are not a race. */
    int slow = tc_connect(port);
    ck_assert_int_ge(slow, 0);
    const char *head = "POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       "Content-Type: application/json\r\nContent-Length: 12\r\n\r\n{\"text\"";
    ck_assert_int_eq(send(slow, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
    struct timespec ts = {0, 100000000L};
    nanosleep(&ts, NULL);
    kill(pid, SIGTERM);
    /* every queued and running request completes */
    for (int i = 0; i < N; i++) {
        pthread_join(a[i].th, NULL);
        ck_assert_msg(a[i].r.status == 200, "request %d: %d %s", i, a[i].r.status,
                      a[i].r.body ? a[i].r.body : "");
        tc_resp_free(&a[i].r);
        free(a[i].json);
    }
    /* readiness on an existing connection: draining (the signal is
     * asynchronous: asked until the daemon has seen it, at most 5 s) */
    for (int i = 0; i < 250; i++) {
        ck_assert_int_eq(tc_request_on(ka, "GET", "/health/ready", &r), 0);
        if (r.status == 503)
            break;
        tc_resp_free(&r);
        struct timespec ts5 = {0, 20000000L};
        nanosleep(&ts5, NULL);
    }
    expect_error(&r, 503, NULL);
    tc_resp_free(&r);
    close(ka);
    /* no new connections are accepted */
    ck_assert_int_lt(tc_request(port, "GET", "/health/live", NULL, NULL, 0, &r), 0);
    tc_resp_free(&r);
    /* the late request is refused with 503, not dropped */
    ck_assert_int_eq(send(slow, ":\"a\"}", 5, MSG_NOSIGNAL), 5);
    ck_assert_int_eq(tc_read_on(slow, &r), 0);
    expect_error(&r, 503, NULL);
    tc_resp_free(&r);
    close(slow);
    ck_assert_int_eq(tc_daemon_wait(pid, 30), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("server");
    TCase *tc = tcase_create("http");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_health_and_info);
    tcase_add_test(tc, test_translate);
    tcase_add_test(tc, test_offsets);
    tcase_add_test(tc, test_list_order);
    tcase_add_test(tc, test_libretranslate);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_api_key);
    tcase_add_test(tc, test_queue_full_and_timeout);
    tcase_add_test(tc, test_max_beam);
    tcase_add_test(tc, test_startup_errors);
    tcase_add_test(tc, test_failing_batches);
    tcase_add_loop_test(tc, test_concurrency, 0, 2);
    tcase_add_test(tc, test_batch_delay_gathers);
    tcase_add_test(tc, test_inflight_short_overtakes_long);
    tcase_add_test(tc, test_inflight_client_leaves);
    tcase_add_test(tc, test_inflight_other_client_stays);
    tcase_add_test(tc, test_sigterm_drains);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* These daemons are for the queue, the scheduler and the engine: a
     * repeated text must run again, not come from the translation cache
     * (test_cache tests that). Every daemon reads it from its environment. */
    setenv("TRANSFORMERD_CACHE_BYTES", "0", 1);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_server_test.XXXXXX");
    if (!mkdtemp(g_tmp) || make_model_dir() != 0) {
        fprintf(stderr, "cannot set up the model directory in %s\n", g_tmp);
        return 1;
    }
    const char *args[] = {"--max-batch-size", "16",  "--batch-delay-ms",  "10",
                          "--max-batch-texts", "8",  "--max-body-bytes", "65536",
                          "--max-input-tokens", "48", "--http-threads", "4", NULL};
    g_port = start(args, "main", &g_pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s/main.log\n", g_tmp);
        return 1;
    }
    return tc_run_suite(suite(), g_pid, g_tmp);
}
