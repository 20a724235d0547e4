/*
 * libre.c - the LibreTranslate API (libre.h).
 *
 * A request's body becomes one JSON object of fields whatever its type:
 * JSON as sent; application/x-www-form-urlencoded and multipart/form-data
 * as strings (a repeated key becomes a list, as Flask's getlist would
 * give), each checked to be UTF-8 after decoding (400 naming the field);
 * multipart's file part is kept aside (name and bytes). Any other type is
 * no fields at all, as Flask's request.values would be.
 *
 * /translate then turns q into items (one per text) and the items into
 * segments (the text itself, or the text nodes of the HTML); the segments
 * that need the model become the request's texts (srv_api_make_jobs), the
 * others (source = target) are copied. Once the jobs finished,
 * libre_answer writes the translations back into the items and answers.
 * /translate_file's upload goes through the documents' entry point
 * (service/docrun.h) with the call held; once its run is done, the
 * translated file goes to the in-memory store and its URL is answered (a
 * failure as LibreTranslate's error).
 *
 * Checks follow LibreTranslate's order: the API key, q (or file), source,
 * target, batch limit, languages, format.
 */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "clock.h"
#include "languages.h"
#include "files.h"
#include "form.h"
#include "libre.h"
#include "libre_doc.h"
#include "models.h"
#include "reqlimits.h"
#include "translate.h"

#define DOWNLOAD_PREFIX "/download_file/"

static void libre_answer(srv_req *r);

/* what a request over --max-response-bytes is told to reduce; its
 * documents come back in the answer */
static const srv_limit_fields k_limit_fields = {NULL, "alternatives", "q", 1};

/* A form's q with its line endings made LF (LibreTranslate normalizes them
 * so that limits count the same characters). */
static void normalize_eol(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_string(e) || !memchr(json_string_value(e), '\r', json_string_length(e)))
            continue;
        const char *s = json_string_value(e);
        size_t len = json_string_length(e), k = 0;
        char *t = malloc(len + 1);
        if (!t)
            continue;
        for (size_t j = 0; j < len; j++) {
            if (s[j] == '\r') {
                t[k++] = '\n';
                if (j + 1 < len && s[j + 1] == '\n')
                    j++;
            } else {
                t[k++] = s[j];
            }
        }
        json_string_setn(e, t, k);
        free(t);
    }
}

