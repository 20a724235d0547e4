/*
 * tokenizer.c - MarianTokenizer in C (transformers/models/marian/
 * tokenization_marian.py): SentencePiece pieces mapped through vocab.json;
 * with tok_fairseq.c, M2M100's and NLLB-200's layouts too.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spm.h"
#include "tok_internal.h"
#include "tokenizer.h"

/* piece -> id, open addressing over FNV-1a hashes */

/* The vocabulary of a CTranslate2 list (td_tok_list): id i is the list's
 * i-th token (a token listed twice keeps its first id); <unk> and </s> must
 * be there; ids must fit limit when limit > 0. */
static int vocab_from_list(vocab *v, const td_tok_list *l, int limit, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    if (limit > 0 && l->n > limit) {
        snprintf(err, errlen, "%s: %d tokens do not fit the model's vocabulary (%d)", l->file,
                 l->n, limit);
        return -1;
    }
    for (int id = 0; id < l->n; id++) {
        if (tok_vocab_add(v, l->tok[id], id) != 0) {
            snprintf(err, errlen, "%s: out of memory", l->file);
            tok_vocab_free(v);
            return -1;
        }
    }
    tok_vocab_specials(v);
    if (v->unk < 0 || v->eos < 0) {
        snprintf(err, errlen, "%s: the vocabulary must contain <unk> and </s>", l->file);
        tok_vocab_free(v);
        return -1;
    }
    return 0;
}

/* Without vocab.json: CTranslate2's lists, one shared or one a side. */
static int load_lists(td_tokenizer *t, const char *dir, int src_vocab_size, int tgt_vocab_size,
                      char *err, size_t errlen)
{
    td_tok_list ls, lt;
    int rc = td_tok_list_load(&ls, dir, TD_TOK_SOURCE, err, errlen);
    if (rc == 1)
        snprintf(err, errlen, "vocab.json: missing (nor shared_vocabulary.json, "
                 "source_vocabulary.json or their .txt)");
    if (rc != 0)
        return -1;
    rc = -1;
    if (vocab_from_list(&t->src, &ls, src_vocab_size, err, errlen) != 0)
        goto out;
    if (ls.shared) {
        if (tgt_vocab_size > 0 && ls.n > tgt_vocab_size) {
            snprintf(err, errlen, "%s: %d ids do not fit the decoder vocabulary (%d)", ls.file,
                     ls.n, tgt_vocab_size);
            goto out;
        }
        t->tgt = t->src;
        snprintf(t->list_file[0], sizeof t->list_file[0], "%s", ls.file);
        snprintf(t->list_file[1], sizeof t->list_file[1], "%s", ls.file);
        rc = 0;
        goto out;
    }
    int lrc = td_tok_list_load(&lt, dir, TD_TOK_TARGET, err, errlen);
    if (lrc == 1)
        snprintf(err, errlen, "target_vocabulary.json: missing (%s is there)", ls.file);
    if (lrc != 0)
        goto out;
    t->separate = 1;
    snprintf(t->list_file[0], sizeof t->list_file[0], "%s", ls.file);
    snprintf(t->list_file[1], sizeof t->list_file[1], "%s", lt.file);
    rc = vocab_from_list(&t->tgt, &lt, tgt_vocab_size, err, errlen);
    td_tok_list_free(&lt);
out:
    td_tok_list_free(&ls);
    return rc;
}

void td_tok_free(td_tokenizer *t)
{
    if (!t)
        return;
    if (t->spm_tgt != t->spm_src)
        spm_free(t->spm_tgt);
    spm_free(t->spm_src);
    for (int i = 0; i < t->n_langs; i++)
        free(t->lang_code[i]);
    free(t->lang_code);
    free(t->lang_id);
    free(t->special);
    tok_vocab_free(&t->src);
    if (t->separate)
        tok_vocab_free(&t->tgt);
    free(t);
}

/* vocab.json against a SentencePiece model: transformers' MarianTokenizer
 * maps each piece through the vocabulary and a piece that is missing
 * becomes <unk>, silently. A vocabulary cut short (or from another model)
 * therefore loads and tokenizes differently. Pieces of the kinds that
 * encoding produces (normal, user-defined, byte) must be in v; a few may
 * be missing in a genuine export (the test model lacks 6 of the 447 pieces
 * of its target.spm): TD_VOCAB_MISSING_OK allows 5% + 8.
 * Returns the number missing, with the first in *first. */
