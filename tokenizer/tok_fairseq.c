/*
 * tok_fairseq.c - the tokenizer layouts of fairseq's multilingual models as
 * transformers saves them: M2M100Tokenizer (models/m2m_100/
 * tokenization_m2m_100.py) and NllbTokenizer (models/nllb/
 * tokenization_nllb.py).
 *
 * M2M100: sentencepiece.bpe.model encodes, vocab.json maps each piece to
 * its id (fairseq's dictionary: <s> 0, <pad> 1, </s> 2, <unk> 3, then the
 * pieces by frequency). A language is a token "__de__"; transformers gives
 * it the id len(vocab.json) + its place in the list of languages.
 * NLLB: no vocab.json; a piece's id is its SentencePiece id + 1 (fairseq's
 * offset), but for fairseq's own specials <s> 0, <pad> 1, </s> 2, <unk> 3.
 * A language is a code "deu_Latn"; transformers 4 gave it the id
 * spm size + 1 + its place, transformers 5 puts <mask> first.
 *
 * So the languages are read, never assumed: their list from
 * tokenizer_config.json ("extra_special_tokens", transformers 5, or
 * "additional_special_tokens") or special_tokens_map.json; each one's id
 * from the added tokens of tokenizer.json, tokenizer_config.json
 * ("added_tokens_decoder") or added_tokens.json, else the layout's rule
 * above. Both take "src_lang pieces </s>" as a source (tokenizer.c).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tok_internal.h"
#include "tokenizer.h"

#define SPM_FILE "sentencepiece.bpe.model"

static int file_exists(const char *dir, const char *name)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* dir/name as JSON, NULL when absent; -1 in *bad with a message when it
 * is there but not JSON. */
static json_t *load_json(const char *dir, const char *name, int *bad, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!file_exists(dir, name))
        return NULL;
    json_error_t je;
    /* every integer as a double: tokenizer_config.json's model_max_length
     * (1e30) is past what jansson's integers hold */
    json_t *j = json_load_file(path, JSON_DECODE_INT_AS_REAL, &je);
    if (!j) {
        snprintf(err, errlen, "%s: %s (line %d)", name, je.text, je.line);
        *bad = -1;
    }
    return j;
}

/* The added tokens the files declare, content -> id, special or not. */
typedef struct added {
    char **content;
    int32_t *id;
    int *special;
    int n, cap;
} added;

static int added_push(added *a, const char *content, long long id, int special)
{
    if (id < 0 || id >= (1 << 24))
        return 0; /* not an id: ignored, as a missing entry */
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->content[i], content) == 0)
            return 0; /* the first file that names it wins */
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 64;
        char **c = realloc(a->content, (size_t)cap * sizeof *c);
        if (c)
            a->content = c;
        int32_t *d = realloc(a->id, (size_t)cap * sizeof *d);
        if (d)
            a->id = d;
        int *s = realloc(a->special, (size_t)cap * sizeof *s);
        if (s)
            a->special = s;
        if (!c || !d || !s)
            return -1;
        a->cap = cap;
    }
    a->content[a->n] = strdup(content);
    if (!a->content[a->n])
        return -1;
    a->id[a->n] = (int32_t)id;
    a->special[a->n] = special;
    a->n++;
    return 0;
}

static void added_free(added *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->content[i]);
    free(a->content);
    free(a->id);
    free(a->special);
}

/* A JSON number that is a whole id (read as a double, load_json), else -1. */
static long long json_id(const json_t *e)
{
    if (!json_is_number(e))
        return -1;
    double v = json_number_value(e);
    return v >= 0 && v < (double)(1 << 24) && v == (double)(long long)v ? (long long)v : -1;
}

static int added_find(const added *a, const char *content)
{
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->content[i], content) == 0)
            return a->id[i];
    return -1;
}

/* tokenizer.json's "added_tokens" [{id, content, special}],
 * tokenizer_config.json's "added_tokens_decoder" {"id": {content,
 * special}}, added_tokens.json {content: id}. */
