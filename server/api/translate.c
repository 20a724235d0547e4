/*
 * translate.c - the translation plumbing both dialects share (translate.h):
 * texts -> sentences -> tokenized jobs, the jobs to the batcher and back,
 * the texts put back together.
 *
 * Text <-> tokens happens here and in native.c's token lists
 * (td_tok_encode_batch, srv_api_decode); everything else sees token ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cache.h"
#include "langcodes.h"
#include "models.h"
#include "translate.h"

/* The sentences of a streamed answer that run urgent: its first ones, the
 * client's first view (a sentence or two of the document's start). */
#define SRV_STREAM_URGENT 2

char *srv_api_decode(const srv_model *sm, const int32_t *ids, int n)
{
    char *t = NULL;
    if (td_tok_decode(sm->tok, ids, n, &t) != 0)
        return NULL;
    return t;
}
/* The source position target token t of hypothesis hyp copies (an
 * unknown piece's, from u), or -1. Hypothesis 0 has the attention: the
 * source unknown piece t attends to most, averaged over the captured layers
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

static int fill_block(const srv_req *r, int k, const size_t *soff, const size_t *toff, size_t s0,
                      size_t t0, srv_align *b);

/* The glossary's terms of job placed in t, its best hypothesis's text with
 * its tokens' offsets toff (moved with the text): the one call where a
 * sentence's translation and its alignment meet before the text is put
 * together (glossary.h, docs/decisions.md "Glossaries"). Returns the new
 * text (t freed), or NULL when out of memory (t freed). */
static char *place_terms(const srv_req *r, int job, char *t, size_t *toff)
{
    const srv_gloss_job *g = &r->gloss[job];
    const srv_job *j = &r->jobs[job];
    size_t *soff = NULL, n = strlen(t);
    srv_align b = {0};
    srv_gloss_edit *ed = NULL;
    char *out = NULL;
    int ne = -1;
    if (td_tok_source_offsets(r->model->tok, g->unit, g->unit_n, j->src, j->n_src, &soff) == 0 &&
        fill_block(r, job, soff, toff, 0, 0, &b) == 0)
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

char *srv_api_decode_job(const srv_req *r, int job, int hyp, size_t **offsets)
{
    const td_result *res = &r->jobs[job].res;
    const td_hypothesis *h = &res->hyps[hyp];
    const srv_unk_text *u = r->unk ? r->unk[job] : NULL;
    const td_tokenizer *tok = r->model->tok;
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
    const int glossed = hyp == 0 && r->gloss && r->gloss[job].n > 0 && res->attention;
    if (td_tok_decode_as(tok, h->tokens, h->n_tokens, repl, &t) != 0 ||
        ((offsets || glossed) &&
         td_tok_target_offsets_as(tok, h->tokens, h->n_tokens, repl, &toff) != 0)) {
        free(t);
        t = NULL;
    }
    free(repl);
    if (t && glossed)
        t = place_terms(r, job, t, toff);
    if (offsets && t)
        *offsets = toff;
    else
        free(toff);
    return t;
}

json_t *srv_api_text_json(char *t)
{
    if (!t)
        return NULL;
    json_t *v = json_string(t);
    if (!v) {
        for (unsigned char *p = (unsigned char *)t; *p; p++)
            if (*p >= 0x80)
                *p = '?';
        v = json_string(t);
    }
    free(t);
    return v;
}
/* ---- requests -> jobs ------------------------------------------------------ */

/* Text i's number in what the client sent (a part's texts are a subset). */
static int text_no(const srv_req *r, int i)
{
    return r->text_index ? r->text_index[i] : i;
}

/* Sentences of the texts (r->split) unless the request turned splitting
 * off; returns the number of jobs' units (texts and sentences) or -1 with
 * an error recorded. */
static int split_texts(srv_req *r, const char *const *texts, const size_t *lens, int n)
{
    int units = n;
    if (r->no_split)
        return units;
    r->split = srv_req_alloc(r, (size_t)n, sizeof *r->split);
    if (!r->split)
        goto oom;
    for (int i = 0; i < n; i++) {
        td_sentence *sent = NULL;
        char err[256];
        char sl[16];
        srv_lang_canon(r->model->n_langs ? r->src_lang : r->model->src_lang, sl, sizeof sl);
        int ns = td_segment(sl, texts[i], lens[i], &sent, err, sizeof err);
        if (ns < 0) {
            srv_req_error(r, 500, "internal", NULL, "text %d: %s", text_no(r, i), err);
            return -1;
        }
        if (ns <= 1) {
            free(sent); /* one sentence: the text as it is, today's job */
            continue;
        }
        srv_split *sp = &r->split[i];
        sp->sent = sent;
        sp->text = srv_req_alloc(r, lens[i] + 1, 1);
        sp->job = srv_req_alloc(r, (size_t)ns, sizeof *sp->job);
        if (!sp->text || !sp->job)
            goto oom;
        memcpy(sp->text, texts[i], lens[i]);
        sp->text[lens[i]] = 0;
        sp->len = lens[i];
        sp->n = ns;
        units += ns - 1;
    }
    return units;
oom:
    srv_req_error(r, 500, "internal", NULL, "out of memory");
    return -1;
}
/* copy_unknown: the text of each unknown piece of job k's source (text,
 * len: the unit it was tokenized from), into r->unk[k]; such a job
 * captures attention for the copy (r->copy_opts) unless the request asked
 * for attention itself. Returns 0, or -1 when out of memory. */
static int unknown_texts(srv_req *r, int k, const char *text, size_t len)
{
    const srv_job *j = &r->jobs[k];
    const int unk = td_tok_unk_id(r->model->tok);
    int n = 0;
    for (int i = 0; i < j->n_src; i++)
        n += j->src[i] == unk;
    if (!n)
        return 0;
    size_t *off = NULL;
    srv_unk_text *u = srv_req_alloc(r, (size_t)n + 1, sizeof *u);
    if (!u || td_tok_source_offsets(r->model->tok, text, len, j->src, j->n_src, &off) != 0)
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
        char *copy = srv_req_alloc(r, b - a + 1, 1);
        if (!copy) {
            free(off);
            return -1;
        }
        memcpy(copy, text + a, b - a);
        u[n++] = (srv_unk_text){i, copy, b - a};
    }
    free(off);
    u[n].pos = -1;
    r->unk[k] = u;
    if (!r->opts.return_attention)
        r->jobs[k].opts = &r->copy_opts;
    return 0;
}

