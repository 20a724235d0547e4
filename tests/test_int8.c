/*
 * test_int8.c - the CPU's --dtype int8 on every fixture model of
 * tests/data/fixtures against the transformers goldens (float32).
 *
 * int8 weights (per-feature scales) and per-row int8 activations are not
 * float32: near-ties between candidates flip, and a flipped token changes
 * the rest of its hypothesis. So, per fixture (the fixtures are tiny random
 * models, far more tie-prone than a trained one):
 *   - at least INT8_BAR percent of the hypotheses token-exact;
 *   - the token-exact ones' scores within INT8_ABS + INT8_REL * |score|.
 * Over all fixtures together at least INT8_BAR_ALL percent token-exact.
 * On the bundled (trained) model the bars are stricter: docs/benchmarks.md
 * (BLEU within 0.3 of float32, >= 90% identical lines).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "golden_check.h"

/* Measured (AVX-512 VNNI, AVX2 and plain C give the same bits): with every
 * matrix int8, 51% (ext_prenorm_f16, 40/78) to 97% per fixture and
 * 1780/2352 = 75.7% over all; with the embeddings and the output projection
 * kept float32 (backend.h, keep_float) 58% (ext_interleaved, 75/129) to 97%
 * and 1892/2352 = 80.4%. Token-exact scores are off by up to 0.6 (27% of
 * the score), and by 0.36 on a short greedy hypothesis of ext_interleaved
 * (-0.316 against -0.678), on these random models, whose sharp logits
 * magnify the quantization error. A broken quantization (wrong scale or
 * compensation) gives near 0%. */
#define INT8_BAR 45
#define INT8_BAR_ALL 75
#define INT8_ABS 0.2
#define INT8_REL 0.35

static const golden_tol kTol = {.abs = INT8_ABS, .rel = INT8_REL, .attn = 1.0, .half = 1};
static const td_load_opts kInt8 = {.device = "cpu", .n_threads = 1, .dtype = "int8"};

static char g_names[64][256];
static int g_n_names;
static long g_hyps, g_exact;

START_TEST(test_fixture_int8)
{
    ck_assert_int_gt(g_n_names, _i);
    golden_count count = {0};
    char err[1024];
    int bad = golden_run_fixture(g_names[_i], &kInt8, &kTol, &count, err, sizeof err);
    ck_assert_msg(bad >= 0, "%s: %s", g_names[_i], err);
    const long hyps = count.hyps, exact = count.exact;
    g_hyps += hyps;
    g_exact += exact;
    fprintf(stderr, "%s (int8): %ld/%ld hypotheses token-exact\n", g_names[_i], exact, hyps);
    ck_assert_int_gt(hyps, 0);
    ck_assert_msg(bad == 0, "%s (int8): %d scores of token-exact hypotheses beyond %g + %g|s|",
                  g_names[_i], bad, INT8_ABS, INT8_REL);
    ck_assert_msg(exact * 100 >= hyps * INT8_BAR, "%s (int8): %ld of %ld token-exact (< %d%%)",
                  g_names[_i], exact, hyps, INT8_BAR);
}
END_TEST

START_TEST(test_all_int8)
{
    fprintf(stderr, "int8, all fixtures: %ld/%ld hypotheses token-exact\n", g_exact, g_hyps);
    ck_assert_msg(g_hyps > 0 && g_exact * 100 >= g_hyps * INT8_BAR_ALL,
                  "int8: %ld of %ld token-exact (< %d%%)", g_exact, g_hyps, INT8_BAR_ALL);
}
END_TEST

/* The GPU refuses int8 by name; the CPU reports it as the weights' dtype. */
START_TEST(test_int8_dtype_name)
{
    char err[1024];
    td_model *m = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/fixtures/marian_tied", TD_TEST_DATA);
    ck_assert_msg(td_model_load(&m, path, &kInt8, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(td_model_weight_dtype(m), "int8");
    td_model_free(m);
}
END_TEST

int main(void)
{
    g_n_names = golden_list(g_names, 64);
    Suite *s = suite_create("int8");
    TCase *tc = tcase_create("fixtures");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_fixture_int8, 0, g_n_names > 0 ? g_n_names : 1);
    tcase_add_test(tc, test_all_int8);
    tcase_add_test(tc, test_int8_dtype_name);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
