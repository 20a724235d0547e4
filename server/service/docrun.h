/*
 * docrun.h - a whole document translated through the service, the
 * documents' entry point of every door: LibreTranslate's /translate_file
 * (server/api/libre.c), the DeepL dialect's /v2/document (api/deepl.c),
 * both started here and told when done, and `transformerd translate-file`
 * (server/cli_file.c), which waits (never an HTTP thread). The steps: the
 * documents table's parse (documents.h), the segments' language (detected
 * when not given, or the door's own through its parsed hook), the model of
 * the pair, the segments through the text pipeline (pipeline.h, with a
 * glossary's terms) and the model's batcher (the translation cache first),
 * the render. A door keeps only what is its protocol: the upload read, a
 * failure's stage said as its own status and message, where the file goes.
 */
#ifndef SRV_DOCRUN_H
#define SRV_DOCRUN_H

#include <stddef.h>
#include <stdint.h>

#include "batcher.h"
#include "docpool.h"
#include "documents.h"
#include "errors.h"
#include "glossary.h"
#include "pipeline.h"
#include "state.h"

typedef struct srv_doc_run srv_doc_run;

/* A door's look at the parsed document before its jobs (a document
 * thread): its own billing or language detection. source (16 bytes) holds
 * the request's; the hook may set it ("auto" is detected after it). SRV_OK
 * to go on; another kind ends the run at SRV_DOC_AT_SOURCE with why. */
typedef srv_err (*srv_doc_parsed_fn)(srv_doc_run *run, void *ud, const srv_document *d,
                                     char *source, char *why, size_t whylen);

/* A door's look at the jobs made (p, each under o but a styled segment's)
 * before they go out (a document thread): its own bounds. SRV_OK to go on;
 * another kind ends the run at SRV_DOC_AT_LIMIT with why. */
typedef srv_err (*srv_doc_jobs_fn)(srv_doc_run *run, void *ud, const srv_pipe *p,
                                   const td_decode_opts *o, char *why, size_t whylen);

typedef struct srv_doc_request {
    const char *data;     /* the file's bytes */
    size_t len;
    const char *ext;      /* its extension (".docx"), the table's row */
    const char *source;   /* its language, or "auto": detected over its text */
    const char *target;
    int overwrite;        /* a catalogue's translated units too */
    const srv_glossary *glossary; /* its terms placed (the caller's reference, kept
                                     until done), or NULL */
    uint64_t owner;       /* the batcher's fair share (srv_completion), 0: its own */
    double deadline;      /* srv_now() seconds; 0: --file-timeout-s from the start */
    int (*gone)(void *ud); /* the requester left (any thread): the run is cancelled
                              (SRV_DOC_GONE, SRV_JOB_GONE); NULL: never */
    srv_doc_parsed_fn parsed; /* NULL: none */
    srv_doc_jobs_fn jobs;     /* NULL: none */
} srv_doc_request;

/* Where a failed run stopped: the step a door's message names. */
typedef enum srv_doc_stage {
    SRV_DOC_AT_NONE = 0, /* done */
    SRV_DOC_AT_WAIT,     /* a document task not run: dropped (its deadline, its
                            requester gone, the pool stopped) */
    SRV_DOC_AT_PARSE,    /* not such a file (SRV_ERR_INVALID), the parser's failure */
    SRV_DOC_AT_TEXTS,    /* more segments (n_texts) than --max-file-texts */
    SRV_DOC_AT_SOURCE,   /* the detection (out of memory), the parsed hook's refusal */
    SRV_DOC_AT_MODEL,    /* no model from source to target */
    SRV_DOC_AT_DEVICE,   /* the pair's model's device failed */
    SRV_DOC_AT_GLOSSARY, /* the glossary has no dictionary for the pair */
    SRV_DOC_AT_JOBS,     /* the text pipeline: fail */
    SRV_DOC_AT_LIMIT,    /* the jobs hook's refusal */
    SRV_DOC_AT_SUBMIT,   /* the model's queue refused the jobs: submit */
    SRV_DOC_AT_RUN,      /* a job did not finish: job (SRV_JOB_FAILED: the engine's
                            message in why) */
    SRV_DOC_AT_RENDER,   /* the render */
} srv_doc_stage;


