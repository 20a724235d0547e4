/*
 * fuzz_request.c - the daemon's request parsers (server/api/native.c,
 * libre.c, translate.c, reqlimits.c) on arbitrary bodies, without a socket: POST /v1/translate's
 * JSON, LibreTranslate's /translate, /translate_file and /detect as JSON,
 * urlencoded forms or multipart/form-data, with the test model loaded (its
 * tokenizer turns the texts into jobs; nothing is decoded).
 *
 * Input: byte 0 picks the endpoint (low 2 bits) and the Content-Type (next
 * 2 bits: JSON, form, multipart with the boundary "XyZ", or a Content-Type
 * read from the input up to its first '\n'); the rest is the body.
 *
 * Invariants (docs/api.md, "Errors"): client input never gets a 5xx (but
 * the 503 of a file handed to the documents' entry point, which runs on
 * document threads this program does not make); an
 * error's body is JSON: {"error":{"code":S,"message":S,"param":S|null}} on
 * the native endpoint, {"error":S} on LibreTranslate's; a request accepted
 * for translation (1) has 1..max_batch_texts texts mapped to jobs whose
 * sources hold 1..max_input_tokens ids in the vocabulary, options that pass
 * td_decode_opts_check, and an estimate within --max-response-bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "languages.h"
#include "libre.h"
#include "native.h"
#include "models.h"
#include "reqlimits.h"
#include "routes.h"
#include "state.h"
#include "tokenizer.h"

static srv_server g_s;
static srv_api *g_api;
static srv_model *g_mp; /* the set's; heap, as srv_models_free frees it */
#define g_m (*g_mp)

static void die(const char *what, const char *err)
{
    fprintf(stderr, "fuzz_request: %s: %s\n", what, err);
    abort();
}

static void setup(void)
{
    static char err[512];
    const char *dir = TD_TEST_DATA "/text/marian_en_de";
    srv_opts *o = &g_s.o;
    static srv_api_opts api; /* the API's part of the options */
    g_s.api = &api;
    o->model_dir = dir;
    api.max_batch_texts = 64;
    api.max_response_bytes = 1L << 20; /* small: the limit is reached often */
    api.max_files_bytes = 1L << 20;
    api.file_ttl_s = 60;
    o->max_queue = 1024;
    o->request_timeout_s = 60;
    o->textcat_dir = TD_TEXTCAT_DIR;
    g_mp = calloc(1, sizeof *g_mp);
    if (!g_mp)
        die("model", "out of memory");
    td_load_opts lo = {.n_threads = 1, .dtype = "auto", .precision = "full"};
    if (td_model_load(&g_m.m, dir, &lo, err, sizeof err) != 0)
        die("model", err);
    if (td_model_tokenizer_load(g_m.m, dir, &g_m.tok, err, sizeof err) != 0)
        die("tokenizer", err);
    snprintf(g_m.name, sizeof g_m.name, "marian_en_de");
    snprintf(g_m.src_lang, sizeof g_m.src_lang, "en");
    snprintf(g_m.tgt_lang, sizeof g_m.tgt_lang, "de");
    td_decode_opts_default(g_m.m, &g_m.defaults);
    g_m.defaults.num_hypotheses = 1;
    g_m.max_beam = 8;
    g_m.max_input_tokens = td_model_config(g_m.m)->max_position_embeddings;
    g_m.max_length = td_generated_cap(td_model_config(g_m.m));
    g_s.models = srv_models_new(&g_s);
    if (!g_s.models || srv_models_adopt(g_s.models, &g_m) != 0)
        abort();
    g_s.langid = srv_detector_new(&g_s, err, sizeof err);
    if (!g_s.langid)
        die("languages", err);
    g_s.libre = srv_libre_new(&g_s, err, sizeof err);
    if (!g_s.libre)
        die("libre", err);
    g_api = srv_api_new(&g_s, err, sizeof err);
    if (!g_api)
        die("api", err);
    atomic_store(&g_s.ready, 1);
}

/* The body of an error response is the endpoint's error object. */
static void check_error(const srv_req *r)
{
    json_error_t je;
    const char *resp = r->call->reply;
    json_t *j = json_loadb(resp, r->call->reply_len, 0, &je);
    if (!j || !json_is_object(j))
        die("error body is not a JSON object", resp ? resp : "(null)");
    json_t *e = json_object_get(j, "error");
    if (r->route->flags & SRV_ROUTE_LIBRE) {
        if (!json_is_string(e))
            die("LibreTranslate error without an \"error\" string", resp);
    } else {
        json_t *param = json_object_get(e, "param");
        if (!json_is_object(e) || !json_is_string(json_object_get(e, "code")) ||
            !json_is_string(json_object_get(e, "message")) || !param ||
            !(json_is_string(param) || json_is_null(param)))
            die("malformed error object", resp);
    }
    json_decref(j);
}

