/*
 * search.h - one sentence's greedy or beam search, step by step (model/
 * only): the state a sentence keeps in a running decode (decode.c), and the
 * bookkeeping of a step, exactly as transformers' GenerationMixin does it
 * (generation/utils.py: _sample for greedy, the vectorised _beam_search with
 * _get_top_k_continuations, _get_running_beams_for_next_iteration,
 * _update_finished_beams and _check_early_stop_heuristic).
 */
#ifndef TD_SEARCH_H
#define TD_SEARCH_H

#include <stdint.h>

#include "model_internal.h"

#define NEG_BIG (-1.0e9f) /* transformers' "very large negative value" */

typedef struct fin_hyp {
    int32_t *tok;    /* (M) */
    int len;
    float score;
    int is_fin;
    int t_end, b_end; /* attention back-trace start */
} fin_hyp;

/* Resolved attention selection of a sentence. */
typedef struct attn_sel {
    int n_layers, n_heads;
    int layers[TD_MAX_ATTN_SELECT];
    int heads[TD_MAX_ATTN_SELECT];
    uint64_t mask;
} attn_sel;

typedef enum sent_state {
    SENT_FREE = 0,
    SENT_LIVE,      /* has rows, decoding */
    SENT_DONE,      /* finished: its result waits for td_run_take */
} sent_state;

typedef struct sent {
    sent_state state;
    td_seq seq;
    int cancelled;   /* leave at the next step, hand nothing out */
    int urgent;      /* first in the row order (td_run_urge) */
    int src_len;
    int B, M;        /* its beam size and max_length */
    td_decode_opts o; /* its options (attention arrays resolved into sel) */
    attn_sel sel;
    int t;           /* steps done = position of its next token */
    int done;        /* the search is over (set by the updates) */
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
    td_result res;   /* SENT_DONE: the result */
    int res_failed;  /* SENT_DONE: out of memory building it */
} sent;

/* The attention selection of o (already checked) resolved against c. */
void td_search_select(const td_config *c, const td_decode_opts *o, attn_sel *sel);

/* Copies the selected heads of this step's captured probabilities for the
 * rows of s into its history. probs holds the captured layers in capture
 * order, each (rows, H, s_kv); cap_of[l] is layer l's place. */
void td_search_record(sent *s, int t, const float *probs, int64_t layer_stride,
                      const int *cap_of, int H, int s_kv);

/* Step t of a greedy (one beam) or beam sentence, from the step's top-k
 * values and ids (rows, ks): sets s->done when the search is over, and
 * otherwise appends the rows that go on (old row of each new row) to
 * gather[*n_new...]. M is the sentence's max_length. */
void td_search_greedy(sent *s, const float *val, const int32_t *idx, int ks, int t, int M,
                      int eos, const td_decode_opts *o, int32_t *gather, int *n_new);
void td_search_beam(sent *s, const float *val, const int32_t *idx, int ks, int t, int M, int B,
                    int64_t V, int eos, td_early_stopping es, const td_decode_opts *o,
                    int32_t *gather, int *n_new);

/* The result of a finished sentence (its hypotheses, best first, and the
 * best one's attention when asked). 0, or -1 when out of memory (r then
 * holds what was built: td_result_free it). */
int td_search_result(const sent *s, td_result *r);

#endif /* TD_SEARCH_H */
