/*
 * test_longtext.c - long texts through the daemon (docs/api.md, "Long
 * texts"), with the bundled model (models/en-de): paragraphs keep their
 * layout, a text of 5,000 tokens is answered, a text's translation is its
 * sentences translated one by one between its own separators, per-sentence
 * tokens, offsets and attention cover the text exactly, a text of one
 * sentence keeps today's answer, split_sentences false is today's
 * behaviour, a sentence over the limit is a 422 naming text and sentence,
 * and LibreTranslate's /translate splits too.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "server/client.h"
#include "server/suite.h"

#ifndef TD_DAEMON
#error "TD_DAEMON (path of the transformerd executable) must be defined"
#endif
#ifndef TD_BUNDLED_MODEL
#error "TD_BUNDLED_MODEL (models/en-de) must be defined"
#endif

static char g_tmp[256];
static int g_port = -1;
static pid_t g_pid = -1;

/* POSTs req (taken) to path, asserts the status, returns the body's JSON. */
static json_t *post(const char *path, json_t *req, int status)
{
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    tc_resp r = {0};
    ck_assert_int_eq(tc_post_json(g_port, path, body, &r), 0);
    free(body);
    ck_assert_msg(r.status == status, "status %d, want %d: %.300s", r.status, status, r.body);
    json_error_t je;
    json_t *j = json_loadb(r.body, r.body_len, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %.300s", r.body);
    tc_resp_free(&r);
    return j;
}

/* The translations of texts (NULL-terminated) with extra request fields. */
static json_t *translate(const char *const *texts, const char *extra_json)
{
    json_t *req = extra_json ? json_loads(extra_json, 0, NULL) : json_object();
    ck_assert_ptr_nonnull(req);
    json_t *a = json_array();
    for (int i = 0; texts[i]; i++)
        json_array_append_new(a, json_string(texts[i]));
    json_object_set_new(req, "text", a);
    json_t *resp = post("/v1/translate", req, 200);
    json_t *tr = json_incref(json_object_get(resp, "translations"));
    json_decref(resp);
    return tr;
}

static const char *text_of(json_t *tr, size_t i)
{
    return json_string_value(json_object_get(json_array_get(tr, i), "text"));
}

/* Code points of s, and where each starts (bytes; [n] = the length). */
static size_t *cp_bytes(const char *s, size_t *n)
{
    size_t len = strlen(s), *b = malloc((len + 1) * sizeof *b), k = 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            b[k++] = i;
    b[k] = len;
    *n = k;
    return b;
}

/* s[start, end) in code points, malloc'd. */
static char *cp_slice(const char *s, json_int_t start, json_int_t end)
{
    size_t n, *b = cp_bytes(s, &n);
    ck_assert(start >= 0 && start <= end && (size_t)end <= n);
    char *out = strndup(s + b[start], b[end] - b[start]);
    free(b);
    return out;
}

static size_t cp_len(const char *s)
{
    size_t n, *b = cp_bytes(s, &n);
    free(b);
    return n;
}

static json_int_t at(json_t *pair, size_t i)
{
    return json_integer_value(json_array_get(pair, i));
}

/* The separators of a text around its ranges ([start, end) pairs, code
 * points), joined with '|' (malloc'd). */
static char *separators(const char *s, json_t *sents, const char *key)
{
    size_t cap = strlen(s) + json_array_size(sents) + 2, w = 0;
    char *out = malloc(cap);
    json_int_t prev = 0;
    size_t i;
    json_t *so;
    json_array_foreach(sents, i, so)
    {
        json_t *rg = json_object_get(so, key);
        char *gap = cp_slice(s, prev, at(rg, 0));
        w += (size_t)snprintf(out + w, cap - w, "%s|", gap);
        free(gap);
        prev = at(rg, 1);
    }
    char *gap = cp_slice(s, prev, (json_int_t)cp_len(s));
    snprintf(out + w, cap - w, "%s", gap);
    free(gap);
    return out;
}

static const char k_paragraphs[] =
    "Open the file. Save the document before you close the window.\n"
    "\n"
    "The program could not find the printer. Check the cable and try again!\n"
    "\n"
    "\n"
    "Do you want to delete these files? This cannot be undone.";

/* Three paragraphs: three paragraphs, the blank lines as they were. */
START_TEST(paragraphs_keep_layout)
{
    const char *texts[] = {k_paragraphs, NULL};
    json_t *tr = translate(texts, "{\"return_tokens\": true}");
    const char *t = text_of(tr, 0);
    const char *p1 = strstr(t, "\n\n"), *p2 = p1 ? strstr(p1 + 2, "\n\n\n") : NULL;
    ck_assert_msg(p1 && p2 && p1 > t && p2 > p1 + 2 && p2[3] && !strstr(p2 + 3, "\n"),
                  "layout lost: %s", t);
    ck_assert_msg(!strstr(p1 + 2, "\n\n") || strstr(p1 + 2, "\n\n") == p2, "%s", t);
    json_t *sents = json_object_get(json_array_get(tr, 0), "sentences");
    ck_assert_uint_eq(json_array_size(sents), 6);
    /* the separators of the translation are the source's */
    char *src_sep = separators(k_paragraphs, sents, "source_range");
    char *tgt_sep = separators(t, sents, "range");
    ck_assert_str_eq(src_sep, "| |\n\n| |\n\n\n| |");
    ck_assert_str_eq(tgt_sep, src_sep);
    free(src_sep);
    free(tgt_sep);
    json_decref(tr);
}
END_TEST

/* The translation of a text of several sentences is its sentences
 * translated one by one (as a list, split_sentences false) between the
 * text's own separators; a text of one sentence answers as before. */
START_TEST(equals_sentences_one_by_one)
{
    static const char text[] = "  Save the file.  Close the window!\n\nOpen the naïve café? "
                               "Dr. Smith printed 3.5 pages, e.g. the index.\t";
    const char *one[] = {"Save the file.", "Close the window!", "Open the naïve café?",
                         "Dr. Smith printed 3.5 pages, e.g. the index.", NULL};
    const char *texts[] = {text, "Hello world", NULL};
    json_t *got = translate(texts, NULL);
    json_t *alone = translate(one, "{\"split_sentences\": false}");
    char want[2048];
    snprintf(want, sizeof want, "  %s  %s\n\n%s %s\t", text_of(alone, 0), text_of(alone, 1),
             text_of(alone, 2), text_of(alone, 3));
    ck_assert_str_eq(text_of(got, 0), want);
    /* one sentence: the whole answer as with split_sentences false */
    const char *hello[] = {"Hello world", "  Save the file.  ", NULL};
    const char *fields[] = {"{\"return_attention\": true, \"num_hypotheses\": 2}",
                            "{\"return_attention\": true, \"num_hypotheses\": 2, "
                            "\"split_sentences\": false}"};
    json_t *a = translate(hello, fields[0]), *b = translate(hello, fields[1]);
    ck_assert_msg(json_equal(a, b), "a text of one sentence answers differently");
    ck_assert_ptr_null(json_object_get(json_array_get(a, 0), "sentences"));
    json_decref(a);
    json_decref(b);
    json_decref(got);
    json_decref(alone);
}
END_TEST

/* Per sentence: tokens, offsets and attention; the offsets cover each
 * sentence exactly, the ranges and separators cover the text exactly. */
START_TEST(sentence_offsets_cover_the_text)
{
    static const char text[] = "Open the naïve café? It is closed.\nThe end";
    const char *texts[] = {text, NULL};
    json_t *tr = translate(texts, "{\"return_attention\": true, \"attention_layers\": [-1]}");
    json_t *o = json_array_get(tr, 0);
    const char *t = text_of(tr, 0);
    json_t *sents = json_object_get(o, "sentences");
    ck_assert_uint_eq(json_array_size(sents), 3);
    ck_assert_ptr_null(json_object_get(o, "tokens"));
    size_t i;
    json_t *so;
    const char *want_src[] = {"Open the naïve café?", "It is closed.", "The end"};
    json_array_foreach(sents, i, so)
    {
        json_t *sr = json_object_get(so, "source_range"), *rg = json_object_get(so, "range");
        char *src = cp_slice(text, at(sr, 0), at(sr, 1));
        ck_assert_str_eq(src, want_src[i]);
        free(src);
        char *tgt = cp_slice(t, at(rg, 0), at(rg, 1));
        ck_assert_str_eq(tgt, json_string_value(json_object_get(so, "text")));
        free(tgt);
        /* source and target offsets: contiguous over the sentence's range */
        const char *keys[][2] = {{"source_offsets", "source_range"}, {"offsets", "range"}};
        for (int side = 0; side < 2; side++) {
            json_t *off = json_object_get(so, keys[side][0]);
            json_t *r = json_object_get(so, keys[side][1]);
            ck_assert_uint_gt(json_array_size(off), 0);
            json_int_t pos = at(r, 0);
            size_t k;
            json_t *p;
            json_array_foreach(off, k, p)
            {
                ck_assert_int_eq(at(p, 0), pos);
                ck_assert_int_ge(at(p, 1), pos);
                pos = at(p, 1);
            }
            ck_assert_int_eq(pos, at(r, 1));
        }
        ck_assert_uint_eq(json_array_size(json_object_get(so, "source_offsets")),
                          json_array_size(json_object_get(so, "source_tokens")));
        /* attention: one row per target token, one column per source token */
        json_t *cross = json_object_get(json_object_get(so, "attention"), "cross");
        json_t *rows = json_array_get(json_array_get(cross, 0), 0);
        ck_assert_uint_eq(json_array_size(cross), 1);
        ck_assert_uint_eq(json_array_size(rows),
                          json_array_size(json_object_get(so, "tokens")));
        ck_assert_uint_eq(json_array_size(json_array_get(rows, 0)),
                          json_array_size(json_object_get(so, "source_tokens")));
    }
    char *ss = separators(text, sents, "source_range"), *ts = separators(t, sents, "range");
    ck_assert_str_eq(ss, "| |\n|");
    ck_assert_str_eq(ts, ss);
    free(ss);
    free(ts);
    json_decref(tr);
}
END_TEST

/* A text of about 5,000 tokens (over 600 sentences) is answered; so is
 * LibreTranslate's /translate, with the same text. */
START_TEST(five_thousand_tokens)
{
    static const char *const base[] = {"The file %d could not be opened",
                                       "Please check the settings of printer %d",
                                       "Do you want to save the changes to document %d",
                                       "Window %d was closed"};
    static const char end[] = "..?!";
    size_t cap = 1 << 16, w = 0;
    char *text = malloc(cap);
    for (int i = 0; i < 640; i++) {
        const char *d = strstr(base[i % 4], "%d");
        w += (size_t)snprintf(text + w, cap - w, "%.*s%d%s%c", (int)(d - base[i % 4]),
                              base[i % 4], i, d + 2, end[i % 4]);
        w += (size_t)snprintf(text + w, cap - w, "%s", i % 10 == 9 ? "\n\n" : " ");
    }
    const char *texts[] = {text, NULL};
    json_t *req = json_pack("{s:[s],s:i}", "text", text, "beam_size", 1);
    json_t *resp = post("/v1/translate", req, 200);
    json_int_t in = json_integer_value(
        json_object_get(json_object_get(resp, "usage"), "source_tokens"));
    ck_assert_msg(in >= 5000, "only %lld source tokens", (long long)in);
    const char *t = text_of(json_object_get(resp, "translations"), 0);
    int paras = 0;
    for (const char *p = t; (p = strstr(p, "\n\n")); p += 2)
        paras++;
    ck_assert_int_eq(paras, 64);
    (void)texts;
    /* unsplit, the same text is over the model's 256 positions */
    req = json_pack("{s:[s],s:b}", "text", text, "split_sentences", 0);
    json_t *err = post("/v1/translate", req, 422);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(err, "error"), "code")),
                     "text_too_long");
    json_decref(err);
    json_decref(resp);
    free(text);
}
END_TEST

