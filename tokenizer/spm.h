/*
 * spm.h - SentencePiece in C: load a .spm/.model ModelProto and encode /
 * decode exactly as the reference library (google/sentencepiece) does, with
 * no C++ or Python dependency. Prefix spm_.
 *
 * Covers: the ModelProto wire format (pieces, trainer_spec, normalizer_spec,
 * denormalizer_spec); the normalizer (precompiled charsmap: a Darts
 * double-array trie over UTF-8 plus the replacement strings, longest match;
 * malformed UTF-8 becomes U+FFFD; add_dummy_prefix, remove_extra_whitespaces,
 * escape_whitespaces with U+2581); the unigram encoder (Viterbi over the
 * lattice, user-defined symbols, unknown runs merged, byte fallback) and the
 * BPE encoder; decoding of ids back to text with byte pieces reassembled.
 *
 * Ids here are the model's own piece ids. The Marian vocabulary mapping
 * (vocab.json) is a layer above (tokenizer.h).
 *
 * Thread safety: an spm_model is immutable after load; encode/decode may be
 * called from any number of threads at once.
 *
 * Errors: load functions return 0, or -1 with a message in err naming the
 * file and the field. Encode/decode never fail on bad input text (invalid
 * UTF-8, NUL bytes, huge lines have defined results); they return -1 only
 * when memory runs out.
 */
#ifndef TD_SPM_H
#define TD_SPM_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum spm_piece_type {
    SPM_NORMAL = 1,
    SPM_UNKNOWN = 2,
    SPM_CONTROL = 3,
    SPM_USER_DEFINED = 4,
    SPM_UNUSED = 5,
    SPM_BYTE = 6,
} spm_piece_type;

typedef enum spm_model_type {
    SPM_UNIGRAM = 1,
    SPM_BPE = 2,
    SPM_WORD = 3,
    SPM_CHAR = 4,
} spm_model_type;

typedef struct spm_model spm_model;

/* Loads a serialized ModelProto from a file / from memory (copied). */
int spm_load(spm_model **out, const char *path, char *err, size_t errlen);

/* Opens path for reading ("rb") only when it is a regular file (a FIFO,
 * device or directory named like a model file is refused without blocking):
 * NULL with *not_regular set when it exists but is not regular, NULL with
 * errno otherwise. Also used by the model's own loaders. */
FILE *spm_fopen_regular(const char *path, int *not_regular);
int spm_load_mem(spm_model **out, const void *data, size_t size, const char *name,
                 char *err, size_t errlen);
void spm_free(spm_model *m); /* accepts NULL */

int spm_size(const spm_model *m);                    /* number of pieces */
spm_model_type spm_type(const spm_model *m);
const char *spm_id_to_piece(const spm_model *m, int id); /* NULL out of range */
spm_piece_type spm_piece_kind(const spm_model *m, int id);
float spm_piece_score(const spm_model *m, int id);
int spm_piece_to_id(const spm_model *m, const char *piece, size_t len); /* unk id if absent */
int spm_unk_id(const spm_model *m);
int spm_bos_id(const spm_model *m);                  /* -1 when disabled */
int spm_eos_id(const spm_model *m);
int spm_pad_id(const spm_model *m);

/* Normalizes text (any bytes, len given) as the reference's Normalizer does
 * before encoding: the result (malloc'd, NUL-terminated, *out_len bytes) is
 * what the encoder segments. */
int spm_normalize(const spm_model *m, const char *text, size_t len, char **out,
                  size_t *out_len);

/* Encodes text into piece ids (malloc'd *ids, *n entries), exactly as
 * SentencePieceProcessor::Encode / Python sp.encode(text). No bos/eos added. */
int spm_encode(const spm_model *m, const char *text, size_t len, int32_t **ids, int *n);

/* spm_encode plus the text of every piece, as EncodeAsPieces returns it:
 * piece i is (*norm)[spans[2i] .. spans[2i] + spans[2i+1]) of the
 * normalized text *norm (malloc'd, *norm_len bytes plus a NUL; it may hold
 * NUL bytes of its own: a NUL in the input is a character). For known pieces that
 * is the piece itself; for an unknown piece it is the text it covers (a
 * run of unknowns is one piece), which is what MarianTokenizer looks up in
 * vocab.json. Free *ids, *norm and *spans. */
int spm_encode_pieces(const spm_model *m, const char *text, size_t len, int32_t **ids, int *n,
                      char **norm, size_t *norm_len, size_t **spans);

/* Decodes ids into text (malloc'd, NUL-terminated), exactly as
 * SentencePieceProcessor::Decode: control pieces dropped, byte pieces
 * reassembled (invalid sequences become U+FFFD), U+2581 back to spaces,
 * the leading dummy-prefix space removed, the denormalizer applied. */
int spm_decode(const spm_model *m, const int32_t *ids, int n, char **text, size_t *len);

/* Decodes piece strings (SentencePieceProcessor::DecodePieces): each piece
 * is looked up by its text; a piece the model does not know is emitted
 * verbatim (U+2581 still becomes a space), the <unk> piece itself as the
 * unk surface; otherwise as spm_decode. */
int spm_decode_pieces(const spm_model *m, const char *const *pieces, int n, char **text,
                      size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* TD_SPM_H */
