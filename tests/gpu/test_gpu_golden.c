/*
 * test_gpu_golden.c - every fixture model in tests/data/fixtures run with
 * --device cuda against the transformers goldens (tools/make_fixtures.py),
 * the logic of tests/test_golden.c with per-dtype tolerances:
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
 *
 * Every case is run twice: as the batch the golden was made with, and each
 * sentence alone. No CUDA device: exit 77 (ctest's skip code).
 */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_backend.h"
#include "translator.h"

/* Tolerances of the fixture being run (set from its name). */
static double g_tol_abs = 2e-4, g_tol_rel = 2e-4, g_tol_attn = 2e-4;
static int g_half; /* an F16/BF16 fixture: token mismatches are counted, not failed */
static _Atomic long g_hyps, g_hyps_exact; /* shared test: three threads */

static void set_tolerances(const char *variant)
{
    const size_t n = strlen(variant);
    g_half = 0;
    g_tol_abs = g_tol_rel = g_tol_attn = 2e-4;
    if (n > 4 && strcmp(variant + n - 4, "_f16") == 0) {
        g_half = 1;
        g_tol_abs = 2e-2, g_tol_rel = 2e-2, g_tol_attn = 1e-2;
    } else if (n > 5 && strcmp(variant + n - 5, "_bf16") == 0) {
        g_half = 1;
        g_tol_abs = 1e-1, g_tol_rel = 5e-2, g_tol_attn = 5e-2;
    }
}

static char g_names[64][256];
static int g_n_names;

static void list_fixtures(void)
{
    DIR *d = opendir(TD_TEST_DATA "/fixtures");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) && g_n_names < 64) {
        if (e->d_name[0] == '.')
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/fixtures/%s/golden.json", TD_TEST_DATA, e->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        fclose(f);
        snprintf(g_names[g_n_names++], sizeof g_names[0], "%.200s", e->d_name);
    }
    closedir(d);
    /* stable order for readable logs */
    for (int i = 0; i < g_n_names; i++)
        for (int j = i + 1; j < g_n_names; j++)
            if (strcmp(g_names[i], g_names[j]) > 0) {
                char t[256];
                memcpy(t, g_names[i], sizeof t);
                memcpy(g_names[i], g_names[j], sizeof t);
                memcpy(g_names[j], t, sizeof t);
            }
}

static int close_enough(double got, double want)
{
    if (isinf(want) || isinf(got))
        return got == want;
    return fabs(got - want) <= g_tol_abs + g_tol_rel * fabs(want);
}

/* Compares one result against its golden object; returns the number of
 * mismatches and prints them. */
static int compare(const char *where, const td_result *r, json_t *gold, int want_attn)
{
    int bad = 0;
    json_t *hyps = json_object_get(gold, "hypotheses");
    if ((int)json_array_size(hyps) != r->n_hyps) {
        fprintf(stderr, "%s: %d hypotheses, golden has %zu\n", where, r->n_hyps,
                json_array_size(hyps));
        return 1;
    }
    for (int h = 0; h < r->n_hyps; h++) {
        json_t *gh = json_array_get(hyps, (size_t)h);
        json_t *toks = json_object_get(gh, "tokens");
        const td_hypothesis *hy = &r->hyps[h];
        int same = (int)json_array_size(toks) == hy->n_tokens;
        for (int t = 0; same && t < hy->n_tokens; t++)
            same = json_integer_value(json_array_get(toks, (size_t)t)) == hy->tokens[t];
        g_hyps++;
        g_hyps_exact += same;
        if (!same && g_half) {
            fprintf(stderr, "%s: hypothesis %d tokens differ (counted against the 98%%)\n",
                    where, h);
            want_attn = 0; /* attention rows follow the tokens */
            continue;
        }
        if (!same) {
            fprintf(stderr, "%s: hypothesis %d tokens differ:\n  got ", where, h);
            for (int t = 0; t < hy->n_tokens; t++)
                fprintf(stderr, "%d ", hy->tokens[t]);
            fprintf(stderr, "\n  want ");
            for (size_t t = 0; t < json_array_size(toks); t++)
                fprintf(stderr, "%lld ", (long long)json_integer_value(json_array_get(toks, t)));
            fprintf(stderr, "\n");
            bad++;
            continue;
        }
        double want = json_number_value(json_object_get(gh, "score"));
        if (!close_enough(hy->score, want)) {
            fprintf(stderr, "%s: hypothesis %d score %.7g, golden %.7g\n", where, h,
                    (double)hy->score, want);
            bad++;
        }
    }
    json_t *att = json_object_get(gold, "attention");
    if (want_attn && att && r->n_hyps > 0) {
        size_t L = json_array_size(att);
        if ((int)L != r->attn_n_layers) {
            fprintf(stderr, "%s: attention layers %d, golden %zu\n", where, r->attn_n_layers, L);
            return bad + 1;
        }
        double worst = 0;
        for (size_t l = 0; l < L; l++) {
            json_t *hl = json_array_get(att, l);
            if ((int)json_array_size(hl) != r->attn_n_heads)
                return bad + 1;
            for (size_t h = 0; h < json_array_size(hl); h++) {
                json_t *ht = json_array_get(hl, h);
                if ((int)json_array_size(ht) != r->attn_n_t) {
                    fprintf(stderr, "%s: attention rows %d, golden %zu\n", where, r->attn_n_t,
                            json_array_size(ht));
                    return bad + 1;
                }
                for (size_t t = 0; t < json_array_size(ht); t++) {
                    json_t *row = json_array_get(ht, t);
                    if ((int)json_array_size(row) != r->attn_n_s)
                        return bad + 1;
                    for (size_t s = 0; s < json_array_size(row); s++) {
                        double want = json_number_value(json_array_get(row, s));
                        double got = r->attention[((l * (size_t)r->attn_n_heads + h) *
                                                       (size_t)r->attn_n_t + t) *
                                                      (size_t)r->attn_n_s + s];
                        double diff = fabs(got - want);
                        if (diff > worst)
                            worst = diff;
                    }
                }
            }
        }
        if (worst > g_tol_attn) {
            fprintf(stderr, "%s: attention max abs difference %.3g > %.1g\n", where, worst,
                    g_tol_attn);
            bad++;
        }
    }
    return bad;
}

