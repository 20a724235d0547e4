/*
 * pipeline.c - the one text pipeline (pipeline.h): texts -> sentences ->
 * tokenized jobs, and the finished jobs -> texts, with the symbols the
 * model cannot write copied from the source by its attention.
 *
 * Text <-> tokens happens here (and in the native API's token lists);
 * the engine and the batcher see token ids only.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

static void *pa(const srv_pipe *p, size_t count, size_t size)
{
    return p->arena.alloc(p->arena.ud, count, size);
}

/* A heap arena's block: its link, then the bytes. */
typedef union heap_block {
    union heap_block *next;
    max_align_t align;
} heap_block;

void *srv_heap_alloc(void *heap, size_t count, size_t size)
{
    srv_heap *h = heap;
    if (count == 0)
        count = 1;
    if (size && count > ((size_t)-1 - sizeof(heap_block)) / size)
        return NULL;
    heap_block *b = calloc(1, sizeof *b + count * size);
    if (!b)
        return NULL;
    b->next = h->blocks;
    h->blocks = b;
    return b + 1;
}

void srv_heap_free(srv_heap *h)
{
    heap_block *b = h->blocks;
    while (b) {
        heap_block *n = b->next;
        free(b);
        b = n;
    }
    h->blocks = NULL;
}

/* ---- the finished jobs -> text ------------------------------------------- */

/* The source position target token t of hypothesis hyp copies (an
 * unknown piece's, from u), or -1. Hypothesis 0 has the attention: the
 * source unknown piece t attends to most, summed over the captured layers
 * and heads. The others have none: the m-th unknown target token takes the
 * m-th unknown source piece, when there are as many (m: its rank). */
static int copy_source(const td_result *res, int hyp, int t, int m, const srv_unk_text *u)
{
    int nu = 0;
    while (u[nu].pos >= 0)
        nu++;
    if (hyp != 0 || !res->attention || t >= res->attn_n_t) {
        int nt = 0;
        const td_hypothesis *h = &res->hyps[hyp];
        for (int i = 0; i < h->n_tokens; i++)
            nt += h->tokens[i] == h->tokens[t];
        return nt == nu ? u[m].pos : -1;
    }
    int best = -1;
    double best_w = -1;
    const int nl = res->attn_n_layers, nh = res->attn_n_heads, nt = res->attn_n_t,
              ns = res->attn_n_s;
    for (int k = 0; k < nu; k++) {
        int s = u[k].pos;
        if (s >= ns)
            continue;
        double w = 0;
        for (int l = 0; l < nl; l++)
            for (int h = 0; h < nh; h++)
                w += res->attention[((size_t)(l * nh + h) * (size_t)nt + (size_t)t) * (size_t)ns +
                                    (size_t)s];
        if (w > best_w) {
            best_w = w;
            best = s;
        }
    }
    return best;
}

static int fill_block(const srv_pipe *p, int k, const size_t *soff, const size_t *toff,
                      size_t s0, size_t t0, srv_align *b);

/* The glossary's terms of job placed in t, its best hypothesis's text with
 * its tokens' offsets toff (moved with the text): the one call where a
 * sentence's translation and its alignment meet before the text is put
 * together (glossary.h, docs/decisions.md "Glossaries"). Returns the new
 * text (t freed), or NULL when out of memory (t freed). */
static char *place_terms(const srv_pipe *p, int job, char *t, size_t *toff)
{
    const srv_gloss_job *g = &p->gloss[job];
    const srv_job *j = &p->jobs[job];
    size_t *soff = NULL, n = strlen(t);
    srv_align b = {0};
    srv_gloss_edit *ed = NULL;
    char *out = NULL;
    int ne = -1;
    if (td_tok_source_offsets(p->tok, g->unit, g->unit_n, j->src, j->n_src, &soff) == 0 &&
        fill_block(p, job, soff, toff, 0, 0, &b) == 0)
        ne = srv_gloss_place(g->unit, g->unit_n, t, n, g->hits, g->n, &b, 1, &ed);
    if (ne >= 0)
        out = srv_gloss_apply(t, n, ed, ne, toff, j->res.hyps[0].n_tokens, &n);
    free(ed);
    free(soff);
    free(b.t_off);
    free(b.s_off);
    free(b.w);
    free(t);
    return out;
}