static int read_added(const char *dir, added *a, char *err, size_t errlen)
{
    int bad = 0;
    json_t *tj = load_json(dir, "tokenizer.json", &bad, err, errlen);
    json_t *tc = bad ? NULL : load_json(dir, "tokenizer_config.json", &bad, err, errlen);
    json_t *at = bad ? NULL : load_json(dir, "added_tokens.json", &bad, err, errlen);
    int rc = bad;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(tj, "added_tokens"), i, e) {
        const char *c = json_string_value(json_object_get(e, "content"));
        long long id = json_id(json_object_get(e, "id"));
        if (rc == 0 && c && id >= 0)
            rc = added_push(a, c, id,
                            json_is_true(json_object_get(e, "special")));
    }
    const char *key;
    json_object_foreach(json_object_get(tc, "added_tokens_decoder"), key, e) {
        const char *c = json_string_value(json_object_get(e, "content"));
        char *end = NULL;
        long long id = strtoll(key, &end, 10);
        if (rc == 0 && c && end && *end == 0 && end != key)
            rc = added_push(a, c, id, json_is_true(json_object_get(e, "special")));
    }
    json_object_foreach(at, key, e) {
        if (rc == 0 && json_id(e) >= 0)
            rc = added_push(a, key, json_id(e), 1);
    }
    if (rc != 0 && !bad)
        snprintf(err, errlen, "tokenizer: out of memory reading the added tokens");
    json_decref(tj);
    json_decref(tc);
    json_decref(at);
    return rc;
}

/* The list of language tokens: tokenizer_config.json's
 * "extra_special_tokens" or "additional_special_tokens", else
 * special_tokens_map.json's "additional_special_tokens" (strings, or
 * objects with a "content"). Returns the array (a new reference), *from
 * the file it came from; NULL with *from NULL when none has one. */
static json_t *language_list(const char *dir, const char **from, int *bad, char *err,
                             size_t errlen)
{
    static const char *const files[] = {"tokenizer_config.json", "special_tokens_map.json"};
    static const char *const keys[] = {"extra_special_tokens", "additional_special_tokens"};
    *from = NULL;
    for (int f = 0; f < 2; f++) {
        json_t *j = load_json(dir, files[f], bad, err, errlen);
        if (*bad)
            return NULL;
        for (int k = 0; k < 2; k++) {
            json_t *l = json_object_get(j, keys[k]);
            if (json_is_array(l) && json_array_size(l) > 0) {
                json_incref(l);
                json_decref(j);
                *from = files[f];
                return l;
            }
        }
        json_decref(j);
    }
    return NULL;
}

static const char *token_text(const json_t *e)
{
    return json_is_string(e) ? json_string_value(e)
                             : json_string_value(json_object_get(e, "content"));
}

/* The language a token names for the layout: "__de__" -> "de" (M2M100:
 * other tokens are not languages), NLLB's codes as they are. */
static int lang_code_of(tok_layout layout, const char *tok, char *out, size_t n)
{
    size_t l = strlen(tok);
    if (layout == TOK_NLLB) {
        if (l == 0 || l >= n)
            return -1;
        memcpy(out, tok, l + 1);
        return 0;
    }
    if (l < 5 || l - 4 >= n || strncmp(tok, "__", 2) != 0 || strcmp(tok + l - 2, "__") != 0)
        return -1;
    memcpy(out, tok + 2, l - 4);
    out[l - 4] = 0;
    return 0;
}

/* Reads the languages into t (see the file comment): their codes, ids
 * (each < vocab_size when that is > 0, unique) and the special ids. */
