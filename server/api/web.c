/*
 * web.c - serving the embedded page (web.h), a route per file. The files themselves are in
 * web/; the table srv_web_assets is generated at build time
 * (web/embed.cmake -> web_assets.c in the build tree).
 */
#include <stdlib.h>
#include <string.h>

#include "web.h"

/* The page loads only its own script, style and icon, and talks only to
 * its own origin: no inline script or style, no eval, no frames. */
#define WEB_CSP                                                                              \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "              \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const srv_web_asset *srv_web_find(const char *path)
{
    for (int i = 0; i < srv_web_n_assets; i++)
        if (!strcmp(path, srv_web_assets[i].path))
            return &srv_web_assets[i];
    return NULL;
}

/* Whether an If-None-Match list ("a", W/"b", or *) names etag. */
static int etag_matches(const char *list, const char *etag)
{
    size_t el = strlen(etag);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        if (*p == '*')
            return 1;
        if (!strncmp(p, "W/", 2))
            p += 2;
        if (!strncmp(p, etag, el) && (p[el] == 0 || p[el] == ',' || p[el] == ' '))
            return 1;
        while (*p && *p != ',')
            p++;
    }
    return 0;
}

/* GET / or /web/NAME: the asset with its headers, or 304 when the client's
 * copy is current. */
static void web_answer(srv_req *r)
{
    const srv_web_asset *a = srv_web_find(r->path);
    if (!a) {
        srv_req_error(r, 404, "not_found", NULL, "no such page");
        return;
    }
    const char *inm = srv_call_header(r->call, "If-None-Match");
    if (inm && etag_matches(inm, a->etag)) {
        srv_req_reply(r, 304, a->ctype, strdup(""), 0);
    } else {
        char *body = malloc(a->len + 1);
        if (!body) {
            srv_req_error(r, 500, "internal", NULL, "out of memory");
            return;
        }
        memcpy(body, a->data, a->len);
        body[a->len] = 0;
        srv_req_reply(r, 200, a->ctype, body, a->len);
    }
    srv_req_header(r, "ETag", a->etag);
    /* revalidated on every load (304 while unchanged), so that a new
     * daemon's page is never mixed with an old one's script */
    srv_req_header(r, "Cache-Control", "no-cache");
    srv_req_header(r, "Content-Security-Policy", WEB_CSP);
    srv_req_header(r, "X-Content-Type-Options", "nosniff");
    srv_req_header(r, "Referrer-Policy", "no-referrer");
    srv_req_header(r, "X-Frame-Options", "DENY");
}

int srv_web_routes(srv_route *out, int max)
{
    for (int i = 0; i < srv_web_n_assets && i < max; i++) {
        const srv_route row = {"GET", srv_web_assets[i].path, SRV_EP_WEB, 0, web_answer, NULL,
                               NULL, "/"}; /* the page's files: one label */
        out[i] = row;
    }
    return srv_web_n_assets;
}
