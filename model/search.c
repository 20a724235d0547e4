/*
 * search.c - see search.h: the per-sentence bookkeeping of a decoding step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

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

/* The selection of layers and heads of an already checked o. */
void td_search_select(const td_config *c, const td_decode_opts *o, attn_sel *sel)
{
    memset(sel, 0, sizeof *sel);
    if (!o->return_attention)
        return;
    const int L = c->decoder_layers, H = c->decoder_attention_heads;
    if (o->attn_layers && o->n_attn_layers > 0) {
        for (int i = 0; i < o->n_attn_layers; i++) {
            int l = o->attn_layers[i];
            sel->layers[sel->n_layers++] = l < 0 ? l + L : l;
        }
    } else {
        for (int l = 0; l < L; l++)
            sel->layers[sel->n_layers++] = l;
    }
    if (o->attn_heads && o->n_attn_heads > 0) {
        for (int i = 0; i < o->n_attn_heads; i++)
            sel->heads[sel->n_heads++] = o->attn_heads[i];
    } else {
        for (int h = 0; h < H; h++)
            sel->heads[sel->n_heads++] = h;
    }
    for (int i = 0; i < sel->n_layers; i++)
        sel->mask |= UINT64_C(1) << sel->layers[i];
}

/* Copies the selected heads of this step's captured probabilities for the
 * rows of sentence s into its history. probs holds the captured layers in
 * capture order, each (rows, H, s_kv); cap_of[l] is layer l's place. */
void td_search_record(sent *s, int t, const float *probs, int64_t layer_stride,
                             const int *cap_of, int H, int s_kv)
{
    const attn_sel *sel = &s->sel;
    float *blk = s->hist + (int64_t)t * s->B * s->a_size;
    for (int b = 0; b < s->B; b++) {
        int r = s->row0 + b;
        for (int li = 0; li < sel->n_layers; li++) {
            const float *lp = probs + cap_of[sel->layers[li]] * layer_stride;
            for (int hi = 0; hi < sel->n_heads; hi++) {
                const float *src = lp + ((int64_t)r * H + sel->heads[hi]) * s_kv;
                float *dst = blk + (int64_t)b * s->a_size +
                             ((int64_t)li * sel->n_heads + hi) * s->src_len;
                memcpy(dst, src, (size_t)s->src_len * sizeof(float));
            }
        }
    }
}

