/*
 * fuzz_route.c - the parts of the HTTP layer that need no socket: the route
 * table (srv_routes_find over every API's rows: exact paths, and patterns
 * such as /download_file/NAME and /v1/models/NAME[/reload]) and the CORS
 * headers (srv_cors_headers) of a request's Origin against a --cors-origins
 * list. The framing checks (server/transport/http.c) read
 * libmicrohttpd's connection and are exercised by test_server_harden.
 *
 * Input: the path, '\0', the Origin, '\0', the --cors-origins list (each
 * part may be missing).
 *
 * Invariants: a row found for a method is one of that method (GET also
 * for HEAD) whose path is the request's, or whose pattern's text around
 * its '*' is the path's with a non-empty run between; a path with a row
 * has an Allow list that names the row's method; CORS: at
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

#include "cors.h"
#include "routes.h"

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

    static srv_server s;
    static srv_api *api;
    char err[128];
    if (!api && !(api = srv_api_new(&s, err, sizeof err)))
        die(err);
    static const char *const k_methods[] = {"GET", "HEAD", "POST", "DELETE", "PUT"};
    const srv_route *rt = NULL;
    for (size_t m = 0; m < sizeof k_methods / sizeof k_methods[0]; m++) {
        char allow[64];
        const srv_route *row = srv_routes_find(srv_api_routes(api), path, k_methods[m], allow,
                                               sizeof allow);
        if (!row)
            continue;
        rt = row;
        const char *want = strcmp(k_methods[m], "HEAD") ? k_methods[m] : "GET";
        if (strcmp(row->method, want) != 0)
            die("a row of another method");
        if (!strstr(allow, row->method))
            die("an Allow list without the row's method");
        const char *star = strchr(row->path, '*');
        if (!star) {
            if (strcmp(row->path, path) != 0)
                die("an exact row that is not the request's path");
        } else {
            size_t pre = (size_t)(star - row->path), suf = strlen(star + 1), n = strlen(path);
            if (n <= pre + suf || strncmp(path, row->path, pre) ||
                strcmp(path + n - suf, star + 1))
                die("a pattern row that does not match the path");
        }
    }

    const char *h[SRV_CORS_MAX][2];
    char buf[64];
    for (int preflight = 0; preflight < 2; preflight++) {
        int n = srv_cors_headers(list, origin, preflight, rt ? "GET, POST" : NULL, h, buf,
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
