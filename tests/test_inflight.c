/*
 * test_inflight.c - the running decode (td_run_*): sentences that join at
 * random steps, next to random company, with random options, get exactly
 * what they get alone (td_translate_batch of one sentence, which the golden
 * tests hold to transformers): the same tokens, scores and attention.
 * Cancelled sentences free their rows and change nobody else's result, and
 * steps of the shortest sentences only (td_run_step_shortest) change
 * nothing either but the order in which sentences finish, nor do urgent
 * sentences stepped first (td_run_urge). The arrivals run again on a
 * worker whose memory grows as they need (td_worker_opts.grow): the same
 * results as alone on a worker allocated for its maxima.
 *
 * Fixtures with every kind of position (sinusoidal, relative keys/values,
 * rotary, learned), since a row's position is its own in a running decode.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "translator.h"

static const char *const k_fixtures[] = {"marian_tied", "ext_relative", "ext_rope",
                                         "ext_learned", "ext_prenorm"};
#define N_FIXTURES ((int)(sizeof k_fixtures / sizeof k_fixtures[0]))

enum { N_SENT = 28, MAX_SRC = 12 };

typedef struct sentence {
    int32_t src[MAX_SRC];
    int len;
    td_decode_opts o;
    int layers[2], heads[3];
    td_result alone;
    td_result got;
    td_seq seq;
    int state; /* 0 pending, 1 running, 2 done, 3 cancelled */
    int urged; /* td_run_urge */
} sentence;

static uint64_t g_rng;

static uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(g_rng >> 33);
}

static void make_sentences(const td_model *m, sentence *s, int n)
{
    const td_config *c = td_model_config(m);
    for (int i = 0; i < n; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].len = 1 + (int)(rnd() % (MAX_SRC - 1));
        for (int j = 0; j < s[i].len - 1; j++)
            s[i].src[j] = 2 + (int)(rnd() % (uint32_t)(c->vocab_size - 4));
        s[i].src[s[i].len - 1] = c->eos_token_id;
        td_decode_opts_default(m, &s[i].o);
        td_decode_opts *o = &s[i].o;
        o->beam_size = 1 + (int)(rnd() % 4);
        o->num_hypotheses = 1 + (int)(rnd() % (uint32_t)o->beam_size);
        o->max_length = 2 + (int)(rnd() % 18);
        static const float lp[] = {0.6f, 1.0f, 1.4f};
        o->length_penalty = lp[rnd() % 3];
        if (rnd() % 3 == 0) {
            o->return_attention = 1;
            if (rnd() % 2) {
                s[i].layers[0] = -1;
                o->attn_layers = s[i].layers;
                o->n_attn_layers = 1;
                s[i].heads[0] = (int)(rnd() % (uint32_t)c->decoder_attention_heads);
                s[i].heads[1] = 0;
                o->attn_heads = s[i].heads;
                o->n_attn_heads = 2;
            }
        }
    }
}

static void expect_same(const char *where, int i, const td_result *a, const td_result *b)
{
    ck_assert_msg(a->n_hyps == b->n_hyps, "%s[%d]: %d vs %d hypotheses", where, i, a->n_hyps,
                  b->n_hyps);
    for (int h = 0; h < a->n_hyps; h++) {
        const td_hypothesis *x = &a->hyps[h], *y = &b->hyps[h];
        int same = x->n_tokens == y->n_tokens &&
                   !memcmp(x->tokens, y->tokens, (size_t)x->n_tokens * sizeof(int32_t));
        ck_assert_msg(same, "%s[%d]: hypothesis %d tokens differ from the sentence alone",
                      where, i, h);
        /* tol_abs + tol_rel x |ref|: a sentence's GEMMs in a batch of
         * another height sum in another order (the AVX2 kernels more than
         * the AVX-512 ones: -3.1351964 against -3.1352065 alone) */
        ck_assert_msg(fabsf(x->score - y->score) <= 1e-5f + 1e-5f * fabsf(y->score),
                      "%s[%d]: score %.8g vs %.8g alone", where, i, (double)x->score,
                      (double)y->score);
    }
    ck_assert_int_eq(a->attention != NULL, b->attention != NULL);
    if (!a->attention)
        return;
    ck_assert_int_eq(a->attn_n_layers, b->attn_n_layers);
    ck_assert_int_eq(a->attn_n_heads, b->attn_n_heads);
    ck_assert_int_eq(a->attn_n_t, b->attn_n_t);
    ck_assert_int_eq(a->attn_n_s, b->attn_n_s);
    size_t cells = (size_t)a->attn_n_layers * a->attn_n_heads * a->attn_n_t * a->attn_n_s;
    for (size_t k = 0; k < cells; k++)
        ck_assert_msg(fabsf(a->attention[k] - b->attention[k]) <= 1e-5f,
                      "%s[%d]: attention cell %zu %.8g vs %.8g alone", where, i, k,
                      (double)a->attention[k], (double)b->attention[k]);
}

