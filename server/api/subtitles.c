/*
 * subtitles.c - SubRip and WebVTT cues into texts and back (subtitles.h).
 * No library: a subtitle file is lines, blocks between blank lines and a
 * timing line with "-->"; the cue's text is all there is to find.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "subtitles.h"

typedef struct list {
    srv_sub_piece *p;
    int n, cap;
} list;

static srv_sub_piece *push(list *l)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        srv_sub_piece *p = realloc(l->p, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        l->p = p;
        l->cap = cap;
    }
    srv_sub_piece *p = &l->p[l->n++];
    memset(p, 0, sizeof *p);
    p->dash = p->open = p->close = "";
    return p;
}

static int verbatim(list *l, const char *a, const char *b)
{
    if (b <= a)
        return 0;
    /* one piece for a run of verbatim bytes */
    if (l->n && l->p[l->n - 1].verbatim &&
        l->p[l->n - 1].verbatim + l->p[l->n - 1].verbatim_len == a) {
        l->p[l->n - 1].verbatim_len += (size_t)(b - a);
        return 0;
    }
    srv_sub_piece *p = push(l);
    if (!p)
        return -1;
    p->verbatim = a;
    p->verbatim_len = (size_t)(b - a);
    return 0;
}

/* The end of the line at p (its '\n', or end), and where the next starts. */
static const char *line_end(const char *p, const char *end, const char **next)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    *next = nl ? nl + 1 : end;
    return nl ? (nl > p && nl[-1] == '\r' ? nl - 1 : nl) : end;
}

static int blank(const char *a, const char *b)
{
    for (; a < b; a++)
        if (*a != ' ' && *a != '\t')
            return 0;
    return 1;
}

/* 1 when the line [a, b) holds "-->": a timing line. */
static int arrow(const char *a, const char *b)
{
    for (const char *c = a; c + 3 <= b; c++)
        if (!memcmp(c, "-->", 3))
            return 1;
    return 0;
}

/* 1 when the line [a, b) is a cue number: digits only. */
static int digits(const char *a, const char *b)
{
    if (a >= b)
        return 0;
    for (; a < b; a++)
        if (*a < '0' || *a > '9')
            return 0;
    return 1;
}

/* A text piece of lines [a, b) (k lines, separated by nl): joined by
 * single spaces, a whole wrapping tag taken off. */
static int text_piece(list *l, const char *a, const char *b, int k, const char *nl)
{
    static const char *const tags[][2] = {{"<i>", "</i>"}, {"<b>", "</b>"}, {"<u>", "</u>"}};
    srv_sub_piece *p = push(l);
    if (!p)
        return -1;
    char *t = malloc((size_t)(b - a) + 1);
    if (!t)
        return -1;
    size_t n = 0;
    int space = 0;
    for (const char *c = a; c < b; c++) {
        int ws = *c == '\n' || *c == '\r' || *c == ' ' || *c == '\t';
        if (ws) {
            space = n > 0;
            continue;
        }
        if (space)
            t[n++] = ' ';
        space = 0;
        t[n++] = *c;
    }
    t[n] = 0;
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        size_t lo = strlen(tags[i][0]), lc = strlen(tags[i][1]);
        if (n > lo + lc && !strncmp(t, tags[i][0], lo) && !strcmp(t + n - lc, tags[i][1]) &&
            !strstr(t + lo, tags[i][0])) {
            memmove(t, t + lo, n - lo - lc);
            n -= lo + lc;
            t[n] = 0;
            p->open = tags[i][0];
            p->close = tags[i][1];
            break;
        }
    }
    p->text = t;
    p->text_len = n;
    p->lines = k;
    p->nl = nl;
    return 0;
}

/* The cue text lines [a, end of block): one text, or a text a line when
 * every line is a speaker's ("- ..."): the dash (and the space after it)
 * kept out of the model's text and written back before the line's
 * translation. */