char *srv_pipe_decode(const srv_pipe *p, int job, int hyp, size_t **offsets)
{
    const td_result *res = &p->jobs[job].res;
    const td_hypothesis *h = &res->hyps[hyp];
    const srv_unk_text *u = p->unk ? p->unk[job] : NULL;
    const td_tokenizer *tok = p->tok;
    const int unk = td_tok_unk_id(tok);
    /* per target token: the source text it copies (NULL: its own piece) */
    const char **repl = NULL;
    for (int i = 0, m = 0; u && i < h->n_tokens; i++) {
        if (h->tokens[i] != unk)
            continue;
        int s = copy_source(res, hyp, i, m++, u);
        for (int k = 0; s >= 0 && u[k].pos >= 0; k++)
            if (u[k].pos == s && u[k].len) {
                if (!repl && !(repl = calloc((size_t)h->n_tokens, sizeof *repl)))
                    return NULL;
                repl[i] = u[k].text;
            }
    }
    char *t = NULL;
    size_t *toff = NULL;
    const int glossed = hyp == 0 && p->gloss && p->gloss[job].n > 0 && res->attention;
    if (td_tok_decode_as(tok, h->tokens, h->n_tokens, repl, &t) != 0 ||
        ((offsets || glossed) &&
         td_tok_target_offsets_as(tok, h->tokens, h->n_tokens, repl, &toff) != 0)) {
        free(t);
        t = NULL;
    }
    free(repl);
    if (t && glossed)
        t = place_terms(p, job, t, toff);
    if (offsets && t)
        *offsets = toff;
    else
        free(toff);
    return t;
}

/* ---- texts -> jobs ------------------------------------------------------- */

/* Sentences of the texts (p->split) unless seg_lang is NULL; returns the
 * number of units (texts and sentences) or -1 with f filled. */
static int split_texts(srv_pipe *p, const char *const *texts, const size_t *lens, int n,
                       srv_pipe_fail *f)
{
    int units = n;
    if (!p->seg_lang)
        return units;
    p->split = pa(p, (size_t)n, sizeof *p->split);
    if (!p->split)
        return -1;
    for (int i = 0; i < n; i++) {
        td_sentence *sent = NULL;
        int ns = td_segment(p->seg_lang, texts[i], lens[i], &sent, f->msg, sizeof f->msg);
        if (ns < 0) {
            f->text = i;
            return -2;
        }
        if (ns <= 1) {
            free(sent); /* one sentence: the text as it is, one unit */
            continue;
        }
        srv_split *sp = &p->split[i];
        sp->sent = sent;
        sp->text = pa(p, lens[i] + 1, 1);
        sp->job = pa(p, (size_t)ns, sizeof *sp->job);
        if (!sp->text || !sp->job)
            return -1;
        memcpy(sp->text, texts[i], lens[i]);
        sp->text[lens[i]] = 0;
        sp->len = lens[i];
        sp->n = ns;
        units += ns - 1;
    }
    return units;
}

/* The text of each unknown piece of job k's source (text, len: the unit
 * it was tokenized from), into p->unk[k]; such a job captures attention
 * for the copy (p->copy_opts) unless its options capture it already.
 * Returns 0, or -1 when out of memory. */
static int unknown_texts(srv_pipe *p, int k, const char *text, size_t len)
{
    const srv_job *j = &p->jobs[k];
    const int unk = td_tok_unk_id(p->tok);
    int n = 0;
    for (int i = 0; i < j->n_src; i++)
        n += j->src[i] == unk;
    if (!n)
        return 0;
    size_t *off = NULL;
    srv_unk_text *u = pa(p, (size_t)n + 1, sizeof *u);
    if (!u || td_tok_source_offsets(p->tok, text, len, j->src, j->n_src, &off) != 0)
        return -1;
    n = 0;
    for (int i = 0; i < j->n_src; i++) {
        if (j->src[i] != unk)
            continue;
        /* the piece's own characters: the space before a word is the ▁'s */
        size_t a = off[2 * i], b = off[2 * i + 1];
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\n' || text[a] == '\r'))
            a++;
        while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\n' ||
                         text[b - 1] == '\r'))
            b--;
        char *copy = pa(p, b - a + 1, 1);
        if (!copy) {
            free(off);
            return -1;
        }
        memcpy(copy, text + a, b - a);
        u[n++] = (srv_unk_text){i, copy, b - a};
    }
    free(off);
    u[n].pos = -1;
    p->unk[k] = u;
    if (!p->opts->return_attention)
        p->jobs[k].opts = &p->copy_opts;
    return 0;
}

