/*
 * cors.c - the CORS headers of every response (cors.h).
 */
#include <stdio.h>
#include <string.h>

#include "cors.h"

int srv_cors_headers(const char *list, const char *origin, int preflight, const char *allow,
                     const char *h[SRV_CORS_MAX][2], char *buf, size_t buflen)
{
    if (!list || !*list)
        return 0;
    int n = 0;
    if (!strcmp(list, "*")) {
        h[n][0] = "Access-Control-Allow-Origin";
        h[n++][1] = "*";
    } else {
        /* a list: the request's origin when listed (browsers take one) */
        int match = 0;
        size_t ol = origin ? strlen(origin) : 0;
        for (const char *p = list; origin && *p && !match;) {
            const char *c = strchr(p, ',');
            size_t l = c ? (size_t)(c - p) : strlen(p);
            while (l && *p == ' ')
                p++, l--;
            while (l && p[l - 1] == ' ')
                l--;
            match = l == ol && !strncmp(p, origin, l);
            p = c ? c + 1 : p + strlen(p);
        }
        h[n][0] = "Vary";
        h[n++][1] = "Origin";
        if (!match)
            return n;
        h[n][0] = "Access-Control-Allow-Origin";
        h[n++][1] = origin;
        h[n][0] = "Access-Control-Allow-Credentials";
        h[n++][1] = "true";
    }
    h[n][0] = "Access-Control-Expose-Headers";
    h[n++][1] = "Authorization";
    if (preflight) {
        snprintf(buf, buflen, "%s, OPTIONS", allow ? allow : "GET, POST");
        h[n][0] = "Access-Control-Allow-Methods";
        h[n++][1] = buf;
        h[n][0] = "Access-Control-Allow-Headers";
        h[n++][1] = "Authorization, Content-Type, X-API-Key";
        h[n][0] = "Access-Control-Max-Age";
        h[n++][1] = "1728000";
    }
    return n;
}