static int run_case(td_worker *w, const char *variant, json_t *cs)
{
    const char *name = json_string_value(json_object_get(cs, "name"));
    json_t *srcs = json_object_get(cs, "sources");
    json_t *results = json_object_get(cs, "results");
    int n = (int)json_array_size(srcs);
    int want_attn = json_is_true(json_object_get(cs, "attention"));
    td_decode_opts o;
    memset(&o, 0, sizeof o);
    o.beam_size = (int)json_integer_value(json_object_get(cs, "beam_size"));
    o.num_hypotheses = (int)json_integer_value(json_object_get(cs, "num_hypotheses"));
    o.length_penalty = (float)json_number_value(json_object_get(cs, "length_penalty"));
    o.max_length = (int)json_integer_value(json_object_get(cs, "max_length"));
    o.return_attention = want_attn;

    int32_t **src = calloc((size_t)n, sizeof(int32_t *));
    int *len = calloc((size_t)n, sizeof(int));
    td_result *res = calloc((size_t)n, sizeof(td_result));
    ck_assert(src && len && res);
    for (int i = 0; i < n; i++) {
        json_t *a = json_array_get(srcs, (size_t)i);
        len[i] = (int)json_array_size(a);
        src[i] = malloc((size_t)len[i] * sizeof(int32_t));
        for (int j = 0; j < len[i]; j++)
            src[i][j] = (int32_t)json_integer_value(json_array_get(a, (size_t)j));
    }
    int bad = 0;
    char err[512], where[256];
    /* the whole batch */
    if (td_translate_batch(w, (const int32_t *const *)src, len, n, &o, res, err, sizeof err)) {
        fprintf(stderr, "%s/%s: translate failed: %s\n", variant, name, err);
        bad++;
    } else {
        for (int i = 0; i < n; i++) {
            snprintf(where, sizeof where, "%s/%s[%d] (batch of %d)", variant, name, i, n);
            bad += compare(where, &res[i], json_array_get(results, (size_t)i), want_attn);
            td_result_free(&res[i]);
        }
    }
    /* each sentence alone */
    for (int i = 0; i < n && n > 1; i++) {
        td_result one;
        if (td_translate_batch(w, (const int32_t *const *)&src[i], &len[i], 1, &o, &one, err,
                               sizeof err)) {
            fprintf(stderr, "%s/%s[%d] alone: translate failed: %s\n", variant, name, i, err);
            bad++;
            continue;
        }
        snprintf(where, sizeof where, "%s/%s[%d] (alone)", variant, name, i);
        bad += compare(where, &one, json_array_get(results, (size_t)i), want_attn);
        td_result_free(&one);
    }
    for (int i = 0; i < n; i++)
        free(src[i]);
    free(src);
    free(len);
    free(res);
    return bad;
}