static int cue_text(list *l, const char *a, const char *end, int *cues)
{
    const char *nl = "\n";
    int k = 0, dashes = 0;
    for (const char *p = a, *next; p < end; p = next) {
        const char *e = line_end(p, end, &next);
        if (e < next && *e == '\r')
            nl = "\r\n";
        k++;
        dashes += *p == '-';
    }
    if (k > 1 && dashes == k) {
        for (const char *p = a, *next; p < end; p = next) {
            const char *e = line_end(p, end, &next);
            const char *t = p + 1 + (p + 1 < e && p[1] == ' ');
            if (text_piece(l, t, e, 1, nl) != 0)
                return -1;
            l->p[l->n - 1].dash = t == p + 2 ? "- " : "-";
            if (verbatim(l, e, next) != 0)
                return -1;
            (*cues)++;
        }
        return 0;
    }
    /* the last line's end stays verbatim */
    const char *last = end;
    while (last > a && (last[-1] == '\n' || last[-1] == '\r'))
        last--;
    if (text_piece(l, a, last, k, nl) != 0 || verbatim(l, last, end) != 0)
        return -1;
    (*cues)++;
    return 0;
}

int srv_subtitles_parse(const char *data, size_t len, srv_sub_piece **out, int *n, int *cues,
                        char *err, size_t errlen)
{
    list l = {0};
    const char *p = data, *end = data + len;
    *cues = 0;
    while (p < end) {
        /* blank lines between blocks: verbatim */
        const char *next, *e = line_end(p, end, &next);
        if (blank(p, e)) {
            if (verbatim(&l, p, next) != 0)
                goto oom;
            p = next;
            continue;
        }
        /* a block: up to the next blank line, or up to a second timing
         * line (WebVTT's parsing algorithm ends a cue at a line holding
         * "-->"; players read SubRip so too), whose cue number (a line of
         * digits after some text) goes with it */
        const char *b = p, *timing = NULL, *prev = NULL, *prev_end = NULL;
        while (b < end) {
            const char *bn, *be = line_end(b, end, &bn);
            if (blank(b, be))
                break;
            if (arrow(b, be)) {
                if (timing) {
                    if (prev && prev > timing && digits(prev, prev_end))
                        b = prev;
                    break;
                }
                timing = bn; /* the cue's text starts after its timing line */
            }
            prev = b;
            prev_end = be;
            b = bn;
        }
        if (!timing || timing >= b) { /* a header, a NOTE, a cue with no text */
            if (verbatim(&l, p, b) != 0)
                goto oom;
        } else if (verbatim(&l, p, timing) != 0 || cue_text(&l, timing, b, cues) != 0) {
            goto oom;
        }
        p = b;
    }
    if (*cues == 0) {
        srv_subtitles_free(l.p, l.n);
        snprintf(err, errlen, "no subtitle cue (a timing line with --> and text after it)");
        return -2;
    }
    *out = l.p;
    *n = l.n;
    return 0;
oom:
    srv_subtitles_free(l.p, l.n);
    return -1;
}

void srv_subtitles_free(srv_sub_piece *p, int n)
{
    for (int i = 0; p && i < n; i++)
        free(p[i].text);
    free(p);
}

char *srv_subtitles_render(const srv_sub_piece *p, const char *t, size_t n)
{
    size_t ld = strlen(p->dash), lo = strlen(p->open), lc = strlen(p->close), ln = strlen(p->nl);
    int k = p->lines > 1 ? p->lines : 1;
    char *out = malloc(ld + lo + n + lc + (size_t)k * ln + 1);
    if (!out)
        return NULL;
    /* characters (not bytes) decide the share of a line */
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((unsigned char)t[i] & 0xC0) != 0x80;
    char *w = out;
    memcpy(w, p->dash, ld);
    w += ld;
    memcpy(w, p->open, lo);
    w += lo;
    size_t from = 0, seen = 0;
    for (int line = 1; line < k; line++) {
        /* the space nearest to line/k of the characters, after from */
        size_t target = chars * (size_t)line / (size_t)k, best = 0, bestd = (size_t)-1, c = seen;
        for (size_t i = from; i < n; i++) {
            if (t[i] == ' ' && i > from) {
                size_t d = c > target ? c - target : target - c;
                if (d < bestd) {
                    bestd = d;
                    best = i;
                }
            }
            c += ((unsigned char)t[i] & 0xC0) != 0x80;
        }
        if (!best)
            break; /* no space left: fewer lines */
        memcpy(w, t + from, best - from);
        w += best - from;
        memcpy(w, p->nl, ln);
        w += ln;
        for (size_t i = from; i <= best; i++)
            seen += ((unsigned char)t[i] & 0xC0) != 0x80;
        from = best + 1;
    }
    memcpy(w, t + from, n - from);
    w += n - from;
    memcpy(w, p->close, lc);
    w += lc;
    *w = 0;
    return out;
}
