/*
 * test_text.c - text in, text out, against transformers' MarianTokenizer +
 * MarianMTModel.generate + batch_decode (goldens from
 * tools/make_text_fixture.py, fixtures tests/data/text/marian_en_de (shared
 * vocabulary) and tests/data/text/marian_sep (vocab.json + target_vocab.json,
 * separate embeddings); the CLI tests run on marian_en_de only):
 *   - source tokenization (ids identical), target tokenization (text_target)
 *   - decoding of id sequences (skip_special_tokens=True)
 *   - td_translate_text, greedy and beam 4: output ids and text identical
 *   - `transformerd translate` on stdin/stdout: identical lines, in order
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer.h"
#include "translator.h"
#include "run_capture.h"

/* the tokenizer and API tests loop over both fixtures (_i indexes these) */
static const char *const FIXTURES[] = {"marian_en_de", "marian_sep"};
#define N_FIXTURES ((int)(sizeof FIXTURES / sizeof FIXTURES[0]))
static char g_dirs[N_FIXTURES][512];
static json_t *g_golds[N_FIXTURES];
#define DIR (g_dirs[_i])
#define g_gold (g_golds[_i])

static int ids_equal(const int32_t *got, int n, json_t *want)
{
    if ((int)json_array_size(want) != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (json_integer_value(json_array_get(want, (size_t)i)) != got[i])
            return 0;
    return 1;
}

static void print_ids(const char *what, const int32_t *ids, int n, json_t *want)
{
    fprintf(stderr, "  %s got ", what);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "%d ", ids[i]);
    fprintf(stderr, "\n  %s want ", what);
    for (size_t i = 0; i < json_array_size(want); i++)
        fprintf(stderr, "%lld ", (long long)json_integer_value(json_array_get(want, i)));
    fprintf(stderr, "\n");
}

/* The ids' free accepts NULL whatever the count (STYLE: every _free takes
 * NULL), and leaves freed entries NULL so a second free is harmless. */
START_TEST(test_ids_free_null)
{
    td_tok_ids_free(NULL, 3);
    td_tok_ids ids[2];
    memset(ids, 0, sizeof ids);
    ids[0].ids = malloc(4 * sizeof(int32_t));
    td_tok_ids_free(ids, 2);
    ck_assert_ptr_null(ids[0].ids);
    td_tok_ids_free(ids, 2);
}
END_TEST

START_TEST(test_tokenize)
{
    char err[512];
    td_tokenizer *tok = NULL;
    ck_assert_msg(td_tok_load(&tok, DIR, 0, 0, err, sizeof err) == 0, "%s", err);
    json_t *cases = json_object_get(g_gold, "cases");
    int bad = 0, n_cases = (int)json_array_size(cases);
    ck_assert_int_ge(n_cases, 20);
    for (int i = 0; i < n_cases; i++) {
        json_t *c = json_array_get(cases, (size_t)i);
        json_t *text = json_object_get(c, "text");
        int32_t *ids;
        int n;
        ck_assert(td_tok_encode(tok, TD_TOK_SOURCE, json_string_value(text),
                                json_string_length(text), &ids, &n) == 0);
        if (!ids_equal(ids, n, json_object_get(c, "source_ids"))) {
            fprintf(stderr, "%s source case %d '%s':\n", FIXTURES[_i], i, json_string_value(text));
            print_ids("ids", ids, n, json_object_get(c, "source_ids"));
            bad++;
        }
        free(ids);
    }
    json_t *tt = json_object_get(g_gold, "target_tokenize");
    for (size_t i = 0; i < json_array_size(tt); i++) {
        json_t *c = json_array_get(tt, i);
        json_t *text = json_object_get(c, "text");
        int32_t *ids;
        int n;
        ck_assert(td_tok_encode(tok, TD_TOK_TARGET, json_string_value(text),
                                json_string_length(text), &ids, &n) == 0);
        if (!ids_equal(ids, n, json_object_get(c, "input_ids"))) {
            fprintf(stderr, "%s target case %zu '%s':\n", FIXTURES[_i], i, json_string_value(text));
            print_ids("ids", ids, n, json_object_get(c, "input_ids"));
            bad++;
        }
        free(ids);
    }
    json_t *dec = json_object_get(g_gold, "decode");
    ck_assert_int_gt((int)json_array_size(dec), 0);
    for (size_t i = 0; i < json_array_size(dec); i++) {
        json_t *c = json_array_get(dec, i);
        json_t *a = json_object_get(c, "ids");
        int n = (int)json_array_size(a);
        int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
        for (int j = 0; j < n; j++)
            ids[j] = (int32_t)json_integer_value(json_array_get(a, (size_t)j));
        char *text;
        ck_assert(td_tok_decode(tok, ids, n, &text) == 0);
        const char *want = json_string_value(json_object_get(c, "skip_special"));
        if (strcmp(text, want) != 0) {
            fprintf(stderr, "%s decode case %zu: got '%s' want '%s'\n", FIXTURES[_i], i, text, want);
            bad++;
        }
        free(text);
        free(ids);
    }
    td_tok_free(tok);
    ck_assert_msg(bad == 0, "%d tokenizer mismatches against MarianTokenizer", bad);
}
END_TEST