/* "not x" in Python: absent, null, false, 0, "" or []. */
static int falsy(json_t *v)
{
    return !v || json_is_null(v) || json_is_false(v) ||
           (json_is_string(v) && json_string_length(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0) ||
           (json_is_integer(v) && json_integer_value(v) == 0) ||
           (json_is_object(v) && json_object_size(v) == 0);
}

/* LibreTranslate's access check: 0 to go on, -1 with the error recorded. */
static int access_check(srv_req *r, json_t *fields, const char *auth_key)
{
    const char *k = r->s->api->api_key;
    json_t *ak = json_object_get(fields, "api_key");
    if (ak && !json_is_string(ak) && !json_is_null(ak)) { /* null: as absent, as Flask */
        srv_req_error(r, 400, "invalid_type", "api_key",
                      "Invalid request: api_key must be a string");
        return -1;
    }
    if (!k || !*k)
        return 0;
    const char *given = json_is_string(ak) && json_string_length(ak) ? json_string_value(ak) : NULL;
    /* a key with a NUL in it is never the key (strlen would cut it short) */
    if (given && strlen(given) != json_string_length(ak))
        given = "\x01";
    if ((given && srv_api_key_ok(r->s, given)) || (auth_key && srv_api_key_ok(r->s, auth_key)))
        return 0;
    if (given || auth_key) {
        srv_req_error(r, 403, "forbidden", "api_key", "Invalid API key");
        return -1;
    }
    srv_req_error(r, 400, "invalid_request", "api_key",
                  "Please contact the server operator to get an API key");
    return -1;
}

static int missing(srv_req *r, const char *name)
{
    srv_req_error(r, 400, "invalid_request", name, "Invalid request: missing %s parameter", name);
    return -1;
}

static void libre_req_free(srv_req *r)
{
    srv_libre_req *lr = r->state;
    if (!lr)
        return;
    for (int i = 0; i < lr->n_items; i++)
        srv_html_free(lr->items[i].doc);
    free(lr->items);
    free(lr->segs);
    srv_doc_run_free(lr->run); /* done: the call was held until then */
    json_decref(lr->fields);
    free(lr);
}

/* Fills item it's segments from its text (plain, or the text nodes of its
 * HTML). 0; -1 when out of memory; -2 when its HTML cannot be answered
 * whole (why in err). */
static int item_segments(srv_libre_req *lr, libre_item *it, const char *t, size_t n, char *err,
                         size_t errlen)
{
    it->seg0 = lr->n_segs;
    if (lr->html) {
        int rc = srv_html_parse(t, n, &it->doc, err, errlen);
        if (rc != 0)
            return rc;
        for (int k = 0; k < srv_html_n_segments(it->doc); k++) {
            const char *st = srv_html_segment(it->doc, k);
            if (srv_libre_add_seg(lr, st, strlen(st)) != 0)
                return -1;
        }
    } else if (srv_libre_add_seg(lr, t, n) != 0) {
        return -1;
    }
    it->n_segs = lr->n_segs - it->seg0;
    return 0;
}

/* The text an item's language is detected on: its segments joined. */
static char *item_text(const srv_libre_req *lr, const libre_item *it, size_t *n)
{
    size_t len = 0;
    for (int k = 0; k < it->n_segs; k++)
        len += lr->segs[it->seg0 + k].len + 1;
    char *t = malloc(len + 1), *w = t;
    if (!t)
        return NULL;
    for (int k = 0; k < it->n_segs; k++) {
        const libre_seg *sg = &lr->segs[it->seg0 + k];
        memcpy(w, sg->text, sg->len);
        w += sg->len;
        *w++ = ' ';
    }
    *n = (size_t)(w - t);
    *w = 0;
    return t;
}

/* source=auto: each item's language. LibreTranslate detects a text of more
 * than 40 characters alone and a shorter one with all the texts together
 * (too little to go on otherwise); where our profiles cover the languages
 * (langid.h), a short text is detected alone too, so ["Hello", "Hallo"]
 * are one English and one German text. (A file's language is docrun's.) */
static int detect_items(srv_req *r, srv_libre_req *lr)
{
    const srv_langid *li = r->s->langid;
    int nl = srv_langid_count(li);
    /* among the serving models' languages, sources and targets: a text
     * already in the target language is copied, one in a language no
     * model translates into tgt is refused (LibreTranslate's way) */
    srv_langs L;
    srv_langs_now(r->s, &L);
    const char *const *only = L.codes;
    int n_only = L.n;
    srv_lang_score *sc = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *sc), overall;
    char *all = NULL;
    size_t all_n = 0;
    if (!sc)
        return -1;
    for (int i = 0; i < lr->n_items; i++) {
        size_t n;
        char *t = item_text(lr, &lr->items[i], &n);
        char *p = t ? realloc(all, all_n + n + 1) : NULL;
        if (!p) {
            free(t);
            free(all);
            free(sc);
            return -1;
        }
        all = p;
        memcpy(all + all_n, t, n);
        all_n += n;
        all[all_n] = 0;
        free(t);
    }
    int scored = srv_langid_detect_among(li, all ? all : "", all_n, only, n_only, sc);
    if (scored < 0) {
        free(all);
        free(sc);
        return -1;
    }
    /* no source has a fingerprint: the first source, with no confidence */
    overall = scored > 0 ? sc[0] : (srv_lang_score){.confidence = 0};
    const int alone = srv_langid_profiles_cover(li, only, n_only);
    if (scored == 0)
        snprintf(overall.lang, sizeof overall.lang, "%s", n_only ? only[0] : "und");
    free(all);
    for (int i = 0; i < lr->n_items; i++) {
        libre_item *it = &lr->items[i];
        size_t n;
        char *t = item_text(lr, it, &n);
        if (!t) {
            free(sc);
            return -1;
        }
        /* 40 characters, not bytes */
        size_t chars = 0;
        for (size_t k = 0; k < n; k++)
            chars += ((unsigned char)t[k] & 0xC0) != 0x80;
        srv_lang_score best = overall;
        if ((chars > 40 + 1 /* the joining space */ || alone) && scored > 0) {
            if (srv_langid_detect_among(li, t, n, only, n_only, sc) < 0) {
                free(t);
                free(sc);
                return -1;
            }
            best = sc[0];
        }
        free(t);
        snprintf(it->lang, sizeof it->lang, "%s", best.lang);
        it->confidence = best.confidence;
    }
    free(sc);
    return 0;
}

/* Routes each segment: copied when its source language is the target, else
 * a text for the model from src to tgt. Returns 0, or -1 with a 400. */
static int route_segments(srv_req *r, srv_libre_req *lr, const char *src, const char *tgt,
                          const char ***texts, size_t **lens, int *n)
{
    *texts = malloc((size_t)(lr->n_segs > 0 ? lr->n_segs : 1) * sizeof **texts);
    *lens = malloc((size_t)(lr->n_segs > 0 ? lr->n_segs : 1) * sizeof **lens);
    if (!*texts || !*lens) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return -1;
    }
    *n = 0;
    for (int i = 0; i < lr->n_items; i++) {
        const libre_item *it = &lr->items[i];
        const char *from = lr->autodetect ? it->lang : src;
        if (!srv_lang_same(from, tgt)) {
            srv_model *sm = srv_models_get_pair(r->s->models, from, tgt);
            if (!sm) {
                char pairs[512];
                srv_models_pairs_text(r->s->models, pairs, sizeof pairs);
                srv_req_error(r, 400, "unsupported_language", "target",
                              "%s (%s) is not available as a target language from %s (%s); "
                              "the models: %s",
                              srv_lang_name(tgt), tgt, srv_lang_name(from), from, pairs);
                return -1;
            }
            if (r->model && (r->model != sm || (sm->n_langs && !srv_lang_same(from, r->src_lang)))) {
                srv_model_put(sm);
                srv_req_error(r, 400, "unsupported_language", "source",
                              "Invalid request: texts in several source languages");
                return -1;
            }
            if (r->model) {
                srv_model_put(sm); /* the request holds it already */
            } else {
                r->model = sm;
                snprintf(r->src_lang, sizeof r->src_lang, "%s", from);
                snprintf(r->tgt_lang, sizeof r->tgt_lang, "%s", tgt);
            }
        }
        for (int k = 0; k < it->n_segs; k++) {
            libre_seg *sg = &lr->segs[it->seg0 + k];
            if (!srv_lang_same(from, tgt)) {
                sg->text_idx = *n;
                (*texts)[*n] = sg->text;
                (*lens)[*n] = sg->len;
                (*n)++;
            }
        }
    }
    return 0;
}

