/*
 * tok_vocab.c - a vocabulary: pieces to ids (open addressing over FNV-1a
 * hashes) and back, loaded from a vocab.json or built from pieces
 * (tok_internal.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tok_internal.h"

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

int tok_vocab_find(const vocab *v, const char *s, size_t n)
{
    if (!v->cap)
        return -1;
    for (size_t i = fnv1a(s, n) & (v->cap - 1);; i = (i + 1) & (v->cap - 1)) {
        int32_t id = v->slots[i];
        if (id < 0)
            return -1;
        const char *p = v->piece_of[id];
        if (strlen(p) == n && memcmp(p, s, n) == 0)
            return id;
    }
}

void tok_vocab_free(vocab *v)
{
    for (int i = 0; v->piece_of && i < v->n_ids; i++)
        free(v->piece_of[i]);
    free(v->piece_of);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

/* Loads a vocab.json (object piece -> id). Ids must be unique, in
 * [0, limit) when limit > 0; <unk>, </s> and <pad> must be present
 * (transformers raises without <unk>). */
int tok_vocab_load(vocab *v, const char *path, const char *fname, int limit, char *err,
                      size_t errlen)
{
    memset(v, 0, sizeof *v);
    json_error_t je;
    /* Only a regular file: a FIFO would block the load forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
        close(fd);
        snprintf(err, errlen, "%s: not a regular file", fname);
        return -1;
    }
    if (fd >= 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    json_t *o = fd >= 0 ? json_loadfd(fd, JSON_REJECT_DUPLICATES, &je)
                        : json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (fd >= 0)
        close(fd);
    if (!o) {
        snprintf(err, errlen, "%s: %s (line %d)", fname, je.text, je.line);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(o)) {
        snprintf(err, errlen, "%s: must be a JSON object mapping pieces to ids", fname);
        goto out;
    }
    const char *key;
    json_t *val;
    int max_id = -1;
    json_object_foreach(o, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 ||
            json_integer_value(val) >= (1 << 24)) {
            snprintf(err, errlen, "%s: piece '%.64s': id must be an integer in [0, 2^24)", fname, key);
            goto out;
        }
        int id = (int)json_integer_value(val);
        if (limit > 0 && id >= limit) {
            snprintf(err, errlen, "%s: piece '%.64s': id %d is outside the model's vocabulary (%d)",
                     fname, key, id, limit);
            goto out;
        }
        if (id > max_id)
            max_id = id;
    }
    v->n_ids = max_id + 1;
    v->piece_of = calloc((size_t)(v->n_ids > 0 ? v->n_ids : 1), sizeof(char *));
    size_t cap = 16;
    while (cap < 2 * json_object_size(o) + 16)
        cap <<= 1;
    v->cap = cap;
    v->slots = malloc(cap * sizeof(int32_t));
    if (!v->piece_of || !v->slots) {
        snprintf(err, errlen, "%s: out of memory", fname);
        goto out;
    }
    for (size_t i = 0; i < cap; i++)
        v->slots[i] = -1;
    json_object_foreach(o, key, val) {
        int id = (int)json_integer_value(val);
        if (v->piece_of[id]) {
            snprintf(err, errlen, "%s: id %d is used by both '%.64s' and '%.64s'", fname, id,
                     v->piece_of[id], key);
            goto out;
        }
        v->piece_of[id] = strdup(key);
        if (!v->piece_of[id]) {
            snprintf(err, errlen, "%s: out of memory", fname);
            goto out;
        }
        size_t n = strlen(key);
        size_t i = fnv1a(key, n) & (cap - 1);
        while (v->slots[i] >= 0)
            i = (i + 1) & (cap - 1);
        v->slots[i] = id;
        v->used++;
    }
    tok_vocab_specials(v);
    if (v->unk < 0 || v->eos < 0) {
        snprintf(err, errlen, "%s: the vocabulary must contain <unk> and </s>", fname);
        goto out;
    }
    rc = 0;
out:
    json_decref(o);
    if (rc != 0)
        tok_vocab_free(v);
    return rc;
}

void tok_vocab_specials(vocab *v)
{
    v->unk = tok_vocab_find(v, "<unk>", 5);
    v->eos = tok_vocab_find(v, "</s>", 4);
    v->pad = tok_vocab_find(v, "<pad>", 5);
}

/* Doubles the hash table when it is half full, re-inserting every id. */
static int vocab_rehash(vocab *v, size_t need)
{
    size_t cap = v->cap ? v->cap : 16;
    while (cap < 2 * need + 16)
        cap <<= 1;
    if (cap == v->cap)
        return 0;
    int32_t *slots = malloc(cap * sizeof(int32_t));
    if (!slots)
        return -1;
    for (size_t i = 0; i < cap; i++)
        slots[i] = -1;
    for (int id = 0; id < v->n_ids; id++) {
        if (!v->piece_of[id])
            continue;
        size_t i = fnv1a(v->piece_of[id], strlen(v->piece_of[id])) & (cap - 1);
        while (slots[i] >= 0)
            i = (i + 1) & (cap - 1);
        slots[i] = id;
    }
    free(v->slots);
    v->slots = slots;
    v->cap = cap;
    return 0;
}

int tok_vocab_add(vocab *v, const char *s, int32_t id)
{
    if (id < 0 || id >= (1 << 24))
        return -1;
    if (id >= v->n_ids) {
        int have = v->cap_ids > v->n_ids ? v->cap_ids : v->n_ids;
        if (id >= have) { /* doubling: a vocabulary built piece by piece */
            int cap = have > 0 ? have : 64;
            while (cap <= id)
                cap *= 2;
            char **p = realloc(v->piece_of, (size_t)cap * sizeof(char *));
            if (!p)
                return -1;
            memset(p + have, 0, (size_t)(cap - have) * sizeof(char *));
            v->piece_of = p;
            v->cap_ids = cap;
        }
        v->n_ids = id + 1;
    }
    if (v->piece_of[id])
        return -1;
    if (vocab_rehash(v, v->used + 1) != 0)
        return -1;
    v->piece_of[id] = strdup(s);
    if (!v->piece_of[id])
        return -1;
    size_t i = fnv1a(s, strlen(s)) & (v->cap - 1);
    while (v->slots[i] >= 0)
        i = (i + 1) & (v->cap - 1);
    v->slots[i] = id;
    v->used++;
    return 0;
}