#define TD_VOCAB_MISSING_OK(n) ((n) / 20 + 8)
static int vocab_missing(const vocab *v, const spm_model *sp, int *n_pieces, const char **first)
{
    int missing = 0;
    *n_pieces = 0;
    *first = NULL;
    for (int id = 0; id < spm_size(sp); id++) {
        spm_piece_type k = spm_piece_kind(sp, id);
        if (k != SPM_NORMAL && k != SPM_USER_DEFINED && k != SPM_BYTE)
            continue;
        (*n_pieces)++;
        const char *p = spm_id_to_piece(sp, id);
        if (p && tok_vocab_find(v, p, strlen(p)) < 0) {
            if (!missing)
                *first = p;
            missing++;
        }
    }
    return missing;
}

static int vocab_check(const vocab *v, const spm_model *sp, const char *vname, const char *sname,
                       char *err, size_t errlen)
{
    int n, missing;
    const char *first;
    missing = vocab_missing(v, sp, &n, &first);
    if (missing > TD_VOCAB_MISSING_OK(n)) {
        snprintf(err, errlen,
                 "%s: %d of the %d pieces of %s are missing (the first: '%.32s'); "
                 "they would all become <unk>",
                 vname, missing, n, sname, first ? first : "");
        return -1;
    }
    return 0;
}

int td_tok_files(const char *const **files, int *n_required)
{
    static const char *const k_files[] = {
        "source.spm", "target.spm",
        "vocab.json|shared_vocabulary.json|shared_vocabulary.txt|source_vocabulary.json|"
        "source_vocabulary.txt",
        "target_vocab.json"};
    *files = k_files;
    *n_required = 3;
    return 4;
}

/* The fairseq layouts keep their SentencePiece model here (tok_fairseq.c). */
static int is_fairseq_dir(const char *dir)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/sentencepiece.bpe.model", dir);
    return stat(path, &sb) == 0;
}

/* metadata.json's target_prefix (multilingual packages: the target's
 * token, which argos-translate gives translate_batch as the target prefix
 * and cuts from the text): its id in the target vocabulary, decoded as
 * nothing. */
static int argos_target_prefix(td_tokenizer *t, const char *dir, char *err, size_t errlen)
{
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/metadata.json", dir);
    json_error_t je;
    json_t *meta = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size <= 65536
                       ? json_load_file(path, 0, &je)
                       : NULL;
    const json_t *v = json_object_get(meta, "target_prefix");
    int rc = 0;
    if (json_is_string(v) && json_string_length(v) > 0) {
        const char *p = json_string_value(v);
        int id = tok_vocab_find(&t->tgt, p, strlen(p));
        if (id < 0) {
            snprintf(err, errlen, "metadata.json: target_prefix '%.64s' is not a token of %s", p,
                     t->list_file[1]);
            rc = -1;
        } else {
            t->special = malloc(sizeof *t->special);
            if (!t->special) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
            } else {
                t->special[0] = id;
                t->n_special = 1;
                t->target_prefix = id;
            }
        }
    }
    json_decref(meta);
    return rc;
}

/* An Argos Translate package (td_tok_argos_package): argos-translate
 * encodes the source with sentencepiece.model into pieces and decodes the
 * target's pieces with it (joined, U+2581 a space), CTranslate2 maps pieces
 * to ids through model/'s vocabularies. A package of subword-nmt codes
 * (bpe.model) is refused by name. */
