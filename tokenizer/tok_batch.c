/*
 * tok_batch.c - the tokenizer side of the text pipeline: a batch of source
 * texts to model ids under a token limit (cut or refused), shared by
 * `transformerd translate` (model/text.c) and the daemon.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

void td_tok_ids_free(td_tok_ids *ids, int n)
{
    for (int i = 0; ids && i < n; i++) {
        free(ids[i].ids);
        ids[i].ids = NULL;
    }
}

int td_tok_encode_batch(const td_tokenizer *t, const char *const *texts, const size_t *lens,
                        int n, int max_len, td_long_source long_source, td_tok_ids *out,
                        int *bad, char *err, size_t errlen)
{
    return td_tok_encode_batch_lang(t, -1, texts, lens, n, max_len, long_source, out, bad, err,
                                    errlen);
}

int td_tok_encode_batch_lang(const td_tokenizer *t, int lang, const char *const *texts,
                             const size_t *lens, int n, int max_len,
                             td_long_source long_source, td_tok_ids *out, int *bad, char *err,
                             size_t errlen)
{
    memset(out, 0, (size_t)(n > 0 ? n : 0) * sizeof *out);
    if (bad)
        *bad = -1;
    for (int i = 0; i < n; i++) {
        td_tok_ids *s = &out[i];
        size_t len = lens ? lens[i] : strlen(texts[i]);
        if (td_tok_encode_lang(t, TD_TOK_SOURCE, lang, texts[i], len, &s->ids, &s->n) != 0) {
            snprintf(err, errlen, "text %d: out of memory while tokenizing", i);
            if (bad)
                *bad = i;
            td_tok_ids_free(out, n);
            return TD_TOK_ENOMEM;
        }
        s->n_full = s->n;
        if (s->n > max_len && long_source == TD_LONG_SOURCE_TRUNCATE && max_len >= 1) {
            s->ids[max_len - 1] = s->ids[s->n - 1]; /* </s> */
            s->n = max_len;
        }
        if (s->n > max_len) {
            snprintf(err, errlen, "text %d: %d tokens, more than the limit of %d", i, s->n,
                     max_len);
            if (bad)
                *bad = i;
            td_tok_ids_free(out, n);
            return TD_TOK_ETOOLONG;
        }
    }
    return 0;
}
