/*
 * decode.c - greedy and beam search over a batch, step by step, exactly as
 * transformers' GenerationMixin does it (generation/utils.py: _sample for
 * greedy, the vectorised _beam_search with its helpers
 * _get_top_k_continuations, _get_running_beams_for_next_iteration,
 * _update_finished_beams and _check_early_stop_heuristic).
 *
 * A call runs in named stages (td_translate_batch at the end of the file):
 *   prepare  check the options, resolve the attention selection, lay out
 *            each sentence's state in the worker's host scratch
 *   encode   the encoder over the padded batch, cross-attention K/V once
 *   step     one decoder step for every live row: logits, log-softmax +
 *            top-k on the device, one download of values and ids
 *   advance  each sentence's greedy or beam bookkeeping on the host
 *   compact  rows re-laid out (beam reordering; finished sentences leave)
 *   finish   results built from the finished hypotheses
 *
 * Rows: every live sentence owns beam_size consecutive decoder rows. After
 * each step the rows are re-laid out with one gather of the self-attention
 * caches; cross-attention K/V stay where the encoder put them and rows find
 * their sentence through kv_index.
 *
 * Lengths: opts->max_length (M) counts generated tokens including </s>;
 * transformers' max_length is M + 1 because it counts the decoder start
 * token. Step t (0-based) predicts token t; the last allowed step is
 * t = M - 1, where ForcedEOSTokenLogitsProcessor forces </s>.
 *
 * Memory: everything a call needs on the host lives in the worker's
 * td_decode_scratch, sized at td_worker_init from its limits. A call
 * allocates its results, and when attention is asked one block for the
 * attention history (its size is the call's own: steps x beams x selected
 * layers x heads x source tokens); nothing is allocated per step.
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
    float *hist;     /* (M, B, A): step t's captured rows of every beam */
    int *origin;     /* (M, B): beam at step t-1 of running beam b at step t */
    int64_t a_size;  /* A = n_layers * n_heads * src_len */
} sent;

typedef struct cand {
    float val;
    int beam;
    int32_t tok;
    int64_t flat;
} cand;

/* Resolved attention selection of one call. */
typedef struct attn_sel {
    int n_layers, n_heads;
    int layers[TD_MAX_ATTN_SELECT];
    int heads[TD_MAX_ATTN_SELECT];
    uint64_t mask;
} attn_sel;

/* The worker's host memory for td_translate_batch (see the file comment). */
struct td_decode_scratch {
    sent *sents;          /* (max_batch) */
    int32_t *tok_pool;    /* (max_batch, 3, max_beam, max_length): running,
                             next running, finished sequences */
    int *origin_pool;     /* (max_batch, max_length, max_beam) */
    int32_t *h_ids, *h_pos; /* (max_batch, max_src_len) encoder input */
    int32_t *h_len;       /* (max_batch) */
    int32_t *r_ids, *r_pos, *r_kvi, *r_kvl, *gather; /* (rows) */
    float *r_bias;        /* (rows) */
    float *topk;          /* (rows, 2*max_beam) values, then as many ids */
    float *probs;         /* (decoder_layers, rows, heads, max_src_len) */
};

/* One call's state, passed between the stages. */
typedef struct decode_call {
    td_worker *w;
    td_decode_scratch *sc;
    const td_decode_opts *o;
    attn_sel sel;
    int n, B, M, K, s_max;
    int n_rows;           /* live decoder rows */
    float *hist;          /* the call's attention history block, or NULL */
} decode_call;

static int errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- limits and options ---------------------------------------------------- */

int td_generated_cap(const td_config *c)
{
    int cap = c->max_position_embeddings;
    if (cap > TD_MAX_GENERATED)
        cap = TD_MAX_GENERATED;
    return cap < 1 ? 1 : cap;
}

void td_decode_opts_default(const td_model *m, td_decode_opts *o)
{
    const td_config *c = td_model_config(m);
    memset(o, 0, sizeof *o);
    o->beam_size = c->num_beams;
    o->num_hypotheses = 1;
    o->length_penalty = c->length_penalty;
    int ml = c->max_length - 1; /* transformers counts the start token */
    if (ml > td_generated_cap(c))
        ml = td_generated_cap(c);
    o->max_length = ml < 1 ? 1 : ml;
}

