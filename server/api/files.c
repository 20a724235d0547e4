/*
 * files.c - LibreTranslate's translated files, kept in memory for
 * /download_file (files.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    l->max_bytes = (size_t)s->o.max_files_bytes;
    l->ttl_s = s->o.file_ttl_s;
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
