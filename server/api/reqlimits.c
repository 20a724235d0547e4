/*
 * reqlimits.c - the cost of a translation request, estimated from its
 * options and its tokenized texts before any job is queued, and held to
 * --max-response-bytes (reqlimits.h).
 *
 * The estimate counts, per text that runs, max_length generated tokens
 * for each hypothesis the response carries (the best one, and the
 * num_hypotheses list when there is one), their pieces and offsets with
 * return_tokens, and layers x heads x max_length x source tokens attention
 * values with return_attention; the byte weights are reqlimits.h's. It is an
 * estimate of the response, not a bound on it: a text stopped by </s>
 * returns less, a token whose piece is long returns more.
 */
#include <stdio.h>

#include "reqlimits.h"

void srv_cost_estimate(const srv_req *r, const srv_limit_fields *f, srv_cost *c)
{
    c->decode_rows = c->hyp_tokens = c->attn_cells = 0;
    double bytes = 256; /* the envelope: model, usage */
    const td_decode_opts *o = &r->opts;
    double M = o->max_length, B = o->beam_size;
    int N = o->num_hypotheses > 1 ? o->num_hypotheses : 1;
    double shown = N > 1 ? N + 1 : 1; /* the best one, then the list */
    double L = 0, H = 0;
    if (r->return_attention && r->model) {
        const td_config *cfg = td_model_config(r->model->m);
        L = o->n_attn_layers > 0 ? o->n_attn_layers : cfg->decoder_layers;
        H = o->n_attn_heads > 0 ? o->n_attn_heads : cfg->decoder_attention_heads;
    }
    for (int i = 0; i < r->pipe.n_texts; i++) {
        bytes += SRV_COST_TEXT_BYTES + (N > 1 ? N * SRV_COST_HYP_BYTES : 0);
        int k = r->pipe.text_job ? r->pipe.text_job[i] : -1;
        if (k < 0)
            continue; /* empty: "" without tokens */
        double S = r->pipe.jobs[k].n_src;
        double toks = shown * M;
        c->decode_rows += B * M;
        c->hyp_tokens += toks;
        bytes += toks * SRV_COST_TOKEN_BYTES;
        if (r->return_tokens)
            bytes += (toks + S) * SRV_COST_TOKEN_DETAIL;
        double cells = L * H * M * S;
        c->attn_cells += cells;
        bytes += cells * SRV_COST_ATTN_CELL_BYTES;
    }
    if (f->body_returns)
        bytes += (double)r->body_len; /* a document's markup comes back */
    c->resp_bytes = bytes;
}

int srv_limits_check(srv_req *r, const srv_limit_fields *f)
{
    srv_cost c;
    srv_cost_estimate(r, f, &c);
    long lim = r->s->api->max_response_bytes;
    /* an uploaded file's markup comes back in its translation: its bytes
     * are bounded by --max-file-bytes, its texts by this */
    if (r->route && (r->route->flags & SRV_ROUTE_FILE))
        lim += r->s->api->max_file_bytes;
    if (lim <= 0 || c.resp_bytes <= (double)lim)
        return 1;
    /* param: the field whose reduction helps most */
    const char *param;
    if (f->attention && c.attn_cells * SRV_COST_ATTN_CELL_BYTES * 2 >= c.resp_bytes)
        param = f->attention;
    else if (r->opts.num_hypotheses > 1)
        param = f->hypotheses;
    else
        param = f->texts;
    srv_req_error(r, 422, "response_too_large", param,
                  "the response would be about %.0f bytes (%d texts, %.0f tokens of up to "
                  "%d hypotheses of max_length %d, %.0f attention values); the limit is %ld "
                  "bytes (--max-response-bytes%s)",
                  c.resp_bytes, r->pipe.n_texts, c.hyp_tokens,
                  r->opts.num_hypotheses > 1 ? r->opts.num_hypotheses : 1, r->opts.max_length,
                  c.attn_cells, lim,
                  r->route && (r->route->flags & SRV_ROUTE_FILE) ? " + --max-file-bytes" : "");
    return 0;
}
