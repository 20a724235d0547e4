/*
 * deepl.c - the DeepL API v2 dialect's routes (deepl.h) and its documents: the upload, its
 * detached call's steps (parse, jobs, render, as libre_doc.h does them for
 * /translate_file), the table of documents, their status and result.
 *
 * A document runs on a call of its own, made here and never seen by the
 * transport ("detached"): its upload is answered with its id and key once
 * its parse is queued, and each step resumes it on this file's document
 * thread, which takes the next step; the result goes to the file store
 * and the table says queued, translating, done or error. A document still
 * running when the daemon drains is lost with it (its steps stop).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "clock.h"
#include "deepl.h"
#include "files.h"
#include "form.h"
#include "languages.h"
#include "models.h"
#include "translate.h"

#define DL_DOCS 1024 /* documents the table keeps */

/* ---- the table of documents ----------------------------------------------------- */

typedef enum dl_doc_state { DOC_FREE = 0, DOC_QUEUED, DOC_TRANSLATING, DOC_DONE, DOC_ERROR } dl_doc_state;

typedef struct dl_doc {
    dl_doc_state state;
    char id[33], key[65];
    char name[SRV_FILE_NAME_MAX]; /* the translated file in the store */
    long billed;
    double expires;               /* done or failed: forgotten after (--file-ttl-s) */
    int downloaded;               /* its result was downloaded: not again, as DeepL's */
    /* translating: its detached call while its jobs are out (their holds
     * are the jobs not done), how many, since when */
    srv_call *call;
    int n_jobs;
    double t_jobs;
    char error[200];
} dl_doc;

static pthread_mutex_t g_dmu = PTHREAD_MUTEX_INITIALIZER;
static dl_doc g_docs[DL_DOCS];

/* Whether a and b are equal, in time independent of where they differ. */
static int same_secret(const char *a, const char *b)
{
    size_t al = strlen(a), bl = strlen(b);
    unsigned char d = al != bl;
    for (size_t i = 0; i < al; i++)
        d |= (unsigned char)(a[i] ^ (i < bl ? b[i] : 0));
    return d == 0;
}

/* A slot for a new document (under g_dmu): a free one, else the oldest
 * finished one; NULL when every slot's document is in flight. */
static dl_doc *doc_slot(void)
{
    double now = srv_now();
    dl_doc *old = NULL;
    for (int i = 0; i < DL_DOCS; i++) {
        dl_doc *d = &g_docs[i];
        if (d->state == DOC_FREE || ((d->state == DOC_DONE || d->state == DOC_ERROR) &&
                                     d->expires <= now))
            return d;
        if ((d->state == DOC_DONE || d->state == DOC_ERROR) && (!old || d->expires < old->expires))
            old = d;
    }
    return old;
}

/* The document of id (under g_dmu), or NULL. */
static dl_doc *doc_find(const char *id)
{
    double now = srv_now();
    for (int i = 0; i < DL_DOCS; i++) {
        dl_doc *d = &g_docs[i];
        if (d->state != DOC_FREE && !strcmp(d->id, id) &&
            !((d->state == DOC_DONE || d->state == DOC_ERROR) && d->expires <= now))
            return d;
    }
    return NULL;
}

/* Sets document id's state (any thread); error: its message, or NULL. */
static void doc_set(const srv_server *s, const char *id, dl_doc_state st, long billed,
                    const char *error)
{
    pthread_mutex_lock(&g_dmu);
    dl_doc *d = doc_find(id);
    if (d) {
        d->state = st;
        d->billed = billed;
        if (st == DOC_DONE || st == DOC_ERROR)
            d->expires = srv_now() + s->api->file_ttl_s;
        d->call = NULL; /* the call goes */
        snprintf(d->error, sizeof d->error, "%s", error ? error : "");
    }
    pthread_mutex_unlock(&g_dmu);
}

/* Document id's jobs: out on call (n of them, now), or done (call NULL). */
static void doc_jobs(const char *id, srv_call *call, int n)
{
    pthread_mutex_lock(&g_dmu);
    dl_doc *d = doc_find(id);
    if (d) {
        d->call = call;
        d->n_jobs = n;
        d->t_jobs = srv_now();
    }
    pthread_mutex_unlock(&g_dmu);
}

/* A translating document's seconds remaining (under g_dmu): its jobs' time
 * so far times those left over those done; -1 before any is done. After
 * its jobs, its render: 1. */
