/*
 * decode.c - greedy and beam search, step by step, exactly as transformers'
 * GenerationMixin does it (generation/utils.py: _sample for greedy, the
 * vectorised _beam_search with its helpers _get_top_k_continuations,
 * _get_running_beams_for_next_iteration, _update_finished_beams and
 * _check_early_stop_heuristic), over a running decode that sentences join
 * and leave between steps (in-flight batching).
 *
 * The running decode of a worker (td_run_* in translator.h) has three
 * entry points, in named stages:
 *   td_run_add   admit: check, lay out each sentence's state in a free slot,
 *                encode the new sentences as one batch and place their
 *                cross-attention K/V in their slots
 *   td_run_step  step: one decoder step for every live row, or for the
 *                shortest sentences' rows only (td_run_step_shortest)
 *                (logits, log-softmax + top-k and the search step, the
 *                backend's beam_step op, on the device: step_device; one
 *                download of each new beam's parent and token);
 *                advance: the rows that go on listed from them, ended
 *                sentences' search state read back and their results
 *                built (finish);
 *                compact: rows re-laid out (beam reordering; finished and
 *                cancelled sentences leave; sentences by source length,
 *                shortest first, so that the shortest are a prefix)
 *   td_run_take  hand a finished sentence's result out
 * td_translate_batch is a loop over them.
 *
 * Slots and rows: a sentence owns a slot (its cross-attention K/V, at a
 * stride of the worker's max_src_len, its search state on the device,
 * backend/beam_rules.h, and its host state) from td_run_add to
 * td_run_take, and beam_size consecutive decoder rows while it runs. Rows
 * keep their own positions: a row's new self-attention K/V is scattered to
 * its own position of the cache, its query attends to its own length, its
 * rotary and relative positions are its own. So a sentence computes the same
 * whatever runs next to it and whenever it joined.
 *
 * Lengths: a sentence's max_length (M) counts generated tokens including
 * </s>; transformers' max_length is M + 1 because it counts the decoder
 * start token. Its step t (0-based) predicts token t; the last allowed step
 * is t = M - 1, where ForcedEOSTokenLogitsProcessor forces </s> (per row).
 *
 * Memory: everything the running decode needs lives in the worker's
 * td_decode_scratch, sized at td_worker_init from its limits. A sentence
 * allocates its result, and when it asks for attention its history block
 * (steps x beams x selected layers x heads x source tokens); nothing is
 * allocated per step.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "search.h"

#define STACK_SENTS 64    /* per-sentence arrays of a call on the stack up to this */

/* Per-row int32 inputs of a step, one block uploaded at once: field f of
 * row r is at [f * n_rows + r]. */
enum {
    ROW_IDS = 0,  /* last token (the start token at t = 0) */
    ROW_POS,      /* position of the row's new token */
    ROW_SLOT,     /* slot of the row's sentence (cross K/V) */
    ROW_SRC_LEN,  /* its source length */
    ROW_SELF_LEN, /* self-attention keys visible: pos + 1 */
    ROW_DST,      /* cache row of the new K/V: row * max_length + pos */
    ROW_FORCE,    /* the token forced at this step (a target prefix's, or
                     </s> at the last step), -1: none */
    ROW_SCORE,    /* its running score in the slots' search state (beam_f) */
    ROW_EMB_POS,  /* the position table's row its token reads (td_pos_row) */
    ROW_FIELDS
};
_Static_assert(ROW_FIELDS == TD_STEP_ROW_FIELDS, "the worker's d_rows holds ROW_FIELDS per row");
_Static_assert(TD_MAX_BEAM <= TD_BEAM_MAX, "beam_step takes every beam size");
_Static_assert((int)TD_EARLY_STOP_HEURISTIC == (int)TD_BEAM_ES_HEURISTIC &&
                   (int)TD_EARLY_STOP_TRUE == (int)TD_BEAM_ES_TRUE &&
                   (int)TD_EARLY_STOP_NEVER == (int)TD_BEAM_ES_NEVER,
               "beam_step's early stopping is the config's");

