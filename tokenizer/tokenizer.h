/*
 * tokenizer.h - the Marian tokenizer: SentencePiece (spm.h) plus the
 * vocab.json mapping, exactly as transformers' MarianTokenizer does it;
 * and the layouts of fairseq's multilingual models, M2M100Tokenizer's and
 * NllbTokenizer's (tok_fairseq.c): a directory with sentencepiece.bpe.model
 * loads as one of them, with its list of languages.
 *
 * Source side: the strings of the special tokens (</s>, <unk>, <pad>) split
 * the text and stand for their ids, as transformers' tokenize() does; in
 * each chunk between them a leading language code ">>xx<<" is split off and
 * looked up as one token, the rest is encoded with source.spm into pieces,
 * and each piece (an unknown piece as the text it covers) is mapped through
 * vocab.json (missing: <unk>); </s> is appended.
 * Target side (td_tok_decode): special ids (</s>, <pad>, <unk>) are dropped,
 * the others mapped to pieces (vocab.json, else the spm piece) and decoded
 * with SentencePiece; U+2581 becomes a space and the result is stripped.
 * As MarianTokenizer does, a checkpoint with one shared vocabulary decodes
 * with source.spm, one with separate vocabularies (target_vocab.json) with
 * target.spm.
 * A CTranslate2 directory has no vocab.json: its vocabularies are lists of
 * token strings by id (td_tok_list: shared_vocabulary.json, or
 * source_vocabulary + target_vocabulary, .json or .txt), read the same way
 * (a separate target list decodes with target.spm).
 *
 * Thread safety: immutable after load; use from any number of threads.
 */
#ifndef TD_TOKENIZER_H
#define TD_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct td_tokenizer td_tokenizer;

typedef enum td_tok_side {
    TD_TOK_SOURCE = 0,
    TD_TOK_TARGET = 1,
} td_tok_side;

/* Loads dir/source.spm, dir/target.spm, dir/vocab.json and, when present,
 * dir/target_vocab.json (without vocab.json: CTranslate2's lists); or,
 * when dir holds sentencepiece.bpe.model, the M2M100 (with vocab.json) or
 * NLLB (without) layout, its languages read from tokenizer_config.json,
 * special_tokens_map.json and the added tokens (tokenizer.json,
 * added_tokens.json). Every id must fit the model's vocabularies
 * (src_vocab_size / tgt_vocab_size from config.json; 0 skips the check).
 * Returns 0, or -1 with a message naming the file. */
int td_tok_load(td_tokenizer **out, const char *dir, int src_vocab_size, int tgt_vocab_size,
                char *err, size_t errlen);
void td_tok_free(td_tokenizer *t); /* accepts NULL */

/* The files td_tok_load reads from a model directory: *files (static), the
 * first *n_required of them required, the rest read when present; an
 * entry "a|b|c" is satisfied by any one of them. Returns their count. */
int td_tok_files(const char *const **files, int *n_required);

/* 1 when dir is an Argos Translate package (metadata.json and a directory
 * model/ holding a CTranslate2 model): td_tok_load then reads
 * dir/sentencepiece.model (both sides) and model/'s vocabularies. */
int td_tok_argos_package(const char *dir);
/* The token a package forces first (metadata.json's target_prefix, e.g. a
 * multilingual package's target language), decoded as nothing; -1 none. */
int td_tok_target_prefix(const td_tokenizer *t);
/* The same for the layout dir holds (the fairseq layouts' files when it
 * has sentencepiece.bpe.model, else td_tok_files'). */
int td_tok_files_in(const char *dir, const char *const **files, int *n_required);

/* ---- languages of a multilingual model (M2M100, NLLB) ------------------
 * Languages are numbered 0..td_tok_n_langs-1 in the order of the files'
 * list; a Marian tokenizer has none. */
int td_tok_n_langs(const td_tokenizer *t);
/* Language i's code as a caller names it ("de" for M2M100's token
 * "__de__", "deu_Latn" for NLLB's), NULL out of range. */
const char *td_tok_lang(const td_tokenizer *t, int i);
/* The number of the language with that code, -1 when the model lacks it. */
int td_tok_lang_find(const td_tokenizer *t, const char *code);
/* Language i's token id (what a decode forces first: a target prefix),
 * -1 out of range. */
int32_t td_tok_lang_token(const td_tokenizer *t, int i);

/* A CTranslate2 vocabulary: the token strings by id. */
typedef struct td_tok_list {
    char **tok;     /* (n) NUL-terminated, owned */
    int n;
    int shared;     /* read from shared_vocabulary.* */
    char file[64];  /* its file name, for messages */
} td_tok_list;

/* Loads the vocabulary of one side from dir: shared_vocabulary.json/.txt,
 * else {source,target}_vocabulary.json/.txt (a JSON list of strings, or one
 * token a line). Returns 0; 1 when dir has none (l empty); -1 with a
 * message naming the file. */
int td_tok_list_load(td_tok_list *l, const char *dir, td_tok_side side, char *err,
                     size_t errlen);
/* The first id of token s, -1 when absent. */
int td_tok_list_find(const td_tok_list *l, const char *s);
void td_tok_list_free(td_tok_list *l); /* accepts NULL and empty lists */

/* Text (any bytes) -> model ids, </s> appended. side TD_TOK_TARGET encodes
 * with target.spm and the target vocabulary (transformers' text_target).
 * *ids is malloc'd. Returns 0, or -1 when out of memory. */
int td_tok_encode(const td_tokenizer *t, td_tok_side side, const char *text, size_t len,
                  int32_t **ids, int *n);
/* td_tok_encode with language lang's token first (lang: a number of
 * td_tok_lang_find; -1: none, as td_tok_encode): "src_lang pieces </s>",
 * M2M100Tokenizer's and NllbTokenizer's source (legacy_behaviour false). */