int srv_api_use_glossary(srv_req *r, const char *id, const char *param)
{
    srv_glossary *g = r->s->glossaries ? srv_glossaries_get(r->s->glossaries, id) : NULL;
    if (!g) {
        srv_req_error(r, 400, "glossary_not_found", param, "no glossary '%.64s'", id);
        return -1;
    }
    srv_glossary_put(r->glossary);
    r->glossary = g;
    r->gloss_param = param;
    return 0;
}

/* The request's glossary's dictionary for the pair it translates
 * (r->gloss_dict); -1 with a 400 naming the glossary's field when it has
 * none. */
static int glossary_pair(srv_req *r)
{
    const srv_model *sm = r->model;
    char s[16], t[16];
    srv_lang_canon(sm->n_langs ? r->src_lang : sm->src_lang, s, sizeof s);
    srv_lang_canon(sm->n_langs ? r->tgt_lang : sm->tgt_lang, t, sizeof t);
    r->gloss_dict = srv_glossary_dict(r->glossary, s, t);
    if (r->gloss_dict)
        return 0;
    char pairs[200] = "";
    size_t at = 0;
    for (int i = 0; i < r->glossary->n_dicts && at < sizeof pairs; i++)
        at += (size_t)snprintf(pairs + at, sizeof pairs - at, "%s%s->%s", i ? ", " : "",
                               r->glossary->d[i].src_lang, r->glossary->d[i].tgt_lang);
    srv_req_error(r, 400, "glossary_language_mismatch", r->gloss_param,
                  "glossary %s translates %s; the request translates %s->%s", r->glossary->id,
                  pairs, s, t);
    return -1;
}

/* The glossary's terms in job k's source (text, len: its unit) into
 * r->gloss[k]; a job with some captures attention to place them (as
 * copy_unknown's do). 0, or -1 when out of memory. */
