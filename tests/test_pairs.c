/*
 * test_pairs.c - one daemon serving a bilingual Marian model (en-de) beside
 * two multilingual ones (tests/data/m2m: an M2M100 layout with 100
 * languages, an NLLB-200 layout with 5): routing takes the model made for a
 * pair before one that knows many; /languages gives each source its real
 * targets; /v1/models lists a multilingual model's languages; two targets
 * of one model answer differently, through both APIs, each as the engine's
 * td_translate_text_lang answers in this process; the cache keeps the two
 * targets apart; LibreTranslate's "de" is NLLB's "deu_Latn"; an unknown
 * code is a 400 naming it.
 */
#define _DEFAULT_SOURCE
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "server/client.h"
#include "server/suite.h"
#include "tokenizer.h"
#include "translator.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif

static char g_tmp[256];
static int g_port = -1;
static pid_t g_pid = -1;

static const char k_text_en[] = "inline function %q+D declared weak";
static const char k_text_de[] = "Es gab %d Warnung (Anzeige mit";

/* POST json to path: the status, and the body parsed (NULL when not JSON). */
static int post(const char *path, const char *json, json_t **out)
{
    tc_resp r;
    ck_assert_int_eq(tc_post_json(g_port, path, json, &r), 0);
    int st = r.status;
    *out = json_loads(r.body ? r.body : "", 0, NULL);
    ck_assert_msg(*out != NULL, "%s: not JSON: %s", path, r.body);
    tc_resp_free(&r);
    return st;
}

static json_t *get(const char *path)
{
    tc_resp r;
    ck_assert_int_eq(tc_request(g_port, "GET", path, NULL, NULL, 0, &r), 0);
    ck_assert_msg(r.status == 200, "%s: %d %s", path, r.status, r.body);
    json_t *v = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(v);
    tc_resp_free(&r);
    return v;
}

/* A native translation of one text: its text (malloc'd), and the model's
 * name into model (may be NULL). */
static char *native(const char *extra, const char *text, char *model, size_t n)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"text\":\"%s\",\"split_sentences\":false%s}", text, extra);
    json_t *v;
    int st = post("/v1/translate", json, &v);
    ck_assert_msg(st == 200, "%s: %d %s", json, st, json_dumps(v, 0));
    if (model)
        snprintf(model, n, "%s", json_string_value(json_object_get(v, "model")));
    const char *t = json_string_value(
        json_object_get(json_array_get(json_object_get(v, "translations"), 0), "text"));
    ck_assert_ptr_nonnull(t);
    char *out = strdup(t);
    json_decref(v);
    return out;
}

/* The engine's own answer (td_translate_text_lang, greedy, max_length 20)
 * for the model under tests/data/m2m/layout. */
