/*
 * test_unload.c - idle models put away (--model-idle-unload) and loaded
 * again on demand, on the bundled model under two names: "a" put away,
 * "b" kept resident (--preload b), one worker each, no translation cache.
 *   - idle, "a" is put away (/v1/models resident false, the metric 0) and
 *     "b" is not;
 *   - 8 clients at once send "a" different texts: every answer is 200 and
 *     what "b" (the same weights, never put away) answers, and the 8 share
 *     one load (transformerd_model_loaded_again_total 1);
 *   - idle again, "a" is put away again;
 *   - "c" (links to the same files) put away, its weights' file removed: the
 *     request that loads it again fails naming the file (500), the next is
 *     503 device_error at once, and "b" serves on;
 *   - "d" (links to the same files) put away, then its files replaced by
 *     German-English ones (renamed over the old): the request that wakes it
 *     is answered 503 model_reloaded (its text was tokenized for the old
 *     files), and the model is all new -- generation 2, de->en, resident,
 *     and its answers are those of "e" (the German-English model, loaded
 *     from its own directory) -- never the new weights under the old
 *     tokenizer. (The bundled pair shares one vocabulary, so the proof is
 *     the answer to send again, the generation and the languages.)
 * Waits poll the daemon's own state (bounded only so that a daemon that
 * never changes fails), never a clock.
 */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "server/client.h"
#include "server/suite.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif

static char g_tmp[256];
static int g_port = -1;

/* resident of the model named name in /v1/models (-1: not found). */
static int resident(const char *name)
{
    tc_resp r;
    ck_assert_int_eq(tc_request(g_port, "GET", "/v1/models", NULL, NULL, 0, &r), 0);
    json_error_t je;
    json_t *root = json_loads(r.body, 0, &je);
    json_t *models = json_object_get(root, "models");
    int v = -1;
    for (size_t i = 0; i < json_array_size(models); i++) {
        json_t *m = json_array_get(models, i);
        if (!strcmp(json_string_value(json_object_get(m, "name")), name))
            v = json_is_true(json_object_get(m, "resident"));
    }
    json_decref(root);
    tc_resp_free(&r);
    return v;
}

/* A series of the model's metrics, e.g. "transformerd_model_resident". */
static long metric(const char *family, const char *model)
{
    char series[256];
    snprintf(series, sizeof series, "%s{model=\"%s\"}", family, model);
    return (long)tc_metric(g_port, series);
}
static void wait_put_away(void)
{
    int i = 0;
    while (resident("a") != 0) {
        ck_assert_msg(++i < 1200, "model a was never put away");
        tc_sleep_ms(50);
    }
    ck_assert_int_eq(metric("transformerd_model_resident", "a"), 0);
    ck_assert_int_eq(resident("b"), 1);
    ck_assert_int_eq(metric("transformerd_model_resident", "b"), 1);
}

typedef struct client_arg {
    int k;
    int ok;
    char why[512];
} client_arg;

static void *client(void *p)
{
    client_arg *c = p;
    static const char *const texts[] = {
        "Hello world.", "Save the file?", "The disk is full.", "Open the window.",
        "Where is the station?", "The test failed again.", "Close all tabs.", "Good night."};
    char a[256], b[256];
    snprintf(a, sizeof a, "{\"text\":\"%s\",\"model\":\"a\"}", texts[c->k]);
    snprintf(b, sizeof b, "{\"text\":\"%s\",\"model\":\"b\"}", texts[c->k]);
    tc_resp ra = {0}, rb = {0};
    int ea = tc_post_json(g_port, "/v1/translate", a, &ra);
    int eb = tc_post_json(g_port, "/v1/translate", b, &rb);
    if (ea || eb || ra.status != 200 || rb.status != 200) {
        snprintf(c->why, sizeof c->why, "statuses %d %d: %.300s", ra.status, rb.status,
                 ra.body ? ra.body : "");
    } else {
        /* the same weights: the same translation (the name differs) */
        const char *ta = strstr(ra.body, "\"translations\""),
                   *tb = strstr(rb.body, "\"translations\"");
        c->ok = ta && tb && !strcmp(ta, tb);
        if (!c->ok)
            snprintf(c->why, sizeof c->why, "a: %.200s b: %.200s", ra.body, rb.body);
    }
    tc_resp_free(&ra);
    tc_resp_free(&rb);
    return NULL;
}