/* The worker's running decode and its host memory (see the file comment). */
struct td_decode_scratch {
    sent *sents;          /* (max_batch) slots */
    int *order;           /* (max_batch) live slots in row order */
    int n_order;
    int *done_q;          /* (max_batch) finished slots, oldest first */
    int done_head, n_done;
    int n_rows;           /* live decoder rows */
    td_seq next_seq;
    float *st_f;          /* (beam_f of a slot) a new slot's search state, */
    int32_t *st_i;        /* (beam_i of a slot) then a finished one's read back */
    int *origin_pool;     /* (max_batch, max_length, max_beam) */
    int32_t *h_ids, *h_pos, *h_dst; /* (max_batch * max_src_len) encoder input */
    int *enc_order;       /* (max_batch) sentences of an admission by length */
    int *enc_len;         /* (max_batch) their lengths, in that order */
    int32_t *rows;        /* (ROW_FIELDS, rows) step inputs */
    int32_t *gather;      /* (2, rows) new row -> old row, then each new row's
                             written cache length (floats) */
    int32_t *row_len;     /* (rows) the latter while a step's rows are listed */
    int32_t *beam_sent;   /* (max_batch, TD_BEAM_FIELDS) beam_step's sentences */
    int32_t *beam_out;    /* (3, rows) beam_step's back-pointers, tokens, ends */
    float *probs;         /* (decoder_layers, rows, heads, max_src_len) */
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
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
    const int64_t S = w->o.max_src_len, N = NB * MB;
    size_t bytes = 0;
    int failed = 0;
    td_decode_scratch *sc = scalloc(1, sizeof *sc, &bytes, &failed);
    if (!sc)
        return errf(err, errlen, "worker: out of host memory for its decoding scratch");
    w->scratch = sc;
    sc->sents = scalloc(NB, sizeof(sent), &bytes, &failed);
    sc->order = scalloc(NB, sizeof(int), &bytes, &failed);
    sc->done_q = scalloc(NB, sizeof(int), &bytes, &failed);
    sc->st_f = scalloc(td_beam_f_stride((int)MB), sizeof(float), &bytes, &failed);
    sc->st_i = scalloc(td_beam_i_stride((int)MB, (int)ML), sizeof(int32_t), &bytes, &failed);
    sc->origin_pool = scalloc(NB * ML * MB, sizeof(int), &bytes, &failed);
    sc->h_ids = scalloc(NB * S, sizeof(int32_t), &bytes, &failed);
    sc->h_pos = scalloc(NB * S, sizeof(int32_t), &bytes, &failed);
    sc->h_dst = scalloc(NB * S, sizeof(int32_t), &bytes, &failed);
    sc->enc_order = scalloc(NB, sizeof(int), &bytes, &failed);
    sc->enc_len = scalloc(NB, sizeof(int), &bytes, &failed);
    sc->rows = scalloc(N * ROW_FIELDS, sizeof(int32_t), &bytes, &failed);
    sc->gather = scalloc(2 * N, sizeof(int32_t), &bytes, &failed);
    sc->row_len = scalloc(N, sizeof(int32_t), &bytes, &failed);
    sc->beam_sent = scalloc(NB * TD_BEAM_FIELDS, sizeof(int32_t), &bytes, &failed);
    sc->beam_out = scalloc(3 * N, sizeof(int32_t), &bytes, &failed);
    sc->probs = scalloc((int64_t)c->decoder_layers * N * c->decoder_attention_heads * S,
                        sizeof(float), &bytes, &failed);
    if (failed)
        return errf(err, errlen, "worker: out of host memory for its decoding scratch (%zu "
                    "bytes allocated before the failure)", bytes);
    sc->next_seq = 1;
    w->scratch_bytes = bytes;
    return 0;
}

/* Frees what a slot holds and marks it free. */
static void slot_clear(sent *s)
{
    free(s->hist);
    td_result_free(&s->res);
    memset(s, 0, sizeof *s);
}

void td_decode_scratch_free(td_worker *w)
{
    td_decode_scratch *sc = w->scratch;
    if (!sc)
        return;
    for (int i = 0; sc->sents && i < w->o.max_batch; i++)
        slot_clear(&sc->sents[i]);
    free(sc->sents);
    free(sc->order);
    free(sc->done_q);
    free(sc->st_f);
    free(sc->st_i);
    free(sc->origin_pool);
    free(sc->h_ids);
    free(sc->h_pos);
    free(sc->h_dst);
    free(sc->enc_order);
    free(sc->enc_len);
    free(sc->rows);
    free(sc->gather);
    free(sc->row_len);
    free(sc->beam_sent);
    free(sc->beam_out);
    free(sc->probs);
    free(sc);
    w->scratch = NULL;
}

/* ---- the running decode ---------------------------------------------------- */

int td_run_live(const td_worker *w)
{
    return w->scratch->n_order + w->scratch->n_done;
}

int td_run_rows(const td_worker *w)
{
    return w->scratch->n_rows;
}

/* (by the worker's maxima: its buffers grow when sentences need them) */
void td_run_free(const td_worker *w, int *slots, int *rows)
{
    const td_decode_scratch *sc = w->scratch;
    *slots = w->cap_max.slots - sc->n_order - sc->n_done;
    *rows = w->cap_max.rows - sc->n_rows;
}

int td_run_room(const td_worker *w, int beam_size)
{
    int free_slots, free_rows;
    td_run_free(w, &free_slots, &free_rows);
    if (beam_size < 1)
        beam_size = 1;
    int by_rows = free_rows / beam_size;
    return free_slots < by_rows ? free_slots : by_rows;
}

