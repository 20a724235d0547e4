/*
 * glossary.c - the glossary store (glossary.h): entries parsed and
 * checked, glossaries kept in memory and, with a state directory, one JSON
 * file each under DIR/glossaries/, written to a temporary file and renamed
 * over (a crash leaves the old file or the new one, never half of one).
 * The matching and placement are glossplace.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "glossary.h"
#include "glossary_impl.h"

struct srv_glossaries {
    pthread_mutex_t mu;     /* guards g and n */
    pthread_mutex_t edit_mu; /* one edit at a time: read, rebuild, swap */
    char *dir;              /* DIR/glossaries, or NULL: memory only */
    srv_gloss_limits lim;
    srv_glossary **g;       /* oldest first */
    int n, cap;
};

static void say(char *msg, size_t n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void say(char *msg, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (n)
        vsnprintf(msg, n, fmt, ap);
    va_end(ap);
}

/* ---- codes and terms ------------------------------------------------------- */

int srv_gloss_lang(const char *code, char *out, size_t n)
{
    size_t k = 0;
    while (code[k] && ((code[k] | 0x20) >= 'a' && (code[k] | 0x20) <= 'z'))
        k++;
    if (k < 2 || k > 3 || k + 1 > n)
        return -1;
    if (code[k]) { /* a region or script: -GB, _US, -Hans */
        if (code[k] != '-' && code[k] != '_')
            return -1;
        size_t r = k + 1, m = 0;
        while (code[r + m] && (((code[r + m] | 0x20) >= 'a' && (code[r + m] | 0x20) <= 'z') ||
                               (code[r + m] >= '0' && code[r + m] <= '9')))
            m++;
        if (m < 2 || m > 4 || code[r + m])
            return -1;
    }
    for (size_t i = 0; i < k; i++)
        out[i] = (char)(code[i] | 0x20);
    out[k] = 0;
    return 0;
}

/* The code point at s (n bytes left) into *cp; its bytes, or 0 when the
 * UTF-8 is invalid (overlong, surrogate, past U+10FFFF, cut). */
int srv_gloss_utf8(const unsigned char *s, size_t n, unsigned *cp)
{
    if (!n)
        return 0;
    unsigned c = s[0];
    int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || (size_t)len > n)
        return 0;
    unsigned v = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    static const unsigned k_min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < k_min[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

/* The lower case of cp where it has the same UTF-8 length (ASCII, Latin-1,
 * Latin Extended-A, Greek, Cyrillic), else cp. */
static unsigned fold_cp(unsigned c)
{
    if (c >= 'A' && c <= 'Z')
        return c + 32;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2) ||
        (c >= 0x410 && c <= 0x42F))
        return c + 32;
    if (c >= 0x400 && c <= 0x40F)
        return c + 80;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
        c != 0x17F) {
        int even_upper = (c < 0x139) || (c >= 0x14A && c < 0x179);
        if (even_upper ? !(c & 1) : (c & 1))
            return c + 1;
    }
    return c;
}

static size_t put_utf8(unsigned c, char *o)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | c >> 6);
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    o[0] = (char)(0xE0 | c >> 12);
    o[1] = (char)(0x80 | (c >> 6 & 0x3F));
    o[2] = (char)(0x80 | (c & 0x3F));
    return 3;
}

void srv_gloss_fold(const char *s, size_t n, char *out)
{
    for (size_t i = 0; i < n;) {
        unsigned c;
        int k = srv_gloss_utf8((const unsigned char *)s + i, n - i, &c);
        if (k < 2 || k > 3) { /* ASCII, 4-byte and invalid bytes as they are */
            out[i] = k == 1 ? (char)fold_cp(c) : s[i];
            i++;
            continue;
        }
        unsigned f = fold_cp(c);
        char tmp[4];
        if (put_utf8(f, tmp) == (size_t)k)
            memcpy(out + i, tmp, (size_t)k);
        else
            memcpy(out + i, s + i, (size_t)k);
        i += (size_t)k;
    }
}

/* Why text (n bytes) cannot be a term or a name, its length aside, or
 * NULL. */
static const char *text_fault(const char *t, size_t n)
{
    if (!n)
        return "is empty";
    if (t[0] == ' ' || t[n - 1] == ' ' || t[0] == '\t' || t[n - 1] == '\t')
        return "has white space at an end";
    for (size_t i = 0; i < n;) {
        unsigned c;
        int k = srv_gloss_utf8((const unsigned char *)t + i, n - i, &c);
        if (!k)
            return "is not valid UTF-8";
        if (c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029)
            return "has a control character";
        i += (size_t)k;
    }
    return NULL;
}

/* Why term (n bytes) cannot be one, or NULL. */
static const char *term_fault(const char *t, size_t n)
{
    return n > SRV_GLOSS_MAX_TERM ? "is over 1024 bytes" : text_fault(t, n);
}

/* Whether name can be a glossary's: a term's rules, bounded in characters
 * (code points: JSON Schema's maxLength in /openapi.json) rather than
 * bytes. */
static int name_ok(const char *name)
{
    size_t n = strlen(name), chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((unsigned char)name[i] & 0xC0) != 0x80;
    return chars <= SRV_GLOSS_MAX_NAME && text_fault(name, n) == NULL;
}