START_TEST(test_put_away_and_back)
{
    wait_put_away();
    long before = metric("transformerd_model_loaded_again_total", "a");
    pthread_t th[8];
    client_arg args[8];
    for (int i = 0; i < 8; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].k = i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, client, &args[i]), 0);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(args[i].ok, "client %d: %s", i, args[i].why);
    /* one load for the 8 (unless "a" was put away again meanwhile, which
     * the idle second between would show as a second one) */
    long loads = metric("transformerd_model_loaded_again_total", "a") - before;
    ck_assert_msg(loads == 1, "%ld loads for 8 concurrent requests", loads);
    ck_assert_int_ge(metric("transformerd_model_put_away_total", "a"), 1);
    ck_assert_int_eq(metric("transformerd_model_put_away_total", "b"), 0);
    /* and idle again, away again */
    wait_put_away();
}
END_TEST

/* A model whose files went away while it was put away: its next requests
 * are clear errors, not a hang. */
START_TEST(test_gone_files)
{
    int i = 0;
    while (resident("c") != 0) {
        ck_assert_msg(++i < 1200, "model c was never put away");
        tc_sleep_ms(50);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/c/model.safetensors", g_tmp);
    ck_assert_int_eq(unlink(path), 0);
    /* the request that tried the load: the engine's failure, named (500,
     * as any failed batch); the next: the model failed (503) */
    for (int k = 0; k < 2; k++) {
        tc_resp r;
        ck_assert_int_eq(tc_post_json(g_port, "/v1/translate",
                                      "{\"text\":\"Hello world.\",\"model\":\"c\"}", &r), 0);
        if (k == 0)
            ck_assert_msg(r.status == 500 && strstr(r.body, "loading it again") &&
                              strstr(r.body, "model.safetensors"),
                          "%d %s", r.status, r.body);
        else
            ck_assert_msg(r.status == 503 && strstr(r.body, "device_error"), "%d %s", r.status,
                          r.body);
        tc_resp_free(&r);
    }
    /* the others serve on */
    tc_resp r;
    ck_assert_int_eq(tc_post_json(g_port, "/v1/translate",
                                  "{\"text\":\"Hello world.\",\"model\":\"b\"}", &r), 0);
    ck_assert_int_eq(r.status, 200);
    tc_resp_free(&r);
}
END_TEST

/* dir/name: links to every file of the model in src (made first as
 * dir/name.new when `over`, then each renamed over dir/name's: the
 * documented way to replace a model's files). */
static int link_model(const char *dir, const char *name, const char *src, int over)
{
    char c[600], to_dir[700];
    snprintf(c, sizeof c, "%s/%s", dir, name);
    snprintf(to_dir, sizeof to_dir, "%s%s", c, over ? ".new" : "");
    if (mkdir(to_dir, 0755) != 0)
        return -1;
    DIR *d = opendir(src);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            char from[4400], to[1000], final[1000];
            snprintf(from, sizeof from, "%s/%s", src, e->d_name);
            snprintf(to, sizeof to, "%s/%s", to_dir, e->d_name);
            snprintf(final, sizeof final, "%s/%s", c, e->d_name);
            rc |= symlink(from, to);
            if (over)
                rc |= rename(to, final);
        }
    closedir(d);
    return rc;
}

/* A model's generation, source and target in /v1/models. */
static void model_entry(const char *name, long *gen, char *src, char *tgt)
{
    tc_resp r;
    ck_assert_int_eq(tc_request(g_port, "GET", "/v1/models", NULL, NULL, 0, &r), 0);
    json_t *root = json_loads(r.body, 0, NULL);
    json_t *models = json_object_get(root, "models");
    *gen = -1;
    for (size_t i = 0; i < json_array_size(models); i++) {
        json_t *m = json_array_get(models, i);
        if (strcmp(json_string_value(json_object_get(m, "name")), name))
            continue;
        *gen = (long)json_integer_value(json_object_get(m, "generation"));
        json_t *l = json_object_get(m, "languages");
        snprintf(src, 16, "%s", json_string_value(json_object_get(l, "source")));
        snprintf(tgt, 16, "%s", json_string_value(json_object_get(l, "target")));
    }
    json_decref(root);
    tc_resp_free(&r);
}