static int load_argos(td_tokenizer *t, const char *dir, int src_vocab_size, int tgt_vocab_size,
                      char *err, size_t errlen)
{
    char path[4200], e2[512];
    struct stat sb;
    snprintf(path, sizeof path, "%s/sentencepiece.model", dir);
    if (stat(path, &sb) != 0) {
        snprintf(path, sizeof path, "%s/bpe.model", dir);
        if (stat(path, &sb) == 0)
            snprintf(err, errlen, "bpe.model: packages of BPE codes (subword-nmt) are not "
                     "supported; a package with sentencepiece.model is");
        else
            snprintf(err, errlen, "sentencepiece.model: missing (nor bpe.model): not a "
                     "translation package");
        return -1;
    }
    if (spm_load(&t->spm_src, path, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "sentencepiece.model: %s", e2);
        return -1;
    }
    t->spm_tgt = t->spm_src;
    /* CTranslate2 appends </s> itself only when config.json says so */
    snprintf(path, sizeof path, "%s/model/config.json", dir);
    json_error_t je;
    json_t *cfg = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? json_load_file(path, 0, &je) : NULL;
    t->no_eos = !(cfg && json_is_true(json_object_get(cfg, "add_source_eos")));
    json_decref(cfg);
    snprintf(path, sizeof path, "%s/model", dir);
    if (load_lists(t, path, src_vocab_size, tgt_vocab_size, err, errlen) != 0)
        return -1;
    if (argos_target_prefix(t, dir, err, errlen) != 0)
        return -1;
    if (vocab_check(&t->src, t->spm_src, t->list_file[0], "sentencepiece.model", err,
                    errlen) != 0 ||
        vocab_check(&t->tgt, t->spm_tgt, t->list_file[1], "sentencepiece.model", err,
                    errlen) != 0)
        return -1;
    return 0;
}

int td_tok_target_prefix(const td_tokenizer *t)
{
    return t->target_prefix;
}

int td_tok_argos_package(const char *dir)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/metadata.json", dir);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    snprintf(path, sizeof path, "%s/model", dir);
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int td_tok_files_in(const char *dir, const char *const **files, int *n_required)
{
    /* an Argos Translate package: one SentencePiece model for both sides,
     * the vocabularies of the CTranslate2 model in model/ */
    static const char *const k_argos[] = {
        "sentencepiece.model",
        "model/shared_vocabulary.json|model/shared_vocabulary.txt|"
        "model/source_vocabulary.json|model/source_vocabulary.txt"};
    if (dir && td_tok_argos_package(dir)) {
        *files = k_argos;
        *n_required = 2;
        return 2;
    }
    /* M2M100 (vocab.json) or NLLB: the SentencePiece model is what both need */
    static const char *const k_fairseq[] = {"sentencepiece.bpe.model", "vocab.json",
                                            "tokenizer_config.json", "tokenizer.json",
                                            "special_tokens_map.json", "added_tokens.json"};
    if (dir && is_fairseq_dir(dir)) {
        *files = k_fairseq;
        *n_required = 1;
        return 6;
    }
    return td_tok_files(files, n_required);
}

int td_tok_load(td_tokenizer **out, const char *dir, int src_vocab_size, int tgt_vocab_size,
                char *err, size_t errlen)
{
    *out = NULL;
    td_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    t->target_prefix = -1;
    if (td_tok_argos_package(dir)) {
        if (load_argos(t, dir, src_vocab_size, tgt_vocab_size, err, errlen) != 0) {
            if (!t->separate)
                memset(&t->tgt, 0, sizeof t->tgt);
            td_tok_free(t);
            return -1;
        }
        *out = t;
        return 0;
    }
    if (is_fairseq_dir(dir)) {
        /* one vocabulary, shared (M2M100's shared embeddings) */
        int vs = src_vocab_size > 0 && tgt_vocab_size > 0 && tgt_vocab_size < src_vocab_size
                     ? tgt_vocab_size
                     : src_vocab_size;
        if (tok_fairseq_load(t, dir, vs, err, errlen) != 0) {
            td_tok_free(t); /* tgt aliases src (separate is 0) */
            return -1;
        }
        *out = t;
        return 0;
    }
    char path[4096], e2[512];
    /* the files named in td_tok_files' table, in its order */
    snprintf(path, sizeof path, "%s/source.spm", dir);
    if (spm_load(&t->spm_src, path, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "source.spm: %s", e2);
        goto fail;
    }
    snprintf(path, sizeof path, "%s/target.spm", dir);
    if (spm_load(&t->spm_tgt, path, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "target.spm: %s", e2);
        goto fail;
    }
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    struct stat tsb;
    const char *vsrc = "vocab.json", *vtgt = "vocab.json";
    if (stat(path, &tsb) != 0 && errno == ENOENT) {
        /* a CTranslate2 directory */
        if (load_lists(t, dir, src_vocab_size, tgt_vocab_size, err, errlen) != 0)
            goto fail;
        vsrc = t->list_file[0];
        vtgt = t->list_file[1];
    } else {
        snprintf(path, sizeof path, "%s/target_vocab.json", dir);
        t->separate = stat(path, &tsb) == 0; /* not opened here: it may be a FIFO */
        snprintf(path, sizeof path, "%s/vocab.json", dir);
        if (tok_vocab_load(&t->src, path, "vocab.json", src_vocab_size, err, errlen) != 0)
            goto fail;
        if (t->separate) {
            snprintf(path, sizeof path, "%s/target_vocab.json", dir);
            if (tok_vocab_load(&t->tgt, path, "target_vocab.json", tgt_vocab_size, err, errlen) != 0)
                goto fail;
        } else {
            if (tgt_vocab_size > 0 && t->src.n_ids > tgt_vocab_size) {
                snprintf(err, errlen, "vocab.json: %d ids do not fit the decoder vocabulary (%d)",
                         t->src.n_ids, tgt_vocab_size);
                goto fail;
            }
            t->tgt = t->src;
        }
        vtgt = t->separate ? "target_vocab.json" : "vocab.json";
    }
    if (vocab_check(&t->src, t->spm_src, vsrc, "source.spm", err, errlen) != 0 ||
        vocab_check(&t->tgt, t->spm_tgt, vtgt, "target.spm", err, errlen) != 0)
        goto fail;
    *out = t;
    return 0;
fail:
    if (!t->separate)
        memset(&t->tgt, 0, sizeof t->tgt);
    td_tok_free(t);
    return -1;
}