static long doc_remaining(const dl_doc *d)
{
    if (!d->call)
        return d->n_jobs > 0 ? 1 : -1;
    int left = atomic_load(&d->call->holds);
    left = left < d->n_jobs ? left : d->n_jobs;
    int done = d->n_jobs - left;
    if (done <= 0)
        return -1;
    double s = (srv_now() - d->t_jobs) * left / done;
    return (long)s + 1;
}

/* ---- documents: the steps of a detached call ---------------------------------------- */

static void doc_enqueue(dl_req *d);

static void detached_resume(srv_call *c)
{
    srv_req *r = c->api;
    doc_enqueue(r->state);
}

static const srv_call_io k_detached_io = {.resume = detached_resume};

/* The document's own row: DeepL's errors, a file's limits and feed. */
static const srv_route k_doc_route = {"POST", "/v2/document", SRV_EP_DEEPL_DOCUMENT,
                                      SRV_ROUTE_MESSAGE | SRV_ROUTE_FILE, NULL, NULL, NULL,
                                      "/v2/document"};

static void doc_run(srv_doc_outcome why, void *ud)
{
    srv_req *r = ud;
    dl_req *d = r->state;
    srv_libre_req *lr = &d->lr;
    lr->outcome = why;
    if (why == SRV_DOC_RUN && lr->step == LIBRE_STEP_PARSE) {
        doc_set(r->s, d->doc_id, DOC_TRANSLATING, 0, NULL);
        lr->doc_rc = srv_libre_file_items(lr, lr->why, sizeof lr->why);
    } else if (why == SRV_DOC_RUN) {
        lr->out = srv_libre_file_render(r, &lr->out_len, lr->why, sizeof lr->why);
    }
    srv_call_release(r->call);
}

/* Hands step to the document threads under a hold: 1, or 0 with the
 * refusal recorded. */
static int doc_step(srv_req *r, int step, int kind)
{
    dl_req *d = r->state;
    d->lr.step = step;
    d->lr.task = (srv_doc_task){.run = doc_run, .ud = r,
                                .deadline = r->call->t0 + srv_req_timeout_s(r)};
    srv_call_hold(r->call, 1);
    srv_doc_submit_rc rc = r->s->docs ? srv_docpool_submit(r->s->docs, &d->lr.task, kind)
                                      : SRV_DOC_STOPPED;
    if (rc == SRV_DOC_QUEUED)
        return 1;
    srv_call_release(r->call);
    if (rc == SRV_DOC_FULL)
        dl_error(r, 429, "Too many requests: the document queue is full (--document-queue %d).",
                 r->s->o.document_queue);
    else
        dl_error(r, 503, "The server is shutting down.");
    return 0;
}

/* A dropped step's error (1), else 0. */
static int doc_dropped(srv_req *r)
{
    const dl_req *d = r->state;
    if (d->lr.outcome == SRV_DOC_RUN)
        return 0;
    if (d->lr.outcome == SRV_DOC_TIMEOUT)
        dl_error(r, 504, "The document waited longer than %d s.", srv_req_timeout_s(r));
    else
        dl_error(r, 503, "The server shut down before the document was translated.");
    return 1;
}

/* A document of several styles and a subtitle file's cues with tags
 * capture the attention of the last layer (their words' alignment). */
static void span_jobs(srv_req *r, srv_libre_req *lr)
{
    static const int k_last[] = {-1};
    lr->span_opts = r->opts;
    lr->span_opts.return_attention = 1;
    lr->span_opts.attn_layers = k_last;
    lr->span_opts.n_attn_layers = 1;
    lr->span_opts.attn_heads = NULL;
    lr->span_opts.n_attn_heads = 0;
    for (int i = 0; i < lr->n_items; i++) {
        const libre_item *it = &lr->items[i];
        for (int k = 0; k < it->n_segs; k++) {
            int t = lr->segs[it->seg0 + k].text_idx;
            if (t < 0 || !lr->file || !srv_doc_styled(lr->file, it->seg0 + k))
                continue;
            const srv_split *sp = srv_api_split_of(r, t);
            for (int s = 0; s < (sp ? sp->n : 1); s++) {
                int j = sp ? sp->job[s] : r->pipe.text_job[t];
                if (j >= 0)
                    r->pipe.jobs[j].opts = &lr->span_opts;
            }
        }
    }
}

/* The parse done: its units routed (the whole document in one source
 * language) and billed, its jobs made. 1 to submit them, 2 a render
 * handed out, 0 an error recorded. */
