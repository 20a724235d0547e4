/*
 * request.h - what every API file shares: the API's state of one call
 * (srv_req, in the call's arena: the call of transport/call.h is its
 * HTTP side), a route of the route table (routes.h), and the answers every
 * dialect gives (a JSON body, the error object of docs/api.md in the
 * dialect's shape).
 *
 * Promise: every error is docs/api.md's error object with a non-200 status
 * (LibreTranslate's routes: {"error": message}); nothing a client sends
 * touches shared state: each request gets its own copy of the model's
 * default decoding options.
 *
 * Threads: a srv_req belongs to the HTTP thread that runs its handler;
 * while its jobs are queued only the job completion (translate.h) touches
 * it, from a scheduler thread, and only the job it is given.
 */
#ifndef SRV_REQUEST_H
#define SRV_REQUEST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "batcher.h"
#include "call.h"
#include "glossary.h"
#include "metrics.h"
#include "pipeline.h"
#include "segment.h"
#include "state.h"
#include "translator.h"

typedef struct srv_req srv_req;

/* format=html answers of the LibreTranslate endpoints (--libre-html-answer). */
typedef enum srv_html_answer {
    SRV_HTML_ESCAPED = 0, /* the HTML as serialized: &lt;script&gt; stays text */
    SRV_HTML_UNESCAPED,   /* through html.unescape, as LibreTranslate 1.x: live markup */
} srv_html_answer;

/* The API's options of `transformerd serve` (serve.c parses them beside
 * the service's, state.h, and the transport's, transport/http.h); the
 * server's api points at them (srv_server.api). */
typedef struct srv_api_opts {
    const char *api_key;      /* NULL or "" = no key */
    int max_batch_texts;      /* texts per request */
    long max_file_bytes;      /* --max-file-bytes: a /translate_file upload's body */
    long max_response_bytes;  /* estimated response of one request (reqlimits.h) */
    srv_html_answer libre_html; /* --libre-html-answer: escaped (default) | unescaped */
    long max_files_bytes;     /* translated files kept for /download_file, in all */
    int file_ttl_s;           /* how long a translated file is kept */
    const char *replica_id;   /* --replica-id: this replica's name behind a balancer
                                 (download links, request ids); NULL/"": none */
    int deepl_char_limit;     /* --deepl-character-limit: characters the DeepL API
                                 translates before 456 (0: no limit) */
} srv_api_opts;

/* ---- a route -------------------------------------------------------------- */

/* The API's endpoints, for a dialect that serves several from one handler
 * (libre.c's) to tell them apart. The metrics label is the row's own
 * (srv_route.label), not this. */
typedef enum srv_endpoint {
    SRV_EP_TRANSLATE = 0,  /* POST /v1/translate */
    SRV_EP_LIBRE,          /* POST /translate */
    SRV_EP_LANGUAGES,      /* GET /languages */
    SRV_EP_MODELS,         /* GET /v1/models; POST /v1/models (a load) */
    SRV_EP_LIVE,           /* /health/live, /v2/health/live */
    SRV_EP_READY,          /* /health/ready, /v2/health/ready */
    SRV_EP_METRICS,
    SRV_EP_OPENAPI,
    SRV_EP_WEB,            /* the page: / and /web/NAME */
    SRV_EP_DETECT,         /* POST /detect (LibreTranslate, as the rest) */
    SRV_EP_TRANSLATE_FILE, /* POST /translate_file */
    SRV_EP_DOWNLOAD,       /* GET /download_file/NAME */
    SRV_EP_SUGGEST,        /* POST /suggest */
    SRV_EP_SETTINGS,       /* GET /frontend/settings */
    SRV_EP_HEALTH,         /* GET /health */
    SRV_EP_VERSION,        /* GET /version */
    SRV_EP_MODEL_ADMIN,    /* DELETE /v1/models/NAME, POST /v1/models/NAME/reload */
    SRV_EP_GLOSSARIES,     /* /v2/glossaries..., /v3/glossaries..., /v2/glossary-language-pairs */
    SRV_EP_DEEPL_TRANSLATE, /* POST /v2/translate (DeepL's API, as the rest) */
    SRV_EP_DEEPL_LANGUAGES, /* /v2/languages */
    SRV_EP_DEEPL_USAGE,     /* /v2/usage */
    SRV_EP_DEEPL_DOCUMENT,  /* /v2/document, /v2/document/ID[/result] */
    SRV_EP_UNKNOWN,        /* 404s */
} srv_endpoint;

