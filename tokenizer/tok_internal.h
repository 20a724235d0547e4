/*
 * tok_internal.h - what the tokenizer's files share: the vocabulary
 * (tok_vocab.c), the tokenizer's state and the loader of the fairseq
 * layouts, M2M100's and NLLB-200's (tok_fairseq.c). Not a public header.
 */
#ifndef TD_TOK_INTERNAL_H
#define TD_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "spm.h"

/* piece -> id, open addressing over FNV-1a hashes; id -> piece */
typedef struct vocab {
    char **piece_of;    /* (n_ids) id -> piece, NULL for holes */
    int n_ids;          /* max id + 1 */
    int cap_ids;        /* entries piece_of has room for (>= n_ids; tok_vocab_add) */
    int32_t *slots;     /* (cap) ids, -1 empty */
    size_t cap;
    size_t used;        /* pieces held */
    int unk, eos, pad;
} vocab;

/* The id of piece s[0..n), -1 when absent. */
int tok_vocab_find(const vocab *v, const char *s, size_t n);
void tok_vocab_free(vocab *v);
/* Loads a vocab.json (object piece -> id). Ids must be unique, in
 * [0, limit) when limit > 0; <unk> and </s> must be present (transformers
 * raises without <unk>). fname names the file in messages. */
int tok_vocab_load(vocab *v, const char *path, const char *fname, int limit, char *err,
                   size_t errlen);
/* Adds piece s as id (a hole, or past the end: the vocabulary grows).
 * 0, or -1 when out of memory or when id already has a piece. */
int tok_vocab_add(vocab *v, const char *s, int32_t id);
/* Sets unk, eos and pad from the pieces <unk>, </s> and <pad> (-1 when
 * absent). */
void tok_vocab_specials(vocab *v);

typedef enum tok_layout {
    TOK_MARIAN = 0, /* source.spm, target.spm, vocab.json (MarianTokenizer) */
    TOK_M2M100,     /* sentencepiece.bpe.model + vocab.json, __xx__ languages */
    TOK_NLLB,       /* sentencepiece.bpe.model with fairseq's id offset, xxx_Yyyy languages */
} tok_layout;

struct td_tokenizer {
    spm_model *spm_src, *spm_tgt; /* spm_tgt = spm_src but for Marian's two files */
    vocab src, tgt;     /* tgt aliases src when the vocabulary is shared */
    int separate;
    char list_file[2][64]; /* CTranslate2's vocabulary files (source, target), for messages */
    int32_t target_prefix; /* an Argos package's metadata.json target_prefix: the token
                              forced first and left out of the text; -1 none */
    int no_eos;         /* no </s> after the text: an Argos package whose model does not
                           add one (config.json's add_source_eos; argos-translate gives
                           CTranslate2 the pieces alone) */
    tok_layout layout;
    /* the languages of a multilingual model: the code a caller names
     * ("de", "deu_Latn") and its token's id, in the files' order */
    int n_langs;
    char **lang_code;   /* (n_langs) */
    int32_t *lang_id;   /* (n_langs) */
    /* ids decoding skips besides </s>, <unk>, <pad>: the special added
     * tokens (<s>, <mask>, the languages), sorted */
    int32_t *special;   /* (n_special) */
    int n_special;
};

/* Loads the fairseq layouts from dir (sentencepiece.bpe.model present):
 * M2M100's when vocab.json is there, NLLB's otherwise; vocab_size is the
 * model's (0: no check). 0, or -1 with a message naming the file; t holds
 * what was loaded either way (td_tok_free it). */
int tok_fairseq_load(struct td_tokenizer *t, const char *dir, int vocab_size, char *err,
                     size_t errlen);

#endif /* TD_TOK_INTERNAL_H */