/* Submits the request's texts (1), or answers at once when there are
 * none (0), or an error was recorded (0). */
static int make_jobs(srv_req *r, srv_libre_req *lr, const char *src, const char *tgt)
{
    const char **texts = NULL;
    size_t *lens = NULL;
    int n = 0, rc = 0;
    if (route_segments(r, lr, src, tgt, &texts, &lens, &n) != 0)
        goto out;
    if (!r->model) {
        /* nothing for the model: every text is copied */
        r->model = srv_models_get(r->s->models, NULL);
    }
    if (!r->model) {
        srv_req_error(r, 503, "not_ready", NULL, "no model is loaded");
        goto out;
    }
    const char *why = srv_model_failed(r->model);
    if (why) {
        srv_req_error(r, 503, "device_error", NULL, "the model's device failed: %s", why);
        goto out;
    }
    r->opts = r->model->defaults;
    r->opts.num_hypotheses = 1;
    if (lr->alternatives > 0) {
        r->opts.num_hypotheses = lr->alternatives + 1;
        if (r->opts.beam_size < lr->alternatives + 1)
            r->opts.beam_size = lr->alternatives + 1;
    }
    rc = srv_api_make_jobs(r, texts, lens, n, "q");
    if (rc == 1 && !srv_limits_check(r, &k_limit_fields))
        rc = 0;
    if (!rc && r->call->status == 422)
        r->call->status = 400; /* LibreTranslate answers its length limits with 400 */
    if (rc == 1 && r->pipe.n_jobs == 0) {
        libre_answer(r);
        rc = 0;
    }
out:
    free(texts);
    free(lens);
    return rc;
}

static srv_libre_req *new_lr(srv_req *r, json_t *fields)
{
    srv_libre_req *lr = calloc(1, sizeof *lr);
    if (!lr) {
        json_decref(fields);
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return NULL;
    }
    lr->fields = fields;
    r->state = lr;
    r->dialect_free = libre_req_free;
    return lr;
}

/* source and target: present strings, known languages. */
static int get_langs(srv_req *r, json_t *f, int allow_auto, const char **src, const char **tgt)
{
    json_t *sv = json_object_get(f, "source"), *tv = json_object_get(f, "target");
    if (falsy(sv))
        return missing(r, "source");
    if (falsy(tv))
        return missing(r, "target");
    if (!json_is_string(sv) || !json_is_string(tv)) {
        srv_req_error(r, 400, "invalid_request", !json_is_string(sv) ? "source" : "target",
                      "Invalid request: %s must be a string",
                      !json_is_string(sv) ? "source" : "target");
        return -1;
    }
    *src = json_string_value(sv);
    *tgt = json_string_value(tv);
    srv_langs L;
    srv_langs_now(r->s, &L);
    if (!(allow_auto && !strcmp(*src, "auto")) && !srv_langs_has(&L, *src)) {
        srv_req_error(r, 400, "unsupported_language", "source", "%s is not supported", *src);
        return -1;
    }
    if (!srv_langs_has(&L, *tgt)) {
        srv_req_error(r, 400, "unsupported_language", "target", "%s is not supported", *tgt);
        return -1;
    }
    return 0;
}

/* An extension: "glossary", a glossary's id (docs/api.md, "Glossaries");
 * absent, null or "": none. 0, or -1 with a 400 naming it. */
static int libre_glossary(srv_req *r, json_t *f)
{
    json_t *gl = json_object_get(f, "glossary");
    if (!gl || json_is_null(gl) || (json_is_string(gl) && falsy(gl)))
        return 0;
    if (!json_is_string(gl)) {
        srv_req_error(r, 400, "invalid_type", "glossary",
                      "Invalid request: glossary must be a glossary's id");
        return -1;
    }
    return srv_api_use_glossary(r, json_string_value(gl), "glossary");
}

