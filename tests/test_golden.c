/*
 * test_golden.c - every fixture model in tests/data/fixtures on the CPU
 * against the goldens that tools/make_fixtures.py computed with transformers
 * itself (MarianMTModel.generate, plus patched modules for the config
 * extensions). Token ids must be identical; scores and cross-attention
 * within 1e-4 (abs + rel). The F16/BF16 fixtures are computed by
 * transformers in float32 from the rounded weights, as the CPU engine
 * computes, so the same tolerance holds for them.
 *
 * Every case is run twice: as the batch the golden was made with, and each
 * sentence alone (a sentence gets the same result alone or inside any batch).
 * The comparison itself lives in golden_check.c (shared with the GPU test).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "golden_check.h"

static const golden_tol kTol = {.abs = 1e-4, .rel = 1e-4, .attn = 1e-4, .half = 0};
static const td_load_opts kCpu = {.device = "cpu", .n_threads = 1};

static char g_names[64][256];
static int g_n_names;

START_TEST(test_fixture)
{
    ck_assert_int_gt(g_n_names, _i);
    golden_count count = {0};
    char err[1024];
    int bad = golden_run_fixture(g_names[_i], &kCpu, &kTol, &count, err, sizeof err);
    ck_assert_msg(bad >= 0, "%s: %s", g_names[_i], err);
    ck_assert_int_gt(count.hyps, 0);
    ck_assert_msg(bad == 0, "%s: %d mismatches against the transformers goldens", g_names[_i],
                  bad);
}
END_TEST

START_TEST(test_fixtures_present)
{
    /* The golden test must not pass vacuously. */
    ck_assert_int_ge(g_n_names, 10);
}
END_TEST

/* Several workers share one read-only model: three threads, each with its
 * own worker, run every case twice at the same time. */
START_TEST(test_workers_share_a_model)
{
    golden_count count = {0};
    char err[1024];
    int bad = golden_run_shared("marian_tied", &kCpu, 3, &kTol, &count, err, sizeof err);
    ck_assert_msg(bad >= 0, "%s", err);
    ck_assert_msg(bad == 0, "%d mismatches with three workers sharing one model", bad);
}
END_TEST

int main(void)
{
    g_n_names = golden_list(g_names, 64);
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("fixtures");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_fixtures_present);
    tcase_add_loop_test(tc, test_fixture, 0, g_n_names > 0 ? g_n_names : 1);
    suite_add_tcase(s, tc);
    TCase *tc2 = tcase_create("shared");
    tcase_set_timeout(tc2, 600);
    tcase_add_test(tc2, test_workers_share_a_model);
    suite_add_tcase(s, tc2);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
