/*
 * test_server_conventions.c - the daemon's conventions end to end on
 * loopback: GET /openapi.json's enums and limits equal the loaded model
 * and the flags, /version equals /v1/models' and the build_info metric,
 * the process_* metrics, histogram buckets ending at the configured
 * limits, every documented path's methods those the server routes (its
 * Allow), and the server fixes schemathesis found (a beam widened to
 * num_hypotheses, NUL in texts and in unknown keys, field types of
 * LibreTranslate's /translate, a file part without a file name; the
 * glossary routes: an optional field null, a PATCH past 32 dictionaries,
 * their early errors in DeepL's shape).
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "server/client.h"
#include "server/suite.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif

static int g_port = -1;
static pid_t g_pid = -1;
static char g_tmp[256];

static json_t *get_json(const char *path)
{
    tc_resp r;
    ck_assert_int_eq(tc_request(g_port, "GET", path, NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je);
    ck_assert_msg(j != NULL, "%s: not JSON: %s", path, r.body);
    tc_resp_free(&r);
    return j;
}

static json_t *at(json_t *v, const char *path)
{
    char key[128];
    while (v && *path) {
        size_t n = strcspn(path, "/");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        for (char *k = key; *k; k++)
            if (*k == '~')
                *k = '/'; /* "text~html": the media type text/html */
        path += n + (path[n] == '/');
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(key)) : json_object_get(v, key);
    }
    ck_assert_msg(v != NULL, "no %s", key);
    return v;
}

static long at_int(json_t *v, const char *path)
{
    json_t *x = at(v, path);
    ck_assert_msg(json_is_integer(x), "%s is not an integer", path);
    return (long)json_integer_value(x);
}

static int has_string(json_t *arr, const char *s)
{
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (!strcmp(json_string_value(json_array_get(arr, i)), s))
            return 1;
    return 0;
}