/* ---- entries --------------------------------------------------------------- */

typedef struct raw_entry {
    size_t src, src_n, tgt, tgt_n; /* offsets into the builder's bytes */
    int line;
} raw_entry;

typedef struct builder {
    raw_entry *e;
    int n, cap;
    char *b; /* terms, each NUL-terminated */
    size_t bn, bcap;
} builder;

static int b_bytes(builder *bd, const char *s, size_t n, size_t *at)
{
    if (bd->bn + n + 1 > bd->bcap) {
        size_t cap = bd->bcap ? bd->bcap : 256;
        while (cap < bd->bn + n + 1)
            cap *= 2;
        char *p = realloc(bd->b, cap);
        if (!p)
            return -1;
        bd->b = p;
        bd->bcap = cap;
    }
    *at = bd->bn;
    memcpy(bd->b + bd->bn, s, n);
    bd->b[bd->bn + n] = 0;
    bd->bn += n + 1;
    return 0;
}

static int b_entry(builder *bd, const char *s, size_t sn, const char *t, size_t tn, int line)
{
    if (bd->n == bd->cap) {
        int cap = bd->cap ? bd->cap * 2 : 64;
        raw_entry *p = realloc(bd->e, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        bd->e = p;
        bd->cap = cap;
    }
    raw_entry *e = &bd->e[bd->n];
    if (b_bytes(bd, s, sn, &e->src) || b_bytes(bd, t, tn, &e->tgt))
        return -1;
    e->src_n = sn;
    e->tgt_n = tn;
    e->line = line;
    bd->n++;
    return 0;
}

/* One CSV field at *p (end e) into out (unquoted, malloc'd by the builder's
 * caller as scratch of the line's size); its length, or -1 with *why. */
static long csv_field(const char **p, const char *e, char *out, const char **why)
{
    const char *s = *p;
    size_t n = 0;
    if (s < e && *s == '"') {
        s++;
        for (;;) {
            if (s >= e) {
                *why = "has a quote that is not closed";
                return -1;
            }
            if (*s == '"') {
                if (s + 1 < e && s[1] == '"') {
                    out[n++] = '"';
                    s += 2;
                    continue;
                }
                s++;
                break;
            }
            out[n++] = *s++;
        }
        if (s < e && *s != ',') {
            *why = "has text after a quoted field";
            return -1;
        }
    } else {
        while (s < e && *s != ',') {
            if (*s == '"') {
                *why = "has a quote inside an unquoted field";
                return -1;
            }
            out[n++] = *s++;
        }
    }
    *p = s;
    return (long)n;
}

/* Splits one line into its source and target terms (CSV: checks the
 * optional language columns against the dictionary's). 0, or -1 with the
 * fault in msg. */
static int split_line(const char *l, size_t n, int csv, const srv_gloss_dict *d, char *scratch,
                      size_t *sn, size_t *tn, const char **src, const char **tgt, char *msg,
                      size_t msg_n)
{
    if (!csv) {
        const char *tab = memchr(l, '\t', n);
        if (!tab || memchr(tab + 1, '\t', n - (size_t)(tab - l) - 1)) {
            say(msg, msg_n, "%s", tab ? "has more than one tab (a TSV entry is SOURCE<TAB>TARGET)"
                                      : "has no tab (a TSV entry is SOURCE<TAB>TARGET)");
            return -1;
        }
        *src = l;
        *sn = (size_t)(tab - l);
        *tgt = tab + 1;
        *tn = n - *sn - 1;
        return 0;
    }
    const char *p = l, *e = l + n, *why = NULL;
    char *fields[4];
    size_t fl[4];
    int nf = 0;
    char *o = scratch;
    for (;;) {
        if (nf == 4) {
            say(msg, msg_n, "has more than 4 fields (SOURCE,TARGET[,SOURCE_LANG,TARGET_LANG])");
            return -1;
        }
        long k = csv_field(&p, e, o, &why);
        if (k < 0) {
            say(msg, msg_n, "%s", why);
            return -1;
        }
        fields[nf] = o;
        fl[nf++] = (size_t)k;
        o += k;
        if (p >= e)
            break;
        p++; /* the comma */
    }
    if (nf != 2 && nf != 4) {
        say(msg, msg_n, "has %d field%s (SOURCE,TARGET[,SOURCE_LANG,TARGET_LANG])", nf,
            nf == 1 ? "" : "s");
        return -1;
    }
    for (int k = 2; k < nf; k++) {
        char code[16], canon[16];
        const char *want = k == 2 ? d->src_lang : d->tgt_lang;
        if (fl[k] >= sizeof code || (memcpy(code, fields[k], fl[k]), code[fl[k]] = 0,
                                     srv_gloss_lang(code, canon, sizeof canon) != 0) ||
            strcmp(canon, want) != 0) {
            say(msg, msg_n, "names the %s language '%.*s'; the dictionary's is '%s'",
                k == 2 ? "source" : "target", (int)(fl[k] < 16 ? fl[k] : 16), fields[k], want);
            return -1;
        }
    }
    *src = fields[0];
    *sn = fl[0];
    *tgt = fields[1];
    *tn = fl[1];
    return 0;
}

/* The entries of in into bd; SRV_OK, or INVALID / TOO_LONG with msg, or
 * NOMEM. */
static srv_err read_entries(const srv_gloss_input *in, const srv_gloss_dict *d, int csv,
                            int max_entries, builder *bd, char *msg, size_t msg_n)
{
    const char *s = in->entries, *end = s + in->entries_n;
    char *scratch = malloc(in->entries_n + 1);
    if (!scratch)
        return SRV_ERR_NOMEM;
    srv_err st = SRV_OK;
    for (int line = 1; s < end; line++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        const char *l = s;
        s += n + (nl != NULL);
        if (n && l[n - 1] == '\r')
            n--;
        if (!n)
            continue;
        char why[160];
        const char *src, *tgt;
        size_t sn, tn;
        if (split_line(l, n, csv, d, scratch, &sn, &tn, &src, &tgt, why, sizeof why) != 0) {
            say(msg, msg_n, "entries line %d %s", line, why);
            st = SRV_ERR_INVALID;
            break;
        }
        const char *f = term_fault(src, sn);
        const int side = f ? 0 : 1;
        if (!f)
            f = term_fault(tgt[0] == '~' && tn > 1 ? tgt + 1 : tgt, tgt[0] == '~' ? tn - 1 : tn);
        if (f) {
            say(msg, msg_n, "entries line %d: the %s term %s", line, side ? "target" : "source", f);
            st = SRV_ERR_INVALID;
            break;
        }
        if (bd->n >= max_entries) {
            say(msg, msg_n, "entries line %d: a glossary holds at most %d entries "
                            "(--max-glossary-entries)", line, max_entries);
            st = SRV_ERR_TOO_LONG;
            break;
        }
        if (b_entry(bd, src, sn, tgt, tn, line) != 0) {
            st = SRV_ERR_NOMEM;
            break;
        }
    }
    free(scratch);
    if (st == SRV_OK && bd->n == 0) {
        say(msg, msg_n, "entries: no entry (a glossary needs at least one)");
        st = SRV_ERR_INVALID;
    }
    return st;
}

/* Entries sorted by pointer to them (equal keys keep their order). */
static int by_fold(const void *a, const void *b)
{
    const srv_gloss_entry *x = *(const srv_gloss_entry *const *)a,
                          *y = *(const srv_gloss_entry *const *)b;
    int c = strcmp(x->fold, y->fold);
    return c ? c : (x > y) - (x < y);
}

static int by_first(const void *a, const void *b)
{
    const srv_gloss_entry *x = *(const srv_gloss_entry *const *)a,
                          *y = *(const srv_gloss_entry *const *)b;
    int c = (unsigned char)x->fold[0] - (unsigned char)y->fold[0];
    if (c)
        return c;
    if (x->src_n != y->src_n)
        return x->src_n > y->src_n ? -1 : 1;
    return (x > y) - (x < y);
}

void srv_gloss_dict_free(srv_gloss_dict *d)
{
    if (!d)
        return;
    for (int i = 0; d->e && i < d->n; i++)
        free(d->e[i].fold);
    free(d->e);
    free(d->by_first);
    free(d->tsv);
    free(d->terms);
}

/* d's entries, index and TSV from bd (taken). SRV_OK, INVALID (a source
 * term twice) or NOMEM. */
static srv_err finish_dict(srv_gloss_dict *d, builder *bd, char *msg, size_t msg_n)
{
    d->terms = bd->b;
    bd->b = NULL;
    d->n = bd->n;
    d->e = calloc((size_t)d->n, sizeof *d->e);
    d->by_first = malloc((size_t)d->n * sizeof *d->by_first);
    const srv_gloss_entry **order = malloc((size_t)d->n * sizeof *order);
    size_t tsv = 0;
    srv_err st = SRV_ERR_NOMEM;
    if (!d->e || !d->by_first || !order)
        goto out;
    for (int i = 0; i < d->n; i++) {
        const raw_entry *r = &bd->e[i];
        srv_gloss_entry *e = &d->e[i];
        const char *t = d->terms + r->tgt;
        e->src = d->terms + r->src;
        e->src_n = r->src_n;
        e->inflect = t[0] == '~';
        e->tgt = t + e->inflect;
        e->tgt_n = r->tgt_n - (size_t)e->inflect;
        if (!(e->fold = malloc(e->src_n + 1)))
            goto out;
        srv_gloss_fold(e->src, e->src_n, e->fold);
        e->fold[e->src_n] = 0;
        order[i] = e;
        tsv += r->src_n + r->tgt_n + 2;
    }
    qsort(order, (size_t)d->n, sizeof *order, by_first);
    for (int i = 0; i < d->n; i++)
        d->by_first[i] = (int)(order[i] - d->e);
    qsort(order, (size_t)d->n, sizeof *order, by_fold);
    for (int i = 1; i < d->n; i++)
        if (!strcmp(order[i]->fold, order[i - 1]->fold)) {
            int a = bd->e[order[i - 1] - d->e].line, b = bd->e[order[i] - d->e].line;
            say(msg, msg_n, "entries line %d: the source term '%s' is line %d's already",
                a > b ? a : b, order[i]->src, a < b ? a : b);
            st = SRV_ERR_INVALID;
            goto out;
        }
    if (!(d->tsv = malloc(tsv + 1)))
        goto out;
    for (int i = 0; i < d->n; i++) {
        const raw_entry *r = &bd->e[i];
        memcpy(d->tsv + d->tsv_n, d->terms + r->src, r->src_n);
        d->tsv_n += r->src_n;
        d->tsv[d->tsv_n++] = '\t';
        memcpy(d->tsv + d->tsv_n, d->terms + r->tgt, r->tgt_n);
        d->tsv_n += r->tgt_n;
        d->tsv[d->tsv_n++] = '\n';
    }
    d->tsv[d->tsv_n] = 0;
    st = SRV_OK;
out:
    free(order);
    return st;
}

/* One dictionary from in. *param names the field at fault. */
static srv_err make_dict(const srv_gloss_input *in, int max_entries, srv_gloss_dict *d,
                         const char **param, char *msg, size_t msg_n)
{
    memset(d, 0, sizeof *d);
    if (!in->src_lang || srv_gloss_lang(in->src_lang, d->src_lang, sizeof d->src_lang) != 0) {
        *param = "source_lang";
        say(msg, msg_n, "source_lang '%s' is not a language code", in->src_lang ? in->src_lang : "");
        return SRV_ERR_INVALID;
    }
    if (!in->tgt_lang || srv_gloss_lang(in->tgt_lang, d->tgt_lang, sizeof d->tgt_lang) != 0) {
        *param = "target_lang";
        say(msg, msg_n, "target_lang '%s' is not a language code", in->tgt_lang ? in->tgt_lang : "");
        return SRV_ERR_INVALID;
    }
    if (!strcmp(d->src_lang, d->tgt_lang)) {
        *param = "target_lang";
        say(msg, msg_n, "source_lang and target_lang are both '%s'", d->src_lang);
        return SRV_ERR_INVALID;
    }
    const char *fmt = in->format ? in->format : "tsv";
    if (strcmp(fmt, "tsv") != 0 && strcmp(fmt, "csv") != 0) {
        *param = "entries_format";
        say(msg, msg_n, "entries_format must be tsv or csv, not '%s'", fmt);
        return SRV_ERR_INVALID;
    }
    builder bd = {0};
    *param = "entries";
    srv_err st = read_entries(in, d, !strcmp(fmt, "csv"), max_entries, &bd, msg, msg_n);
    if (st == SRV_OK)
        st = finish_dict(d, &bd, msg, msg_n);
    free(bd.e);
    free(bd.b);
    if (st != SRV_OK)
        srv_gloss_dict_free(d);
    return st;
}

/* ---- glossaries ------------------------------------------------------------ */

static void glossary_free(srv_glossary *g)
{
    for (int i = 0; g->d && i < g->n_dicts; i++)
        srv_gloss_dict_free(&g->d[i]);
    free(g->d);
    free(g->name);
    free(g);
}

void srv_glossary_put(srv_glossary *g)
{
    if (g && atomic_fetch_sub(&g->refs, 1) == 1)
        glossary_free(g);
}

static int new_id(char *out)
{
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return -1;
    r[6] = (unsigned char)((r[6] & 0x0F) | 0x40);
    r[8] = (unsigned char)((r[8] & 0x3F) | 0x80);
    char *o = out;
    for (int i = 0; i < 16; i++) {
        o += sprintf(o, "%02x", r[i]);
        if (i == 3 || i == 5 || i == 7 || i == 9)
            *o++ = '-';
    }
    *o = 0;
    return 0;
}

/* Whether id has the shape of ours (36 bytes of hex and dashes): a file
 * name made of it stays in its folder. */
static int id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n != 36)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? id[i] != '-' : !((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return 0;
    }
    return 1;
}

