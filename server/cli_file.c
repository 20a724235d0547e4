/*
 * cli_file.c - `transformerd translate-file IN OUT`: a file translated
 * exactly as POST /translate_file translates it, without a socket.
 *
 * The service starts as `serve` starts it (serve's options, every model
 * loaded: srv_run_local), one call is made in memory (a multipart body
 * with the file, source, target and overwrite) and handed to the API's
 * handler; the command waits for each step's work (the parse on the
 * document threads, the jobs, the render) as the transport would, then
 * takes the translated file from the file store and writes it to OUT
 * through a temporary file renamed into place, so that OUT is never half
 * written. IN "-" is stdin (then --format names the format), OUT "-" is
 * stdout.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "call.h"
#include "cli_file.h"
#include "clock.h"
#include "files.h"
#include "languages.h"
#include "serve.h"

typedef struct file_job {
    const char *in, *out, *format, *source, *target;
    int overwrite;
    char *data; /* IN's bytes */
    size_t len;
} file_job;

/* The call's transport: a header table of one and a wake-up. */
typedef struct local_io {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int resumed;
    char ctype[128];
} local_io;

static const char *lc_header(const srv_call *c, const char *name)
{
    const local_io *l = c->io_ctx;
    return !strcasecmp(name, "Content-Type") ? l->ctype : NULL;
}

static int lc_gone(const srv_call *c)
{
    (void)c;
    return 0;
}

static void lc_resume(srv_call *c)
{
    local_io *l = c->io_ctx;
    pthread_mutex_lock(&l->mu);
    l->resumed = 1;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

static const srv_call_io k_local_io = {lc_header, lc_gone, lc_resume, lc_resume};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: transformerd translate-file IN OUT [--format EXT] [--source LANG] "
            "[--target LANG] [--overwrite] [serve's options: --model DIR ...]\n"
            "  IN, OUT       the file and its translation (- : stdin, stdout); every format "
            "of POST /translate_file\n"
            "  --format      the format when IN's name does not say it (docx, .po...)\n"
            "  --source      the file's language (default: auto, detected)\n"
            "  --target      the language to translate into (default: the first model's "
            "target)\n"
            "  --overwrite   a catalogue's translated units too\n");
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        char *p = n == cap ? realloc(buf, cap *= 2) : buf;
        if (!p)
            free(buf);
        buf = p;
    }
    int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* The upload's name: IN's base name, with --format's extension after it. */
static void upload_name(const file_job *j, char *out, size_t n)
{
    const char *base = strrchr(j->in, '/');
    base = base ? base + 1 : j->in;
    if (!strcmp(base, "-"))
        base = "stdin";
    if (j->format)
        snprintf(out, n, "%s%s%s", base, j->format[0] == '.' ? "" : ".", j->format);
    else
        snprintf(out, n, "%s", base);
}

/* The multipart body of the call (malloc'd), its boundary absent from
 * the file. */
static char *multipart(const file_job *j, const char *target, char *ctype, size_t ctype_n,
                       size_t *len)
{
    char b[64], name[512];
    for (unsigned k = 0;; k++) {
        snprintf(b, sizeof b, "transformerd-file-%08x%u", (unsigned)j->len * 2654435761u, k);
        if (!memmem(j->data, j->len, b, strlen(b)))
            break;
    }
    upload_name(j, name, sizeof name);
    for (char *p = name; *p; p++) /* a quote would end the header's value */
        if (*p == '"' || *p == '\r' || *p == '\n')
            *p = '_';
    char head[2048];
    int hn = snprintf(head, sizeof head,
                      "--%s\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\n%s\r\n"
                      "--%s\r\nContent-Disposition: form-data; name=\"target\"\r\n\r\n%s\r\n"
                      "%s%s%s"
                      "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
                      "Content-Type: application/octet-stream\r\n\r\n",
                      b, j->source, b, target, j->overwrite ? "--" : "", j->overwrite ? b : "",
                      j->overwrite ? "\r\nContent-Disposition: form-data; name=\"overwrite\""
                                     "\r\n\r\ntrue\r\n"
                                   : "",
                      b, name);
    char tail[96];
    int tn = snprintf(tail, sizeof tail, "\r\n--%s--\r\n", b);
    if (hn < 0 || (size_t)hn >= sizeof head)
        return NULL;
    char *body = malloc((size_t)hn + j->len + (size_t)tn + 1);
    if (!body)
        return NULL;
    memcpy(body, head, (size_t)hn);
    memcpy(body + hn, j->data, j->len);
    memcpy(body + hn + j->len, tail, (size_t)tn + 1);
    *len = (size_t)hn + j->len + (size_t)tn;
    snprintf(ctype, ctype_n, "multipart/form-data; boundary=%s", b);
    return body;
}

