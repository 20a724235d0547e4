/*
 * docrun.c - a whole document translated through the service (docrun.h),
 * the one set of steps every door's documents take: the parse on a
 * document thread, the jobs (the cache's hits aside) fed to the model's
 * queue a few at a time, the render on a document thread, then done.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cache.h"
#include "clock.h"
#include "docpool.h"
#include "docrun.h"
#include "langcodes.h"
#include "languages.h"
#include "langid.h"
#include "models.h"
#include "pipeline.h"

struct srv_doc_run {
    srv_server *s;
    srv_doc_request q;
    srv_doc_done_fn done;
    void *ud;
    double deadline;         /* --file-timeout-s after the start */
    srv_doc_task task;       /* the parse, then the render */
    srv_document *d;
    srv_model *sm;           /* the pair's, with a reference */
    td_decode_opts o, span;  /* the jobs' options; a styled segment's */
    int32_t prefix[1];
    srv_heap heap;           /* the pipeline's arena */
    srv_pipe p;
    const char **texts;      /* the segments that are text, the pipeline's texts */
    size_t *lens;
    int *seg_text;           /* per segment: its text in the pipeline, -1 kept */
    srv_completion c;
    atomic_int fed;          /* the next job to feed */
    atomic_int pending;      /* jobs not finished, + 1 while the submit runs */
    atomic_int finished;     /* jobs finished (srv_doc_progress) */
    atomic_int total;        /* the jobs, once made */
    srv_err err;
    srv_doc_result res;
};

/* source=auto: the file's language, detected once over its text (its
 * segments that are text, each followed by a space), among the serving
 * models' languages; the first of them, with no confidence, when none has
 * a fingerprint. 0, or -1 out of memory. */
static int detect(srv_server *s, const srv_document *d, srv_doc_result *out)
{
    srv_langs L;
    srv_langs_now(s, &L);
    const int nl = srv_langid_count(s->langid);
    size_t n = 0;
    for (int k = 0; k < srv_doc_n(d); k++) {
        size_t len;
        srv_doc_seg(d, k, &len);
        n += srv_doc_keep(d, k) ? 0 : len + 1;
    }
    char *all = malloc(n + 1), *w = all;
    srv_lang_score *sc = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *sc);
    int scored = -1;
    if (all && sc) {
        for (int k = 0; k < srv_doc_n(d); k++) {
            size_t len;
            const char *t = srv_doc_seg(d, k, &len);
            if (srv_doc_keep(d, k))
                continue;
            memcpy(w, t, len);
            w += len;
            *w++ = ' ';
        }
        *w = 0;
        scored = srv_langid_detect_among(s->langid, all, (size_t)(w - all), L.codes, L.n, sc);
    }
    if (scored > 0) {
        snprintf(out->source, sizeof out->source, "%s", sc[0].lang);
        out->confidence = sc[0].confidence;
    } else if (scored == 0) {
        snprintf(out->source, sizeof out->source, "%s", L.n ? L.codes[0] : "und");
        out->confidence = 0;
    }
    free(all);
    free(sc);
    return scored < 0 ? -1 : 0;
}

/* Segment k's translation set into d, text i of the pipeline: the text
 * as the API answers it (invalid UTF-8 replaced), with its alignment when
 * the segment is styled. 0, or -1 out of memory. */
static int set_segment(srv_document *d, int k, const srv_pipe *p, int i, const char *src,
                       size_t src_n)
{
    char *t = srv_pipe_text(p, i, 0);
    json_t *v = t ? json_string(t) : NULL;
    if (t && !v) /* as srv_api_text_json: a byte that makes no character */
        for (unsigned char *c = (unsigned char *)t; *c; c++)
            if (*c >= 0x80)
                *c = '?';
    json_decref(v);
    srv_align *al = NULL;
    int nb = t && srv_doc_styled(d, k) ? srv_pipe_align(p, i, src, src_n, &al) : 0;
    int rc = t && nb >= 0 ? srv_doc_set(d, k, t, strlen(t), al, nb) : -1;
    srv_align_free(al, nb);
    free(t);
    return rc;
}