/* admit, check: the sentences, their options and the room for them. */
static int admit_check(const td_worker *w, const int32_t *const *src, const int *src_len,
                       int n, const td_decode_opts *const *opts, char *err, size_t errlen)
{
    const td_config *c = &w->m->cfg;
    const td_decode_scratch *sc = w->scratch;
    if (n < 1 || n > w->o.max_batch)
        return errf(err, errlen, "batch of %d sentences: this worker takes 1..%d", n,
                    w->o.max_batch);
    td_decode_limits lim = {.max_beam = w->o.max_beam, .max_length = w->o.max_length};
    const td_wcap cap = w->cap_max;
    int rows = 0;
    for (int i = 0; i < n; i++) {
        if (td_decode_opts_check(c, &lim, opts[i], NULL, err, errlen) != 0)
            return -1;
        rows += opts[i]->beam_size;
        if (!src[i] || src_len[i] < 1 || src_len[i] > w->o.max_src_len)
            return errf(err, errlen, "sentence %d: %d tokens, must be 1..%d", i,
                        src[i] ? src_len[i] : 0, w->o.max_src_len);
        for (int j = 0; j < src_len[i]; j++)
            if (src[i][j] < 0 || src[i][j] >= c->vocab_size)
                return errf(err, errlen, "sentence %d: token %d at position %d is outside the vocabulary (0..%d)",
                            i, src[i][j], j, c->vocab_size - 1);
    }
    int free_slots = cap.slots - sc->n_order - sc->n_done;
    int free_rows = cap.rows - sc->n_rows;
    if (n > free_slots || rows > free_rows)
        return errf(err, errlen, "no room: %d sentences of %d rows asked, %d slots and %d rows "
                    "free", n, rows, free_slots, free_rows);
    return 0;
}

/* admit, grow: the worker's buffers hold the running sentences and the n
 * new ones: their slots, rows and sources (td_worker_grow, the running
 * decode carried over). The caches' length grows as sentences get longer
 * (step_grow). Slots are taken lowest first, so the occupied ones stay
 * below their count. */
static int admit_grow(td_worker *w, const int *src_len, int n,
                      const td_decode_opts *const *opts, char *err, size_t errlen)
{
    const td_decode_scratch *sc = w->scratch;
    td_wcap need = {.slots = sc->n_order + sc->n_done + n, .rows = sc->n_rows};
    for (int i = 0; i < n; i++) {
        need.rows += opts[i]->beam_size;
        need.src = src_len[i] > need.src ? src_len[i] : need.src;
    }
    return td_worker_grow(w, need, sc->n_rows, sc->n_order + sc->n_done > 0, err, errlen);
}

/* step, grow: the self-attention caches hold the position every live
 * sentence writes next (its t), grown before the step that needs it: a
 * doubling, a few times at most in a decode, never in a step that does
 * not cross a capacity. */
static int step_grow(td_worker *w, char *err, size_t errlen)
{
    const td_decode_scratch *sc = w->scratch;
    td_wcap need = {0};
    for (int k = 0; k < sc->n_order; k++)
        if (sc->sents[sc->order[k]].t + 1 > need.len)
            need.len = sc->sents[sc->order[k]].t + 1;
    return need.len > w->cap.len
               ? td_worker_grow(w, need, sc->n_rows, 1, err, errlen)
               : 0;
}

/* admit, lay out: sentence i of the call takes a free slot; its rows are
 * appended to the live rows. */