/* A row of the route table: {method, path pattern, handler}. method is
 * "GET" (HEAD too), "POST", "PUT", "PATCH" or "DELETE"; path is exact or holds one '*' (a
 * non-empty run of any characters). A path's rows are those of the first
 * pattern that matches it; their methods make the Allow header. */
typedef struct srv_route {
    const char *method;
    const char *path;
    srv_endpoint ep;    /* which endpoint, for its dialect */
    unsigned flags;     /* SRV_ROUTE_* */
    /* exactly one of answer and body: */
    void (*answer)(srv_req *r);         /* answers at the head, the body unread */
    srv_call_next (*body)(srv_req *r);  /* the body is in: answers, or hands work out
                                           (SRV_NEXT_PENDING) */
    srv_call_next (*respond)(srv_req *r); /* the work handed out finished: answers, or
                                             hands the next step out (SRV_NEXT_PENDING) */
    const char *label;  /* the metrics' label of its requests (metrics.h): the path, or
                           what a pattern's paths count as ("/v1/models/{name}") */
} srv_route;

#define SRV_ROUTE_LIBRE 1u    /* LibreTranslate's: {"error": msg}, a body of any type */
#define SRV_ROUTE_SERVING 2u  /* refused (503) while the models load or the daemon drains */
#define SRV_ROUTE_KEY 4u      /* the API key from the headers, checked at the head (401) */
#define SRV_ROUTE_ANY_BODY 8u /* no 415 for a body that is not JSON */
#define SRV_ROUTE_FILE 16u    /* an uploaded file: the file limits (--max-file-bytes,
                               * --file-timeout-s) instead of the request's */
#define SRV_ROUTE_MESSAGE 32u /* errors as {"message": msg} (DeepL's shape) */

/* A dialect's static rows into out (up to max): returns n, the rows it has
 * (its srv_X_routes, which routes.c calls twice: to count, to fill). */
int srv_routes_copy(const srv_route *rows, int n, srv_route *out, int max);

/* ---- one request ---------------------------------------------------------- */

struct srv_req {
    srv_server *s;
    srv_call *call;          /* the HTTP side: what came in, the answer going out */
    const srv_route *route;  /* NULL before routing (and for a path with none) */
    srv_endpoint ep;
    const char *path;        /* the call's, for short */
    const char *host;
    const char *query;
    char *body;              /* the complete body (the endpoints may modify it in place) */
    size_t body_len;
    /* a translation */
    srv_model *model;        /* routed to, with the request's reference (models.h) */
    /* the texts through the text pipeline (pipeline.h): their sentences,
     * jobs (one per text or sentence that runs, in input order), unknown
     * symbols and results; in the call's arena */
    srv_pipe pipe;
    int no_split;            /* native "split_sentences": false: every text one job */
    size_t **src_offsets;    /* per job with return_tokens: [start, end) in characters
                                of each source token, owned */
    size_t *text_chars;      /* per text with return_tokens: its length in characters
                                (the span of an empty text's </s>), owned */
    td_decode_opts opts;     /* this request's own copy of the defaults */
    int *attn_layers, *attn_heads;
    int return_tokens, return_attention;
    /* the languages the request was routed by, as the client wrote them
     * ("" when not named): a multilingual model (srv_model.n_langs) needs
     * both; its jobs start with the source's token and force the
     * target's (lang_prefix, r->opts.prefix) */
    char src_lang[16], tgt_lang[16];
    int32_t lang_prefix[1];
    /* a glossary the request applies (srv_api_use_glossary): its reference
     * and the field that named it; its dictionary for the request's pair
     * and the terms found go to the pipeline (pipe.gloss_dict, pipe.gloss) */
    srv_glossary *glossary;
    const char *gloss_param;
    /* the dialect's own state behind one pointer (LibreTranslate's items and
     * segments, a model operation), freed by dialect_free with the request */
    void *state;
    void (*dialect_free)(srv_req *r);
    long tokens_out;
    /* a document's jobs and their tokens (service/docrun.h: not this
     * request's pipe), for the access log */
    int doc_jobs;
    long doc_tokens_in;
    /* a streamed answer (docs/api.md, "Streaming"): its framing, whether it
     * is out (errors become an event), and each finished job's event
     * (called on the scheduler thread that finished it: no arena there) */
    int stream;       /* SRV_STREAM_* */
    int stream_live;
    int *job_text, *job_sent; /* per job: its text and its sentence in it */
    void (*job_event)(srv_req *r, const srv_job *j);
    srv_req *parent; /* a part of parent (native.c: texts routed each by its language) */
    int *text_index; /* a part's: each of its texts' index in the request (errors name it) */
};

