/*
 * test_model_files.c - broken model directories that used to load or hang:
 * a vocab.json cut short (it loaded and silently tokenized missing pieces
 * as <unk>) must be an error that counts the missing pieces; a FIFO,
 * directory or device named like a model file must be an error naming the
 * file, never a load that blocks (an alarm turns a hang into a failure).
 * Runs on a copy of tests/data/text/marian_en_de.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "tokenizer.h"
#include "translator.h"

#define SRC TD_TEST_DATA "/text/marian_en_de"

static char g_dir[256];
static const char *k_files[] = {"config.json", "generation_config.json", "model.safetensors",
                                "source.spm", "target.spm", "vocab.json"};
#define N_FILES (sizeof k_files / sizeof k_files[0])

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    ck_assert_msg(a && b, "copy %s -> %s", from, to);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        ck_assert(fwrite(buf, 1, n, b) == n);
    fclose(a);
    fclose(b);
}

static void path_of(char *p, size_t n, const char *name)
{
    snprintf(p, n, "%s/%s", g_dir, name);
}

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/td_model_files_XXXXXX");
    ck_assert(mkdtemp(g_dir) != NULL);
    char a[512], b[512];
    for (size_t i = 0; i < N_FILES; i++) {
        snprintf(a, sizeof a, "%s/%s", SRC, k_files[i]);
        path_of(b, sizeof b, k_files[i]);
        copy_file(a, b);
    }
    alarm(60); /* a load that blocks fails the test instead of hanging it */
}

static void teardown(void)
{
    alarm(0);
    char p[512];
    for (size_t i = 0; i < N_FILES; i++) {
        path_of(p, sizeof p, k_files[i]);
        if (unlink(p) != 0)
            rmdir(p);
    }
    rmdir(g_dir);
}

static int load_tok(char *err, size_t n)
{
    td_config cfg;
    ck_assert_int_eq(td_config_load(&cfg, g_dir, err, n), 0);
    td_tokenizer *t = NULL;
    int rc = td_tok_load(&t, g_dir, cfg.vocab_size, cfg.decoder_vocab_size, err, n);
    td_tok_free(t);
    return rc;
}

START_TEST(test_intact_loads)
{
    char err[512] = "";
    ck_assert_msg(load_tok(err, sizeof err) == 0, "%s", err);
}
END_TEST

/* vocab.json keeps its first 100 entries (and the special tokens). */
START_TEST(test_vocab_cut_short)
{
    char p[512], err[512] = "";
    path_of(p, sizeof p, "vocab.json");
    json_error_t je;
    json_t *v = json_load_file(p, 0, &je), *cut = json_object();
    ck_assert_ptr_nonnull(v);
    size_t total = json_object_size(v), kept = 0;
    const char *k;
    json_t *val;
    json_object_foreach(v, k, val) {
        if (kept < 100 || !strcmp(k, "<unk>") || !strcmp(k, "</s>") || !strcmp(k, "<pad>")) {
            json_object_set(cut, k, val);
            kept++;
        }
    }
    ck_assert_int_gt(total, 200);
    ck_assert_int_eq(json_dump_file(cut, p, 0), 0);
    json_decref(v);
    json_decref(cut);
    ck_assert_int_ne(load_tok(err, sizeof err), 0);
    ck_assert_msg(strstr(err, "vocab.json") && strstr(err, "are missing"), "%s", err);
}
END_TEST

/* One piece missing is the noise a genuine export may have: still loads. */
START_TEST(test_vocab_one_missing)
{
    char p[512], err[512] = "";
    path_of(p, sizeof p, "vocab.json");
    json_error_t je;
    json_t *v = json_load_file(p, 0, &je);
    ck_assert_ptr_nonnull(v);
    const char *k;
    json_t *val;
    json_object_foreach(v, k, val) {
        if (strcmp(k, "<unk>") && strcmp(k, "</s>") && strcmp(k, "<pad>") && k[0] != '<') {
            json_object_del(v, k);
            break;
        }
    }
    ck_assert_int_eq(json_dump_file(v, p, 0), 0);
    json_decref(v);
    ck_assert_msg(load_tok(err, sizeof err) == 0, "%s", err);
}
END_TEST

/* Each model file replaced by a FIFO (nobody writes it), then by a
 * directory: an error naming it, never a hang. */
START_TEST(test_not_regular_files)
{
    for (size_t i = 0; i < N_FILES; i++) {
        for (int kind = 0; kind < 2; kind++) {
            char p[512], err[1024] = "", keep[600];
            path_of(p, sizeof p, k_files[i]);
            snprintf(keep, sizeof keep, "%s.keep", p);
            ck_assert_int_eq(rename(p, keep), 0);
            ck_assert_int_eq(kind ? mkdir(p, 0755) : mkfifo(p, 0644), 0);
            td_model *m = NULL;
            td_load_opts o = {.n_threads = 1};
            int rc = td_model_load(&m, g_dir, &o, err, sizeof err);
            if (rc == 0) {
                td_tokenizer *t = NULL;
                rc = td_model_tokenizer_load(m, g_dir, &t, err, sizeof err);
                td_tok_free(t);
            }
            td_model_free(m);
            ck_assert_msg(rc != 0, "%s as a %s loaded", k_files[i], kind ? "directory" : "FIFO");
            ck_assert_msg(strstr(err, k_files[i]) != NULL, "%s: %s", k_files[i], err);
            ck_assert_msg(strstr(err, "regular") != NULL || kind == 1, "%s: %s", k_files[i], err);
            if (kind)
                rmdir(p);
            else
                unlink(p);
            ck_assert_int_eq(rename(keep, p), 0);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model-files");
    TCase *tc = tcase_create("files");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_intact_loads);
    tcase_add_test(tc, test_vocab_cut_short);
    tcase_add_test(tc, test_vocab_one_missing);
    tcase_add_test(tc, test_not_regular_files);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
