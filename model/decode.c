/*
 * decode.c - greedy and beam search over a batch, step by step, exactly as
 * transformers' GenerationMixin does it (generation/utils.py: _sample for
 * greedy, the vectorised _beam_search with its helpers
 * _get_top_k_continuations, _get_running_beams_for_next_iteration,
 * _update_finished_beams and _check_early_stop_heuristic).
 *
 * Rows: every live sentence owns beam_size consecutive decoder rows. After
 * each step the rows are re-laid out (beam reordering, and sentences that
 * are done leave the batch) with one gather of the self-attention caches;
 * cross-attention K/V stay where the encoder put them and rows find their
 * sentence through kv_index.
 *
 * Lengths: opts->max_length (M) counts generated tokens including </s>;
 * transformers' max_length is M + 1 because it counts the decoder start
 * token. Step t (0-based) predicts token t; the last allowed step is
 * t = M - 1, where ForcedEOSTokenLogitsProcessor forces </s>.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define NEG_BIG (-1.0e9f) /* transformers' "very large negative value" */

typedef struct fin_hyp {
    int32_t *tok;    /* (M) */
    int len;
    float score;
    int is_fin;
    int t_end, b_end; /* attention back-trace start */
} fin_hyp;

typedef struct sent {
    int idx;         /* index in the caller's batch (and cross K/V row) */
    int src_len;
    int done;
    int row0;        /* first decoder row in the current layout */
    int unsat;       /* transformers' is_early_stop_heuristic_unsatisfied */
    float run_score[TD_MAX_BEAM];
    int32_t *run_tok;            /* (B, M) running sequences */
    int32_t *run_tok_next;       /* (B, M) scratch */
    fin_hyp fin[TD_MAX_BEAM];
    float greedy_sum;
    int greedy_len;
    /* attention capture, only when asked */
    float **hist;    /* (M) steps of (B, A) */
    int *origin;     /* (M, B): beam at step t-1 of running beam b at step t */
    int64_t a_size;  /* A = n_layers * n_heads * src_len */
} sent;

typedef struct cand {
    float val;
    int beam;
    int32_t tok;
    int64_t flat;
} cand;

static int errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

void td_decode_opts_default(const td_model *m, td_decode_opts *o)
{
    const td_config *c = td_model_config(m);
    memset(o, 0, sizeof *o);
    o->beam_size = c->num_beams;
    o->num_hypotheses = 1;
    o->length_penalty = c->length_penalty;
    int ml = c->max_length - 1;
    if (ml > c->max_position_embeddings)
        ml = c->max_position_embeddings;
    if (ml > 512)
        ml = 512;
    o->max_length = ml < 1 ? 1 : ml;
}

void td_result_free(td_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_hyps; i++)
        free(r->hyps[i].tokens);
    free(r->hyps);
    free(r->attention);
    free(r->attn_layer_ids);
    free(r->attn_head_ids);
    memset(r, 0, sizeof *r);
}

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

static void sents_free(sent *s, int n, int M)
{
    if (!s)
        return;
    for (int i = 0; i < n; i++) {
        free(s[i].run_tok);
        free(s[i].run_tok_next);
        for (int b = 0; b < TD_MAX_BEAM; b++)
            free(s[i].fin[b].tok);
        if (s[i].hist) {
            for (int t = 0; t < M; t++)
                free(s[i].hist[t]);
            free(s[i].hist);
        }
        free(s[i].origin);
    }
    free(s);
}

/* Resolved attention selection of one call. */
typedef struct attn_sel {
    int n_layers, n_heads;
    int layers[64];
    int *heads;
    uint64_t mask;
} attn_sel;