#define SRV_STREAM_NONE 0
#define SRV_STREAM_SSE 1    /* text/event-stream: "event: NAME\ndata: JSON\n\n" */
#define SRV_STREAM_NDJSON 2 /* application/x-ndjson: {"event":NAME,"data":JSON}\n */

/* Records body (taken, malloc'd and NUL-terminated; NULL when out of
 * memory: a 500) as a JSON answer with status. */
void srv_req_json(srv_req *r, int status, char *body);

/* The same with another Content-Type and len bytes (body holds len + 1). */
void srv_req_reply(srv_req *r, int status, const char *ctype, char *body, size_t len);

/* Records o (taken) as the JSON answer with status; a 500 when out of
 * memory. */
void srv_req_object(srv_req *r, int status, json_t *o);

/* Records an error object {"error":{code,message,param}} (a LibreTranslate
 * route: {"error":message}; a SRV_ROUTE_MESSAGE one: {"message":message}) as
 * the answer, with WWW-Authenticate for a
 * 401; out of memory makes it a 500, never a 200. Once a streamed answer is
 * out (r->stream_live) the object is its last event, "error". */
void srv_req_error(srv_req *r, int status, const char *code, const char *param,
                   const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* The HTTP status of a service error kind (errors.h), as every dialect
 * answers it unless it says otherwise: SRV_OK 200, SRV_ERR_INVALID 400,
 * NOT_FOUND 404, CONFLICT 409, TOO_LONG / TOO_MANY / UNUSABLE 422, BUSY
 * 429, NOMEM and INTERNAL 500, UNAVAILABLE 503, NO_ROOM 507. */
int srv_req_status(srv_err e);

/* Replaces in place every byte of s that is not part of a well-formed
 * UTF-8 sequence with '?' (a message quoting client input, made a JSON
 * string). */
void srv_utf8_sanitize(char *s);

/* count x size zeroed bytes in the call's arena, freed with the call (NULL
 * when out of memory or on overflow; 0 items are 1). Everything a request
 * holds lives there but what other modules hand it (token ids, results). */
void *srv_req_alloc(const srv_req *r, size_t count, size_t size);

/* One event of a streamed answer (any thread): name and its JSON object
 * (compact, one line), framed as r->stream says. 0, or -1 when the client
 * left or out of memory. */
int srv_req_event(srv_req *r, const char *name, const char *json);

/* The request's whole deadline in seconds after its head: its route's
 * (an uploaded file's --file-timeout-s), else --request-timeout-s. */
int srv_req_timeout_s(const srv_req *r);

/* Adds a header to the answer (after srv_req_json/error, which start it). */
void srv_req_header(srv_req *r, const char *name, const char *value);

/* The body as a JSON object (duplicate keys refused, NUL allowed in
 * strings), or NULL with a 400 recorded. */
json_t *srv_req_json_body(srv_req *r);

/* An optional string field without NUL, or NULL; 1 with a 400 recorded when
 * it is something else. */
int srv_req_opt_string(srv_req *r, json_t *root, const char *key, const char **out);

/* Frees what r owns (jobs and their results, token ids, the dialect's
 * state) and drops its model reference; the call's arena holds r itself. */
void srv_req_free(srv_req *r);

/* 1 when the server has no API key or given matches it; constant time in
 * the key's content. */
int srv_api_key_ok(const srv_server *s, const char *given);

#endif /* SRV_REQUEST_H */