/* A glossary made of its parts (not stored). */
static srv_err build(const char *id, const char *name, const char *created,
                     const srv_gloss_input *in, int n, const srv_gloss_limits *lim,
                     srv_glossary **out, const char **param, char *msg, size_t msg_n)
{
    *out = NULL;
    if (!name || !name_ok(name)) {
        *param = "name";
        say(msg, msg_n, "name must be a non-empty text of at most %d characters, without control "
                        "characters or white space at its ends", SRV_GLOSS_MAX_NAME);
        return SRV_ERR_INVALID;
    }
    if (n < 1 || n > SRV_GLOSS_MAX_DICTS) {
        *param = "dictionaries";
        say(msg, msg_n, "a glossary has 1 to %d dictionaries, not %d", SRV_GLOSS_MAX_DICTS, n);
        return SRV_ERR_INVALID;
    }
    long bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += (long)in[i].entries_n;
    if (lim && bytes > lim->max_bytes) {
        *param = "entries";
        say(msg, msg_n, "the entries have %ld bytes; a glossary holds at most %ld "
                        "(--max-glossary-bytes)", bytes, lim->max_bytes);
        return SRV_ERR_TOO_LONG;
    }
    srv_glossary *g = calloc(1, sizeof *g);
    if (!g || !(g->name = strdup(name)) || !(g->d = calloc((size_t)n, sizeof *g->d))) {
        if (g)
            glossary_free(g);
        return SRV_ERR_NOMEM;
    }
    atomic_init(&g->refs, 1);
    snprintf(g->id, sizeof g->id, "%s", id);
    snprintf(g->created, sizeof g->created, "%s", created);
    int left = lim ? lim->max_entries : 1 << 30;
    for (int i = 0; i < n; i++) {
        srv_err st = make_dict(&in[i], left, &g->d[i], param, msg, msg_n);
        if (st != SRV_OK) {
            glossary_free(g);
            return st;
        }
        g->n_dicts = i + 1;
        left -= g->d[i].n;
        for (int k = 0; k < i; k++)
            if (!strcmp(g->d[k].src_lang, g->d[i].src_lang) &&
                !strcmp(g->d[k].tgt_lang, g->d[i].tgt_lang)) {
                *param = "dictionaries";
                say(msg, msg_n, "two dictionaries for %s -> %s", g->d[i].src_lang,
                    g->d[i].tgt_lang);
                glossary_free(g);
                return SRV_ERR_INVALID;
            }
    }
    *out = g;
    return SRV_OK;
}

