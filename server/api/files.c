/*
 * files.c - LibreTranslate's translated files, kept in memory for
 * /download_file, their names and their download (files.h).
 */
#include <ctype.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "files.h"

typedef struct stored_file {
    char name[SRV_FILE_NAME_MAX]; /* <32 hex>.<secure file name> */
    char *data;
    size_t len;
    const char *ctype;
    double expires;
} stored_file;

struct srv_libre {
    pthread_mutex_t mu; /* guards the store */
    stored_file *files;
    int n_files, cap;
    size_t bytes;
    size_t max_bytes;
    int ttl_s;
};

srv_libre *srv_libre_new(const srv_server *s, char *err, size_t errlen)
{
    srv_libre *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    l->max_bytes = (size_t)s->api->max_files_bytes;
    l->ttl_s = s->api->file_ttl_s;
    return l;
}

void srv_libre_free(srv_libre *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->n_files; i++)
        free(l->files[i].data);
    free(l->files);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static void drop_file(srv_libre *l, int i)
{
    l->bytes -= l->files[i].len;
    free(l->files[i].data);
    memmove(&l->files[i], &l->files[i + 1], (size_t)(l->n_files - i - 1) * sizeof *l->files);
    l->n_files--;
}

/* Stores data (taken) under name; the oldest files make room. 0, or -1
 * when the file alone exceeds the store or out of memory (data freed). */
int srv_files_put(srv_libre *l, const char *name, char *data, size_t len, const char *ctype)
{
    if (len > l->max_bytes) {
        free(data);
        return -1;
    }
    pthread_mutex_lock(&l->mu);
    double now = srv_now();
    for (int i = 0; i < l->n_files;)
        if (l->files[i].expires <= now)
            drop_file(l, i);
        else
            i++;
    while (l->n_files > 0 && l->bytes + len > l->max_bytes)
        drop_file(l, 0); /* the oldest: files are kept in insertion order */
    int rc = -1;
    if (l->n_files == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        stored_file *p = realloc(l->files, (size_t)cap * sizeof *p);
        if (p) {
            l->files = p;
            l->cap = cap;
        }
    }
    if (l->n_files < l->cap) {
        stored_file *f = &l->files[l->n_files++];
        snprintf(f->name, sizeof f->name, "%s", name);
        f->data = data;
        f->len = len;
        f->ctype = ctype;
        f->expires = now + l->ttl_s;
        l->bytes += len;
        rc = 0;
    } else {
        free(data);
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

/* A copy of the stored file name (malloc'd into *data), or -1. */
int srv_files_get(srv_libre *l, const char *name, char **data, size_t *len,
                  const char **ctype)
{
    int rc = -1;
    pthread_mutex_lock(&l->mu);
    double now = srv_now();
    for (int i = 0; i < l->n_files; i++) {
        stored_file *f = &l->files[i];
        if (strcmp(f->name, name) != 0 || f->expires <= now)
            continue;
        *data = malloc(f->len + 1);
        if (*data) {
            memcpy(*data, f->data, f->len);
            (*data)[f->len] = 0;
            *len = f->len;
            *ctype = f->ctype;
            rc = 0;
        } else {
            rc = -2;
        }
        break;
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

/* A file name as werkzeug's secure_filename keeps it: ASCII letters,
 * digits, '.', '-' and '_', spaces as '_', no leading dots. */
static void secure_name(const char *in, char *out, size_t outn)
{
    const char *base = strrchr(in, '/');
    base = base ? base + 1 : in;
    const char *bs = strrchr(base, '\\');
    base = bs ? bs + 1 : base;
    size_t k = 0;
    for (const char *p = base; *p && k + 1 < outn; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c) || c == '.' || c == '-' || c == '_')
            out[k++] = (char)c;
        else if (c == ' ')
            out[k++] = '_';
    }
    out[k] = 0;
    size_t lead = strspn(out, "._");
    memmove(out, out + lead, k - lead + 1);
}

const char *srv_files_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot ? dot : "";
}

int srv_files_new_name(const char *upload, const char *ext, char *safe, size_t safe_n,
                       char *name, size_t name_n)
{
    secure_name(upload, safe, safe_n);
    if (!safe[0] || !strcmp(safe, srv_files_ext(safe)))
        snprintf(safe, safe_n, "file%s", ext);
    unsigned char rnd[16];
    char hex[33];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, rnd, sizeof rnd) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof rnd)
        return -1;
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
    snprintf(name, name_n, "%s.%s", hex, safe);
    return 0;
}

void srv_files_answer_download(srv_req *r, const char *prefix)
{
    const char *name = r->path ? r->path + strlen(prefix) : "";
    /* REPLICA/NAME (with --replica-id): another replica's file is 421, so
     * that a balancer's misrouting is told apart from an expired file
     * (404). Without --replica-id, or when the first part is no replica's
     * name (".."), a '/' makes an invalid file name below (400). */
    const char *rid = r->s->api->replica_id ? r->s->api->replica_id : "";
    const char *slash = rid[0] ? strchr(name, '/') : NULL;
    size_t rl = slash ? (size_t)(slash - name) : 0;
    if (slash && rl > 0 && rl <= 40 && name[0] != '.' &&
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == rl) {
        if (strlen(rid) != rl || strncmp(name, rid, rl) != 0) {
            srv_req_error(r, 421, "misdirected", NULL,
                          "the file is held by replica '%.*s', this is '%s': the balancer must "
                          "route /download_file/REPLICA/ to that replica",
                          (int)rl, name, rid);
            return;
        }
        name = slash + 1;
    }
    size_t n = strlen(name);
    int ok = n > 0 && n < SRV_FILE_NAME_MAX && name[0] != '.';
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)name[i]) || name[i] == '.' || name[i] == '-' ||
             name[i] == '_';
    if (!ok) {
        srv_req_error(r, 400, "invalid_request", NULL, "Invalid filename");
        return;
    }
    char *data = NULL;
    size_t len = 0;
    const char *ctype = NULL;
    int rc = srv_files_get(r->s->libre, name, &data, &len, &ctype);
    if (rc == -2) {
        srv_req_error(r, 500, "internal", NULL, "out of memory");
        return;
    }
    if (rc != 0) {
        srv_req_error(r, 404, "not_found", NULL,
                      "no such file: it expired (--file-ttl-s %d) or never existed",
                      r->s->api->file_ttl_s);
        return;
    }
    /* the name the client saves: without the random prefix */
    const char *dot = strchr(name, '.');
    size_t dl = strlen(dot + 1) + 64;
    char *disp = malloc(dl);
    if (disp)
        snprintf(disp, dl, "attachment; filename=%s", dot + 1);
    srv_req_reply(r, 200, ctype, data, len);
    if (disp)
        srv_req_header(r, "Content-Disposition", disp);
    free(disp);
}
