/*
 * beam_rules.h - the rules of one decoding step's search for one sentence,
 * on the flat state the beam_step op keeps on the device (backend.h,
 * td_beam_args): the one implementation of the rules, exactly as
 * transformers' GenerationMixin decides (generation/utils.py: _sample for
 * greedy; the vectorised _beam_search with _get_top_k_continuations,
 * _get_running_beams_for_next_iteration, _update_finished_beams and
 * _check_early_stop_heuristic).
 *
 * Host and device code: the CPU backend's op (cpu/cpu_backend.c) runs
 * td_beam_sent_step over the sentences; the CUDA kernel (gpu/gpu_beam.cu)
 * runs it in one thread block per sentence; model/search.c reads a
 * finished sentence's state with the same layout. It lives in backend/
 * because cpu/ and gpu/ may include nothing else (tests/check_layout.sh).
 *
 * State of a slot (MB = max_beam, ML = max_len; a sentence of B beams uses
 * the first B entries of each list):
 *   float  [0, MB)        run      running score of each beam (sum log p)
 *          [MB, 2MB)      fin      finished list's scores, best first
 *          [2MB]          gsum     greedy: the sum of log p so far
 *   int32  [0, MB)        fin_is   1: a finished hypothesis (else a filler
 *                                  of score -1e9, as transformers' list)
 *          [MB, 2MB)      fin_t    its last step (its length - 1)
 *          [2MB, 3MB)     fin_b    the beam (row) it extends at fin_t
 *          [3MB, 4MB)     fin_tok  its last token
 *          [4MB]          unsat    is_early_stop_heuristic_unsatisfied
 *          [4MB+1, +ML*MB) bp_tok  step t's token of running beam j, at t*MB + j
 *          [.., +ML*MB)   bp_par   the beam at step t-1 that beam j of step t
 *                                  continues (back-pointers)
 * A hypothesis's tokens are read back through the back-pointers
 * (td_beam_tokens): no sequence is copied during a step.
 */
#ifndef TD_BEAM_RULES_H
#define TD_BEAM_RULES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"

#ifdef __CUDACC__
#define TD_BEAM_FN static inline __host__ __device__
#else
#define TD_BEAM_FN static inline
#endif

#define TD_BEAM_MAX 16            /* beams of a sentence at most */
#define TD_BEAM_NEG_BIG (-1.0e9f) /* transformers' "very large negative value" */

/* Fields of a sentence in td_beam_args.sent. */
enum {
    TD_BEAM_SLOT = 0,
    TD_BEAM_ROW0,
    TD_BEAM_B,
    TD_BEAM_T,
    TD_BEAM_M,
    TD_BEAM_ES, /* td_beam_es */
    TD_BEAM_LP, /* length_penalty, the float's bits */
    TD_BEAM_FIELDS
};

/* transformers' early_stopping: False, True, "never". */
typedef enum td_beam_es {
    TD_BEAM_ES_HEURISTIC = 0,
    TD_BEAM_ES_TRUE,
    TD_BEAM_ES_NEVER,
} td_beam_es;

TD_BEAM_FN int64_t td_beam_f_stride(int mb) { return 2 * (int64_t)mb + 1; }
TD_BEAM_FN int64_t td_beam_i_stride(int mb, int ml)
{
    return 4 * (int64_t)mb + 1 + 2 * (int64_t)ml * mb;
}

/* A slot's state, its lists named. */
typedef struct td_beam_view {
    float *run, *fin, *gsum;
    int32_t *fin_is, *fin_t, *fin_b, *fin_tok, *unsat, *bp_tok, *bp_par;
} td_beam_view;

TD_BEAM_FN td_beam_view td_beam_slot(float *st_f, int32_t *st_i, int mb, int ml, int slot)
{
    td_beam_view v;
    float *f = st_f + slot * td_beam_f_stride(mb);
    int32_t *i = st_i + slot * td_beam_i_stride(mb, ml);
    v.run = f;
    v.fin = f + mb;
    v.gsum = f + 2 * mb;
    v.fin_is = i;
    v.fin_t = i + mb;
    v.fin_b = i + 2 * mb;
    v.fin_tok = i + 3 * mb;
    v.unsat = i + 4 * mb;
    v.bp_tok = i + 4 * mb + 1;
    v.bp_par = i + 4 * mb + 1 + (int64_t)ml * mb;
    return v;
}

