/*
 * api.h - the HTTP API's semantics, without the transport: the routes, the
 * request and response JSON of every endpoint (docs/api.md), the error
 * objects, and the jobs a translation request becomes.
 *
 * Promise: every response body the daemon sends is built here, and every
 * error is docs/api.md's error object with a non-200 status. Nothing a
 * client sends touches shared state: each request gets its own copy of the
 * model's default decoding options.
 *
 * Threads: a srv_req belongs to the HTTP thread that runs its handler;
 * while its jobs are queued only srv_api_job_finished touches it, from a
 * scheduler thread, and only the job it is given.
 */
#ifndef SRV_API_H
#define SRV_API_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "batcher.h"
#include "metrics.h"
#include "segment.h"
#include "state.h"
#include "translator.h"

/* ---- routes --------------------------------------------------------------- */

typedef enum srv_method {
    SRV_METHOD_GET = 0, /* GET and HEAD */
    SRV_METHOD_POST,
    SRV_METHOD_GET_POST, /* GET, HEAD and POST (the body is read and ignored) */
    SRV_METHOD_GET_LOAD, /* GET and HEAD list; POST is a run-time load (/v1/models) */
    SRV_METHOD_ADMIN,    /* DELETE /v1/models/NAME; POST /v1/models/NAME/reload */
} srv_method;

typedef struct srv_route {
    const char *path;
    srv_endpoint ep;
    srv_method method;
} srv_route;

/* The route of an exact path (or of /v1/models/NAME[/reload], or a
 * LibreTranslate prefix route), or NULL (404). */
const srv_route *srv_api_route(const char *path);

/* ---- one request ---------------------------------------------------------- */

struct srv_libre_req;

/* A text of more than one sentence (tokenizer/segment.h): each sentence is
 * a job of its own; the answer puts their translations back between the
 * text's own separators. */
typedef struct srv_split {
    int n;                   /* sentences (> 1); 0: the text is one job (or empty) */
    char *text;              /* a copy of the text (its separators), owned */
    size_t len;
    td_sentence *sent;       /* n: bytes of each sentence in text, owned */
    int *job;                /* n: each sentence's job, -1 when empty (not run), owned */
} srv_split;

typedef struct srv_req {
    srv_server *s;
    srv_endpoint ep;
    const char *path;        /* the request's path (the HTTP layer's) */
    const char *host;        /* its Host header, or NULL */
    const char *query;       /* the raw query string (after '?'), or NULL */
    char *body;              /* the complete body, NUL-terminated: the HTTP layer's
                                buffer (the endpoints may modify it in place) */
    size_t body_len;
    /* the response, recorded by srv_req_json / srv_req_error */
    int status;
    char *resp;              /* malloc'd */
    size_t resp_len;
    const char *resp_ctype;
    int retry_after;         /* seconds, 0 = no header */
    const char *allow;       /* 405: the Allow header */
    char *disposition;       /* a Content-Disposition header (malloc'd), or NULL */
    /* a translation */
    srv_model *model;        /* routed to, with the request's reference (models.h) */
    int n_texts;             /* texts of the request, in input order */
    int *text_job;           /* per text: its job, or -1 for an empty text (not run)
                                or a text of several sentences (split[text]) */
    srv_split *split;        /* per text, or NULL when no text was split; owned */
    int no_split;            /* native "split_sentences": false: every text one job */
    srv_job *jobs;           /* one per text (or sentence) that runs, in input order */
    int n_jobs;
    int32_t **src;           /* per job, owned */
    size_t **src_offsets;    /* per job with return_tokens: [start, end) in characters
                                of each source token, owned */
    size_t *text_chars;      /* per text with return_tokens: its length in characters
                                (the span of an empty text's </s>), owned */
    td_decode_opts opts;     /* this request's own copy of the defaults */
    int *attn_layers, *attn_heads;
    int return_tokens, return_attention;
    struct srv_model_op *op; /* a load or reload (models.h), owned */
    int libre;               /* a LibreTranslate translation: libre.c responds */
    struct srv_libre_req *lr; /* LibreTranslate's state (libre.c), owned */
    long tokens_in, tokens_out;
} srv_req;

/* Records body (taken, malloc'd; NULL when out of memory) as a JSON
 * response with status. */
void srv_req_json(srv_req *r, int status, char *body);

/* Records an error object {"error":{code,message,param}} as the response;
 * out of memory makes it a 500, never a 200. */
void srv_req_error(srv_req *r, int status, const char *code, const char *param,
                   const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Frees what r owns (response, jobs and their results, token ids); r
 * itself and its body are the caller's. */
void srv_api_req_free(srv_req *r);

/* ---- endpoints ------------------------------------------------------------ */

/* Answers a GET endpoint (health, readiness, metrics, models, languages,
 * openapi) into r's response. */
void srv_api_get(srv_req *r);

/* POST /v1/translate and POST /translate, once the body is complete: each
 * either records a response and returns 0, or fills r->jobs (validated,
 * tokenized) and returns 1 for the caller to submit them to
 * r->model->b. ctype is the Content-Type header; auth_key the key from the
 * headers (LibreTranslate may carry its own in the body). */
int srv_api_translate_parse(srv_req *r, const char *ctype, const char *auth_key);

/* Splits n texts into sentences (unless r->no_split; a text of one
 * sentence stays one job, exactly as it is) and tokenizes them into
 * r->jobs (r->text_job maps each text to its job, r->split a text of
 * several sentences to theirs; an empty or whitespace-only text or sentence
 * gets none, td_tok_is_empty); 422 for a text or sentence over
 * --max-input-tokens, or more sentences than --max-queue (param names the
 * field). Returns 1 (submit
 * the jobs; when there are none, respond at once) or 0 (an error was
 * recorded). r->model and r->opts must be set. */
int srv_api_make_jobs(srv_req *r, const char *const *texts, const size_t *lens, int n,
                      const char *param);

/* After every job finished: hypotheses of text i (1 for an empty text),
 * and hypothesis k's detokenized text as a JSON string ("" for an empty
 * text; invalid UTF-8 replaced); NULL when out of memory. */
int srv_api_n_hyps(const srv_req *r, int text);
json_t *srv_api_text_value(const srv_req *r, int text, int hyp);

/* Called from a job's completion (a scheduler thread) before the job's
 * request is handed back: applies the device-failed policy to a failed
 * job. Touches only j and the model's state, never the rest of r. */
void srv_api_job_finished(srv_req *r, const srv_job *j);

/* Once every job finished: records the response (200 with the
 * translations, or the error of the first job that did not finish). */
void srv_api_translate_respond(srv_req *r);

/* ---- run-time model changes ---------------------------------------------- */

#define SRV_MODELS_PREFIX "/v1/models/"

/* DELETE /v1/models/NAME: unloads it (models.h: new requests stop at once,
 * the ones holding it finish on it); records the response. */
void srv_api_model_delete(srv_req *r);

/* POST /v1/models (a load: name, path below --models-dir, languages) and
 * POST /v1/models/NAME/reload, once the body is complete: records a
 * response and returns 0, or fills r->op and returns 1 for the caller to
 * submit it (srv_models_submit). */
int srv_api_admin_parse(srv_req *r);

/* The operation of r->op finished: records its response (201 for a load,
 * 200 for a reload, or the loader's error with its status). */
void srv_api_admin_respond(srv_req *r);

/* 1 when the server has no API key or given matches it; constant time in
 * the key's content. */
int srv_api_key_ok(const srv_server *s, const char *given);

#endif /* SRV_API_H */
