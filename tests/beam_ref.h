/*
 * beam_ref.h - the reference rules of test_beam_op.c (beam_ref.c): one
 * sentence's greedy or beam step as the host ran it before the beam_step
 * op, with its own types.
 */
#ifndef TD_BEAM_REF_H
#define TD_BEAM_REF_H

#include <stdint.h>

#define REF_MAX_BEAM 16
#define NEG_BIG (-1.0e9f)

typedef enum ref_es { REF_ES_HEURISTIC = 0, REF_ES_TRUE, REF_ES_NEVER } ref_es;

typedef struct ref_opts {
    float length_penalty;
} ref_opts;

typedef struct ref_hyp {
    int32_t *tok; /* (M) */
    int len;
    float score;
    int is_fin;
    int t_end, b_end;
} ref_hyp;

typedef struct ref_sent {
    int B, M;
    int done;
    int row0;
    int unsat;
    float run_score[REF_MAX_BEAM];
    int32_t *run_tok;      /* (B, M) */
    int32_t *run_tok_next; /* (B, M) */
    ref_hyp fin[REF_MAX_BEAM];
    float greedy_sum;
    int greedy_len;
    int *origin; /* unused by the test: NULL */
} ref_sent;

/* Step t: sets s->done, or appends row0 + the beam each new beam continues
 * to gather[*n_new...]. */
void ref_greedy(ref_sent *s, const float *val, const int32_t *idx, int ks, int t, int M, int eos,
                const ref_opts *o, int32_t *gather, int *n_new);
void ref_beam(ref_sent *s, const float *val, const int32_t *idx, int ks, int t, int M, int B,
              int64_t V, int eos, ref_es es, const ref_opts *o, int32_t *gather, int *n_new);

#endif /* TD_BEAM_REF_H */
