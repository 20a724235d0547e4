/*
 * translate.c - the translation plumbing the dialects share (translate.h):
 * a request's texts through the text pipeline (service/pipeline.c), its
 * errors said as the API's, the jobs to the batcher and back.
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
char *srv_api_decode_job(const srv_req *r, int job, int hyp, size_t **offsets)
{
    return srv_pipe_decode(&r->pipe, job, hyp, offsets);
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

/* The call's arena for the text pipeline. */
static void *req_arena(void *ud, size_t count, size_t size)
{
    return srv_req_alloc(ud, count, size);
}

int srv_api_use_glossary(srv_req *r, const char *id, const char *param)
{
    srv_glossary *g = NULL;
    char msg[128];
    srv_err e = srv_glossaries_get(r->s->glossaries, id, &g, msg, sizeof msg);
    if (e != SRV_OK) {
        srv_req_error(r, srv_req_status(e), "glossary_not_found", param, "%s", msg);
        return -1;
    }
    srv_glossary_put(r->glossary);
    r->glossary = g;
    r->gloss_param = param;
    return 0;
}

/* The request's glossary's dictionary for the pair it translates, into
 * the pipeline (none without a glossary); -1 with a 400 naming the
 * glossary's field when it has none. */
static int glossary_pair(srv_req *r)
{
    const srv_model *sm = r->model;
    char s[16], t[16], pairs[200];
    srv_lang_canon(sm->n_langs ? r->src_lang : sm->src_lang, s, sizeof s);
    srv_lang_canon(sm->n_langs ? r->tgt_lang : sm->tgt_lang, t, sizeof t);
    if (srv_pipe_glossary(&r->pipe, r->glossary, s, t, pairs, sizeof pairs) == SRV_OK)
        return 0;
    srv_req_error(r, 400, "glossary_language_mismatch", r->gloss_param,
                  "glossary %s translates %s; the request translates %s->%s", r->glossary->id,
                  pairs, s, t);
    return -1;
}

int srv_api_make_jobs(srv_req *r, const char *const *texts, const size_t *lens, int n,
                      const char *param)
{
    srv_model *sm = r->model;
    int lang = -1;
    if (job_languages(r, &lang) != 0)
        return 0;
    /* the sentence split's language: the model's, a multilingual one's the
     * request's source */
    char sl[16];
    srv_lang_canon(sm->n_langs ? r->src_lang : sm->src_lang, sl, sizeof sl);
    srv_pipe *p = &r->pipe;
    p->tok = sm->tok;
    p->arena = (srv_arena){req_arena, r};
    p->seg_lang = r->no_split ? NULL : sl;
    p->src_lang = lang;
    p->max_tokens = sm->max_input_tokens;
    p->cut_long = 0; /* refused, not cut */
    p->max_jobs = r->s->o.max_queue; /* a file's: --max-file-texts (docrun.c) */
    p->opts = &r->opts;
    if (glossary_pair(r) != 0)
        return 0;
    srv_pipe_fail f;
    const srv_err e = srv_pipe_make(p, texts, lens, n, &f);
    if (e == SRV_OK)
        return 1;
    srv_api_pipe_error(r, e, &f, param);
    return 0;
}

const char *srv_api_pipe_message(srv_err e, const srv_pipe_fail *f, int text, int file,
                                 char *msg, size_t n)
{
    switch (e) {
    case SRV_ERR_TOO_LONG:
        if (f->sentence < 0)
            snprintf(msg, n, "text %d has %d tokens; the limit is %d (including </s>)", text,
                     f->n_tokens, f->limit);
        else
            snprintf(msg, n,
                     "text %d, sentence %d (characters %zu..%zu) has %d tokens; the limit "
                     "is %d (including </s>)",
                     text, f->sentence, f->c0, f->c1, f->n_tokens, f->limit);
        return "text_too_long";
    case SRV_ERR_TOO_MANY:
        snprintf(msg, n, "the texts have %d sentences to translate; the limit is %d (%s)",
                 f->n_tokens, f->limit, file ? "--max-file-texts" : "--max-queue");
        return "too_many_sentences";
    case SRV_ERR_INTERNAL:
        if (f->text >= 0)
            snprintf(msg, n, "text %d: %s", text, f->msg);
        else
            snprintf(msg, n, "%s", f->msg);
        return "internal";
    default:
        snprintf(msg, n, "out of memory");
        return "internal";
    }
}

