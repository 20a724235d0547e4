/*
 * cli_translate.h - `transformerd translate`'s pipeline (cli_translate.c).
 */
#ifndef TD_CLI_TRANSLATE_H
#define TD_CLI_TRANSLATE_H

#include "glossary.h"
#include "tokenizer.h"
#include "translator.h"

/* Translates stdin's lines to stdout, each line written in input order as
 * soon as its sentences are done, on w (its own running decode; w must
 * have none). lang: the source language for the sentence split (NULL:
 * each line one unit). src_lang: a multilingual model's source language
 * (td_tok_lang_find; its token first in every source; -1: none), the
 * target's token being o's prefix. raw_unknown: the model's raw output
 * (no unknown symbol copied from the source). gloss: a glossary's
 * dictionary for the pair (its terms placed as the API's glossary places
 * them), or NULL. batch: w's max_batch (the read-ahead is
 * four batches). progress: lines and lines/s on stderr (a terminal). Returns 0,
 * or 1 after an error (its message on stderr). */
int cli_translate_stream(td_worker *w, const td_tokenizer *tok, const td_decode_opts *o,
                         const char *lang, int src_lang, int raw_unknown,
                         const srv_gloss_dict *gloss, int batch, int progress);

/* translate's --glossary FILE: a glossary of the file's entries (DeepL's
 * formats: tab-separated, or comma-separated for a .csv name) from src to
 * tgt (canonical codes), in a store of its own in memory (*store, closed
 * by the caller), bounded as the daemon's defaults bound one (10 MiB,
 * 100,000 entries). NULL after a message on stderr naming the file and the
 * line. */
srv_glossary *cli_glossary_load(const char *path, const char *src, const char *tgt,
                                srv_glossaries **store);

#endif /* TD_CLI_TRANSLATE_H */
