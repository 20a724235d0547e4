/*
 * test_gpu_golden.c - every fixture model in tests/data/fixtures run with
 * --device cuda against the transformers goldens (tools/make_fixtures.py),
 * with the comparison of tests/golden_check.c and per-dtype tolerances:
 *
 *   F32 checkpoints (float32 weights, float32 GEMMs, no TF32): every
 *     hypothesis token-exact; scores and cross-attention within 2e-4
 *     (abs + rel; the CPU test uses 1e-4, the GPU sums in another order).
 *   F16 checkpoints (weights kept F16, activations rounded to F16 for the
 *     GEMMs, float32 accumulation): at least 98% of the hypotheses of each
 *     fixture token-exact; for those, scores within 2e-2 + 2e-2*|score| and
 *     cross-attention within 1e-2.
 *   BF16 checkpoints (activations rounded to BF16, 8 bits of mantissa):
 *     98% token-exact, scores within 1e-1 + 5e-2*|score|, attention 5e-2.
 *
 * The goldens are transformers in float32 from the half-rounded weights, so
 * the half-precision slack is the GPU's activation rounding only.
 * No CUDA device: exit 77 (ctest's skip code).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_check.h"
#include "gpu_backend.h"

static golden_tol tolerances(const char *variant)
{
    const size_t n = strlen(variant);
    if (n > 4 && strcmp(variant + n - 4, "_f16") == 0)
        return (golden_tol){.abs = 2e-2, .rel = 2e-2, .attn = 1e-2, .half = 1};
    if (n > 5 && strcmp(variant + n - 5, "_bf16") == 0)
        return (golden_tol){.abs = 1e-1, .rel = 5e-2, .attn = 5e-2, .half = 1};
    return (golden_tol){.abs = 2e-4, .rel = 2e-4, .attn = 2e-4, .half = 0};
}

static char g_names[64][256];
static int g_n_names;

START_TEST(test_fixture)
{
    ck_assert_int_gt(g_n_names, _i);
    const char *variant = g_names[_i];
    golden_tol tol = tolerances(variant);
    golden_count count = {0};
    char err[1024];
    int bad = golden_run_fixture(variant, "cuda", &tol, &count, err, sizeof err);
    ck_assert_msg(bad >= 0, "%s: %s", variant, err);
    ck_assert_msg(bad == 0, "%s: %d mismatches against the transformers goldens", variant, bad);
    long hyps = count.hyps, exact = count.exact;
    ck_assert_msg(hyps > 0 && exact * 100 >= hyps * 98,
                  "%s: %ld of %ld hypotheses token-exact (< 98%%)", variant, exact, hyps);
    fprintf(stderr, "%s: %ld/%ld hypotheses token-exact\n", variant, exact, hyps);
}
END_TEST

START_TEST(test_fixtures_present)
{
    ck_assert_int_ge(g_n_names, 10);
}
END_TEST

START_TEST(test_workers_share_a_model)
{
    golden_tol tol = tolerances("marian_tied");
    golden_count count = {0};
    char err[1024];
    int bad = golden_run_shared("marian_tied", "cuda", 3, &tol, &count, err, sizeof err);
    ck_assert_msg(bad >= 0, "%s", err);
    ck_assert_msg(bad == 0, "%d mismatches with three workers sharing one model", bad);
}
END_TEST

int main(void)
{
    if (td_cuda_device_count() <= 0) {
        printf("test_gpu_golden: no CUDA device: skipped\n");
        return 77;
    }
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
    /* No fork: main() has already initialised CUDA (td_cuda_device_count),
     * and a forked child of a process that initialised the CUDA driver
     * cannot use CUDA. ctest sets CK_FORK=no too; this keeps a direct run of
     * the binary correct. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