typedef struct idbuf {
    int32_t *v;
    int n, cap;
} idbuf;

static int push(idbuf *b, int32_t id)
{
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 32;
        int32_t *p = realloc(b->v, (size_t)cap * sizeof(int32_t));
        if (!p)
            return -1;
        b->v = p;
        b->cap = cap;
    }
    b->v[b->n++] = id;
    return 0;
}

/* MarianTokenizer._tokenize on one chunk of text that holds no special
 * token: a leading ">>xx<<" becomes one token (remove_language_code), the
 * rest is encoded into pieces by SentencePiece and each piece (as a string)
 * looked up in the vocabulary. */
static int encode_chunk(const spm_model *sp, const vocab *v, int marian, const char *text,
                        size_t len, idbuf *b)
{
    if (marian && len >= 4 && text[0] == '>' && text[1] == '>') {
        const char *end = NULL;
        for (size_t i = 2; i + 1 < len; i++)
            if (text[i] == '<' && text[i + 1] == '<') {
                end = text + i + 2;
                break;
            }
        if (end) {
            size_t cl = (size_t)(end - text);
            int id = tok_vocab_find(v, text, cl);
            if (push(b, id >= 0 ? id : v->unk))
                return -1;
            len -= cl;
            text = end;
        }
    }
    if (len == 0)
        return 0;
    int32_t *sid = NULL;
    int sn = 0;
    char *norm = NULL;
    size_t *spans = NULL;
    size_t norm_len = 0;
    if (spm_encode_pieces(sp, text, len, &sid, &sn, &norm, &norm_len, &spans) != 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < sn && rc == 0; i++) {
        /* the piece as a string (MarianTokenizer encodes out_type=str): an
         * unknown piece is the text it covers, looked up as such */
        const char *piece = spm_id_to_piece(sp, sid[i]);
        size_t pl = piece ? strlen(piece) : 0;
        if (spm_piece_kind(sp, sid[i]) == SPM_UNKNOWN) {
            piece = norm + spans[2 * i];
            pl = spans[2 * i + 1];
        }
        int id = piece ? tok_vocab_find(v, piece, pl) : -1;
        rc = push(b, id >= 0 ? id : v->unk);
    }
    free(sid);
    free(norm);
    free(spans);
    return rc;
}

int td_tok_encode(const td_tokenizer *t, td_tok_side side, const char *text, size_t len,
                  int32_t **ids, int *n)
{
    return td_tok_encode_lang(t, side, -1, text, len, ids, n);
}