static int admit_layout(td_worker *w, const int *src_len, int n,
                        const td_decode_opts *const *opts, int *slots, td_seq *seq,
                        char *err, size_t errlen)
{
    td_decode_scratch *sc = w->scratch;
    const td_config *c = &w->m->cfg;
    const int64_t MB = w->o.max_beam, ML = w->o.max_length;
    int next_free = 0;
    for (int i = 0; i < n; i++) {
        while (sc->sents[next_free].state != SENT_FREE)
            next_free++;
        slots[i] = next_free++;
    }
    for (int i = 0; i < n; i++) {
        sent *s = &sc->sents[slots[i]];
        const td_decode_opts *o = opts[i];
        memset(s, 0, sizeof *s);
        s->o = *o;
        s->o.attn_layers = s->o.attn_heads = NULL; /* resolved into sel */
        if (o->n_prefix > 0)
            memcpy(s->prefix, o->prefix, (size_t)o->n_prefix * sizeof(int32_t));
        s->o.prefix = NULL; /* copied into s->prefix (a slot may move) */
        td_search_select(c, o, &s->sel);
        s->B = o->beam_size;
        s->M = o->max_length;
        s->src_len = src_len[i];
        if (o->return_attention) {
            s->a_size = (int64_t)s->sel.n_layers * s->sel.n_heads * s->src_len;
            int64_t cells = (int64_t)s->M * s->B * s->a_size;
            s->hist = (uint64_t)cells <= SIZE_MAX / sizeof(float)
                          ? malloc((size_t)(cells ? cells : 1) * sizeof(float))
                          : NULL;
            s->origin = sc->origin_pool + (int64_t)slots[i] * ML * MB;
            if (!s->hist) {
                for (int k = 0; k <= i; k++)
                    slot_clear(&sc->sents[slots[k]]);
                return errf(err, errlen, "out of memory for the attention of sentence %d", i);
            }
        }
    }
    /* each new slot's search state on the device (beam_rules.h) */
    const td_backend_ops *ops = w->be->ops;
    td_beam_init(sc->st_f, sc->st_i, (int)MB);
    const int64_t fs = td_beam_f_stride((int)MB), is = td_beam_i_stride((int)MB, (int)ML);
    for (int i = 0; i < n; i++) {
        ops->upload(w->be, w->beam_f + slots[i] * fs, sc->st_f, (size_t)fs * sizeof(float));
        ops->upload(w->be, w->beam_i + slots[i] * is, sc->st_i,
                    (size_t)(4 * MB + 1) * sizeof(int32_t));
    }
    for (int i = 0; i < n; i++) {
        sent *s = &sc->sents[slots[i]];
        s->state = SENT_LIVE;
        s->seq = sc->next_seq++;
        s->row0 = sc->n_rows;
        sc->n_rows += s->B;
        sc->order[sc->n_order++] = slots[i];
        if (seq)
            seq[i] = s->seq;
    }
    return 0;
}

/* admit, encode: the new sentences through the encoder as one batch of
 * packed rows (no padding: each sentence's rows follow the previous one's,
 * shorter sentences first so that equal lengths share an attention call);
 * each layer's cross K/V computed into spare encoder buffers and scattered
 * into the sentences' slots (stride max_src_len). */
static void admit_encode(td_worker *w, const int32_t *const *src, const int *src_len, int n,
                         const int *slots)
{
    const td_model *m = w->m;
    const td_config *c = &m->cfg;
    td_decode_scratch *sc = w->scratch;
    const td_backend_ops *ops = w->be->ops;
    const int64_t S = w->cap.src, d = c->d_model;
    int *ord = sc->enc_order, *len = sc->enc_len;
    for (int i = 0; i < n; i++) { /* stable insertion sort by length */
        int k = i;
        while (k > 0 && src_len[ord[k - 1]] > src_len[i]) {
            ord[k] = ord[k - 1];
            k--;
        }
        ord[k] = i;
    }
    int64_t rows = 0;
    for (int k = 0; k < n; k++) {
        const int i = ord[k];
        len[k] = src_len[i];
        /* position_pad: the encoder's positions count the tokens that are
         * not pad (transformers' cumsum over the token mask) */
        for (int j = 0, t = 0; j < src_len[i]; j++, rows++) {
            sc->h_ids[rows] = src[i][j];
            sc->h_pos[rows] = td_pos_row(c, t, src[i][j]);
            t += !(c->position_pad && src[i][j] == c->position_offset - 1);
            sc->h_dst[rows] = (int32_t)(slots[i] * S + j);
        }
    }
    const size_t ne = (size_t)rows * sizeof(int32_t);
    ops->upload(w->be, w->e_ids, sc->h_ids, ne);
    ops->upload(w->be, w->e_pos, sc->h_pos, ne);
    ops->upload(w->be, w->e_dst, sc->h_dst, ne);
    td_encode(w, n, len);
    for (int l = 0; l < c->decoder_layers; l++) {
        const td_attn_w *a = &m->dec[l].cross_attn;
        ops->linear(w->be, w->ek, d, w->ex, d, rows, &a->k, &a->k_b);
        ops->linear(w->be, w->ev, d, w->ex, d, rows, &a->v, &a->v_b);
        ops->scatter_rows(w->be, w->cross_k[l], d, w->ek, d, w->e_dst, rows, d);
        ops->scatter_rows(w->be, w->cross_v[l], d, w->ev, d, w->e_dst, rows, d);
    }
}

int td_run_add(td_worker *w, const int32_t *const *src, const int *src_len, int n,
               const td_decode_opts *const *opts, td_seq *seq, char *err, size_t errlen)
{
    if (admit_check(w, src, src_len, n, opts, err, errlen) != 0)
        return TD_EINVAL;
    int grc = admit_grow(w, src_len, n, opts, err, errlen);
    if (grc != 0)
        return grc;
    int slots[STACK_SENTS];
    int *sl = n <= STACK_SENTS ? slots : malloc((size_t)n * sizeof(int));
    if (!sl)
        return errf(err, errlen, "out of memory");
    int rc = admit_layout(w, src_len, n, opts, sl, seq, err, errlen) != 0 ? TD_EINVAL : 0;
    if (rc == 0) {
        admit_encode(w, src, src_len, n, sl);
        if (w->be->ops->sync(w->be, err, errlen) != 0)
            rc = TD_EDEVICE;
    }
    if (sl != slots)
        free(sl);
    return rc;
}