START_TEST(test_openapi_limits)
{
    json_t *models = get_json("/v1/models");
    json_t *m = at(models, "models/0");
    json_t *d = get_json("/openapi.json");
    json_t *tr = at(d, "components/schemas/TranslateRequest/properties");
    ck_assert_int_eq(at_int(tr, "beam_size/maximum"), 6);         /* --max-beam */
    ck_assert_int_eq(at_int(tr, "num_hypotheses/maximum"), 6);
    ck_assert_int_eq(at_int(tr, "text/oneOf/1/maxItems"), 5);     /* --max-batch-texts */
    ck_assert_int_eq(at_int(tr, "max_length/maximum"), at_int(m, "limits/max_length"));
    ck_assert_int_eq(at_int(at(d, "components/schemas/TranslateRequest"), "x-max-input-tokens"),
                     40);
    json_t *names = at(tr, "model/enum");
    ck_assert_int_eq(json_array_size(names), 1);
    ck_assert_str_eq(json_string_value(json_array_get(names, 0)), "marian_en_de");
    ck_assert_int_eq(at_int(tr, "attention_layers/items/minimum"),
                     -at_int(m, "architecture/decoder_layers"));
    ck_assert_int_eq(at_int(tr, "attention_layers/items/maximum"),
                     at_int(m, "architecture/decoder_layers") - 1);
    ck_assert_int_eq(at_int(tr, "attention_heads/items/maximum"),
                     at_int(m, "architecture/decoder_attention_heads") - 1);
    /* num_hypotheses <= beam_size: one alternative per beam size */
    json_t *any = at(d, "components/schemas/TranslateRequest/allOf/0/anyOf");
    ck_assert_int_eq(json_array_size(any), 6);
    ck_assert_int_eq(at_int(any, "2/properties/num_hypotheses/maximum"), 3);
    json_t *lr = at(d, "components/schemas/LibreRequest/properties");
    ck_assert_int_eq(at_int(lr, "alternatives/maximum"), 5);      /* --max-beam - 1 */
    ck_assert_int_eq(at_int(lr, "q/oneOf/1/maxItems"), 5);
    ck_assert(has_string(at(lr, "source/enum"), "en") && has_string(at(lr, "source/enum"), "auto"));
    ck_assert(has_string(at(lr, "target/enum"), "de") && !has_string(at(lr, "target/enum"), "auto"));
    /* /translate_file detects the file's language with auto */
    ck_assert(has_string(at(d, "components/schemas/LibreFileRequest/properties/source/enum"),
                         "auto"));
    /* each of the native API's pairs names its model */
    json_t *pairs = at(d, "components/schemas/TranslateRequest/allOf/1/anyOf");
    ck_assert_int_ge(json_array_size(pairs), 1);
    for (size_t i = 0; i < json_array_size(pairs); i++) {
        json_t *me = at(json_array_get(pairs, i), "properties/model/enum");
        ck_assert_msg(json_array_size(me) == 1 && has_string(names, json_string_value(
                                                                    json_array_get(me, 0))),
                      "pair %zu names no model", i);
    }
    ck_assert_str_eq(json_string_value(at(d, "info/version")),
                     json_string_value(at(models, "server/version")));
    /* every path the server routes, GET / as HTML, the error objects */
    const char *paths[] = {"/v1/translate", "/translate", "/detect", "/translate_file",
                           "/download_file/{name}", "/suggest", "/languages",
                           "/frontend/settings", "/health", "/v1/models", "/version",
                           "/health/live", "/health/ready", "/v2/health/live",
                           "/v2/health/ready", "/metrics", "/openapi.json", "/",
                           "/web/app.js", "/web/app.css", "/web/icon.svg", "/v2/translate",
                           "/v2/languages", "/v2/usage", "/v2/document",
                           "/v2/document/{document_id}", "/v2/document/{document_id}/result",
                           "/v2/glossaries", "/v2/glossaries/{glossary_id}",
                           "/v2/glossaries/{glossary_id}/entries", "/v3/glossaries",
                           "/v3/glossaries/{glossary_id}", "/v3/glossaries/{glossary_id}/dictionaries",
                           "/v3/glossaries/{glossary_id}/entries", "/v2/glossary-language-pairs"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        ck_assert_msg(json_object_get(at(d, "paths"), paths[i]) != NULL, "%s", paths[i]);
    json_t *ps = json_object_get(d, "paths");
    ck_assert_ptr_nonnull(at(json_object_get(ps, "/"), "get/responses/200/content/text~html"));
    json_t *tresp = at(json_object_get(ps, "/v1/translate"), "post/responses");
    const char *codes[] = {"200", "400", "401", "413", "415", "422", "429", "500", "503", "504"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        ck_assert_msg(json_object_get(tresp, codes[i]) != NULL, "/v1/translate %s", codes[i]);
    /* DeepL's languages in its codes, from the model (en -> de) */
    json_t *dl_tgt = at(d, "components/schemas/DeepLTranslateRequest/properties/target_lang/enum");
    ck_assert_int_eq(json_array_size(dl_tgt), 1);
    ck_assert_str_eq(json_string_value(json_array_get(dl_tgt, 0)), "DE");
    json_t *dl_src = at(d, "components/schemas/DeepLTranslateRequest/properties/source_lang/enum");
    ck_assert_int_eq(json_array_size(dl_src), 2); /* EN, and null: detected */
    ck_assert_str_eq(json_string_value(json_array_get(dl_src, 0)), "EN");
    ck_assert(json_is_null(json_array_get(dl_src, 1)));
    ck_assert_str_eq(json_string_value(at(d, "components/schemas/DeepLDocumentRequest/properties/"
                                             "source_lang/enum/0")),
                     "EN");
    ck_assert_ptr_nonnull(at(d, "components/responses/NotFound"));
    ck_assert_ptr_nonnull(at(d, "components/responses/MethodNotAllowed/headers/Allow"));
    ck_assert_ptr_nonnull(at(d, "components/schemas/Error/properties/error/properties/param"));
    ck_assert_str_eq(json_string_value(at(d, "components/schemas/LibreError/properties/error/type")),
                     "string");
    ck_assert_ptr_nonnull(at(d, "components/schemas/Translation/properties/source_offsets"));
    json_decref(d);
    json_decref(models);
}
END_TEST

START_TEST(test_version_and_metrics)
{
    json_t *v = get_json("/version");
    json_t *models = get_json("/v1/models");
    const char *ver = json_string_value(at(v, "version")), *commit = json_string_value(at(v, "commit"));
    ck_assert_str_eq(ver, json_string_value(at(models, "server/version")));
    ck_assert_str_eq(commit, json_string_value(at(models, "server/commit")));
    ck_assert(strlen(ver) >= 5 && strchr(ver, '.'));
    /* some traffic, so that the batch histograms have a count */
    tc_resp r;
    ck_assert_int_eq(tc_post_json(g_port, "/v1/translate", "{\"text\":[\"Hello\",\"world\"]}", &r), 0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(g_port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    char series[512];
    snprintf(series, sizeof series, "transformerd_build_info{version=\"%s\",commit=\"%s\"}", ver,
             commit);
    ck_assert_msg(tc_metric_in(r.body, series) == 1, "%s missing", series);
    double cpu = tc_metric_in(r.body, "process_cpu_seconds_total");
    double rss = tc_metric_in(r.body, "process_resident_memory_bytes");
    double vsz = tc_metric_in(r.body, "process_virtual_memory_bytes");
    double start = tc_metric_in(r.body, "process_start_time_seconds");
    double fds = tc_metric_in(r.body, "process_open_fds");
    double maxfds = tc_metric_in(r.body, "process_max_fds");
    ck_assert_msg(cpu >= 0, "process_cpu_seconds_total");
    ck_assert_msg(rss > 1e6 && vsz >= rss, "rss %g vsz %g", rss, vsz);
    double now = (double)time(NULL);
    ck_assert_msg(start > now - 3600 && start <= now + 5, "start %f now %f", start, now);
    ck_assert_msg(fds >= 3 && fds <= maxfds, "open fds %g max %g", fds, maxfds);
    ck_assert_ptr_nonnull(strstr(r.body, "# TYPE process_cpu_seconds_total counter\n"));
    /* the buckets end at --max-batch-size 48 and --max-batch-tokens 1000 */
    ck_assert_msg(tc_metric_in(r.body, "transformerd_batch_size_bucket{model=\"marian_en_de\",le=\"48\"}") >= 1, "le=48");
    ck_assert_msg(tc_metric_in(r.body, "transformerd_batch_size_bucket{model=\"marian_en_de\",le=\"32\"}") >= 0, "le=32");
    ck_assert_ptr_null(strstr(r.body, "transformerd_batch_size_bucket{model=\"marian_en_de\",le=\"64\"}"));
    ck_assert_msg(tc_metric_in(r.body, "transformerd_batch_tokens_bucket{model=\"marian_en_de\",le=\"1000\"}") >= 1, "le=1000");
    ck_assert_msg(tc_metric_in(r.body, "transformerd_batch_tokens_bucket{model=\"marian_en_de\",le=\"256\"}") >= 0, "le=256");
    ck_assert_ptr_null(strstr(r.body, "transformerd_batch_tokens_bucket{model=\"marian_en_de\",le=\"1024\"}"));
    tc_resp_free(&r);
    json_decref(v);
    json_decref(models);
}
END_TEST

static int post_status(const char *path, const char *json)
{
    tc_resp r;
    ck_assert_int_eq(tc_post_json(g_port, path, json, &r), 0);
    int st = r.status;
    tc_resp_free(&r);
    return st;
}

START_TEST(test_schemathesis_findings)
{
    /* without beam_size the beam widens to num_hypotheses (model: 4) */
    tc_resp r;
    ck_assert_int_eq(
        tc_post_json(g_port, "/v1/translate", "{\"text\":\"Hello\",\"num_hypotheses\":6}", &r), 0);
    ck_assert_int_eq(r.status, 200);
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je);
    ck_assert_int_eq(json_array_size(at(j, "translations/0/hypotheses")), 6);
    json_decref(j);
    tc_resp_free(&r);
    /* an explicit beam below num_hypotheses is still a contradiction */
    ck_assert_int_eq(post_status("/v1/translate",
                                 "{\"text\":\"Hello\",\"beam_size\":2,\"num_hypotheses\":3}"),
                     400);
    /* NUL is a character of a text; a model name with one is no model */
    ck_assert_int_eq(post_status("/v1/translate", "{\"text\":\"a\\u0000b\"}"), 200);
    ck_assert_int_eq(post_status("/v1/translate",
                                 "{\"text\":\"a\",\"model\":\"marian_en_de\\u0000x\"}"),
                     400);
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"a\\u0000b\",\"source\":\"en\","
                                               "\"target\":\"de\"}"),
                     200);
    /* an unknown key with a NUL is ignored like any unknown key */
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\","
                                               "\"target\":\"de\",\"x\\u0000\\\\u0000\":1}"),
                     200);
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\\u0000x\","
                                               "\"target\":\"de\"}"),
                     400);
    /* an integer past int64 in an unknown key is ignored (Flask reads it) */
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\","
                                               "\"target\":\"de\",\"x\":[-1841875414553269460302561289]}"),
                     200);
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\","
                                               "\"target\":\"de\",\"alternatives\":18418754145532694603}"),
                     400);
    /* length_penalty is held to -10..10 before it is rounded to float */
    ck_assert_int_eq(post_status("/v1/translate",
                                 "{\"text\":\"Hello\",\"length_penalty\":10.000000000000002}"),
                     400);
    ck_assert_int_eq(post_status("/v1/translate", "{\"text\":\"Hello\",\"length_penalty\":-10}"),
                     200);
    /* format "" is text, as LibreTranslate reads it */
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\","
                                               "\"target\":\"de\",\"format\":\"\"}"),
                     200);
    /* field types */
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\","
                                               "\"target\":\"de\",\"api_key\":5}"),
                     400);
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\","
                                               "\"target\":\"de\",\"api_key\":null}"),
                     200);
    ck_assert_int_eq(post_status("/detect", "{\"q\":\"Hello\",\"api_key\":[]}"), 400);
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\","
                                               "\"target\":\"de\",\"alternatives\":{}}"),
                     400);
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\","
                                               "\"target\":\"de\",\"alternatives\":null}"),
                     200);
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\","
                                               "\"target\":\"de\",\"format\":null}"),
                     400);
    ck_assert_int_eq(post_status("/translate", "{\"q\":\"Hello\",\"source\":\"en\","
                                               "\"target\":\"de\",\"format\":[]}"),
                     400);
    /* a file part without a file name: its Content-Type names the format */
    const char *mp = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n"
                     "Content-Type: text/plain\r\n\r\nHello world\r\n"
                     "--XyZ\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nen\r\n"
                     "--XyZ\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\nde\r\n"
                     "--XyZ--\r\n";
    ck_assert_int_eq(tc_request(g_port, "POST", "/translate_file",
                                "Content-Type: multipart/form-data; boundary=XyZ\r\n", mp,
                                strlen(mp), &r),
                     0);
    ck_assert_msg(r.status == 200 && strstr(r.body, ".file.txt\""), "%d %s", r.status, r.body);
    tc_resp_free(&r);
}
END_TEST