/* Only a sentence over the limit is an error: 422 naming text and
 * sentence. */
START_TEST(long_sentence_is_422)
{
    size_t cap = 1 << 14, w = 0;
    char *text = malloc(cap);
    w += (size_t)snprintf(text + w, cap - w, "This is fine. And this");
    for (int i = 0; i < 300; i++)
        w += (size_t)snprintf(text + w, cap - w, " and file %d", i);
    snprintf(text + w, cap - w, " never ends.");
    json_t *req = json_pack("{s:[s,s]}", "text", "Hello world", text);
    json_t *err = post("/v1/translate", req, 422);
    json_t *e = json_object_get(err, "error");
    ck_assert_str_eq(json_string_value(json_object_get(e, "code")), "text_too_long");
    ck_assert_str_eq(json_string_value(json_object_get(e, "param")), "text");
    const char *msg = json_string_value(json_object_get(e, "message"));
    ck_assert_msg(strstr(msg, "text 1, sentence 1 (characters 14..") != NULL, "%s", msg);
    json_decref(err);
    free(text);
}
END_TEST

/* LibreTranslate: the same text, the same translation; HTML text nodes
 * split too; alternatives are whole-text hypotheses. */
START_TEST(libre_splits)
{
    const char *texts[] = {k_paragraphs, NULL};
    json_t *tr = translate(texts, NULL);
    json_t *req = json_pack("{s:s,s:s,s:s}", "q", k_paragraphs, "source", "en", "target", "de");
    json_t *resp = post("/translate", req, 200);
    ck_assert_str_eq(json_string_value(json_object_get(resp, "translatedText")),
                     text_of(tr, 0));
    json_decref(resp);
    json_decref(tr);
    req = json_pack("{s:s,s:s,s:s,s:i}", "q", "Open the file. Close the window.", "source", "en",
                    "target", "de", "alternatives", 2);
    resp = post("/translate", req, 200);
    json_t *alts = json_object_get(resp, "alternatives");
    ck_assert_uint_eq(json_array_size(alts), 2);
    /* alternative i is hypothesis i+1 of each sentence translated alone
     * (with the same beam), between the text's own separator; the
     * sentences' hypotheses all differ, so copies of the best (or of
     * another rank) cannot pass */
    const char *pair[] = {"Open the file.", "Close the window.", NULL};
    json_t *hy = translate(pair, "{\"num_hypotheses\": 3, \"split_sentences\": false}");
    const char *best = json_string_value(json_object_get(resp, "translatedText"));
    for (size_t i = 0; i < 2; i++) {
        const char *h[2];
        for (size_t s = 0; s < 2; s++) {
            json_t *hs = json_object_get(json_array_get(hy, s), "hypotheses");
            ck_assert_uint_eq(json_array_size(hs), 3);
            h[s] = json_string_value(json_object_get(json_array_get(hs, i + 1), "text"));
            ck_assert_str_ne(h[s], json_string_value(
                                       json_object_get(json_array_get(hs, i), "text")));
        }
        char want[1024];
        snprintf(want, sizeof want, "%s %s", h[0], h[1]);
        const char *got = json_string_value(json_array_get(alts, i));
        ck_assert_str_eq(got, want);
        ck_assert_str_ne(got, best);
    }
    json_decref(hy);
    json_decref(resp);
    /* format=html: markup is never lost to an alternative; LibreTranslate
     * gives html no alternatives ([]), nor do we (docs/api.md) */
    req = json_pack("{s:s,s:s,s:s,s:s,s:i}", "q", "<p>Open the file. <b>Close the window.</b></p>",
                    "source", "en", "target", "de", "format", "html", "alternatives", 2);
    resp = post("/translate", req, 200);
    alts = json_object_get(resp, "alternatives");
    ck_assert_msg(json_is_array(alts) && json_array_size(alts) == 0, "html alternatives: %s",
                  json_dumps(alts, JSON_ENCODE_ANY));
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(resp, "translatedText")),
                                 "</b></p>"));
    json_decref(resp);
    req = json_pack("{s:[s,s],s:s,s:s,s:s,s:i}", "q", "<i>Open the file.</i>", "Close the window.",
                    "source", "en", "target", "de", "format", "html", "alternatives", 1);
    resp = post("/translate", req, 200);
    alts = json_object_get(resp, "alternatives");
    ck_assert_uint_eq(json_array_size(alts), 2);
    for (size_t i = 0; i < 2; i++)
        ck_assert_uint_eq(json_array_size(json_array_get(alts, i)), 0);
    json_decref(resp);
    const char *one[] = {"Open the file.", "Close the window.", NULL};
    tr = translate(one, "{\"split_sentences\": false}");
    req = json_pack("{s:s,s:s,s:s,s:s}", "q", "<p>Open the file. <b>Close the window.</b></p>",
                    "source", "en", "target", "de", "format", "html");
    resp = post("/translate", req, 200);
    char want[1024];
    snprintf(want, sizeof want, "<p>%s <b>%s</b></p>", text_of(tr, 0), text_of(tr, 1));
    ck_assert_str_eq(json_string_value(json_object_get(resp, "translatedText")), want);
    json_decref(resp);
    json_decref(tr);
}
END_TEST

