/*
 * deepl.c - the DeepL API v2 dialect's routes (deepl.h) and its documents:
 * the upload checked and started through the documents' entry point
 * (service/docrun.h), the table of documents, their status and result.
 *
 * A document's upload is answered with its id and key once its run is
 * started; the run's parsed hook bills its characters and finds its
 * language, its done puts the translated file in the file store and says
 * done or error in the table (queued, translating, done or error). A
 * document still running when the daemon drains ends with it.
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
#include "docrun.h"
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
    /* translating: its run (from its parse to its done) and since when */
    srv_doc_run *run;
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

/* Sets document id's state (any thread), its run forgotten; error: its
 * message, or NULL. */
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
        d->run = NULL; /* the run goes */
        snprintf(d->error, sizeof d->error, "%.*s", (int)sizeof d->error - 1, error ? error : "");
        srv_utf8_sanitize(d->error);
    }
    pthread_mutex_unlock(&g_dmu);
}

/* A translating document's seconds remaining (under g_dmu): its jobs' time
 * so far times those left over those done; -1 before any is done. After
 * its jobs, its render: 1. */
static long doc_remaining(const dl_doc *d)
{
    int done = 0, total = 0;
    if (d->run)
        srv_doc_progress(d->run, &done, &total);
    if (total > 0 && done >= total)
        return 1;
    if (done <= 0)
        return -1;
    double s = (srv_now() - d->t_jobs) * (total - done) / done;
    return (long)s + 1;
}

/* ---- documents: the run ---------------------------------------------------------------- */

/* A document on its way: what its run reads and where its result goes;
 * made at its upload, freed at its run's done. */
typedef struct dl_job {
    srv_server *s;
    char id[33];
    char name[SRV_FILE_NAME_MAX]; /* the translated file in the store */
    char upload_name[128];
    char src[16], tgt[16];        /* src "": detected over the document's text */
    const char *ctype;
    char *data;                   /* the upload's bytes (its call is gone) */
    size_t len;
    srv_glossary *glossary;       /* glossary_id's, with a reference, or NULL */
    long billed;                  /* characters taken from the quota */
} dl_job;

static void job_free(dl_job *j)
{
    if (!j)
        return;
    srv_glossary_put(j->glossary);
    free(j->data);
    free(j);
}

/* The run's parsed hook (a document thread): the document translating,
 * its characters billed, its one language (detected over its whole text
 * when not given). */
static srv_err job_parsed(srv_doc_run *run, void *ud, const srv_document *doc, char *source,
                          char *why, size_t whylen)
{
    dl_job *j = ud;
    pthread_mutex_lock(&g_dmu);
    dl_doc *d = doc_find(j->id);
    if (d) {
        d->state = DOC_TRANSLATING;
        d->run = run;
        d->t_jobs = srv_now();
    }
    pthread_mutex_unlock(&g_dmu);
    size_t all = 0;
    for (int k = 0; k < srv_doc_n(doc); k++) {
        size_t len;
        const char *t = srv_doc_seg(doc, k, &len);
        if (srv_doc_keep(doc, k))
            continue;
        all += len + 1;
        j->billed += srv_deepl_chars(t, len);
    }
    if (!j->src[0]) { /* one language, detected over the whole text */
        char *joined = malloc(all + 1);
        size_t at = 0;
        for (int k = 0; joined && k < srv_doc_n(doc); k++) {
            size_t len;
            const char *t = srv_doc_seg(doc, k, &len);
            if (srv_doc_keep(doc, k))
                continue;
            memcpy(joined + at, t, len);
            at += len;
            joined[at++] = '\n';
        }
        int drc = joined ? (joined[at] = 0, srv_deepl_detect(j->s, joined, at, j->tgt, j->src,
                                                             sizeof j->src))
                         : -2;
        free(joined);
        if (drc != 0) {
            j->src[0] = 0;
            snprintf(why, whylen, "%s",
                     drc == -2 ? "out of memory" : "Value for 'target_lang' not supported.");
            return drc == -2 ? SRV_ERR_NOMEM : SRV_ERR_INVALID;
        }
    }
    snprintf(source, 16, "%s", j->src);
    if (srv_deepl_usage_take(j->s, j->billed) != 0) {
        j->billed = 0;
        snprintf(why, whylen, "Quota exceeded. The character limit has been reached.");
        return SRV_ERR_BUSY;
    }
    return SRV_OK;
}