static int doc_parsed(srv_req *r)
{
    dl_req *d = r->state;
    srv_libre_req *lr = &d->lr;
    if (doc_dropped(r))
        return 0;
    if (lr->doc_rc != 0) {
        dl_error(r, lr->doc_rc == -2 ? 400 : 500, "Invalid file data: %s",
                 lr->why[0] ? lr->why : "out of memory");
        return 0;
    }
    if (lr->n_segs > r->s->o.max_file_texts) {
        dl_error(r, 413, "The document has %d texts to translate; the limit is %d.", lr->n_segs,
                 r->s->o.max_file_texts);
        return 0;
    }
    const char **texts = malloc((size_t)(lr->n_segs + 1) * sizeof *texts);
    size_t *lens = malloc((size_t)(lr->n_segs + 1) * sizeof *lens), all = 0;
    char *joined = NULL;
    int n = 0, rc = 0;
    for (int k = 0; texts && lens && k < lr->n_segs; k++)
        if (!lr->segs[k].keep) {
            texts[n] = lr->segs[k].text;
            lens[n++] = lr->segs[k].len;
            all += lr->segs[k].len + 1;
            d->billed += srv_deepl_chars(lr->segs[k].text, lr->segs[k].len);
        }
    if (!texts || !lens || (!d->src[0] && !(joined = malloc(all + 1)))) {
        dl_error(r, 500, "out of memory");
        goto out;
    }
    if (!d->src[0]) { /* one language, detected over the whole text */
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            memcpy(joined + at, texts[i], lens[i]);
            at += lens[i];
            joined[at++] = '\n';
        }
        joined[at] = 0;
        int drc = srv_deepl_detect(r, joined, at, d->tgt, d->src, sizeof d->src);
        if (drc != 0) {
            dl_error(r, drc == -2 ? 500 : 400, "%s",
                     drc == -2 ? "out of memory" : "Value for 'target_lang' not supported.");
            goto out;
        }
    }
    if (srv_lang_same(d->src, d->tgt))
        n = 0; /* copied as it is */
    for (int k = 0, i = 0; k < lr->n_segs; k++)
        lr->segs[k].text_idx = n && !lr->segs[k].keep ? i++ : -1;
    if (srv_deepl_usage_take(r->s, d->billed) != 0) {
        d->billed = 0;
        dl_error(r, 456, "Quota exceeded. The character limit has been reached.");
        goto out;
    }
    if (n == 0) {
        rc = doc_step(r, LIBRE_STEP_RENDER, SRV_DOC_NEXT) ? 2 : 0;
        goto out;
    }
    r->model = srv_models_get_pair(r->s->models, d->src, d->tgt);
    if (!r->model) {
        dl_error(r, 400, "No model translates %s into %s.", d->src, d->tgt);
        goto out;
    }
    snprintf(r->src_lang, sizeof r->src_lang, "%s", d->src);
    snprintf(r->tgt_lang, sizeof r->tgt_lang, "%s", d->tgt);
    if (srv_api_model_failed(r, r->model))
        goto out;
    r->opts = r->model->defaults;
    r->opts.num_hypotheses = 1;
    rc = srv_api_make_jobs(r, texts, lens, n, "file");
    if (rc == 1)
        span_jobs(r, lr);
    lr->step = LIBRE_STEP_JOBS;
    if (rc == 1 && r->pipe.n_jobs == 0)
        rc = doc_step(r, LIBRE_STEP_RENDER, SRV_DOC_NEXT) ? 2 : 0;
out:
    free(texts);
    free(lens);
    free(joined);
    return rc;
}

/* The translated file into the store: d->stored, or an error recorded. */
static void doc_store(srv_req *r)
{
    dl_req *d = r->state;
    if (doc_dropped(r))
        return;
    if (!d->lr.out) {
        dl_error(r, 500, "%s", d->lr.why[0] ? d->lr.why : "out of memory");
        return;
    }
    char *out = d->lr.out;
    d->lr.out = NULL; /* the store's */
    if (srv_files_put(r->s->libre, d->name, out, d->lr.out_len, d->lr.file_ctype) != 0) {
        dl_error(r, 413, "The translated document (%zu bytes) does not fit the file store "
                 "(--max-files-bytes %ld).", d->lr.out_len, r->s->api->max_files_bytes);
        return;
    }
    d->stored = 1;
}