srv_err srv_pipe_glossary(srv_pipe *p, const srv_glossary *g, const char *src, const char *tgt,
                          char *pairs, size_t n)
{
    p->gloss_dict = g ? srv_glossary_dict(g, src, tgt) : NULL;
    if (!g || p->gloss_dict)
        return SRV_OK;
    size_t at = 0;
    if (n)
        pairs[0] = 0;
    for (int i = 0; i < g->n_dicts && at < n; i++)
        at += (size_t)snprintf(pairs + at, n - at, "%s%s->%s", i ? ", " : "", g->d[i].src_lang,
                               g->d[i].tgt_lang);
    return SRV_ERR_INVALID;
}

/* The glossary's terms in job k's source (text, len: its unit) into
 * p->gloss[k]; a job with some captures attention to place them (as
 * unknown_texts's do). 0, or -1 when out of memory. */
static int glossary_terms(srv_pipe *p, int k, const char *text, size_t len)
{
    srv_gloss_hit *h = NULL;
    int n = srv_gloss_match(p->gloss_dict, text, len, &h);
    if (n <= 0)
        return n;
    srv_gloss_job *g = &p->gloss[k];
    char *unit = pa(p, len + 1, 1);
    g->hits = pa(p, (size_t)n, sizeof *g->hits);
    if (!unit || !g->hits) {
        free(h);
        return -1;
    }
    memcpy(unit, text, len);
    memcpy(g->hits, h, (size_t)n * sizeof *h);
    free(h);
    g->n = n;
    g->unit = unit;
    g->unit_n = len;
    srv_job *j = &p->jobs[k];
    if (!p->opts->return_attention) /* captured to place the terms, not answered */
        j->opts = &p->copy_opts;
    return 0;
}

/* Where unit u (a sentence of its text) is, in characters of the text. */
static void unit_chars(const char *text, const char *unit, size_t unit_n, srv_pipe_fail *f)
{
    size_t cs = 0, ce = 0, b0 = (size_t)(unit - text);
    for (size_t b = 0; b < b0 + unit_n; b++) {
        int ch = ((unsigned char)text[b] & 0xC0) != 0x80;
        cs += b < b0 && ch;
        ce += ch;
    }
    f->c0 = cs;
    f->c1 = ce;
}

/* The tokenized units into jobs (ids taken from ids[]); the unknown
 * pieces' texts kept. Returns 0 or -1 out of memory. */
static int units_to_jobs(srv_pipe *p, td_tok_ids *ids, int units, const char *const *ut,
                         const size_t *ul, const int *u_text, const int *u_sent)
{
    for (int u = 0; u < units; u++) {
        int i = u_text[u];
        srv_split *sp = u_sent[u] >= 0 ? &p->split[i] : NULL;
        int k = -1;
        if (ids[u].n_full > ids[u].n && p->n_cut++ == 0) {
            p->cut_text = i;
            p->cut_full = ids[u].n_full;
            p->cut_to = ids[u].n;
        }
        /* an empty or whitespace-only unit is not run (td_tok_is_empty) */
        if (td_tok_is_empty(ids[u].n_full - (p->src_lang >= 0))) {
            td_tok_ids_free(&ids[u], 1);
        } else {
            k = p->n_jobs++;
            p->src[k] = ids[u].ids; /* p's from here */
            ids[u].ids = NULL;
            srv_job *j = &p->jobs[k];
            j->src = p->src[k];
            j->n_src = ids[u].n;
            j->opts = p->opts;
            p->tokens_in += ids[u].n;
            if ((!p->raw_unknown && unknown_texts(p, k, ut[u], ul[u]) != 0) ||
                (p->gloss && glossary_terms(p, k, ut[u], ul[u]) != 0))
                return -1;
        }
        if (sp) {
            sp->job[u_sent[u]] = k;
            p->text_job[i] = -1;
        } else {
            p->text_job[i] = k;
        }
    }
    return 0;
}