const srv_gloss_dict *srv_glossary_dict(const srv_glossary *g, const char *src, const char *tgt)
{
    char s[16], t[16];
    if (!g || !src || !tgt || srv_gloss_lang(src, s, sizeof s) || srv_gloss_lang(tgt, t, sizeof t))
        return NULL;
    for (int i = 0; i < g->n_dicts; i++)
        if (!strcmp(g->d[i].src_lang, s) && !strcmp(g->d[i].tgt_lang, t))
            return &g->d[i];
    return NULL;
}

/* ---- on disk --------------------------------------------------------------- */

static json_t *to_json(const srv_glossary *g)
{
    json_t *o = json_object(), *ds = json_array();
    if (!o || !ds) {
        json_decref(o);
        json_decref(ds);
        return NULL;
    }
    json_object_set_new(o, "glossary_id", json_string(g->id));
    json_object_set_new(o, "name", json_string(g->name));
    json_object_set_new(o, "creation_time", json_string(g->created));
    for (int i = 0; i < g->n_dicts; i++)
        json_array_append_new(ds, json_pack("{s:s, s:s, s:s%}", "source_lang", g->d[i].src_lang,
                                            "target_lang", g->d[i].tgt_lang, "entries",
                                            g->d[i].tsv, g->d[i].tsv_n));
    json_object_set_new(o, "dictionaries", ds);
    if (json_array_size(ds) != (size_t)g->n_dicts) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int mkdirs(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return -1;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0700) != 0 && errno != EEXIST) {
                free(p);
                return -1;
            }
            if (!c)
                break;
            *s = c;
        }
    }
    free(p);
    return 0;
}

