/*
 * test_route_texts.c - texts of one native request routed each by its own
 * language (no "model", the source detected; docs/api.md, "Models"), on a
 * daemon serving both bundled models and their detector's profiles:
 *   - English and German texts in one list: each goes to its model (its
 *     translation names it), each translation is what that model answers
 *     for the text alone, an empty text is "", usage is the parts' sum;
 *   - texts of one language: one model, the answer as before (no model per
 *     translation);
 *   - streamed: each event has the request's text index and its model, the
 *     last one is the plain answer byte for byte;
 *   - a text too long in the second part: 422 naming the request's index.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/client.h"
#include "server/suite.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif

static char g_tmp[256];
static int g_port = -1;

static json_t *post(const char *body, int want_status, char **raw)
{
    tc_resp r = {0};
    ck_assert_int_eq(tc_post_json(g_port, "/v1/translate", body, &r), 0);
    ck_assert_msg(r.status == want_status, "%d %s", r.status, r.body ? r.body : "");
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je);
    ck_assert_msg(j != NULL, "%s", r.body);
    if (raw)
        *raw = strdup(r.body);
    tc_resp_free(&r);
    return j;
}

/* model's translation of text alone, and its usage. */
static char *alone(const char *model, const char *text, long *tin, long *tout)
{
    char body[1024];
    snprintf(body, sizeof body, "{\"text\":\"%s\",\"model\":\"%s\"}", text, model);
    json_t *j = post(body, 200, NULL);
    char *t = strdup(json_string_value(
        json_object_get(json_array_get(json_object_get(j, "translations"), 0), "text")));
    *tin += (long)json_integer_value(json_object_get(json_object_get(j, "usage"), "source_tokens"));
    *tout += (long)json_integer_value(json_object_get(json_object_get(j, "usage"), "target_tokens"));
    json_decref(j);
    return t;
}

static const char *const k_texts[] = {"Save the file before closing.", "Guten Morgen.", "",
                                      "Where is the station? It is late.", "Danke"};
static const char *const k_models[] = {"en-de", "de-en", "en-de", "en-de", "de-en"};
#define MIXED                                                                                  \
    "{\"text\":[\"Save the file before closing.\",\"Guten Morgen.\",\"\",\"Where is the station? "  \
    "It is late.\",\"Danke\"]%s}"

START_TEST(test_mixed)
{
    char body[1024];
    snprintf(body, sizeof body, MIXED, "");
    json_t *j = post(body, 200, NULL);
    json_t *tr = json_object_get(j, "translations");
    ck_assert_int_eq(json_array_size(tr), 5);
    long tin = 0, tout = 0;
    for (int i = 0; i < 5; i++) {
        json_t *t = json_array_get(tr, i);
        const char *m = json_string_value(json_object_get(t, "model"));
        ck_assert_msg(m && !strcmp(m, k_models[i]), "text %d: model %s, want %s", i,
                      m ? m : "(none)", k_models[i]);
        if (!k_texts[i][0]) {
            ck_assert_str_eq(json_string_value(json_object_get(t, "text")), "");
            continue;
        }
        char *want = alone(k_models[i], k_texts[i], &tin, &tout);
        ck_assert_str_eq(json_string_value(json_object_get(t, "text")), want);
        free(want);
    }
    ck_assert_str_eq(json_string_value(json_object_get(j, "model")), "en-de");
    json_t *u = json_object_get(j, "usage");
    /* the empty text's lone </s> counts where it ran: as a source token of its part */
    long got_in = (long)json_integer_value(json_object_get(u, "source_tokens"));
    ck_assert_msg(got_in == tin || got_in == tin + 1, "source tokens %ld, alone %ld", got_in, tin);
    ck_assert_int_eq(json_integer_value(json_object_get(u, "target_tokens")), tout);
    json_decref(j);
}
END_TEST

START_TEST(test_one_language)
{
    json_t *j = post("{\"text\":[\"Hello world.\",\"Save the file.\"]}", 200, NULL);
    json_t *tr = json_object_get(j, "translations");
    ck_assert_str_eq(json_string_value(json_object_get(j, "model")), "en-de");
    for (int i = 0; i < 2; i++)
        ck_assert_ptr_null(json_object_get(json_array_get(tr, i), "model"));
    json_decref(j);
}
END_TEST

START_TEST(test_streamed)
{
    char body[1024], *plain = NULL;
    snprintf(body, sizeof body, MIXED, "");
    json_decref(post(body, 200, &plain));
    snprintf(body, sizeof body, MIXED, ",\"stream\":true");
    tc_resp r = {0};
    ck_assert_int_eq(tc_post_json(g_port, "/v1/translate", body, &r), 0);
    ck_assert_int_eq(r.status, 200);
    int seen[5] = {0};
    const char *p = r.body, *done = NULL;
    while ((p = strstr(p, "event: "))) {
        const char *data = strstr(p, "data: ");
        ck_assert_ptr_nonnull(data);
        data += 6;
        const char *end = strchr(data, '\n');
        char *line = strndup(data, (size_t)(end - data));
        if (!strncmp(p, "event: sentence", 15)) {
            json_error_t je;
            json_t *e = json_loads(line, 0, &je);
            int ti = (int)json_integer_value(json_object_get(e, "text_index"));
            ck_assert(ti >= 0 && ti < 5);
            ck_assert_str_eq(json_string_value(json_object_get(e, "model")), k_models[ti]);
            seen[ti]++;
            json_decref(e);
            free(line);
        } else {
            ck_assert_msg(!strncmp(p, "event: done", 11), "%s", p);
            done = line;
        }
        p = end;
    }
    ck_assert_msg(seen[0] == 1 && seen[1] == 1 && seen[2] == 0 && seen[3] == 2 && seen[4] == 1,
                  "events a text: %d %d %d %d %d", seen[0], seen[1], seen[2], seen[3], seen[4]);
    ck_assert_ptr_nonnull(done);
    ck_assert_str_eq(done, plain);
    free((char *)done);
    free(plain);
    tc_resp_free(&r);
}
END_TEST

START_TEST(test_error_names_the_text)
{
    /* a German text of more than 256 tokens, the request's text 2 */
    size_t n = 4000;
    char *body = malloc(n + 200), *w = body;
    w += sprintf(w, "{\"text\":[\"Hello world.\",\"Guten Tag.\",\"");
    for (int i = 0; i < 300; i++)
        w += sprintf(w, "Haus ");
    sprintf(w, "\"]}");
    json_t *j = post(body, 422, NULL);
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    ck_assert_msg(strstr(msg, "text 2 "), "%s", msg);
    json_decref(j);
    free(body);
}
END_TEST

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_route_texts.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    tc_io_timeout_s = 300;
    const char *args[] = {"--workers", "1", "--cache-bytes", "0", NULL};
    pid_t pid;
    g_port = tc_daemon_start_both(TD_DAEMON, TD_BUNDLED_MODEL, g_tmp, "route", args, &pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s\n", g_tmp);
        return 1;
    }
    Suite *s = suite_create("route_texts");
    TCase *tc = tcase_create("route");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_mixed);
    tcase_add_test(tc, test_one_language);
    tcase_add_test(tc, test_streamed);
    tcase_add_test(tc, test_error_names_the_text);
    suite_add_tcase(s, tc);
    return tc_run_suite(s, pid, g_tmp);
}