static int parse_translate(srv_req *r, json_t *f, int is_json)
{
    srv_libre_req *lr = r->state;
    json_t *q = json_object_get(f, "q");
    if (falsy(q))
        return missing(r, "q");
    const char *src, *tgt;
    if (get_langs(r, f, 1, &src, &tgt) != 0)
        return -1;
    if (!is_json)
        normalize_eol(f, "q");
    lr->list = json_is_array(q);
    size_t nq = lr->list ? json_array_size(q) : 1;
    if (lr->list && nq > (size_t)r->s->api->max_batch_texts) {
        srv_req_error(r, 400, "out_of_range", "q",
                      "Invalid request: request (%zu) exceeds text limit (%d)", nq,
                      r->s->api->max_batch_texts);
        return -1;
    }
    for (size_t i = 0; i < nq; i++)
        if (!json_is_string(lr->list ? json_array_get(q, i) : q)) {
            srv_req_error(r, 400, "invalid_type", "q",
                          "Invalid request: q must be a string or a list of strings");
            return -1;
        }
    json_t *fmt = json_object_get(f, "format");
    const char *format = !fmt || (json_is_string(fmt) && falsy(fmt))
                             ? "text"
                             : json_is_string(fmt) ? json_string_value(fmt) : "?";
    if (strcmp(format, "text") && strcmp(format, "html")) {
        srv_req_error(r, 400, "unsupported_format", "format", "%s format is not supported",
                      format);
        return -1;
    }
    lr->html = !strcmp(format, "html");
    json_t *alt = json_object_get(f, "alternatives");
    /* absent or null: none; an integer or a numeric string, else 400 */
    if (alt && !json_is_null(alt)) {
        long a = -1;
        if (json_is_integer(alt)) {
            a = json_integer_value(alt) > 1000 ? 1001 : (long)json_integer_value(alt);
        } else if (json_is_string(alt)) {
            char *end;
            const char *sv = json_string_value(alt);
            a = strtol(sv, &end, 10);
            if (end == sv || *end)
                a = -1;
        }
        srv_pair pairs[64];
        int np = srv_models_pairs(r->s->models, pairs, 64), max_beam = TD_MAX_BEAM;
        for (int i = 0; i < np && i < 64; i++)
            if (pairs[i].max_beam < max_beam)
                max_beam = pairs[i].max_beam;
        if (a < 0 || a > max_beam - 1) {
            srv_req_error(r, 400, "out_of_range", "alternatives",
                          "Invalid request: alternatives must be an integer in 0..%d "
                          "(--max-beam %d)",
                          max_beam - 1, max_beam);
            return -1;
        }
        lr->alternatives = (int)a;
    }
    if (libre_glossary(r, f) != 0)
        return -1;
    lr->autodetect = !strcmp(src, "auto");
    lr->items = calloc(nq, sizeof *lr->items);
    if (!lr->items) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return -1;
    }
    lr->n_items = (int)nq;
    for (size_t i = 0; i < nq; i++) {
        json_t *e = lr->list ? json_array_get(q, i) : q;
        char why[256];
        int rc = item_segments(lr, &lr->items[i], json_string_value(e), json_string_length(e),
                               why, sizeof why);
        if (rc == -2) {
            if (lr->list)
                srv_req_error(r, 400, "invalid_html", "q", "Invalid request: q[%zu]: %s", i, why);
            else
                srv_req_error(r, 400, "invalid_html", "q", "Invalid request: q: %s", why);
            return -1;
        }
        if (rc != 0) {
            srv_req_error(r, 500, "internal", NULL, "out of memory");
            return -1;
        }
    }
    if (lr->autodetect && detect_items(r, lr) != 0) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return -1;
    }
    return make_jobs(r, lr, src, tgt) == 1 ? 1 : -1;
}

/* ---- /translate_file: the documents' entry point (service/docrun.h) ------ */

/* The run's done (a document or scheduler thread): the call's hold back,
 * which resumes it; libre_respond answers on its HTTP thread. */
static void file_done(srv_doc_run *run, void *ud)
{
    (void)run;
    srv_req *r = ud;
    srv_call_release(r->call); /* r is touched no more here */
}

/* The run's jobs hook (a document thread): the translated file's
 * estimate held to --max-response-bytes (+ --max-file-bytes), as a text
 * request's answer is (reqlimits.h). */
static srv_err file_jobs(srv_doc_run *run, void *ud, const srv_pipe *p, const td_decode_opts *o,
                         char *why, size_t whylen)
{
    (void)run;
    return srv_limits_file(ud, p, o, why, whylen) == 0 ? SRV_OK : SRV_ERR_TOO_LONG;
}

/* The run's gone hook (any thread): the client left. */
static int file_gone(void *ud)
{
    const srv_req *r = ud;
    return srv_call_client_gone(r->call);
}