static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* g into DIR/ID.json through DIR/.ID.json.tmp. 0, or -1 (errno). */
static int write_file(const char *dir, const srv_glossary *g)
{
    json_t *o = to_json(g);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text || mkdirs(dir) != 0) {
        free(text);
        return -1;
    }
    size_t dn = strlen(dir) + 64;
    char *tmp = malloc(dn), *fin = malloc(dn);
    int rc = -1;
    if (!tmp || !fin)
        goto out;
    snprintf(tmp, dn, "%s/.%s.json.tmp", dir, g->id);
    snprintf(fin, dn, "%s/%s.json", dir, g->id);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        goto out;
    size_t n = strlen(text), at = 0;
    while (at < n) {
        ssize_t w = write(fd, text + at, n - at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        at += (size_t)w;
    }
    int ok = at == n && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, fin) != 0) {
        unlink(tmp);
        goto out;
    }
    rc = sync_dir(dir) == 0 ? 0 : -1;
out:
    free(tmp);
    free(fin);
    free(text);
    return rc;
}

/* A stored glossary from its file's JSON text; NULL with why. */
static srv_glossary *from_text(const char *text, char *why, size_t why_n)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    const char *id = NULL, *name = NULL, *created = NULL;
    json_t *ds = NULL;
    srv_glossary *g = NULL;
    if (!o || json_unpack(o, "{s:s, s:s, s:s, s:o}", "glossary_id", &id, "name", &name,
                          "creation_time", &created, "dictionaries", &ds) != 0 ||
        !json_is_array(ds) || !id_ok(id)) {
        say(why, why_n, "not a glossary file");
        json_decref(o);
        return NULL;
    }
    size_t n = json_array_size(ds);
    srv_gloss_input in[SRV_GLOSS_MAX_DICTS];
    for (size_t i = 0; i < n && i < SRV_GLOSS_MAX_DICTS; i++) {
        json_t *d = json_array_get(ds, i), *e = json_object_get(d, "entries");
        in[i] = (srv_gloss_input){json_string_value(json_object_get(d, "source_lang")),
                                  json_string_value(json_object_get(d, "target_lang")),
                                  json_string_value(e), json_string_length(e), "tsv"};
        if (!in[i].entries)
            in[i].entries = "";
    }
    const char *param = NULL;
    if (build(id, name, created, in, (int)n, NULL, &g, &param, why, why_n) != SRV_OK)
        g = NULL;
    json_decref(o);
    return g;
}

