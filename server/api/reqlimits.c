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

/* The estimate of p's jobs under o (L layers x H heads of attention
 * returned, the tokens' detail when return_tokens), body bytes coming back. */
static void cost_of(const srv_pipe *p, const td_decode_opts *o, double L, double H,
                    int return_tokens, double body, srv_cost *c)
{
    c->decode_rows = c->hyp_tokens = c->attn_cells = 0;
    double bytes = 256; /* the envelope: model, usage */
    double M = o->max_length, B = o->beam_size;
    int N = o->num_hypotheses > 1 ? o->num_hypotheses : 1;
    double shown = N > 1 ? N + 1 : 1; /* the best one, then the list */
    for (int i = 0; i < p->n_texts; i++) {
        bytes += SRV_COST_TEXT_BYTES + (N > 1 ? N * SRV_COST_HYP_BYTES : 0);
        int k = p->text_job ? p->text_job[i] : -1;
        if (k < 0)
            continue; /* empty: "" without tokens */
        double S = p->jobs[k].n_src;
        double toks = shown * M;
        c->decode_rows += B * M;
        c->hyp_tokens += toks;
        bytes += toks * SRV_COST_TOKEN_BYTES;
        if (return_tokens)
            bytes += (toks + S) * SRV_COST_TOKEN_DETAIL;
        double cells = L * H * M * S;
        c->attn_cells += cells;
        bytes += cells * SRV_COST_ATTN_CELL_BYTES;
    }
    c->resp_bytes = bytes + body; /* a document's markup comes back */
}

void srv_cost_estimate(const srv_req *r, const srv_limit_fields *f, srv_cost *c)
{
    const td_decode_opts *o = &r->opts;
    double L = 0, H = 0;
    if (r->return_attention && r->model) {
        const td_config *cfg = td_model_config(r->model->m);
        L = o->n_attn_layers > 0 ? o->n_attn_layers : cfg->decoder_layers;
        H = o->n_attn_heads > 0 ? o->n_attn_heads : cfg->decoder_attention_heads;
    }
    cost_of(&r->pipe, o, L, H, r->return_tokens, f->body_returns ? (double)r->body_len : 0, c);
}

/* The limit's message for estimate c of n texts under o (n bytes). */
static void over_message(const srv_cost *c, int n_texts, const td_decode_opts *o, long lim,
                         int file, char *msg, size_t n)
{
    snprintf(msg, n,
             "the response would be about %.0f bytes (%d texts, %.0f tokens of up to "
             "%d hypotheses of max_length %d, %.0f attention values); the limit is %ld "
             "bytes (--max-response-bytes%s)",
             c->resp_bytes, n_texts, c->hyp_tokens, o->num_hypotheses > 1 ? o->num_hypotheses : 1,
             o->max_length, c->attn_cells, lim, file ? " + --max-file-bytes" : "");
}

int srv_limits_file(const srv_req *r, const srv_pipe *p, const td_decode_opts *o, char *msg,
                    size_t n)
{
    srv_cost c;
    cost_of(p, o, 0, 0, 0, (double)r->body_len, &c);
    long lim = r->s->api->max_response_bytes + r->s->api->max_file_bytes;
    if (lim > 0 && c.resp_bytes > (double)lim) {
        over_message(&c, p->n_texts, o, lim, 1, msg, n);
        return -1;
    }
    return 0;
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
    char msg[512];
    over_message(&c, r->pipe.n_texts, &r->opts, lim,
                 r->route && (r->route->flags & SRV_ROUTE_FILE), msg, sizeof msg);
    srv_req_error(r, 422, "response_too_large", param, "%s", msg);
    return 0;
}