int td_run_urge(td_worker *w, td_seq seq)
{
    td_decode_scratch *sc = w->scratch;
    for (int i = 0; i < w->o.max_batch; i++) {
        sent *s = &sc->sents[i];
        if (s->state != SENT_FREE && s->seq == seq) {
            s->urgent = 1;
            return 0;
        }
    }
    return -1;
}

int td_run_urgent_rows(const td_worker *w)
{
    const td_decode_scratch *sc = w->scratch;
    int rows = 0;
    for (int k = 0; k < sc->n_order && sc->sents[sc->order[k]].urgent; k++)
        rows += sc->sents[sc->order[k]].B;
    return rows;
}

int td_run_cancel(td_worker *w, td_seq seq)
{
    td_decode_scratch *sc = w->scratch;
    for (int i = 0; i < w->o.max_batch; i++) {
        sent *s = &sc->sents[i];
        if (s->state == SENT_FREE || s->seq != seq)
            continue;
        if (s->state == SENT_DONE) {
            /* finished but not taken: dropped from the queue at once */
            for (int k = 0; k < sc->n_done; k++) {
                int *q = &sc->done_q[(sc->done_head + k) % w->o.max_batch];
                if (*q == i) {
                    for (int m = k; m + 1 < sc->n_done; m++)
                        sc->done_q[(sc->done_head + m) % w->o.max_batch] =
                            sc->done_q[(sc->done_head + m + 1) % w->o.max_batch];
                    sc->n_done--;
                    break;
                }
            }
            slot_clear(s);
        } else {
            s->cancelled = 1; /* its rows leave at the next step */
        }
        return 0;
    }
    return -1;
}

void td_run_reset(td_worker *w)
{
    td_decode_scratch *sc = w->scratch;
    for (int i = 0; i < w->o.max_batch; i++)
        slot_clear(&sc->sents[i]);
    sc->n_order = sc->n_done = sc->done_head = sc->n_rows = 0;
}

/* step, inputs: the token, position, slot, lengths, cache destination,
 * forced end and running score's place of the n rows of the first n_sel
 * sentences of the row order, and those sentences' rows of the beam_step
 * op; returns the top-k width of the step (the largest of the sentences')
 * and sets the maxima the kernels need. */
static int step_inputs(td_worker *w, int n_sel, int n, int *s_kv, int *t_step, int *any_beam,
                       uint64_t *capture)
{
    td_decode_scratch *sc = w->scratch;
    const td_config *c = &w->m->cfg;
    const int64_t T = w->cap.len, fs = td_beam_f_stride(w->o.max_beam);
    int32_t *rows = sc->rows;
    int ks = 1;
    *s_kv = *t_step = *any_beam = 0;
    *capture = 0;
    for (int k = 0; k < n_sel; k++) {
        const sent *s = &sc->sents[sc->order[k]];
        const int t = s->t;
        if (s->B > 1 && 2 * s->B > ks)
            ks = 2 * s->B;
        *any_beam |= s->B > 1;
        if (s->src_len > *s_kv)
            *s_kv = s->src_len;
        if (t + 1 > *t_step)
            *t_step = t + 1;
        *capture |= s->sel.mask;
        int32_t *bs = sc->beam_sent + (int64_t)k * TD_BEAM_FIELDS;
        bs[TD_BEAM_SLOT] = sc->order[k];
        bs[TD_BEAM_ROW0] = s->row0;
        bs[TD_BEAM_B] = s->B;
        bs[TD_BEAM_T] = t;
        bs[TD_BEAM_M] = s->M;
        bs[TD_BEAM_ES] = (int32_t)c->early_stopping;
        memcpy(&bs[TD_BEAM_LP], &s->o.length_penalty, sizeof(float));
        sc->sents[sc->order[k]].op_i = k;
        for (int b = 0; b < s->B; b++) {
            int r = s->row0 + b;
            rows[ROW_IDS * n + r] = t == 0 ? c->decoder_start_token_id : s->last[b];
            rows[ROW_POS * n + r] = t;
            rows[ROW_SLOT * n + r] = sc->order[k];
            rows[ROW_SRC_LEN * n + r] = s->src_len;
            rows[ROW_SELF_LEN * n + r] = t + 1;
            rows[ROW_DST * n + r] = (int32_t)(r * T + t);
            /* ForcedEOSTokenLogitsProcessor comes after the forced BOS
             * among generate's processors: at the last step </s> wins */
            rows[ROW_FORCE * n + r] = c->forced_eos_token_id >= 0 && t == s->M - 1
                                          ? c->forced_eos_token_id
                                      : t < s->o.n_prefix ? s->prefix[t]
                                                          : -1;
            rows[ROW_EMB_POS * n + r] =
                td_pos_row(c, t, t == 0 ? c->decoder_start_token_id : s->last[b]);
            rows[ROW_SCORE * n + r] = (int32_t)(sc->order[k] * fs + b);
        }
    }
    return ks;
}