static void load(const char *name, td_model **m, td_worker **w, int max_batch)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/fixtures/%s", TD_TEST_DATA, name);
    td_load_opts lo = {.device = "cpu", .n_threads = 1};
    ck_assert_msg(td_model_load(m, dir, &lo, err, sizeof err) == 0, "%s", err);
    td_worker_opts wo = {.max_batch = max_batch, .max_length = 20, .max_beam = 4,
                         .max_src_len = MAX_SRC, .n_threads = 1};
    ck_assert_msg(td_worker_init(w, *m, &wo, err, sizeof err) == 0, "%s", err);
}

/* Random arrivals: at each step up to three pending sentences join when
 * they fit (up to six into an empty decode), one in four of them urgent (td_run_urge); one in seven running
 * sentences is cancelled at a random step; a third of the steps while
 * urgent sentences run advance only them, half of the others only the
 * shortest sentences (up to 1..8 rows). */
START_TEST(test_random_arrivals)
{
    const char *name = k_fixtures[_i % N_FIXTURES];
    const int grow = _i >= N_FIXTURES;
    td_model *m;
    td_worker *w, *full;
    load(name, &m, &full, 6);
    w = full;
    g_rng = 0x9e3779b97f4a7c15ULL + (uint64_t)_i;
    static sentence s[N_SENT];
    make_sentences(m, s, N_SENT);
    char err[512];
    for (int i = 0; i < N_SENT; i++) {
        const int32_t *src = s[i].src;
        ck_assert_msg(td_translate_batch(w, &src, &s[i].len, 1, &s[i].o, &s[i].alone, err,
                                         sizeof err) == 0,
                      "%s", err);
        ck_assert_int_eq(td_run_live(w), 0);
    }
    size_t first = 0;
    if (grow) { /* the arrivals on a worker that grows as they need */
        td_worker_opts wo = {.max_batch = 6, .max_length = 20, .max_beam = 4,
                             .max_src_len = MAX_SRC, .n_threads = 1, .grow = 1};
        ck_assert_msg(td_worker_init(&w, m, &wo, err, sizeof err) == 0, "%s", err);
        first = td_worker_arena_bytes(w);
    }
    int next = 0, done = 0, steps = 0, joined_late = 0, cancelled = 0, partial = 0, urged = 0;
    while (done < N_SENT) {
        int admit = (int)(rnd() % 4);
        if (td_run_live(w) == 0)
            admit = 6; /* an empty decode takes all it can (a growing worker grows) */
        /* the group that fits joins in one call */
        const int32_t *asrc[6];
        int alen[6], ai[6], na = 0, fs, fr, rows_before_add = td_run_rows(w);
        const td_decode_opts *aop[6];
        td_seq aseq[6];
        td_run_free(w, &fs, &fr);
        while (na < admit && next < N_SENT && fs > 0 && fr >= s[next].o.beam_size) {
            fs--;
            fr -= s[next].o.beam_size;
            asrc[na] = s[next].src;
            alen[na] = s[next].len;
            aop[na] = &s[next].o;
            ai[na++] = next++;
        }
        if (na > 0)
            ck_assert_msg(td_run_add(w, asrc, alen, na, aop, aseq, err, sizeof err) == 0, "%s",
                          err);
        for (int k = 0; k < na; k++) {
            sentence *t = &s[ai[k]];
            t->seq = aseq[k];
            t->state = 1;
            if (rnd() % 4 == 0) {
                ck_assert_int_eq(td_run_urge(w, t->seq), 0);
                t->urged = 1;
                urged++;
            }
            joined_late += rows_before_add > 0;
        }
        if (td_run_live(w) == 0)
            continue;
        int cancel = -1, rows_before = td_run_rows(w);
        for (int i = 0; i < next && cancel < 0; i++)
            if (s[i].state == 1 && rnd() % 40 == 0) {
                ck_assert_int_eq(td_run_cancel(w, s[i].seq), 0);
                s[i].state = 3;
                done++;
                cancelled++;
                cancel = i;
            }
        int urgent_rows = td_run_urgent_rows(w);
        if (urgent_rows > 0 && rnd() % 3 == 0) {
            partial += urgent_rows < rows_before;
            ck_assert_msg(td_run_step_shortest(w, urgent_rows, err, sizeof err) >= 0, "%s", err);
        } else if (rnd() % 2) {
            int max_rows = 1 + (int)(rnd() % 8);
            partial += max_rows < rows_before;
            ck_assert_msg(td_run_step_shortest(w, max_rows, err, sizeof err) >= 0, "%s", err);
        } else {
            ck_assert_msg(td_run_step(w, err, sizeof err) >= 0, "%s", err);
        }
        steps++;
        if (cancel >= 0)
            ck_assert_msg(td_run_rows(w) <= rows_before - s[cancel].o.beam_size,
                          "a cancelled sentence's rows stay (%d -> %d)", rows_before,
                          td_run_rows(w));
        td_seq q;
        td_result r;
        int t;
        while ((t = td_run_take(w, &q, &r)) != 0) {
            ck_assert_int_eq(t, 1);
            int i = 0;
            while (i < next && s[i].seq != q)
                i++;
            ck_assert_msg(i < next && s[i].state == 1, "unknown or cancelled sentence handed out");
            s[i].got = r;
            s[i].state = 2;
            done++;
        }
        /* after a step every urgent sentence that runs is at the front */
        int want = 0;
        for (int i = 0; i < next; i++)
            want += s[i].state == 1 && s[i].urged ? s[i].o.beam_size : 0;
        ck_assert_int_eq(td_run_urgent_rows(w), want);
    }
    ck_assert_int_eq(td_run_live(w), 0);
    ck_assert_int_eq(td_run_rows(w), 0);
    if (grow) { /* it grew, and gives the growth back */
        ck_assert_uint_gt(td_worker_arena_bytes(w), first);
        ck_assert_int_gt(td_worker_trim(w, err, sizeof err), 0);
        ck_assert_uint_eq(td_worker_arena_bytes(w), first);
        td_worker_free(w);
    }
    ck_assert_int_gt(joined_late, 3); /* sentences did join a running decode */
    ck_assert_int_gt(partial, 3);     /* and steps did leave rows behind */
    ck_assert_int_gt(urged, 2);
    for (int i = 0; i < N_SENT; i++) {
        if (s[i].state == 2)
            expect_same(name, i, &s[i].got, &s[i].alone);
        td_result_free(&s[i].got);
        td_result_free(&s[i].alone);
    }
    fprintf(stderr, "%s%s: %d sentences, %d steps (%d partial), %d joined a running decode, "
            "%d cancelled\n", name, grow ? " (growing worker)" : "", N_SENT, steps, partial,
            joined_late, cancelled);
    td_worker_free(full);
    td_model_free(m);
}
END_TEST

