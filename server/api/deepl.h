/*
 * deepl.h - the DeepL API v2 dialect (docs/api.md, "The DeepL API"), as the
 * official client libraries call it with their server_url: POST
 * /v2/translate (JSON and form bodies), /v2/languages, /v2/usage and the
 * document API (/v2/document upload, status, result), the key in
 * "Authorization: DeepL-Auth-Key KEY", errors as {"message": ...} with
 * DeepL's status codes (400, 403, 404, 413, 429, 456 quota, 503).
 *
 * Promise: texts go through the same jobs, limits and batcher as the other
 * dialects, documents through the documents' entry point
 * (service/docrun.h); an uploaded document is translated after its upload
 * is answered (its status says how far), its result kept in the file store
 * (files.h) until it is downloaded once or --file-ttl-s passes.
 *
 * Threads: the HTTP threads; a document after its upload on the document
 * and scheduler threads (its run's hook and done); the usage count and the
 * documents' table are the daemon's, under one lock.
 */
#ifndef SRV_DEEPL_H
#define SRV_DEEPL_H

#include <stddef.h>

#include <jansson.h>

#include "files.h"
#include "form.h"
#include "html.h"
#include "office.h"
#include "request.h"

/* DeepL's rows into out (up to max); returns how many there are. */
int srv_deepl_routes(srv_route *out, int max);

/* GET /openapi.json: the DeepL schemas' languages (the serving models')
 * and --max-batch-texts filled into doc. */
void srv_deepl_openapi(const srv_server *s, json_t *doc);

/* ---- between deepl_text.c (texts, languages, usage) and deepl.c (routes, documents) ---- */

/* An error in DeepL's shape (the rows' SRV_ROUTE_MESSAGE: {"message": ...}). */
#define dl_error(r, status, ...) srv_req_error(r, status, "deepl", NULL, __VA_ARGS__)
#define DL_DOC_PREFIX "/v2/document/"

/* A request's state (r->state; srv_deepl_free frees it). */
typedef struct dl_seg {
    struct _xmlNode *node;     /* markup: its text node, else NULL */
    const char *text;  /* what the model translates */
    size_t len;
    size_t lead;       /* markup: where the unit starts in its node's text (the
                          white space before it stays; text may be a copy) */
    int text_idx;      /* among the request's texts (translate.h), -1: copied */
    int styled;        /* html: a paragraph of several styles (its jobs align) */
} dl_seg;

typedef struct dl_text {
    const char *src;   /* as given */
    size_t n;
    srv_html *html;    /* tag_handling html with ignore_tags: its tree */
    srv_office *office; /* tag_handling html: its paragraphs (office.h) */
    struct _xmlDoc *xml;       /* tag_handling xml: its tree under a root of ours */
    size_t decl_n;             /* xml: its "<?xml ...?>" declaration's bytes (kept) */
    int seg0, n_segs;
    char lang[16];     /* its source language (ours) */
    int copy;          /* already in the target language */
} dl_text;

#define SPLIT_NONE 0
#define SPLIT_ALL 1
#define SPLIT_NONEWLINES 2
#define TAGS_NONE 0
#define TAGS_XML 1
#define TAGS_HTML 2

typedef struct dl_req {
    json_t *fields;
    /* /v2/translate */
    dl_text *texts;
    int n_texts;
    dl_seg *segs;
    int n_segs, cap_segs;
    int split, tags, show_billed;
    char **ignore;
    int n_ignore;
    long billed;       /* characters taken from the quota */
    const char *glossary_id; /* a glossary of the store (srv_api_use_glossary) */
    td_decode_opts span_opts; /* a paragraph of several styles: the attention it aligns by */
    /* /v2/document's upload */
    char upload_name[128];
    char src[16], tgt[16];
} dl_req;

void srv_deepl_free(srv_req *r);

/* A string field, NULL when absent: 0, or -1 with a 400 naming it. */
int srv_deepl_field_str(srv_req *r, json_t *f, const char *key, const char **out);
/* source_lang (optional: "" when absent) and target_lang as our codes (16
 * bytes each): 0, or -1 with a 400. */
int srv_deepl_langs(srv_req *r, json_t *f, char *src, char *tgt);
/* The language of t (n bytes) among the sources of the models into tgt and
 * tgt itself (a text already in it is copied) into out: 0, -1 when no
 * model translates into tgt, -2 out of memory. */
int srv_deepl_detect(srv_server *s, const char *t, size_t n, const char *tgt, char *out,
                     size_t outn);
/* formality and glossary_id: 1 to go on, 0 with the error recorded. */
int srv_deepl_formality_ok(srv_req *r, json_t *f);
int srv_deepl_glossary_ok(srv_req *r, dl_req *d, json_t *f, const char *src);

/* The daemon's usage: n characters taken (0, or -1 past
 * --deepl-character-limit), given back, or whether none are left. */
int srv_deepl_usage_take(const srv_server *s, long n);
void srv_deepl_usage_give_back(long n);
int srv_deepl_usage_spent(const srv_server *s);
/* The characters (not bytes) of n bytes of UTF-8. */
long srv_deepl_chars(const char *t, size_t n);

/* deepl_text.c's endpoints: the request's state over its fields (NULL with
 * a 500 recorded); the key (0 with DeepL's 403); POST /v2/translate (1 to
 * submit its jobs, 0 answered) and its answer once they are done;
 * /v2/languages; /v2/usage. */
dl_req *srv_deepl_state(srv_req *r, json_t *fields);
int srv_deepl_auth_ok(srv_req *r);
int srv_deepl_translate(srv_req *r, dl_req *d, json_t *f);
void srv_deepl_translate_answer(srv_req *r);
void srv_deepl_languages(srv_req *r, json_t *f);
void srv_deepl_usage(srv_req *r);

#endif /* SRV_DEEPL_H */