/* A run's failure (e at res->stage) as DeepL's message (n bytes). */
static void job_message(const dl_job *j, srv_model *sm, srv_err e, const srv_doc_result *res,
                        char *msg, size_t n)
{
    const char *why = res->why[0] ? res->why : "out of memory";
    switch (res->stage) {
    case SRV_DOC_AT_WAIT:
        if (res->dropped == SRV_DOC_TIMEOUT)
            snprintf(msg, n, "The document waited longer than %d s.", j->s->o.file_timeout_s);
        else
            snprintf(msg, n, "The server shut down before the document was translated.");
        return;
    case SRV_DOC_AT_PARSE:
        snprintf(msg, n, "Invalid file data: %s", why);
        return;
    case SRV_DOC_AT_TEXTS:
        snprintf(msg, n, "The document has %d texts to translate; the limit is %d.", res->n_texts,
                 j->s->o.max_file_texts);
        return;
    case SRV_DOC_AT_MODEL:
        snprintf(msg, n, "No model translates %s into %s.", res->source, j->tgt);
        return;
    case SRV_DOC_AT_JOBS:
        srv_api_pipe_message(e, &res->fail, res->fail.text, 1, msg, n);
        return;
    case SRV_DOC_AT_SUBMIT:
        if (res->submit == SRV_SUBMIT_RETIRED)
            srv_api_job_message(0, SRV_JOB_RETIRED, NULL, j->s->o.file_timeout_s,
                                sm ? sm->name : "", msg, n);
        else
            snprintf(msg, n, "%s", res->submit == SRV_SUBMIT_FULL
                                       ? "the queue is full; retry later"
                                       : "the server is shutting down");
        return;
    case SRV_DOC_AT_RUN:
        srv_api_job_message(0, res->job, res->why, j->s->o.file_timeout_s, sm ? sm->name : "",
                            msg, n);
        return;
    default: /* the language or the quota (the hook's), the device, the glossary, the render */
        snprintf(msg, n, "%s", why);
        return;
    }
}

/* The run's done (a document or scheduler thread): the translated file
 * into the store and the document done, or its error (its characters
 * given back); the run and the document's state freed. */