static int resolve_attention(const td_config *c, const td_decode_opts *o, attn_sel *sel,
                             char *err, size_t errlen)
{
    memset(sel, 0, sizeof *sel);
    if (!o->return_attention)
        return 0;
    int L = c->decoder_layers, H = c->decoder_attention_heads;
    if (L > 64)
        return errf(err, errlen, "attention capture supports at most 64 decoder layers");
    if (o->attn_layers && o->n_attn_layers > 0) {
        if (o->n_attn_layers > 64)
            return errf(err, errlen, "attention_layers: at most 64 entries");
        for (int i = 0; i < o->n_attn_layers; i++) {
            int l = o->attn_layers[i];
            if (l < -L || l >= L)
                return errf(err, errlen, "attention_layers: layer %d out of range [-%d, %d)",
                            l, L, L);
            sel->layers[sel->n_layers++] = l < 0 ? l + L : l;
        }
    } else {
        for (int l = 0; l < L; l++)
            sel->layers[sel->n_layers++] = l;
    }
    int nh = (o->attn_heads && o->n_attn_heads > 0) ? o->n_attn_heads : H;
    if (nh > 4096)
        return errf(err, errlen, "attention_heads: too many entries");
    sel->heads = malloc((size_t)nh * sizeof(int));
    if (!sel->heads)
        return errf(err, errlen, "out of memory");
    for (int i = 0; i < nh; i++) {
        int h = (o->attn_heads && o->n_attn_heads > 0) ? o->attn_heads[i] : i;
        if (h < 0 || h >= H) {
            free(sel->heads);
            sel->heads = NULL;
            return errf(err, errlen, "attention_heads: head %d out of range [0, %d)", h, H);
        }
        sel->heads[i] = h;
    }
    sel->n_heads = nh;
    for (int i = 0; i < sel->n_layers; i++)
        sel->mask |= UINT64_C(1) << sel->layers[i];
    return 0;
}

static int validate(const td_worker *w, const int32_t *const *src, const int *src_len, int n,
                    const td_decode_opts *o, char *err, size_t errlen)
{
    const td_config *c = &w->m->cfg;
    if (n < 1 || n > w->o.max_batch)
        return errf(err, errlen, "batch of %d sentences: this worker takes 1..%d", n,
                    w->o.max_batch);
    if (o->beam_size < 1 || o->beam_size > w->o.max_beam)
        return errf(err, errlen, "beam_size %d: must be in 1..%d", o->beam_size, w->o.max_beam);
    if (o->num_hypotheses < 1 || o->num_hypotheses > o->beam_size)
        return errf(err, errlen, "num_hypotheses %d: must be in 1..beam_size (%d)",
                    o->num_hypotheses, o->beam_size);
    if (o->max_length < 1 || o->max_length > w->o.max_length)
        return errf(err, errlen, "max_length %d: must be in 1..%d", o->max_length,
                    w->o.max_length);
    if (!isfinite(o->length_penalty))
        return errf(err, errlen, "length_penalty must be finite");
    for (int i = 0; i < n; i++) {
        if (!src[i] || src_len[i] < 1 || src_len[i] > w->o.max_src_len)
            return errf(err, errlen, "sentence %d: %d tokens, must be 1..%d", i,
                        src[i] ? src_len[i] : 0, w->o.max_src_len);
        for (int j = 0; j < src_len[i]; j++)
            if (src[i][j] < 0 || src[i][j] >= c->vocab_size)
                return errf(err, errlen, "sentence %d: token %d at position %d is outside the vocabulary (0..%d)",
                            i, src[i][j], j, c->vocab_size - 1);
    }
    return 0;
}

/* Copies the selected heads of this step's captured probabilities for the
 * rows of sentence s into its history. probs_host[l_sel] is (rows, H, s_max). */
static int record_attention(sent *s, int B, int t, float *const *probs_host,
                            const attn_sel *sel, int H, int s_max)
{
    float *blk = malloc((size_t)B * (size_t)s->a_size * sizeof(float));
    if (!blk)
        return -1;
    for (int b = 0; b < B; b++) {
        int r = s->row0 + b;
        for (int li = 0; li < sel->n_layers; li++)
            for (int hi = 0; hi < sel->n_heads; hi++) {
                const float *src = probs_host[li] + ((int64_t)r * H + sel->heads[hi]) * s_max;
                float *dst = blk + (int64_t)b * s->a_size +
                             ((int64_t)li * sel->n_heads + hi) * s->src_len;
                memcpy(dst, src, (size_t)s->src_len * sizeof(float));
            }
    }
    s->hist[t] = blk;
    return 0;
}