static int load_languages(td_tokenizer *t, const char *dir, int base, int vocab_size, char *err,
                          size_t errlen)
{
    added a = {0};
    int bad = 0, rc = -1;
    const char *from = NULL;
    json_t *list = NULL;
    if (read_added(dir, &a, err, errlen) != 0)
        goto out;
    list = language_list(dir, &from, &bad, err, errlen);
    if (bad)
        goto out;
    if (!list) {
        snprintf(err, errlen, "tokenizer_config.json: no list of languages (\"extra_special_tokens\" "
                 "or \"additional_special_tokens\", nor in special_tokens_map.json)");
        goto out;
    }
    size_t nl = json_array_size(list);
    t->lang_code = calloc(nl, sizeof(char *));
    t->lang_id = calloc(nl, sizeof(int32_t));
    t->special = calloc(nl + (size_t)a.n + 1, sizeof(int32_t));
    if (!t->lang_code || !t->lang_id || !t->special) {
        snprintf(err, errlen, "tokenizer: out of memory");
        goto out;
    }
    for (size_t i = 0; i < nl; i++) {
        const char *tok = token_text(json_array_get(list, i));
        char code[64];
        if (!tok || lang_code_of(t->layout, tok, code, sizeof code) != 0)
            continue; /* not a language token */
        int id = added_find(&a, tok);
        if (id < 0) /* the layout's rule: after the pieces, in the list's order */
            id = base + (int)i;
        if (vocab_size > 0 && id >= vocab_size) {
            snprintf(err, errlen, "%s: language token '%.64s' has id %d, outside the model's "
                     "vocabulary (%d)", from, tok, id, vocab_size);
            goto out;
        }
        for (int k = 0; k < t->n_langs; k++)
            if (t->lang_id[k] == id || strcmp(t->lang_code[k], code) == 0) {
                snprintf(err, errlen, "%s: language token '%.64s' repeats a language or an id "
                         "(%d)", from, tok, id);
                goto out;
            }
        t->lang_code[t->n_langs] = strdup(code);
        if (!t->lang_code[t->n_langs] || tok_vocab_add(&t->src, tok, id) != 0) {
            if (t->lang_code[t->n_langs] && id < t->src.n_ids && t->src.piece_of[id]) {
                snprintf(err, errlen, "%s: language token '%.64s' has id %d, which is the "
                         "piece '%.64s'", from, tok, id, t->src.piece_of[id]);
                free(t->lang_code[t->n_langs]);
                t->lang_code[t->n_langs] = NULL;
            } else {
                snprintf(err, errlen, "tokenizer: out of memory");
            }
            goto out;
        }
        t->lang_id[t->n_langs++] = id;
        t->special[t->n_special++] = id;
    }
    if (t->n_langs == 0) {
        snprintf(err, errlen, "%s: the list of special tokens names no language", from);
        goto out;
    }
    /* the other special added tokens (<s>, <mask>) decode to nothing too */
    for (int i = 0; i < a.n; i++)
        if (a.special[i] && (vocab_size <= 0 || a.id[i] < vocab_size))
            t->special[t->n_special++] = a.id[i];
    rc = 0;
out:
    json_decref(list);
    added_free(&a);
    return rc;
}

/* NLLB's vocabulary from the SentencePiece model: fairseq's four specials,
 * then every piece at its id + 1. */
static int nllb_vocab(td_tokenizer *t, int vocab_size, char *err, size_t errlen)
{
    static const char *const fs[4] = {"<s>", "<pad>", "</s>", "<unk>"};
    vocab *v = &t->src;
    for (int i = 0; i < 4; i++)
        if (tok_vocab_add(v, fs[i], i) != 0)
            goto oom;
    const spm_model *sp = t->spm_src;
    for (int id = 0; id < spm_size(sp); id++) {
        spm_piece_type k = spm_piece_kind(sp, id);
        if (k == SPM_CONTROL || k == SPM_UNKNOWN)
            continue;
        const char *p = spm_id_to_piece(sp, id);
        if (vocab_size > 0 && id + 1 >= vocab_size) {
            snprintf(err, errlen, SPM_FILE ": piece %d ('%.32s') is outside the model's "
                     "vocabulary (%d) with fairseq's offset", id, p ? p : "", vocab_size);
            return -1;
        }
        if (p && tok_vocab_find(v, p, strlen(p)) < 0 && tok_vocab_add(v, p, id + 1) != 0)
            goto oom;
    }
    tok_vocab_specials(v);
    return 0;
oom:
    snprintf(err, errlen, "tokenizer: out of memory");
    return -1;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int tok_fairseq_load(td_tokenizer *t, const char *dir, int vocab_size, char *err,
                     size_t errlen)
{
    char path[4096], e2[512];
    snprintf(path, sizeof path, "%s/" SPM_FILE, dir);
    if (spm_load(&t->spm_src, path, e2, sizeof e2) != 0) {
        snprintf(err, errlen, SPM_FILE ": %s", e2);
        return -1;
    }
    t->spm_tgt = t->spm_src;
    t->separate = 0;
    int base;
    if (file_exists(dir, "vocab.json")) {
        t->layout = TOK_M2M100;
        snprintf(path, sizeof path, "%s/vocab.json", dir);
        if (tok_vocab_load(&t->src, path, "vocab.json", vocab_size, err, errlen) != 0)
            return -1;
        base = (int)t->src.used; /* len(vocab.json) */
    } else {
        t->layout = TOK_NLLB;
        if (nllb_vocab(t, vocab_size, err, errlen) != 0)
            return -1;
        base = spm_size(t->spm_src) + 1;
    }
    if (load_languages(t, dir, base, vocab_size, err, errlen) != 0)
        return -1;
    int bos = tok_vocab_find(&t->src, "<s>", 3);
    if (bos >= 0)
        t->special[t->n_special++] = bos;
    qsort(t->special, (size_t)t->n_special, sizeof(int32_t), cmp_i32);
    t->tgt = t->src;
    return 0;
}