void srv_api_pipe_error(srv_req *r, srv_err e, const srv_pipe_fail *f, const char *param)
{
    const int file = r->route && (r->route->flags & SRV_ROUTE_FILE);
    char msg[512];
    const char *code = srv_api_pipe_message(e, f, text_no(r, f->text), file, msg, sizeof msg);
    /* the kind's status, as every dialect's; the field named but for the
     * library's failure */
    srv_req_error(r, srv_req_status(e), code, !strcmp(code, "internal") ? NULL : param, "%s", msg);
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
void srv_api_model_retired(srv_req *r)
{
    srv_api_job_error(r, 0, SRV_JOB_RETIRED, NULL);
}

/* The cache's key of a job (cache.h): its model, options and source. */
static srv_cache_key cache_key(const srv_req *r, const srv_job *j)
{
    srv_cache_key k = {r->model, r->model->generation, j->opts, j->src, j->n_src};
    return k;
}

/* The completion of every job (a scheduler thread, the main thread in a
 * drain, or the HTTP thread for a cache hit): the device-failed policy for
 * a failed job, a finished one into the cache, then the job's hold of the
 * call is released. Touches only j, the model's state and the cache. */
static void job_done(srv_job *j, void *ud)
{
    srv_req *r = ud;
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

uint64_t srv_api_owner(const srv_req *r)
{
    /* --fair-share client: the client's address owns the request's share of
     * the queue (FNV-1a), so that one client's many requests share one; by
     * default (0) each request has its own (behind a proxy, or on
     * loopback, every client has one address) */
    uint64_t owner = 0;
    if (r->s->o.fair_share == SRV_SHARE_CLIENT) {
        owner = 1469598103934665603ULL;
        for (const char *p = r->call->client; *p; p++)
            owner = (owner ^ (unsigned char)*p) * 1099511628211ULL;
        owner += !owner;
    }
    return owner;
}

srv_call_next srv_api_submit(srv_req *r)
{
    srv_server *s = r->s;
    const srv_completion done = {.done = job_done, .gone = client_left, .ud = r,
                                 .owner = srv_api_owner(r)};
    /* the sentences seen before: their stored results, the engine skipped */
    for (int i = 0; s->cache && i < r->pipe.n_jobs; i++) {
        srv_job *j = &r->pipe.jobs[i];
        srv_cache_key k = cache_key(r, j);
        if (srv_cache_get(s->cache, &k, &j->res)) {
            j->cached = 1;
            j->status = SRV_JOB_DONE;
        }
    }
    /* a streamed answer's first sentences to run: urgent (--urgent-steps),
     * the client sees nothing before them */
    for (int i = 0, u = 0; r->job_event && i < r->pipe.n_jobs && u < SRV_STREAM_URGENT; i++)
        if (!r->pipe.jobs[i].cached) {
            r->pipe.jobs[i].urgent = 1;
            u++;
        }
    /* the holds before the jobs are out: a job may finish at once (an
     * uploaded file's jobs go in parts through service/docrun.c) */
    srv_call_hold(r->call, r->pipe.n_jobs);
    srv_submit_rc sr = srv_batcher_submit(r->model->b, r->pipe.jobs, r->pipe.n_jobs,
                                          r->call->t0 + srv_req_timeout_s(r), &done);
    if (sr == SRV_SUBMIT_OK) {
        /* every cached job finishes now */
        for (int i = 0; i < r->pipe.n_jobs; i++)
            if (r->pipe.jobs[i].cached)
                job_done(&r->pipe.jobs[i], r);
        return SRV_NEXT_PENDING;
    }
    /* none went out: their holds back (the transport's own keeps the call) */
    for (int i = 0; i < r->pipe.n_jobs; i++)
        srv_call_release(r->call);
    if (sr == SRV_SUBMIT_FULL) {
        srv_req_error(r, 429, "queue_full", NULL, "the queue is full; retry later");
        srv_req_header(r, "Retry-After", "1");
    } else if (sr == SRV_SUBMIT_RETIRED) {
        srv_api_model_retired(r);
    } else {
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
    }
    return SRV_NEXT_ANSWERED;
}

int srv_api_job_message(int job, srv_job_status st, const char *engine_err, int timeout_s,
                        const char *model, char *msg, size_t n)
{
    switch (st) {
    case SRV_JOB_TIMEOUT:
        snprintf(msg, n, "the request waited longer than %d s and was dropped", timeout_s);
        return 504;
    case SRV_JOB_SHUTDOWN:
        snprintf(msg, n, "the server shut down before the request could finish");
        return 503;
    case SRV_JOB_GONE:
        snprintf(msg, n, "the client closed the connection");
        return 503;
    case SRV_JOB_RETIRED:
        snprintf(msg, n,
                 "model %s was loaded again from changed files while this request waited; "
                 "send it again",
                 model);
        return 503;
    case SRV_JOB_FAILED:
        snprintf(msg, n, "translation failed: %s", engine_err);
        return 500;
    default:
        snprintf(msg, n, "job %d did not finish", job);
        return 500;
    }
}

void srv_api_job_error(srv_req *r, int job, srv_job_status st, const char *engine_err)
{
    static const char *const k_codes[] = {
        [SRV_JOB_TIMEOUT] = "timeout", [SRV_JOB_SHUTDOWN] = "draining",
        [SRV_JOB_GONE] = "client_gone", [SRV_JOB_RETIRED] = "model_reloaded"};
    char msg[512];
    int status = srv_api_job_message(job, st, engine_err, srv_req_timeout_s(r),
                                     r->model ? r->model->name : "", msg, sizeof msg);
    const char *code = (int)st >= 0 && (size_t)st < sizeof k_codes / sizeof k_codes[0] && k_codes[st]
                           ? k_codes[st]
                           : "internal";
    srv_req_error(r, status, code, NULL, "%s", msg);
    if (st == SRV_JOB_RETIRED)
        srv_req_header(r, "Retry-After", "1");
}

int srv_api_jobs_failed(srv_req *r)
{
    for (int i = 0; r->pipe.jobs && i < r->pipe.n_jobs; i++) {
        const srv_job *j = &r->pipe.jobs[i];
        if (j->status != SRV_JOB_DONE) {
            srv_api_job_error(r, i, j->status, j->engine_err);
            return 1;
        }
    }
    long tout = 0;
    for (int i = 0; i < r->pipe.n_jobs; i++)
        tout += r->pipe.jobs[i].res.hyps[0].n_tokens;
    r->tokens_out = tout;
    return 0;
}

/* ---- texts of several sentences ------------------------------------------ */

const srv_split *srv_api_split_of(const srv_req *r, int text)
{
    return srv_pipe_split_of(&r->pipe, text);
}
int srv_api_split_n_hyps(const srv_req *r, const srv_split *sp)
{
    return srv_pipe_split_n_hyps(&r->pipe, sp);
}
char *srv_api_split_join(const srv_req *r, const srv_split *sp, int hyp, size_t *ranges,
                         double *score)
{
    return srv_pipe_join(&r->pipe, sp, hyp, ranges, score);
}
int srv_api_n_hyps(const srv_req *r, int text)
{
    return srv_pipe_n_hyps(&r->pipe, text);
}
json_t *srv_api_text_value(const srv_req *r, int text, int hyp)
{
    return srv_api_text_json(srv_pipe_text(&r->pipe, text, hyp));
}
int srv_api_text_align(const srv_req *r, int text, const char *src, size_t src_n,
                       srv_align **out)
{
    return srv_pipe_align(&r->pipe, text, src, src_n, out);
}