/* Greedy step of one sentence (transformers' _sample without sampling). */
static void greedy_update(sent *s, const float *val, const int32_t *idx, int t, int M,
                          int eos, const td_decode_opts *o, int32_t *gather, int *n_new)
{
    int r = s->row0;
    int32_t tok = idx[r];
    s->run_tok[t] = tok;
    s->greedy_sum += val[r];
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
 * one batch item. val/idx are (rows, 2B): the top-2B of logp + running
 * score of each row. M is our max_length. */
static void beam_update(sent *s, const float *val, const int32_t *idx, int t, int M, int B,
                        int64_t V, int eos, td_early_stopping es, const td_decode_opts *o,
                        int32_t *gather, int *n_new)
{
    const int K = 2 * B;
    cand all[TD_MAX_BEAM * 2 * TD_MAX_BEAM];
    int na = 0;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++) {
            int64_t r = s->row0 + b;
            cand *c = &all[na++];
            c->val = val[r * K + k];
            c->tok = idx[r * K + k];
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
static int make_result(const sent *s, int B, const td_decode_opts *o, const attn_sel *sel,
                       td_result *r)
{
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
        const float *blk = s->hist[t] + (int64_t)b * s->a_size;
        for (int lh = 0; lh < NL * NH; lh++)
            memcpy(r->attention + ((int64_t)lh * T + t) * S, blk + (int64_t)lh * S,
                   (size_t)S * sizeof(float));
        if (t > 0)
            b = s->origin[(int64_t)t * B + b];
    }
    return 0;
}

int td_translate_batch(td_worker *w, const int32_t *const *src, const int *src_len, int n,
                       const td_decode_opts *o, td_result *results, char *err, size_t errlen)
{
    const td_model *m = w->m;
    const td_config *c = &m->cfg;
    const td_backend_ops *ops = w->be->ops;
    if (validate(w, src, src_len, n, o, err, errlen) != 0)
        return -1;
    attn_sel sel;
    if (resolve_attention(c, o, &sel, err, errlen) != 0)
        return -1;

    const int B = o->beam_size, M = o->max_length, K = B == 1 ? 1 : 2 * B;
    const int H = c->decoder_attention_heads;
    const int64_t V = c->decoder_vocab_size;
    int rc = TD_EINVAL;
    int s_max = 0;
    for (int i = 0; i < n; i++)
        if (src_len[i] > s_max)
            s_max = src_len[i];

    sent *ss = calloc((size_t)n, sizeof(sent));
    int32_t *h_ids = malloc((size_t)n * s_max * sizeof(int32_t));
    int32_t *h_pos = malloc((size_t)n * s_max * sizeof(int32_t));
    int32_t *h_len = malloc((size_t)n * sizeof(int32_t));
    const int64_t rows_max = (int64_t)n * B;
    int32_t *r_ids = malloc((size_t)rows_max * sizeof(int32_t));
    int32_t *r_pos = malloc((size_t)rows_max * sizeof(int32_t));
    int32_t *r_kvi = malloc((size_t)rows_max * sizeof(int32_t));
    int32_t *r_kvl = malloc((size_t)rows_max * sizeof(int32_t));
    int32_t *gather = malloc((size_t)rows_max * sizeof(int32_t));
    float *r_bias = malloc((size_t)rows_max * sizeof(float));
    float *val = malloc((size_t)rows_max * K * 2 * sizeof(float)); /* values, then ids */
    int32_t *idx = NULL; /* points into val, set every step */
    float *probs_host[64] = {0};
    if (!ss || !h_ids || !h_pos || !h_len || !r_ids || !r_pos || !r_kvi || !r_kvl || !gather ||
        !r_bias || !val) {
        errf(err, errlen, "out of memory");
        goto out;
    }
    for (int li = 0; li < sel.n_layers; li++) {
        probs_host[li] = malloc((size_t)rows_max * H * s_max * sizeof(float));
        if (!probs_host[li]) {
            errf(err, errlen, "out of memory for attention capture");
            goto out;
        }
    }

    /* per-sentence state */
    for (int i = 0; i < n; i++) {
        sent *s = &ss[i];
        s->idx = i;
        s->src_len = src_len[i];
        s->row0 = i * B;
        s->unsat = 1;
        s->run_tok = calloc((size_t)B * M, sizeof(int32_t));
        s->run_tok_next = calloc((size_t)B * M, sizeof(int32_t));
        if (!s->run_tok || !s->run_tok_next)
            goto oom;
        for (int b = 0; b < B; b++) {
            s->run_score[b] = b == 0 ? 0.0f : NEG_BIG;
            s->fin[b].score = NEG_BIG;
            s->fin[b].tok = calloc((size_t)M, sizeof(int32_t));
            if (!s->fin[b].tok)
                goto oom;
        }
        if (o->return_attention) {
            s->a_size = (int64_t)sel.n_layers * sel.n_heads * s->src_len;
            s->hist = calloc((size_t)M, sizeof(float *));
            s->origin = calloc((size_t)M * B, sizeof(int));
            if (!s->hist || !s->origin)
                goto oom;
        }
    }

    /* encoder */
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < s_max; j++) {
            h_ids[(int64_t)i * s_max + j] = j < src_len[i] ? src[i][j] : c->pad_token_id;
            h_pos[(int64_t)i * s_max + j] = j;
        }
        h_len[i] = src_len[i];
    }
    ops->upload(w->be, w->e_ids, h_ids, (size_t)n * s_max * sizeof(int32_t));
    ops->upload(w->be, w->e_pos, h_pos, (size_t)n * s_max * sizeof(int32_t));
    ops->upload(w->be, w->e_len, h_len, (size_t)n * sizeof(int32_t));
    td_encode(w, n, s_max);

    /* decoder */
    int n_rows = n * B;
    const int eos = c->eos_token_id;
    for (int t = 0; t < M && n_rows > 0; t++) {
        for (int i = 0; i < n; i++) {
            const sent *s = &ss[i];
            if (s->done)
                continue;
            for (int b = 0; b < B; b++) {
                int r = s->row0 + b;
                r_ids[r] = t == 0 ? c->decoder_start_token_id
                                  : s->run_tok[(int64_t)b * M + t - 1];
                r_pos[r] = t;
                r_kvi[r] = s->idx;
                r_kvl[r] = s->src_len;
                r_bias[r] = s->run_score[b];
            }
        }
        size_t ib = (size_t)n_rows * sizeof(int32_t);
        ops->upload(w->be, w->d_ids, r_ids, ib);
        ops->upload(w->be, w->d_pos, r_pos, ib);
        ops->upload(w->be, w->d_kv_index, r_kvi, ib);
        ops->upload(w->be, w->d_kv_len, r_kvl, ib);
        if (B > 1)
            ops->upload(w->be, w->row_bias, r_bias, (size_t)n_rows * sizeof(float));
        td_decode_step(w, n_rows, t, s_max, sel.mask);
        int force = c->forced_eos_token_id >= 0 && t == M - 1;
        ops->logprobs_topk(w->be, w->logits, n_rows, V, w->d_suppress, c->n_suppress, force,
                           c->forced_eos_token_id, B > 1 ? w->row_bias : NULL, K, w->topk,
                           (int32_t *)(w->topk + (int64_t)n_rows * K));
        /* one transfer for values and ids (the only host wait of a step
         * without attention capture) */
        ops->download(w->be, val, w->topk, (size_t)n_rows * K * 2 * sizeof(float));
        idx = (int32_t *)(val + (int64_t)n_rows * K);
        for (int li = 0; li < sel.n_layers; li++)
            ops->download(w->be, probs_host[li], w->probs[sel.layers[li]],
                          (size_t)n_rows * H * s_max * sizeof(float));
        if (ops->sync(w->be, err, errlen) != 0) {
            rc = TD_EDEVICE;
            goto out;
        }

        int n_new = 0;
        for (int i = 0; i < n; i++) {
            sent *s = &ss[i];
            if (s->done)
                continue;
            if (o->return_attention && record_attention(s, B, t, probs_host, &sel, H, s_max))
                goto oom;
            int first = n_new;
            if (B == 1)
                greedy_update(s, val, idx, t, M, eos, o, gather, &n_new);
            else
                beam_update(s, val, idx, t, M, B, V, eos, c->early_stopping, o, gather, &n_new);
            if (!s->done)
                s->row0 = first;
        }
        int identity = n_new == n_rows;
        for (int r = 0; identity && r < n_new; r++)
            identity = gather[r] == r;
        n_rows = n_new;
        if (n_rows > 0 && !identity) {
            ops->upload(w->be, w->d_gather, gather, (size_t)n_rows * sizeof(int32_t));
            td_cache_reorder(w, n_rows, t + 1);
        }
    }

    for (int i = 0; i < n; i++)
        if (make_result(&ss[i], B, o, &sel, &results[i]) != 0) {
            for (int j = 0; j <= i; j++)
                td_result_free(&results[j]);
            goto oom;
        }
    rc = 0;
    goto out;
oom:
    errf(err, errlen, "out of memory");
out:
    sents_free(ss, n, M);
    free(h_ids);
    free(h_pos);
    free(h_len);
    free(r_ids);
    free(r_pos);
    free(r_kvi);
    free(r_kvl);
    free(gather);
    free(r_bias);
    free(val);
    for (int li = 0; li < 64; li++)
        free(probs_host[li]);
    free(sel.heads);
    return rc;
}