/* Sets the failing option's name and message; returns -1. */
static int opt_fail(const char **param, const char *name, char *err, size_t errlen,
                    const char *fmt, ...)
{
    if (param)
        *param = name;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int td_decode_opts_check(const td_config *c, const td_decode_limits *lim,
                         const td_decode_opts *o, const char **param, char *err, size_t errlen)
{
    if (param)
        *param = NULL;
    if (o->beam_size < 1 || o->beam_size > lim->max_beam)
        return opt_fail(param, "beam_size", err, errlen, "beam_size %d: must be in 1..%d",
                        o->beam_size, lim->max_beam);
    if (o->num_hypotheses < 1 || o->num_hypotheses > o->beam_size)
        return opt_fail(param, "num_hypotheses", err, errlen,
                        "num_hypotheses %d: must be in 1..beam_size (%d)", o->num_hypotheses,
                        o->beam_size);
    if (o->max_length < 1 || o->max_length > lim->max_length)
        return opt_fail(param, "max_length", err, errlen, "max_length %d: must be in 1..%d",
                        o->max_length, lim->max_length);
    if (!isfinite(o->length_penalty) || fabsf(o->length_penalty) > TD_MAX_LENGTH_PENALTY)
        return opt_fail(param, "length_penalty", err, errlen,
                        "length_penalty must be in -%d..%d", TD_MAX_LENGTH_PENALTY,
                        TD_MAX_LENGTH_PENALTY);
    if (!o->return_attention)
        return 0;
    const int L = c->decoder_layers, H = c->decoder_attention_heads;
    if (L > 64)
        return opt_fail(param, "return_attention", err, errlen,
                        "attention capture supports at most 64 decoder layers");
    if (o->n_attn_layers < 0 || o->n_attn_layers > TD_MAX_ATTN_SELECT ||
        (o->n_attn_layers > 0 && !o->attn_layers))
        return opt_fail(param, "attention_layers", err, errlen,
                        "attention_layers: 1..%d entries", TD_MAX_ATTN_SELECT);
    for (int i = 0; o->attn_layers && i < o->n_attn_layers; i++)
        if (o->attn_layers[i] < -L || o->attn_layers[i] >= L)
            return opt_fail(param, "attention_layers", err, errlen,
                            "attention_layers: layer %d out of range [-%d, %d)",
                            o->attn_layers[i], L, L);
    if (o->n_attn_heads < 0 || o->n_attn_heads > TD_MAX_ATTN_SELECT ||
        (o->n_attn_heads > 0 && !o->attn_heads) ||
        (!(o->attn_heads && o->n_attn_heads > 0) && H > TD_MAX_ATTN_SELECT))
        return opt_fail(param, "attention_heads", err, errlen,
                        "attention_heads: 1..%d entries", TD_MAX_ATTN_SELECT);
    for (int i = 0; o->attn_heads && i < o->n_attn_heads; i++)
        if (o->attn_heads[i] < 0 || o->attn_heads[i] >= H)
            return opt_fail(param, "attention_heads", err, errlen,
                            "attention_heads: head %d out of range [0, %d)", o->attn_heads[i],
                            H);
    return 0;
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

/* ---- the worker's scratch -------------------------------------------------- */

/* calloc of count x size with overflow checks, adding to *bytes. */
static void *scalloc(int64_t count, size_t size, size_t *bytes, int *failed)
{
    if (*failed)
        return NULL;
    if (count < 1)
        count = 1;
    if ((uint64_t)count > SIZE_MAX / size) {
        *failed = 1;
        return NULL;
    }
    void *p = calloc((size_t)count, size);
    if (!p)
        *failed = 1;
    else
        *bytes += (size_t)count * size;
    return p;
}

int td_decode_scratch_init(td_worker *w, char *err, size_t errlen)
{
    const td_config *c = &w->m->cfg;
    const int64_t NB = w->o.max_batch, MB = w->o.max_beam, ML = w->o.max_length;
    const int64_t S = w->o.max_src_len, N = NB * MB, K = 2 * MB;
    size_t bytes = 0;
    int failed = 0;
    td_decode_scratch *sc = scalloc(1, sizeof *sc, &bytes, &failed);
    if (!sc)
        return errf(err, errlen, "worker: out of host memory for its decoding scratch");
    w->scratch = sc;
    sc->sents = scalloc(NB, sizeof(sent), &bytes, &failed);
    sc->tok_pool = scalloc(NB * 3 * MB * ML, sizeof(int32_t), &bytes, &failed);
    sc->origin_pool = scalloc(NB * ML * MB, sizeof(int), &bytes, &failed);
    sc->h_ids = scalloc(NB * S, sizeof(int32_t), &bytes, &failed);
    sc->h_pos = scalloc(NB * S, sizeof(int32_t), &bytes, &failed);
    sc->h_len = scalloc(NB, sizeof(int32_t), &bytes, &failed);
    sc->r_ids = scalloc(N, sizeof(int32_t), &bytes, &failed);
    sc->r_pos = scalloc(N, sizeof(int32_t), &bytes, &failed);
    sc->r_kvi = scalloc(N, sizeof(int32_t), &bytes, &failed);
    sc->r_kvl = scalloc(N, sizeof(int32_t), &bytes, &failed);
    sc->gather = scalloc(N, sizeof(int32_t), &bytes, &failed);
    sc->r_bias = scalloc(N, sizeof(float), &bytes, &failed);
    sc->topk = scalloc(N * K * 2, sizeof(float), &bytes, &failed);
    sc->probs = scalloc((int64_t)c->decoder_layers * N * c->decoder_attention_heads * S,
                        sizeof(float), &bytes, &failed);
    if (failed)
        return errf(err, errlen, "worker: out of host memory for its decoding scratch (%zu "
                    "bytes allocated before the failure)", bytes);
    w->scratch_bytes = bytes;
    return 0;
}

void td_decode_scratch_free(td_worker *w)
{
    td_decode_scratch *sc = w->scratch;
    if (!sc)
        return;
    free(sc->sents);
    free(sc->tok_pool);
    free(sc->origin_pool);
    free(sc->h_ids);
    free(sc->h_pos);
    free(sc->h_len);
    free(sc->r_ids);
    free(sc->r_pos);
    free(sc->r_kvi);
    free(sc->r_kvl);
    free(sc->gather);
    free(sc->r_bias);
    free(sc->topk);
    free(sc->probs);
    free(sc);
    w->scratch = NULL;
}

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
static void resolve_attention(const td_config *c, const td_decode_opts *o, attn_sel *sel)
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
 * rows of sentence s into its history. probs is (L_sel, rows, H, s_max). */
static void record_attention(sent *s, int B, int t, const float *probs, int64_t layer_stride,
                             const attn_sel *sel, int H, int s_max)
{
    float *blk = s->hist + (int64_t)t * B * s->a_size;
    for (int b = 0; b < B; b++) {
        int r = s->row0 + b;
        for (int li = 0; li < sel->n_layers; li++)
            for (int hi = 0; hi < sel->n_heads; hi++) {
                const float *src = probs + li * layer_stride +
                                   ((int64_t)r * H + sel->heads[hi]) * s_max;
                float *dst = blk + (int64_t)b * s->a_size +
                             ((int64_t)li * sel->n_heads + hi) * s->src_len;
                memcpy(dst, src, (size_t)s->src_len * sizeof(float));
            }
    }
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
        const float *blk = s->hist + ((int64_t)t * B + b) * s->a_size;
        for (int lh = 0; lh < NL * NH; lh++)
            memcpy(r->attention + ((int64_t)lh * T + t) * S, blk + (int64_t)lh * S,
                   (size_t)S * sizeof(float));
        if (t > 0)
            b = s->origin[(int64_t)t * B + b];
    }
    return 0;
}

/* ---- the stages of a call -------------------------------------------------- */

/* prepare: checks the call against the worker's limits and lays out every
 * sentence's state in the scratch; the attention history is the one
 * allocation (when asked). */
static int stage_prepare(decode_call *dc, const int32_t *const *src, const int *src_len,
                         char *err, size_t errlen)
{
    td_worker *w = dc->w;
    const td_config *c = &w->m->cfg;
    const td_decode_opts *o = dc->o;
    const int n = dc->n;
    if (n < 1 || n > w->o.max_batch)
        return errf(err, errlen, "batch of %d sentences: this worker takes 1..%d", n,
                    w->o.max_batch);
    td_decode_limits lim = {.max_beam = w->o.max_beam, .max_length = w->o.max_length};
    if (td_decode_opts_check(c, &lim, o, NULL, err, errlen) != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (!src[i] || src_len[i] < 1 || src_len[i] > w->o.max_src_len)
            return errf(err, errlen, "sentence %d: %d tokens, must be 1..%d", i,
                        src[i] ? src_len[i] : 0, w->o.max_src_len);
        for (int j = 0; j < src_len[i]; j++)
            if (src[i][j] < 0 || src[i][j] >= c->vocab_size)
                return errf(err, errlen, "sentence %d: token %d at position %d is outside the vocabulary (0..%d)",
                            i, src[i][j], j, c->vocab_size - 1);
    }
    resolve_attention(c, o, &dc->sel);

    const int B = o->beam_size, M = o->max_length;
    dc->B = B;
    dc->M = M;
    dc->K = B == 1 ? 1 : 2 * B;
    dc->s_max = 0;
    for (int i = 0; i < n; i++)
        if (src_len[i] > dc->s_max)
            dc->s_max = src_len[i];
    dc->n_rows = n * B;
    dc->hist = NULL;
    if (o->return_attention) {
        int64_t total = 0;
        for (int i = 0; i < n; i++)
            total += (int64_t)M * B * dc->sel.n_layers * dc->sel.n_heads * src_len[i];
        if ((uint64_t)total > SIZE_MAX / sizeof(float) ||
            !(dc->hist = malloc((size_t)(total ? total : 1) * sizeof(float))))
            return errf(err, errlen, "out of memory for the attention of %d sentences", n);
    }

    td_decode_scratch *sc = dc->sc;
    const int64_t MB = w->o.max_beam, ML = w->o.max_length;
    float *hist = dc->hist;
    for (int i = 0; i < n; i++) {
        sent *s = &sc->sents[i];
        memset(s, 0, sizeof *s);
        s->idx = i;
        s->src_len = src_len[i];
        s->row0 = i * B;
        s->unsat = 1;
        int32_t *toks = sc->tok_pool + (int64_t)i * 3 * MB * ML;
        s->run_tok = toks;
        s->run_tok_next = toks + MB * ML;
        for (int b = 0; b < B; b++) {
            s->run_score[b] = b == 0 ? 0.0f : NEG_BIG;
            s->fin[b].score = NEG_BIG;
            s->fin[b].tok = toks + (2 * MB + b) * ML;
        }
        if (o->return_attention) {
            s->a_size = (int64_t)dc->sel.n_layers * dc->sel.n_heads * s->src_len;
            s->hist = hist;
            hist += (int64_t)M * B * s->a_size;
            s->origin = sc->origin_pool + (int64_t)i * ML * MB;
        }
    }
    return 0;
}

/* encode: the padded sources through the encoder; cross K/V once. */
static void stage_encode(decode_call *dc, const int32_t *const *src, const int *src_len)
{
    td_worker *w = dc->w;
    td_decode_scratch *sc = dc->sc;
    const td_backend_ops *ops = w->be->ops;
    const int n = dc->n, s_max = dc->s_max;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < s_max; j++) {
            sc->h_ids[(int64_t)i * s_max + j] = j < src_len[i] ? src[i][j]
                                                               : w->m->cfg.pad_token_id;
            sc->h_pos[(int64_t)i * s_max + j] = j;
        }
        sc->h_len[i] = src_len[i];
    }
    ops->upload(w->be, w->e_ids, sc->h_ids, (size_t)n * s_max * sizeof(int32_t));
    ops->upload(w->be, w->e_pos, sc->h_pos, (size_t)n * s_max * sizeof(int32_t));
    ops->upload(w->be, w->e_len, sc->h_len, (size_t)n * sizeof(int32_t));
    td_encode(w, n, s_max);
}

