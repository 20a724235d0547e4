/*
 * documents.c - the documents table (documents.h): one row a format, and
 * the document object that drives a row's parser. Plain text's lines are
 * parsed here; every other format is its own file's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "catalog.h"
#include "documents.h"
#include "office.h"
#include "subtitles.h"

typedef enum doc_kind { DOC_TEXT, DOC_SUBTITLES, DOC_CATALOGUE, DOC_OFFICE } doc_kind;

/* A row with the parser family that reads it. */
typedef struct doc_row {
    srv_doc_format f;
    doc_kind kind;
} doc_row;

/* The table, in the order LibreTranslate's settings list the extensions. */
static const doc_row k_rows[] = {
    {{"text", {".txt"}, "text/plain; charset=utf-8", 0, 0, 0, 0}, DOC_TEXT},
    {{"html", {".html", ".htm"}, "text/html; charset=utf-8", 0, 1, 1, 0}, DOC_OFFICE},
    {{"subrip", {".srt"}, "application/x-subrip; charset=utf-8", 0, 0, 1, 0}, DOC_SUBTITLES},
    {{"webvtt", {".vtt"}, "text/vtt; charset=utf-8", 0, 0, 1, 0}, DOC_SUBTITLES},
    {{"catalogue", {".ts", ".xlf", ".xliff"}, "application/xml; charset=utf-8", 0, 0, 0, 1},
     DOC_CATALOGUE},
    {{"gettext", {".po", ".pot"}, "text/x-gettext-translation; charset=utf-8", 1, 0, 0, 1},
     DOC_CATALOGUE},
    {{"office", {".docx", ".pptx", ".odt", ".odp", ".epub"}, NULL, 1, 1, 1, 0}, DOC_OFFICE},
    {{"markdown", {".md", ".markdown"}, "text/markdown; charset=utf-8", 0, 1, 1, 0}, DOC_OFFICE},
    {{"xhtml", {".xhtml"}, "application/xhtml+xml; charset=utf-8", 0, 1, 1, 0}, DOC_OFFICE},
};
#define N_ROWS ((int)(sizeof k_rows / sizeof k_rows[0]))

/* A plain text file's line: its text without the blanks around it. */
typedef struct doc_line {
    const char *lead, *trail, *eol;
    size_t lead_n, trail_n;
} doc_line;

typedef struct doc_seg {
    const char *text;
    size_t len;
    int keep;
    char *out; /* text and subtitles: its piece of the file once set */
} doc_seg;

struct srv_document {
    const doc_row *row;
    doc_seg *segs;
    int n, cap;
    doc_line *lines;        /* text: one per segment */
    srv_sub_piece *subs;    /* subtitles: one per segment */
    int n_subs;
    srv_catalog *cat;
    srv_office *office;
    int lost;
};

const srv_doc_format *srv_doc_format_of(const char *ext)
{
    if (!ext || ext[0] != '.')
        return NULL;
    for (int i = 0; i < N_ROWS; i++)
        for (int k = 0; k < 6 && k_rows[i].f.exts[k]; k++)
            if (!strcasecmp(k_rows[i].f.exts[k], ext))
                return &k_rows[i].f;
    return NULL;
}

const char *srv_doc_ctype(const srv_doc_format *f, const char *ext)
{
    return f->ctype ? f->ctype : srv_office_mime(ext);
}

int srv_doc_exts(const char **out, int max)
{
    int n = 0;
    for (int i = 0; i < N_ROWS; i++)
        for (int k = 0; k < 6 && k_rows[i].f.exts[k]; k++, n++)
            if (n < max)
                out[n] = k_rows[i].f.exts[k];
    return n;
}

static int add_seg(srv_document *d, const char *t, size_t n, int keep)
{
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 16;
        doc_seg *p = realloc(d->segs, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        d->segs = p;
        d->cap = cap;
    }
    d->segs[d->n++] = (doc_seg){t, n, keep, NULL};
    return 0;
}

/* ---- the rows' parsers --------------------------------------------------- */

/* A .txt file's lines: each line one segment without the blanks around it,
 * which are written back as they were (a file of nothing is one line). */
static int text_parse(srv_document *d, const char *data, size_t len)
{
    int n = 1;
    for (size_t i = 0; i < len; i++)
        n += data[i] == '\n';
    d->lines = calloc((size_t)n, sizeof *d->lines);
    if (!d->lines)
        return -1;
    const char *p = data, *end = data + len;
    while (p < end || d->n == 0) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        doc_line *l = &d->lines[d->n];
        l->eol = nl ? (le > p && le[-1] == '\r' ? "\r\n" : "\n") : "";
        if (nl && le > p && le[-1] == '\r')
            le--;
        const char *a = p, *b = le;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        l->lead = p;
        l->lead_n = (size_t)(a - p);
        l->trail = b;
        l->trail_n = (size_t)(le - b);
        if (add_seg(d, a, (size_t)(b - a), 0) != 0)
            return -1;
        p = nl ? nl + 1 : end;
        if (!nl)
            break;
    }
    return 0;
}

/* A subtitle file's pieces: a cue's text one segment, everything else a
 * segment kept as it is. */
static int subtitles_parse(srv_document *d, const char *data, size_t len, char *why,
                           size_t whylen)
{
    int cues = 0;
    int rc = srv_subtitles_parse(data, len, &d->subs, &d->n_subs, &cues, why, whylen);
    for (int i = 0; rc == 0 && i < d->n_subs; i++) {
        const srv_sub_piece *p = &d->subs[i];
        rc = p->verbatim ? add_seg(d, p->verbatim, p->verbatim_len, 1)
                         : add_seg(d, p->text, p->text_len, 0);
    }
    return rc;
}

