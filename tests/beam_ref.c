/*
 * beam_ref.c - the reference of the beam_step op's test (test_beam_op.c):
 * the host bookkeeping the decoder ran before the op, kept as it was
 * (model/search.c at the commit before beam_step, its types renamed), the
 * rules that the token-exact goldens against transformers held it to. It
 * sorts all B x 2B candidates with qsort and copies every hypothesis's
 * tokens, where the op keeps the best 2B and back-pointers: two ways to
 * the same answers.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "beam_ref.h"

typedef struct cand {
    float val;
    int beam;
    int32_t tok;
    int64_t flat;
} cand;

/* ---- sorting and scores ---------------------------------------------------- */

/* Sort helpers: value descending, then the lower flat index first. */
static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->val > y->val)
        return -1;
    if (x->val < y->val)
        return 1;
    return (x->flat > y->flat) - (x->flat < y->flat);
}

typedef struct scored {
    float val;
    int i;
} scored;

static int scored_cmp(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->val > y->val)
        return -1;
    if (x->val < y->val)
        return 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Length normalisation as transformers writes it: a float32 tensor divided
 * by the Python float len ** length_penalty. */
static float len_norm(float v, int len, float lp)
{
    return v / (float)pow((double)len, (double)lp);
}

/* Greedy step of one sentence (transformers' _sample without sampling). */
void ref_greedy(ref_sent *s, const float *val, const int32_t *idx, int ks, int t,
                int M, int eos, const ref_opts *o, int32_t *gather, int *n_new)
{
    int r = s->row0;
    int32_t tok = idx[(int64_t)r * ks]; /* the row's best candidate */
    s->run_tok[t] = tok;
    s->greedy_sum += val[(int64_t)r * ks];
    s->greedy_len = t + 1;
    if (tok == eos || t + 1 >= M) {
        ref_hyp *f = &s->fin[0];
        memcpy(f->tok, s->run_tok, (size_t)(t + 1) * sizeof(int32_t));
        f->len = t + 1;
        f->score = len_norm(s->greedy_sum, t + 1, o->length_penalty);
        f->is_fin = 1;
        f->t_end = t;
        f->b_end = 0;
        s->done = 1;
        return;
    }
    if (s->origin)
        s->origin[t + 1] = 0; /* one beam: it came from beam 0 */
    gather[(*n_new)++] = r;
}

/* Beam step of one sentence: transformers' _beam_search body (c)-(g) for
 * one batch item. val/idx are (rows, ks): the top-ks (ks >= 2B) of logp +
 * running score of each row, of which the first 2B are this sentence's
 * candidates. M is our max_length. */