int td_tok_encode_lang(const td_tokenizer *t, td_tok_side side, int lang, const char *text,
                       size_t len, int32_t **ids, int *n)
{
    const spm_model *sp = side == TD_TOK_TARGET ? t->spm_tgt : t->spm_src;
    const vocab *v = side == TD_TOK_TARGET ? &t->tgt : &t->src;
    const int marian = t->layout == TOK_MARIAN;
    idbuf b = {0};
    *ids = NULL;
    *n = 0;
    /* M2M100 and NLLB (transformers 5, legacy_behaviour false): the
     * language's token first (set_src_lang_special_tokens' prefix) */
    if (lang >= 0 && lang < t->n_langs && push(&b, t->lang_id[lang]))
        goto oom;
    /* PreTrainedTokenizer.tokenize: the special tokens' strings split the
     * text (leftmost, longest first; no strip on either side) and stand for
     * their ids; the chunks between are tokenized on their own. */
    int specials[3] = {v->eos, v->unk, v->pad};
    size_t start = 0;
    for (size_t i = 0; i < len;) {
        int hit = -1;
        size_t hit_len = 0;
        if (text[i] == '<') {
            for (int k = 0; k < 3; k++) {
                if (specials[k] < 0)
                    continue;
                const char *sv = v->piece_of[specials[k]];
                size_t sl = strlen(sv);
                if (sl > hit_len && sl <= len - i && memcmp(text + i, sv, sl) == 0) {
                    hit = specials[k];
                    hit_len = sl;
                }
            }
        }
        if (hit < 0) {
            i++;
            continue;
        }
        if (encode_chunk(sp, v, marian, text + start, i - start, &b) || push(&b, hit))
            goto oom;
        i += hit_len;
        start = i;
    }
    if (encode_chunk(sp, v, marian, text + start, len - start, &b))
        goto oom;
    if (!t->no_eos && push(&b, v->eos))
        goto oom;
    *ids = b.v;
    *n = b.n;
    return 0;
oom:
    free(b.v);
    return -1;
}

/* The piece of id on a side: the vocabulary's, else the spm piece with the
 * same number (MarianTokenizer._convert_id_to_token), else "<unk>". */
static const char *piece_of(const vocab *v, const spm_model *sp, int id)
{
    if (id >= 0 && id < v->n_ids && v->piece_of[id])
        return v->piece_of[id];
    const char *p = spm_id_to_piece(sp, id);
    return p ? p : "<unk>";
}

int td_tok_pieces(const td_tokenizer *t, td_tok_side side, const int32_t *ids, int n,
                  const char ***pieces)
{
    const vocab *v = side == TD_TOK_TARGET ? &t->tgt : &t->src;
    const spm_model *sp = side == TD_TOK_TARGET ? t->spm_tgt : t->spm_src;
    *pieces = malloc((size_t)(n > 0 ? n : 1) * sizeof(char *));
    if (!*pieces)
        return -1;
    for (int i = 0; i < n; i++)
        (*pieces)[i] = piece_of(v, sp, ids[i]);
    return 0;
}

int td_tok_decode(const td_tokenizer *t, const int32_t *ids, int n, char **text)
{
    return td_tok_decode_as(t, ids, n, NULL, text);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int td_tok_decode_as(const td_tokenizer *t, const int32_t *ids, int n, const char *const *repl,
                     char **text)
{
    const vocab *v = &t->tgt;
    /* MarianTokenizer._decode: shared vocabularies decode with the source
     * model, separate ones with the target model. */
    const spm_model *sp = t->separate ? t->spm_tgt : t->spm_src;
    const char **pieces = malloc((size_t)(n > 0 ? n : 1) * sizeof(char *));
    if (!pieces)
        return -1;
    int k = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (repl && repl[i]) {
            pieces[k++] = repl[i];
            continue;
        }
        /* skip_special_tokens: </s>, <unk>, <pad>, and the special added
         * tokens of the fairseq layouts (<s>, <mask>, the languages) */
        if (id == v->eos || id == v->unk || id == v->pad ||
            (t->n_special && bsearch(&id, t->special, (size_t)t->n_special, sizeof(int32_t),
                                     cmp_i32)))
            continue;
        pieces[k++] = piece_of(v, sp, id);
    }
    char *raw = NULL;
    size_t rl = 0;
    int rc = spm_decode_pieces(sp, pieces, k, &raw, &rl);
    free(pieces);
    if (rc != 0)
        return -1;
    /* .replace("\u2581", " ").strip() — Python's str.strip() removes every
     * Unicode whitespace; the ASCII ones and U+2581 cover what decoding
     * leaves at the ends. */
    size_t w = 0;
    for (size_t i = 0; i < rl;) {
        if (i + 2 < rl && (unsigned char)raw[i] == 0xE2 && (unsigned char)raw[i + 1] == 0x96 &&
            (unsigned char)raw[i + 2] == 0x81) {
            raw[w++] = ' ';
            i += 3;
        } else {
            raw[w++] = raw[i++];
        }
    }
    size_t a = 0, b = w;
    while (a < b && (raw[a] == ' ' || (raw[a] >= '\t' && raw[a] <= '\r') ||
                     (raw[a] >= 0x1c && raw[a] <= 0x1f)))
        a++;
    while (b > a && (raw[b - 1] == ' ' || (raw[b - 1] >= '\t' && raw[b - 1] <= '\r') ||
                     (raw[b - 1] >= 0x1c && raw[b - 1] <= 0x1f)))
        b--;
    memmove(raw, raw + a, b - a);
    raw[b - a] = 0;
    *text = raw;
    return 0;
}