/* Every path of the document, asked OPTIONS (its parameters an id): the
 * methods of its Allow, less HEAD and OPTIONS, are the document's. */
START_TEST(test_openapi_methods_routed)
{
    json_t *d = get_json("/openapi.json");
    const char *path;
    json_t *ops;
    int n = 0;
    json_object_foreach(json_object_get(d, "paths"), path, ops)
    {
        char concrete[256] = "";
        for (const char *p = path; *p;) {
            if (*p == '{') { /* any segment: an id of the glossaries' shape */
                strncat(concrete, "00000000-0000-4000-8000-000000000000",
                        sizeof concrete - strlen(concrete) - 1);
                p = strchr(p, '}') + 1;
            } else {
                strncat(concrete, p++, 1);
            }
        }
        tc_resp r;
        ck_assert_int_eq(tc_request(g_port, "OPTIONS", concrete, NULL, NULL, 0, &r), 0);
        char allow[256], routed[256] = "", documented[256] = "";
        ck_assert_msg(r.status == 204 && tc_header(&r, "Allow", allow, sizeof allow), "%s: %d",
                      path, r.status);
        tc_resp_free(&r);
        static const char *const k_methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
        for (size_t i = 0; i < 5; i++) {
            char lower[8];
            for (size_t k = 0; k <= strlen(k_methods[i]); k++)
                lower[k] = (char)(k_methods[i][k] | (k_methods[i][k] ? 0x20 : 0));
            size_t ml = strlen(k_methods[i]);
            int in_allow = 0;
            for (const char *a = allow; *a; a += strspn(a, ", ")) {
                size_t w = strcspn(a, ", ");
                in_allow |= w == ml && !strncmp(a, k_methods[i], ml);
                a += w;
            }
            if (in_allow)
                strcat(routed, k_methods[i]), strcat(routed, " ");
            if (json_object_get(ops, lower))
                strcat(documented, k_methods[i]), strcat(documented, " ");
        }
        ck_assert_msg(!strcmp(routed, documented), "%s: routed %s(Allow: %s), documented %s", path,
                      routed, allow, documented);
        n++;
    }
    ck_assert_int_ge(n, 40);
    json_decref(d);
}
END_TEST

