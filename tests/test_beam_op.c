/*
 * test_beam_op.c - the beam_step op (backend.h) through the CPU backend's
 * table against the reference rules (beam_ref.c: the host bookkeeping the
 * decoder ran before the op, held token-exact to transformers by the
 * goldens): scripted steps (beam_script.h) of sentences of 1..16 beams, of
 * different max_lengths, joining at different steps, with ties, </s> and
 * forced </s>, rows re-laid out at every step. Every step compares each
 * sentence's end flag, back-pointers, tokens and running scores (bits);
 * an ended sentence's finished list (scores in bits, tokens read back
 * through the back-pointers); slots that no sentence holds are never
 * written. The CUDA op against this CPU twin: tests/gpu/test_gpu_ops.c.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "beam_ref.h"
#include "beam_script.h"
#include "cpu_backend.h"

/* What the cases reached, so that a script that stopped reaching a
 * boundary fails (a test that cannot fail is a defect). */
static struct {
    int steps, ended_at_max, ended_early, ties, forced, greedy, beam16;
} seen;

typedef struct ref_slot {
    ref_sent r;
    int32_t run[BS_MB * BS_ML], next[BS_MB * BS_ML], fin[BS_MB][BS_ML];
} ref_slot;

static void ref_init(ref_slot *rs, const bs_sent *s)
{
    memset(rs, 0, sizeof *rs);
    rs->r.B = s->B;
    rs->r.M = s->M;
    rs->r.unsat = 1;
    rs->r.run_tok = rs->run;
    rs->r.run_tok_next = rs->next;
    for (int b = 0; b < s->B; b++) {
        rs->r.run_score[b] = b == 0 ? 0.0f : NEG_BIG;
        rs->r.fin[b].score = NEG_BIG;
        rs->r.fin[b].tok = rs->fin[b];
    }
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The ended sentence's finished list in the op's state against the
 * reference's. */
static void check_finished(const bs_sent *s, const ref_sent *r, float *sf, int32_t *si)
{
    td_beam_view v = td_beam_slot(sf, si, BS_MB, BS_ML, s->slot);
    for (int j = 0; j < s->B; j++) {
        const ref_hyp *h = &r->fin[j];
        ck_assert_int_eq(v.fin_is[j] != 0, h->is_fin != 0);
        ck_assert_msg(same_bits(v.fin[j], h->score), "slot %d hyp %d: score %.9g, reference %.9g",
                      s->slot, j, v.fin[j], h->score);
        if (!h->is_fin)
            continue;
        ck_assert_int_eq(v.fin_t[j] + 1, h->len);
        ck_assert_int_eq(v.fin_b[j], h->b_end);
        int32_t tok[BS_ML];
        td_beam_tokens(v, BS_MB, j, tok);
        for (int u = 0; u < h->len; u++)
            ck_assert_msg(tok[u] == h->tok[u], "slot %d hyp %d token %d: %d, reference %d",
                          s->slot, j, u, tok[u], h->tok[u]);
    }
}

/* One step of live sentence k against the reference: end flag, and the
 * rows that go on (the beam each continues, its token, its score). */
static void check_step(bs_sent *s, ref_slot *rs, int k, int n, int ks, const float *val,
                       const int32_t *idx, const int32_t *out, const float *sf, int row0)
{
    ref_sent *r = &rs->r;
    const ref_opts o = {.length_penalty = s->lp};
    int32_t gather[BS_MB];
    int n_new = 0;
    r->row0 = row0;
    if (s->B == 1)
        ref_greedy(r, val, idx, ks, s->t, s->M, BS_EOS, &o, gather, &n_new);
    else
        ref_beam(r, val, idx, ks, s->t, s->M, s->B, BS_V, BS_EOS, (ref_es)s->es, &o, gather,
                 &n_new);
    ck_assert_int_eq(out[2 * n + k], r->done);
    if (r->done) {
        ck_assert_int_eq(n_new, 0);
        for (int j = 0; j < s->B; j++)
            ck_assert(out[row0 + j] == -1 && out[n + row0 + j] == -1);
        return;
    }
    ck_assert_int_eq(n_new, s->B);
    const float *run = sf + s->slot * bs_fs();
    for (int j = 0; j < s->B; j++) {
        ck_assert_int_eq(out[row0 + j], gather[j] - row0);
        const int32_t ref_tok = r->run_tok[(int64_t)j * s->M + s->t];
        ck_assert_int_eq(out[n + row0 + j], ref_tok);
        if (s->B > 1)
            ck_assert_msg(same_bits(run[j], r->run_score[j]), "beam %d: score %.9g, ref %.9g", j,
                          run[j], r->run_score[j]);
    }
}

/* Counts the ties between candidates of different rows of a sentence. */
static void count_ties(const bs_sent *s, int row0, int ks, const float *val)
{
    for (int b = 1; b < s->B; b++)
        for (int k = 0; k < 2 * s->B && k < ks; k++)
            if (val[(int64_t)(row0 + b) * ks + k] == val[(int64_t)row0 * ks + k])
                seen.ties++;
}

/* One scripted case to its end: every sentence ended. */
static void run_case(uint64_t seed, int beams)
{
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
    bs_case c;
    bs_make(&c, &rng, beams);
    char err[512] = "";
    td_backend *be = td_cpu_backend_create(1, err, sizeof err);
    ck_assert_msg(be != NULL, "%s", err);
    bs_dev d;
    bs_dev_init(&d, be, &c);
    ref_slot *rs = calloc((size_t)c.n_sent, sizeof *rs);
    float *val = malloc(sizeof(float) * BS_MAX_ROWS * BS_MAX_KS);
    int32_t *idx = malloc(sizeof(int32_t) * BS_MAX_ROWS * BS_MAX_KS);
    float *sf = malloc(sizeof(float) * (size_t)(c.n_slots * bs_fs()));
    int32_t *si = malloc(sizeof(int32_t) * (size_t)(c.n_slots * bs_is()));
    ck_assert(rs && val && idx && sf && si);
    for (int i = 0; i < c.n_sent; i++)
        ref_init(&rs[i], &c.s[i]);
    int left = c.n_sent;
    for (int step = 0; left > 0; step++) {
        ck_assert_int_lt(step, BS_ML + 8);
        int live[BS_MAX_SENT], n_live, ks;
        int32_t sent[BS_MAX_SENT * TD_BEAM_FIELDS], out[3 * BS_MAX_ROWS];
        const int n = bs_layout(&c, step, &rng, live, &n_live, sent, &ks);
        if (n_live == 0)
            continue;
        for (int k = 0; k < n_live; k++) {
            const bs_sent *s = &c.s[live[k]];
            const int row0 = sent[k * TD_BEAM_FIELDS + TD_BEAM_ROW0];
            const int forced_now = s->forced && s->t == s->M - 1;
            seen.forced += forced_now;
            for (int b = 0; b < s->B; b++) {
                const float run = s->B > 1 ? rs[live[k]].r.run_score[b] : 0.0f;
                bs_row(&rng, run, forced_now, ks, val + (int64_t)(row0 + b) * ks,
                       idx + (int64_t)(row0 + b) * ks);
            }
            count_ties(s, row0, ks, val);
        }
        bs_dev_step(&d, n, ks, n_live, val, idx, sent, out);
        bs_dev_state(&d, &c, sf, si);
        seen.steps++;
        for (int k = 0; k < n_live; k++) {
            bs_sent *s = &c.s[live[k]];
            const int row0 = sent[k * TD_BEAM_FIELDS + TD_BEAM_ROW0];
            check_step(s, &rs[live[k]], k, n, ks, val, idx, out, sf, row0);
            if (rs[live[k]].r.done) {
                check_finished(s, &rs[live[k]].r, sf, si);
                s->done = 1;
                left--;
                seen.ended_at_max += s->t + 1 == s->M;
                seen.ended_early += s->t + 1 < s->M;
                seen.greedy += s->B == 1;
                seen.beam16 += s->B == 16;
            }
            s->t++;
        }
    }
    /* the slots no sentence held: as they were poisoned */
    for (int slot = 0; slot < c.n_slots; slot++) {
        int held = 0;
        for (int i = 0; i < c.n_sent; i++)
            held |= c.s[i].slot == slot;
        for (int64_t k = 0; !held && k < bs_fs(); k++)
            ck_assert(sf[slot * bs_fs() + k] == 777.0f);
        for (int64_t k = 0; !held && k < bs_is(); k++)
            ck_assert(si[slot * bs_is() + k] == 0x5a5a5a5a);
    }
    bs_dev_free(&d);
    be->ops->destroy(be);
    free(rs);
    free(val);
    free(idx);
    free(sf);
    free(si);
}

START_TEST(test_random_cases)
{
    memset(&seen, 0, sizeof seen);
    for (uint64_t seed = 1; seed <= 400; seed++)
        run_case(seed, 0);
    ck_assert_int_gt(seen.ended_at_max, 50);
    ck_assert_int_gt(seen.ended_early, 50);
    ck_assert_int_gt(seen.ties, 1000);
    ck_assert_int_gt(seen.forced, 50);
    ck_assert_int_gt(seen.greedy, 10);
}
END_TEST

START_TEST(test_each_beam_size)
{
    memset(&seen, 0, sizeof seen);
    for (int beams = 1; beams <= 16; beams++)
        for (uint64_t seed = 1; seed <= 25; seed++)
            run_case(1000 * (uint64_t)beams + seed, beams);
    ck_assert_int_gt(seen.beam16, 25);
    ck_assert_int_gt(seen.ended_early, 100);
}
END_TEST

/* A sentence out of the op's contract (more beams than the state holds, a
 * top-k narrower than 2B): -1 as its end flag and a latched error; the
 * other sentences of the call are stepped. */
START_TEST(test_contract)
{
    char err[512] = "";
    td_backend *be = td_cpu_backend_create(1, err, sizeof err);
    ck_assert_msg(be != NULL, "%s", err);
    const td_backend_ops *o = be->ops;
    const int mb = 2, ml = 4;
    float *f = o->alloc(be, (size_t)(2 * td_beam_f_stride(mb)) * sizeof(float));
    int32_t *i = o->alloc(be, (size_t)(2 * td_beam_i_stride(mb, ml)) * sizeof(int32_t));
    ck_assert(f && i);
    td_beam_init(f, i, mb);
    td_beam_init(f + td_beam_f_stride(mb), i + td_beam_i_stride(mb, ml), mb);
    float val[4 * 4] = {-1, -2, -3, -4, -1, -2, -3, -4, -1, -2, -3, -4, -1, -2, -3, -4};
    int32_t idx[4 * 4] = {5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8};
    int32_t sent[2 * TD_BEAM_FIELDS] = {0};
    const float lp = 1.0f;
    for (int k = 0; k < 2; k++) {
        int32_t *r = sent + k * TD_BEAM_FIELDS;
        r[TD_BEAM_SLOT] = k;
        r[TD_BEAM_ROW0] = 2 * k;
        r[TD_BEAM_B] = k == 0 ? 2 : 3; /* the second: 3 beams, the state holds 2 */ /* the second: 3 beams, the state holds 2 */
        r[TD_BEAM_M] = ml;
        memcpy(&r[TD_BEAM_LP], &lp, sizeof lp);
    }
    int32_t out[3 * 5];
    td_beam_args a = {.val = val, .idx = idx, .n_rows = 5, .ks = 4, .sent = sent, .n_sent = 2,
                      .st_f = f, .st_i = i, .max_beam = mb, .max_len = ml, .vocab = 10,
                      .eos_id = 0, .out = out};
    o->beam_step(be, &a);
    ck_assert_int_eq(out[2 * 5 + 0], 0);
    ck_assert_int_eq(out[2 * 5 + 1], -1);
    ck_assert_int_eq(o->sync(be, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "beam_step"));
    /* ks narrower than 2B */
    sent[TD_BEAM_FIELDS + TD_BEAM_B] = 2;
    a.ks = 3;
    o->beam_step(be, &a);
    ck_assert_int_eq(out[2 * 5 + 0], -1);
    ck_assert_int_eq(o->sync(be, err, sizeof err), -1);
    o->dealloc(be, f);
    o->dealloc(be, i);
    o->destroy(be);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("beam_op");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_random_cases);
    tcase_add_test(tc, test_each_beam_size);
    tcase_add_test(tc, test_contract);
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
