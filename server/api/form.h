/*
 * form.h - a request's fields as LibreTranslate (Flask's request.values and
 * request.files) reads them: a JSON body as it is; a form or multipart body
 * and the query string as string fields (docs/api.md, "The LibreTranslate
 * API"). Threads: the request's HTTP thread.
 */
#ifndef SRV_FORM_H
#define SRV_FORM_H

#include <stddef.h>

#include <jansson.h>

#include "request.h"

/* A multipart body's file part. */
typedef struct srv_form_file {
    const char *name; /* the part's filename (NUL-terminated in the body), or NULL */
    const char *data; /* its bytes, in the body */
    size_t len;
    int present;
} srv_form_file;

/* The request's fields as a JSON object, its file part (if any) into *file,
 * *is_json when the body was JSON; NULL when an error was recorded (400
 * naming the field, or 500 when out of memory). ctype: the Content-Type
 * header, or NULL. A JSON body may be modified in place (a NUL in an
 * unknown key). */
json_t *srv_form_fields(srv_req *r, const char *ctype, srv_form_file *file, int *is_json);

#endif /* SRV_FORM_H */
