/*
 * cli_translate.h - `transformerd translate`'s pipeline (cli_translate.c).
 */
#ifndef TD_CLI_TRANSLATE_H
#define TD_CLI_TRANSLATE_H

#include "tokenizer.h"
#include "translator.h"

/* Translates stdin's lines to stdout, each line written in input order as
 * soon as its sentences are done, on w (its own running decode; w must
 * have none). lang: the source language for the sentence split (NULL:
 * each line one unit). src_lang: a multilingual model's source language
 * (td_tok_lang_find; its token first in every source; -1: none), the
 * target's token being o's prefix. raw_unknown: the model's raw output
 * (no unknown symbol copied from the source). batch: w's max_batch (the read-ahead is
 * four batches). progress: lines and lines/s on stderr (a terminal). Returns 0,
 * or 1 after an error (its message on stderr). */
int cli_translate_stream(td_worker *w, const td_tokenizer *tok, const td_decode_opts *o,
                         const char *lang, int src_lang, int raw_unknown, int batch,
                         int progress);

#endif /* TD_CLI_TRANSLATE_H */
