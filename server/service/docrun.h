/*
 * docrun.h - a whole document translated in one call, for a caller that
 * may wait (`transformerd translate-file`, server/cli_file.c; never an
 * HTTP thread): the documents table's parse (documents.h), its segments'
 * language (detected when not given), the model of the pair, the segments
 * through the text pipeline (pipeline.h) and the model's batcher, and the
 * render. What LibreTranslate's /translate_file does with the same
 * options, in the same steps, so the bytes are the same.
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

/* Translates q on s's models (serve's started, srv_run_local). SRV_OK with
 * out->data; else the kind with out->why: SRV_ERR_INVALID (an unsupported
 * format, not valid UTF-8, not such a file, no model for the pair),
 * SRV_ERR_TOO_LONG / SRV_ERR_TOO_MANY (a sentence or the sentences over
 * the limits), SRV_ERR_NOMEM, SRV_ERR_INTERNAL (the engine, a helper). */
srv_err srv_doc_translate(srv_server *s, const srv_doc_request *q, srv_doc_result *out);

#endif /* SRV_DOCRUN_H */
