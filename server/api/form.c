/*
 * form.c - a request body as LibreTranslate reads it, whatever its type
 * (form.h): JSON as sent; application/x-www-form-urlencoded and
 * multipart/form-data as strings (a repeated key becomes a list, as Flask's
 * getlist would give), each checked to be UTF-8 after decoding (400 naming
 * the field); multipart's file part kept aside (name and bytes); the query
 * string's parameters joined (Flask's request.values). Any other type is no
 * fields at all.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "form.h"

/* A field value: a string when valid UTF-8, else a 400 naming key. */
static int add_field(srv_req *r, json_t *o, const char *key, const char *v, size_t n)
{
    json_t *s = json_stringn(v, n);
    if (!s) {
        json_t *k = json_string(key); /* the key itself may not be UTF-8 */
        srv_req_error(r, 400, "invalid_request", key, "Invalid request: %s is not valid UTF-8",
                      k ? key : "a field name");
        json_decref(k);
        return -1;
    }
    json_t *old = json_object_get(o, key);
    if (old && json_is_array(old)) {
        json_array_append_new(old, s);
    } else if (old) {
        json_t *a = json_array();
        json_array_append(a, old);
        json_array_append_new(a, s);
        json_object_set_new(o, key, a);
    } else {
        json_object_set_new(o, key, s);
    }
    return 0;
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Decodes one urlencoded component in place; returns its length. */
static size_t url_decode(char *p)
{
    char *w = p;
    for (char *q = p; *q; q++) {
        if (*q == '+') {
            *w++ = ' ';
        } else if (*q == '%' && hexval(q[1]) >= 0 && hexval(q[2]) >= 0) {
            *w++ = (char)(hexval(q[1]) * 16 + hexval(q[2]));
            q += 2;
        } else {
            *w++ = *q;
        }
    }
    *w = 0;
    return (size_t)(w - p);
}

/* application/x-www-form-urlencoded, decoded in place. */
static int parse_form(srv_req *r, char *body, json_t *o)
{
    char *save = NULL;
    for (char *kv = strtok_r(body, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');
        if (eq)
            *eq = 0;
        size_t kn = url_decode(kv);
        char *v = eq ? eq + 1 : kv + kn;
        size_t vn = eq ? url_decode(v) : 0;
        if (kn != strlen(kv)) /* a NUL in a key: not a field anybody sends */
            continue;
        if (add_field(r, o, kv, v, vn) != 0)
            return -1;
    }
    return 0;
}

/* The value of parameter name (e.g. boundary, name, filename) in a header
 * value such as 'form-data; name="q"', copied into out; -1 if absent. */
static int header_param(const char *h, size_t hn, const char *name, char *out, size_t outn)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i + nl < hn; i++) {
        if ((i == 0 || h[i - 1] == ';' || h[i - 1] == ' ' || h[i - 1] == '\t') &&
            !strncasecmp(h + i, name, nl) && h[i + nl] == '=') {
            const char *v = h + i + nl + 1, *end = h + hn;
            size_t k = 0;
            if (v < end && *v == '"') {
                v++;
                while (v < end && *v != '"') {
                    if (*v == '\\' && v + 1 < end)
                        v++;
                    if (k + 1 < outn)
                        out[k++] = *v;
                    v++;
                }
            } else {
                while (v < end && *v != ';' && *v != ' ' && *v != '\t' && *v != '\r') {
                    if (k + 1 < outn)
                        out[k++] = *v;
                    v++;
                }
            }
            out[k] = 0;
            return 0;
        }
    }
    return -1;
}

static const char *memfind(const char *h, size_t hn, const char *n, size_t nn)
{
    if (nn == 0 || hn < nn)
        return NULL;
    for (const char *p = h; p + nn <= h + hn; p++) {
        p = memchr(p, n[0], (size_t)(h + hn - p));
        if (!p || p + nn > h + hn)
            return NULL;
        if (!memcmp(p, n, nn))
            return p;
    }
    return NULL;
}

/* multipart/form-data (RFC 7578): text parts become fields, the part named
 * "file" is kept aside. The names of file parts are NUL-terminated in a
 * copy held by the fields object ("\x01filename"). */