static int parse_translate_file(srv_req *r, json_t *f, const srv_form_file *file)
{
    srv_libre_req *lr = r->state;
    if (!file->present)
        return missing(r, "file");
    const char *src, *tgt;
    /* source=auto: the file's language, detected once over all its text
     * (LibreTranslate 1.9's web page sends it by default) */
    if (get_langs(r, f, 1, &src, &tgt) != 0 || libre_glossary(r, f) != 0)
        return -1;
    if (!file->name || !file->name[0]) {
        srv_req_error(r, 400, "invalid_request", "file", "Invalid request: empty file");
        return -1;
    }
    const char *ext = srv_files_ext(file->name);
    const srv_doc_format *fmt = srv_doc_format_of(ext);
    if (!fmt) {
        srv_req_error(r, 400, "invalid_request", "file",
                      "Invalid request: file format not supported");
        return -1;
    }
    /* a zip archive is bytes; a gettext catalogue is in the charset its
     * header names (the helper reads it: po.h); every other text format
     * (.md, .xhtml among them) UTF-8 */
    json_t *chk = fmt->binary ? json_true() : json_stringn(file->data, file->len);
    if (!chk) {
        srv_req_error(r, 400, "invalid_request", "file", "Invalid request: file is not valid UTF-8");
        return -1;
    }
    json_decref(chk);
    lr->is_file = 1;
    lr->autodetect = !strcmp(src, "auto"); /* the answer says the file's language */
    lr->file_ctype = srv_doc_ctype(fmt, ext);
    if (srv_files_new_name(file->name, fmt->own_ext ? ext : ".txt", lr->safe, sizeof lr->safe,
                           lr->file_name, sizeof lr->file_name) != 0) {
        srv_req_error(r, 500, "internal", NULL, "no randomness for the file name");
        return -1;
    }
    /* the upload's bytes and the fields live with the call, held until done */
    const srv_doc_request q = {.data = file->data, .len = file->len, .ext = ext, .source = src,
                               .target = tgt,
                               .overwrite = !falsy(json_object_get(f, "overwrite")),
                               .glossary = r->glossary, .owner = srv_api_owner(r),
                               .deadline = r->call->t0 + srv_req_timeout_s(r), .gone = file_gone,
                               .jobs = file_jobs};
    char why[256];
    srv_call_hold(r->call, 1); /* before it is out: it may be done at once */
    srv_err e = srv_doc_start(r->s, &q, file_done, r, &lr->run, why, sizeof why);
    if (e == SRV_OK)
        return 2;
    srv_call_release(r->call); /* not out: the transport's own hold keeps the call */
    if (e == SRV_ERR_BUSY) {
        srv_req_error(r, 503, "queue_full", NULL,
                      "the document queue is full (--document-queue %d); retry later",
                      r->s->o.document_queue);
        srv_req_header(r, "Retry-After", "1");
    } else if (e == SRV_ERR_UNAVAILABLE) {
        srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
    } else {
        srv_req_error(r, 500, "internal", NULL, "%s", why);
    }
    return -1;
}

static json_t *detections_json(const srv_lang_score *sc, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_pack("{s:f,s:s}", "confidence", sc[i].confidence,
                                           "language", sc[i].lang));
    return a;
}

static void respond_json(srv_req *r, int status, json_t *root)
{
    char *body = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(root);
    if (!body)
        srv_req_error(r, 500, "internal", NULL, "out of memory");
    else
        srv_req_json(r, status, body);
}

static void answer_detect(srv_req *r, json_t *f)
{
    json_t *q = json_object_get(f, "q");
    if (falsy(q)) {
        missing(r, "q");
        return;
    }
    /* a list is detected as one text, as LibreTranslate's detect_languages
     * does with its whole input */
    size_t nq = json_is_array(q) ? json_array_size(q) : 1;
    size_t len = 0;
    for (size_t i = 0; i < nq; i++) {
        json_t *e = json_is_array(q) ? json_array_get(q, i) : q;
        if (!json_is_string(e)) {
            srv_req_error(r, 400, "invalid_type", "q",
                          "Invalid request: q must be a string or a list of strings");
            return;
        }
        len += json_string_length(e) + 1;
    }
    char *t = malloc(len + 1), *w = t;
    const srv_langid *li = r->s->langid;
    int nl = srv_langid_count(li);
    srv_lang_score *sc = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *sc);
    if (!t || !sc) {
        free(t);
        free(sc);
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return;
    }
    for (size_t i = 0; i < nq; i++) {
        json_t *e = json_is_array(q) ? json_array_get(q, i) : q;
        memcpy(w, json_string_value(e), json_string_length(e));
        w += json_string_length(e);
        *w++ = '\n';
    }
    *w = 0;
    /* among the serving models' languages (the detector knows more) */
    srv_langs L;
    srv_langs_now(r->s, &L);
    int n = srv_langid_detect_among(li, t, (size_t)(w - t), L.codes, L.n, sc);
    free(t);
    if (n < 0)
        srv_req_error(r, 500, "internal", NULL, "out of memory");
    else
        respond_json(r, 200, detections_json(sc, n));
    free(sc);
}