/* step t: the live rows' inputs up, one decoder step, log-softmax + top-k,
 * and one download of values and ids (plus the captured attention when
 * asked). Returns 0, or TD_EDEVICE with the backend's message. */
static int stage_step(decode_call *dc, int t, char *err, size_t errlen)
{
    td_worker *w = dc->w;
    td_decode_scratch *sc = dc->sc;
    const td_config *c = &w->m->cfg;
    const td_backend_ops *ops = w->be->ops;
    const int B = dc->B, M = dc->M, K = dc->K, n_rows = dc->n_rows;
    const int H = c->decoder_attention_heads;
    for (int i = 0; i < dc->n; i++) {
        const sent *s = &sc->sents[i];
        if (s->done)
            continue;
        for (int b = 0; b < B; b++) {
            int r = s->row0 + b;
            sc->r_ids[r] = t == 0 ? c->decoder_start_token_id
                                  : s->run_tok[(int64_t)b * M + t - 1];
            sc->r_pos[r] = t;
            sc->r_kvi[r] = s->idx;
            sc->r_kvl[r] = s->src_len;
            sc->r_bias[r] = s->run_score[b];
        }
    }
    size_t ib = (size_t)n_rows * sizeof(int32_t);
    ops->upload(w->be, w->d_ids, sc->r_ids, ib);
    ops->upload(w->be, w->d_pos, sc->r_pos, ib);
    ops->upload(w->be, w->d_kv_index, sc->r_kvi, ib);
    ops->upload(w->be, w->d_kv_len, sc->r_kvl, ib);
    if (B > 1)
        ops->upload(w->be, w->row_bias, sc->r_bias, (size_t)n_rows * sizeof(float));
    td_decode_step(w, n_rows, t, dc->s_max, dc->sel.mask);
    int force = c->forced_eos_token_id >= 0 && t == M - 1;
    ops->logprobs_topk(w->be, w->logits, n_rows, c->decoder_vocab_size, w->d_suppress,
                       c->n_suppress, force, NULL, c->forced_eos_token_id,
                       B > 1 ? w->row_bias : NULL, K, w->topk,
                       (int32_t *)(w->topk + (int64_t)n_rows * K));
    /* one transfer for values and ids (the only host wait of a step
     * without attention capture) */
    ops->download(w->be, sc->topk, w->topk, (size_t)n_rows * K * 2 * sizeof(float));
    const int64_t layer_stride = (int64_t)n_rows * H * dc->s_max;
    for (int li = 0; li < dc->sel.n_layers; li++)
        ops->download(w->be, sc->probs + li * layer_stride, w->probs[dc->sel.layers[li]],
                      (size_t)layer_stride * sizeof(float));
    if (ops->sync(w->be, err, errlen) != 0)
        return TD_EDEVICE;
    return 0;
}

