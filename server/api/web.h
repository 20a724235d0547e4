/*
 * web.h - the page at GET / (docs/api.md, "The web page"): the files of
 * web/ compiled into the executable (web/embed.cmake writes them into a
 * generated C file at build time), served with their Content-Type, a
 * strict Content-Security-Policy and an ETag (If-None-Match: 304).
 *
 * Promise: no file is read at run time and nothing is fetched from another
 * origin; the page uses only the daemon's own API. Like api.c it knows
 * nothing of the transport: http.c asks for the response and the headers.
 *
 * Threads: every function may be called from any thread (read-only data).
 */
#ifndef SRV_WEB_H
#define SRV_WEB_H

#include <stddef.h>

#include "api.h"

/* One embedded file (the generated table, srv_web_assets). */
typedef struct srv_web_asset {
    const char *path;  /* "/" for web/index.html, "/web/NAME" for the others */
    const char *ctype;
    const char *etag;  /* "\"<first 16 hex digits of its SHA-256>\"" */
    const unsigned char *data;
    size_t len;
} srv_web_asset;

extern const srv_web_asset srv_web_assets[];
extern const int srv_web_n_assets;

/* The asset served at path (exact), or NULL. */
const srv_web_asset *srv_web_find(const char *path);

/* When path is an asset's: records its response in r (200 with the file,
 * 304 when if_none_match, the request's If-None-Match or NULL, holds its
 * ETag, 405 for a method other than GET and HEAD), sets r->ep to
 * SRV_EP_WEB and returns 1. Otherwise returns 0 and touches nothing. */
int srv_web_answer(srv_req *r, const char *method, const char *path, const char *if_none_match);

/* The i-th extra header of the response to path (i = 0, 1, ... until it
 * returns 0): ETag, Cache-Control, Content-Security-Policy and the other
 * security headers. */
int srv_web_header(const char *path, int i, const char **name, const char **value);

/* The bytes of every asset together (the page's weight). */
size_t srv_web_bytes(void);

#endif /* SRV_WEB_H */