static int add_locked(srv_glossaries *st, srv_glossary *g)
{
    if (st->n == st->cap) {
        int cap = st->cap ? st->cap * 2 : 16;
        srv_glossary **p = realloc(st->g, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        st->g = p;
        st->cap = cap;
    }
    st->g[st->n++] = g;
    return 0;
}

static int by_created(const void *a, const void *b)
{
    const srv_glossary *x = *(srv_glossary *const *)a, *y = *(srv_glossary *const *)b;
    int c = strcmp(x->created, y->created);
    return c ? c : strcmp(x->id, y->id);
}

/* Every DIR/ID.json into st. 0, or -1 when the folder cannot be listed
 * (not when it is not there yet). */
static int load_all(srv_glossaries *st, char *warn, size_t warn_n)
{
    DIR *dh = opendir(st->dir);
    if (!dh)
        return errno == ENOENT ? 0 : -1;
    struct dirent *de;
    while ((de = readdir(dh)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n != 41 || strcmp(de->d_name + 36, ".json") != 0)
            continue;
        char path[4200], why[200] = "";
        snprintf(path, sizeof path, "%s/%s", st->dir, de->d_name);
        FILE *f = fopen(path, "rb");
        char *text = NULL;
        long len = -1;
        if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
            (text = malloc((size_t)len + 1)) && fread(text, 1, (size_t)len, f) == (size_t)len) {
            text[len] = 0;
            srv_glossary *g = from_text(text, why, sizeof why);
            if (g && (strncmp(g->id, de->d_name, 36) != 0 || add_locked(st, g) != 0)) {
                snprintf(why, sizeof why, "its id is not its name's");
                srv_glossary_put(g);
                g = NULL;
            }
            if (!g)
                say(warn, warn_n, "glossary file %s skipped: %s", path, why);
        } else {
            say(warn, warn_n, "glossary file %s skipped: cannot be read", path);
        }
        if (f)
            fclose(f);
        free(text);
    }
    closedir(dh);
    if (st->n > 1)
        qsort(st->g, (size_t)st->n, sizeof *st->g, by_created);
    return 0;
}

/* ---- the store ------------------------------------------------------------- */

srv_glossaries *srv_glossaries_open(const char *dir, const srv_gloss_limits *lim, char *warn,
                                    size_t warn_n, char *err, size_t err_n)
{
    if (warn_n)
        warn[0] = 0;
    srv_glossaries *st = calloc(1, sizeof *st);
    if (!st) {
        say(err, err_n, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    pthread_mutex_init(&st->edit_mu, NULL);
    st->lim = *lim;
    if (dir && dir[0]) {
        size_t n = strlen(dir) + sizeof "/glossaries";
        if (!(st->dir = malloc(n))) {
            say(err, err_n, "out of memory");
            srv_glossaries_close(st);
            return NULL;
        }
        snprintf(st->dir, n, "%s/glossaries", dir);
        if (load_all(st, warn, warn_n) != 0) {
            say(err, err_n, "the state directory's glossaries (%s) cannot be read: %s", st->dir,
                strerror(errno));
            srv_glossaries_close(st);
            return NULL;
        }
    }
    return st;
}

void srv_glossaries_close(srv_glossaries *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n; i++)
        srv_glossary_put(st->g[i]);
    free(st->g);
    free(st->dir);
    pthread_mutex_destroy(&st->mu);
    pthread_mutex_destroy(&st->edit_mu);
    free(st);
}

int srv_glossaries_persistent(const srv_glossaries *st)
{
    return st && st->dir != NULL;
}

static void now_iso(char *out, size_t n)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char s[32];
    strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, n, "%.20s.%03dZ", s, (int)(ts.tv_nsec / 1000000) % 1000);
}

srv_err srv_glossaries_create(srv_glossaries *st, const char *name, const srv_gloss_input *in,
                              int n, srv_glossary **out, const char **param, char *msg,
                              size_t msg_n)
{
    char id[40], created[40];
    *out = NULL;
    *param = NULL;
    if (new_id(id) != 0) {
        say(msg, msg_n, "no random bytes for an id");
        return SRV_ERR_INTERNAL;
    }
    now_iso(created, sizeof created);
    srv_glossary *g = NULL;
    srv_err rc = build(id, name, created, in, n, &st->lim, &g, param, msg, msg_n);
    if (rc == SRV_ERR_NOMEM)
        say(msg, msg_n, "out of memory");
    if (rc != SRV_OK)
        return rc;
    pthread_mutex_lock(&st->mu);
    if (st->n >= st->lim.max_glossaries) {
        rc = SRV_ERR_NO_ROOM;
        say(msg, msg_n, "the server holds %d glossaries, its most (--max-glossaries); delete one "
                        "first", st->n);
    } else if (st->dir && write_file(st->dir, g) != 0) {
        rc = SRV_ERR_INTERNAL;
        say(msg, msg_n, "the glossary could not be stored under %s: %s", st->dir, strerror(errno));
    } else if (add_locked(st, g) != 0) {
        rc = SRV_ERR_NOMEM;
        say(msg, msg_n, "out of memory");
        if (st->dir) { /* not kept: neither is its file */
            char path[4200];
            snprintf(path, sizeof path, "%s/%s.json", st->dir, g->id);
            unlink(path);
        }
    } else {
        atomic_fetch_add(&g->refs, 1); /* the caller's, before a delete can drop the store's */
    }
    pthread_mutex_unlock(&st->mu);
    if (rc != SRV_OK) {
        srv_glossary_put(g);
        return rc;
    }
    *out = g;
    return SRV_OK;
}