/* Greedy step of one sentence (transformers' _sample without sampling). */
void td_search_greedy(sent *s, const float *val, const int32_t *idx, int ks, int t,
                          int M, int eos, const td_decode_opts *o, int32_t *gather, int *n_new)
{
    int r = s->row0;
    int32_t tok = idx[(int64_t)r * ks]; /* the row's best candidate */
    s->run_tok[t] = tok;
    s->greedy_sum += val[(int64_t)r * ks];
    s->greedy_len = t + 1;
    if (tok == eos || t + 1 >= M) {
        fin_hyp *f = &s->fin[0];
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
void td_search_beam(sent *s, const float *val, const int32_t *idx, int ks, int t, int M,
                        int B, int64_t V, int eos, td_early_stopping es, const td_decode_opts *o,
                        int32_t *gather, int *n_new)
{
    const int K = 2 * B;
    cand all[TD_MAX_BEAM * 2 * TD_MAX_BEAM];
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

    int hits[2 * TD_MAX_BEAM];
    for (int c = 0; c < K; c++)
        hits[c] = top[c].tok == eos || t + 1 >= M;

    /* (e) running beams for the next step */
    scored run[2 * TD_MAX_BEAM];
    for (int c = 0; c < K; c++) {
        run[c].val = top[c].val + (hits[c] ? NEG_BIG : 0.0f);
        run[c].i = c;
    }
    qsort(run, (size_t)K, sizeof(scored), scored_cmp);

    /* (f) finished beams */
    int all_fin = 1;
    for (int b = 0; b < B; b++)
        all_fin &= s->fin[b].is_fin;
    scored merged[3 * TD_MAX_BEAM];
    for (int b = 0; b < B; b++) {
        merged[b].val = s->fin[b].score;
        merged[b].i = b;
    }
    for (int c = 0; c < K; c++) {
        int did = hits[c] && c < B;
        float sc = len_norm(top[c].val, t + 1, o->length_penalty);
        sc += (es == TD_EARLY_STOP_TRUE && all_fin) ? NEG_BIG : 0.0f;
        sc += s->unsat ? 0.0f : NEG_BIG;
        sc += did ? 0.0f : NEG_BIG;
        merged[B + c].val = sc;
        merged[B + c].i = B + c;
    }
    qsort(merged, (size_t)(B + K), sizeof(scored), scored_cmp);
    fin_hyp nf[TD_MAX_BEAM];
    int32_t *ntok[TD_MAX_BEAM];
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
    int32_t *pool[TD_MAX_BEAM];
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
    int new_beam_from[TD_MAX_BEAM];
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
    int best_len = (es == TD_EARLY_STOP_NEVER && o->length_penalty > 0.0f) ? M : t + 1;
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

    if (!s->unsat || (es == TD_EARLY_STOP_TRUE && all_fin) || t + 1 >= M) {
        s->done = 1;
        return;
    }
    for (int j = 0; j < B; j++) {
        if (s->origin)
            s->origin[(int64_t)(t + 1) * B + j] = new_beam_from[j];
        gather[(*n_new)++] = s->row0 + new_beam_from[j];
    }
}

/* Builds result r from the finished hypotheses of s. */
int td_search_result(const sent *s, td_result *r)
{
    const int B = s->B;
    const td_decode_opts *o = &s->o;
    const attn_sel *sel = &s->sel;
    memset(r, 0, sizeof *r);
    int nh = 0;
    for (int j = 0; j < B && nh < o->num_hypotheses; j++)
        nh += s->fin[j].is_fin;
    r->hyps = calloc((size_t)(nh ? nh : 1), sizeof(td_hypothesis));
    if (!r->hyps)
        return -1;
    for (int j = 0; j < B && r->n_hyps < nh; j++) {
        const fin_hyp *f = &s->fin[j];
        if (!f->is_fin)
            continue;
        td_hypothesis *h = &r->hyps[r->n_hyps];
        h->tokens = malloc((size_t)(f->len ? f->len : 1) * sizeof(int32_t));
        if (!h->tokens)
            return -1;
        memcpy(h->tokens, f->tok, (size_t)f->len * sizeof(int32_t));
        h->n_tokens = f->len;
        h->score = f->score;
        r->n_hyps++;
    }
    if (!o->return_attention || r->n_hyps == 0)
        return 0;

    /* Follow the back-pointers of the best hypothesis. */
    const fin_hyp *best = NULL;
    for (int j = 0; j < B && !best; j++)
        if (s->fin[j].is_fin)
            best = &s->fin[j];
    int T = best->len, S = s->src_len, NL = sel->n_layers, NH = sel->n_heads;
    r->attention = malloc((size_t)NL * NH * T * S * sizeof(float));
    r->attn_layer_ids = malloc((size_t)NL * sizeof(int));
    r->attn_head_ids = malloc((size_t)NH * sizeof(int));
    if (!r->attention || !r->attn_layer_ids || !r->attn_head_ids)
        return -1;
    memcpy(r->attn_layer_ids, sel->layers, (size_t)NL * sizeof(int));
    memcpy(r->attn_head_ids, sel->heads, (size_t)NH * sizeof(int));
    r->attn_n_layers = NL;
    r->attn_n_heads = NH;
    r->attn_n_t = T;
    r->attn_n_s = S;
    int b = best->b_end;
    for (int t = best->t_end; t >= 0; t--) {
        const float *blk = s->hist + ((int64_t)t * B + b) * s->a_size;
        for (int lh = 0; lh < NL * NH; lh++)
            memcpy(r->attention + ((int64_t)lh * T + t) * S, blk + (int64_t)lh * S,
                   (size_t)S * sizeof(float));
        if (t > 0)
            b = s->origin[(int64_t)t * B + b];
    }
    return 0;
}

