/*
 * test_alloc.c - td_translate_batch allocates its results (and, when
 * attention is asked, one history block) and nothing per decoding step: the
 * number of host allocations of a call does not grow with the number of
 * steps it runs. A worker whose memory grows on demand grows it at an
 * admission, never in a step.
 *
 * The executable is linked with -Wl,--wrap=malloc,--wrap=calloc,
 * --wrap=realloc (tests/CMakeLists.txt): every call from the engine's
 * objects goes through the counters below while g_counting is set. Under
 * ASan the real functions are ASan's, so the test runs there as well.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "translator.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

static int g_counting;
static long g_allocs;

void *__wrap_malloc(size_t n)
{
    if (g_counting)
        g_allocs++;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    if (g_counting)
        g_allocs++;
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (g_counting)
        g_allocs++;
    return __real_realloc(p, n);
}

static td_model *g_model;
static td_worker *g_worker;

static void setup(void)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/fixtures/marian_tied", TD_TEST_DATA);
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_msg(td_model_load(&g_model, dir, &lo, err, sizeof err) == 0, "%s", err);
    td_worker_opts wo = {.max_batch = 4, .max_length = 48, .max_beam = 4, .n_threads = 1};
    ck_assert_msg(td_worker_init(&g_worker, g_model, &wo, err, sizeof err) == 0, "%s", err);
}

static void teardown(void)
{
    td_worker_free(g_worker);
    td_model_free(g_model);
}

typedef struct call_count {
    long allocs;
    int tokens; /* generated tokens of all best hypotheses: the steps run */
} call_count;

static call_count count_call(int beam, int max_length, int attention)
{
    static const int32_t a[] = {5, 9, 17, 30, 2, 0}, b[] = {41, 7, 0}, c[] = {12, 12, 12, 0};
    const int32_t *src[] = {a, b, c};
    const int len[] = {6, 3, 4};
    td_decode_opts o;
    td_decode_opts_default(g_model, &o);
    o.beam_size = beam;
    o.num_hypotheses = beam > 1 ? 2 : 1;
    o.max_length = max_length;
    o.return_attention = attention;
    td_result res[3];
    char err[512];
    g_allocs = 0;
    g_counting = 1;
    int rc = td_translate_batch(g_worker, src, len, 3, &o, res, err, sizeof err);
    g_counting = 0;
    ck_assert_msg(rc == 0, "%s", err);
    call_count out = {.allocs = g_allocs, .tokens = 0};
    for (int i = 0; i < 3; i++) {
        out.tokens += res[i].hyps[0].n_tokens;
        td_result_free(&res[i]);
    }
    return out;
}

/* The same call with 3 and with 40 steps allowed: the long one runs many
 * more steps (checked) and allocates exactly as often. */
static void expect_flat(int beam, int attention)
{
    call_count s = count_call(beam, 3, attention);
    call_count l = count_call(beam, 40, attention);
    ck_assert_msg(l.tokens > s.tokens + 20, "beam %d: %d vs %d tokens: the long call must run "
                  "more steps", beam, l.tokens, s.tokens);
    ck_assert_msg(s.allocs == l.allocs,
                  "beam %d, attention %d: %ld allocations for %d tokens, %ld for %d tokens",
                  beam, attention, s.allocs, s.tokens, l.allocs, l.tokens);
    /* results only: per sentence the hypotheses array and their tokens
     * (+ attention, layer ids, head ids, and the history block) */
    long hyps = beam > 1 ? 2 : 1;
    long want = 3 * (1 + hyps) + (attention ? 3 * 3 + 3 : 0);
    ck_assert_msg(l.allocs <= want, "beam %d, attention %d: %ld allocations, at most %ld "
                  "expected", beam, attention, l.allocs, want);
}

START_TEST(test_greedy_allocations_flat)
{
    expect_flat(1, 0);
    expect_flat(1, 1);
}
END_TEST

START_TEST(test_beam_allocations_flat)
{
    expect_flat(4, 0);
    expect_flat(4, 1);
}
END_TEST

/* A growing worker (td_worker_opts.grow): its buffers grow at admissions
 * (td_run_add), never in a step. Under a scripted workload (1, 2, then 4
 * sentences, sources of 4 to 60 tokens, max_length 10 to 48, greedy and
 * beam 4) its steps allocate only the finished sentences' results, its
 * memory grows past its first capacities and stays within its maxima, its
 * results are those of a worker allocated for its maxima (the same tokens
 * and scores), and td_worker_trim gives the growth back. */