/* A new sentence's state (before its step 0): beam 0 at score 0, the others
 * at -1e9 so that step 0 expands one beam (transformers' initial
 * running_beam_scores); the finished list all fillers; the heuristic
 * unsatisfied. f and i: the first td_beam_f_stride and 4*mb+1 entries of
 * a slot (the back-pointers are written by the steps before they are read). */
TD_BEAM_FN void td_beam_init(float *f, int32_t *i, int mb)
{
    for (int b = 0; b < mb; b++) {
        f[b] = b == 0 ? 0.0f : TD_BEAM_NEG_BIG;
        f[mb + b] = TD_BEAM_NEG_BIG;
        i[b] = 0;
        i[mb + b] = i[2 * mb + b] = i[3 * mb + b] = 0;
    }
    f[2 * mb] = 0.0f;
    i[4 * mb] = 1;
}

/* Length normalisation as transformers writes it: a float32 tensor divided
 * by the Python float len ** length_penalty. */
TD_BEAM_FN float td_beam_len_norm(float v, int len, float lp)
{
    return v / (float)pow((double)len, (double)lp);
}

/* A candidate, and the order of transformers' topk over the flattened
 * (beam, vocab) scores: value descending, then the lower flat index. */
typedef struct td_beam_cand {
    float val;
    int beam;
    int32_t tok;
    int64_t flat;
} td_beam_cand;

TD_BEAM_FN int td_beam_cand_before(const td_beam_cand *x, const td_beam_cand *y)
{
    if (x->val != y->val)
        return x->val > y->val;
    return x->flat < y->flat;
}

/* A score and its place, in the order of a stable descending sort. */
typedef struct td_beam_scored {
    float val;
    int i;
} td_beam_scored;

TD_BEAM_FN int td_beam_scored_before(const td_beam_scored *x, const td_beam_scored *y)
{
    if (x->val != y->val)
        return x->val > y->val;
    return x->i < y->i;
}

