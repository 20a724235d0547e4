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
    /* an uploaded file has its own bound; its jobs are queued in parts */
    const int file = r->route && (r->route->flags & SRV_ROUTE_FILE);
    srv_pipe *p = &r->pipe;
    p->tok = sm->tok;
    p->arena = (srv_arena){req_arena, r};
    p->seg_lang = r->no_split ? NULL : sl;
    p->src_lang = lang;
    p->max_tokens = sm->max_input_tokens;
    p->cut_long = 0; /* refused, not cut */
    p->max_jobs = file ? r->s->o.max_file_texts : r->s->o.max_queue;
    p->opts = &r->opts;
    if (glossary_pair(r) != 0)
        return 0;
    srv_pipe_fail f;
    const srv_err e = srv_pipe_make(p, texts, lens, n, &f);
    const int st = srv_req_status(e); /* the kind's status, as every dialect's */
    switch (e) {
    case SRV_OK:
        return 1;
    case SRV_ERR_TOO_LONG:
        if (f.sentence < 0)
            srv_req_error(r, st, "text_too_long", param,
                          "text %d has %d tokens; the limit is %d (including </s>)",
                          text_no(r, f.text), f.n_tokens, f.limit);
        else
            srv_req_error(r, st, "text_too_long", param,
                          "text %d, sentence %d (characters %zu..%zu) has %d tokens; the limit "
                          "is %d (including </s>)",
                          text_no(r, f.text), f.sentence, f.c0, f.c1, f.n_tokens, f.limit);
        return 0;
    case SRV_ERR_TOO_MANY:
        srv_req_error(r, st, "too_many_sentences", param,
                      "the texts have %d sentences to translate; the limit is %d (%s)",
                      f.n_tokens, f.limit, file ? "--max-file-texts" : "--max-queue");
        return 0;
    case SRV_ERR_INTERNAL:
        if (f.text >= 0)
            srv_req_error(r, st, "internal", NULL, "text %d: %s", text_no(r, f.text), f.msg);
        else
            srv_req_error(r, st, "internal", NULL, "%s", f.msg);
        return 0;
    default:
        srv_req_error(r, st, "internal", NULL, "out of memory");
        return 0;
    }
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
        if (k >= r->pipe.n_jobs)
            return;
        srv_job *j = &r->pipe.jobs[k];
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
    /* an uploaded file's jobs in parts: the first --file-queue-texts not
     * cached now, the others as those finish (feed_next) */
    int out = r->pipe.n_jobs;
    if (r->route && (r->route->flags & SRV_ROUTE_FILE)) {
        int misses = 0;
        for (out = 0; out < r->pipe.n_jobs && misses < s->o.file_queue_texts; out++)
            misses += !r->pipe.jobs[out].cached;
        r->feed_c = done;
        r->feed_deadline = r->call->t0 + srv_req_timeout_s(r);
        atomic_store(&r->fed, out);
        r->feed_at = out < r->pipe.n_jobs ? out : 0;
    }
    /* the holds before the jobs are out: a job may finish at once */
    srv_call_hold(r->call, r->pipe.n_jobs);
    srv_submit_rc sr = srv_batcher_submit(r->model->b, r->pipe.jobs, out,
                                          r->call->t0 + srv_req_timeout_s(r), &done);
    if (sr == SRV_SUBMIT_OK) {
        /* every cached job finishes now, those past the first part too:
         * feed_next passes over them */
        for (int i = 0; i < r->pipe.n_jobs; i++)
            if (r->pipe.jobs[i].cached)
                job_done(&r->pipe.jobs[i], r);
        return SRV_NEXT_PENDING;
    }
    r->feed_at = 0;
    /* none went out: their holds back (the transport's own keeps the call) */
    for (int i = 0; i < r->pipe.n_jobs; i++)
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
    for (int i = 0; r->pipe.jobs && i < r->pipe.n_jobs; i++) {
        switch (r->pipe.jobs[i].status) {
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
                          r->pipe.jobs[i].engine_err);
            return 1;
        default:
            srv_req_error(r, 500, "internal", NULL, "job %d did not finish", i);
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