/* Row order: the urgent sentences first (td_run_urge), then live
 * sentences by source length, shortest first (admission order among
 * equals), so that the urgent and then the shortest are a prefix of the
 * rows. */
static int order_before(const sent *a, const sent *b)
{
    if (a->urgent != b->urgent)
        return a->urgent;
    return a->src_len != b->src_len ? a->src_len < b->src_len : a->seq < b->seq;
}

/* step, finish: sentence s ended; its search state read back from the
 * device (one slot, the only time it leaves the device) and its result
 * built. */
static void step_finish(td_worker *w, sent *s)
{
    td_decode_scratch *sc = w->scratch;
    const td_backend_ops *ops = w->be->ops;
    const int MB = w->o.max_beam, ML = w->o.max_length;
    const int slot = (int)(s - sc->sents);
    const int64_t fs = td_beam_f_stride(MB), is = td_beam_i_stride(MB, ML);
    ops->download(w->be, sc->st_f, w->beam_f + slot * fs, (size_t)fs * sizeof(float));
    ops->download(w->be, sc->st_i, w->beam_i + slot * is, (size_t)is * sizeof(int32_t));
    const td_beam_view v = td_beam_slot(sc->st_f, sc->st_i, MB, ML, 0);
    s->res_failed = td_search_result(s, v, MB, &s->res) != 0;
}

/* step, advance: the host's part of the stepped sentences' bookkeeping
 * (the first of the row order, n rows), from the beam_step op's output:
 * each running beam's last token and the row it continues; finished ones get their result (finish) and
 * queue for td_run_take, cancelled ones are dropped, the others keep their
 * state; the rows that go on are listed in gather, in the row order
 * (order_before). Returns their number and in *t_len the most cache
 * positions a row of them has written. */
static int step_advance(td_worker *w, int n, int s_kv, const int *cap_of, int *t_len)
{
    td_decode_scratch *sc = w->scratch;
    const td_config *c = &w->m->cfg;
    const int H = c->decoder_attention_heads;
    const int32_t *out = sc->beam_out; /* beam_step's (backend.h) */
    const int64_t layer_stride = (int64_t)n * H * s_kv;
    int n_new = 0, n_order = 0, *sorted = sc->enc_order;
    /* the next row order: stable insertion sort (the order is sorted but
     * for the sentences admitted since the last step) */
    for (int i = 0; i < sc->n_order; i++) {
        int k = i;
        const sent *s = &sc->sents[sc->order[i]];
        while (k > 0 && order_before(s, &sc->sents[sorted[k - 1]])) {
            sorted[k] = sorted[k - 1];
            k--;
        }
        sorted[k] = sc->order[i];
    }
    *t_len = 0;
    for (int k = 0; k < sc->n_order; k++) {
        const int slot = sorted[k];
        sent *s = &sc->sents[slot];
        if (s->cancelled) {
            slot_clear(s);
            continue;
        }
        int first = n_new;
        if (s->row0 >= n) { /* not stepped: its rows go on as they are */
            for (int b = 0; b < s->B; b++) {
                sc->gather[n_new] = s->row0 + b;
                sc->row_len[n_new++] = (int32_t)(s->t * c->d_model);
            }
            if (s->t > *t_len)
                *t_len = s->t;
            s->row0 = first;
            sc->order[n_order++] = slot;
            continue;
        }
        if (s->o.return_attention)
            td_search_record(s, s->t, sc->probs, layer_stride, cap_of, H, s_kv);
        s->done = out[2 * n + s->op_i];
        for (int j = 0; !s->done && j < s->B; j++) {
            const int32_t from = out[s->row0 + j]; /* the beam new beam j continues */
            s->last[j] = out[n + s->row0 + j];
            if (s->origin)
                s->origin[(int64_t)(s->t + 1) * s->B + j] = from;
            sc->gather[n_new++] = s->row0 + from;
        }
        s->t++;
        /* the rows that go on hold s->t written positions of their cache */
        for (int r = first; r < n_new; r++)
            sc->row_len[r] = (int32_t)(s->t * c->d_model);
        if (n_new > first && s->t > *t_len)
            *t_len = s->t;
        if (s->done) {
            step_finish(w, s);
            free(s->hist);
            s->hist = NULL;
            s->state = SENT_DONE;
            sc->done_q[(sc->done_head + sc->n_done++) % w->o.max_batch] = slot;
        } else {
            s->row0 = first;
            sc->order[n_order++] = slot;
        }
    }
    sc->n_order = n_order;
    return n_new;
}