TD_BEAM_FN void td_beam_sort_scored(td_beam_scored *a, int n)
{
    for (int k = 1; k < n; k++) {
        td_beam_scored x = a[k];
        int j = k;
        while (j > 0 && td_beam_scored_before(&x, &a[j - 1])) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

/* The sentence's parameters from its row of td_beam_args.sent. */
typedef struct td_beam_sent {
    int slot, row0, B, t, M, es;
    float lp;
} td_beam_sent;

TD_BEAM_FN td_beam_sent td_beam_sent_of(const int32_t *row)
{
    td_beam_sent s;
    s.slot = row[TD_BEAM_SLOT];
    s.row0 = row[TD_BEAM_ROW0];
    s.B = row[TD_BEAM_B];
    s.t = row[TD_BEAM_T];
    s.M = row[TD_BEAM_M];
    s.es = row[TD_BEAM_ES];
    memcpy(&s.lp, &row[TD_BEAM_LP], sizeof s.lp);
    return s;
}

/* Greedy step (transformers' _sample without sampling): the row's best
 * candidate; the sentence ends at </s> or at max_length. Returns 1 when
 * it ended. */
TD_BEAM_FN int td_beam_greedy(const td_beam_args *a, td_beam_sent s, td_beam_view v)
{
    const int64_t r = s.row0;
    const int32_t tok = a->idx[r * a->ks];
    const int64_t at = (int64_t)s.t * a->max_beam;
    v.bp_tok[at] = tok;
    v.bp_par[at] = 0;
    *v.gsum += a->val[r * a->ks];
    if (tok == a->eos_id || s.t + 1 >= s.M) {
        v.fin[0] = td_beam_len_norm(*v.gsum, s.t + 1, s.lp);
        v.fin_is[0] = 1;
        v.fin_t[0] = s.t;
        v.fin_b[0] = 0;
        v.fin_tok[0] = tok;
        return 1;
    }
    a->out[r] = 0;
    a->out[a->n_rows + r] = tok;
    return 0;
}

/* Beam step, part 1: transformers' topk_log_probs, the best 2B of the B x 2B
 * candidates of the sentence's rows (each row's first 2B of the op's
 * top-k), in order. */
TD_BEAM_FN void td_beam_top(const td_beam_args *a, td_beam_sent s, td_beam_cand *top)
{
    const int K = 2 * s.B;
    int n = 0;
    for (int b = 0; b < s.B; b++)
        for (int k = 0; k < K; k++) {
            const int64_t r = s.row0 + b;
            td_beam_cand c;
            c.val = a->val[r * a->ks + k];
            c.tok = a->idx[r * a->ks + k];
            c.beam = b;
            c.flat = (int64_t)b * a->vocab + c.tok;
            if (n == K && !td_beam_cand_before(&c, &top[K - 1]))
                continue;
            int j = n < K ? n++ : K - 1;
            while (j > 0 && td_beam_cand_before(&c, &top[j - 1])) {
                top[j] = top[j - 1];
                j--;
            }
            top[j] = c;
        }
}

/* Beam step, part 2 (_update_finished_beams): the finished list merged with
 * this step's candidates that ended (</s> among the first B, or any at
 * max_length), scores length-normalised, the best B kept in order. */
TD_BEAM_FN void td_beam_finished(td_beam_sent s, td_beam_view v, const td_beam_cand *top,
                                 const int *hits)
{
    const int B = s.B, K = 2 * B;
    int all_fin = 1;
    for (int b = 0; b < B; b++)
        all_fin &= v.fin_is[b] != 0;
    td_beam_scored merged[3 * TD_BEAM_MAX];
    for (int b = 0; b < B; b++) {
        merged[b].val = v.fin[b];
        merged[b].i = b;
    }
    for (int c = 0; c < K; c++) {
        int did = hits[c] && c < B;
        float sc = td_beam_len_norm(top[c].val, s.t + 1, s.lp);
        sc += (s.es == TD_BEAM_ES_TRUE && all_fin) ? TD_BEAM_NEG_BIG : 0.0f;
        sc += *v.unsat ? 0.0f : TD_BEAM_NEG_BIG;
        sc += did ? 0.0f : TD_BEAM_NEG_BIG;
        merged[B + c].val = sc;
        merged[B + c].i = B + c;
    }
    td_beam_sort_scored(merged, B + K);
    float nf[TD_BEAM_MAX];
    int32_t n_is[TD_BEAM_MAX], n_t[TD_BEAM_MAX], n_b[TD_BEAM_MAX], n_tok[TD_BEAM_MAX];
    for (int j = 0; j < B; j++) {
        int i = merged[j].i;
        if (i < B) {
            nf[j] = v.fin[i];
            n_is[j] = v.fin_is[i];
            n_t[j] = v.fin_t[i];
            n_b[j] = v.fin_b[i];
            n_tok[j] = v.fin_tok[i];
        } else {
            const td_beam_cand *c = &top[i - B];
            nf[j] = merged[j].val;
            n_is[j] = hits[i - B] && (i - B) < B;
            n_t[j] = s.t;
            n_b[j] = c->beam;
            n_tok[j] = c->tok;
        }
    }
    for (int j = 0; j < B; j++) {
        v.fin[j] = nf[j];
        v.fin_is[j] = n_is[j];
        v.fin_t[j] = n_t[j];
        v.fin_b[j] = n_b[j];
        v.fin_tok[j] = n_tok[j];
    }
}

/* Beam step, part 3 (_check_early_stop_heuristic, cur_len = t + 2 with the
 * start token): whether the sentence is over. */
TD_BEAM_FN int td_beam_over(td_beam_sent s, td_beam_view v)
{
    const int B = s.B;
    int best_len = (s.es == TD_BEAM_ES_NEVER && s.lp > 0.0f) ? s.M : s.t + 1;
    float best = td_beam_len_norm(v.run[0], best_len, s.lp);
    float worst_all = INFINITY;
    int all_fin = 1;
    for (int b = 0; b < B; b++) {
        if (v.fin[b] < worst_all)
            worst_all = v.fin[b];
        all_fin &= v.fin_is[b] != 0;
    }
    int any = 0;
    for (int b = 0; b < B; b++) {
        float worst = v.fin_is[b] ? worst_all : TD_BEAM_NEG_BIG;
        if (best > worst)
            any = 1;
    }
    *v.unsat = *v.unsat && any;
    return !*v.unsat || (s.es == TD_BEAM_ES_TRUE && all_fin) || s.t + 1 >= s.M;
}

/* Beam step of one sentence: transformers' _beam_search body (c)-(g) for one
 * batch item. Returns 1 when the sentence ended. */
TD_BEAM_FN int td_beam_beam(const td_beam_args *a, td_beam_sent s, td_beam_view v)
{
    const int B = s.B, K = 2 * B;
    td_beam_cand top[2 * TD_BEAM_MAX];
    td_beam_top(a, s, top);
    int hits[2 * TD_BEAM_MAX];
    for (int c = 0; c < K; c++)
        hits[c] = top[c].tok == a->eos_id || s.t + 1 >= s.M;

    /* (e) running beams for the next step */
    td_beam_scored run[2 * TD_BEAM_MAX];
    for (int c = 0; c < K; c++) {
        run[c].val = top[c].val + (hits[c] ? TD_BEAM_NEG_BIG : 0.0f);
        run[c].i = c;
    }
    td_beam_sort_scored(run, K);
    /* (f) finished beams, with the heuristic's state of the step before */
    td_beam_finished(s, v, top, hits);
    const int64_t at = (int64_t)s.t * a->max_beam;
    for (int j = 0; j < B; j++) {
        const td_beam_cand *c = &top[run[j].i];
        v.bp_tok[at + j] = c->tok;
        v.bp_par[at + j] = c->beam;
        v.run[j] = run[j].val;
    }
    /* (g) */
    if (td_beam_over(s, v))
        return 1;
    for (int j = 0; j < B; j++) {
        a->out[s.row0 + j] = v.bp_par[at + j];
        a->out[a->n_rows + s.row0 + j] = v.bp_tok[at + j];
    }
    return 0;
}

/* Step of sentence i of a: its state updated, its rows' and its own entries
 * of a->out written. Returns 0, or -1 when its arguments are out of the
 * op's contract: then only out[2 * n_rows + i] is written, as -1 (the
 * CUDA kernel's way of reporting it; the CPU op latches an error too). */
TD_BEAM_FN int td_beam_sent_step(const td_beam_args *a, int i)
{
    const td_beam_sent s = td_beam_sent_of(a->sent + (int64_t)i * TD_BEAM_FIELDS);
    if (s.B < 1 || s.B > TD_BEAM_MAX || s.B > a->max_beam || (s.B > 1 && a->ks < 2 * s.B) ||
        s.t < 0 || s.t >= a->max_len || s.row0 < 0 || s.row0 + s.B > a->n_rows) {
        a->out[2 * a->n_rows + i] = -1;
        return -1;
    }
    td_beam_view v = td_beam_slot(a->st_f, a->st_i, a->max_beam, a->max_len, s.slot);
    int ended = s.B == 1 ? td_beam_greedy(a, s, v) : td_beam_beam(a, s, v);
    if (ended)
        for (int j = 0; j < s.B; j++)
            a->out[s.row0 + j] = a->out[a->n_rows + s.row0 + j] = -1;
    a->out[2 * a->n_rows + i] = ended;
    return 0;
}

/* The tokens of finished hypothesis j of a slot (its fin_t + 1 of them),
 * read back through the back-pointers. */
TD_BEAM_FN void td_beam_tokens(td_beam_view v, int mb, int j, int32_t *tok)
{
    int t = v.fin_t[j], b = v.fin_b[j];
    tok[t] = v.fin_tok[j];
    for (int u = t - 1; u >= 0; u--) {
        tok[u] = v.bp_tok[(int64_t)u * mb + b];
        b = v.bp_par[(int64_t)u * mb + b];
    }
}

#endif /* TD_BEAM_RULES_H */