/* The run's end: its outcome recorded, its caller told (the run is the
 * caller's from then on: touched no more here). */
static void finish(srv_doc_run *run, srv_err e)
{
    run->err = e;
    if (e == SRV_OK)
        run->res.stage = SRV_DOC_AT_NONE;
    if (e == SRV_ERR_NOMEM && !run->res.why[0])
        snprintf(run->res.why, sizeof run->res.why, "out of memory");
    run->done(run, run->ud);
}

/* The render (a document thread): each translated segment set, the file. */
static void render(srv_doc_run *run)
{
    srv_doc_result *r = &run->res;
    srv_err e = SRV_OK;
    r->n_jobs = run->p.n_jobs;
    r->tokens_in = run->p.tokens_in;
    for (int k = 0; k < run->p.n_jobs && e == SRV_OK; k++) {
        const srv_job *j = &run->p.jobs[k];
        if (j->status == SRV_JOB_DONE) {
            r->tokens_out += j->res.hyps[0].n_tokens;
            continue;
        }
        r->stage = SRV_DOC_AT_RUN;
        r->job = j->status;
        snprintf(r->why, sizeof r->why, "%s",
                 j->status == SRV_JOB_FAILED    ? j->engine_err
                 : j->status == SRV_JOB_TIMEOUT ? "the file took longer than --file-timeout-s"
                 : j->status == SRV_JOB_RETIRED ? "the model was loaded again meanwhile"
                 : j->status == SRV_JOB_GONE    ? "the requester left"
                                                : "the service stopped");
        e = j->status == SRV_JOB_SHUTDOWN || j->status == SRV_JOB_GONE ? SRV_ERR_UNAVAILABLE
                                                                      : SRV_ERR_INTERNAL;
    }
    if (e == SRV_OK)
        r->stage = SRV_DOC_AT_RENDER;
    for (int k = 0; e == SRV_OK && run->seg_text && k < srv_doc_n(run->d); k++) {
        int i = run->seg_text[k];
        if (i >= 0 && set_segment(run->d, k, &run->p, i, run->texts[i], run->lens[i]) != 0)
            e = SRV_ERR_NOMEM;
    }
    if (e == SRV_OK && !(r->data = srv_doc_render(run->d, &r->len, r->why, sizeof r->why)))
        e = r->why[0] ? SRV_ERR_INTERNAL : SRV_ERR_NOMEM;
    if (e == SRV_OK) {
        r->kept = srv_doc_kept(run->d);
        r->lost = srv_doc_lost(run->d);
    }
    finish(run, e);
}

/* A document task not run (why): the run ends there. */
static void dropped(srv_doc_run *run, srv_doc_outcome why, const char *timeout)
{
    run->res.stage = SRV_DOC_AT_WAIT;
    run->res.dropped = why;
    snprintf(run->res.why, sizeof run->res.why, "%s",
             why == SRV_DOC_TIMEOUT ? timeout
             : why == SRV_DOC_GONE  ? "the requester left"
                                    : "the service stopped");
    finish(run, why == SRV_DOC_TIMEOUT ? SRV_ERR_INTERNAL : SRV_ERR_UNAVAILABLE);
}

static void render_task(srv_doc_outcome why, void *ud)
{
    srv_doc_run *run = ud;
    if (why == SRV_DOC_RUN)
        render(run);
    else
        dropped(run, why, "the file took longer than --file-timeout-s");
}

/* Whether the requester left (the batcher's and the document threads'
 * gone hook). */
static int run_gone(void *ud)
{
    const srv_doc_run *run = ud;
    return run->q.gone && run->q.gone(run->ud);
}

/* One of the run's holds put back: the last one hands the render to a
 * document thread. */
static void release(srv_doc_run *run)
{
    if (atomic_fetch_sub(&run->pending, 1) != 1)
        return;
    run->task = (srv_doc_task){.run = render_task, .gone = run_gone, .ud = run,
                               .deadline = run->deadline};
    if (srv_docpool_submit(run->s->docs, &run->task, SRV_DOC_NEXT) != SRV_DOC_QUEUED)
        dropped(run, SRV_DOC_SHUTDOWN, "");
}