static int run_translate(int _i, td_worker *w, td_tokenizer *tok, int beam, const char *key, int M)
{
    json_t *cases = json_object_get(g_gold, "cases");
    int n = (int)json_array_size(cases);
    const char **texts = calloc((size_t)n, sizeof(char *));
    size_t *lens = calloc((size_t)n, sizeof(size_t));
    td_text_result *res = calloc((size_t)n, sizeof(td_text_result));
    for (int i = 0; i < n; i++) {
        json_t *t = json_object_get(json_array_get(cases, (size_t)i), "text");
        texts[i] = json_string_value(t);
        lens[i] = json_string_length(t);
    }
    td_decode_opts o;
    memset(&o, 0, sizeof o);
    o.beam_size = beam;
    o.num_hypotheses = 1;
    o.length_penalty = 1.0f;
    o.max_length = M;
    char err[512];
    int rc = td_translate_text(w, tok, texts, lens, n, &o, res, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    int bad = 0, n_empty = 0;
    for (int i = 0; i < n; i++) {
        json_t *g = json_object_get(json_array_get(cases, (size_t)i), key);
        const td_hypothesis *h = &res[i].r.hyps[0];
        /* docs/decisions.md: a source of nothing but </s> (empty or
         * whitespace-only text) is "" with score 0 and no tokens, where
         * transformers runs the model anyway */
        json_t *sids = json_object_get(json_array_get(cases, (size_t)i), "source_ids");
        if (json_array_size(sids) == 1) {
            if (strcmp(res[i].text, "") != 0 || h->n_tokens != 0 || h->score != 0.0f ||
                res[i].r.n_hyps != 1) {
                fprintf(stderr, "%s %s case %d '%s': not the empty translation\n", FIXTURES[_i],
                        key, i, texts[i]);
                bad++;
            }
            n_empty++;
            td_text_result_free(&res[i]);
            continue;
        }
        if (!ids_equal(h->tokens, h->n_tokens, json_object_get(g, "output_ids"))) {
            fprintf(stderr, "%s %s case %d '%s':\n", FIXTURES[_i], key, i, texts[i]);
            print_ids("output", h->tokens, h->n_tokens, json_object_get(g, "output_ids"));
            bad++;
        }
        const char *want = json_string_value(json_object_get(g, "translation"));
        if (strcmp(res[i].text, want) != 0) {
            fprintf(stderr, "%s %s case %d: got '%s' want '%s'\n", FIXTURES[_i], key, i, res[i].text,
                    want);
            bad++;
        }
        td_text_result_free(&res[i]);
    }
    free(texts);
    free(lens);
    free(res);
    /* the goldens hold empty and whitespace-only texts */
    if (n_empty < 2) {
        fprintf(stderr, "%s: only %d empty sources in the goldens\n", FIXTURES[_i], n_empty);
        bad++;
    }
    return bad;
}

START_TEST(test_translate_text)
{
    char err[512];
    td_model *m = NULL;
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_msg(td_model_load(&m, DIR, &lo, err, sizeof err) == 0, "%s", err);
    td_tokenizer *tok = NULL;
    ck_assert_msg(td_model_tokenizer_load(m, DIR, &tok, err, sizeof err) == 0, "%s", err);
    int M = (int)json_integer_value(json_object_get(g_gold, "max_length")) - 1;
    /* a small max_batch so that texts span several length-sorted batches */
    td_worker_opts wo = {.max_batch = 8, .max_length = M, .max_beam = 4, .n_threads = 1};
    td_worker *w = NULL;
    ck_assert_msg(td_worker_init(&w, m, &wo, err, sizeof err) == 0, "%s", err);
    int bad = run_translate(_i, w, tok, 1, "greedy", M);
    bad += run_translate(_i, w, tok, 4, "beam4", M);
    td_worker_free(w);
    td_tok_free(tok);
    td_model_free(m);
    ck_assert_msg(bad == 0, "%d mismatches against transformers' generate + batch_decode", bad);
}
END_TEST

/* The command line, as a user runs it: lines in, translations out. */
START_TEST(test_cli_translate)
{
    _i = 0; /* marian_en_de (added with tcase_add_test: _i is 0 anyway) */
    json_t *cases = json_object_get(g_gold, "cases");
    char in[] = "/tmp/td_text_in_XXXXXX";
    int fd = mkstemp(in);
    ck_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    int n = 0;
    int idx[1024];
    for (size_t i = 0; i < json_array_size(cases) && n < 1024; i++) {
        json_t *t = json_object_get(json_array_get(cases, i), "text");
        const char *s = json_string_value(t);
        if (strchr(s, '\n') || strchr(s, '\r') || strlen(s) != json_string_length(t))
            continue; /* one sentence per line */
        fprintf(f, "%s\n", s);
        idx[n++] = (int)i;
    }
    fclose(f);
    int M = (int)json_integer_value(json_object_get(g_gold, "max_length")) - 1;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' translate --model '%s' --beam 4 --max-length %d --batch 5 "
             "--threads 1 --no-split < '%s'", TD_BIN, DIR, M, in);
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    char *line = NULL;
    size_t cap = 0;
    int got = 0, bad = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, p)) >= 0) {
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = 0;
        ck_assert_int_lt(got, n);
        json_t *g = json_object_get(json_array_get(cases, (size_t)idx[got]), "beam4");
        const char *want = json_string_value(json_object_get(g, "translation"));
        if (strcmp(line, want) != 0) {
            fprintf(stderr, "cli line %d: got '%s' want '%s'\n", got + 1, line, want);
            bad++;
        }
        got++;
    }
    free(line);
    int status = pclose(p);
    unlink(in);
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(got, n);
    ck_assert_msg(bad == 0, "%d lines differ", bad);
}
END_TEST

