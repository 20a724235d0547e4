/*
 * reqlimits.h - what one translation request may cost, decided before it
 * runs: the decoding work it asks for, the attention cells it would
 * return, and an estimate of its response's size, held to
 * --max-response-bytes (docs/api.md, "Limits"). (Giving the memory of a
 * large response back to the system once it is sent is the transport's.)
 *
 * Promise: a request whose estimated response is over the limit is
 * answered 422 response_too_large (LibreTranslate: 400) before any job is
 * queued; the message names the limit (--max-response-bytes) and the
 * numbers, param the field to reduce.
 *
 * Threads: the request's HTTP thread.
 */
#ifndef SRV_REQLIMITS_H
#define SRV_REQLIMITS_H

#include <stddef.h>

#include "request.h"

/* The cost of a request whose jobs are made (srv_api_make_jobs), every
 * count as a double (no overflow). max_length is the request's own. */
typedef struct srv_cost {
    double decode_rows;  /* sum over texts of beam_size x max_length (decoder row-steps) */
    double hyp_tokens;   /* sum over texts of num_hypotheses x max_length (tokens returned) */
    double attn_cells;   /* sum over texts of layers x heads x max_length x source tokens */
    double resp_bytes;   /* estimate of the response body's bytes */
} srv_cost;

/* Bytes the estimate counts per item (docs/api.md, "Limits"). */
#define SRV_COST_TEXT_BYTES 64      /* each text's object: text, score, usage share */
#define SRV_COST_HYP_BYTES 48       /* each hypothesis's object and score */
#define SRV_COST_TOKEN_BYTES 8      /* each generated token's share of the text */
#define SRV_COST_TOKEN_DETAIL 24    /* each token's piece and offsets (return_tokens) */
#define SRV_COST_ATTN_CELL_BYTES 12 /* one attention value as JSON (9 digits) */

/* What a dialect's request is made of, for the estimate and its error: the
 * fields to name (the one whose reduction helps most: the attention when it
 * is at least half of the estimate, else the hypotheses when there are
 * several, else the texts; attention NULL: the dialect has none), and
 * whether the answer carries the request's body back (LibreTranslate's
 * documents). */
typedef struct srv_limit_fields {
    const char *attention, *hypotheses, *texts;
    int body_returns;
} srv_limit_fields;

/* Fills *c from r (r->model, r->opts, r->jobs, r->n_texts, return_*) and f. */
void srv_cost_estimate(const srv_req *r, const srv_limit_fields *f, srv_cost *c);

/* Holds r to the server's limits. Returns 1 (within them) or 0 with the
 * error recorded (422 response_too_large, param one of f's fields). */
int srv_limits_check(srv_req *r, const srv_limit_fields *f);

/* An uploaded document's jobs (p, under o: docrun.h's jobs hook, any
 * thread; reads r's server and body only) held to the same estimate, its
 * upload coming back, against --max-response-bytes + --max-file-bytes: 0
 * within, else -1 with the message (n bytes; the door answers it). */
int srv_limits_file(const srv_req *r, const srv_pipe *p, const td_decode_opts *o, char *msg,
                    size_t n);

#endif /* SRV_REQLIMITS_H */
