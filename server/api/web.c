/*
 * web.c - serving the embedded page (web.h). The files themselves are in
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

int srv_web_answer(srv_req *r, const char *method, const char *path, const char *if_none_match)
{
    const srv_web_asset *a = srv_web_find(path);
    if (!a)
        return 0;
    r->ep = SRV_EP_WEB;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        r->allow = "GET, HEAD";
        srv_req_error(r, 405, "method_not_allowed", NULL, "%s %s: allowed: %s", method, path,
                      r->allow);
        return 1;
    }
    if (if_none_match && etag_matches(if_none_match, a->etag)) {
        srv_req_json(r, 304, strdup(""));
        r->resp_ctype = a->ctype;
        return 1;
    }
    char *body = malloc(a->len + 1);
    if (!body) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return 1;
    }
    memcpy(body, a->data, a->len);
    body[a->len] = 0;
    srv_req_json(r, 200, body);
    r->resp_len = a->len;
    r->resp_ctype = a->ctype;
    return 1;
}

int srv_web_header(const char *path, int i, const char **name, const char **value)
{
    const srv_web_asset *a = srv_web_find(path);
    if (!a)
        return 0;
    switch (i) {
    case 0: *name = "ETag"; *value = a->etag; return 1;
    /* revalidated on every load (304 while unchanged), so that a new
     * daemon's page is never mixed with an old one's script */
    case 1: *name = "Cache-Control"; *value = "no-cache"; return 1;
    case 2: *name = "Content-Security-Policy"; *value = WEB_CSP; return 1;
    case 3: *name = "X-Content-Type-Options"; *value = "nosniff"; return 1;
    case 4: *name = "Referrer-Policy"; *value = "no-referrer"; return 1;
    case 5: *name = "X-Frame-Options"; *value = "DENY"; return 1;
    default: return 0;
    }
}

size_t srv_web_bytes(void)
{
    size_t n = 0;
    for (int i = 0; i < srv_web_n_assets; i++)
        n += srv_web_assets[i].len;
    return n;
}
