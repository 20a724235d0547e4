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
    int vtt; /* a WebVTT file: its cue text rules (cuetext.h) */
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

/* A text piece of lines [a, b) (k lines, separated by nl): its text and
 * markup (cuetext.h); a piece of markup alone is verbatim. */
static int text_piece(list *l, const char *a, const char *b, int k, const char *nl,
                      srv_cue_dash dash)
{
    srv_sub_piece *p = push(l);
    if (!p)
        return -1;
    int rc = srv_cue_parse(&p->cue, a, b, l->vtt, dash);
    if (rc <= 0) {
        l->n--;
        return rc < 0 ? -1 : verbatim(l, a, b);
    }
    p->text = srv_cue_text(&p->cue, &p->text_len);
    p->lines = k;
    p->nl = nl;
    return 0;
}

/* The first byte of [p, e) after the tags that start it. */
static const char *after_tags(const char *p, const char *e, int vtt)
{
    size_t k;
    while (p < e && (k = srv_cue_tag_len(p, e, vtt)) > 0)
        p += k;
    return p;
}

/* The cue text lines [a, end of block): one text, or a text a line when
 * every line is a speaker's ("- ...", after the tags that open it): the
 * dash (and the space after it) kept out of the model's text and written
 * back before the line's translation. */
static int cue_text(list *l, const char *a, const char *end, int *cues)
{
    const char *nl = "\n";
    int k = 0, dashes = 0;
    for (const char *p = a, *next; p < end; p = next) {
        const char *e = line_end(p, end, &next);
        if (e < next && *e == '\r')
            nl = "\r\n";
        k++;
        dashes += *after_tags(p, e, l->vtt) == '-';
    }
    if (k > 1 && dashes == k) {
        for (const char *p = a, *next; p < end; p = next) {
            const char *e = line_end(p, end, &next);
            if (text_piece(l, p, e, 1, nl, SRV_CUE_DASH) != 0 || verbatim(l, e, next) != 0)
                return -1;
            (*cues)++;
        }
        return 0;
    }
    /* the last line's end stays verbatim */
    const char *last = end;
    while (last > a && (last[-1] == '\n' || last[-1] == '\r'))
        last--;
    if (text_piece(l, a, last, k, nl, SRV_CUE_NO_DASH) != 0 || verbatim(l, last, end) != 0)
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
    /* WebVTT's signature, after a byte order mark */
    const char *sig = len >= 3 && !memcmp(data, "\xEF\xBB\xBF", 3) ? data + 3 : data;
    l.vtt = (size_t)(end - sig) >= 6 && !memcmp(sig, "WEBVTT", 6);
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
        srv_cue_free(&p[i].cue);
    free(p);
}

int srv_subtitles_styled(const srv_sub_piece *p)
{
    return !p->verbatim && srv_cue_styled(&p->cue);
}

char *srv_subtitles_render(srv_sub_piece *p, const char *t, size_t n, const srv_align *al,
                           int n_al, int *lost)
{
    return srv_cue_render(&p->cue, t, n, al, n_al, p->lines > 1 ? p->lines : 1, p->nl, lost);
}
