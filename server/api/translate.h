/*
 * translate.h - what the translation dialects (native.c, libre.c) share:
 * a request's texts through the text pipeline (service/pipeline.h: the
 * sentences, tokenized jobs, unknown symbols, the texts put back together)
 * with the pipeline's error kinds said as the dialects' errors, the jobs
 * handed to the model's batcher under the call's holds, and the outcome of
 * the finished jobs.
 *
 * Threads: the HTTP thread that owns the request, but for the jobs'
 * completion (a scheduler thread), which touches only its job and the
 * model's state.
 */
#ifndef SRV_TRANSLATE_H
#define SRV_TRANSLATE_H

#include <stddef.h>

#include <jansson.h>

#include "request.h"
#include "spans.h"

/* r's texts through srv_pipe_make into r->pipe (split into sentences
 * unless r->no_split, in the model's source language, a multilingual
 * model's the request's): 422 for a text or sentence over
 * --max-input-tokens (refused, not cut), or more sentences than
 * --max-queue (param names the field). Returns 1 (submit the jobs; when there are none, respond at once)
 * or 0 (an error was recorded). r->model and r->opts must be set. */
int srv_api_make_jobs(srv_req *r, const char *const *texts, const size_t *lens, int n,
                      const char *param);

/* A pipeline's failure e at f (srv_pipe_make) as the API's error: 422
 * text_too_long or too_many_sentences naming param (the file's bound with
 * an uploaded file's route), 500 internal. */
void srv_api_pipe_error(srv_req *r, srv_err e, const srv_pipe_fail *f, const char *param);
/* Its message (n bytes; text: the text's number as the client counts it;
 * file: an uploaded file's bound), and its code. */
const char *srv_api_pipe_message(srv_err e, const srv_pipe_fail *f, int text, int file,
                                 char *msg, size_t n);

/* The glossary of id (glossary.h) for r's translation, its terms placed in
 * every text (srv_api_make_jobs checks its pair, param naming the field).
 * 0, or -1 with a 400 naming param when there is no such glossary. */
int srv_api_use_glossary(srv_req *r, const char *id, const char *param);

/* A model whose device failed refuses work (503) instead of queueing it
 * for a batch that would fail too. Returns 1 when an error was recorded. */
int srv_api_model_failed(srv_req *r, const srv_model *sm);

/* Hands r's jobs to its model's batcher, one hold of the call each, and
 * returns SRV_NEXT_PENDING; a refusal (429 queue_full, 503 draining) is
 * answered at once (SRV_NEXT_ANSWERED). --fair-share client: the client's
 * address owns the request's share of the queue. */
srv_call_next srv_api_submit(srv_req *r);

/* r's owner of a share of the queue (srv_completion): by --fair-share. */
uint64_t srv_api_owner(const srv_req *r);

/* A job (number job) that did not finish with status st as the API's
 * error: 504 timeout, 503 draining, client_gone or model_reloaded (the
 * model of r, Retry-After), 500 (SRV_JOB_FAILED: engine_err). */
void srv_api_job_error(srv_req *r, int job, srv_job_status st, const char *engine_err);
/* Its message (n bytes; timeout_s the request's bound, model the model's
 * name), and its status. */
int srv_api_job_message(int job, srv_job_status st, const char *engine_err, int timeout_s,
                        const char *model, char *msg, size_t n);

/* r's model was replaced by a new generation while its jobs waited: 503
 * model_reloaded, Retry-After. */
void srv_api_model_retired(srv_req *r);

/* Once every job finished: 0 when all are done (r->tokens_out counted), or
 * 1 with the error of the first that did not finish recorded (504, 503,
 * 500). */
int srv_api_jobs_failed(srv_req *r);

/* After every job finished: hypotheses of text i (1 for an empty text),
 * and hypothesis k's detokenized text as a JSON string ("" for an empty
 * text; invalid UTF-8 replaced); NULL when out of memory. */
int srv_api_n_hyps(const srv_req *r, int text);
json_t *srv_api_text_value(const srv_req *r, int text, int hyp);

/* Text i's split, or NULL when it is one job (or empty). */
const srv_split *srv_api_split_of(const srv_req *r, int text);

/* The one reassembly: hypothesis hyp of every sentence of sp between the
 * text's own separators (malloc'd; NULL when out of memory). ranges (2n,
 * or NULL): each sentence's bytes in it; *score: the sentences' scores
 * weighted by their tokens (the whole text's score with length_penalty 1). */
char *srv_api_split_join(const srv_req *r, const srv_split *sp, int hyp, size_t *ranges,
                         double *score);

/* Hypotheses of a split text: the fewest of its sentences' (1 when none ran). */
int srv_api_split_n_hyps(const srv_req *r, const srv_split *sp);

/* Text i's word alignment for inline formatting (spans.h): one block per
 * sentence that captured attention, with its source tokens' bytes in src
 * (src_n: the text as given to srv_api_make_jobs), its best hypothesis's
 * tokens' bytes in srv_api_text_value(r, i, 0), and the attention of the
 * last captured layer averaged over the captured heads. The number of
 * blocks into *out (malloc'd; srv_align_free), 0 when none captured, or
 * -1 when out of memory. */
int srv_api_text_align(const srv_req *r, int text, const char *src, size_t src_n,
                       srv_align **out);

/* The detokenized text of target ids (malloc'd), or NULL when out of memory. */
char *srv_api_decode(const srv_model *sm, const int32_t *ids, int n);

/* srv_pipe_decode of r's pipe: hypothesis hyp of job with the unknown
 * symbols copied (docs/api.md, copy_unknown). */
char *srv_api_decode_job(const srv_req *r, int job, int hyp, size_t **offsets);

/* JSON string of a detokenized text (taken); invalid UTF-8 (byte pieces
 * that do not form characters) is replaced rather than failing the
 * request. NULL for NULL. */
json_t *srv_api_text_json(char *t);

#endif /* SRV_TRANSLATE_H */