static int glossary_terms(srv_req *r, int k, const char *text, size_t len)
{
    srv_gloss_hit *h = NULL;
    int n = srv_gloss_match(r->gloss_dict, text, len, &h);
    if (n <= 0)
        return n;
    srv_gloss_job *g = &r->gloss[k];
    char *unit = srv_req_alloc(r, len + 1, 1);
    g->hits = srv_req_alloc(r, (size_t)n, sizeof *g->hits);
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
    srv_job *j = &r->jobs[k];
    if (!r->opts.return_attention) /* captured to place the terms, not answered */
        j->opts = &r->copy_opts;
    return 0;
}

/* A multilingual model's languages for r: the source's number into *ls
 * and the target's token forced first (r->opts.prefix); -1 for a bilingual
 * model. Returns 0, or -1 with a 400 naming a code the model lacks. */
static int job_languages(srv_req *r, int *ls)
{
    srv_model *sm = r->model;
    *ls = -1;
    if (sm->n_langs == 0) {
        /* an Argos package's target_prefix, forced as argos-translate does */
        int pid = td_tok_target_prefix(sm->tok);
        if (pid >= 0) {
            r->lang_prefix[0] = pid;
            r->opts.prefix = r->lang_prefix;
            r->opts.n_prefix = 1;
        }
        return 0;
    }
    const char *bad = !r->src_lang[0] || srv_model_lang(sm, r->src_lang) < 0 ? "source"
                      : !r->tgt_lang[0] || srv_model_lang(sm, r->tgt_lang) < 0 ? "target"
                                                                             : NULL;
    if (bad) {
        const char *code = !strcmp(bad, "source") ? r->src_lang : r->tgt_lang;
        if (!code[0])
            srv_req_error(r, 400, "unsupported_language", bad,
                          "model %s is multilingual: name the %s language", sm->name, bad);
        else
            srv_req_error(r, 400, "unsupported_language", bad,
                          "model %s has no language '%s'", sm->name, code);
        return -1;
    }
    *ls = srv_model_lang(sm, r->src_lang);
    r->lang_prefix[0] = td_tok_lang_token(sm->tok, srv_model_lang(sm, r->tgt_lang));
    r->opts.prefix = r->lang_prefix;
    r->opts.n_prefix = 1;
    return 0;
}