/* A request accepted for translation: its jobs and options are sane. */
static void check_jobs(srv_req *r)
{
    /* a text of several sentences has a job per sentence (at most
     * --max-queue jobs in all); a translated file's lines are its texts,
     * not bounded by --max-batch-texts */
    if (r->pipe.n_texts < 1 || r->pipe.n_texts > (1 << 20) || r->pipe.n_jobs < 1 ||
        r->pipe.n_jobs > g_s.o.max_queue || (!r->pipe.split && r->pipe.n_jobs > r->pipe.n_texts))
        die("accepted", "bad text or job count");
    int vocab = td_model_config(g_m.m)->vocab_size;
    for (int i = 0; i < r->pipe.n_texts; i++)
        if (r->pipe.text_job[i] < -1 || r->pipe.text_job[i] >= r->pipe.n_jobs)
            die("accepted", "text_job out of range");
    for (int k = 0; k < r->pipe.n_jobs; k++) {
        const srv_job *j = &r->pipe.jobs[k];
        if (j->n_src < 1 || j->n_src > g_m.max_input_tokens)
            die("accepted", "source length out of range");
        for (int t = 0; t < j->n_src; t++)
            if (j->src[t] < 0 || j->src[t] >= vocab)
                die("accepted", "source id outside the vocabulary");
        if (j->opts != &r->opts)
            die("accepted", "a job without the request's options");
    }
    td_decode_limits lim = {.max_beam = g_m.max_beam, .max_length = g_m.max_length};
    char msg[256];
    if (td_decode_opts_check(td_model_config(g_m.m), &lim, &r->opts, NULL, msg, sizeof msg))
        die("accepted options fail the engine's check", msg);
    srv_cost c;
    const srv_limit_fields f = {NULL, "", "", r->ep != SRV_EP_TRANSLATE};
    srv_cost_estimate(r, &f, &c);
    if (!(c.resp_bytes <= (double)g_s.api->max_response_bytes))
        die("accepted", "estimate over --max-response-bytes");
}

static const char *const k_paths[4] = {"/v1/translate", "/translate", "/translate_file",
                                       "/detect"};

/* The call's headers: its Content-Type only. */
static const char *g_ctype;
static const char *fuzz_header(const srv_call *c, const char *name)
{
    (void)c;
    return !strcasecmp(name, "Content-Type") ? g_ctype : NULL;
}
static const srv_call_io k_io = {fuzz_header, NULL, NULL, NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_s.models)
        setup();
    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    data++;
    size--;
    char ctype[256];
    switch ((sel >> 2) & 3) {
    case 0:
        snprintf(ctype, sizeof ctype, "application/json");
        break;
    case 1:
        snprintf(ctype, sizeof ctype, "application/x-www-form-urlencoded");
        break;
    case 2:
        snprintf(ctype, sizeof ctype, "multipart/form-data; boundary=XyZ");
        break;
    default: {
        const uint8_t *nl = memchr(data, '\n', size < 200 ? size : 200);
        size_t n = nl ? (size_t)(nl - data) : 0;
        memcpy(ctype, data, n);
        ctype[n] = 0;
        if (nl) {
            data += n + 1;
            size -= n + 1;
        }
    }
    }
    g_ctype = ctype;
    srv_call call;
    memset(&call, 0, sizeof call);
    call.method = "POST";
    call.path = k_paths[sel & 3];
    call.client = "-";
    call.io = &k_io;
    srv_req r;
    memset(&r, 0, sizeof r);
    r.s = &g_s;
    r.call = &call;
    r.path = call.path;
    r.route = srv_routes_find(srv_api_routes(g_api), call.path, "POST", NULL, 0);
    if (!r.route)
        die("no route", call.path);
    r.ep = r.route->ep;
    r.body = malloc(size + 1); /* the HTTP layer's buffer: NUL-terminated */
    memcpy(r.body, data, size);
    r.body[size] = 0;
    r.body_len = size;
    int rc = r.ep == SRV_EP_TRANSLATE ? srv_native_parse(&r) : srv_libre_parse(&r);
    if (rc == 1) {
        if (call.status)
            die("accepted", "an answer was recorded too");
        check_jobs(&r);
    } else {
        if (!call.reply || call.status < 200)
            die("refused without a response", ctype);
        /* a file that passed every check of the API's is handed to the
         * documents' entry point (server/service/docrun.c), which this
         * program runs without document threads: it answers 503 then, and
         * the documents' readers have fuzz targets of their own */
        const int handed = call.status == 503 && r.ep == SRV_EP_TRANSLATE_FILE && !g_s.docs;
        if (call.status >= 500 && !handed) {
            fprintf(stderr, "status %d: %.*s\n", call.status, (int)call.reply_len, call.reply);
            die("a 5xx for client input", "");
        }
        if (call.status >= 400)
            check_error(&r);
    }
    srv_req_free(&r);
    free(call.reply);
    srv_call_free_arena(&call);
    free(r.body);
    return 0;
}