/* The document's end: its state in the table, its call freed. */
static void doc_finish(srv_req *r)
{
    dl_req *d = r->state;
    srv_call *c = r->call;
    if (d->stored) {
        doc_set(r->s, d->doc_id, DOC_DONE, d->billed, NULL);
    } else {
        char msg[200] = "the translation failed";
        json_t *e = c->reply ? json_loadb(c->reply, c->reply_len, 0, NULL) : NULL;
        if (json_is_string(json_object_get(e, "message")))
            snprintf(msg, sizeof msg, "%s", json_string_value(json_object_get(e, "message")));
        json_decref(e);
        if (d->billed)
            srv_deepl_usage_give_back(d->billed);
        doc_set(r->s, d->doc_id, DOC_ERROR, 0, msg);
    }
    srv_req_free(r);
    free(c->reply);
    srv_call_free_arena(c); /* r with it */
    free(c);
}

/* The next step of a document whose last one finished (its thread). */
static void doc_drive(srv_req *r)
{
    dl_req *d = r->state;
    if (atomic_load(&r->s->draining)) {
        /* the daemon stops: the document is lost with it, its state left
         * to the exit (the pools it would use are going) */
        doc_set(r->s, d->doc_id, DOC_ERROR, 0, "the server shut down");
        return;
    }
    srv_call_hold(r->call, 1); /* the step's own: its work may finish at once */
    int rc = 0;
    switch (d->lr.step) {
    case LIBRE_STEP_PARSE:
        rc = doc_parsed(r);
        if (rc == 1 && (rc = srv_api_submit(r) == SRV_NEXT_PENDING ? 2 : 0) == 2)
            doc_jobs(d->doc_id, r->call, r->pipe.n_jobs); /* under the step's hold */
        break;
    case LIBRE_STEP_JOBS:
        doc_jobs(d->doc_id, NULL, r->pipe.n_jobs);
        rc = !srv_api_jobs_failed(r) && doc_step(r, LIBRE_STEP_RENDER, SRV_DOC_NEXT) ? 2 : 0;
        break;
    default:
        doc_store(r);
    }
    if (rc == 2)
        srv_call_release(r->call); /* the last one: resumed again */
    else
        doc_finish(r);
}

/* The document thread: takes the documents resumed, one step each. */
static pthread_mutex_t g_qmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_qcv = PTHREAD_COND_INITIALIZER;
static dl_req *g_head, *g_tail;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_thread_ok;

static void *doc_thread(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&g_qmu);
        while (!g_head)
            pthread_cond_wait(&g_qcv, &g_qmu);
        dl_req *d = g_head;
        g_head = d->next;
        if (!g_head)
            g_tail = NULL;
        pthread_mutex_unlock(&g_qmu);
        d->next = NULL;
        doc_drive(d->r);
    }
    return NULL;
}

static void start_thread(void)
{
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    g_thread_ok = pthread_create(&t, &at, doc_thread, NULL) == 0;
    pthread_attr_destroy(&at);
}

static void doc_enqueue(dl_req *d)
{
    pthread_mutex_lock(&g_qmu);
    if (g_tail)
        g_tail->next = d;
    else
        g_head = d;
    g_tail = d;
    pthread_cond_signal(&g_qcv);
    pthread_mutex_unlock(&g_qmu);
}

/* ---- documents: the upload ------------------------------------------------------------ */