/* advance step t: each live sentence's greedy or beam bookkeeping; the
 * rows that go on are listed in scratch gather (new row -> old row).
 * Returns the number of rows for step t + 1. */
static int stage_advance(decode_call *dc, int t)
{
    td_worker *w = dc->w;
    td_decode_scratch *sc = dc->sc;
    const td_config *c = &w->m->cfg;
    const int B = dc->B, M = dc->M, K = dc->K;
    const float *val = sc->topk;
    const int32_t *idx = (const int32_t *)(sc->topk + (int64_t)dc->n_rows * K);
    const int64_t layer_stride = (int64_t)dc->n_rows * c->decoder_attention_heads * dc->s_max;
    int n_new = 0;
    for (int i = 0; i < dc->n; i++) {
        sent *s = &sc->sents[i];
        if (s->done)
            continue;
        if (dc->o->return_attention)
            record_attention(s, B, t, sc->probs, layer_stride, &dc->sel,
                             c->decoder_attention_heads, dc->s_max);
        int first = n_new;
        if (B == 1)
            greedy_update(s, val, idx, t, M, c->eos_token_id, dc->o, sc->gather, &n_new);
        else
            beam_update(s, val, idx, t, M, B, c->decoder_vocab_size, c->eos_token_id,
                        c->early_stopping, dc->o, sc->gather, &n_new);
        if (!s->done)
            s->row0 = first;
    }
    return n_new;
}