int td_tok_encode_lang(const td_tokenizer *t, td_tok_side side, int lang, const char *text,
                       size_t len, int32_t **ids, int *n);

/* Model ids -> pieces as strings (for `transformerd tokenize --pieces`):
 * *pieces is a malloc'd array of n pointers into the tokenizer (do not
 * free them); free the array only. */
int td_tok_pieces(const td_tokenizer *t, td_tok_side side, const int32_t *ids, int n,
                  const char ***pieces);

/* Target ids -> text, skipping special tokens; *text malloc'd,
 * NUL-terminated. Returns 0, or -1 when out of memory. */
int td_tok_decode(const td_tokenizer *t, const int32_t *ids, int n, char **text);

/* td_tok_decode with token i written as the text repl[i] wherever repl[i]
 * is not NULL (repl NULL: none), as a piece the model does not know
 * (verbatim; a U+2581 before it is its space): how the daemon puts a
 * source symbol in for an <unk>, which decodes to nothing. */
int td_tok_decode_as(const td_tokenizer *t, const int32_t *ids, int n, const char *const *repl,
                     char **text);

/* ---- the tokenizer side of the text pipeline ----------------------------
 * td_tok_encode_batch, the engine, then td_tok_decode of each best
 * hypothesis: the engine's td_translate_text (model/translator.h), and
 * the daemon's and `transformerd translate`'s one text pipeline
 * (server/service/pipeline.c) with td_tok_decode_as for the copies. */

/* What a source text longer than the limit gets. */
typedef enum td_long_source {
    TD_LONG_SOURCE_ERROR = 0,  /* the batch fails, naming the text (the daemon's 422) */
    TD_LONG_SOURCE_TRUNCATE,   /* keep the first max_len - 1 tokens and </s> */
} td_long_source;

/* One tokenized source text. */
typedef struct td_tok_ids {
    int32_t *ids;   /* (n) model ids ending with </s>, malloc'd */
    int n;          /* tokens kept (<= the limit) */
    int n_full;     /* tokens before cutting (= n when not cut) */
} td_tok_ids;

/* 1 when a source of n_full tokens holds nothing but </s>: an empty or
 * whitespace-only text (whitespace as the normalizer sees it). Such a text
 * translates to "" with score 0 and no tokens, without running the model
 * (td_translate_tokenized, the daemon). */
static inline int td_tok_is_empty(int n_full)
{
    return n_full <= 1;
}

#define TD_TOK_ENOMEM (-1)
#define TD_TOK_ETOOLONG (-2)

/* Tokenizes n source texts (lens NULL: NUL-terminated) into out[0..n) with
 * td_tok_encode(TD_TOK_SOURCE). A text of more than max_len tokens is cut to
 * max_len keeping </s> (TRUNCATE; out[i].n_full keeps the full count), or
 * fails the batch (ERROR). Returns 0; TD_TOK_ETOOLONG or TD_TOK_ENOMEM with
 * *bad (may be NULL) the index of the failing text and a message naming it
 * in err ("text 3: 700 tokens, more than the limit of 512"). On failure
 * every out[i].ids is freed and NULL, and the counts of the texts up to *bad
 * stay (out[*bad].n_full is the refused text's count). Free the ids with
 * td_tok_ids_free. Thread safety: as td_tok_encode. */
int td_tok_encode_batch(const td_tokenizer *t, const char *const *texts, const size_t *lens,
                        int n, int max_len, td_long_source long_source, td_tok_ids *out,
                        int *bad, char *err, size_t errlen);
/* The same with language lang's token first in every source
 * (td_tok_encode_lang; -1: none). A cut keeps it. */
int td_tok_encode_batch_lang(const td_tokenizer *t, int lang, const char *const *texts,
                             const size_t *lens, int n, int max_len,
                             td_long_source long_source, td_tok_ids *out, int *bad, char *err,
                             size_t errlen);
/* Frees ids[0..n).ids (and sets them NULL); accepts NULL. */
void td_tok_ids_free(td_tok_ids *ids, int n);

/* ---- offsets: where each token's text is ---------------------------------
 * Both fill *off (malloc'd, 2n entries): token i covers bytes
 * [off[2i], off[2i+1]) of its text. The spans are contiguous and cover the
 * text exactly: off[0] = 0, each start is the previous end, the last end is
 * the text's length; the whitespace before a word belongs to the piece that
 * starts the word (its U+2581), and </s> is the empty span at the end.
 * Return 0, or -1 when out of memory. Thread safety: as td_tok_encode. */

/* Source: ids is td_tok_encode(TD_TOK_SOURCE, text, len) (n ids), or
 * td_tok_encode_lang's (its language token first: the empty span [0, 0)). A piece
 * ends at the first character boundary of the text whose normalized prefix
 * reaches the piece's end in the normalized text (so characters the
 * normalizer merged or dropped go to the piece that needs them). */
int td_tok_source_offsets(const td_tokenizer *t, const char *text, size_t len, const int32_t *ids,
                          int n, size_t **off);

/* Target: spans of td_tok_decode(ids, n): token i ends where the decoding
 * of ids[0..i] ends (special tokens add nothing). */
int td_tok_target_offsets(const td_tokenizer *t, const int32_t *ids, int n, size_t **off);

/* The same for td_tok_decode_as(ids, n, repl). */
int td_tok_target_offsets_as(const td_tokenizer *t, const int32_t *ids, int n,
                             const char *const *repl, size_t **off);

int td_tok_eos_id(const td_tokenizer *t);
int td_tok_unk_id(const td_tokenizer *t);
int td_tok_pad_id(const td_tokenizer *t);

#ifdef __cplusplus
}
#endif

#endif /* TD_TOKENIZER_H */