/* A static batch of mixed options equals the sentences alone too, and a
 * worker refuses td_translate_batch while it has a running decode. */
START_TEST(test_static_batch_and_busy_worker)
{
    td_model *m;
    td_worker *w;
    load("marian_tied", &m, &w, 6);
    g_rng = 42;
    sentence s[3];
    make_sentences(m, s, 3);
    char err[512];
    const int32_t *src = s[0].src;
    const td_decode_opts *op = &s[0].o;
    ck_assert_int_eq(td_run_add(w, &src, &s[0].len, 1, &op, &s[0].seq, err, sizeof err), 0);
    td_result r;
    ck_assert_int_eq(td_translate_batch(w, &src, &s[0].len, 1, &s[0].o, &r, err, sizeof err),
                     TD_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "running decode"));
    /* no room: more rows than the worker has */
    td_decode_opts big = s[1].o;
    big.beam_size = 4;
    big.num_hypotheses = 1;
    const td_decode_opts *bops[6] = {&big, &big, &big, &big, &big, &big};
    const int32_t *srcs[6] = {s[1].src, s[1].src, s[1].src, s[1].src, s[1].src, s[1].src};
    int lens[6] = {s[1].len, s[1].len, s[1].len, s[1].len, s[1].len, s[1].len};
    ck_assert_int_eq(td_run_room(w, 4), 5);
    ck_assert_int_eq(td_run_add(w, srcs, lens, 6, bops, NULL, err, sizeof err), TD_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "no room"));
    ck_assert_int_eq(td_run_cancel(w, s[0].seq), 0);
    ck_assert_int_eq(td_run_cancel(w, s[0].seq + 100), -1);
    ck_assert_int_ge(td_run_step(w, err, sizeof err), 0);
    ck_assert_int_eq(td_run_live(w), 0);
    td_worker_free(w);
    td_model_free(m);
}
END_TEST

/* Two greedy sentences with attention, admitted in that order: s[0] long
 * (a source whose translation alone has 4+ tokens), s[1] short, with what
 * each gets alone. */
