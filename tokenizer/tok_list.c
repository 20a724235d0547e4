/*
 * tok_list.c - CTranslate2's vocabularies (tokenizer.h, td_tok_list): the
 * token strings by id, as CTranslate2's converters write them
 * (python/ctranslate2/specs/model_spec.py, _save_vocabulary: a JSON list)
 * or as older versions did (one token a line, .txt).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizer.h"

#define TL_MAX_BYTES ((size_t)256 << 20)
#define TL_MAX_TOKENS (1 << 24)

static int tl_push(td_tok_list *l, const char *s, size_t n, int *cap)
{
    if (l->n == *cap) {
        int c = *cap ? 2 * *cap : 1024;
        char **p = realloc(l->tok, (size_t)c * sizeof *p);
        if (!p)
            return -1;
        l->tok = p;
        *cap = c;
    }
    char *d = malloc(n + 1);
    if (!d)
        return -1;
    memcpy(d, s, n);
    d[n] = 0;
    l->tok[l->n++] = d;
    return 0;
}

/* The whole regular file (a FIFO is refused, never waited on), NUL-ended. */
static char *tl_read(const char *path, size_t *len, const char *fname, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", fname, strerror(errno));
        return NULL;
    }
    struct stat sb;
    char *buf = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", fname);
        goto fail;
    }
    if ((size_t)sb.st_size > TL_MAX_BYTES) {
        snprintf(err, errlen, "%s: %lld bytes, more than the limit of %zu", fname,
                 (long long)sb.st_size, TL_MAX_BYTES);
        goto fail;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    buf = malloc(n + 1);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", fname);
        goto fail;
    }
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, errlen, "%s: read failed at byte %zu", fname, got);
            goto fail;
        }
        got += (size_t)r;
    }
    buf[n] = 0;
    *len = n;
    close(fd);
    return buf;
fail:
    free(buf);
    close(fd);
    return NULL;
}

static int tl_json(td_tok_list *l, const char *text, size_t len, char *err, size_t errlen)
{
    json_error_t je;
    json_t *a = json_loadb(text, len, 0, &je);
    int cap = 0, rc = -1;
    if (!a) {
        snprintf(err, errlen, "%s: %s (line %d)", l->file, je.text, je.line);
        return -1;
    }
    if (!json_is_array(a) || json_array_size(a) > TL_MAX_TOKENS) {
        snprintf(err, errlen, "%s: must be a JSON list of at most %d token strings", l->file,
                 TL_MAX_TOKENS);
        goto out;
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *s = json_array_get(a, i);
        if (!json_is_string(s)) {
            snprintf(err, errlen, "%s: entry %zu is not a string", l->file, i);
            goto out;
        }
        if (tl_push(l, json_string_value(s), json_string_length(s), &cap)) {
            snprintf(err, errlen, "%s: out of memory", l->file);
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(a);
    return rc;
}

/* One token a line; "\n" or "\r\n" ends a line, a last line may lack it. */
static int tl_lines(td_tok_list *l, const char *text, size_t len, char *err, size_t errlen)
{
    int cap = 0;
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - text) : len, n = e - i;
        if (n && text[i + n - 1] == '\r')
            n--;
        if (memchr(text + i, 0, n)) {
            snprintf(err, errlen, "%s: line %d holds a NUL byte", l->file, l->n + 1);
            return -1;
        }
        if (l->n >= TL_MAX_TOKENS || tl_push(l, text + i, n, &cap)) {
            snprintf(err, errlen, "%s: too many tokens or out of memory", l->file);
            return -1;
        }
        i = e + 1;
    }
    return 0;
}

int td_tok_list_load(td_tok_list *l, const char *dir, td_tok_side side, char *err, size_t errlen)
{
    static const char *const shared[] = {"shared_vocabulary.json", "shared_vocabulary.txt"};
    static const char *const src[] = {"source_vocabulary.json", "source_vocabulary.txt"};
    static const char *const tgt[] = {"target_vocabulary.json", "target_vocabulary.txt"};
    memset(l, 0, sizeof *l);
    char path[4400];
    struct stat sb;
    const char *name = NULL;
    /* the shared vocabulary first, as CTranslate2 saves one when both
     * sides' lists are equal */
    for (int k = 0; k < 4 && !name; k++) {
        const char *cand = k < 2 ? shared[k] : side == TD_TOK_TARGET ? tgt[k - 2] : src[k - 2];
        snprintf(path, sizeof path, "%s/%s", dir, cand);
        if (stat(path, &sb) == 0)
            name = cand;
    }
    if (!name)
        return 1;
    snprintf(l->file, sizeof l->file, "%s", name);
    l->shared = strncmp(name, "shared_", 7) == 0;
    size_t len = 0;
    char *text = tl_read(path, &len, name, err, errlen);
    if (!text)
        return -1;
    size_t nl = strlen(name);
    int rc = nl > 5 && strcmp(name + nl - 5, ".json") == 0 ? tl_json(l, text, len, err, errlen)
                                                           : tl_lines(l, text, len, err, errlen);
    free(text);
    if (rc != 0)
        td_tok_list_free(l);
    return rc;
}

int td_tok_list_find(const td_tok_list *l, const char *s)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->tok[i], s) == 0)
            return i;
    return -1;
}

void td_tok_list_free(td_tok_list *l)
{
    if (!l)
        return;
    for (int i = 0; l->tok && i < l->n; i++)
        free(l->tok[i]);
    free(l->tok);
    memset(l, 0, sizeof *l);
}