static void job_done(srv_doc_run *run, void *ud)
{
    dl_job *j = ud;
    srv_doc_result *res;
    srv_err e = srv_doc_run_result(run, &res);
    srv_model *sm = srv_doc_run_take_model(run);
    char msg[640]; /* the table keeps its first 199 bytes */
    int stored = 0;
    if (e == SRV_OK) {
        char *out = res->data;
        res->data = NULL; /* the store's */
        stored = srv_files_put(j->s->libre, j->name, out, res->len, j->ctype) == 0;
        if (!stored)
            snprintf(msg, sizeof msg,
                     "The translated document (%zu bytes) does not fit the file store "
                     "(--max-files-bytes %ld).",
                     res->len, j->s->api->max_files_bytes);
    } else {
        job_message(j, sm, e, res, msg, sizeof msg);
    }
    srv_model_put(sm);
    if (!stored && j->billed)
        srv_deepl_usage_give_back(j->billed);
    doc_set(j->s, j->id, stored ? DOC_DONE : DOC_ERROR, stored ? j->billed : 0,
            stored ? NULL : msg);
    srv_doc_run_free(run);
    job_free(j);
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

/* The upload's checks: its name (the field filename, else the part's), its
 * format (the documents table, documents.h), output_format (the same),
 * UTF-8 for a text format. Its format's row, or NULL with the error. */
static const srv_doc_format *upload_ok(srv_req *r, json_t *f, const srv_form_file *file,
                                       dl_req *d)
{
    const char *fname, *outfmt;
    if (srv_deepl_field_str(r, f, "filename", &fname) || srv_deepl_field_str(r, f, "output_format", &outfmt))
        return NULL;
    if (!file->present) {
        dl_error(r, 400, "Parameter 'file' not specified.");
        return NULL;
    }
    if (!fname || !*fname)
        fname = file->name;
    if (!fname || !*fname) {
        dl_error(r, 400, "Parameter 'filename' not specified.");
        return NULL;
    }
    snprintf(d->upload_name, sizeof d->upload_name, "%s", fname);
    const char *ext = srv_files_ext(d->upload_name);
    const srv_doc_format *fmt = srv_doc_format_of(ext);
    if (!fmt) {
        dl_error(r, 400, "Invalid file data: the format %s is not supported.",
                 ext[0] ? ext : "(no extension)");
        return NULL;
    }
    if (outfmt && *outfmt && (!ext[0] || strcasecmp(outfmt, ext + 1) != 0)) {
        dl_error(r, 400, "Conversion between different document formats is not supported.");
        return NULL;
    }
    /* a zip archive is bytes; a gettext catalogue in the charset its
     * header names (po.h); every other text format UTF-8 */
    json_t *chk = fmt->binary ? json_true() : json_stringn(file->data, file->len);
    if (!chk) {
        dl_error(r, 400, "Invalid file data: the file is not valid UTF-8.");
        return NULL;
    }
    json_decref(chk);
    return fmt;
}

/* The document of an upload: its name in the store, a copy of its bytes,
 * its glossary. NULL with the error recorded. */
static dl_job *job_new(srv_req *r, const dl_req *up, const srv_doc_format *fmt,
                       const srv_form_file *file)
{
    dl_job *j = calloc(1, sizeof *j);
    char *data = j ? malloc(file->len + 1) : NULL;
    if (!data) {
        free(j);
        dl_error(r, 500, "out of memory");
        return NULL;
    }
    memcpy(data, file->data, file->len);
    data[file->len] = 0;
    j->s = r->s;
    j->data = data;
    j->len = file->len;
    memcpy(j->upload_name, up->upload_name, sizeof j->upload_name);
    memcpy(j->src, up->src, sizeof j->src);
    memcpy(j->tgt, up->tgt, sizeof j->tgt);
    const char *ext = srv_files_ext(j->upload_name);
    j->ctype = srv_doc_ctype(fmt, ext);
    if (up->glossary_id) /* checked by srv_deepl_glossary_ok: there unless deleted since */
        (void)srv_glossaries_get(r->s->glossaries, up->glossary_id, &j->glossary, NULL, 0);
    char safe[80];
    if (srv_files_new_name(j->upload_name, fmt->own_ext ? ext : ".txt", safe, sizeof safe,
                           j->name, sizeof j->name) != 0) {
        dl_error(r, 500, "no randomness for the document's id");
        job_free(j);
        return NULL;
    }
    memcpy(j->id, j->name, 32);
    j->id[32] = 0;
    return j;
}

/* POST /v2/document: the upload checked, its document in the table, its
 * run started; answered with its id and key. */
static void document_upload(srv_req *r, json_t *f, const srv_form_file *file)
{
    dl_req *up = r->state;
    const srv_doc_format *fmt;
    if (srv_deepl_langs(r, f, up->src, up->tgt) || !srv_deepl_formality_ok(r, f) ||
        !srv_deepl_glossary_ok(r, up, f, up->src) || !(fmt = upload_ok(r, f, file, up)))
        return;
    if (srv_deepl_usage_spent(r->s)) {
        dl_error(r, 456, "Quota exceeded. The character limit has been reached.");
        return;
    }
    dl_job *j = job_new(r, up, fmt, file);
    if (!j)
        return;
    char key[65];
    if (random_hex(key, 32) != 0) {
        dl_error(r, 500, "no randomness for the document's id");
        job_free(j);
        return;
    }
    pthread_mutex_lock(&g_dmu);
    dl_doc *slot = doc_slot();
    if (slot) {
        *slot = (dl_doc){.state = DOC_QUEUED};
        memcpy(slot->id, j->id, sizeof slot->id);
        memcpy(slot->key, key, sizeof slot->key);
        memcpy(slot->name, j->name, sizeof slot->name);
    }
    pthread_mutex_unlock(&g_dmu);
    if (!slot) {
        dl_error(r, 429, "Too many requests: %d documents are being translated.", DL_DOCS);
        job_free(j);
        return;
    }
    /* once started, the document is its run's (it may be done and freed
     * before this answer): its id copied first */
    char id[33], why[256];
    memcpy(id, j->id, sizeof id);
    const srv_doc_request q = {.data = j->data, .len = j->len, .ext = srv_files_ext(j->upload_name),
                               .source = "auto", .target = j->tgt, .glossary = j->glossary,
                               .owner = srv_api_owner(r), .parsed = job_parsed};
    srv_doc_run *run;
    srv_err e = srv_doc_start(r->s, &q, job_done, j, &run, why, sizeof why);
    if (e != SRV_OK) {
        /* the refusal is the upload's answer; its document never was */
        if (e == SRV_ERR_BUSY) {
            dl_error(r, 429, "Too many requests: the document queue is full (--document-queue %d).",
                     r->s->o.document_queue);
            srv_req_header(r, "Retry-After", "1");
        } else {
            dl_error(r, 503, "The server is shutting down.");
        }
        job_free(j);
        doc_set(r->s, id, DOC_FREE, 0, NULL);
        return;
    }
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