/* n random bytes as hex into out (2n + 1). 0, or -1. */
static int random_hex(char *out, size_t n)
{
    unsigned char b[32];
    FILE *f = n <= sizeof b ? fopen("/dev/urandom", "rb") : NULL;
    size_t got = f ? fread(b, 1, n, f) : 0;
    if (f)
        fclose(f);
    for (size_t i = 0; i < got; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
    return got == n ? 0 : -1;
}

/* The format of a file name's extension, into lr (the documents table,
 * documents.h): 0, or -1 when none. */
static int doc_kind(srv_libre_req *lr, const char *ext)
{
    const srv_doc_format *fmt = srv_doc_format_of(ext);
    if (!fmt)
        return -1;
    lr->file_ctype = srv_doc_ctype(fmt, ext);
    lr->ext = ext;
    lr->format = fmt;
    lr->is_file = 1;
    return 0;
}

/* The upload's checks: its name (the field filename, else the part's), its
 * format, output_format (the same), UTF-8 for a text format. 0, or -1 with
 * the error. */
static int upload_ok(srv_req *r, json_t *f, const srv_form_file *file, dl_req *d)
{
    const char *fname, *outfmt;
    if (srv_deepl_field_str(r, f, "filename", &fname) || srv_deepl_field_str(r, f, "output_format", &outfmt))
        return -1;
    if (!file->present) {
        dl_error(r, 400, "Parameter 'file' not specified.");
        return -1;
    }
    if (!fname || !*fname)
        fname = file->name;
    if (!fname || !*fname) {
        dl_error(r, 400, "Parameter 'filename' not specified.");
        return -1;
    }
    snprintf(d->upload_name, sizeof d->upload_name, "%s", fname);
    const char *ext = srv_files_ext(d->upload_name);
    if (doc_kind(&d->lr, ext) != 0) {
        dl_error(r, 400, "Invalid file data: the format %s is not supported.",
                 ext[0] ? ext : "(no extension)");
        return -1;
    }
    if (outfmt && *outfmt && (!ext[0] || strcasecmp(outfmt, ext + 1) != 0)) {
        dl_error(r, 400, "Conversion between different document formats is not supported.");
        return -1;
    }
    /* a zip archive is bytes; a gettext catalogue in the charset its
     * header names (po.h); every other text format UTF-8 */
    json_t *chk = d->lr.format->binary ? json_true() : json_stringn(file->data, file->len);
    if (!chk) {
        dl_error(r, 400, "Invalid file data: the file is not valid UTF-8.");
        return -1;
    }
    json_decref(chk);
    return 0;
}

/* The detached call of an upload: its request state holds a copy of the
 * upload. NULL when out of memory (recorded on r). */
static srv_req *detach(srv_req *r, const dl_req *up, const srv_form_file *file)
{
    srv_call *c = calloc(1, sizeof *c);
    srv_req *dr = c ? srv_call_alloc(c, sizeof *dr) : NULL;
    dl_req *d = dr ? calloc(1, sizeof *d) : NULL;
    char *data = d ? malloc(file->len + 1) : NULL;
    const char *client = r->call->client ? r->call->client : "-";
    if (data)
        c->client = srv_call_strndup(c, client, strlen(client));
    if (!data || !c->client) {
        free(data);
        free(d);
        if (c)
            srv_call_free_arena(c);
        free(c);
        dl_error(r, 500, "out of memory");
        return NULL;
    }
    memcpy(data, file->data, file->len);
    data[file->len] = 0;
    c->io = &k_detached_io;
    c->method = "POST";
    c->path = "/v2/document";
    c->req_id = r->call->req_id ? srv_call_strndup(c, r->call->req_id, strlen(r->call->req_id))
                                : NULL; /* the upload's arena goes with its call */
    c->t0 = srv_now();
    c->timeout_s = r->s->o.file_timeout_s;
    c->api = dr;
    *dr = (srv_req){.s = r->s, .call = c, .route = &k_doc_route, .ep = SRV_EP_DEEPL_DOCUMENT,
                    .path = c->path, .host = "", .state = d, .dialect_free = srv_deepl_free};
    memcpy(d->upload_name, up->upload_name, sizeof d->upload_name);
    memcpy(d->src, up->src, sizeof d->src);
    memcpy(d->tgt, up->tgt, sizeof d->tgt);
    d->upload = data;
    d->r = dr;
    d->lr.data = data;
    d->lr.len = file->len;
    d->lr.src = d->src;
    d->lr.tgt = d->tgt;
    doc_kind(&d->lr, srv_files_ext(d->upload_name));
    return dr;
}

/* POST /v2/document: the upload checked, its document in the table, its
 * parse queued; answered with its id and key. */
static void document_upload(srv_req *r, json_t *f, const srv_form_file *file)
{
    dl_req *up = r->state;
    if (srv_deepl_langs(r, f, up->src, up->tgt) || !srv_deepl_formality_ok(r, f) ||
        !srv_deepl_glossary_ok(r, up, f, up->src) || upload_ok(r, f, file, up))
        return;
    if (srv_deepl_usage_spent(r->s)) {
        dl_error(r, 456, "Quota exceeded. The character limit has been reached.");
        return;
    }
    pthread_once(&g_once, start_thread);
    if (!g_thread_ok) {
        dl_error(r, 500, "no thread for the documents");
        return;
    }
    srv_req *dr = detach(r, up, file);
    if (!dr)
        return;
    dl_req *d = dr->state;
    char safe[80], key[65];
    if (srv_files_new_name(d->upload_name, d->lr.format->own_ext ? d->lr.ext : ".txt", safe, sizeof safe,
                           d->name, sizeof d->name) != 0 ||
        random_hex(key, 32) != 0) {
        dl_error(r, 500, "no randomness for the document's id");
        doc_finish(dr);
        return;
    }
    memcpy(d->doc_id, d->name, 32);
    d->doc_id[32] = 0;
    pthread_mutex_lock(&g_dmu);
    dl_doc *slot = doc_slot();
    if (slot)
        *slot = (dl_doc){.state = DOC_QUEUED};
    if (slot) {
        memcpy(slot->id, d->doc_id, sizeof slot->id);
        memcpy(slot->key, key, sizeof slot->key);
        memcpy(slot->name, d->name, sizeof slot->name);
    }
    pthread_mutex_unlock(&g_dmu);
    if (!slot) {
        dl_error(r, 429, "Too many requests: %d documents are being translated.", DL_DOCS);
        doc_finish(dr);
        return;
    }
    /* once its parse is out, the document is its thread's (it may be
     * done and freed before this answer): its id copied first */
    char id[33];
    memcpy(id, d->doc_id, sizeof id);
    srv_call_hold(dr->call, 1); /* the upload's own: a refused step's release resumes nothing */
    if (!doc_step(dr, LIBRE_STEP_PARSE, SRV_DOC_FIRST)) {
        /* the refusal is the upload's answer; its document never was */
        srv_call_answer(r->call, dr->call->status, "application/json");
        srv_call_take(r->call, dr->call->reply, dr->call->reply_len);
        if (r->call->status == 429)
            srv_req_header(r, "Retry-After", "1");
        dr->call->reply = NULL;
        doc_finish(dr);
        doc_set(r->s, id, DOC_FREE, 0, NULL);
        return;
    }
    srv_call_release(dr->call); /* the parse may be done already: resumed */
    srv_req_object(r, 200, json_pack("{s:s,s:s}", "document_id", id, "document_key", key));
}

/* The translated file stored under name, with the upload's own name. */
static void document_result(srv_req *r, const char *name)
{
    char *data = NULL;
    size_t len = 0;
    const char *ctype = NULL;
    int rc = srv_files_get(r->s->libre, name, &data, &len, &ctype);
    if (rc != 0) {
        dl_error(r, rc == -2 ? 500 : 404, rc == -2 ? "out of memory" : "Document not found.");
        return;
    }
    const char *dot = strchr(name, '.');
    char disp[SRV_FILE_NAME_MAX + 32];
    snprintf(disp, sizeof disp, "attachment; filename=%s", dot ? dot + 1 : name);
    srv_req_reply(r, 200, ctype, data, len);
    srv_req_header(r, "Content-Disposition", disp);
}

/* POST /v2/document/ID and /v2/document/ID/result, document_key in the
 * body: the status, or the translated file (once: it is gone after). */
static void document_status(srv_req *r, json_t *f)
{
    const char *key;
    if (srv_deepl_field_str(r, f, "document_key", &key))
        return;
    if (!key) {
        dl_error(r, 400, "Parameter 'document_key' not specified.");
        return;
    }
    char id[33];
    const char *p = r->path + strlen(DL_DOC_PREFIX);
    size_t n = strspn(p, "0123456789abcdef");
    int result = !strcmp(p + n, "/result");
    if (n != 32 || (p[n] && !result)) {
        dl_error(r, 404, "Document not found.");
        return;
    }
    memcpy(id, p, 32);
    id[32] = 0;
    pthread_mutex_lock(&g_dmu);
    dl_doc *d = doc_find(id);
    int key_ok = d && same_secret(d->key, key);
    dl_doc copy = key_ok ? *d : (dl_doc){.state = DOC_FREE};
    long remaining = key_ok && d->state == DOC_TRANSLATING ? doc_remaining(d) : -1;
    if (result && copy.state == DOC_DONE)
        d->downloaded = 1; /* once: its status stays, its result is gone */
    pthread_mutex_unlock(&g_dmu);
    static const char *const k_states[] = {"", "queued", "translating", "done", "error"};
    if (d && !key_ok) {
        dl_error(r, 403, "Authorization failure: wrong document_key.");
    } else if (copy.state == DOC_FREE) {
        dl_error(r, 404, "Document not found.");
    } else if (!result) {
        json_t *o = json_pack("{s:s,s:s}", "document_id", id, "status", k_states[copy.state]);
        if (o && copy.state == DOC_DONE)
            json_object_set_new(o, "billed_characters", json_integer(copy.billed));
        if (o && remaining >= 0)
            json_object_set_new(o, "seconds_remaining", json_integer(remaining));
        if (o && copy.state == DOC_ERROR)
            json_object_set_new(o, "error_message", json_string(copy.error));
        srv_req_object(r, 200, o);
    } else if (copy.state != DOC_DONE) {
        dl_error(r, 503, "Document not ready.");
    } else if (copy.downloaded) {
        dl_error(r, 404, "Document not found: its result was downloaded already.");
    } else {
        document_result(r, copy.name);
    }
}

/* ---- the routes ------------------------------------------------------------------------ */

/* Every row's body: the key, then the endpoint; 1 when jobs are to be
 * submitted. */
static int dl_parse(srv_req *r)
{
    if (!srv_deepl_auth_ok(r))
        return 0;
    if (r->ep != SRV_EP_DEEPL_USAGE && !atomic_load(&r->s->ready)) {
        dl_error(r, 503, "The models are loading.");
        srv_req_header(r, "Retry-After", "1");
        return 0;
    }
    srv_form_file file;
    int is_json;
    json_t *f = srv_form_fields(r, srv_call_header(r->call, "Content-Type"), &file, &is_json);
    dl_req *d = f ? srv_deepl_state(r, f) : NULL;
    if (!d)
        return 0;
    switch (r->ep) {
    case SRV_EP_DEEPL_TRANSLATE:
        return srv_deepl_translate(r, d, f);
    case SRV_EP_DEEPL_LANGUAGES:
        srv_deepl_languages(r, f);
        return 0;
    case SRV_EP_DEEPL_USAGE:
        srv_deepl_usage(r);
        return 0;
    default:
        if (!strcmp(r->path, "/v2/document"))
            document_upload(r, f, &file);
        else
            document_status(r, f);
        return 0;
    }
}

static srv_call_next dl_body(srv_req *r)
{
    return dl_parse(r) == 1 ? srv_api_submit(r) : SRV_NEXT_ANSWERED;
}

/* /v2/translate's jobs finished: the answer, or their error (the
 * characters given back). */
static srv_call_next dl_respond(srv_req *r)
{
    dl_req *d = r->state;
    if (!srv_api_jobs_failed(r)) {
        srv_deepl_translate_answer(r);
    } else if (d->billed) {
        srv_deepl_usage_give_back(d->billed);
        d->billed = 0;
    }
    return SRV_NEXT_ANSWERED;
}

#define DL_ROW SRV_ROUTE_MESSAGE | SRV_ROUTE_ANY_BODY

static const srv_route k_deepl_routes[] = {
    {"POST", "/v2/translate", SRV_EP_DEEPL_TRANSLATE, DL_ROW | SRV_ROUTE_SERVING, NULL, dl_body,
     dl_respond, "/v2/translate"},
    /* GET with a form body too: the client sends type=target so */
    {"GET", "/v2/languages", SRV_EP_DEEPL_LANGUAGES, DL_ROW, NULL, dl_body, NULL, "/v2/languages"},
    {"POST", "/v2/languages", SRV_EP_DEEPL_LANGUAGES, DL_ROW, NULL, dl_body, NULL, "/v2/languages"},
    {"GET", "/v2/usage", SRV_EP_DEEPL_USAGE, DL_ROW, NULL, dl_body, NULL, "/v2/usage"},
    {"POST", "/v2/usage", SRV_EP_DEEPL_USAGE, DL_ROW, NULL, dl_body, NULL, "/v2/usage"},
    {"POST", "/v2/document", SRV_EP_DEEPL_DOCUMENT, DL_ROW | SRV_ROUTE_SERVING | SRV_ROUTE_FILE,
     NULL, dl_body, NULL, "/v2/document"},
    /* a document's status and result: counted as /v2/document */
    {"POST", DL_DOC_PREFIX "*", SRV_EP_DEEPL_DOCUMENT, DL_ROW, NULL, dl_body, NULL, "/v2/document"},
};

int srv_deepl_routes(srv_route *out, int max)
{
    return srv_routes_copy(k_deepl_routes, (int)(sizeof k_deepl_routes / sizeof k_deepl_routes[0]),
                           out, max);
}