srv_err srv_glossaries_get(srv_glossaries *st, const char *id, srv_glossary **out, char *msg,
                           size_t msg_n)
{
    srv_glossary *g = NULL;
    if (st) {
        pthread_mutex_lock(&st->mu);
        for (int i = 0; i < st->n && !g; i++)
            if (!strcmp(st->g[i]->id, id)) {
                g = st->g[i];
                atomic_fetch_add(&g->refs, 1);
            }
        pthread_mutex_unlock(&st->mu);
    }
    *out = g;
    if (g)
        return SRV_OK;
    say(msg, msg_n, "no glossary '%.64s'", id);
    return SRV_ERR_NOT_FOUND;
}

int srv_glossaries_list(srv_glossaries *st, srv_glossary ***out)
{
    pthread_mutex_lock(&st->mu);
    int n = st->n;
    *out = malloc((size_t)(n ? n : 1) * sizeof **out);
    if (*out)
        for (int i = 0; i < n; i++) {
            (*out)[i] = st->g[i];
            atomic_fetch_add(&st->g[i]->refs, 1);
        }
    pthread_mutex_unlock(&st->mu);
    return *out ? n : -1;
}

srv_err srv_glossaries_delete(srv_glossaries *st, const char *id, char *msg, size_t msg_n)
{
    srv_err rc = SRV_ERR_NOT_FOUND;
    srv_glossary *gone = NULL;
    pthread_mutex_lock(&st->mu);
    for (int i = 0; i < st->n; i++) {
        if (strcmp(st->g[i]->id, id) != 0)
            continue;
        if (st->dir) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s.json", st->dir, id);
            if (unlink(path) != 0 && errno != ENOENT) {
                rc = SRV_ERR_INTERNAL;
                say(msg, msg_n, "the glossary's file %s could not be removed: %s", path,
                    strerror(errno));
                break;
            }
            sync_dir(st->dir);
        }
        gone = st->g[i];
        memmove(st->g + i, st->g + i + 1, (size_t)(st->n - i - 1) * sizeof *st->g);
        st->n--;
        rc = SRV_OK;
        break;
    }
    pthread_mutex_unlock(&st->mu);
    if (rc == SRV_ERR_NOT_FOUND)
        say(msg, msg_n, "no glossary '%.64s'", id);
    srv_glossary_put(gone);
    return rc;
}

/* ---- edits (DeepL's v3: PATCH, PUT and DELETE of dictionaries) ------------- */

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The TSV of old merged with add: old's entries whose source term
 * (case-insensitively) add does not have, then add's, in their order.
 * malloc'd (*n its bytes), or NULL when out of memory. */
static char *merge_tsv(const srv_gloss_dict *old, const srv_gloss_dict *add, size_t *n)
{
    const char **folds = malloc((size_t)(add->n ? add->n : 1) * sizeof *folds);
    char *out = malloc(old->tsv_n + add->tsv_n + 1);
    if (!folds || !out) {
        free(folds);
        free(out);
        return NULL;
    }
    for (int i = 0; i < add->n; i++)
        folds[i] = add->e[i].fold;
    qsort(folds, (size_t)add->n, sizeof *folds, by_str);
    size_t at = 0;
    for (int i = 0; i < old->n; i++) {
        const srv_gloss_entry *e = &old->e[i];
        const char *key = e->fold;
        if (bsearch(&key, folds, (size_t)add->n, sizeof *folds, by_str))
            continue; /* replaced by add's */
        memcpy(out + at, e->src, e->src_n);
        at += e->src_n;
        out[at++] = '\t';
        if (e->inflect)
            out[at++] = '~';
        memcpy(out + at, e->tgt, e->tgt_n);
        at += e->tgt_n;
        out[at++] = '\n';
    }
    memcpy(out + at, add->tsv, add->tsv_n);
    at += add->tsv_n;
    out[at] = 0;
    free(folds);
    *n = at;
    return out;
}

/* The dictionaries of the edited glossary into all (merged texts into
 * own, the caller's to free): old's, each one in[] names merged,
 * replaced or dropped by kind, then in[]'s new pairs. Their count, or -1
 * with the status in *st. */