int srv_api_make_jobs(srv_req *r, const char *const *texts, const size_t *lens, int n,
                      const char *param)
{
    srv_model *sm = r->model;
    int lang = -1;
    if (job_languages(r, &lang) != 0 || (r->glossary && glossary_pair(r) != 0))
        return 0;
    r->n_texts = n;
    r->n_jobs = 0;
    r->tokens_in = 0;
    r->text_job = srv_req_alloc(r, (size_t)n, sizeof *r->text_job);
    int units = r->text_job ? split_texts(r, texts, lens, n) : -1;
    if (units < 0) {
        if (!r->text_job)
            srv_req_error(r, 500, "internal", NULL, "out of memory");
        return 0;
    }
    /* the units the model sees: whole texts, or the sentences of a split one */
    const size_t nu = (size_t)(units > 0 ? units : 1);
    const char **ut = srv_req_alloc(r, nu, sizeof *ut);
    size_t *ul = srv_req_alloc(r, nu, sizeof *ul);
    int *u_text = srv_req_alloc(r, nu, sizeof *u_text);
    int *u_sent = srv_req_alloc(r, nu, sizeof *u_sent);
    r->jobs = srv_req_alloc(r, nu, sizeof *r->jobs);
    r->src = srv_req_alloc(r, nu, sizeof *r->src);
    r->unk = r->raw_unknown ? NULL : srv_req_alloc(r, nu, sizeof *r->unk);
    r->gloss = r->gloss_dict ? srv_req_alloc(r, nu, sizeof *r->gloss) : NULL;
    /* a job with unknown pieces and no attention asked: every layer and
     * head captured for the copy, not answered */
    r->copy_opts = r->opts;
    r->copy_opts.return_attention = 1;
    r->copy_opts.attn_layers = r->copy_opts.attn_heads = NULL;
    r->copy_opts.n_attn_layers = r->copy_opts.n_attn_heads = 0;
    /* the text pipeline's tokenizer stage, as `transformerd translate` runs
     * it, refusing (not cutting) a text over the limit */
    td_tok_ids *ids = srv_req_alloc(r, nu, sizeof *ids);
    int rc = -1;
    if (!ut || !ul || !u_text || !u_sent || !r->jobs || !r->src || !ids ||
        (!r->raw_unknown && !r->unk) || (r->gloss_dict && !r->gloss)) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        goto out;
    }
    int u = 0;
    for (int i = 0; i < n; i++) {
        const srv_split *sp = r->split ? &r->split[i] : NULL;
        for (int k = 0; k < (sp && sp->n ? sp->n : 1); k++, u++) {
            u_text[u] = i;
            u_sent[u] = sp && sp->n ? k : -1;
            ut[u] = sp && sp->n ? texts[i] + sp->sent[k].start : texts[i];
            ul[u] = sp && sp->n ? sp->sent[k].end - sp->sent[k].start : lens[i];
        }
    }
    int bad = -1;
    char msg[256];
    rc = td_tok_encode_batch_lang(sm->tok, lang, ut, ul, units, sm->max_input_tokens,
                                  TD_LONG_SOURCE_ERROR, ids, &bad, msg, sizeof msg);
    if (rc == TD_TOK_ETOOLONG && u_sent[bad] < 0) {
        srv_req_error(r, 422, "text_too_long", param,
                      "text %d has %d tokens; the limit is %d (including </s>)",
                      text_no(r, u_text[bad]),
                      ids[bad].n_full, sm->max_input_tokens);
    } else if (rc == TD_TOK_ETOOLONG) {
        /* where the sentence is, in characters of its text */
        size_t cs = 0, ce = 0, b0 = (size_t)(ut[bad] - texts[u_text[bad]]);
        for (size_t b = 0; b < b0 + ul[bad]; b++) {
            int ch = ((unsigned char)texts[u_text[bad]][b] & 0xC0) != 0x80;
            cs += b < b0 && ch;
            ce += ch;
        }
        srv_req_error(r, 422, "text_too_long", param,
                      "text %d, sentence %d (characters %zu..%zu) has %d tokens; the limit is "
                      "%d (including </s>)",
                      text_no(r, u_text[bad]), u_sent[bad], cs, ce, ids[bad].n_full,
                      sm->max_input_tokens);
    } else if (rc != 0) {
        srv_req_error(r, 500, "internal", NULL, "%s", msg);
    } else {
        for (u = 0; u < units; u++) {
            int i = u_text[u];
            srv_split *sp = u_sent[u] >= 0 ? &r->split[i] : NULL;
            int k = -1;
            /* an empty or whitespace-only text is not run (td_tok_is_empty) */
            if (td_tok_is_empty(ids[u].n_full - (lang >= 0))) {
                td_tok_ids_free(&ids[u], 1);
            } else {
                k = r->n_jobs++;
                r->src[k] = ids[u].ids; /* owned by r from here */
                ids[u].ids = NULL;
                srv_job *j = &r->jobs[k];
                j->src = r->src[k];
                j->n_src = ids[u].n;
                j->opts = &r->opts;
                r->tokens_in += ids[u].n;
                if ((!r->raw_unknown && unknown_texts(r, k, ut[u], ul[u]) != 0) ||
                    (r->gloss && glossary_terms(r, k, ut[u], ul[u]) != 0)) {
                    srv_req_error(r, 500, "internal", NULL, "out of memory");
                    rc = -1;
                    break;
                }
            }
            if (sp) {
                sp->job[u_sent[u]] = k;
                r->text_job[i] = -1;
            } else {
                r->text_job[i] = k;
            }
        }
        /* an uploaded file has its own bound; its jobs are queued in parts */
        const int file = r->route && (r->route->flags & SRV_ROUTE_FILE);
        const int lim = file ? r->s->o.max_file_texts : r->s->o.max_queue;
        if (r->n_jobs > lim) {
            srv_req_error(r, 422, "too_many_sentences", param,
                          "the texts have %d sentences to translate; the limit is %d (%s)",
                          r->n_jobs, lim, file ? "--max-file-texts" : "--max-queue");
            rc = -1;
        }
    }
    if (rc != 0)
        td_tok_ids_free(ids, units);
out:
    return rc == 0;
}
int srv_api_model_failed(srv_req *r, const srv_model *sm)
{
    const char *why = srv_model_failed(sm);
    if (!why)
        return 0;
    srv_req_error(r, 503, "device_error", NULL, "the model's device failed: %s", why);
    return 1;
}
/* ---- the jobs to the batcher and back ------------------------------------- */

