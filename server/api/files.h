/*
 * files.h - the store of LibreTranslate's translated files: each kept in
 * memory for --file-ttl-s under a random name, within --max-files-bytes in
 * all (the oldest go first), until /download_file/NAME fetches it
 * (docs/api.md, "The LibreTranslate API").
 *
 * Threads: any; the store has its own lock.
 */
#ifndef SRV_FILES_H
#define SRV_FILES_H

#include <stddef.h>

#include "request.h"
#include "state.h"

/* A stored name: <32 hex>.<the file's own name, made safe>, and its NUL. */
#define SRV_FILE_NAME_MAX 128

typedef struct srv_libre srv_libre;

/* An empty store sized by s->o (--max-files-bytes, --file-ttl-s). NULL
 * with err when out of memory. */
srv_libre *srv_libre_new(const srv_server *s, char *err, size_t errlen);
void srv_libre_free(srv_libre *l); /* accepts NULL */

/* Stores data (taken, len bytes) under name with its Content-Type (a
 * constant); the oldest files make room. 0, or -1 when it cannot fit
 * (data freed). */
int srv_files_put(srv_libre *l, const char *name, char *data, size_t len, const char *ctype);

/* A copy of the file stored under name (malloc'd into *data, with len + 1
 * bytes) and its type. 0, -1 when there is none (expired or never
 * stored), -2 when out of memory. */
int srv_files_get(srv_libre *l, const char *name, char **data, size_t *len,
                  const char **ctype);

/* An upload's extension (from its last dot, "" without one). */
const char *srv_files_ext(const char *name);

/* The name an upload is stored under: safe (safe_n) gets the upload's
 * name made safe (werkzeug's secure_filename; "file" + ext when nothing
 * is left of it), name (name_n) 32 random hex digits, a dot and safe. 0,
 * or -1 without randomness. */
int srv_files_new_name(const char *upload, const char *ext, char *safe, size_t safe_n,
                       char *name, size_t name_n);

/* GET prefix + NAME: the stored file, under its own name without the
 * random part (Content-Disposition), 404 when expired or never stored. */
void srv_files_answer_download(srv_req *r, const char *prefix);

#endif /* SRV_FILES_H */
