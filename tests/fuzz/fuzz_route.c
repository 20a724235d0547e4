/*
 * fuzz_route.c - the parts of the HTTP layer that need no socket: routing
 * (srv_api_route, with LibreTranslate's routes, /download_file/NAME and the
 * model administration's /v1/models/NAME[/reload])
 * and the CORS headers (srv_libre_cors) of a request's Origin against a
 * --cors-origins list. The framing checks (server/transport/http.c) read
 * libmicrohttpd's connection and are exercised by test_server_harden.
 *
 * Input: the path, '\0', the Origin, '\0', the --cors-origins list (each
 * part may be missing).
 *
 * Invariants: a route's path is the request's path (or, for the prefix
 * routes /download_file/ and /v1/models/, a prefix of it followed by a
 * non-empty name); its method class is one of api.h's srv_method; CORS: at
 * most SRV_CORS_MAX headers, names and values non-NULL, the Allow-Origin
 * value is "*" or exactly the request's Origin and then only when the list
 * names it, and no value carries CR or LF unless the Origin did (the HTTP
 * layer never passes one: libmicrohttpd ends a header value at the line
 * end).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "libre.h"

static void die(const char *what)
{
    fprintf(stderr, "fuzz_route: %s\n", what);
    abort();
}

/* Whether list (comma-separated, spaces trimmed) names origin: an
 * independent reading of the rule. */
static int listed(const char *list, const char *origin)
{
    char *copy = strdup(list), *save = NULL;
    int hit = 0;
    for (char *t = strtok_r(copy, ",", &save); t && !hit; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        size_t l = strlen(t);
        while (l && t[l - 1] == ' ')
            t[--l] = 0;
        hit = !strcmp(t, origin);
    }
    /* an empty item between commas matches an empty origin */
    if (!hit && !*origin) {
        const char *p = list;
        for (;;) {
            const char *c = strchr(p, ',');
            size_t l = c ? (size_t)(c - p) : strlen(p);
            size_t sp = 0;
            while (sp < l && p[sp] == ' ')
                sp++;
            if (sp == l)
                hit = 1;
            if (!c)
                break;
            p = c + 1;
        }
    }
    free(copy);
    return hit;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size + 3);
    memcpy(in, data, size);
    in[size] = in[size + 1] = in[size + 2] = 0;
    const char *path = in;
    const char *origin = path + strlen(path) + 1;
    if (origin > in + size)
        origin = NULL;
    const char *list = origin ? origin + strlen(origin) + 1 : "*";
    if (origin && list > in + size)
        list = "*";

    const srv_route *rt = srv_api_route(path);
    if (rt) {
        if (!rt->path || (unsigned)rt->method > SRV_METHOD_ADMIN) /* srv_method's last */
            die("a route without a path or with an unknown method");
        size_t pl = strlen(rt->path);
        int exact = !strcmp(rt->path, path);
        int download = pl > 0 && rt->path[pl - 1] == '/' && !strncmp(path, rt->path, pl) &&
                       path[pl] != 0;
        if (!exact && !download)
            die("a route that is not the request's path");
    }

    srv_opts o;
    memset(&o, 0, sizeof o);
    o.cors_origins = list;
    const char *h[SRV_CORS_MAX][2];
    char buf[64];
    for (int preflight = 0; preflight < 2; preflight++) {
        int n = srv_libre_cors(&o, origin, preflight, rt ? "GET, POST" : NULL, h, buf,
                               sizeof buf);
        if (n < 0 || n > SRV_CORS_MAX || (!*list && n != 0))
            die("CORS: header count");
        int allowed = 0;
        for (int i = 0; i < n; i++) {
            if (!h[i][0] || !h[i][1])
                die("CORS: a NULL name or value");
            int from_origin = origin && h[i][1] == origin;
            if (!from_origin && strpbrk(h[i][1], "\r\n"))
                die("CORS: CR or LF in a value");
            if (!strcmp(h[i][0], "Access-Control-Allow-Origin")) {
                allowed = 1;
                if (strcmp(h[i][1], "*") != 0 &&
                    !(origin && !strcmp(h[i][1], origin) && listed(list, origin)))
                    die("CORS: an origin allowed that the list does not name");
            }
        }
        /* (an empty Origin is no browser's: whether an empty item names it
         * is left open) */
        if (*list && strcmp(list, "*") != 0 && origin && *origin && listed(list, origin) &&
            !allowed)
            die("CORS: a listed origin not allowed");
    }
    free(in);
    return 0;
}
