/*
 * spm_internal.h - private to tokenizer/spm*.c: the parsed ModelProto, the byte
 * trie used for piece lookup, and the normalizer shared by spm.c,
 * spm_proto.c and spm_normalizer.c. Not part of the public API (spm.h).
 */
#ifndef TD_SPM_INTERNAL_H
#define TD_SPM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spm.h"

/* One ModelProto.SentencePiece. */
typedef struct spm_piece {
    char *s;      /* bytes of the piece, NUL-terminated (may contain NULs) */
    size_t len;   /* length of s in bytes */
    float score;
    int type;     /* spm_piece_type; NORMAL when absent or unknown */
} spm_piece;

/* NormalizerSpec (the fields that change encode/decode results). */
typedef struct spm_normspec {
    char *name;             /* NULL when absent */
    char *charsmap;         /* precompiled_charsmap bytes, NULL when absent */
    size_t charsmap_len;
    bool add_dummy_prefix;  /* default true */
    bool remove_extra_whitespaces; /* default true */
    bool escape_whitespaces; /* default true */
} spm_normspec;

/* The subset of ModelProto that encode/decode depend on. */
typedef struct spm_proto {
    spm_piece *pieces; /* (npieces) */
    int npieces;
    int cap;
    /* trainer_spec */
    int model_type;     /* spm_model_type, default UNIGRAM */
    int vocab_size;     /* default 8000; informational */
    bool byte_fallback; /* default false */
    bool treat_whitespace_as_suffix; /* default false */
    int unk_id, bos_id, eos_id, pad_id; /* defaults 0, 1, 2, -1; informational */
    char *unk_piece, *bos_piece, *eos_piece, *pad_piece; /* NULL: default */
    char *unk_surface;  /* NULL: default " \xE2\x81\x87 " */
    spm_normspec norm;
    spm_normspec denorm;
    bool has_denorm;
} spm_proto;

/* Parses a serialized ModelProto into *p (zeroed by the caller; defaults are
 * set here). Returns 0, or -1 with "name: field: problem" in err. On failure
 * *p may hold partial data: release it with spm_proto_clear. */
int spm_proto_parse(spm_proto *p, const uint8_t *data, size_t size, const char *name,
                    char *err, size_t errlen);
void spm_proto_clear(spm_proto *p); /* accepts a zeroed or half-built proto */

/* A byte trie: node 0 is the root; each node may carry a value (a piece id).
 * Transitions live in one open-addressing hash keyed by (node, byte). */
typedef struct spm_trie {
    uint64_t *keys;   /* (cap) node*256+byte+1, 0 = empty slot */
    uint32_t *child;  /* (cap) target node of the transition */
    size_t cap;       /* power of two */
    size_t nedges;
    int32_t *value;   /* (nnodes) piece id or -1 */
    size_t nnodes, vcap;
} spm_trie;

int spm_trie_init(spm_trie *t);
void spm_trie_free(spm_trie *t);
/* Inserts key -> value; returns 0, 1 when the key was already present (value
 * left unchanged), -1 on allocation failure. */
int spm_trie_insert(spm_trie *t, const char *key, size_t len, int32_t value);
/* Child of node by byte, or -1. */
int64_t spm_trie_next(const spm_trie *t, uint32_t node, unsigned char byte);
/* Exact lookup; -1 when absent. */
int32_t spm_trie_find(const spm_trie *t, const char *key, size_t len);

/* A compiled normalizer (normalizer or denormalizer spec). */
typedef struct spm_norm {
    uint32_t *units;     /* (nunits) Darts-clone double-array units, host order */
    size_t nunits;
    const char *repl;    /* NUL-separated replacement strings (points into the spec) */
    size_t repl_len;
    bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    bool treat_whitespace_as_suffix;
} spm_norm;

/* Builds a normalizer from a spec. Returns 0, or -1 with a message (blob
 * broken or out of memory). */
int spm_norm_init(spm_norm *n, const spm_normspec *spec, bool treat_ws_as_suffix,
                  const char *name, char *err, size_t errlen);
void spm_norm_free(spm_norm *n);

/* Longest user-defined symbol that prefixes the input: returns its length in
 * bytes or 0. Supplied by spm.c (the "PrefixMatcher" of the reference). */
typedef size_t (*spm_prefix_matcher)(const void *ctx, const char *s, size_t len);

/* Runs the reference Normalizer::Normalize over text. The result is
 * malloc'd and NUL-terminated. Returns 0 or -1 on allocation failure. */
int spm_norm_apply(const spm_norm *n, spm_prefix_matcher matcher, const void *mctx,
                   const char *text, size_t len, char **out, size_t *out_len);

/* A growable byte buffer; kept NUL-terminated. On allocation failure the
 * put functions return -1 and the buffer keeps its old contents. */
typedef struct spm_buf {
    char *p;
    size_t n, cap;
} spm_buf;

int spm_buf_reserve(spm_buf *b, size_t extra);
int spm_buf_put(spm_buf *b, const void *s, size_t n);

/* UTF-8 helpers with the reference's exact rules (util.h / util.cc). */
size_t spm_one_char_len(unsigned char c);
/* Decodes one character: returns true when valid (a literal U+FFFD is
 * valid), storing the byte count in *mblen (1 for invalid input). */
bool spm_valid_decode_utf8(const char *s, size_t len, size_t *mblen);

/* The loaded model (spm.c builds it; spm_encode.c reads it). Immutable
 * after spm_load. */
struct spm_model {
    spm_proto p;
    spm_trie normal;   /* NORMAL, USER_DEFINED, UNUSED pieces -> id ("pieces_") */
    spm_trie reserved; /* CONTROL, UNKNOWN, BYTE pieces -> id ("reserved_id_map_") */
    spm_trie user;     /* USER_DEFINED only: the normalizer's PrefixMatcher */
    bool has_user;
    bool has_unused;
    spm_norm norm;
    spm_norm denorm;
    bool has_denorm;
    int unk_id;        /* index of the UNKNOWN piece */
    float min_score, max_score; /* over NORMAL pieces, as unigram::Model */
    int32_t byte_id[256];       /* PieceToId("<0x00>".."<0xFF>"), byte_fallback */
    int16_t *piece_byte;        /* (npieces) PieceToByte(piece) or -1 */
};

/* Piece type of a valid id. */
static inline int spm_ptype(const spm_model *m, int id) { return m->p.pieces[id].type; }

/* The normalizer's user-defined-symbol PrefixMatcher over m->user: length of
 * the longest user-defined symbol prefixing s, 0 when none. ctx: spm_trie. */
size_t spm_user_match(const void *ctx, const char *s, size_t len);

#endif /* TD_SPM_INTERNAL_H */