int srv_libre_parse(srv_req *r)
{
    if (r->ep == SRV_EP_SUGGEST) {
        srv_req_error(r, 403, "forbidden", NULL, "Suggestions are disabled on this server.");
        return 0;
    }
    const char *ctype = srv_call_header(r->call, "Content-Type");
    const char *auth_key = srv_call_key(r->call);
    srv_form_file file;
    int is_json;
    json_t *f = srv_form_fields(r, ctype, &file, &is_json);
    if (!f)
        return 0;
    srv_libre_req *lr = new_lr(r, f);
    if (!lr)
        return 0;
    if (access_check(r, f, auth_key) != 0)
        return 0;
    /* NUL may be in a text (q), never in the fields compared as C strings */
    static const char *const k_plain[] = {"source", "target", "format", "alternatives"};
    for (size_t i = 0; i < sizeof k_plain / sizeof k_plain[0]; i++) {
        json_t *v = json_object_get(f, k_plain[i]);
        if (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v)) {
            srv_req_error(r, 400, "invalid_request", k_plain[i],
                          "Invalid request: %s contains a NUL character", k_plain[i]);
            return 0;
        }
    }
    switch (r->ep) {
    case SRV_EP_LIBRE:
        return parse_translate(r, f, is_json) == 1;
    case SRV_EP_TRANSLATE_FILE: {
        int rc = parse_translate_file(r, f, &file);
        return rc == 1 || rc == 2 ? rc : 0;
    }
    case SRV_EP_DETECT:
        answer_detect(r, f);
        return 0;
    default:
        srv_req_error(r, 500, "internal", NULL, "unrouted POST");
        return 0;
    }
}

/* ---- responses ----------------------------------------------------------- */

static json_t *take_string(char *t)
{
    json_t *v = t ? json_string(t) : NULL;
    free(t);
    return v;
}

/* take_string of t's html.unescape (srv_html_unescape); frees t. */
static json_t *take_unescaped(char *t)
{
    char *u = t ? srv_html_unescape(t) : NULL;
    free(t);
    return take_string(u);
}

/* A file's failure (srv_doc_run_result: e at res->stage) as LibreTranslate's
 * error. */
static void file_error(srv_req *r, srv_err e, const srv_doc_result *res)
{
    const srv_libre_req *lr = r->state;
    const char *why = res->why[0] ? res->why : "out of memory";
    switch (res->stage) {
    case SRV_DOC_AT_WAIT:
        if (res->dropped == SRV_DOC_TIMEOUT)
            srv_req_error(r, 504, "timeout", NULL,
                          "the request waited longer than %d s and was dropped",
                          srv_req_timeout_s(r));
        else if (res->dropped == SRV_DOC_GONE)
            srv_req_error(r, 503, "client_gone", NULL, "the client closed the connection");
        else
            srv_req_error(r, 503, "draining", NULL,
                          "the server shut down before the request could finish");
        return;
    case SRV_DOC_AT_PARSE:
        if (e == SRV_ERR_INVALID)
            srv_req_error(r, 400, "invalid_request", "file", "Invalid request: %s: %s", lr->safe,
                          res->why);
        else
            srv_req_error(r, 500, "internal", NULL, "%s", why);
        return;
    case SRV_DOC_AT_TEXTS:
        srv_req_error(r, 400, "out_of_range", "file",
                      "Invalid request: the file has %d texts to translate; the limit is %d "
                      "(--max-file-texts)",
                      res->n_texts, r->s->o.max_file_texts);
        return;
    case SRV_DOC_AT_MODEL: {
        const char *tgt = json_string_value(json_object_get(lr->fields, "target"));
        char pairs[512];
        srv_models_pairs_text(r->s->models, pairs, sizeof pairs);
        srv_req_error(r, 400, "unsupported_language", "target",
                      "%s (%s) is not available as a target language from %s (%s); "
                      "the models: %s",
                      srv_lang_name(tgt), tgt, srv_lang_name(res->source), res->source, pairs);
        return;
    }
    case SRV_DOC_AT_DEVICE:
        srv_req_error(r, 503, "device_error", NULL, "%s", why);
        return;
    case SRV_DOC_AT_GLOSSARY:
        srv_req_error(r, 400, "glossary_language_mismatch", r->gloss_param, "%s", why);
        return;
    case SRV_DOC_AT_JOBS:
        srv_api_pipe_error(r, e, &res->fail, "q");
        if (r->call->status == 422)
            r->call->status = 400; /* LibreTranslate answers its length limits with 400 */
        return;
    case SRV_DOC_AT_LIMIT: /* LibreTranslate answers its length limits with 400 */
        srv_req_error(r, 400, "response_too_large", k_limit_fields.texts, "%s", res->why);
        return;
    case SRV_DOC_AT_SUBMIT:
        if (res->submit == SRV_SUBMIT_FULL) {
            srv_req_error(r, 429, "queue_full", NULL, "the queue is full; retry later");
            srv_req_header(r, "Retry-After", "1");
        } else if (res->submit == SRV_SUBMIT_RETIRED) {
            srv_api_model_retired(r);
        } else {
            srv_req_error(r, 503, "draining", NULL, "the server is shutting down");
        }
        return;
    case SRV_DOC_AT_RUN:
        srv_api_job_error(r, 0, res->job, res->why);
        return;
    default: /* the detection, the render: out of memory, or the writer's why */
        srv_req_error(r, 500, "internal", NULL, "%s", why);
        return;
    }
}

/* The file's run done: the translated file into the file store, its URL
 * answered, or the run's failure. */