/* The translations part of model's answer to text (200 asserted), in out. */
static void translate_with(const char *model, const char *text, char *out, size_t n)
{
    char body[512];
    snprintf(body, sizeof body, "{\"text\":\"%s\",\"model\":\"%s\"}", text, model);
    tc_resp r;
    ck_assert_int_eq(tc_post_json(g_port, "/v1/translate", body, &r), 0);
    ck_assert_msg(r.status == 200, "%s: %d %s", model, r.status, r.body);
    const char *t = strstr(r.body, "\"translations\"");
    ck_assert_ptr_nonnull(t);
    snprintf(out, n, "%s", t);
    tc_resp_free(&r);
}

/* A model put away whose files were replaced: woken, it is the new model
 * whole (tokenizer, configuration, weights, a new generation), never the
 * new weights under the old tokenizer; the request that woke it is told
 * to send again. */
START_TEST(test_changed_files)
{
    int i = 0;
    while (resident("d") != 0) {
        ck_assert_msg(++i < 1200, "model d was never put away");
        tc_sleep_ms(50);
    }
    long gen;
    char src[16], tgt[16];
    model_entry("d", &gen, src, tgt);
    ck_assert_int_eq(gen, 1);
    ck_assert_str_eq(src, "en");
    long again = metric("transformerd_model_loaded_again_total", "d");
    ck_assert_int_eq(link_model(g_tmp, "d", TD_BUNDLED_MODEL "/../de-en", 1), 0);
    static const char *const de[] = {"Die Datei wurde nicht gefunden.", "Guten Morgen.",
                                     "Das Fenster ist offen."};
    tc_resp r;
    ck_assert_int_eq(tc_post_json(g_port, "/v1/translate",
                                  "{\"text\":\"Die Datei wurde nicht gefunden.\",\"model\":\"d\"}",
                                  &r), 0);
    ck_assert_msg(r.status == 503 && strstr(r.body, "model_reloaded") &&
                      strstr(r.body, "send it again"),
                  "%d %s", r.status, r.body);
    tc_resp_free(&r);
    model_entry("d", &gen, src, tgt);
    ck_assert_int_eq(gen, 2);
    ck_assert_str_eq(src, "de");
    ck_assert_str_eq(tgt, "en");
    /* loaded again, whole (counted before the waiting request is answered;
     * the resident gauge itself may already say 0 again: idle 1 s) */
    ck_assert_int_eq(metric("transformerd_model_loaded_again_total", "d"), again + 1);
    for (int k = 0; k < 3; k++) {
        char got[2048], want[2048];
        translate_with("d", de[k], got, sizeof got);
        translate_with("e", de[k], want, sizeof want);
        ck_assert_msg(!strcmp(got, want), "d: %s e: %s", got, want);
    }
}
END_TEST

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_unload_test.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    tc_io_timeout_s = 300; /* a load and 16 answers under the sanitizers */
    char a[4200], b[4200], c[600], d[600], e[4200];
    snprintf(a, sizeof a, "a=%s", TD_BUNDLED_MODEL);
    snprintf(b, sizeof b, "b=%s", TD_BUNDLED_MODEL);
    snprintf(c, sizeof c, "c=%s/c", g_tmp);
    snprintf(d, sizeof d, "d=%s/d", g_tmp);
    snprintf(e, sizeof e, "e=%s/../de-en", TD_BUNDLED_MODEL);
    if (link_model(g_tmp, "c", TD_BUNDLED_MODEL, 0) != 0 ||
        link_model(g_tmp, "d", TD_BUNDLED_MODEL, 0) != 0) {
        fprintf(stderr, "cannot link the model into %s\n", g_tmp);
        return 1;
    }
    const char *args[] = {"--model", b, "--model", c, "--model", d, "--model", e,
                          "--preload", "b,e",
                          "--model-idle-unload", "1", "--workers", "1", "--cache-bytes", "0",
                          NULL};
    pid_t pid;
    g_port = tc_daemon_start_model(TD_DAEMON, a, g_tmp, "unload", args, &pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start\n");
        return 1;
    }
    Suite *s = suite_create("unload");
    TCase *tc = tcase_create("idle");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_put_away_and_back);
    tcase_add_test(tc, test_gone_files);
    tcase_add_test(tc, test_changed_files);
    suite_add_tcase(s, tc);
    return tc_run_suite(s, pid, g_tmp);
}