/* A job finished (or will never run). */
static void job_finished(srv_doc_run *run)
{
    atomic_fetch_add(&run->finished, 1);
    release(run);
}

/* The cache's key of a job (cache.h): its model, options and source. */
static srv_cache_key cache_key(const srv_doc_run *run, const srv_job *j)
{
    srv_cache_key k = {run->sm, run->sm->generation, j->opts, j->src, j->n_src};
    return k;
}

/* The next job to the queue as one finished with status st: fed when st
 * is done, else (and when it cannot go) finished with that status without
 * running, and the next one tried, as a LibreTranslate file's jobs are. */
static void feed_next(srv_doc_run *run, srv_job_status st)
{
    for (;;) {
        int k = atomic_fetch_add(&run->fed, 1);
        if (k >= run->p.n_jobs)
            return;
        srv_job *j = &run->p.jobs[k];
        if (j->cached)
            continue; /* finished at the submit */
        srv_submit_rc sr = st != SRV_JOB_DONE ? SRV_SUBMIT_DRAINING
                           : srv_batcher_feed(run->sm->b, j, 1, run->deadline, &run->c);
        if (sr == SRV_SUBMIT_OK)
            return;
        j->status = st != SRV_JOB_DONE            ? st
                    : sr == SRV_SUBMIT_RETIRED ? SRV_JOB_RETIRED
                                               : SRV_JOB_SHUTDOWN;
        st = j->status;
        job_finished(run);
    }
}

/* The batcher's completion of a job (a scheduler thread, or the main
 * thread in a drain): the next one fed, the device-failed policy for a
 * failed one, a finished one into the cache. */
static void job_done(srv_job *j, void *ud)
{
    srv_doc_run *run = ud;
    feed_next(run, j->status);
    if (j->status == SRV_JOB_FAILED)
        srv_model_engine_error(run->sm, j->engine_rc, j->engine_err);
    if (j->status == SRV_JOB_DONE && run->s->cache) {
        srv_cache_key k = cache_key(run, j);
        srv_cache_put(run->s->cache, &k, &j->res);
    }
    job_finished(run);
}

/* The pair's model and its options: the model's defaults, one hypothesis,
 * a multilingual model's languages (a package's target prefix) as the API
 * forces them, and a styled segment's aligning by the last layer's
 * attention, every head. The source language's number, or -1 with the
 * stage and why set. */
static int pair_model(srv_doc_run *run, const char *src, const char *tgt, int *lang)
{
    char *why = run->res.why;
    const size_t whylen = sizeof run->res.why;
    srv_server *s = run->s;
    srv_model *sm = run->sm = srv_models_get_pair(s->models, src, tgt);
    if (!sm) {
        char pairs[256];
        srv_models_pairs_text(s->models, pairs, sizeof pairs);
        snprintf(why, whylen, "%s (%s) is not available as a target language from %s (%s); "
                              "the models: %s",
                 srv_lang_name(tgt), tgt, srv_lang_name(src), src, pairs);
        run->res.stage = SRV_DOC_AT_MODEL;
        return -1;
    }
    const char *failed = srv_model_failed(sm);
    if (failed) {
        snprintf(why, whylen, "the model's device failed: %s", failed);
        run->res.stage = SRV_DOC_AT_DEVICE;
        return -1;
    }
    run->o = sm->defaults;
    run->o.num_hypotheses = 1;
    *lang = -1;
    if (sm->n_langs) {
        *lang = srv_model_lang(sm, src);
        run->prefix[0] = td_tok_lang_token(sm->tok, srv_model_lang(sm, tgt));
    } else {
        run->prefix[0] = td_tok_target_prefix(sm->tok);
    }
    if (run->prefix[0] >= 0) {
        run->o.prefix = run->prefix;
        run->o.n_prefix = 1;
    }
    static const int k_last[] = {-1};
    run->span = run->o;
    run->span.return_attention = 1;
    run->span.attn_layers = k_last;
    run->span.n_attn_layers = 1;
    run->span.attn_heads = NULL;
    run->span.n_attn_heads = 0;
    return 0;
}

/* The pipeline's failure said for the command line (a door says its own
 * from res.fail). */
