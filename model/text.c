/*
 * text.c - text in, text out: tokenize, translate in length-sorted batches,
 * detokenize: the engine part of the text pipeline whose tokenizer part is
 * td_tok_encode_batch / td_tok_decode (tokenizer/tokenizer.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "tokenizer.h"

int td_model_tokenizer_load(const td_model *m, const char *dir, td_tokenizer **out, char *err,
                            size_t errlen)
{
    return td_tok_load(out, dir, m->cfg.vocab_size, m->cfg.decoder_vocab_size, err, errlen);
}

void td_text_result_free(td_text_result *r)
{
    if (!r)
        return;
    free(r->text);
    free(r->src_ids);
    td_result_free(&r->r);
    memset(r, 0, sizeof *r);
}

typedef struct order {
    int len, idx;
} order;

static int order_cmp(const void *a, const void *b)
{
    const order *x = a, *y = b;
    if (x->len != y->len)
        return x->len - y->len;
    return x->idx - y->idx;
}

/* The engine part of the text pipeline: src (ownership of each ids moves
 * into results[i].src_ids, also on failure) translated in length-sorted
 * batches of at most max_batch, the best hypotheses detokenized. */
int td_translate_tokenized(td_worker *w, const td_tokenizer *tok, td_tok_ids *src_in, int n,
                           const td_decode_opts *opts, td_text_result *results, char *err,
                           size_t errlen)
{
    memset(results, 0, (size_t)(n > 0 ? n : 0) * sizeof *results);
    for (int i = 0; i < n; i++) {
        results[i].src_ids = src_in[i].ids;
        results[i].n_src = src_in[i].n;
        results[i].n_src_full = src_in[i].n_full;
        src_in[i].ids = NULL;
    }
    order *ord = malloc((size_t)(n > 0 ? n : 1) * sizeof *ord);
    const int32_t **src = malloc((size_t)w->o.max_batch * sizeof *src);
    int *slen = malloc((size_t)w->o.max_batch * sizeof *slen);
    td_result *res = malloc((size_t)w->o.max_batch * sizeof *res);
    int rc = -1;
    if (!ord || !src || !slen || !res) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    /* A source that tokenizes to nothing but </s> (an empty or
     * whitespace-only text) is not run: "" with score 0 and no tokens. */
    int n_run = 0;
    for (int i = 0; i < n; i++) {
        if (td_tok_is_empty(results[i].n_src_full)) {
            td_result *e = &results[i].r;
            e->hyps = calloc(1, sizeof *e->hyps);
            results[i].text = calloc(1, 1);
            if (!e->hyps || !results[i].text) {
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
            e->n_hyps = 1;
            continue;
        }
        if (results[i].n_src > w->o.max_src_len) {
            snprintf(err, errlen, "text %d: %d tokens, more than the limit of %d", i,
                     results[i].n_src, w->o.max_src_len);
            goto fail;
        }
        ord[n_run].len = results[i].n_src;
        ord[n_run].idx = i;
        n_run++;
    }
    /* Sorted by length, batches pad little. */
    qsort(ord, (size_t)n_run, sizeof *ord, order_cmp);
    for (int b0 = 0; b0 < n_run; b0 += w->o.max_batch) {
        int nb = n_run - b0 < w->o.max_batch ? n_run - b0 : w->o.max_batch;
        for (int j = 0; j < nb; j++) {
            td_text_result *r = &results[ord[b0 + j].idx];
            src[j] = r->src_ids;
            slen[j] = r->n_src;
        }
        if (td_translate_batch(w, src, slen, nb, opts, res, err, errlen) != 0)
            goto fail;
        for (int j = 0; j < nb; j++) {
            td_text_result *r = &results[ord[b0 + j].idx];
            r->r = res[j];
            const td_hypothesis *h = &r->r.hyps[0];
            if (td_tok_decode(tok, h->tokens, h->n_tokens, &r->text) != 0) {
                snprintf(err, errlen, "out of memory while detokenizing");
                for (int k = j + 1; k < nb; k++)
                    results[ord[b0 + k].idx].r = res[k];
                goto fail;
            }
        }
    }
    rc = 0;
    goto out;
fail:
    for (int i = 0; i < n; i++)
        td_text_result_free(&results[i]);
out:
    free(ord);
    free(src);
    free(slen);
    free(res);
    return rc;
}

int td_translate_text(td_worker *w, const td_tokenizer *tok, const char *const *texts,
                      const size_t *lens, int n, const td_decode_opts *opts,
                      td_text_result *results, char *err, size_t errlen)
{
    memset(results, 0, (size_t)(n > 0 ? n : 0) * sizeof *results);
    /* an Argos package's target_prefix forced first, as argos-translate does */
    int32_t pkg_prefix = td_tok_target_prefix(tok);
    td_decode_opts o = *opts;
    if (pkg_prefix >= 0 && o.n_prefix == 0) {
        o.prefix = &pkg_prefix;
        o.n_prefix = 1;
    }
    td_tok_ids *src = calloc((size_t)(n > 0 ? n : 1), sizeof *src);
    if (!src) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = td_tok_encode_batch(tok, texts, lens, n, w->o.max_src_len, TD_LONG_SOURCE_ERROR,
                                 src, NULL, err, errlen) == 0
                 ? td_translate_tokenized(w, tok, src, n, &o, results, err, errlen)
                 : -1;
    free(src);
    return rc;
}

/* The language with that code, or -1 with a message naming it and a few of
 * the model's (what = "source" or "target"). */
static int find_lang(const td_tokenizer *tok, const char *what, const char *code, char *err,
                     size_t errlen)
{
    const int n = td_tok_n_langs(tok);
    int i = code ? td_tok_lang_find(tok, code) : -1;
    if (i >= 0)
        return i;
    char some[160];
    size_t off = 0;
    some[0] = 0;
    for (int k = 0; k < n && k < 6 && off < sizeof some; k++)
        off += (size_t)snprintf(some + off, sizeof some - off, "%s'%s'", k ? ", " : "",
                                td_tok_lang(tok, k));
    if (!code)
        snprintf(err, errlen, "a %s language is required: this model knows %d languages (%s%s)",
                 what, n, some, n > 6 ? ", ..." : "");
    else
        snprintf(err, errlen, "%s language '%.64s' is not one of this model's %d languages (%s%s)",
                 what, code, n, some, n > 6 ? ", ..." : "");
    return -1;
}

int td_translate_text_lang(td_worker *w, const td_tokenizer *tok, const char *src_lang,
                           const char *tgt_lang, const char *const *texts, const size_t *lens,
                           int n, const td_decode_opts *opts, td_text_result *results,
                           char *err, size_t errlen)
{
    memset(results, 0, (size_t)(n > 0 ? n : 0) * sizeof *results);
    if (td_tok_n_langs(tok) == 0) {
        if (src_lang || tgt_lang) {
            snprintf(err, errlen, "this model has no language tokens: translate without a "
                     "source or target language");
            return -1;
        }
        return td_translate_text(w, tok, texts, lens, n, opts, results, err, errlen);
    }
    const int sl = find_lang(tok, "source", src_lang, err, errlen);
    const int tl = sl < 0 ? -1 : find_lang(tok, "target", tgt_lang, err, errlen);
    if (tl < 0)
        return -1;
    /* the target language's token first, then the caller's prefix */
    int32_t prefix[TD_MAX_PREFIX];
    td_decode_opts o = *opts;
    if (o.n_prefix < 0 || o.n_prefix + 1 > TD_MAX_PREFIX || (o.n_prefix > 0 && !o.prefix)) {
        snprintf(err, errlen, "target_prefix: 0..%d tokens after the target language",
                 TD_MAX_PREFIX - 1);
        return -1;
    }
    prefix[0] = td_tok_lang_token(tok, tl);
    if (o.n_prefix > 0)
        memcpy(prefix + 1, o.prefix, (size_t)o.n_prefix * sizeof(int32_t));
    o.prefix = prefix;
    o.n_prefix++;
    td_tok_ids *src = calloc((size_t)(n > 0 ? n : 1), sizeof *src);
    if (!src) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = td_tok_encode_batch_lang(tok, sl, texts, lens, n, w->o.max_src_len,
                                      TD_LONG_SOURCE_ERROR, src, NULL, err, errlen) == 0
                 ? td_translate_tokenized(w, tok, src, n, &o, results, err, errlen)
                 : -1;
    free(src);
    return rc;
}