static int edit_inputs(const srv_glossary *old, const srv_gloss_input *in, int n,
                       srv_gloss_edit_kind kind, int max_entries, srv_gloss_input *all,
                       char **own, srv_err *st, const char **param, char *msg,
                       size_t msg_n)
{
    char s[SRV_GLOSS_MAX_DICTS][16], t[SRV_GLOSS_MAX_DICTS][16];
    int used[SRV_GLOSS_MAX_DICTS] = {0}, na = 0;
    *st = SRV_ERR_INVALID;
    for (int j = 0; j < n; j++) {
        *param = srv_gloss_lang(in[j].src_lang ? in[j].src_lang : "", s[j], sizeof s[j])
                     ? "source_lang"
                 : srv_gloss_lang(in[j].tgt_lang ? in[j].tgt_lang : "", t[j], sizeof t[j])
                     ? "target_lang"
                     : NULL;
        if (*param) {
            say(msg, msg_n, "%s is not a language code", *param);
            return -1;
        }
    }
    for (int i = 0; i < old->n_dicts; i++) {
        const srv_gloss_dict *d = &old->d[i];
        int j = 0;
        while (j < n && (strcmp(s[j], d->src_lang) || strcmp(t[j], d->tgt_lang)))
            j++;
        if (j == n) { /* not named: as it is */
            all[na++] = (srv_gloss_input){d->src_lang, d->tgt_lang, d->tsv, d->tsv_n, "tsv"};
            continue;
        }
        used[j] = 1;
        if (kind == SRV_GLOSS_DROP)
            continue;
        if (kind == SRV_GLOSS_REPLACE) {
            all[na++] = in[j];
            continue;
        }
        srv_gloss_dict add;
        if ((*st = make_dict(&in[j], max_entries, &add, param, msg, msg_n)) != SRV_OK)
            return -1;
        size_t len = 0;
        own[j] = merge_tsv(d, &add, &len);
        srv_gloss_dict_free(&add);
        if (!own[j]) {
            *st = SRV_ERR_NOMEM;
            return -1;
        }
        all[na++] = (srv_gloss_input){d->src_lang, d->tgt_lang, own[j], len, "tsv"};
    }
    for (int j = 0; j < n; j++) {
        if (used[j])
            continue;
        if (kind == SRV_GLOSS_DROP) {
            *st = SRV_ERR_NOT_FOUND;
            *param = "source_lang";
            say(msg, msg_n, "glossary %s has no %s->%s dictionary", old->id, s[j], t[j]);
            return -1;
        }
        if (na == SRV_GLOSS_MAX_DICTS) {
            *st = SRV_ERR_INVALID; /* a merge before may have left SRV_OK here */
            *param = "dictionaries";
            say(msg, msg_n, "a glossary has at most %d dictionaries", SRV_GLOSS_MAX_DICTS);
            return -1;
        }
        all[na++] = in[j];
    }
    if (na == 0) {
        *param = "source_lang";
        say(msg, msg_n, "a glossary keeps at least one dictionary (delete the glossary instead)");
        return -1;
    }
    *st = SRV_OK;
    return na;
}

srv_err srv_glossaries_edit(srv_glossaries *st, const char *id, const char *name,
                            const srv_gloss_input *in, int n, srv_gloss_edit_kind kind,
                            srv_glossary **out, const char **param, char *msg, size_t msg_n)
{
    *out = NULL;
    *param = NULL;
    if (n < 0 || n > SRV_GLOSS_MAX_DICTS) {
        *param = "dictionaries";
        say(msg, msg_n, "at most %d dictionaries", SRV_GLOSS_MAX_DICTS);
        return SRV_ERR_INVALID;
    }
    pthread_mutex_lock(&st->edit_mu);
    srv_glossary *old = NULL, *g = NULL;
    srv_gloss_input all[SRV_GLOSS_MAX_DICTS];
    char *own[SRV_GLOSS_MAX_DICTS] = {0};
    srv_err rc = srv_glossaries_get(st, id, &old, msg, msg_n);
    if (rc != SRV_OK)
        goto out;
    int na = edit_inputs(old, in, n, kind, st->lim.max_entries, all, own, &rc, param, msg, msg_n);
    if (na < 0 || (rc = build(old->id, name ? name : old->name, old->created, all, na, &st->lim,
                              &g, param, msg, msg_n)) != SRV_OK)
        goto out;
    /* the new one in the old one's place (and file), unless deleted meanwhile */
    srv_glossary *gone = NULL;
    pthread_mutex_lock(&st->mu);
    int at = 0;
    while (at < st->n && st->g[at] != old)
        at++;
    if (at == st->n) {
        rc = SRV_ERR_NOT_FOUND;
        say(msg, msg_n, "glossary %s was deleted", old->id);
    } else if (st->dir != NULL && write_file(st->dir, g) != 0) {
        rc = SRV_ERR_INTERNAL;
        say(msg, msg_n, "the glossary could not be stored under %s: %s", st->dir, strerror(errno));
    } else {
        gone = old; /* the store's reference */
        st->g[at] = g;
        atomic_fetch_add(&g->refs, 1); /* the caller's */
        *out = g;
    }
    pthread_mutex_unlock(&st->mu);
    srv_glossary_put(gone);
    if (rc != SRV_OK)
        srv_glossary_put(g);
out:
    srv_glossary_put(old);
    pthread_mutex_unlock(&st->edit_mu);
    for (int j = 0; j < n; j++)
        free(own[j]);
    return rc;
}