static void pipe_why(srv_doc_run *run, srv_err e, const srv_pipe_fail *f)
{
    char *why = run->res.why;
    const size_t whylen = sizeof run->res.why;
    if (e == SRV_ERR_TOO_LONG)
        snprintf(why, whylen, "text %d%s has %d tokens; the limit is %d (including </s>)",
                 f->text, f->sentence >= 0 ? " (a sentence of it)" : "", f->n_tokens, f->limit);
    else if (e == SRV_ERR_TOO_MANY)
        snprintf(why, whylen, "the file has %d sentences to translate; the limit is %d "
                              "(--max-file-texts)", f->n_tokens, f->limit);
    else if (e == SRV_ERR_INTERNAL)
        snprintf(why, whylen, "%s", f->msg);
}

/* The model from src to tgt, and the segments that are text through the
 * pipeline (with the glossary's dictionary for the pair) into its jobs, a
 * styled one's capturing its alignment. */
static srv_err make_jobs(srv_doc_run *run, const char *src, const char *tgt)
{
    int lang;
    if (pair_model(run, src, tgt, &lang) != 0)
        return run->res.stage == SRV_DOC_AT_MODEL ? SRV_ERR_INVALID : SRV_ERR_INTERNAL;
    srv_model *sm = run->sm;
    srv_document *d = run->d;
    const int n = srv_doc_n(d);
    run->texts = calloc((size_t)(n ? n : 1), sizeof *run->texts);
    run->lens = calloc((size_t)(n ? n : 1), sizeof *run->lens);
    run->seg_text = calloc((size_t)(n ? n : 1), sizeof *run->seg_text);
    if (!run->texts || !run->lens || !run->seg_text)
        return SRV_ERR_NOMEM;
    int nt = 0;
    for (int k = 0; k < n; k++) {
        run->seg_text[k] = -1;
        if (srv_doc_keep(d, k))
            continue;
        run->seg_text[k] = nt;
        run->texts[nt] = srv_doc_seg(d, k, &run->lens[nt]);
        nt++;
    }
    char lang_split[16], lang_tgt[16];
    srv_lang_canon(sm->n_langs ? src : sm->src_lang, lang_split, sizeof lang_split);
    srv_lang_canon(sm->n_langs ? tgt : sm->tgt_lang, lang_tgt, sizeof lang_tgt);
    run->p = (srv_pipe){.tok = sm->tok, .arena = {srv_heap_alloc, &run->heap},
                        .seg_lang = lang_split, .src_lang = lang,
                        .max_tokens = sm->max_input_tokens, .max_jobs = run->s->o.max_file_texts,
                        .opts = &run->o};
    char pairs[200];
    if (srv_pipe_glossary(&run->p, run->q.glossary, lang_split, lang_tgt, pairs, sizeof pairs) !=
        SRV_OK) {
        run->p.seg_lang = NULL;
        snprintf(run->res.why, sizeof run->res.why,
                 "glossary %s translates %s; the request translates %s->%s", run->q.glossary->id,
                 pairs, lang_split, lang_tgt);
        run->res.stage = SRV_DOC_AT_GLOSSARY;
        return SRV_ERR_INVALID;
    }
    srv_err e = srv_pipe_make(&run->p, run->texts, run->lens, nt, &run->res.fail);
    run->p.seg_lang = NULL; /* lang_split's life ends here */
    if (e != SRV_OK) {
        run->res.stage = SRV_DOC_AT_JOBS;
        pipe_why(run, e, &run->res.fail);
    }
    for (int k = 0; e == SRV_OK && k < n; k++) { /* styled segments capture their alignment */
        int i = run->seg_text[k];
        if (i < 0 || !srv_doc_styled(d, k))
            continue;
        const srv_split *sp = srv_pipe_split_of(&run->p, i);
        for (int u = 0; u < (sp ? sp->n : 1); u++) {
            int j = sp ? sp->job[u] : run->p.text_job[i];
            if (j >= 0)
                run->p.jobs[j].opts = &run->span;
        }
    }
    return e;
}