/* The request's model, put away, was replaced by a new generation before
 * it ran (srv_batcher_retire): its texts were tokenized for the old files,
 * so it is answered, not run on the new ones; sent again, it is the new
 * model's. */
static void model_retired(srv_req *r)
{
    srv_req_error(r, 503, "model_reloaded", NULL,
                  "model %s was loaded again from changed files while this request waited; "
                  "send it again",
                  r->model->name);
    srv_req_header(r, "Retry-After", "1");
}

/* The cache's key of a job (cache.h): its model, options and source. */
static srv_cache_key cache_key(const srv_req *r, const srv_job *j)
{
    srv_cache_key k = {r->model, r->model->generation, j->opts, j->src, j->n_src};
    return k;
}

/* A file's next job to the queue, as one of its queued jobs finished with
 * status st (a scheduler thread): the file keeps --file-queue-texts in the
 * queue, and the texts of requests made meanwhile are taken between them.
 * A job that cannot go (the daemon drains, the model was replaced), and
 * every job left once one did not finish (its client left, its deadline
 * passed, the engine failed), is finished here with that status, without
 * running. */
static void feed_next(srv_req *r, srv_job_status st)
{
    for (;;) {
        int k = atomic_fetch_add(&r->fed, 1);
        if (k >= r->n_jobs)
            return;
        srv_job *j = &r->jobs[k];
        if (j->cached)
            continue; /* finished at the submit (srv_api_submit) */
        srv_submit_rc sr = st != SRV_JOB_DONE ? SRV_SUBMIT_DRAINING
                           : srv_batcher_feed(r->model->b, j, 1, r->feed_deadline, &r->feed_c);
        if (sr == SRV_SUBMIT_OK)
            return;
        j->status = st != SRV_JOB_DONE            ? st
                    : sr == SRV_SUBMIT_RETIRED ? SRV_JOB_RETIRED
                                               : SRV_JOB_SHUTDOWN;
        st = j->status;
        srv_call_release(r->call);
    }
}

/* The completion of every job (a scheduler thread, the main thread in a
 * drain, or the HTTP thread for a cache hit): the device-failed policy for
 * a failed job, a finished one into the cache, then the job's hold of the
 * call is released. Touches only j, the model's state and the cache. */
static void job_done(srv_job *j, void *ud)
{
    srv_req *r = ud;
    if (r->feed_at > 0 && !j->cached)
        feed_next(r, j->status);
    if (j->status == SRV_JOB_FAILED)
        srv_model_engine_error(r->model, j->engine_rc, j->engine_err);
    if (j->status == SRV_JOB_DONE && !j->cached) {
        srv_cache_key k = cache_key(r, j);
        srv_cache_put(r->s->cache, &k, &j->res);
    }
    if (j->status == SRV_JOB_DONE && r->job_event)
        r->job_event(r, j); /* a streamed answer: this sentence, now */
    srv_call_release(r->call);
}

/* The batcher's gone hook: the call is held while the job is unfinished. */
static int client_left(void *ud)
{
    const srv_req *r = ud;
    return srv_call_client_gone(r->call);
}

