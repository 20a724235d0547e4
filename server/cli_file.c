/*
 * cli_file.c - `transformerd translate-file IN OUT`: a file translated
 * exactly as POST /translate_file translates it, without a socket.
 *
 * The service starts as `serve` starts it (serve's options, every model
 * loaded: srv_run_local), and the file goes to the documents' entry point
 * (service/docrun.h: the documents table, the text pipeline, the model's
 * batcher) in one call; the translation is written to OUT through a
 * temporary file renamed into place, so that OUT is never half written.
 * IN "-" is stdin (then --format names the format), OUT "-" is stdout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_file.h"
#include "docrun.h"
#include "files.h"
#include "languages.h"
#include "serve.h"

typedef struct file_job {
    const char *in, *out, *format, *source, *target;
    int overwrite;
    char *data; /* IN's bytes */
    size_t len;
} file_job;

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

static int run_file(srv_server *s, const srv_call_handler *h, void *ud)
{
    (void)h; /* no call: the documents' entry point directly */
    file_job *j = ud;
    const char *target = j->target;
    srv_langs L;
    srv_langs_now(s, &L);
    if (!target)
        target = L.np > 0 && !L.p[0].n_langs ? L.p[0].tgt : "en";
    char name[512];
    upload_name(j, name, sizeof name);
    const srv_doc_request q = {.data = j->data, .len = j->len, .ext = srv_files_ext(name),
                               .source = j->source, .target = target,
                               .overwrite = j->overwrite};
    srv_doc_result res;
    if (srv_doc_translate(s, &q, &res) != SRV_OK) {
        fprintf(stderr, "transformerd: %s: %s\n", j->in, res.why);
        free(res.data);
        return 1;
    }
    int rc = 1;
    if (write_out(j->out, res.data, res.len) != 0) {
        fprintf(stderr, "transformerd: %s: %s\n", j->out, strerror(errno));
    } else {
        fprintf(stderr, "transformerd: %s: %zu bytes", j->out, res.len);
        if (res.format->counts_kept)
            fprintf(stderr, ", %d units kept as they were", res.kept);
        if (res.format->counts_lost)
            fprintf(stderr, ", %d formattings lost", res.lost);
        fprintf(stderr, "\n");
        rc = 0;
    }
    free(res.data);
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