/* The jobs to the model's queue: the cache's hits finished at once, the
 * first --file-queue-texts others out now, each next as one finishes. SRV_OK
 * (the last one's completion renders), or the queue's refusal. */
static srv_err submit(srv_doc_run *run)
{
    srv_server *s = run->s;
    srv_doc_result *r = &run->res;
    const int n = run->p.n_jobs;
    for (int i = 0; s->cache && i < n; i++) {
        srv_job *j = &run->p.jobs[i];
        srv_cache_key k = cache_key(run, j);
        if (srv_cache_get(s->cache, &k, &j->res)) {
            j->cached = 1;
            j->status = SRV_JOB_DONE;
        }
    }
    const int part = s->o.file_queue_texts > 0 ? s->o.file_queue_texts : 1;
    int out = 0;
    for (int misses = 0; out < n && misses < part; out++)
        misses += !run->p.jobs[out].cached;
    run->c = (srv_completion){.done = job_done, .gone = run_gone, .ud = run, .owner = run->q.owner};
    atomic_store(&run->total, n);
    atomic_store(&run->pending, n + 1); /* + the submit's own: the render waits for it */
    atomic_store(&run->fed, out);
    srv_submit_rc sr = srv_batcher_submit(run->sm->b, run->p.jobs, out, run->deadline, &run->c);
    if (sr == SRV_SUBMIT_OK) {
        for (int i = 0; i < n; i++) /* feed_next passes over them */
            if (run->p.jobs[i].cached)
                job_finished(run);
        release(run); /* the run may be done from here: touched no more */
        return SRV_OK;
    }
    atomic_store(&run->total, 0);
    r->stage = SRV_DOC_AT_SUBMIT;
    r->submit = sr;
    snprintf(r->why, sizeof r->why, "%s",
             sr == SRV_SUBMIT_FULL      ? "the queue is full; retry later"
             : sr == SRV_SUBMIT_RETIRED ? "the model was loaded again meanwhile; retry"
                                        : "the service is stopping");
    return sr == SRV_SUBMIT_FULL ? SRV_ERR_BUSY : SRV_ERR_UNAVAILABLE;
}

/* The parse, the source and the jobs (a document thread). Returns SRV_OK
 * when the jobs went out (the last one's completion renders: the run may
 * be done already), SRV_ERR_CONFLICT when nothing needs the model (to
 * render now), else the failure (stage and why set). */
static srv_err parse(srv_doc_run *run)
{
    srv_server *s = run->s;
    const srv_doc_request *q = &run->q;
    srv_doc_result *r = &run->res;
    const srv_doc_format *f = r->format;
    r->stage = SRV_DOC_AT_PARSE;
    /* a zip archive is bytes, a gettext catalogue in its header's charset;
     * every other text format UTF-8 */
    json_t *chk = f->binary ? json_true() : json_stringn(q->data, q->len);
    if (!chk) {
        snprintf(r->why, sizeof r->why, "file is not valid UTF-8");
        return SRV_ERR_INVALID;
    }
    json_decref(chk);
    const srv_doc_opts o = {q->overwrite, q->target};
    srv_err e = srv_doc_parse(f, q->ext, q->data, q->len, &o, &run->d, r->why, sizeof r->why);
    if (e != SRV_OK)
        return e;
    r->n_texts = srv_doc_n(run->d);
    if (r->n_texts > s->o.max_file_texts) {
        r->stage = SRV_DOC_AT_TEXTS;
        snprintf(r->why, sizeof r->why,
                 "the file has %d texts to translate; the limit is %d (--max-file-texts)",
                 r->n_texts, s->o.max_file_texts);
        return SRV_ERR_TOO_MANY;
    }
    r->stage = SRV_DOC_AT_SOURCE;
    snprintf(r->source, sizeof r->source, "%s", q->source);
    if (q->parsed && (e = q->parsed(run, run->ud, run->d, r->source, r->why, sizeof r->why)) != SRV_OK)
        return e;
    if (!strcmp(r->source, "auto") && detect(s, run->d, r) != 0)
        return SRV_ERR_NOMEM;
    if (srv_lang_same(r->source, q->target))
        return SRV_ERR_CONFLICT; /* nothing for the model: rendered as it is */
    e = make_jobs(run, r->source, q->target);
    if (e != SRV_OK || run->p.n_jobs == 0)
        return e == SRV_OK ? SRV_ERR_CONFLICT : e;
    r->stage = SRV_DOC_AT_LIMIT;
    if (q->jobs && (e = q->jobs(run, run->ud, &run->p, &run->o, r->why, sizeof r->why)) != SRV_OK)
        return e;
    return submit(run);
}

