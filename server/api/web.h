/*
 * web.h - the page at GET / (docs/api.md, "The web page"): the files of
 * web/ compiled into the executable (web/embed.cmake writes them into a
 * generated C file at build time), served with their Content-Type, a
 * strict Content-Security-Policy and an ETag (If-None-Match: 304).
 *
 * Promise: no file is read at run time and nothing is fetched from another
 * origin; the page uses only the daemon's own API. A route per file
 * (routes.h); it knows the transport only by the call.
 *
 * Threads: every function may be called from any thread (read-only data).
 */
#ifndef SRV_WEB_H
#define SRV_WEB_H

#include <stddef.h>

#include "request.h"

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

/* A row per asset into out (up to max; GET: the file with its ETag, cache
 * and security headers, or 304 when If-None-Match names its ETag); returns
 * how many there are. */
int srv_web_routes(srv_route *out, int max);

#endif /* SRV_WEB_H */
