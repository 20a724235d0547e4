/*
 * test_copy_unknown.c - symbols the model has no piece for (currency signs,
 * emoji, rare letters), written by the bundled models as <unk>, copied from
 * the source ("copy_unknown", on by default; docs/api.md), on a daemon
 * serving both bundled models:
 *   - sentences with €, £, ¥, ©, emoji and names keep every symbol, in both
 *     directions, on the native and the LibreTranslate API;
 *   - "copy_unknown": false gives the model's raw output (the symbols gone)
 *     with the same score;
 *   - a sentence whose translation keeps one of two unknown symbols: the
 *     one the <unk> attends to (the attention captured for the copy, not
 *     answered), where the rank rule has no answer;
 *   - with return_tokens each <unk>'s offsets are its symbol in the text;
 *     the alternatives copy too; the request's own attention selection is
 *     answered as asked; the cache gives the same answer again.
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

/* POSTs body to path; the answer's JSON (200 asserted). */
static json_t *post_ok(const char *path, const char *body)
{
    tc_resp r = {0};
    ck_assert_int_eq(tc_post_json(g_port, path, body, &r), 0);
    ck_assert_msg(r.status == 200, "%d %s", r.status, r.body ? r.body : "");
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je);
    ck_assert_msg(j != NULL, "%s", r.body);
    tc_resp_free(&r);
    return j;
}

/* The native answer's first translation text for text on model, with the
 * extra fields extra ("" or ",\"k\":v..."); *out the whole answer (decref). */
static const char *native(const char *model, const char *text, const char *extra, json_t **out)
{
    json_t *t = json_string(text);
    char *q = json_dumps(t, JSON_ENCODE_ANY);
    json_decref(t);
    char body[2048];
    snprintf(body, sizeof body, "{\"text\":%s,\"model\":\"%s\"%s}", q, model, extra);
    free(q);
    *out = post_ok("/v1/translate", body);
    json_t *tr = json_array_get(json_object_get(*out, "translations"), 0);
    return json_string_value(json_object_get(tr, "text"));
}

typedef struct kept_case {
    const char *model;
    const char *text;
    const char *symbols[4];
} kept_case;