srv_err srv_pipe_make(srv_pipe *p, const char *const *texts, const size_t *lens, int n,
                      srv_pipe_fail *f)
{
    *f = (srv_pipe_fail){.text = -1, .sentence = -1};
    p->n_texts = n;
    p->n_jobs = 0;
    p->tokens_in = 0;
    p->n_cut = 0;
    p->text_job = pa(p, (size_t)n, sizeof *p->text_job);
    int units = p->text_job ? split_texts(p, texts, lens, n, f) : -1;
    if (units < 0)
        return units == -2 ? SRV_ERR_INTERNAL : SRV_ERR_NOMEM;
    /* the units the model sees: whole texts, or the sentences of a split one */
    const size_t nu = (size_t)(units > 0 ? units : 1);
    const char **ut = pa(p, nu, sizeof *ut);
    size_t *ul = pa(p, nu, sizeof *ul);
    int *u_text = pa(p, nu, sizeof *u_text);
    int *u_sent = pa(p, nu, sizeof *u_sent);
    td_tok_ids *ids = pa(p, nu, sizeof *ids);
    p->jobs = pa(p, nu, sizeof *p->jobs);
    p->src = pa(p, nu, sizeof *p->src);
    p->unk = p->raw_unknown ? NULL : pa(p, nu, sizeof *p->unk);
    p->gloss = p->gloss_dict ? pa(p, nu, sizeof *p->gloss) : NULL;
    p->copy_opts = *p->opts;
    p->copy_opts.return_attention = 1;
    p->copy_opts.attn_layers = p->copy_opts.attn_heads = NULL;
    p->copy_opts.n_attn_layers = p->copy_opts.n_attn_heads = 0;
    if (!ut || !ul || !u_text || !u_sent || !ids || !p->jobs || !p->src ||
        (!p->raw_unknown && !p->unk) || (p->gloss_dict && !p->gloss))
        return SRV_ERR_NOMEM;
    int u = 0;
    for (int i = 0; i < n; i++) {
        const srv_split *sp = p->split ? &p->split[i] : NULL;
        for (int k = 0; k < (sp && sp->n ? sp->n : 1); k++, u++) {
            u_text[u] = i;
            u_sent[u] = sp && sp->n ? k : -1;
            ut[u] = sp && sp->n ? texts[i] + sp->sent[k].start : texts[i];
            ul[u] = sp && sp->n ? sp->sent[k].end - sp->sent[k].start : lens[i];
        }
    }
    int bad = -1;
    int rc = td_tok_encode_batch_lang(p->tok, p->src_lang, ut, ul, units, p->max_tokens,
                                      p->cut_long ? TD_LONG_SOURCE_TRUNCATE : TD_LONG_SOURCE_ERROR,
                                      ids, &bad, f->msg, sizeof f->msg);
    if (rc == TD_TOK_ETOOLONG) {
        f->text = u_text[bad];
        f->sentence = u_sent[bad];
        f->n_tokens = ids[bad].n_full;
        f->limit = p->max_tokens;
        if (u_sent[bad] >= 0)
            unit_chars(texts[u_text[bad]], ut[bad], ul[bad], f);
        return SRV_ERR_TOO_LONG;
    }
    if (rc != 0)
        return rc == TD_TOK_ENOMEM ? SRV_ERR_NOMEM : SRV_ERR_INTERNAL;
    if (units_to_jobs(p, ids, units, ut, ul, u_text, u_sent) != 0) {
        td_tok_ids_free(ids, units);
        return SRV_ERR_NOMEM;
    }
    if (p->max_jobs > 0 && p->n_jobs > p->max_jobs) {
        f->n_tokens = p->n_jobs;
        f->limit = p->max_jobs;
        return SRV_ERR_TOO_MANY;
    }
    return SRV_OK;
}