typedef struct srv_doc_result {
    char *data;           /* the translated file (malloc'd), len bytes */
    size_t len;
    const srv_doc_format *format;
    char source[16];      /* the source language (the detected one with "auto") */
    double confidence;    /* the detection's */
    int kept, lost;       /* the row's counts (documents.h), when it keeps them */
    char why[512];        /* a failure's reason */
    /* a failure's details, for the door's own message */
    srv_doc_stage stage;
    srv_doc_outcome dropped; /* AT_WAIT */
    srv_pipe_fail fail;      /* AT_JOBS */
    srv_submit_rc submit;    /* AT_SUBMIT */
    srv_job_status job;      /* AT_RUN */
    int n_texts;             /* the document's segments (after the parse) */
    /* the jobs, for the door's log */
    int n_jobs;
    long tokens_in, tokens_out;
} srv_doc_result;

/* A document on its way: the parse on a document thread (docpool.h), its
 * segments' jobs through the model's batcher (--file-queue-texts queued at
 * a time, the next fed as one finishes, so that requests made meanwhile
 * are taken between them), the render on a document thread again. */
typedef void (*srv_doc_done_fn)(srv_doc_run *run, void *ud);

/* Starts q's translation on s's models (q's bytes, strings and glossary
 * must live until done). SRV_OK: *out set, then done(run, ud) called
 * exactly once, on a document or scheduler thread (maybe before this
 * returns), after which srv_doc_run_result holds the outcome and the run
 * is touched no more but by its owner; else the kind at once with why
 * (SRV_ERR_INVALID: an unsupported format; SRV_ERR_BUSY: the document
 * queue is full; SRV_ERR_UNAVAILABLE: no document threads, or stopping),
 * *out NULL, no run made and done never called. */
srv_err srv_doc_start(srv_server *s, const srv_doc_request *q, srv_doc_done_fn done, void *ud,
                      srv_doc_run **out, char *why, size_t whylen);

/* The segments' jobs finished so far (the cache's hits among them) and in
 * all (0 of 0 before they went out); any thread, while the run lives. */
void srv_doc_progress(srv_doc_run *run, int *done, int *total);

/* After done: SRV_OK with out->data (taken by the caller: set it to NULL
 * before srv_doc_run_free to keep it), or the kind with out->why and
 * out->stage (where): SRV_ERR_INVALID (not valid UTF-8, not such a file,
 * no model for the pair, a glossary of another pair), SRV_ERR_TOO_LONG /
 * SRV_ERR_TOO_MANY (a sentence or the sentences over the limits),
 * SRV_ERR_BUSY (the model's queue is full), SRV_ERR_UNAVAILABLE (the
 * service stopped, the requester left), SRV_ERR_NOMEM, SRV_ERR_INTERNAL
 * (the engine, the device, a helper, the deadline), or the parsed hook's. */
srv_err srv_doc_run_result(srv_doc_run *run, srv_doc_result **out);

/* After done: the pair's model (with the run's reference, now the
 * caller's: srv_model_put), or NULL when none was needed or found. */
srv_model *srv_doc_run_take_model(srv_doc_run *run);

/* Frees a run after its done (its result's data too, unless taken). */
void srv_doc_run_free(srv_doc_run *run);

/* srv_doc_start, waited for: for a caller that may wait (the command
 * line; never an HTTP thread). *out's data is the caller's. */
srv_err srv_doc_translate(srv_server *s, const srv_doc_request *q, srv_doc_result *out);

#endif /* SRV_DOCRUN_H */