static int req_status(const char *method, const char *path, const char *json, char **body)
{
    tc_resp r;
    ck_assert_int_eq(tc_request(g_port, method, path, "Content-Type: application/json\r\n", json,
                                strlen(json), &r),
                     0);
    int st = r.status;
    *body = strdup(r.body ? r.body : "");
    tc_resp_free(&r);
    return st;
}

/* The glossary routes' fixes schemathesis found. */
START_TEST(test_glossary_findings)
{
    char *b, path[128];
    /* an optional field null: 400 naming it (it was taken as left out) */
    ck_assert_int_eq(req_status("POST", "/v2/glossaries",
                                "{\"name\":\"n\",\"source_lang\":\"en\",\"target_lang\":\"de\","
                                "\"entries\":\"a\\tb\",\"entries_format\":null}",
                                &b),
                     400);
    ck_assert_msg(strstr(b, "\"detail\":\"entries_format must be a string\""), "%s", b);
    free(b);
    char dicts[4096] = "{\"name\":\"full\",\"dictionaries\":[";
    for (int i = 0; i < 32; i++)
        snprintf(dicts + strlen(dicts), sizeof dicts - strlen(dicts),
                 "%s{\"source_lang\":\"en\",\"target_lang\":\"q%c%c\",\"entries\":\"a\\tb\"}",
                 i ? "," : "", 'a' + i % 26, 'a' + i / 26);
    strcat(dicts, "]}");
    ck_assert_int_eq(req_status("POST", "/v3/glossaries", dicts, &b), 201);
    json_t *g = json_loads(b, 0, NULL);
    free(b);
    snprintf(path, sizeof path, "/v3/glossaries/%s", json_string_value(at(g, "glossary_id")));
    json_decref(g);
    ck_assert_int_eq(req_status("PATCH", path, "{\"name\":\"x\",\"dictionaries\":null}", &b), 400);
    ck_assert_msg(strstr(b, "\"detail\":\"dictionaries: "), "%s", b);
    free(b);
    /* one pair merged into its own, a 33rd added: 400, and the daemon is up
     * (the store answered success with no glossary: a crash) */
    ck_assert_int_eq(req_status("PATCH", path,
                                "{\"dictionaries\":[{\"source_lang\":\"en\",\"target_lang\":\"qaa\","
                                "\"entries\":\"c\\td\"},{\"source_lang\":\"en\",\"target_lang\":"
                                "\"zz\",\"entries\":\"c\\td\"}]}",
                                &b),
                     400);
    ck_assert_msg(strstr(b, "at most 32 dictionaries"), "%s", b);
    free(b);
    /* errors before the handler: DeepL's {"message"}, not the native object */
    ck_assert_int_eq(req_status("POST", "/v3/glossaries", "{not json", &b), 400);
    ck_assert_msg(!strncmp(b, "{\"message\":", 11) && !strstr(b, "\"error\""), "%s", b);
    free(b);
    tc_resp r;
    ck_assert_int_eq(tc_request(g_port, "PUT", path, NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 405);
    ck_assert_msg(!strncmp(r.body, "{\"message\":", 11), "%s", r.body);
    tc_resp_free(&r);
    ck_assert_int_eq(tc_request(g_port, "DELETE", path, NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 204);
    tc_resp_free(&r);
}
END_TEST

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_conventions.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    char model[512], log[600];
    snprintf(model, sizeof model, "%s/text/marian_en_de", TD_TEST_DATA);
    snprintf(log, sizeof log, "%s/daemon.log", g_tmp);
    const char *args[] = {"--model", model, "--threads", "1", "--max-batch-size", "48",
                          "--max-batch-tokens", "1000", "--max-beam", "6", "--max-batch-texts",
                          "5", "--max-input-tokens", "40", "--state-dir", "", NULL};
    g_port = tc_daemon_start(TD_DAEMON, args, log, 60, &g_pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s\n", log);
        return 1;
    }
    Suite *s = suite_create("conventions");
    TCase *tc = tcase_create("conventions");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_openapi_limits);
    tcase_add_test(tc, test_version_and_metrics);
    tcase_add_test(tc, test_schemathesis_findings);
    tcase_add_test(tc, test_openapi_methods_routed);
    tcase_add_test(tc, test_glossary_findings);
    suite_add_tcase(s, tc);
    return tc_run_suite(s, g_pid, g_tmp);
}