START_TEST(test_fixture)
{
    ck_assert_int_gt(g_n_names, _i);
    const char *variant = g_names[_i];
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/fixtures/%s", TD_TEST_DATA, variant);
    snprintf(path, sizeof path, "%s/golden.json", dir);
    json_error_t jerr;
    json_t *g = json_load_file(path, 0, &jerr);
    ck_assert_msg(g != NULL, "%s: %s", path, jerr.text);

    char err[1024];
    td_model *m = NULL;
    td_load_opts lo = {.device = "cuda", .n_threads = 1};
    set_tolerances(variant);
    g_hyps = g_hyps_exact = 0;
    ck_assert_msg(td_model_load(&m, dir, &lo, err, sizeof err) == 0, "%s: %s", variant, err);
    td_worker_opts wo = {.max_batch = 16, .max_src_len = 0, .max_length = 32, .max_beam = 16,
                         .n_threads = 1};
    td_worker *w = NULL;
    ck_assert_msg(td_worker_init(&w, m, &wo, err, sizeof err) == 0, "%s: %s", variant, err);

    json_t *cases = json_object_get(g, "cases");
    ck_assert_int_gt((int)json_array_size(cases), 0);
    int bad = 0;
    for (size_t c = 0; c < json_array_size(cases); c++)
        bad += run_case(w, variant, json_array_get(cases, c));
    td_worker_free(w);
    td_model_free(m);
    json_decref(g);
    ck_assert_msg(bad == 0, "%s: %d mismatches against the transformers goldens", variant, bad);
    ck_assert_msg(g_hyps > 0 && g_hyps_exact * 100 >= g_hyps * 98,
                  "%s: %ld of %ld hypotheses token-exact (< 98%%)", variant, g_hyps_exact,
                  g_hyps);
    fprintf(stderr, "%s: %ld/%ld hypotheses token-exact\n", variant, g_hyps_exact, g_hyps);
}
END_TEST

START_TEST(test_fixtures_present)
{
    /* The golden test must not pass vacuously. */
    ck_assert_int_ge(g_n_names, 10);
}
END_TEST

/* Several workers share one read-only model: two threads, each with its own
 * worker, run every case of two fixtures at the same time and must both
 * match the goldens. */
typedef struct shared_job {
    const td_model *m;
    const char *variant;
    json_t *golden;
    int bad;
} shared_job;

static void *shared_worker(void *arg)
{
    shared_job *j = arg;
    char err[512];
    td_worker_opts wo = {.max_batch = 16, .max_length = 32, .max_beam = 16, .n_threads = 1};
    td_worker *w = NULL;
    if (td_worker_init(&w, j->m, &wo, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", j->variant, err);
        j->bad = 1;
        return NULL;
    }
    json_t *cases = json_object_get(j->golden, "cases");
    for (int rep = 0; rep < 2; rep++)
        for (size_t c = 0; c < json_array_size(cases); c++)
            j->bad += run_case(w, j->variant, json_array_get(cases, c));
    td_worker_free(w);
    return NULL;
}

START_TEST(test_workers_share_a_model)
{
    const char *variant = "marian_tied";
    char dir[512], path[600], err[512];
    snprintf(dir, sizeof dir, "%s/fixtures/%s", TD_TEST_DATA, variant);
    snprintf(path, sizeof path, "%s/golden.json", dir);
    json_error_t jerr;
    json_t *g = json_load_file(path, 0, &jerr);
    ck_assert_msg(g != NULL, "%s: %s", path, jerr.text);
    set_tolerances(variant);
    td_model *m = NULL;
    td_load_opts lo = {.device = "cuda", .n_threads = 1};
    ck_assert_msg(td_model_load(&m, dir, &lo, err, sizeof err) == 0, "%s", err);
    shared_job jobs[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = (shared_job){.m = m, .variant = variant, .golden = g};
        ck_assert(pthread_create(&th[i], NULL, shared_worker, &jobs[i]) == 0);
    }
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        bad += jobs[i].bad;
    }
    td_model_free(m);
    json_decref(g);
    ck_assert_msg(bad == 0, "%d mismatches with three workers sharing one model", bad);
}
END_TEST

int main(void)
{
    if (td_cuda_device_count() <= 0) {
        printf("test_gpu_golden: no CUDA device: skipped\n");
        return 77;
    }
    list_fixtures();
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
     * cannot use CUDA (every call fails with an initialisation error). ctest
     * sets CK_FORK=no too; this keeps a direct run of the binary correct. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