static void parse_task(srv_doc_outcome why, void *ud)
{
    srv_doc_run *run = ud;
    if (why != SRV_DOC_RUN) {
        dropped(run, why, "the file waited longer than --file-timeout-s");
        return;
    }
    srv_err e = parse(run);
    if (e == SRV_ERR_CONFLICT) /* nothing for the model */
        render(run);
    else if (e != SRV_OK)
        finish(run, e);
}

srv_err srv_doc_start(srv_server *s, const srv_doc_request *q, srv_doc_done_fn done, void *ud,
                      srv_doc_run **out, char *why, size_t whylen)
{
    *out = NULL;
    const srv_doc_format *f = srv_doc_format_of(q->ext);
    if (!f) {
        snprintf(why, whylen, "file format not supported");
        return SRV_ERR_INVALID;
    }
    if (!s->docs) {
        snprintf(why, whylen, "no document threads");
        return SRV_ERR_UNAVAILABLE;
    }
    srv_doc_run *run = calloc(1, sizeof *run);
    if (!run) {
        snprintf(why, whylen, "out of memory");
        return SRV_ERR_NOMEM;
    }
    run->s = s;
    run->q = *q;
    run->done = done;
    run->ud = ud;
    run->res.format = f;
    run->deadline = q->deadline > 0 ? q->deadline : srv_now() + s->o.file_timeout_s;
    run->task = (srv_doc_task){.run = parse_task, .gone = run_gone, .ud = run,
                               .deadline = run->deadline};
    *out = run; /* before it is out: it may be done at once */
    srv_doc_submit_rc rc = srv_docpool_submit(s->docs, &run->task, SRV_DOC_FIRST);
    if (rc != SRV_DOC_QUEUED) {
        snprintf(why, whylen, "%s", rc == SRV_DOC_FULL ? "the document queue is full; retry later"
                                                       : "the service is stopping");
        *out = NULL;
        free(run);
        return rc == SRV_DOC_FULL ? SRV_ERR_BUSY : SRV_ERR_UNAVAILABLE;
    }
    return SRV_OK;
}

void srv_doc_progress(srv_doc_run *run, int *done, int *total)
{
    *done = atomic_load(&run->finished);
    *total = atomic_load(&run->total);
}

srv_model *srv_doc_run_take_model(srv_doc_run *run)
{
    srv_model *sm = run->sm;
    run->sm = NULL;
    return sm;
}

srv_err srv_doc_run_result(srv_doc_run *run, srv_doc_result **out)
{
    *out = &run->res;
    return run->err;
}

void srv_doc_run_free(srv_doc_run *run)
{
    if (!run)
        return;
    srv_pipe_free(&run->p);
    srv_heap_free(&run->heap);
    free(run->texts);
    free(run->lens);
    free(run->seg_text);
    srv_doc_free(run->d);
    srv_model_put(run->sm);
    free(run->res.data);
    free(run);
}

/* srv_doc_translate's wait. */
typedef struct doc_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} doc_wait;

static void wait_done(srv_doc_run *run, void *ud)
{
    (void)run;
    doc_wait *w = ud;
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

srv_err srv_doc_translate(srv_server *s, const srv_doc_request *q, srv_doc_result *out)
{
    memset(out, 0, sizeof *out);
    doc_wait w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    srv_doc_run *run = NULL;
    srv_err e = srv_doc_start(s, q, wait_done, &w, &run, out->why, sizeof out->why);
    if (e != SRV_OK)
        return e;
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    srv_doc_result *r;
    e = srv_doc_run_result(run, &r);
    *out = *r;
    r->data = NULL; /* the caller's */
    srv_doc_run_free(run);
    return e;
}