srv_call_next srv_api_submit(srv_req *r)
{
    srv_server *s = r->s;
    /* --fair-share client: the client's address owns the request's share of
     * the queue (FNV-1a), so that one client's many requests share one; by
     * default (0) each request has its own (behind a proxy, or on
     * loopback, every client has one address) */
    uint64_t owner = 0;
    if (s->o.fair_share == SRV_SHARE_CLIENT) {
        owner = 1469598103934665603ULL;
        for (const char *p = r->call->client; *p; p++)
            owner = (owner ^ (unsigned char)*p) * 1099511628211ULL;
        owner += !owner;
    }
    const srv_completion done = {.done = job_done, .gone = client_left, .ud = r,
                                 .owner = owner};
    /* the sentences seen before: their stored results, the engine skipped */
    for (int i = 0; s->cache && i < r->n_jobs; i++) {
        srv_job *j = &r->jobs[i];
        srv_cache_key k = cache_key(r, j);
        if (srv_cache_get(s->cache, &k, &j->res)) {
            j->cached = 1;
            j->status = SRV_JOB_DONE;
        }
    }
    /* a streamed answer's first sentences to run: urgent (--urgent-steps),
     * the client sees nothing before them */
    for (int i = 0, u = 0; r->job_event && i < r->n_jobs && u < SRV_STREAM_URGENT; i++)
        if (!r->jobs[i].cached) {
            r->jobs[i].urgent = 1;
            u++;
        }
    /* an uploaded file's jobs in parts: the first --file-queue-texts not
     * cached now, the others as those finish (feed_next) */
    int out = r->n_jobs;
    if (r->route && (r->route->flags & SRV_ROUTE_FILE)) {
        int misses = 0;
        for (out = 0; out < r->n_jobs && misses < s->o.file_queue_texts; out++)
            misses += !r->jobs[out].cached;
        r->feed_c = done;
        r->feed_deadline = r->call->t0 + srv_req_timeout_s(r);
        atomic_store(&r->fed, out);
        r->feed_at = out < r->n_jobs ? out : 0;
    }
    /* the holds before the jobs are out: a job may finish at once */
    srv_call_hold(r->call, r->n_jobs);
    srv_submit_rc sr = srv_batcher_submit(r->model->b, r->jobs, out,
                                          r->call->t0 + srv_req_timeout_s(r), &done);
    if (sr == SRV_SUBMIT_OK) {
        /* every cached job finishes now, those past the first part too:
         * feed_next passes over them */
        for (int i = 0; i < r->n_jobs; i++)
            if (r->jobs[i].cached)
                job_done(&r->jobs[i], r);
        return SRV_NEXT_PENDING;
    }
    r->feed_at = 0;
    /* none went out: their holds back (the transport's own keeps the call) */
    for (int i = 0; i < r->n_jobs; i++)
        srv_call_release(r->call);
    if (sr == SRV_SUBMIT_FULL) {
        srv_req_error(r, 429, "queue_full", NULL, "the queue is full; retry later");
        srv_req_header(r, "Retry-After", "1");
    } else if (sr == SRV_SUBMIT_RETIRED) {
        model_retired(r);
    } else {
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
    }
    return SRV_NEXT_ANSWERED;
}

int srv_api_jobs_failed(srv_req *r)
{
    for (int i = 0; r->jobs && i < r->n_jobs; i++) {
        switch (r->jobs[i].status) {
        case SRV_JOB_DONE:
            continue;
        case SRV_JOB_TIMEOUT:
            srv_req_error(r, 504, "timeout", NULL,
                          "the request waited longer than %d s and was dropped",
                          srv_req_timeout_s(r));
            return 1;
        case SRV_JOB_SHUTDOWN:
            srv_req_error(r, 503, "draining", NULL,
                          "the server shut down before the request could finish");
            return 1;
        case SRV_JOB_GONE:
            srv_req_error(r, 503, "client_gone", NULL, "the client closed the connection");
            return 1;
        case SRV_JOB_RETIRED:
            model_retired(r);
            return 1;
        case SRV_JOB_FAILED:
            srv_req_error(r, 500, "internal", NULL, "translation failed: %s",
                          r->jobs[i].engine_err);
            return 1;
        default:
            srv_req_error(r, 500, "internal", NULL, "job %d did not finish", i);
            return 1;
        }
    }
    long tout = 0;
    for (int i = 0; i < r->n_jobs; i++)
        tout += r->jobs[i].res.hyps[0].n_tokens;
    r->tokens_out = tout;
    return 0;
}

/* ---- texts of several sentences ------------------------------------------ */

