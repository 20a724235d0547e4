/*
 * test_decode.c - the beam search's bookkeeping driven by crafted
 * log-probabilities, where real models almost never go: exact ties.
 *
 * A worker of the marian_tied fixture runs as usual, except that its
 * backend's logprobs_topk is replaced by a script: at step t every row gets
 * the same four (token, log-prob) candidates, plus the row's running score
 * as the real op adds it. The scripts below put the early-stop heuristic of
 * transformers' beam search exactly on its boundary.
 *
 * transformers (generation/utils.py, _check_early_stop_heuristic) keeps a
 * sentence open while
 *     best_possible_running_score > worst_finished_score
 * for some finished slot: a strict comparison. When the best running beam,
 * normalised by the current length, only ties the worst finished
 * hypothesis, the sentence is done. model/decode.c must do the same.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

typedef struct script_step {
    int32_t tok[4];
    float logp[4];   /* descending; ties toward the lower id */
    float odd_shift; /* added to the rows of odd index (beam 1, 3, ...) */
} script_step;

static const script_step *g_script;
static int g_n_script;
static int g_calls;

/* Stands in for the backend's logprobs_topk (CPU backend: device memory is
 * host memory): the script's candidates for step g_calls, in every row. */
static void scripted_topk(td_backend *be, float *logits, int64_t n, int64_t vocab,
                          const int32_t *suppress, int n_suppress, int force_eos,
                          const int32_t *force_rows, int eos_id, const float *row_bias, int k,
                          float *out_val, int32_t *out_idx)
{
    (void)be, (void)logits, (void)vocab, (void)suppress, (void)n_suppress, (void)force_eos,
        (void)force_rows, (void)eos_id;
    ck_assert_int_le(k, 4); /* 2 x beam: 4 for beam 2, fewer for greedy */
    int t = g_calls < g_n_script ? g_calls : g_n_script - 1;
    const script_step *st = &g_script[t];
    for (int64_t r = 0; r < n; r++)
        for (int j = 0; j < k; j++) {
            out_val[r * k + j] = (row_bias ? row_bias[r] : 0.0f) +
                                 (st->logp[j] + (r % 2 ? st->odd_shift : 0.0f));
            out_idx[r * k + j] = st->tok[j];
        }
    g_calls++;
}

typedef struct run {
    td_result res;
    int steps;
} run;

/* beam_size beams, num_hypotheses hypotheses, length_penalty lp, at most
 * max_length tokens, over the script; forced_eos 0: the model forces no
 * </s> at the end. */