/* Bad input never crashes the command and every line gets an output line:
 * empty, invalid UTF-8, a NUL byte, control characters, a 1 MB line (cut to
 * the model's positions with a warning). */
START_TEST(test_cli_bad_input)
{
    _i = 0; /* marian_en_de (added with tcase_add_test: _i is 0 anyway) */
    char in[] = "/tmp/td_text_bad_XXXXXX";
    int fd = mkstemp(in);
    ck_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("\n", f);                                /* empty */
    fputs("caf\xc3 \xff\xfe \xed\xa0\x80 ok\n", f); /* malformed UTF-8 */
    fwrite("a\0b\n", 1, 4, f);                     /* NUL inside */
    fputs("\x01\x7f\t \r\n", f);                   /* controls, CRLF */
    for (int i = 0; i < 1 << 19; i++)               /* 1 MB line */
        fputs("a ", f);
    fputs("\n", f);
    fputs("the end\n", f);
    fclose(f);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' translate --model '%s' --beam 2 --max-length 8 --threads 1 "
             "< '%s' 2>/dev/null", TD_BIN, DIR, in);
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    char *line = NULL;
    size_t cap = 0;
    int lines = 0;
    while (getline(&line, &cap, p) >= 0)
        lines++;
    free(line);
    int status = pclose(p);
    unlink(in);
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(lines, 6);
}
END_TEST

/* Empty and whitespace-only lines are empty lines out, in place, and the
 * lines around them are translated as when alone. */
START_TEST(test_cli_empty_lines)
{
    char out[4096], alone[1024];
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "echo 'Hello world' | '%s' translate --model '%s' --threads 1 2>/dev/null",
             TD_BIN, g_dirs[0]);
    ck_assert_int_eq(run_capture(cmd, alone, sizeof alone), 0);
    ck_assert_msg(strlen(alone) > 1, "'%s'", alone); /* a non-empty translation */
    snprintf(cmd, sizeof cmd,
             "printf '\\n   \\nHello world\\n\\t \\n\\342\\200\\203\\n' | '%s' translate "
             "--model '%s' --threads 1 2>/dev/null",
             TD_BIN, g_dirs[0]);
    ck_assert_int_eq(run_capture(cmd, out, sizeof out), 0);
    char want[2048];
    snprintf(want, sizeof want, "\n\n%s\n\n", alone);
    ck_assert_str_eq(out, want);
}
END_TEST

/* A line of several sentences is translated sentence by sentence and put
 * back with its own separators: the same as each sentence alone
 * (--no-split, one a line) joined with the line's spaces; a line of one
 * sentence is unchanged. */