static int parse_multipart(srv_req *r, const char *ctype, json_t *o, srv_form_file *file)
{
    char boundary[256];
    if (header_param(ctype, strlen(ctype), "boundary", boundary, sizeof boundary) != 0 ||
        !boundary[0]) {
        srv_req_error(r, 400, "invalid_request", NULL,
                      "Invalid request: multipart/form-data without a boundary");
        return -1;
    }
    char delim[264];
    int dl = snprintf(delim, sizeof delim, "--%s", boundary);
    const char *b = r->body, *end = r->body + r->body_len;
    const char *p = memfind(b, (size_t)(end - b), delim, (size_t)dl);
    while (p) {
        p += dl;
        if (end - p >= 2 && p[0] == '-' && p[1] == '-')
            return 0; /* the closing delimiter */
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
            p += 2;
        else if (p < end && *p == '\n')
            p += 1;
        const char *hdr_end = memfind(p, (size_t)(end - p), "\r\n\r\n", 4);
        size_t sep = 4;
        if (!hdr_end) {
            hdr_end = memfind(p, (size_t)(end - p), "\n\n", 2);
            sep = 2;
        }
        if (!hdr_end)
            break;
        /* the part's Content-Disposition */
        char name[256] = "", filename[256] = "", ptype[64] = "";
        int has_filename = 0;
        for (const char *h = p; h < hdr_end;) {
            const char *eol = memchr(h, '\n', (size_t)(hdr_end - h));
            if (!eol)
                eol = hdr_end;
            size_t hl = (size_t)(eol - h);
            if (hl > 20 && !strncasecmp(h, "content-disposition:", 20)) {
                header_param(h, hl, "name", name, sizeof name);
                has_filename = header_param(h, hl, "filename", filename, sizeof filename) == 0;
            } else if (hl > 13 && !strncasecmp(h, "content-type:", 13)) {
                const char *v = h + 13;
                while (v < eol && (*v == ' ' || *v == '\t'))
                    v++;
                snprintf(ptype, sizeof ptype, "%.*s", (int)(eol - v), v);
            }
            h = eol + 1;
        }
        const char *data = hdr_end + sep;
        const char *next = memfind(data, (size_t)(end - data), delim, (size_t)dl);
        if (!next)
            break;
        const char *dend = next;
        if (dend - data >= 2 && dend[-2] == '\r' && dend[-1] == '\n')
            dend -= 2;
        else if (dend > data && dend[-1] == '\n')
            dend -= 1;
        if (has_filename || !strcmp(name, "file")) {
            if (!strcmp(name, "file") && !file->present) {
                file->present = 1;
                file->data = data;
                file->len = (size_t)(dend - data);
                /* a file part without a file name: its Content-Type names
                 * the format (docs/api.md) */
                if (!filename[0] && !strncasecmp(ptype, "text/html", 9))
                    snprintf(filename, sizeof filename, "file.html");
                else if (!filename[0] && !strncasecmp(ptype, "text/plain", 10))
                    snprintf(filename, sizeof filename, "file.txt");
                /* kept alive by the fields object */
                json_t *fn = json_string(filename);
                if (!fn) {
                    srv_req_error(r, 400, "invalid_request", "file",
                                  "Invalid request: the file name is not valid UTF-8");
                    return -1;
                }
                json_object_set_new(o, "\x01filename", fn);
                file->name = json_string_value(fn);
            }
        } else if (name[0]) {
            if (add_field(r, o, name, data, (size_t)(dend - data)) != 0)
                return -1;
        }
        p = next;
    }
    srv_req_error(r, 400, "invalid_request", NULL,
                  "Invalid request: malformed multipart/form-data body");
    return -1;
}

static int ctype_is(const char *ct, const char *want)
{
    size_t n = strlen(want);
    return ct && !strncasecmp(ct, want, n) && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ');
}

/* What jansson refuses and JSON allows (and Flask reads), made readable
 * in place without changing the body's length, for the keys and values
 * this API ignores:
 * - a NUL (\u0000) in an object key: no key this API knows has one, so in
 *   the keys each \u0000 becomes \ufffd: an unknown key stays unknown and
 *   is ignored, as any other;
 * - an integer of more than 18 digits (past int64): its last two digits
 *   become "e0", a real of nearly its size. The one integer field,
 *   alternatives, is out of range either way (400). */