void srv_pipe_free(srv_pipe *p)
{
    for (int i = 0; p->jobs && i < p->n_jobs; i++)
        td_result_free(&p->jobs[i].res);
    for (int i = 0; p->src && i < p->n_jobs; i++)
        free(p->src[i]);
    for (int i = 0; p->split && i < p->n_texts; i++)
        free(p->split[i].sent);
    p->jobs = NULL;
    p->src = NULL;
    p->split = NULL;
    p->text_job = NULL;
    p->unk = NULL;
    p->gloss = NULL;
    p->n_jobs = 0;
}

/* ---- texts of several sentences ------------------------------------------ */

const srv_split *srv_pipe_split_of(const srv_pipe *p, int text)
{
    return p->split && p->split[text].n ? &p->split[text] : NULL;
}
int srv_pipe_split_n_hyps(const srv_pipe *p, const srv_split *sp)
{
    int nh = 0;
    for (int s = 0; s < sp->n; s++) {
        int k = sp->job[s];
        if (k >= 0 && (!nh || p->jobs[k].res.n_hyps < nh))
            nh = p->jobs[k].res.n_hyps;
    }
    return nh ? nh : 1;
}
char *srv_pipe_join(const srv_pipe *p, const srv_split *sp, int hyp, size_t *ranges,
                    double *score)
{
    char **owned = calloc((size_t)sp->n, sizeof *owned);
    const char **parts = pa(p, (size_t)sp->n, sizeof *parts);
    size_t *plens = pa(p, (size_t)sp->n, sizeof *plens);
    char *out = NULL;
    size_t out_len;
    double sum = 0, plain = 0;
    long nt = 0;
    int ok = owned && parts && plens, ran = 0;
    for (int s = 0; ok && s < sp->n; s++) {
        int k = sp->job[s];
        parts[s] = "";
        if (k < 0)
            continue; /* nothing to translate: "" */
        const td_result *res = &p->jobs[k].res;
        const td_hypothesis *h = &res->hyps[hyp < res->n_hyps ? hyp : res->n_hyps - 1];
        ok = (owned[s] = srv_pipe_decode(p, k, (int)(h - res->hyps), NULL)) != NULL;
        if (ok) {
            parts[s] = owned[s];
            plens[s] = strlen(owned[s]);
        }
        sum += (double)h->score * h->n_tokens;
        plain += h->score;
        nt += h->n_tokens;
        ran++;
    }
    if (ok && td_segment_join(sp->text, sp->len, sp->sent, sp->n, parts, plens, &out, &out_len,
                              ranges) != 0)
        out = NULL;
    *score = nt ? sum / (double)nt : ran ? plain / ran : 0.0;
    for (int s = 0; owned && s < sp->n; s++)
        free(owned[s]);
    free(owned);
    return out;
}
int srv_pipe_n_hyps(const srv_pipe *p, int text)
{
    if (srv_pipe_split_of(p, text))
        return srv_pipe_split_n_hyps(p, srv_pipe_split_of(p, text));
    int k = p->text_job[text];
    return k < 0 ? 1 : p->jobs[k].res.n_hyps;
}
char *srv_pipe_text(const srv_pipe *p, int text, int hyp)
{
    double score;
    if (srv_pipe_split_of(p, text))
        return srv_pipe_join(p, srv_pipe_split_of(p, text), hyp, NULL, &score);
    int k = p->text_job[text];
    if (k < 0)
        return calloc(1, 1);
    return srv_pipe_decode(p, k, hyp, NULL);
}

/* ---- word alignment --------------------------------------------------------- */

/* Job k's block from its source and best hypothesis's token offsets
 * (shifted by s0 and t0): the last captured layer's attention averaged
 * over its heads. 0, or -1 when out of memory. */
