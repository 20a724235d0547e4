/*
 * docrun.c - a whole document translated in one call (docrun.h): the
 * steps of LibreTranslate's /translate_file (server/api/libre.c,
 * libre_doc.c) for a caller that waits, on the same table, pipeline and
 * batcher.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "clock.h"
#include "docrun.h"
#include "langcodes.h"
#include "languages.h"
#include "langid.h"
#include "models.h"
#include "pipeline.h"

/* The document's jobs in flight: the batcher's completion counts them. */
typedef struct doc_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
} doc_wait;

static void job_done(srv_job *j, void *ud)
{
    (void)j;
    doc_wait *w = ud;
    pthread_mutex_lock(&w->mu);
    w->pending--;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

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

/* The pipeline's jobs through sm's batcher, --file-queue-texts at a time,
 * waited for. SRV_OK, or a kind with why. */
static srv_err run_jobs(srv_server *s, srv_model *sm, srv_pipe *p, char *why, size_t whylen)
{
    doc_wait w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    const srv_completion c = {.done = job_done, .ud = &w};
    const double deadline = srv_now() + s->o.file_timeout_s;
    const int part = s->o.file_queue_texts > 0 ? s->o.file_queue_texts : 1;
    srv_err e = SRV_OK;
    for (int at = 0; at < p->n_jobs && e == SRV_OK;) {
        int n = p->n_jobs - at < part ? p->n_jobs - at : part;
        pthread_mutex_lock(&w.mu);
        w.pending = n;
        pthread_mutex_unlock(&w.mu);
        srv_submit_rc rc = srv_batcher_submit(sm->b, p->jobs + at, n, deadline, &c);
        if (rc == SRV_SUBMIT_FULL && srv_now() < deadline) {
            nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL); /* the queue drains */
            continue;
        }
        if (rc != SRV_SUBMIT_OK) {
            snprintf(why, whylen, "%s", rc == SRV_SUBMIT_FULL ? "the queue stayed full"
                                        : rc == SRV_SUBMIT_RETIRED ? "the model was reloaded"
                                                                   : "the service is stopping");
            return SRV_ERR_INTERNAL;
        }
        pthread_mutex_lock(&w.mu);
        while (w.pending > 0)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        for (int k = at; k < at + n && e == SRV_OK; k++) {
            const srv_job *j = &p->jobs[k];
            if (j->status == SRV_JOB_DONE)
                continue;
            if (j->status == SRV_JOB_FAILED)
                srv_model_engine_error(sm, j->engine_rc, j->engine_err);
            snprintf(why, whylen, "%s",
                     j->status == SRV_JOB_FAILED    ? j->engine_err
                     : j->status == SRV_JOB_TIMEOUT ? "the file took longer than --file-timeout-s"
                                                    : "the service stopped");
            e = SRV_ERR_INTERNAL;
        }
        at += n;
    }
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return e;
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

/* The segments of d through the model from src to tgt. */
static srv_err translate_segments(srv_server *s, srv_document *d, const char *src,
                                  const char *tgt, char *why, size_t whylen)
{
    srv_model *sm = srv_models_get_pair(s->models, src, tgt);
    if (!sm) {
        char pairs[256];
        srv_models_pairs_text(s->models, pairs, sizeof pairs);
        snprintf(why, whylen, "%s (%s) is not available as a target language from %s (%s); "
                              "the models: %s",
                 srv_lang_name(tgt), tgt, srv_lang_name(src), src, pairs);
        return SRV_ERR_INVALID;
    }
    const char *failed = srv_model_failed(sm);
    if (failed) {
        snprintf(why, whylen, "the model's device failed: %s", failed);
        srv_model_put(sm);
        return SRV_ERR_INTERNAL;
    }
    /* the model's defaults, one hypothesis; a multilingual model's
     * languages (a package's target prefix) as the API forces them */
    td_decode_opts o = sm->defaults, span;
    o.num_hypotheses = 1;
    int32_t prefix[1];
    int lang = -1;
    if (sm->n_langs) {
        lang = srv_model_lang(sm, src);
        prefix[0] = td_tok_lang_token(sm->tok, srv_model_lang(sm, tgt));
    } else {
        prefix[0] = td_tok_target_prefix(sm->tok);
    }
    if (prefix[0] >= 0) {
        o.prefix = prefix;
        o.n_prefix = 1;
    }
    /* a styled segment aligns by the last layer's attention, every head */
    static const int k_last[] = {-1};
    span = o;
    span.return_attention = 1;
    span.attn_layers = k_last;
    span.n_attn_layers = 1;
    span.attn_heads = NULL;
    span.n_attn_heads = 0;
    const int n = srv_doc_n(d);
    const char **texts = calloc((size_t)(n ? n : 1), sizeof *texts);
    size_t *lens = calloc((size_t)(n ? n : 1), sizeof *lens);
    int *seg_text = calloc((size_t)(n ? n : 1), sizeof *seg_text), nt = 0;
    char sl[16];
    srv_lang_canon(sm->n_langs ? src : sm->src_lang, sl, sizeof sl);
    srv_heap heap = {0};
    srv_pipe p = {.tok = sm->tok, .arena = {srv_heap_alloc, &heap}, .seg_lang = sl,
                  .src_lang = lang, .max_tokens = sm->max_input_tokens,
                  .max_jobs = s->o.max_file_texts, .opts = &o};
    srv_pipe_fail f;
    srv_err e = texts && lens && seg_text ? SRV_OK : SRV_ERR_NOMEM;
    for (int k = 0; e == SRV_OK && k < n; k++) {
        seg_text[k] = -1;
        if (srv_doc_keep(d, k))
            continue;
        seg_text[k] = nt;
        texts[nt] = srv_doc_seg(d, k, &lens[nt]);
        nt++;
    }
    if (e == SRV_OK)
        e = srv_pipe_make(&p, texts, lens, nt, &f);
    if (e == SRV_ERR_TOO_LONG)
        snprintf(why, whylen, "text %d%s has %d tokens; the limit is %d (including </s>)",
                 f.text, f.sentence >= 0 ? " (a sentence of it)" : "", f.n_tokens, f.limit);
    else if (e == SRV_ERR_TOO_MANY)
        snprintf(why, whylen, "the file has %d sentences to translate; the limit is %d "
                              "(--max-file-texts)", f.n_tokens, f.limit);
    else if (e == SRV_ERR_INTERNAL)
        snprintf(why, whylen, "%s", f.msg);
    for (int k = 0; e == SRV_OK && k < n; k++) { /* styled segments capture their alignment */
        int i = seg_text[k];
        if (i < 0 || !srv_doc_styled(d, k))
            continue;
        const srv_split *sp = srv_pipe_split_of(&p, i);
        for (int u = 0; u < (sp ? sp->n : 1); u++) {
            int j = sp ? sp->job[u] : p.text_job[i];
            if (j >= 0)
                p.jobs[j].opts = &span;
        }
    }
    if (e == SRV_OK)
        e = run_jobs(s, sm, &p, why, whylen);
    for (int k = 0; e == SRV_OK && k < n; k++)
        if (seg_text[k] >= 0 && set_segment(d, k, &p, seg_text[k], texts[seg_text[k]],
                                            lens[seg_text[k]]) != 0)
            e = SRV_ERR_NOMEM;
    srv_pipe_free(&p);
    srv_heap_free(&heap);
    free(texts);
    free(lens);
    free(seg_text);
    srv_model_put(sm);
    return e;
}

srv_err srv_doc_translate(srv_server *s, const srv_doc_request *q, srv_doc_result *out)
{
    memset(out, 0, sizeof *out);
    const srv_doc_format *f = out->format = srv_doc_format_of(q->ext);
    if (!f) {
        snprintf(out->why, sizeof out->why, "file format not supported");
        return SRV_ERR_INVALID;
    }
    /* a zip archive is bytes; every text format UTF-8 */
    json_t *chk = f->binary ? json_true() : json_stringn(q->data, q->len);
    if (!chk) {
        snprintf(out->why, sizeof out->why, "file is not valid UTF-8");
        return SRV_ERR_INVALID;
    }
    json_decref(chk);
    srv_document *d = NULL;
    const srv_doc_opts o = {q->overwrite, q->target};
    srv_err e = srv_doc_parse(f, q->ext, q->data, q->len, &o, &d, out->why, sizeof out->why);
    if (e == SRV_OK && srv_doc_n(d) > s->o.max_file_texts) {
        snprintf(out->why, sizeof out->why,
                 "the file has %d texts to translate; the limit is %d (--max-file-texts)",
                 srv_doc_n(d), s->o.max_file_texts);
        e = SRV_ERR_TOO_MANY;
    }
    snprintf(out->source, sizeof out->source, "%s", q->source);
    if (e == SRV_OK && !strcmp(q->source, "auto") && detect(s, d, out) != 0)
        e = SRV_ERR_NOMEM;
    if (e == SRV_OK && !srv_lang_same(out->source, q->target))
        e = translate_segments(s, d, out->source, q->target, out->why, sizeof out->why);
    if (e == SRV_OK && !(out->data = srv_doc_render(d, &out->len, out->why, sizeof out->why)))
        e = out->why[0] ? SRV_ERR_INTERNAL : SRV_ERR_NOMEM;
    if (e == SRV_OK) {
        out->kept = srv_doc_kept(d);
        out->lost = srv_doc_lost(d);
    }
    if (e == SRV_ERR_NOMEM && !out->why[0])
        snprintf(out->why, sizeof out->why, "out of memory");
    srv_doc_free(d);
    return e;
}