/* step, compact: the self-attention caches follow the rows' new layout
 * (skipped when nothing moved); t_len covers every row's written keys. */
static void step_compact(td_worker *w, int n_new, int t_len)
{
    td_decode_scratch *sc = w->scratch;
    int identity = n_new == sc->n_rows;
    for (int r = 0; identity && r < n_new; r++)
        identity = sc->gather[r] == r;
    sc->n_rows = n_new;
    if (n_new > 0 && !identity) {
        /* one upload: the old rows, then the lengths to copy of each (a
         * row copies only its own written positions, not the longest's) */
        memcpy(sc->gather + n_new, sc->row_len, (size_t)n_new * sizeof(int32_t));
        w->be->ops->upload(w->be, w->d_gather, sc->gather,
                           (size_t)n_new * 2 * sizeof(int32_t));
        td_cache_reorder(w, n_new, t_len, w->d_gather + n_new);
    }
}

/* step, device: one step's ops between its uploads and its download, none
 * waiting for the host: each row's running score gathered from its slot's
 * search state, the decoder step, log-probabilities and top-k, the search
 * step (beam_step) on the slots' state. The same ops whoever launches
 * them (tests/test_op_record.c), so that a backend may capture them. */
static void step_device(td_worker *w, int n, int n_sel, int ks, int s_kv, int t_step,
                        int any_beam, uint64_t capture)
{
    const td_config *c = &w->m->cfg;
    const td_backend_ops *ops = w->be->ops;
    if (any_beam) /* each row's running score, from the slots' search state */
        ops->gather_rows(w->be, w->row_bias, w->beam_f, w->d_rows + ROW_SCORE * n, n, 1, 1,
                         NULL);
    td_step_rows rows = {
        .n = n,
        .ids = w->d_rows + ROW_IDS * n,
        .pos = w->d_rows + ROW_POS * n,
        .slot = w->d_rows + ROW_SLOT * n,
        .src_len = w->d_rows + ROW_SRC_LEN * n,
        .self_len = w->d_rows + ROW_SELF_LEN * n,
        .dst = w->d_rows + ROW_DST * n,
        .emb_pos = w->d_rows + ROW_EMB_POS * n,
        .s_kv = s_kv,
        .t_len = t_step,
    };
    td_decode_step(w, &rows, capture);
    ops->logprobs_topk(w->be, w->logits, n, c->decoder_vocab_size, w->d_suppress,
                       c->n_suppress, 0, w->d_rows + ROW_FORCE * n, c->forced_eos_token_id,
                       any_beam ? w->row_bias : NULL, ks, w->topk,
                       (int32_t *)(w->topk + (int64_t)n * ks));
    td_beam_args ba = {
        .val = w->topk, .idx = (const int32_t *)(w->topk + (int64_t)n * ks), .n_rows = n,
        .ks = ks, .sent = w->d_beam_sent, .n_sent = n_sel, .st_f = w->beam_f,
        .st_i = w->beam_i, .max_beam = w->o.max_beam, .max_len = w->o.max_length,
        .vocab = c->decoder_vocab_size, .eos_id = c->eos_token_id, .out = w->beam_out,
    };
    ops->beam_step(w->be, &ba);
}

int td_run_step(td_worker *w, char *err, size_t errlen)
{
    return td_run_step_shortest(w, INT_MAX, err, errlen);
}