START_TEST(test_cli_split)
{
    char split[4096], alone[4096], cmd[4096];
    snprintf(cmd, sizeof cmd,
             "printf 'Save the file. Open the window!  Close it.\\nHello world\\n' | '%s' "
             "translate --model '%s' --threads 1 2>/dev/null",
             TD_BIN, g_dirs[0]);
    ck_assert_int_eq(run_capture(cmd, split, sizeof split), 0);
    snprintf(cmd, sizeof cmd,
             "printf 'Save the file.\\nOpen the window!\\nClose it.\\nHello world\\n' | '%s' "
             "translate --model '%s' --threads 1 --no-split 2>/dev/null",
             TD_BIN, g_dirs[0]);
    ck_assert_int_eq(run_capture(cmd, alone, sizeof alone), 0);
    char *l[4], *p = alone; /* translations may be empty: no strtok */
    for (int k = 0; k < 4; k++) {
        char *nl = strchr(p, '\n');
        ck_assert(nl != NULL);
        *nl = 0;
        l[k] = p;
        p = nl + 1;
    }
    char want[4096];
    snprintf(want, sizeof want, "%s %s  %s\n%s\n", l[0], l[1], l[2], l[3]);
    ck_assert_str_eq(split, want);
}
END_TEST

/* Runs `transformerd translate` on one line with extra options; returns its
 * exit status, stdout+stderr in out. */
static int run_cli_translate(const char *opts, char *out, size_t outlen)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "echo 'the end' | '%s' translate --model '%s' --threads 1 %s 2>&1",
             TD_BIN, g_dirs[0], opts);
    return run_capture(cmd, out, outlen);
}

/* Numerics and device options: a clear error at start-up for what this
 * machine cannot do, never a silent fallback. */
START_TEST(test_cli_device_options)
{
    _i = 0;
    char out[4096];
    ck_assert_int_eq(run_cli_translate("--dtype float32 --precision full", out, sizeof out), 0);
    ck_assert_int_eq(run_cli_translate("--dtype auto --precision half", out, sizeof out), 0);
    ck_assert_int_eq(run_cli_translate("--dtype float16", out, sizeof out), 1);
    ck_assert_msg(strstr(out, "needs --device cuda") != NULL, "%s", out);
    /* bad values: usage errors (exit 2), before the model loads */
    ck_assert_int_eq(run_cli_translate("--dtype float8", out, sizeof out), 2);
    ck_assert_msg(strstr(out, "expected auto, float32, float16, bfloat16, int8 or int8-all") != NULL, "%s",
                  out);
    ck_assert_int_eq(run_cli_translate("--dtype int8", out, sizeof out), 0);
    ck_assert_int_eq(run_cli_translate("--precision quarter", out, sizeof out), 2);
    ck_assert_msg(strstr(out, "expected full or half") != NULL, "%s", out);
    ck_assert_int_eq(run_cli_translate("--device cuda:x", out, sizeof out), 1);
    ck_assert_msg(strstr(out, "cuda:N") != NULL, "%s", out);
    ck_assert_int_eq(run_cli_translate("--device tpu", out, sizeof out), 1);
    ck_assert_msg(strstr(out, "unknown device") != NULL, "%s", out);
    /* without a usable GPU (CI): an error that names the way out */
    int rc = run_cli_translate("--device cuda", out, sizeof out);
    if (rc != 0)
        ck_assert_msg(strstr(out, "--device cpu") != NULL, "%s", out);
    /* the CUDA module not where it is said to be: an error naming it */
    setenv("TD_CUDA_LIBRARY", "/nonexistent/libtdcuda.so", 1);
    rc = run_cli_translate("--device cuda", out, sizeof out);
    unsetenv("TD_CUDA_LIBRARY");
    ck_assert_int_eq(rc, 1);
    if (!strstr(out, "has no CUDA backend")) /* a build with CUDA */
        ck_assert_msg(strstr(out, "/nonexistent/libtdcuda.so") && strstr(out, "--device cpu"),
                      "%s", out);
}
END_TEST

int main(void)
{
    for (int _i = 0; _i < N_FIXTURES; _i++) {
        json_error_t je;
        snprintf(g_dirs[_i], sizeof g_dirs[_i], "%s/text/%s", TD_TEST_DATA, FIXTURES[_i]);
        char path[1100];
        snprintf(path, sizeof path, "%s/golden.json", DIR);
        g_gold = json_load_file(path, 0, &je);
        if (!g_gold) {
            fprintf(stderr, "%s: %s\n", path, je.text);
            return EXIT_FAILURE;
        }
    }
    Suite *s = suite_create("text");
    TCase *tc = tcase_create("text");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_ids_free_null);
    tcase_add_loop_test(tc, test_tokenize, 0, N_FIXTURES);
    tcase_add_loop_test(tc, test_translate_text, 0, N_FIXTURES);
    tcase_add_test(tc, test_cli_translate);
    tcase_add_test(tc, test_cli_bad_input);
    tcase_add_test(tc, test_cli_empty_lines);
    tcase_add_test(tc, test_cli_split);
    tcase_add_test(tc, test_cli_device_options);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    for (int i = 0; i < N_FIXTURES; i++)
        json_decref(g_golds[i]);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
