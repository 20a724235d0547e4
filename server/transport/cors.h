/*
 * cors.h - Cross-Origin Resource Sharing: the headers every response
 * carries for --cors-origins (docs/api.md, "The LibreTranslate API": where
 * we differ from Flask-CORS), preflights included. Pure: no state.
 */
#ifndef SRV_CORS_H
#define SRV_CORS_H

#include <stddef.h>

/* The CORS headers of a response to a request with Origin origin (NULL when
 * absent), for the origin list list ("*": any origin; "" or NULL: no CORS
 * headers; else comma-separated origins): up to SRV_CORS_MAX name/value
 * pairs into h; returns how many. preflight: an OPTIONS request, allow the
 * methods of its route. The values point into buf, at origin, or are
 * constants. */
#define SRV_CORS_MAX 8
int srv_cors_headers(const char *list, const char *origin, int preflight, const char *allow,
                     const char *h[SRV_CORS_MAX][2], char *buf, size_t buflen);

#endif /* SRV_CORS_H */