int td_run_step_shortest(td_worker *w, int max_rows, char *err, size_t errlen)
{
    td_decode_scratch *sc = w->scratch;
    const td_config *c = &w->m->cfg;
    const td_backend_ops *ops = w->be->ops;
    const int H = c->decoder_attention_heads;
    /* the stepped sentences: the first of the row order whose rows fit
     * max_rows, at least one (a prefix of the rows) */
    int n_sel = 0, n = 0;
    while (n_sel < sc->n_order) {
        const sent *s = &sc->sents[sc->order[n_sel]];
        if (n_sel > 0 && n + s->B > max_rows)
            break;
        n += s->B;
        n_sel++;
    }
    if (n == 0) {
        /* only cancelled sentences without rows can be here */
        for (int k = 0; k < sc->n_order; k++)
            slot_clear(&sc->sents[sc->order[k]]);
        sc->n_order = 0;
        return sc->n_done;
    }
    int grc = step_grow(w, err, errlen);
    if (grc != 0)
        return grc;
    int s_kv, t_step, t_len, any_beam;
    uint64_t capture;
    const int ks = step_inputs(w, n_sel, n, &s_kv, &t_step, &any_beam, &capture);
    ops->upload(w->be, w->d_rows, sc->rows, (size_t)n * ROW_FIELDS * sizeof(int32_t));
    ops->upload(w->be, w->d_beam_sent, sc->beam_sent,
                (size_t)n_sel * TD_BEAM_FIELDS * sizeof(int32_t));
    /* the device's part, bracketed for a backend that captures it (a CUDA
     * graph); a failed capture ran nothing and is issued again */
    const int cap = ops->step_begin ? ops->step_begin(w->be) : 0;
    step_device(w, n, n_sel, ks, s_kv, t_step, any_beam, capture);
    if (cap && ops->step_end(w->be) != 0)
        step_device(w, n, n_sel, ks, s_kv, t_step, any_beam, capture);
    /* one transfer of the rows' back-pointers and tokens and the ends (the
     * only host wait of a step without attention capture) */
    ops->download(w->be, sc->beam_out, w->beam_out, (size_t)(2 * n + n_sel) * sizeof(int32_t));
    int cap_of[64];
    int n_cap = 0;
    const int64_t layer_stride = (int64_t)n * H * s_kv;
    for (int l = 0; l < c->decoder_layers && l < 64; l++)
        if (capture & (UINT64_C(1) << l)) {
            cap_of[l] = n_cap;
            ops->download(w->be, sc->probs + n_cap * layer_stride, w->probs[l],
                          (size_t)layer_stride * sizeof(float));
            n_cap++;
        }
    if (ops->sync(w->be, err, errlen) != 0)
        return TD_EDEVICE;
    for (int k = 0; k < n_sel; k++)
        if (sc->beam_out[2 * n + k] < 0) {
            errf(err, errlen, "beam_step: sentence %d of the step is out of the op's contract",
                 k);
            return TD_EDEVICE;
        }
    const int n_new = step_advance(w, n, s_kv, cap_of, &t_len);
    step_compact(w, n_new, t_len);
    return sc->n_done;
}

int td_run_take(td_worker *w, td_seq *seq, td_result *res)
{
    td_decode_scratch *sc = w->scratch;
    if (sc->n_done == 0)
        return 0;
    sent *s = &sc->sents[sc->done_q[sc->done_head]];
    sc->done_head = (sc->done_head + 1) % w->o.max_batch;
    sc->n_done--;
    *seq = s->seq;
    int failed = s->res_failed;
    if (failed) {
        td_result_free(&s->res);
        memset(res, 0, sizeof *res);
    } else {
        *res = s->res;
        memset(&s->res, 0, sizeof s->res);
    }
    slot_clear(s);
    return failed ? -1 : 1;
}

/* ---- a static batch -------------------------------------------------------- */

int td_translate_batch(td_worker *w, const int32_t *const *src, const int *src_len, int n,
                       const td_decode_opts *o, td_result *results, char *err, size_t errlen)
{
    /* (errf returns -1, which is TD_EINVAL) */
    if (td_run_live(w) > 0)
        return errf(err, errlen, "td_translate_batch: the worker has a running decode "
                    "(%d sentences)", td_run_live(w));
    if (n < 1 || n > w->o.max_batch)
        return errf(err, errlen, "batch of %d sentences: this worker takes 1..%d", n,
                    w->o.max_batch);
    const td_decode_opts *opts[STACK_SENTS];
    td_seq seqs[STACK_SENTS];
    const td_decode_opts **op = n <= STACK_SENTS ? opts : malloc((size_t)n * sizeof *op);
    td_seq *sq = n <= STACK_SENTS ? seqs : malloc((size_t)n * sizeof *sq);
    int rc = 0, got = 0;
    if (!op || !sq) {
        rc = errf(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        op[i] = o;
    if ((rc = td_run_add(w, src, src_len, n, op, sq, err, errlen)) != 0) {
        td_run_reset(w);
        goto out;
    }
    memset(results, 0, (size_t)n * sizeof *results);
    while (got < n) {
        int k = td_run_step(w, err, errlen);
        if (k < 0) {
            rc = k;
            break;
        }
        td_seq q;
        td_result r;
        int t;
        while ((t = td_run_take(w, &q, &r)) != 0) {
            /* handles are handed out in order, one per sentence */
            int i = (int)(q - sq[0]);
            if (t < 0) {
                rc = TD_EINVAL;
                errf(err, errlen, "out of memory");
            } else {
                results[i] = r;
            }
            got++;
        }
        if (rc)
            break;
    }
    if (rc) {
        for (int i = 0; i < n; i++)
            td_result_free(&results[i]);
        td_run_reset(w);
    }
out:
    if (op != opts)
        free((void *)op);
    if (sq != seqs)
        free(sq);
    return rc;
}

long td_worker_trim(td_worker *w, char *err, size_t errlen)
{
    if (td_run_live(w) > 0 || !memcmp(&w->cap, &w->cap_min, sizeof w->cap))
        return 0;
    size_t before = w->arena_bytes;
    int rc = td_worker_resize(w, w->cap_min, 0, 0, err, errlen);
    if (rc != 0)
        return rc == TD_EDEVICE ? -1 : 0;
    return (long)(before - w->arena_bytes);
}