static void file_answer(srv_req *r)
{
    srv_libre_req *lr = r->state;
    srv_doc_result *res;
    srv_err e = srv_doc_run_result(lr->run, &res);
    /* what the access log says: the pair's model, the jobs */
    r->model = srv_doc_run_take_model(lr->run);
    r->doc_jobs = res->n_jobs;
    r->doc_tokens_in = res->tokens_in;
    r->tokens_out = res->tokens_out;
    if (e != SRV_OK) {
        file_error(r, e, res);
        return;
    }
    char *out = res->data;
    size_t len = res->len;
    res->data = NULL; /* the store's */
    if (srv_files_put(r->s->libre, lr->file_name, out, len, lr->file_ctype) != 0) {
        srv_req_error(r, 500, "internal", NULL,
                      "the translated file (%zu bytes) does not fit the file store "
                      "(--max-files-bytes %ld)",
                      len, r->s->api->max_files_bytes);
        return;
    }
    json_t *root = json_object();
    /* Behind a balancer the link names the replica holding the file
     * (files.h): /download_file/REPLICA/NAME. */
    const char *rid = r->s->api->replica_id ? r->s->api->replica_id : "";
    char *url = malloc(strlen(r->host ? r->host : "localhost") + strlen(rid) +
                       strlen(lr->file_name) + 64);
    if (url)
        sprintf(url, "http://%s/download_file/%s%s%s", r->host ? r->host : "localhost", rid,
                rid[0] ? "/" : "", lr->file_name);
    json_object_set_new(root, "translatedFileUrl", take_string(url));
    if (res->format->counts_kept) /* units left for a person (catalog.h) */
        json_object_set_new(root, "keptUnits", json_integer(res->kept));
    if (res->format->counts_lost) /* formatting, a cue's tags, that found no word (spans.h) */
        json_object_set_new(root, "lostSpans", json_integer(res->lost));
    if (lr->autodetect) /* the file's language, detected once over its text: the
                         * target's when nothing was translated */
        json_object_set_new(root, "detectedLanguage",
                            json_pack("{s:f,s:s}", "confidence", res->confidence, "language",
                                      res->source));
    respond_json(r, 200, root);
}

/* Every job finished (successfully): the 200 answer (or a 500 when out of
 * memory). */
static void libre_answer(srv_req *r)
{
    srv_libre_req *lr = r->state;
    json_t *texts = json_array(), *alts = json_array(), *det = json_array();
    int oom = !texts || !alts || !det;
    /* LibreTranslate answers its texts and alternatives through Python's
     * html.unescape (srv_html_unescape); format=html's only with
     * --libre-html-answer unescaped: its serialized HTML writes a text's
     * '<' as &lt;, which html.unescape would make live markup
     * (docs/decisions.md, "Escaped markup stays escaped") */
    const int escaped = lr->html && r->s->api->libre_html == SRV_HTML_ESCAPED;
    for (int i = 0; !oom && i < lr->n_items; i++) {
        char why[256];
        char *tr = srv_libre_item_translation(r, i, 0, why, sizeof why);
        json_t *v = escaped ? take_string(tr) : take_unescaped(tr);
        oom |= !v || json_array_append_new(texts, v) != 0;
        json_t *a = json_array();
        /* an HTML item may have no text segment (and segs be NULL) */
        const libre_seg *sg = lr->items[i].n_segs > 0 ? &lr->segs[lr->items[i].seg0] : NULL;
        if (a && !lr->html && sg && sg->text_idx >= 0)
            for (int k = 1; k < srv_api_n_hyps(r, sg->text_idx); k++) {
                json_t *h = srv_api_text_value(r, sg->text_idx, k);
                const char *hs = json_string_value(h);
                json_array_append_new(a, hs ? take_unescaped(strdup(hs)) : json_string(""));
                json_decref(h);
            }
        oom |= !a || json_array_append_new(alts, a) != 0;
        json_array_append_new(det, json_pack("{s:f,s:s}", "confidence", lr->items[i].confidence,
                                             "language", lr->items[i].lang));
    }
    json_t *o = json_object();
    if (oom || !o) {
        json_decref(texts);
        json_decref(alts);
        json_decref(det);
        json_decref(o);
        srv_req_error(r, 500, "internal", NULL, "out of memory building the response");
        return;
    }
    if (lr->autodetect)
        json_object_set(o, "detectedLanguage", lr->list ? det : json_array_get(det, 0));
    json_object_set(o, "translatedText", lr->list ? texts : json_array_get(texts, 0));
    if (lr->alternatives > 0)
        json_object_set(o, "alternatives", lr->list ? alts : json_array_get(alts, 0));
    json_decref(texts);
    json_decref(alts);
    json_decref(det);
    long tout = 0;
    for (int i = 0; i < r->pipe.n_jobs; i++)
        tout += r->pipe.jobs[i].res.hyps[0].n_tokens;
    r->tokens_out = tout;
    respond_json(r, 200, o);
}

/* ---- GET endpoints ------------------------------------------------------- */

static void answer_languages(srv_req *r)
{
    srv_langs L;
    srv_langs_now(r->s, &L);
    json_t *list = json_array();
    /* every language, each with the targets a model translates it into
     * (LibreTranslate's shape: a language only ever a target has none) */
    for (int i = 0; list && i < L.n; i++) {
        const char *code = L.codes[i];
        json_t *targets = json_array();
        const char *t[SRV_LANGS_MAX];
        int nt = srv_langs_targets(&L, code, t);
        for (int k = 0; k < nt; k++)
            json_array_append_new(targets, json_string(t[k]));
        json_array_append_new(list, json_pack("{s:s,s:s,s:o}", "code", code, "name",
                                              srv_lang_name(code), "targets", targets));
    }
    respond_json(r, 200, list);
}