static run run_script_opts(const script_step *script, int n_script, int max_length,
                           int forced_eos, int beam, int n_hyps, float lp)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/fixtures/marian_tied", TD_TEST_DATA);
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    td_model *m = NULL;
    ck_assert_msg(td_model_load(&m, dir, &lo, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(td_model_config(m)->eos_token_id, 0);
    ck_assert_int_ne(td_model_config(m)->early_stopping, TD_EARLY_STOP_TRUE);
    if (!forced_eos)
        m->cfg.forced_eos_token_id = -1; /* as a checkpoint without forced_eos_token_id */
    td_worker_opts wo = {.max_batch = 1, .max_length = 16, .max_beam = 2, .n_threads = 1};
    td_worker *w = NULL;
    ck_assert_msg(td_worker_init(&w, m, &wo, err, sizeof err) == 0, "%s", err);

    td_backend_ops scripted = *w->be->ops;
    scripted.logprobs_topk = scripted_topk;
    const td_backend_ops *real = w->be->ops;
    w->be->ops = &scripted;
    g_script = script;
    g_n_script = n_script;
    g_calls = 0;

    td_decode_opts o;
    td_decode_opts_default(m, &o);
    o.beam_size = beam;
    o.num_hypotheses = n_hyps;
    o.length_penalty = lp;
    o.max_length = max_length;
    const int32_t src[] = {5, 6, 0};
    const int32_t *srcs[] = {src};
    const int len = 3;
    run out;
    memset(&out, 0, sizeof out);
    ck_assert_msg(td_translate_batch(w, srcs, &len, 1, &o, &out.res, err, sizeof err) == 0,
                  "%s", err);
    out.steps = g_calls;
    w->be->ops = real;
    td_worker_free(w);
    td_model_free(m);
    return out;
}

/* Beam 2, length_penalty 1, two hypotheses. */
static run run_script(const script_step *script, int n_script, int max_length, int forced_eos)
{
    return run_script_opts(script, n_script, max_length, forced_eos, 2, 2, 1.0f);
}

static void expect_hyp(const td_hypothesis *h, const int32_t *tok, int n, float score)
{
    ck_assert_int_eq(h->n_tokens, n);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(h->tokens[i], tok[i]);
    ck_assert_msg(h->score == score, "score %.9g, want %.9g", (double)h->score, (double)score);
}

/*
 * Step 0: </s> finishes with -1 (length 1); beams [5] -2 and [6] -3 run.
 * Step 1: [5 </s>] finishes with -3/2 = -1.5: both finished slots are full,
 * the worst is -1.5. The best running beam [5 8] has -3, and -3/2 = -1.5
 * ties it: not better, so the sentence is done after two steps.
 * With >= it would run a third step and [5 8 </s>] (-3/3 = -1) would
 * replace [5 </s>] as the second hypothesis.
 */
START_TEST(test_early_stop_tie_stops)
{
    static const script_step s[] = {
        {{0, 5, 6, 7}, {-1.0f, -2.0f, -3.0f, -4.0f}, 0.0f},
        {{0, 8, 9, 10}, {-1.0f, -1.0f, -5.0f, -6.0f}, 0.0f},
        {{0, 11, 12, 13}, {0.0f, -1.0f, -2.0f, -3.0f}, 0.0f},
    };
    run r = run_script(s, 3, 16, 1);
    ck_assert_int_eq(r.steps, 2);
    ck_assert_int_eq(r.res.n_hyps, 2);
    expect_hyp(&r.res.hyps[0], (const int32_t[]){0}, 1, -1.0f);
    expect_hyp(&r.res.hyps[1], (const int32_t[]){5, 0}, 2, -1.5f);
    td_result_free(&r.res);
}
END_TEST

/*
 * The same with the running beam a little better (-2.9/2 = -1.45 > -1.5):
 * the sentence stays open and [5 8 </s>] (-2.9/3) becomes the best
 * hypothesis; the script itself can move the boundary either way.
 */
START_TEST(test_early_stop_better_continues)
{
    static const script_step s[] = {
        {{0, 5, 6, 7}, {-1.0f, -2.0f, -3.0f, -4.0f}, 0.0f},
        {{8, 0, 9, 10}, {-0.9f, -1.0f, -5.0f, -6.0f}, 0.0f},
        {{0, 11, 12, 13}, {0.0f, -1.0f, -2.0f, -3.0f}, 0.0f},
    };
    run r = run_script(s, 3, 16, 1);
    ck_assert_int_eq(r.steps, 3);
    ck_assert_int_eq(r.res.n_hyps, 2);
    float run_score = -2.0f + -0.9f; /* float32, as the op adds */
    expect_hyp(&r.res.hyps[0], (const int32_t[]){5, 8, 0}, 3, (run_score + 0.0f) / 3.0f);
    expect_hyp(&r.res.hyps[1], (const int32_t[]){0}, 1, -1.0f);
    td_result_free(&r.res);
}
END_TEST

/*
 * No </s> anywhere and none forced: at the last step (t = max_length - 1)
 * every candidate hits the length limit, so the best two become the
 * finished hypotheses (transformers' next_token_hits_stopping_criteria
 * includes the max length), each of max_length tokens.
 */
START_TEST(test_max_length_finishes_beams)
{
    static const script_step s[] = {
        {{5, 6, 7, 8}, {-1.0f, -2.0f, -3.0f, -4.0f}, 0.0f},
    };
    run r = run_script(s, 1, 3, 0);
    ck_assert_int_eq(r.steps, 3);
    ck_assert_int_eq(r.res.n_hyps, 2);
    expect_hyp(&r.res.hyps[0], (const int32_t[]){5, 5, 5}, 3, -3.0f / 3.0f);
    expect_hyp(&r.res.hyps[1], (const int32_t[]){5, 5, 6}, 3, -4.0f / 3.0f);
    td_result_free(&r.res);
}
END_TEST

/*
 * Candidates of equal value go in the order of their flat index (beam *
 * vocab + token): at step 0, tokens 5 and 6 tie and 5 becomes beam 0. Beam
 * 0's row then finds </s> cheaper than beam 1's row (the script shifts odd
 * rows), so the best hypothesis starts with whichever token beam 0 holds.
 */
START_TEST(test_candidate_ties_lower_index_first)
{
    static const script_step s[] = {
        {{5, 6, 7, 8}, {-1.0f, -1.0f, -2.0f, -3.0f}, 0.0f},
        {{0, 9, 10, 11}, {-1.0f, -2.0f, -5.0f, -6.0f}, -2.0f},
        {{0, 9, 10, 11}, {-1.0f, -2.0f, -5.0f, -6.0f}, -2.0f},
    };
    run r = run_script(s, 3, 16, 1);
    ck_assert_int_eq(r.res.n_hyps, 2);
    expect_hyp(&r.res.hyps[0], (const int32_t[]){5, 0}, 2, -2.0f / 2.0f);
    expect_hyp(&r.res.hyps[1], (const int32_t[]){5, 9, 0}, 3, -4.0f / 3.0f);
    td_result_free(&r.res);
}
END_TEST

/*
 * Greedy decoding's score is length-normalised like a beam's (docs/api.md:
 * sum log p / length^length_penalty): [5 6 </s>] with log-probabilities
 * -0.5, -0.25, -1 (exact in float) scores -1.75 / 3^lp for every lp, the
 * golden fixtures' greedy cases all having lp 1.
 */
START_TEST(test_greedy_length_penalty)
{
    static const script_step s[] = {
        {{5, 6, 7, 8}, {-0.5f, -2.0f, -3.0f, -4.0f}, 0.0f},
        {{6, 0, 7, 8}, {-0.25f, -2.0f, -3.0f, -4.0f}, 0.0f},
        {{0, 9, 10, 11}, {-1.0f, -2.0f, -5.0f, -6.0f}, 0.0f},
    };
    static const float lps[] = {1.0f, 2.0f, 0.5f, 0.0f, -1.5f};
    for (size_t i = 0; i < sizeof lps / sizeof lps[0]; i++) {
        run r = run_script_opts(s, 3, 16, 1, 1, 1, lps[i]);
        ck_assert_int_eq(r.steps, 3);
        ck_assert_int_eq(r.res.n_hyps, 1);
        const td_hypothesis *h = &r.res.hyps[0];
        ck_assert_int_eq(h->n_tokens, 3);
        ck_assert(h->tokens[0] == 5 && h->tokens[1] == 6 && h->tokens[2] == 0);
        double want = -1.75 / pow(3.0, (double)lps[i]);
        ck_assert_msg(fabs((double)h->score - want) <= 1e-6 * fabs(want),
                      "length_penalty %g: score %.9g, want %.9g", (double)lps[i],
                      (double)h->score, want);
        td_result_free(&r.res);
    }
}
END_TEST

/* The generated-length cap: the model's positions, at most TD_MAX_GENERATED. */
START_TEST(test_generated_cap)
{
    td_config c;
    memset(&c, 0, sizeof c);
    c.max_position_embeddings = 4096;
    ck_assert_int_eq(td_generated_cap(&c), TD_MAX_GENERATED);
    ck_assert_int_eq(TD_MAX_GENERATED, 512);
    c.max_position_embeddings = 300;
    ck_assert_int_eq(td_generated_cap(&c), 300);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("decode");
    TCase *tc = tcase_create("beam");
    tcase_add_test(tc, test_early_stop_tie_stops);
    tcase_add_test(tc, test_early_stop_better_continues);
    tcase_add_test(tc, test_max_length_finishes_beams);
    tcase_add_test(tc, test_candidate_ties_lower_index_first);
    tcase_add_test(tc, test_greedy_length_penalty);
    tcase_add_test(tc, test_generated_cap);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