static void neutralize_nul_keys(char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i] == '-' || (b[i] >= '0' && b[i] <= '9')) {
            size_t d = i + (b[i] == '-');
            size_t e = d;
            while (e < n && b[e] >= '0' && b[e] <= '9')
                e++;
            if (e - d > 18 && !(e < n && (b[e] == '.' || b[e] == 'e' || b[e] == 'E')))
                memcpy(b + e - 2, "e0", 2);
            i = e - 1;
            continue;
        }
        if (b[i] != '"')
            continue;
        size_t start = i++;
        int has_nul = 0;
        for (; i < n && b[i] != '"'; i++) {
            if (b[i] != '\\')
                continue;
            if (i + 5 < n && b[i + 1] == 'u' && !memcmp(b + i + 2, "0000", 4))
                has_nul = 1;
            i++; /* the escaped character (of \uXXXX, the rest is plain) */
        }
        if (!has_nul || i >= n)
            continue;
        size_t j = i + 1;
        while (j < n && (b[j] == ' ' || b[j] == '\t' || b[j] == '\r' || b[j] == '\n'))
            j++;
        if (j >= n || b[j] != ':')
            continue; /* a value: JSON_ALLOW_NUL keeps it */
        for (size_t k = start + 1; k + 5 < i; k++) {
            if (b[k] == '\\' && b[k + 1] == 'u' && !memcmp(b + k + 2, "0000", 4)) {
                memcpy(b + k + 2, "fffd", 4);
                k += 5;
            } else if (b[k] == '\\') {
                k++;
            }
        }
    }
}

/* LibreTranslate reads a request that is not JSON through Flask's
 * request.values: the query string's parameters, then the form's; on
 * /translate_file only api_key comes from the query string (source and
 * target from request.form). deep-translator sends q, source and target in
 * the query string with an empty body. */
static int query_fields(srv_req *r, json_t *o)
{
    if (!r->query || !*r->query)
        return 0;
    char *q = strdup(r->query);
    if (!q)
        return -1;
    json_t *all = json_object();
    int rc = all ? parse_form(r, q, all) : -1;
    free(q);
    const char *k;
    json_t *v;
    json_object_foreach(all, k, v)
    {
        if (rc == 0 && (r->ep != SRV_EP_TRANSLATE_FILE || !strcmp(k, "api_key")))
            rc = json_object_set(o, k, v) ? -1 : 0;
    }
    json_decref(all);
    return rc;
}

json_t *srv_form_fields(srv_req *r, const char *ctype, srv_form_file *file, int *is_json)
{
    *is_json = 0;
    memset(file, 0, sizeof *file);
    if (ctype_is(ctype, "application/json")) {
        *is_json = 1;
        json_error_t je;
        neutralize_nul_keys(r->body, r->body_len);
        json_t *root = json_loadb(r->body, r->body_len, JSON_ALLOW_NUL, &je);
        if (!root) {
            srv_req_error(r, 400, "invalid_json", NULL, "Invalid JSON at line %d column %d: %s",
                          je.line, je.column, je.text);
            return NULL;
        }
        if (!json_is_object(root)) {
            json_decref(root);
            srv_req_error(r, 400, "invalid_request", NULL, "Invalid JSON format");
            return NULL;
        }
        return root;
    }
    json_t *o = json_object(), *body = json_object();
    if (!o || !body) {
        json_decref(o);
        json_decref(body);
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return NULL;
    }
    int rc = query_fields(r, o);
    if (rc == 0 && ctype_is(ctype, "application/x-www-form-urlencoded"))
        rc = parse_form(r, r->body, body);
    else if (rc == 0 && ctype_is(ctype, "multipart/form-data"))
        rc = parse_multipart(r, ctype, body, file);
    /* any other type: the body has no fields, as request.values would have
     * none; the query string's count. A key in both: the query string's
     * (request.values.get reads the query string first). */
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (rc == 0 && !json_object_get(o, k))
            rc = json_object_set(o, k, v) ? -1 : 0;
    }
    json_decref(body);
    if (rc != 0) {
        if (r->call->status < 400)
            srv_req_error(r, 500, "internal", NULL, "out of memory");
        json_decref(o);
        return NULL;
    }
    return o;
}
