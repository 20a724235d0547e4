/*
 * docrun.h - a whole document translated through the service, the
 * documents' entry point: started and told when done (an API's document
 * that a client polls), or waited for by a caller that may wait
 * (`transformerd translate-file`, server/cli_file.c; never an HTTP
 * thread). The steps: the documents table's parse (documents.h), the
 * segments' language (detected when not given), the model of the pair,
 * the segments through the text pipeline (pipeline.h) and the model's
 * batcher, the render. What LibreTranslate's /translate_file does with the
 * same options, in the same steps, so the bytes are the same.
 */
#ifndef SRV_DOCRUN_H
#define SRV_DOCRUN_H

#include <stddef.h>

#include "documents.h"
#include "errors.h"
#include "state.h"

typedef struct srv_doc_request {
    const char *data;     /* the file's bytes */
    size_t len;
    const char *ext;      /* its extension (".docx"), the table's row */
    const char *source;   /* its language, or "auto": detected over its text */
    const char *target;
    int overwrite;        /* a catalogue's translated units too */
} srv_doc_request;

typedef struct srv_doc_result {
    char *data;           /* the translated file (malloc'd), len bytes */
    size_t len;
    const srv_doc_format *format;
    char source[16];      /* the source language (the detected one with "auto") */
    double confidence;    /* the detection's */
    int kept, lost;       /* the row's counts (documents.h), when it keeps them */
    char why[512];        /* a failure's reason */
} srv_doc_result;

/* A document on its way: the parse on a document thread (docpool.h), its
 * segments' jobs through the model's batcher (a few queued at a time, the
 * next fed as one finishes, as a LibreTranslate file's), the render on a
 * document thread again. */
typedef struct srv_doc_run srv_doc_run;
typedef void (*srv_doc_done_fn)(srv_doc_run *run, void *ud);

/* Starts q's translation on s's models (q's bytes and strings must live
 * until done). SRV_OK: done(run, ud) will be called exactly once, on a
 * document or scheduler thread, after which srv_doc_run_result holds the
 * outcome; else the kind at once with why (SRV_ERR_INVALID: an unsupported
 * format; SRV_ERR_UNAVAILABLE: the document queue is full or stopped), no
 * run made and done never called. */
srv_err srv_doc_start(srv_server *s, const srv_doc_request *q, srv_doc_done_fn done, void *ud,
                      srv_doc_run **out, char *why, size_t whylen);

/* The segments' jobs finished so far and in all (0 of 0 before the parse
 * made them); any thread, while the run lives. */
void srv_doc_progress(srv_doc_run *run, int *done, int *total);

/* After done: SRV_OK with out->data (taken by the caller: set it to NULL
 * before srv_doc_run_free to keep it), or the kind with out->why:
 * SRV_ERR_INVALID (not valid UTF-8, not such a file, no model for the
 * pair), SRV_ERR_TOO_LONG / SRV_ERR_TOO_MANY (a sentence or the sentences
 * over the limits), SRV_ERR_BUSY (the model's queue is full),
 * SRV_ERR_UNAVAILABLE (the service stopped), SRV_ERR_NOMEM,
 * SRV_ERR_INTERNAL (the engine, a helper, the deadline --file-timeout-s). */
srv_err srv_doc_run_result(srv_doc_run *run, srv_doc_result **out);

/* Frees a run after its done (its result's data too, unless taken). */
void srv_doc_run_free(srv_doc_run *run);

/* srv_doc_start, waited for: for a caller that may wait (the command
 * line; never an HTTP thread). *out's data is the caller's. */
srv_err srv_doc_translate(srv_server *s, const srv_doc_request *q, srv_doc_result *out);

#endif /* SRV_DOCRUN_H */