int td_tok_n_langs(const td_tokenizer *t)
{
    return t->n_langs;
}

const char *td_tok_lang(const td_tokenizer *t, int i)
{
    return i >= 0 && i < t->n_langs ? t->lang_code[i] : NULL;
}

int td_tok_lang_find(const td_tokenizer *t, const char *code)
{
    for (int i = 0; code && i < t->n_langs; i++)
        if (strcmp(t->lang_code[i], code) == 0)
            return i;
    return -1;
}

int32_t td_tok_lang_token(const td_tokenizer *t, int i)
{
    return i >= 0 && i < t->n_langs ? t->lang_id[i] : -1;
}

int td_tok_eos_id(const td_tokenizer *t)
{
    return t->src.eos;
}

int td_tok_unk_id(const td_tokenizer *t)
{
    return t->src.unk;
}

int td_tok_pad_id(const td_tokenizer *t)
{
    return t->src.pad;
}

/* ---- offsets --------------------------------------------------------------- */

typedef struct offbuf {
    size_t *v; /* pairs */
    int n, cap;
} offbuf;

static int off_push(offbuf *o, size_t start, size_t end)
{
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 32;
        size_t *p = realloc(o->v, (size_t)cap * 2 * sizeof(size_t));
        if (!p)
            return -1;
        o->v = p;
        o->cap = cap;
    }
    o->v[2 * o->n] = start;
    o->v[2 * o->n + 1] = end;
    o->n++;
    return 0;
}

/* Where a piece that ends want bytes into the normalized text ends in
 * text[0..len): the first character boundary j, lo < j <= len, whose
 * normalized prefix text[0..j) is at least want bytes long (a binary
 * search, the normalized length growing with the prefix), or the boundary
 * before it (see below); len when none is. */
static int first_reach(const spm_model *sp, const char *text, size_t len, size_t lo,
                       size_t want, size_t *out)
{
    size_t *cb = malloc((len - lo + 1) * sizeof *cb), k = 0;
    if (!cb)
        return -1;
    for (size_t p = lo + 1; p <= len; p++)
        if (p == len || ((unsigned char)text[p] & 0xC0) != 0x80)
            cb[k++] = p;
    size_t a = 0, b = k, at_b = 0; /* the answer's index in [a, b]; b = k: none */
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        char *norm = NULL;
        size_t nl = 0;
        if (spm_normalize(sp, text, cb[mid], &norm, &nl) != 0) {
            free(cb);
            return -1;
        }
        free(norm);
        if (nl >= want) {
            b = mid;
            at_b = nl;
        } else {
            a = mid + 1;
        }
    }
    /* Past want: the last character's output straddles the boundary (the
     * U+2581 it brings, or a character the normalizer expanded), so it
     * belongs to the next piece. */
    if (b < k && at_b > want)
        *out = b > 0 ? cb[b - 1] : lo;
    else
        *out = b < k ? cb[b] : len;
    free(cb);
    return 0;
}

