/*
 * search.c - see search.h: a sentence's attention selection and capture,
 * and its result read from its search state.
 */
#include <stdlib.h>
#include <string.h>

#include "search.h"

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

/* Builds result r from the finished hypotheses of s (state v). */
int td_search_result(const sent *s, td_beam_view v, int mb, td_result *r)
{
    const int B = s->B;
    const td_decode_opts *o = &s->o;
    const attn_sel *sel = &s->sel;
    memset(r, 0, sizeof *r);
    int nh = 0;
    for (int j = 0; j < B && nh < o->num_hypotheses; j++)
        nh += v.fin_is[j] != 0;
    r->hyps = calloc((size_t)(nh ? nh : 1), sizeof(td_hypothesis));
    if (!r->hyps)
        return -1;
    int best = -1;
    for (int j = 0; j < B && r->n_hyps < nh; j++) {
        if (!v.fin_is[j])
            continue;
        best = best < 0 ? j : best;
        const int len = v.fin_t[j] + 1;
        td_hypothesis *h = &r->hyps[r->n_hyps];
        h->tokens = malloc((size_t)len * sizeof(int32_t));
        if (!h->tokens)
            return -1;
        td_beam_tokens(v, mb, j, h->tokens);
        h->n_tokens = len;
        h->score = v.fin[j];
        r->n_hyps++;
    }
    if (!o->return_attention || r->n_hyps == 0)
        return 0;

    /* Follow the back-pointers of the best hypothesis. */
    int T = v.fin_t[best] + 1, S = s->src_len, NL = sel->n_layers, NH = sel->n_heads;
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
    int b = v.fin_b[best];
    for (int t = T - 1; t >= 0; t--) {
        const float *blk = s->hist + ((int64_t)t * B + b) * s->a_size;
        for (int lh = 0; lh < NL * NH; lh++)
            memcpy(r->attention + ((int64_t)lh * T + t) * S, blk + (int64_t)lh * S,
                   (size_t)S * sizeof(float));
        if (t > 0)
            b = s->origin[(int64_t)t * B + b];
    }
    return 0;
}

