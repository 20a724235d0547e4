/*
 * test_gpu_golden.c - every fixture model in tests/data/fixtures run with
 * --device cuda against the transformers goldens (tools/make_fixtures.py),
 * with the comparison of tests/golden_check.c, in both precisions of the
 * GEMMs with half-precision weights (gpu/gpu_backend.h), with per-dtype
 * tolerances:
 *
 *   F32 checkpoints (float32 weights, float32 GEMMs, no TF32): every
 *     hypothesis token-exact; scores and cross-attention within 2e-4
 *     (abs + rel; the CPU test uses 1e-4, the GPU sums in another order).
 *   F16 / BF16 checkpoints, precision "full" (the default: the activations
 *     enter the GEMM as two half terms, float32-accurate): at least 98% of
 *     each fixture's hypotheses token-exact (all of them were when this was
 *     written); for those, scores and attention within 5e-4 (F16) or 2e-3
 *     (BF16: the two terms keep 16 bits).
 *   F16 / BF16 checkpoints, precision "half" (activations rounded once: the
 *     usual fp16 inference): at least 85% token-exact (90-100% measured: the
 *     tiny random fixture models have many near-ties); scores within
 *     2e-2 + 2e-2*|score| (F16) or 1e-1 + 5e-2*|score| (BF16), attention 1e-2
 *     or 5e-2.
 *   --dtype conversions: an F16 checkpoint kept in float32 is held to the F32
 *     bar (the goldens were made from the same F16-rounded weights); an F32
 *     checkpoint stored as float16 to the "half" bar (its weights are
 *     rounded, the goldens' are not), as bfloat16 to 75% token-exact.
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

static const golden_tol kF32 = {.abs = 2e-4, .rel = 2e-4, .attn = 2e-4, .half = 0};

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

/* Tolerances and the token-exact bar (percent) of a fixture in a precision. */
static golden_tol tolerances(const char *variant, int half, int *bar)
{
    *bar = 98;
    if (ends_with(variant, "_f16")) {
        if (!half)
            return (golden_tol){.abs = 5e-4, .rel = 5e-4, .attn = 5e-4, .half = 1};
        *bar = 85;
        return (golden_tol){.abs = 2e-2, .rel = 2e-2, .attn = 1e-2, .half = 1};
    }
    if (ends_with(variant, "_bf16")) {
        if (!half)
            return (golden_tol){.abs = 2e-3, .rel = 2e-3, .attn = 2e-3, .half = 1};
        *bar = 85;
        return (golden_tol){.abs = 1e-1, .rel = 5e-2, .attn = 5e-2, .half = 1};
    }
    *bar = 100;
    return kF32;
}

/* Runs one fixture with lo and checks mismatches and the token-exact bar. */
static void check_fixture(const char *variant, const td_load_opts *lo, const golden_tol *tol,
                          int bar)
{
    golden_count count = {0};
    char err[1024];
    int bad = golden_run_fixture(variant, lo, tol, &count, err, sizeof err);
    ck_assert_msg(bad >= 0, "%s: %s", variant, err);
    ck_assert_msg(bad == 0, "%s (dtype %s, precision %s): %d mismatches against the "
                  "transformers goldens", variant, lo->dtype, lo->precision, bad);
    long hyps = count.hyps, exact = count.exact;
    ck_assert_msg(hyps > 0 && exact * 100 >= hyps * bar,
                  "%s (dtype %s, precision %s): %ld of %ld hypotheses token-exact (< %d%%)",
                  variant, lo->dtype, lo->precision, exact, hyps, bar);
    fprintf(stderr, "%s (dtype %s, precision %s): %ld/%ld hypotheses token-exact\n", variant,
            lo->dtype, lo->precision, exact, hyps);
}

static char g_names[64][256];
static int g_n_names;

/* _i = fixture * 2 + (precision half) */
START_TEST(test_fixture)
{
    ck_assert_int_gt(g_n_names, _i / 2);
    const char *variant = g_names[_i / 2];
    const int half = _i % 2;
    if (half && !ends_with(variant, "_f16") && !ends_with(variant, "_bf16"))
        return; /* float32 weights: the precision does not apply */
    int bar;
    golden_tol tol = tolerances(variant, half, &bar);
    td_load_opts lo = {.device = "cuda", .dtype = "auto", .precision = half ? "half" : "full"};
    check_fixture(variant, &lo, &tol, bar);
}
END_TEST

START_TEST(test_dtype_conversions)
{
    /* F16 weights held in float32: the F32 bar */
    td_load_opts up = {.device = "cuda", .dtype = "float32", .precision = "full"};
    check_fixture("marian_tied_f16", &up, &kF32, 100);
    /* float32 weights rounded to F16 / BF16 at upload */
    int bar;
    golden_tol t16 = tolerances("x_f16", 1, &bar);
    td_load_opts down = {.device = "cuda", .dtype = "float16", .precision = "full"};
    check_fixture("marian_tied", &down, &t16, bar);
    /* BF16 keeps 8 bits of the weights: near-ties of this tiny random model
     * flip more often (87.5% measured); 75% still tells a working
     * conversion from a broken one (which is near 0%) */
    golden_tol tb16 = tolerances("x_bf16", 1, &bar);
    down.dtype = "bfloat16";
    check_fixture("marian_tied", &down, &tb16, 75);
}
END_TEST

START_TEST(test_fixtures_present)
{
    ck_assert_int_ge(g_n_names, 10);
}
END_TEST

START_TEST(test_workers_share_a_model)
{
    golden_count count = {0};
    char err[1024];
    const td_load_opts lo = {.device = "cuda"};
    int bad = golden_run_shared("marian_tied", &lo, 3, &kF32, &count, err, sizeof err);
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
    tcase_add_loop_test(tc, test_fixture, 0, g_n_names > 0 ? 2 * g_n_names : 1);
    tcase_add_test(tc, test_dtype_conversions);
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