/* A catalogue or a document: a segment a unit (catalog.h, office.h). */
static int units_parse(srv_document *d, const char *ext, const char *data, size_t len,
                       const srv_doc_opts *o, char *why, size_t whylen)
{
    const int office = d->row->kind == DOC_OFFICE;
    int rc = office ? srv_office_parse(data, len, ext, &d->office, why, whylen)
                    : srv_catalog_parse(data, len, o->overwrite, &d->cat, why, whylen);
    if (rc == 0 && d->cat)
        srv_catalog_target(d->cat, o->target ? o->target : "en");
    int n = rc ? 0 : office ? srv_office_n(d->office) : srv_catalog_n(d->cat);
    for (int k = 0; rc == 0 && k < n; k++) {
        const char *u = office ? srv_office_source(d->office, k) : srv_catalog_source(d->cat, k);
        rc = add_seg(d, u, strlen(u), 0);
    }
    return rc;
}

srv_err srv_doc_parse(const srv_doc_format *f, const char *ext, const char *data, size_t len,
                      const srv_doc_opts *o, srv_document **out, char *why, size_t whylen)
{
    static const srv_doc_opts k_none = {0, NULL};
    srv_document *d = calloc(1, sizeof *d);
    *out = NULL;
    why[0] = 0;
    if (!d)
        return SRV_ERR_NOMEM;
    d->row = (const doc_row *)f; /* f is a row's first member */
    int rc;
    switch (d->row->kind) {
    case DOC_TEXT:
        rc = text_parse(d, data, len);
        break;
    case DOC_SUBTITLES:
        rc = subtitles_parse(d, data, len, why, whylen);
        break;
    default:
        rc = units_parse(d, ext, data, len, o ? o : &k_none, why, whylen);
        break;
    }
    if (rc != 0) {
        srv_doc_free(d);
        return rc == -2 ? SRV_ERR_INVALID : why[0] ? SRV_ERR_INTERNAL : SRV_ERR_NOMEM;
    }
    *out = d;
    return SRV_OK;
}

/* ---- segments and their translations ------------------------------------- */

int srv_doc_n(const srv_document *d)
{
    return d->n;
}
const char *srv_doc_seg(const srv_document *d, int i, size_t *len)
{
    *len = d->segs[i].len;
    return d->segs[i].text;
}
int srv_doc_keep(const srv_document *d, int i)
{
    return d->segs[i].keep;
}
int srv_doc_styled(const srv_document *d, int i)
{
    if (d->office)
        return srv_office_styled(d->office, i);
    return d->subs && !d->segs[i].keep && srv_subtitles_styled(&d->subs[i]);
}

/* Text and subtitles: segment i's piece of the file from t (n bytes). */
static char *piece(srv_document *d, int i, const char *t, size_t n, const srv_align *al,
                   int n_al)
{
    if (d->subs) { /* its bytes, or a cue's lines again with its markup */
        int lost = 0;
        char *out = d->subs[i].verbatim ? strndup(t, n)
                                        : srv_subtitles_render(&d->subs[i], t, n, al, n_al, &lost);
        d->lost += lost;
        return out;
    }
    const doc_line *l = &d->lines[i];
    size_t e = strlen(l->eol);
    char *out = malloc(l->lead_n + n + l->trail_n + e + 1);
    if (out) {
        memcpy(out, l->lead, l->lead_n);
        memcpy(out + l->lead_n, t, n);
        memcpy(out + l->lead_n + n, l->trail, l->trail_n);
        memcpy(out + l->lead_n + n + l->trail_n, l->eol, e + 1);
    }
    return out;
}

int srv_doc_set(srv_document *d, int i, const char *t, size_t n, const srv_align *al, int n_al)
{
    if (d->office)
        return srv_office_set(d->office, i, t, al, n_al);
    if (d->cat)
        return srv_catalog_set(d->cat, i, t) < 0 ? -1 : 0;
    free(d->segs[i].out);
    d->segs[i].out = piece(d, i, t, n, al, n_al);
    return d->segs[i].out ? 0 : -1;
}

char *srv_doc_render(srv_document *d, size_t *len, char *why, size_t whylen)
{
    *len = 0;
    if (d->office)
        return srv_office_render(d->office, len, why, whylen);
    if (d->cat)
        return srv_catalog_render(d->cat, len, why, whylen);
    snprintf(why, whylen, "out of memory");
    /* a segment never set: its source (a subtitle file's cue through its
     * markup's rules all the same) */
    for (int i = 0; i < d->n; i++)
        if (!d->segs[i].out &&
            !(d->segs[i].out = piece(d, i, d->segs[i].text, d->segs[i].len, NULL, 0)))
            return NULL;
    size_t n = 0;
    for (int i = 0; i < d->n; i++)
        n += strlen(d->segs[i].out);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    for (int i = 0; i < d->n; i++) {
        size_t k = strlen(d->segs[i].out);
        memcpy(out + *len, d->segs[i].out, k);
        *len += k;
    }
    out[*len] = 0;
    return out;
}

int srv_doc_lost(const srv_document *d)
{
    return d->office ? srv_office_lost(d->office) : d->lost;
}
int srv_doc_kept(const srv_document *d)
{
    return d->cat ? srv_catalog_kept(d->cat) : 0;
}

void srv_doc_free(srv_document *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->n; i++)
        free(d->segs[i].out);
    free(d->segs);
    free(d->lines);
    srv_subtitles_free(d->subs, d->n_subs);
    srv_catalog_free(d->cat);
    srv_office_free(d->office);
    free(d);
}