/* data into path through a temporary file renamed into place (or stdout). */
static int write_out(const char *path, const char *data, size_t len)
{
    if (!strcmp(path, "-"))
        return fwrite(data, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : -1;
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return -1;
    snprintf(tmp, n, "%s.tmp-%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(data, 1, len, f) == len;
    ok = f && fclose(f) == 0 && ok;
    ok = ok && rename(tmp, path) == 0;
    if (!ok)
        unlink(tmp);
    free(tmp);
    return ok ? 0 : -1;
}

/* The answer: the file written (0), or the error said (1). */
static int take_answer(srv_server *s, const file_job *j, const srv_call *c)
{
    json_t *root = c->reply ? json_loadb(c->reply, c->reply_len, 0, NULL) : NULL;
    int rc = 1;
    if (c->status != 200) {
        const char *msg = json_string_value(json_object_get(root, "error"));
        fprintf(stderr, "transformerd: %s: %s (%d)\n", j->in, msg ? msg : "failed", c->status);
        json_decref(root);
        return 1;
    }
    const char *url = json_string_value(json_object_get(root, "translatedFileUrl"));
    const char *name = url ? strstr(url, "/download_file/") : NULL;
    char *data = NULL;
    size_t len = 0;
    const char *ctype;
    if (!name || srv_files_get(s->libre, name + strlen("/download_file/"), &data, &len, &ctype)) {
        fprintf(stderr, "transformerd: %s: the translation was not kept\n", j->in);
    } else if (write_out(j->out, data, len) != 0) {
        fprintf(stderr, "transformerd: %s: %s\n", j->out, strerror(errno));
    } else {
        json_t *kept = json_object_get(root, "keptUnits"), *lost = json_object_get(root, "lostSpans");
        fprintf(stderr, "transformerd: %s: %zu bytes", j->out, len);
        if (kept)
            fprintf(stderr, ", %lld units kept as they were", (long long)json_integer_value(kept));
        if (lost)
            fprintf(stderr, ", %lld formattings lost", (long long)json_integer_value(lost));
        fprintf(stderr, "\n");
        rc = 0;
    }
    free(data);
    json_decref(root);
    return rc;
}

static int run_file(srv_server *s, const srv_call_handler *h, void *ud)
{
    file_job *j = ud;
    const char *target = j->target;
    srv_langs L;
    srv_langs_now(s, &L);
    if (!target)
        target = L.np > 0 && !L.p[0].n_langs ? L.p[0].tgt : "en";
    local_io io = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    size_t len;
    char *body = multipart(j, target, io.ctype, sizeof io.ctype, &len);
    srv_call *c = body ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        free(body);
        fprintf(stderr, "transformerd: out of memory\n");
        return 1;
    }
    *c = (srv_call){.method = "POST", .path = "/translate_file", .host = "localhost",
                    .client = "-", .t0 = srv_now(), .body = body, .body_len = len,
                    .io = &k_local_io, .io_ctx = &io};
    srv_call_next nx = h->head(h->ctx, c);
    if (nx == SRV_NEXT_BODY)
        nx = h->body(h->ctx, c);
    while (nx == SRV_NEXT_PENDING) { /* each step's work: the parse, the jobs, the render */
        pthread_mutex_lock(&io.mu);
        while (!io.resumed)
            pthread_cond_wait(&io.cv, &io.mu);
        io.resumed = 0;
        pthread_mutex_unlock(&io.mu);
        nx = h->resumed(h->ctx, c);
    }
    int rc = take_answer(s, j, c);
    h->done(h->ctx, c, c->status, srv_now() - c->t0);
    if (c->streaming)
        pthread_mutex_destroy(&c->stream_mu);
    free(c->reply);
    srv_call_free_arena(c);
    free(c->body);
    free(c);
    return rc;
}

int cli_translate_file(int argc, char **argv)
{
    file_job j = {.source = "auto"};
    if (argc >= 1 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || (argv[0][0] == '-' && argv[0][1]) || (argv[1][0] == '-' && argv[1][1])) {
        usage(stderr);
        return 2;
    }
    j.in = argv[0];
    j.out = argv[1];
    /* our options out, serve's left */
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nr = 0;
    if (!rest)
        return 1;
    for (int i = 2; i < argc; i++) {
        const char **val = !strcmp(argv[i], "--format")   ? &j.format
                           : !strcmp(argv[i], "--source") ? &j.source
                           : !strcmp(argv[i], "--target") ? &j.target
                                                          : NULL;
        if (val && i + 1 == argc) {
            fprintf(stderr, "transformerd: %s needs a value\n", argv[i]);
            free(rest);
            return 2;
        }
        if (val)
            *val = argv[++i];
        else if (!strcmp(argv[i], "--overwrite"))
            j.overwrite = 1;
        else
            rest[nr++] = argv[i];
    }
    if (!strcmp(j.in, "-") && !j.format) {
        fprintf(stderr, "transformerd: IN - (stdin) needs --format\n");
        free(rest);
        return 2;
    }
    j.data = read_all(j.in, &j.len);
    if (!j.data) {
        fprintf(stderr, "transformerd: %s: %s\n", j.in, strerror(errno ? errno : ENOMEM));
        free(rest);
        return 1;
    }
    int rc = srv_run_local(nr, rest, run_file, &j);
    free(j.data);
    free(rest);
    return rc;
}