static char *engine(const char *layout, const char *src, const char *tgt, const char *text)
{
    char dir[1024], err[512];
    snprintf(dir, sizeof dir, "%s/m2m/%s", TD_TEST_DATA, layout);
    td_model *m = NULL;
    td_tokenizer *tok = NULL;
    td_worker *w = NULL;
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_msg(td_model_load(&m, dir, &lo, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(td_model_tokenizer_load(m, dir, &tok, err, sizeof err) == 0, "%s", err);
    td_worker_opts wo = {.max_batch = 1, .max_length = 32, .max_beam = 1, .n_threads = 1};
    ck_assert_msg(td_worker_init(&w, m, &wo, err, sizeof err) == 0, "%s", err);
    td_decode_opts o;
    td_decode_opts_default(m, &o);
    o.beam_size = o.num_hypotheses = 1;
    o.max_length = 20;
    td_text_result tr;
    ck_assert_msg(td_translate_text_lang(w, tok, src, tgt, &text, NULL, 1, &o, &tr, err,
                                         sizeof err) == 0,
                  "%s", err);
    char *out = strdup(tr.text);
    td_text_result_free(&tr);
    td_worker_free(w);
    td_tok_free(tok);
    td_model_free(m);
    return out;
}

#define GREEDY ",\"beam_size\":1,\"max_length\":20,\"copy_unknown\":false"

/* The pair's own model first: en->de is the Marian model's, even named
 * by NLLB's codes; en->fr and de->en only a multilingual model has. */
START_TEST(test_routing_order)
{
    char model[128];
    free(native(",\"source\":\"en\",\"target\":\"de\"", "Hello world", model, sizeof model));
    ck_assert_str_eq(model, "marian_en_de");
    free(native(",\"source\":\"eng_Latn\",\"target\":\"deu_Latn\"", "Hello world", model,
                sizeof model));
    ck_assert_str_eq(model, "marian_en_de");
    free(native(",\"source\":\"en\",\"target\":\"fr\"", k_text_en, model, sizeof model));
    ck_assert_str_eq(model, "m2m100");
    free(native(",\"source\":\"de\",\"target\":\"en\"", k_text_de, model, sizeof model));
    ck_assert_str_eq(model, "m2m100");
    /* LibreTranslate's API routes the same way */
    json_t *v;
    int st = post("/translate", "{\"q\":\"Hello world\",\"source\":\"en\",\"target\":\"de\"}", &v);
    ck_assert_int_eq(st, 200);
    char *marian = native(",\"model\":\"marian_en_de\"", "Hello world", NULL, 0);
    /* LibreTranslate's answer uses the model's defaults, as the native one without options */
    char *m_def = NULL;
    {
        json_t *n;
        st = post("/v1/translate", "{\"text\":\"Hello world\",\"source\":\"en\",\"target\":\"de\"}",
                  &n);
        ck_assert_int_eq(st, 200);
        m_def = strdup(json_string_value(json_object_get(
            json_array_get(json_object_get(n, "translations"), 0), "text")));
        json_decref(n);
    }
    ck_assert_str_eq(json_string_value(json_object_get(v, "translatedText")), m_def);
    free(m_def);
    free(marian);
    json_decref(v);
}
END_TEST

/* Each source's targets: every other language of the multilingual models,
 * and de for en through the Marian model too, each once, sorted. */
START_TEST(test_languages)
{
    json_t *l = get("/languages");
    int n_seen = 0;
    for (size_t i = 0; i < json_array_size(l); i++) {
        json_t *e = json_array_get(l, i);
        const char *code = json_string_value(json_object_get(e, "code"));
        json_t *t = json_object_get(e, "targets");
        ck_assert_msg(json_array_size(t) == 99, "%s: %zu targets", code, json_array_size(t));
        for (size_t k = 0; k < json_array_size(t); k++) {
            const char *c = json_string_value(json_array_get(t, k));
            ck_assert_str_ne(c, code);
            if (k > 0)
                ck_assert_int_lt(strcmp(json_string_value(json_array_get(t, k - 1)), c), 0);
        }
        n_seen += !strcmp(code, "en") || !strcmp(code, "de") || !strcmp(code, "fr");
    }
    /* 100 languages: NLLB's five are M2M100's too, by their short codes */
    ck_assert_int_eq((int)json_array_size(l), 100);
    ck_assert_int_eq(n_seen, 3);
    json_decref(l);
}
END_TEST

/* /v1/models: a multilingual model's languages, in its own codes. */
START_TEST(test_models_list)
{
    json_t *v = get("/v1/models");
    json_t *ms = json_is_array(v) ? v : json_object_get(v, "models");
    int found = 0;
    for (size_t i = 0; i < json_array_size(ms); i++) {
        json_t *m = json_array_get(ms, i);
        const char *name = json_string_value(json_object_get(m, "name"));
        json_t *langs = json_object_get(m, "languages");
        json_t *codes = json_object_get(langs, "codes");
        if (!strcmp(name, "marian_en_de")) {
            ck_assert_str_eq(json_string_value(json_object_get(langs, "source")), "en");
            ck_assert_ptr_null(codes);
            found++;
        } else if (!strcmp(name, "nllb")) {
            ck_assert_int_eq((int)json_array_size(codes), 5);
            ck_assert_str_eq(json_string_value(json_array_get(codes, 0)), "deu_Latn");
            ck_assert_str_eq(json_string_value(json_object_get(langs, "source")), "mul");
            found++;
        } else if (!strcmp(name, "m2m100")) {
            ck_assert_int_eq((int)json_array_size(codes), 100);
            found++;
        }
    }
    ck_assert_int_eq(found, 3);
    json_decref(v);
}
END_TEST

/* Two targets of one model: different answers, each the engine's. */
START_TEST(test_two_targets)
{
    char *fr = native(",\"source\":\"en\",\"target\":\"fr\"" GREEDY, k_text_en, NULL, 0);
    char *es = native(",\"source\":\"en\",\"target\":\"es\"" GREEDY, k_text_en, NULL, 0);
    char *e_fr = engine("m2m100", "en", "fr", k_text_en);
    char *e_es = engine("m2m100", "en", "es", k_text_en);
    ck_assert_str_ne(e_fr, e_es);
    ck_assert_str_eq(fr, e_fr);
    ck_assert_str_eq(es, e_es);
    /* LibreTranslate's /translate: the model's defaults, as the native API without options */
    const char *tg[2] = {"fr", "es"};
    char *lt[2];
    for (int i = 0; i < 2; i++) {
        char json[512], extra[128];
        snprintf(json, sizeof json, "{\"q\":\"%s\",\"source\":\"en\",\"target\":\"%s\"}",
                 k_text_en, tg[i]);
        json_t *v;
        ck_assert_int_eq(post("/translate", json, &v), 200);
        lt[i] = strdup(json_string_value(json_object_get(v, "translatedText")));
        json_decref(v);
        snprintf(extra, sizeof extra, ",\"source\":\"en\",\"target\":\"%s\"",
                 tg[i]);
        char *nat = native(extra, k_text_en, NULL, 0);
        ck_assert_str_eq(lt[i], nat);
        free(nat);
    }
    ck_assert_str_ne(lt[0], lt[1]);
    free(lt[0]);
    free(lt[1]);
    free(fr);
    free(es);
    free(e_fr);
    free(e_es);
}
END_TEST

/* One source, two targets, the cache on: the second target is a miss and
 * its own answer; each asked again is a hit with its own answer. */
START_TEST(test_cache_targets)
{
    const char *text = "There was %d warning (use warn";
    char *a = native(",\"source\":\"en\",\"target\":\"fr\"" GREEDY, text, NULL, 0);
    double m0 = tc_metric(g_port, "transformerd_cache_misses_total");
    char *b = native(",\"source\":\"en\",\"target\":\"es\"" GREEDY, text, NULL, 0);
    ck_assert_double_gt(tc_metric(g_port, "transformerd_cache_misses_total"), m0);
    char *e_es = engine("m2m100", "en", "es", text);
    ck_assert_str_eq(b, e_es);
    ck_assert_str_ne(a, b);
    double h0 = tc_metric(g_port, "transformerd_cache_hits_total");
    char *a2 = native(",\"source\":\"en\",\"target\":\"fr\"" GREEDY, text, NULL, 0);
    char *b2 = native(",\"source\":\"en\",\"target\":\"es\"" GREEDY, text, NULL, 0);
    ck_assert_double_eq(tc_metric(g_port, "transformerd_cache_hits_total"), h0 + 2);
    ck_assert_str_eq(a, a2);
    ck_assert_str_eq(b, b2);
    free(a);
    free(b);
    free(a2);
    free(b2);
    free(e_es);
}
END_TEST

/* LibreTranslate's codes on the NLLB model: de and en are deu_Latn and
 * eng_Latn, the engine's answer with NLLB's codes. */
START_TEST(test_code_map)
{
    char *short_codes =
        native(",\"model\":\"nllb\",\"source\":\"de\",\"target\":\"en\"" GREEDY, k_text_de, NULL, 0);
    char *nllb_codes = native(",\"model\":\"nllb\",\"source\":\"deu_Latn\",\"target\":\"eng_Latn\"" GREEDY,
                              k_text_de, NULL, 0);
    char *e = engine("nllb", "deu_Latn", "eng_Latn", k_text_de);
    ck_assert_str_eq(short_codes, e);
    ck_assert_str_eq(nllb_codes, e);
    ck_assert_str_ne(e, "");
    /* another target of the same model differs */
    char *es = native(",\"model\":\"nllb\",\"source\":\"de\",\"target\":\"es\"" GREEDY, k_text_de,
                      NULL, 0);
    ck_assert_str_ne(es, e);
    free(short_codes);
    free(nllb_codes);
    free(e);
    free(es);
}
END_TEST

/* An unknown code: a 400 that names it, in both APIs. */
START_TEST(test_unknown_code)
{
    json_t *v;
    ck_assert_int_eq(post("/translate", "{\"q\":\"Hello\",\"source\":\"en\",\"target\":\"qq\"}", &v),
                     400);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(v, "error")), "qq"));
    json_decref(v);
    ck_assert_int_eq(
        post("/v1/translate", "{\"text\":\"Hello\",\"source\":\"qq_Latn\",\"target\":\"en\"}", &v),
        400);
    const char *msg = json_string_value(json_object_get(json_object_get(v, "error"), "message"));
    ck_assert_ptr_nonnull(strstr(msg, "qq_Latn"));
    json_decref(v);
    /* a multilingual model named: a code it lacks */
    ck_assert_int_eq(post("/v1/translate",
                          "{\"text\":\"Hello\",\"model\":\"nllb\",\"source\":\"en\",\"target\":\"ru\"}",
                          &v),
                     400);
    msg = json_string_value(json_object_get(json_object_get(v, "error"), "message"));
    ck_assert_ptr_nonnull(strstr(msg, "'ru'"));
    json_decref(v);
}
END_TEST

