/*
 * request.c - the answers every dialect gives, the error objects, the API
 * key check, and the end of a request's state (request.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "models.h"
#include "request.h"

void srv_req_reply(srv_req *r, int status, const char *ctype, char *body, size_t len)
{
    srv_call_answer(r->call, status, ctype);
    if (srv_call_take(r->call, body, len) != 0 && status < 500)
        srv_req_error(r, 500, "internal", NULL, "out of memory");
}

void srv_req_json(srv_req *r, int status, char *body)
{
    srv_req_reply(r, status, "application/json", body, body ? strlen(body) : 0);
}

int srv_req_event(srv_req *r, const char *name, const char *json)
{
    size_t n = strlen(name) + strlen(json) + 32;
    char *line = malloc(n);
    if (!line)
        return -1;
    int k = r->stream == SRV_STREAM_NDJSON
                ? snprintf(line, n, "{\"event\":\"%s\",\"data\":%s}\n", name, json)
                : snprintf(line, n, "event: %s\ndata: %s\n\n", name, json);
    int rc = k > 0 ? srv_call_stream_write(r->call, line, (size_t)k) : -1;
    free(line);
    return rc;
}

int srv_req_status(srv_err e)
{
    switch (e) {
    case SRV_OK:
        return 200;
    case SRV_ERR_INVALID:
        return 400;
    case SRV_ERR_NOT_FOUND:
        return 404;
    case SRV_ERR_CONFLICT:
        return 409;
    case SRV_ERR_TOO_LONG:
    case SRV_ERR_TOO_MANY:
    case SRV_ERR_UNUSABLE:
        return 422;
    case SRV_ERR_BUSY:
        return 429;
    case SRV_ERR_UNAVAILABLE:
        return 503;
    case SRV_ERR_NO_ROOM:
        return 507;
    default:
        return 500;
    }
}

void *srv_req_alloc(const srv_req *r, size_t count, size_t size)
{
    if (count == 0)
        count = 1;
    if (size && count > (size_t)-1 / size)
        return NULL;
    return srv_call_alloc(r->call, count * size);
}

void srv_req_header(srv_req *r, const char *name, const char *value)
{
    (void)srv_call_add_header(r->call, name, value); /* a full table: the header is lost */
}

/* Replaces in place every byte of s that is not part of a well-formed
 * UTF-8 sequence with '?': an error message or param quoting client input
 * (jansson's parse errors quote the body, cut to their own size, possibly
 * mid-character) must still be a JSON string, or the error itself would
 * become a 500. */
void srv_utf8_sanitize(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3
                : (*p & 0xF8) == 0xF0 ? 4 : 0;
        int ok = n > 0 && !(n == 2 && *p < 0xC2) && !(n == 4 && *p > 0xF4);
        for (int i = 1; ok && i < n; i++)
            ok = (p[i] & 0xC0) == 0x80;
        if (ok && n == 3) /* no overlong forms, no surrogates */
            ok = !(p[0] == 0xE0 && p[1] < 0xA0) && !(p[0] == 0xED && p[1] >= 0xA0);
        if (ok && n == 4)
            ok = !(p[0] == 0xF0 && p[1] < 0x90) && !(p[0] == 0xF4 && p[1] >= 0x90);
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
}
void srv_req_error(srv_req *r, int status, const char *code, const char *param, const char *fmt,
                   ...)
{
    char msg[512], par[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    srv_utf8_sanitize(msg);
    if (param) {
        snprintf(par, sizeof par, "%s", param);
        srv_utf8_sanitize(par);
        param = par;
    }
    /* LibreTranslate's endpoints answer LibreTranslate's {"error": message} */
    unsigned fl = r->route ? r->route->flags : 0;
    json_t *e = fl & SRV_ROUTE_LIBRE     ? json_pack("{s:s}", "error", msg)
                : fl & SRV_ROUTE_MESSAGE ? json_pack("{s:s}", "message", msg)
                                         : json_pack("{s:{s:s,s:s,s:o}}", "error", "code", code, "message", msg,
                                "param", param ? json_string(param) : json_null());
    char *body = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    if (r->stream_live) { /* the status went out with the stream's start */
        if (body)
            srv_req_event(r, "error", body);
        free(body);
        srv_call_stream_end(r->call);
        return;
    }
    if (!body) {
        /* Out of memory: still an error, never a 200. */
        status = 500;
        body = strdup("{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\","
                      "\"param\":null}}");
    }
    srv_call_answer(r->call, status, "application/json");
    if (srv_call_take(r->call, body, body ? strlen(body) : 0) != 0)
        return; /* the transport's 500 */
    if (status == 401)
        srv_req_header(r, "WWW-Authenticate", "Bearer");
}
void srv_req_object(srv_req *r, int status, json_t *o)
{
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body)
        srv_req_error(r, 500, "internal", NULL, "out of memory");
    else
        srv_req_json(r, status, body);
}
json_t *srv_req_json_body(srv_req *r)
{
    json_error_t je;
    /* a NUL (\u0000) is a character of a text like any other */
    json_t *root = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root) {
        srv_req_error(r, 400, "invalid_json", NULL, "invalid JSON at line %d column %d: %s",
                      je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        srv_req_error(r, 400, "invalid_request", NULL, "the body must be a JSON object");
        json_decref(root);
        return NULL;
    }
    return root;
}
int srv_req_opt_string(srv_req *r, json_t *root, const char *key, const char **out)
{
    json_t *v = json_object_get(root, key);
    *out = NULL;
    if (!v)
        return 0;
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
        srv_req_error(r, 400, "invalid_type", key, "%s must be a string without NUL", key);
        return 1;
    }
    *out = json_string_value(v);
    return 0;
}
int srv_api_key_ok(const srv_server *s, const char *given)
{
    const char *k = s->api->api_key;
    if (!k || !*k)
        return 1;
    if (!given)
        return 0;
    /* Constant time in the key's content: every byte of the key is
     * compared whatever the first mismatch. */
    size_t kl = strlen(k), gl = strlen(given);
    volatile unsigned char d = kl != gl;
    for (size_t i = 0; i < kl; i++)
        d |= (unsigned char)((unsigned char)k[i] ^ (unsigned char)(i < gl ? given[i] : 0));
    return d == 0;
}
void srv_req_free(srv_req *r)
{
    /* the arena holds the arrays; their elements from the tokenizer are freed */
    for (int i = 0; r->src_offsets && i < r->pipe.n_jobs; i++)
        free(r->src_offsets[i]);
    srv_pipe_free(&r->pipe);
    r->src_offsets = NULL;
    r->text_chars = NULL;
    r->attn_layers = r->attn_heads = NULL;
    if (r->dialect_free)
        r->dialect_free(r);
    r->state = NULL;
    r->dialect_free = NULL;
    srv_glossary_put(r->glossary);
    r->glossary = NULL;
    srv_model_put(r->model); /* the request's reference (models.h) */
    r->model = NULL;
    r->attn_layers = r->attn_heads = NULL;
}

int srv_routes_copy(const srv_route *rows, int n, srv_route *out, int max)
{
    for (int i = 0; i < n && i < max; i++)
        out[i] = rows[i];
    return n;
}

int srv_req_timeout_s(const srv_req *r)
{
    return r->call->timeout_s > 0 ? r->call->timeout_s : r->s->o.request_timeout_s;
}