START_TEST(test_grow_steps_allocate_results_only)
{
    char err[512];
    td_worker *gw;
    td_worker_opts wo = {.max_batch = 4, .max_length = 48, .max_beam = 4, .n_threads = 1,
                         .grow = 1};
    ck_assert_msg(td_worker_init(&gw, g_model, &wo, err, sizeof err) == 0, "%s", err);
    const size_t first = td_worker_arena_bytes(gw), max = td_worker_max_bytes(gw);
    ck_assert_msg(first < max / 2, "first %zu of %zu bytes", first, max);
    static const int lens[3] = {4, 30, 60}, maxlen[3] = {10, 30, 48}, beams[3] = {1, 4, 1};
    static int32_t src[4][64];
    int grew_in_step = 0;
    long continue_allocs = 0;
    for (int round = 0; round < 3; round++) {
        const int n = 1 << round;
        td_decode_opts o;
        td_decode_opts_default(g_model, &o);
        o.beam_size = beams[round];
        o.num_hypotheses = 1;
        o.max_length = maxlen[round];
        const int32_t *sp[4];
        int sl[4];
        const td_decode_opts *op[4];
        for (int i = 0; i < n; i++) {
            /* the last round's first sentence: one whose translation runs
             * past the caches' first 32 positions (searched) */
            int seed = 0, long_one = round == 2 && i == 0;
            for (;;) {
                sl[i] = lens[round] - i;
                for (int j = 0; j < sl[i] - 1; j++)
                    src[i][j] = 3 + (7 * j + 11 * i + 13 * seed + round) % 60;
                src[i][sl[i] - 1] = 0; /* </s> */
                sp[i] = src[i];
                op[i] = &o;
                if (!long_one)
                    break;
                td_result r;
                ck_assert_msg(td_translate_batch(g_worker, &sp[i], &sl[i], 1, &o, &r, err,
                                                 sizeof err) == 0, "%s", err);
                int t = r.hyps[0].n_tokens;
                td_result_free(&r);
                if (t > 36)
                    break;
                ck_assert_int_lt(++seed, 500);
            }
        }
        /* what a worker allocated for its maxima gives them */
        td_result full[4];
        ck_assert_msg(td_translate_batch(g_worker, sp, sl, n, &o, full, err, sizeof err) == 0,
                      "%s", err);
        td_seq seq[4];
        ck_assert_msg(td_run_add(gw, sp, sl, n, op, seq, err, sizeof err) == 0, "%s", err);
        long step_allocs = 0, want = 0;
        int taken = 0, steps = 0;
        while (taken < n) {
            ck_assert_int_lt(steps++, 200);
            const size_t before = td_worker_arena_bytes(gw);
            g_allocs = 0;
            g_counting = 1;
            int k = td_run_step(gw, err, sizeof err);
            g_counting = 0;
            ck_assert_msg(k >= 0, "%s", err);
            if (td_worker_arena_bytes(gw) != before) {
                /* the caches grew for a longer sentence: the one step
                 * that may allocate (its index and state pointers) */
                grew_in_step++;
                continue_allocs += g_allocs;
                g_allocs = 0;
            }
            step_allocs += g_allocs;
            td_seq q;
            td_result r;
            while (td_run_take(gw, &q, &r) == 1) {
                want += 1 + r.n_hyps; /* the hypotheses array and each one's tokens */
                taken++;
                const td_result *f = &full[q - seq[0]];
                ck_assert_int_eq(r.hyps[0].n_tokens, f->hyps[0].n_tokens);
                ck_assert(!memcmp(r.hyps[0].tokens, f->hyps[0].tokens,
                                  (size_t)f->hyps[0].n_tokens * sizeof(int32_t)));
                ck_assert_msg(r.hyps[0].score == f->hyps[0].score, "round %d: score %.9g, "
                              "%.9g on the full worker", round, (double)r.hyps[0].score,
                              (double)f->hyps[0].score);
                td_result_free(&r);
            }
        }
        ck_assert_msg(step_allocs == want, "round %d: %ld allocations in %d steps, %ld for the "
                      "results", round, step_allocs, steps, want);
        for (int i = 0; i < n; i++)
            td_result_free(&full[i]);
    }
    /* sentences outgrew the caches' length while running (the last
     * round's past 32 positions at least): a growth per doubling of the
     * ladder 16, 32, 48 at most, two host blocks each */
    ck_assert_int_ge(grew_in_step, 1);
    ck_assert_int_le(grew_in_step, 2);
    ck_assert_int_le(continue_allocs, 2 * grew_in_step);
    const size_t grown = td_worker_arena_bytes(gw);
    ck_assert_msg(grown > first && grown <= max, "%zu bytes after the workload (first %zu, max "
                  "%zu)", grown, first, max);
    ck_assert_int_eq(td_worker_trim(gw, err, sizeof err), (long)(grown - first));
    ck_assert_int_eq(td_worker_arena_bytes(gw), first);
    ck_assert_int_eq(td_worker_trim(gw, err, sizeof err), 0);
    td_worker_free(gw);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("translate_batch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_greedy_allocations_flat);
    tcase_add_test(tc, test_beam_allocations_flat);
    tcase_add_test(tc, test_grow_steps_allocate_results_only);
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