static int fill_block(const srv_pipe *p, int k, const size_t *soff, const size_t *toff,
                      size_t s0, size_t t0, srv_align *b)
{
    const srv_job *j = &p->jobs[k];
    const td_result *res = &j->res;
    const int nt = res->attn_n_t < res->hyps[0].n_tokens ? res->attn_n_t : res->hyps[0].n_tokens;
    const int ns = res->attn_n_s < j->n_src ? res->attn_n_s : j->n_src;
    const int nh = res->attn_n_heads, l = res->attn_n_layers - 1;
    *b = (srv_align){nt, ns, malloc(2 * (size_t)(nt ? nt : 1) * sizeof(size_t)),
                     malloc(2 * (size_t)(ns ? ns : 1) * sizeof(size_t)),
                     calloc((size_t)(nt ? nt : 1) * (size_t)(ns ? ns : 1), sizeof(float))};
    if (!b->t_off || !b->s_off || !b->w)
        return -1;
    for (int i = 0; i < 2 * nt; i++)
        b->t_off[i] = toff[i] + t0;
    for (int i = 0; i < 2 * ns; i++)
        b->s_off[i] = soff[i] + s0;
    for (int h = 0; h < nh; h++)
        for (int ti = 0; ti < nt; ti++)
            for (int si = 0; si < ns; si++)
                b->w[(size_t)ti * (size_t)ns + (size_t)si] +=
                    res->attention[((size_t)(l * nh + h) * (size_t)res->attn_n_t + (size_t)ti) *
                                       (size_t)res->attn_n_s +
                                   (size_t)si] /
                    (float)nh;
    return 0;
}

/* Sentence k's block: tokens' bytes shifted by s0 (source) and t0
 * (target), the last captured layer's attention over its heads. 1 when
 * made, 0 when the job has none to give, -1 when out of memory. */
static int align_block(const srv_pipe *p, int k, const char *unit, size_t unit_n, size_t s0,
                       size_t t0, size_t t_len, srv_align *b)
{
    const srv_job *j = &p->jobs[k];
    const td_result *res = &j->res;
    if (!res->attention || res->n_hyps < 1 || res->attn_n_layers < 1 || res->attn_n_heads < 1)
        return 0;
    size_t *soff = NULL, *toff = NULL;
    char *t = srv_pipe_decode(p, k, 0, &toff);
    int rc = -1;
    if (!t || td_tok_source_offsets(p->tok, unit, unit_n, j->src, j->n_src, &soff) != 0)
        goto out;
    rc = 0;
    if (strlen(t) != t_len) /* not the text the answer has: no alignment */
        goto out;
    rc = fill_block(p, k, soff, toff, s0, t0, b) == 0 ? 1 : -1;
out:
    free(t);
    free(soff);
    free(toff);
    return rc;
}

int srv_pipe_align(const srv_pipe *p, int text, const char *src, size_t src_n, srv_align **out)
{
    const srv_split *sp = srv_pipe_split_of(p, text);
    const int n = sp ? sp->n : 1;
    size_t *ranges = sp ? malloc(2 * (size_t)n * sizeof *ranges) : NULL;
    srv_align *al = calloc((size_t)n, sizeof *al);
    char *joined = NULL;
    double score;
    *out = NULL;
    if (!al || (sp && (!ranges || !(joined = srv_pipe_join(p, sp, 0, ranges, &score))))) {
        free(ranges);
        free(al);
        return -1;
    }
    int nb = 0, rc = 0;
    for (int s = 0; s < n && rc >= 0; s++) {
        int k = sp ? sp->job[s] : p->text_job[text];
        if (k < 0)
            continue;
        size_t s0 = sp ? sp->sent[s].start : 0;
        const char *unit = sp ? sp->text + s0 : src;
        size_t unit_n = sp ? sp->sent[s].end - s0 : src_n;
        size_t t0 = sp ? ranges[2 * s] : 0;
        size_t t_len = sp ? ranges[2 * s + 1] - ranges[2 * s] : (size_t)-1;
        if (!sp) { /* the whole text: its length is the decoded one's */
            char *t = srv_pipe_decode(p, k, 0, NULL);
            if (!t) {
                rc = -1;
                break;
            }
            t_len = strlen(t);
            free(t);
        }
        rc = align_block(p, k, unit, unit_n, s0, t0, t_len, &al[nb]);
        nb += rc == 1;
    }
    free(ranges);
    free(joined);
    if (rc < 0) {
        srv_align_free(al, nb + 1);
        return -1;
    }
    *out = al;
    return nb;
}