/* A streamed answer of a multilingual model: each sentence's event names
 * the pair it is of. */
START_TEST(test_stream_target)
{
    char json[512];
    snprintf(json, sizeof json,
             "{\"text\":\"%s\",\"source\":\"en\",\"target\":\"fr\",\"stream\":true}",
             k_text_en);
    tc_resp r;
    ck_assert_int_eq(tc_request(g_port, "POST", "/v1/translate",
                                "Content-Type: application/json\r\nAccept: text/event-stream\r\n",
                                json, strlen(json), &r),
                     0);
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
    const char *ev = strstr(r.body, "event: sentence");
    ck_assert_msg(ev != NULL, "%s", r.body);
    const char *end = strstr(ev, "\n\n");
    ck_assert_ptr_nonnull(end);
    char *e = strndup(ev, (size_t)(end - ev));
    ck_assert_msg(strstr(e, "\"target\":\"fr\"") && strstr(e, "\"source\":\"en\""), "%s", e);
    free(e);
    tc_resp_free(&r);
}
END_TEST

typedef struct batch_client {
    int port;
    const char *tgt;
    char *got;
} batch_client;

static void *batch_main(void *arg)
{
    batch_client *c = arg;
    char json[512];
    snprintf(json, sizeof json,
             "{\"text\":\"%s\",\"source\":\"en\",\"target\":\"%s\",\"split_sentences\":false"
             GREEDY "}",
             k_text_en, c->tgt);
    tc_resp r;
    if (tc_post_json(c->port, "/v1/translate", json, &r) == 0) {
        json_t *v = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
        const char *t = json_string_value(
            json_object_get(json_array_get(json_object_get(v, "translations"), 0), "text"));
        c->got = t ? strdup(t) : NULL;
        json_decref(v);
        tc_resp_free(&r);
    }
    return NULL;
}