static void answer_settings(srv_req *r)
{
    const srv_server *s = r->s;
    int key = s->api->api_key && *s->api->api_key;
    srv_langs L;
    srv_langs_now(s, &L);
    /* a bilingual first model's target, else the first language (a
     * multilingual model's "mul" is no language) */
    const char *tgt = L.np > 0 && !L.p[0].n_langs ? L.p[0].tgt : L.n > 0 ? L.codes[0] : "und";
    /* the documents table's extensions (documents.h) */
    const char *ext[64];
    int n_ext = srv_doc_exts(ext, 64);
    json_t *formats = json_array();
    for (int i = 0; formats && i < n_ext && i < 64; i++)
        json_array_append_new(formats, json_string(ext[i]));
    json_t *o = json_pack(
        "{s:i,s:i,s:b,s:b,s:b,s:b,s:o,s:{s:{s:s,s:s},s:{s:s,s:s}}}", "charLimit", -1,
        "frontendTimeout", 500, "apiKeys", key, "keyRequired", key, "suggestions", 0,
        "filesTranslation", 1, "supportedFilesFormat", formats, "language",
        "source", "code", "auto", "name", "Auto Detect", "target", "code", tgt, "name",
        srv_lang_name(tgt));
    respond_json(r, 200, o);
}

/* The GET endpoints (and POST /languages, answered as a GET). */
static void libre_get(srv_req *r)
{
    if (r->ep == SRV_EP_HEALTH) {
        srv_req_json(r, 200, strdup("{\"status\":\"ok\"}"));
        return;
    }
    if (!atomic_load(&r->s->ready)) {
        srv_req_error(r, 503, "not_ready", NULL, "the model is loading");
        return;
    }
    switch (r->ep) {
    case SRV_EP_LANGUAGES:
        answer_languages(r);
        return;
    case SRV_EP_SETTINGS:
        answer_settings(r);
        return;
    case SRV_EP_DOWNLOAD:
        srv_files_answer_download(r, DOWNLOAD_PREFIX);
        return;
    default:
        srv_req_error(r, 500, "internal", NULL, "unrouted GET");
    }
}

/* The POST endpoints, the body in: an answer, or the jobs (or a file's
 * parse) handed out. */
static srv_call_next libre_body(srv_req *r)
{
    int rc = srv_libre_parse(r);
    return rc == 1 ? srv_api_submit(r) : rc == 2 ? SRV_NEXT_PENDING : SRV_NEXT_ANSWERED;
}

/* The work handed out finished: the jobs' error or answer; a file's run's. */
static srv_call_next libre_respond(srv_req *r)
{
    srv_libre_req *lr = r->state;
    if (lr->is_file)
        file_answer(r);
    else if (!srv_api_jobs_failed(r))
        libre_answer(r);
    return SRV_NEXT_ANSWERED;
}

/* ---- the routes ---------------------------------------------------------- */

#define LIBRE_POST SRV_ROUTE_LIBRE | SRV_ROUTE_SERVING

static const srv_route k_libre_routes[] = {
    {"POST", "/translate", SRV_EP_LIBRE, LIBRE_POST, NULL, libre_body, libre_respond, "/translate"},
    {"POST", "/detect", SRV_EP_DETECT, LIBRE_POST, NULL, libre_body, libre_respond, "/detect"},
    {"GET", "/languages", SRV_EP_LANGUAGES, SRV_ROUTE_LIBRE, libre_get, NULL, NULL, "/languages"},
    /* as libretranslatepy may send it: answered as the GET, the body unread */
    {"POST", "/languages", SRV_EP_LANGUAGES, SRV_ROUTE_LIBRE, libre_get, NULL, NULL, "/languages"},
    {"POST", "/translate_file", SRV_EP_TRANSLATE_FILE, LIBRE_POST | SRV_ROUTE_FILE, NULL, libre_body,
     libre_respond, "/translate_file"},
    {"POST", "/suggest", SRV_EP_SUGGEST, LIBRE_POST, NULL, libre_body, libre_respond, "/suggest"},
    {"GET", "/frontend/settings", SRV_EP_SETTINGS, SRV_ROUTE_LIBRE, libre_get, NULL, NULL, "/frontend/settings"},
    {"GET", "/health", SRV_EP_HEALTH, SRV_ROUTE_LIBRE, libre_get, NULL, NULL, "/health"},
    {"GET", DOWNLOAD_PREFIX "*", SRV_EP_DOWNLOAD, SRV_ROUTE_LIBRE, libre_get, NULL, NULL,
     "/download_file"},
};

int srv_libre_routes(srv_route *out, int max)
{
    return srv_routes_copy(k_libre_routes, (int)(sizeof k_libre_routes / sizeof k_libre_routes[0]), out, max);
}