const srv_split *srv_api_split_of(const srv_req *r, int text)
{
    return r->split && r->split[text].n ? &r->split[text] : NULL;
}
int srv_api_split_n_hyps(const srv_req *r, const srv_split *sp)
{
    int nh = 0;
    for (int s = 0; s < sp->n; s++) {
        int k = sp->job[s];
        if (k >= 0 && (!nh || r->jobs[k].res.n_hyps < nh))
            nh = r->jobs[k].res.n_hyps;
    }
    return nh ? nh : 1;
}
char *srv_api_split_join(const srv_req *r, const srv_split *sp, int hyp, size_t *ranges,
                         double *score)
{
    char **owned = calloc((size_t)sp->n, sizeof *owned);
    const char **parts = srv_req_alloc(r, (size_t)sp->n, sizeof *parts);
    size_t *plens = srv_req_alloc(r, (size_t)sp->n, sizeof *plens);
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
        const td_result *res = &r->jobs[k].res;
        const td_hypothesis *h = &res->hyps[hyp < res->n_hyps ? hyp : res->n_hyps - 1];
        ok = (owned[s] = srv_api_decode_job(r, k, (int)(h - res->hyps), NULL)) != NULL;
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
int srv_api_n_hyps(const srv_req *r, int text)
{
    if (srv_api_split_of(r, text))
        return srv_api_split_n_hyps(r, srv_api_split_of(r, text));
    int k = r->text_job[text];
    return k < 0 ? 1 : r->jobs[k].res.n_hyps;
}
json_t *srv_api_text_value(const srv_req *r, int text, int hyp)
{
    double score;
    if (srv_api_split_of(r, text))
        return srv_api_text_json(srv_api_split_join(r, srv_api_split_of(r, text), hyp, NULL, &score));
    int k = r->text_job[text];
    if (k < 0)
        return json_string("");
    return srv_api_text_json(srv_api_decode_job(r, k, hyp, NULL));
}

/* ---- word alignment --------------------------------------------------------- */

/* Sentence k's block: tokens' bytes shifted by s0 (source) and t0
 * (target), the last captured layer's attention over its heads. 1 when
 * made, 0 when the job has none to give, -1 when out of memory. */
/* Job k's block from its source and best hypothesis's token offsets
 * (shifted by s0 and t0): the last captured layer's attention averaged
 * over its heads. 0, or -1 when out of memory. */
static int fill_block(const srv_req *r, int k, const size_t *soff, const size_t *toff, size_t s0,
                      size_t t0, srv_align *b)
{
    const srv_job *j = &r->jobs[k];
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

static int align_block(const srv_req *r, int k, const char *unit, size_t unit_n, size_t s0,
                       size_t t0, size_t t_len, srv_align *b)
{
    const srv_job *j = &r->jobs[k];
    const td_result *res = &j->res;
    if (!res->attention || res->n_hyps < 1 || res->attn_n_layers < 1 || res->attn_n_heads < 1)
        return 0;
    size_t *soff = NULL, *toff = NULL;
    char *t = srv_api_decode_job(r, k, 0, &toff);
    int rc = -1;
    if (!t || td_tok_source_offsets(r->model->tok, unit, unit_n, j->src, j->n_src, &soff) != 0)
        goto out;
    rc = 0;
    if (strlen(t) != t_len) /* not the text the answer has: no alignment */
        goto out;
    rc = fill_block(r, k, soff, toff, s0, t0, b) == 0 ? 1 : -1;
out:
    free(t);
    free(soff);
    free(toff);
    return rc;
}

int srv_api_text_align(const srv_req *r, int text, const char *src, size_t src_n,
                       srv_align **out)
{
    const srv_split *sp = srv_api_split_of(r, text);
    const int n = sp ? sp->n : 1;
    size_t *ranges = sp ? malloc(2 * (size_t)n * sizeof *ranges) : NULL;
    srv_align *al = calloc((size_t)n, sizeof *al);
    char *joined = NULL;
    double score;
    *out = NULL;
    if (!al || (sp && (!ranges || !(joined = srv_api_split_join(r, sp, 0, ranges, &score))))) {
        free(ranges);
        free(al);
        return -1;
    }
    int nb = 0, rc = 0;
    for (int s = 0; s < n && rc >= 0; s++) {
        int k = sp ? sp->job[s] : r->text_job[text];
        if (k < 0)
            continue;
        size_t s0 = sp ? sp->sent[s].start : 0;
        const char *unit = sp ? sp->text + s0 : src;
        size_t unit_n = sp ? sp->sent[s].end - s0 : src_n;
        size_t t0 = sp ? ranges[2 * s] : 0;
        size_t t_len = sp ? ranges[2 * s + 1] - ranges[2 * s] : (size_t)-1;
        if (!sp) { /* the whole text: its length is the decoded one's */
            char *t = srv_api_decode_job(r, k, 0, NULL);
            if (!t) {
                rc = -1;
                break;
            }
            t_len = strlen(t);
            free(t);
        }
        rc = align_block(r, k, unit, unit_n, s0, t0, t_len, &al[nb]);
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