static void long_and_short(td_model *m, td_worker *w, sentence *s)
{
    make_sentences(m, s, 2);
    const td_config *c = td_model_config(m);
    char err[512];
    for (int i = 0; i < 2; i++) {
        int tries = 0;
        do {
            ck_assert_int_lt(tries++, 200);
            td_result_free(&s[i].alone);
            s[i].len = i == 0 ? MAX_SRC : 3;
            for (int j = 0; j < s[i].len - 1; j++)
                s[i].src[j] = 2 + (int)(rnd() % (uint32_t)(c->vocab_size - 4));
            s[i].src[s[i].len - 1] = c->eos_token_id;
            s[i].o.beam_size = s[i].o.num_hypotheses = 1;
            s[i].o.max_length = 12;
            s[i].o.return_attention = 1;
            s[i].o.attn_layers = s[i].o.attn_heads = NULL;
            s[i].o.n_attn_layers = s[i].o.n_attn_heads = 0;
            const int32_t *src = s[i].src;
            ck_assert_msg(td_translate_batch(w, &src, &s[i].len, 1, &s[i].o, &s[i].alone, err,
                                             sizeof err) == 0,
                          "%s", err);
        } while (i == 0 && s[i].alone.hyps[0].n_tokens < 4);
    }
    for (int i = 0; i < 2; i++) {
        const int32_t *src = s[i].src;
        const td_decode_opts *op = &s[i].o;
        ck_assert_int_eq(td_run_add(w, &src, &s[i].len, 1, &op, &s[i].seq, err, sizeof err), 0);
    }
}

/* Steps of max_rows (0: td_run_urgent_rows) until a sentence is handed
 * out: the one expected (s[first]), then the other; both with what they
 * get alone. */
static void finish_in_order(td_worker *w, sentence *s, int max_rows, int first, const char *what)
{
    char err[512];
    td_seq q;
    td_result r;
    for (int k = 0; k < 2; k++) {
        int steps = 0, t, i = k == 0 ? first : 1 - first;
        while ((t = td_run_take(w, &q, &r)) == 0) {
            ck_assert_int_lt(++steps, 40);
            int rows = max_rows > 0 ? max_rows : td_run_urgent_rows(w);
            ck_assert_int_ge(td_run_step_shortest(w, rows > 0 ? rows : 1, err, sizeof err), 0);
        }
        ck_assert_int_eq(t, 1);
        ck_assert_msg(q == s[i].seq, "%s: sentence %d finishes %s (after %d steps)", what, i,
                      k == 0 ? "first" : "second", steps);
        s[i].got = r;
        ck_assert_int_eq(td_run_live(w), 1 - k);
    }
    for (int i = 0; i < 2; i++) {
        expect_same(what, i, &s[i].got, &s[i].alone);
        td_result_free(&s[i].got);
        td_result_free(&s[i].alone);
    }
    ck_assert_int_eq(td_run_rows(w), 0);
}

/* td_run_step_shortest steps the sentences with the shortest sources: a
 * long sentence admitted first waits while a short one admitted after it
 * (and placed before it at the first step: the first step takes the long
 * one, first in the row order until a step lays the rows out anew) decodes
 * to its end; then both finish with what they get alone. */
START_TEST(test_shortest_first)
{
    td_model *m;
    td_worker *w;
    load("marian_tied", &m, &w, 6);
    g_rng = 7;
    sentence s[2];
    long_and_short(m, w, s);
    finish_in_order(w, s, 1, 1, "shortest first");
    td_worker_free(w);
    td_model_free(m);
}
END_TEST

/* An urgent sentence comes before the shortest: the long one urged, steps
 * of the urgent rows only take it to its end while the short one waits;
 * an unknown handle is refused; nothing changes what either gets. */
START_TEST(test_urgent_first)
{
    td_model *m;
    td_worker *w;
    load("marian_tied", &m, &w, 6);
    g_rng = 7;
    sentence s[2];
    long_and_short(m, w, s);
    ck_assert_int_eq(td_run_urge(w, s[0].seq), 0);
    ck_assert_int_eq(td_run_urge(w, s[1].seq + 100), -1);
    char err[512];
    ck_assert_int_ge(td_run_step(w, err, sizeof err), 0); /* lays the rows out */
    ck_assert_int_eq(td_run_urgent_rows(w), 1);
    finish_in_order(w, s, 0, 0, "urgent first");
    ck_assert_int_eq(td_run_urgent_rows(w), 0);
    td_worker_free(w);
    td_model_free(m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("inflight");
    TCase *tc = tcase_create("run");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_random_arrivals, 0, 2 * N_FIXTURES);
    tcase_add_test(tc, test_static_batch_and_busy_worker);
    tcase_add_test(tc, test_shortest_first);
    tcase_add_test(tc, test_urgent_first);
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