/* More sentences than --max-queue (1024) in one request: 422, before any
 * runs. */
START_TEST(too_many_sentences)
{
    size_t cap = 1 << 15, w = 0;
    char *text = malloc(cap);
    for (int i = 0; i < 1100; i++)
        w += (size_t)snprintf(text + w, cap - w, "Go %d. ", i);
    json_t *err = post("/v1/translate", json_pack("{s:s}", "text", text), 422);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(err, "error"), "code")),
        "too_many_sentences");
    json_decref(err);
    free(text);
}
END_TEST

/* split_sentences must be a boolean. */
START_TEST(split_sentences_type)
{
    json_t *req = json_pack("{s:s,s:i}", "text", "Hi. Ho.", "split_sentences", 0);
    json_t *err = post("/v1/translate", req, 400);
    json_t *e = json_object_get(err, "error");
    ck_assert_str_eq(json_string_value(json_object_get(e, "code")), "invalid_type");
    ck_assert_str_eq(json_string_value(json_object_get(e, "param")), "split_sentences");
    json_decref(err);
}
END_TEST

int main(void)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/td_longtext_test.XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    char log[512];
    snprintf(log, sizeof log, "%s/daemon.log", g_tmp);
    /* the 5,000-token request takes ~50 s under ASan on two busy cores,
     * and more than 300 s beside four busy loops: its deadline follows the
     * build and the load (100 s x tc_slowness()) */
    char limit[16];
    snprintf(limit, sizeof limit, "%d", 100 * tc_slowness());
    const char *args[] = {"--model", TD_BUNDLED_MODEL, "--threads", "1", "--request-timeout-s",
                          limit, NULL};
    tc_io_timeout_s = 240;
    g_port = tc_daemon_start(TD_DAEMON, args, log, 60, &g_pid);
    if (g_port <= 0) {
        fprintf(stderr, "the daemon did not start; see %s\n", log);
        return 1;
    }
    Suite *s = suite_create("longtext");
    TCase *tc = tcase_create("daemon");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, paragraphs_keep_layout);
    tcase_add_test(tc, equals_sentences_one_by_one);
    tcase_add_test(tc, sentence_offsets_cover_the_text);
    tcase_add_test(tc, five_thousand_tokens);
    tcase_add_test(tc, long_sentence_is_422);
    tcase_add_test(tc, libre_splits);
    tcase_add_test(tc, split_sentences_type);
    tcase_add_test(tc, too_many_sentences);
    suite_add_tcase(s, tc);
    return tc_run_suite(s, g_pid, g_tmp);
}