static const kept_case k_kept[] = {
    {"en-de", "5 \xe2\x82\xac \xc2\xa9 2024", {"\xe2\x82\xac", "\xc2\xa9"}},
    {"en-de", "The price is 5 \xe2\x82\xac per month.", {"\xe2\x82\xac"}},
    {"en-de", "I love \xf0\x9f\x98\x80 more than \xf0\x9f\x98\xa2.",
     {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\xa2"}},
    {"en-de", "\xc3\x98ystein and Zo\xc3\xab met in Krak\xc3\xb3w.",
     {"\xc3\x98ystein", "Zo\xc3\xab", "Krak\xc3\xb3w"}},
    {"en-de", "\xe2\x82\xac, \xc2\xa3 and \xc2\xa5 are currencies.",
     {"\xe2\x82\xac", "\xc2\xa3", "\xc2\xa5"}},
    {"en-de", "Price: 10 \xe2\x82\xac, copyright \xc2\xa9, smile \xf0\x9f\x98\x80.",
     {"\xe2\x82\xac", "\xc2\xa9", "\xf0\x9f\x98\x80"}},
    {"de-en", "Der Preis ist 5 \xe2\x82\xac pro Monat. Gr\xc3\xbc\xc3\x9f" "e an Zo\xc3\xab \xf0\x9f\x98\x80",
     {"\xe2\x82\xac", "Zo\xc3\xab", "\xf0\x9f\x98\x80"}},
    {"de-en", "Dr\xc3\xbc" "cken Sie \xe2\x8c\x98 und \xe2\x8c\xa5 zusammen.",
     {"\xe2\x8c\x98", "\xe2\x8c\xa5"}},
};

START_TEST(test_symbols_kept)
{
    for (size_t i = 0; i < sizeof k_kept / sizeof k_kept[0]; i++) {
        const kept_case *c = &k_kept[i];
        json_t *a, *b;
        const char *copied = native(c->model, c->text, "", &a);
        const char *raw = native(c->model, c->text, ",\"copy_unknown\":false", &b);
        for (int k = 0; k < 4 && c->symbols[k]; k++) {
            ck_assert_msg(strstr(copied, c->symbols[k]) != NULL, "'%s' -> '%s': no %s", c->text,
                          copied, c->symbols[k]);
            ck_assert_msg(strstr(raw, c->symbols[k]) == NULL, "raw '%s' -> '%s' has %s", c->text,
                          raw, c->symbols[k]);
        }
        /* the same decode: only its text differs */
        json_t *sa = json_object_get(json_array_get(json_object_get(a, "translations"), 0), "score");
        json_t *sb = json_object_get(json_array_get(json_object_get(b, "translations"), 0), "score");
        ck_assert(json_real_value(sa) == json_real_value(sb));
        json_decref(a);
        json_decref(b);
    }
}
END_TEST

/* de-en keeps € of "5 € © 2024" and drops ©: one <unk> for two unknown
 * source pieces. The attention (captured without being asked) says which;
 * by rank there would be no answer. */
START_TEST(test_attention_chooses)
{
    json_t *a;
    const char *t = native("de-en", "5 \xe2\x82\xac \xc2\xa9 2024", "", &a);
    json_t *tr = json_array_get(json_object_get(a, "translations"), 0);
    ck_assert_msg(strstr(t, "\xe2\x82\xac") != NULL, "%s", t);
    ck_assert_ptr_null(json_object_get(tr, "attention")); /* captured, not answered */
    json_decref(a);
}
END_TEST

/* The byte where character c of t starts. */
static size_t byte_of(const char *t, json_int_t c)
{
    size_t b = 0;
    for (json_int_t k = 0; t[b] && k < c; k++)
        do
            b++;
        while (((unsigned char)t[b] & 0xC0) == 0x80);
    return b;
}

/* Offsets of each <unk> are its symbol; the alternatives copy too; the
 * request's own attention selection is what it gets; the cache answers
 * the same again. */
START_TEST(test_tokens_hypotheses_attention)
{
    json_t *a;
    const char *text = "Pay 5 \xe2\x82\xac now, Zo\xc3\xab.";
    native("en-de", text, ",\"return_tokens\":true,\"num_hypotheses\":2", &a);
    json_t *tr = json_array_get(json_object_get(a, "translations"), 0);
    const char *t = json_string_value(json_object_get(tr, "text"));
    json_t *toks = json_object_get(tr, "tokens"), *offs = json_object_get(tr, "offsets");
    int unks = 0;
    for (size_t i = 0; i < json_array_size(toks); i++) {
        if (strcmp(json_string_value(json_array_get(toks, i)), "<unk>"))
            continue;
        json_int_t s = json_integer_value(json_array_get(json_array_get(offs, i), 0));
        json_int_t e = json_integer_value(json_array_get(json_array_get(offs, i), 1));
        /* character offsets: their bytes */
        size_t p = byte_of(t, s), q = byte_of(t, e);
        while (p < q && t[p] == ' ') /* a word's space is its first token's */
            p++;
        char span[64];
        snprintf(span, sizeof span, "%.*s", (int)(q - p), t + p);
        ck_assert_msg(!strcmp(span, "\xe2\x82\xac") || !strcmp(span, "\xc3\xab"),
                      "<unk> %zu spans '%s' of '%s'", i, span, t);
        unks++;
    }
    ck_assert_int_ge(unks, 2);
    json_t *hs = json_object_get(tr, "hypotheses");
    ck_assert_int_eq(json_array_size(hs), 2);
    for (size_t k = 0; k < 2; k++)
        ck_assert_msg(strstr(json_string_value(json_object_get(json_array_get(hs, k), "text")),
                             "\xe2\x82\xac"), "hypothesis %zu", k);
    char *first = json_dumps(a, JSON_SORT_KEYS);
    json_decref(a);
    /* again: the cache's stored result, the same answer */
    native("en-de", text, ",\"return_tokens\":true,\"num_hypotheses\":2", &a);
    char *again = json_dumps(a, JSON_SORT_KEYS);
    ck_assert_str_eq(first, again);
    free(first);
    free(again);
    json_decref(a);
    /* the caller's attention: as asked, and still a copy */
    t = native("en-de", text, ",\"return_attention\":true,\"attention_layers\":[0],"
               "\"attention_heads\":[1]", &a);
    ck_assert_msg(strstr(t, "\xe2\x82\xac") && strstr(t, "Zo\xc3\xab"), "%s", t);
    json_t *att = json_object_get(json_array_get(json_object_get(a, "translations"), 0),
                                  "attention");
    ck_assert_int_eq(json_array_size(json_object_get(att, "layers")), 1);
    ck_assert_int_eq(json_array_size(json_object_get(att, "heads")), 1);
    json_decref(a);
}
END_TEST

START_TEST(test_libre)
{
    json_t *a = post_ok("/translate", "{\"q\":\"Pay 5 \xe2\x82\xac now, Zo\xc3\xab.\","
                                      "\"source\":\"en\",\"target\":\"de\",\"alternatives\":1}");
    const char *t = json_string_value(json_object_get(a, "translatedText"));
    ck_assert_msg(strstr(t, "\xe2\x82\xac") && strstr(t, "Zo\xc3\xab"), "%s", t);
    const char *alt = json_string_value(json_array_get(json_object_get(a, "alternatives"), 0));
    ck_assert_msg(alt && strstr(alt, "\xe2\x82\xac"), "%s", alt ? alt : "(none)");
    json_decref(a);
}
END_TEST

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_copy_unknown.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    tc_io_timeout_s = 300;
    const char *args[] = {"--workers", "1", NULL};
    pid_t pid;
    g_port = tc_daemon_start_both(TD_DAEMON, TD_BUNDLED_MODEL, g_tmp, "copy", args, &pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s\n", g_tmp);
        return 1;
    }
    Suite *s = suite_create("copy_unknown");
    TCase *tc = tcase_create("copy");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_symbols_kept);
    tcase_add_test(tc, test_attention_chooses);
    tcase_add_test(tc, test_tokens_hypotheses_attention);
    tcase_add_test(tc, test_libre);
    suite_add_tcase(s, tc);
    return tc_run_suite(s, pid, g_tmp);
}
