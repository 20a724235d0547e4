/*
 * search.h - one sentence's greedy or beam search in a running decode
 * (model/ only): the host's part of a sentence's state (decode.c), the
 * attention it captures, and its result. The search itself, step by step,
 * is the backend's beam_step op (backend.h), whose rules and state layout
 * are backend/beam_rules.h: the state stays on the device; the host reads
 * it back once, when the sentence ends (td_search_result).
 */
#ifndef TD_SEARCH_H
#define TD_SEARCH_H

#include <stdint.h>

#include "model_internal.h"

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
    int op_i;        /* its place among the last beam_step's sentences */
    int32_t last[TD_MAX_BEAM]; /* each running beam's last token (beam_step's) */
    int32_t prefix[TD_MAX_PREFIX]; /* its forced target prefix (o.prefix points here) */
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

/* The result of a finished sentence from its search state v read back
 * from the device (beam_rules.h; mb: the state's max_beam): its finished
 * hypotheses, best first, and the best one's attention when asked. 0, or
 * -1 when out of memory (r then holds what was built: td_result_free it). */
int td_search_result(const sent *s, td_beam_view v, int mb, td_result *r);

#endif /* TD_SEARCH_H */