/* The spans of one chunk (as encode_chunk tokenizes it), shifted by base. */
static int chunk_offsets(const spm_model *sp, const char *text, size_t len, size_t base,
                         offbuf *o)
{
    if (len >= 4 && text[0] == '>' && text[1] == '>') {
        for (size_t i = 2; i + 1 < len; i++)
            if (text[i] == '<' && text[i + 1] == '<') {
                if (off_push(o, base, base + i + 2))
                    return -1;
                text += i + 2;
                len -= i + 2;
                base += i + 2;
                break;
            }
    }
    if (len == 0)
        return 0;
    int32_t *sid = NULL;
    int sn = 0;
    char *norm = NULL;
    size_t *spans = NULL, nlen = 0;
    if (spm_encode_pieces(sp, text, len, &sid, &sn, &norm, &nlen, &spans) != 0)
        return -1;
    int rc = 0;
    size_t start = 0;
    for (int i = 0; i < sn && rc == 0; i++) {
        size_t end = len;
        if (i + 1 < sn)
            rc = first_reach(sp, text, len, start, spans[2 * i] + spans[2 * i + 1], &end);
        if (rc == 0)
            rc = off_push(o, base + start, base + end);
        start = end;
    }
    free(sid);
    free(norm);
    free(spans);
    return rc;
}

int td_tok_source_offsets(const td_tokenizer *t, const char *text, size_t len, const int32_t *ids,
                          int n, size_t **off)
{
    const vocab *v = &t->src;
    offbuf o = {0};
    *off = NULL;
    /* td_tok_encode_lang's language token: the empty span at the start */
    for (int k = 0; n > 0 && k < t->n_langs; k++)
        if (ids[0] == t->lang_id[k]) {
            if (off_push(&o, 0, 0))
                goto oom;
            break;
        }
    /* the chunks of td_tok_encode */
    int specials[3] = {v->eos, v->unk, v->pad};
    size_t start = 0;
    for (size_t i = 0; i < len;) {
        size_t hit_len = 0;
        if (text[i] == '<') {
            for (int k = 0; k < 3; k++) {
                if (specials[k] < 0)
                    continue;
                const char *sv = v->piece_of[specials[k]];
                size_t sl = strlen(sv);
                if (sl > hit_len && sl <= len - i && memcmp(text + i, sv, sl) == 0)
                    hit_len = sl;
            }
        }
        if (!hit_len) {
            i++;
            continue;
        }
        if (chunk_offsets(t->spm_src, text + start, i - start, start, &o) ||
            off_push(&o, i, i + hit_len))
            goto oom;
        i += hit_len;
        start = i;
    }
    if (chunk_offsets(t->spm_src, text + start, len - start, start, &o) ||
        off_push(&o, len, len))
        goto oom;
    /* as many spans as td_tok_encode's tokens, covering the text: the
     * first starts at 0, and whitespace that gave no piece (leading, or
     * alone between two special tokens) goes to the span before it */
    while (o.n < n)
        if (off_push(&o, len, len))
            goto oom;
    if (o.n > 0)
        o.v[0] = 0;
    for (int i = 1; i < o.n; i++)
        if (o.v[2 * i] != o.v[2 * i - 1])
            o.v[2 * i - 1] = o.v[2 * i];
    *off = o.v;
    return 0;
oom:
    free(o.v);
    return -1;
}

int td_tok_target_offsets(const td_tokenizer *t, const int32_t *ids, int n, size_t **off)
{
    return td_tok_target_offsets_as(t, ids, n, NULL, off);
}

int td_tok_target_offsets_as(const td_tokenizer *t, const int32_t *ids, int n,
                             const char *const *repl, size_t **off)
{
    *off = malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof(size_t));
    char *full = NULL;
    if (!*off || td_tok_decode_as(t, ids, n, repl, &full) != 0) {
        free(*off);
        *off = NULL;
        return -1;
    }
    size_t total = strlen(full), prev = 0;
    free(full);
    for (int i = 0; i < n; i++) {
        size_t end = total;
        if (i + 1 < n) {
            char *p = NULL;
            if (td_tok_decode_as(t, ids, i + 1, repl, &p) != 0) {
                free(*off);
                *off = NULL;
                return -1;
            }
            end = strlen(p);
            free(p);
            if (end > total)
                end = total;
            if (end < prev)
                end = prev;
        }
        (*off)[2 * i] = prev;
        (*off)[2 * i + 1] = end;
        prev = end;
    }
    return 0;
}