/* compact after step t: the self-attention caches follow the rows' new
 * layout (skipped when nothing moved). */
static void stage_compact(decode_call *dc, int t, int n_new)
{
    td_worker *w = dc->w;
    const int32_t *gather = dc->sc->gather;
    int identity = n_new == dc->n_rows;
    for (int r = 0; identity && r < n_new; r++)
        identity = gather[r] == r;
    dc->n_rows = n_new;
    if (n_new > 0 && !identity) {
        w->be->ops->upload(w->be, w->d_gather, gather, (size_t)n_new * sizeof(int32_t));
        td_cache_reorder(w, n_new, t + 1);
    }
}

/* finish: the results, in the caller's order; all or none. */
static int stage_finish(decode_call *dc, td_result *results, char *err, size_t errlen)
{
    for (int i = 0; i < dc->n; i++)
        if (make_result(&dc->sc->sents[i], dc->B, dc->o, &dc->sel, &results[i]) != 0) {
            for (int j = 0; j <= i; j++)
                td_result_free(&results[j]);
            return errf(err, errlen, "out of memory");
        }
    return 0;
}

int td_translate_batch(td_worker *w, const int32_t *const *src, const int *src_len, int n,
                       const td_decode_opts *o, td_result *results, char *err, size_t errlen)
{
    decode_call dc = {.w = w, .sc = w->scratch, .o = o, .n = n};
    if (stage_prepare(&dc, src, src_len, err, errlen) != 0)
        return TD_EINVAL;
    stage_encode(&dc, src, src_len);
    int rc = 0;
    for (int t = 0; t < dc.M && dc.n_rows > 0; t++) {
        if ((rc = stage_step(&dc, t, err, errlen)) != 0)
            break;
        stage_compact(&dc, t, stage_advance(&dc, t));
    }
    if (rc == 0 && stage_finish(&dc, results, err, errlen) != 0)
        rc = TD_EINVAL;
    free(dc.hist);
    return rc;
}