void ref_beam(ref_sent *s, const float *val, const int32_t *idx, int ks, int t, int M,
              int B, int64_t V, int eos, ref_es es, const ref_opts *o,
              int32_t *gather, int *n_new)
{
    const int K = 2 * B;
    cand all[REF_MAX_BEAM * 2 * REF_MAX_BEAM];
    int na = 0;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++) {
            int64_t r = s->row0 + b;
            cand *c = &all[na++];
            c->val = val[r * ks + k];
            c->tok = idx[r * ks + k];
            c->beam = b;
            c->flat = (int64_t)b * V + c->tok;
        }
    qsort(all, (size_t)na, sizeof(cand), cand_cmp);
    cand *top = all; /* the first K are transformers' topk_log_probs */

    int hits[2 * REF_MAX_BEAM];
    for (int c = 0; c < K; c++)
        hits[c] = top[c].tok == eos || t + 1 >= M;

    /* (e) running beams for the next step */
    scored run[2 * REF_MAX_BEAM];
    for (int c = 0; c < K; c++) {
        run[c].val = top[c].val + (hits[c] ? NEG_BIG : 0.0f);
        run[c].i = c;
    }
    qsort(run, (size_t)K, sizeof(scored), scored_cmp);

    /* (f) finished beams */
    int all_fin = 1;
    for (int b = 0; b < B; b++)
        all_fin &= s->fin[b].is_fin;
    scored merged[3 * REF_MAX_BEAM];
    for (int b = 0; b < B; b++) {
        merged[b].val = s->fin[b].score;
        merged[b].i = b;
    }
    for (int c = 0; c < K; c++) {
        int did = hits[c] && c < B;
        float sc = len_norm(top[c].val, t + 1, o->length_penalty);
        sc += (es == REF_ES_TRUE && all_fin) ? NEG_BIG : 0.0f;
        sc += s->unsat ? 0.0f : NEG_BIG;
        sc += did ? 0.0f : NEG_BIG;
        merged[B + c].val = sc;
        merged[B + c].i = B + c;
    }
    qsort(merged, (size_t)(B + K), sizeof(scored), scored_cmp);
    ref_hyp nf[REF_MAX_BEAM];
    int32_t *ntok[REF_MAX_BEAM];
    for (int j = 0; j < B; j++) {
        int i = merged[j].i;
        if (i < B) {
            nf[j] = s->fin[i];
        } else {
            const cand *c = &top[i - B];
            nf[j].tok = NULL;
            nf[j].len = t + 1;
            nf[j].score = merged[j].val;
            nf[j].is_fin = hits[i - B] && (i - B) < B;
            nf[j].t_end = t;
            nf[j].b_end = c->beam;
        }
        ntok[j] = NULL;
    }
    /* Token storage: keep the buffers of the slots that survive, reuse the
     * others for the new hypotheses. */
    int32_t *pool[REF_MAX_BEAM];
    int n_pool = 0;
    for (int b = 0; b < B; b++) {
        int kept = 0;
        for (int j = 0; j < B; j++)
            if (merged[j].i == b)
                kept = 1;
        if (!kept)
            pool[n_pool++] = s->fin[b].tok;
    }
    for (int j = 0; j < B; j++) {
        int i = merged[j].i;
        if (i < B) {
            ntok[j] = s->fin[i].tok;
        } else {
            const cand *c = &top[i - B];
            ntok[j] = pool[--n_pool];
            memcpy(ntok[j], s->run_tok + (int64_t)c->beam * M, (size_t)t * sizeof(int32_t));
            ntok[j][t] = c->tok;
        }
    }
    for (int j = 0; j < B; j++) {
        s->fin[j] = nf[j];
        s->fin[j].tok = ntok[j];
    }

    /* running sequences for step t + 1 */
    int new_beam_from[REF_MAX_BEAM];
    for (int j = 0; j < B; j++) {
        const cand *c = &top[run[j].i];
        new_beam_from[j] = c->beam;
        memcpy(s->run_tok_next + (int64_t)j * M, s->run_tok + (int64_t)c->beam * M,
               (size_t)t * sizeof(int32_t));
        s->run_tok_next[(int64_t)j * M + t] = c->tok;
        s->run_score[j] = run[j].val;
    }
    int32_t *sw = s->run_tok;
    s->run_tok = s->run_tok_next;
    s->run_tok_next = sw;

    /* (g) early-stop heuristic with cur_len = t + 2 (start token included) */
    int best_len = (es == REF_ES_NEVER && o->length_penalty > 0.0f) ? M : t + 1;
    float best = len_norm(s->run_score[0], best_len, o->length_penalty);
    float worst_all = INFINITY;
    all_fin = 1;
    for (int b = 0; b < B; b++) {
        if (s->fin[b].score < worst_all)
            worst_all = s->fin[b].score;
        all_fin &= s->fin[b].is_fin;
    }
    int any = 0;
    for (int b = 0; b < B; b++) {
        float worst = s->fin[b].is_fin ? worst_all : NEG_BIG;
        if (best > worst)
            any = 1;
    }
    s->unsat = s->unsat && any;

    if (!s->unsat || (es == REF_ES_TRUE && all_fin) || t + 1 >= M) {
        s->done = 1;
        return;
    }
    for (int j = 0; j < B; j++) {
        if (s->origin)
            s->origin[(int64_t)(t + 1) * B + j] = new_beam_from[j];
        gather[(*n_new)++] = s->row0 + new_beam_from[j];
    }
}