/* --scheduler batch, a long batch delay: two targets queued together run
 * in batches of their own (a forced prefix is a batch's), each the
 * engine's answer. */
START_TEST(test_batch_targets)
{
    char m2m[512];
    snprintf(m2m, sizeof m2m, "%s/m2m/m2m100", TD_TEST_DATA);
    const char *args[] = {"--scheduler", "batch", "--batch-delay-ms", "300", "--cache-bytes", "0",
                          NULL};
    pid_t pid;
    int port = tc_daemon_start_model(TD_DAEMON, m2m, g_tmp, "batch", args, &pid);
    ck_assert_int_gt(port, 0);
    batch_client c[2] = {{port, "fr", NULL}, {port, "es", NULL}};
    pthread_t th[2];
    int started[2];
    for (int i = 0; i < 2; i++)
        started[i] = pthread_create(&th[i], NULL, batch_main, &c[i]) == 0;
    for (int i = 0; i < 2; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    kill(pid, SIGTERM); /* before any assertion: the daemon ends on every path */
    ck_assert_int_eq(tc_daemon_wait(pid, 30 * tc_slowness()), 0);
    ck_assert(started[0] && started[1]);
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(c[i].got != NULL, "target %s: no answer", c[i].tgt);
        char *e = engine("m2m100", "en", c[i].tgt, k_text_en);
        ck_assert_str_eq(c[i].got, e);
        free(e);
        free(c[i].got);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pairs");
    TCase *tc = tcase_create("pairs");
    tcase_set_timeout(tc, 120 * tc_slowness());
    tcase_add_test(tc, test_routing_order);
    tcase_add_test(tc, test_languages);
    tcase_add_test(tc, test_models_list);
    tcase_add_test(tc, test_two_targets);
    tcase_add_test(tc, test_cache_targets);
    tcase_add_test(tc, test_code_map);
    tcase_add_test(tc, test_unknown_code);
    tcase_add_test(tc, test_stream_target);
    tcase_add_test(tc, test_batch_targets);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_pairs_test.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    char marian[512], m2m[512], nllb[512];
    snprintf(marian, sizeof marian, "%s/text/marian_en_de", TD_TEST_DATA);
    snprintf(m2m, sizeof m2m, "m2m100=%s/m2m/m2m100", TD_TEST_DATA);
    snprintf(nllb, sizeof nllb, "nllb=%s/m2m/nllb", TD_TEST_DATA);
    const char *args[] = {"--model", m2m, "--model", nllb, NULL};
    g_port = tc_daemon_start_model(TD_DAEMON, marian, g_tmp, "main", args, &g_pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s/main.log\n", g_tmp);
        return 1;
    }
    return tc_run_suite(suite(), g_pid, g_tmp);
}
