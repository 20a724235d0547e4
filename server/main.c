/*
 * main.c - the transformerd command line.
 *
 *   transformerd translate-ids --model DIR [--beam N] [--max-length N]
 *                              [--threads N] [--batch N]
 *       reads one sentence of space-separated source token ids per line
 *       from stdin and prints the best hypothesis' ids, its score and a tab
 *       between them, one line per input line, in order.
 *   transformerd serve ...      the HTTP daemon (issue 4, not built yet)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "translator.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: transformerd translate-ids --model DIR [--beam N] [--max-length N]\n"
            "                                  [--threads N] [--batch N] [--device cpu]\n"
            "       transformerd serve --model DIR ...   (not available yet)\n");
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "transformerd: %s: expected an integer in %d..%d, got '%s'\n", flag, lo,
                hi, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Parses one line of ids; returns the count or -1 on a malformed id. */
static int parse_ids(char *line, int32_t **ids, int *cap)
{
    int n = 0;
    for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        char *end;
        errno = 0;
        long v = strtol(tok, &end, 10);
        if (errno || *end || v < 0 || v > INT32_MAX)
            return -1;
        if (n == *cap) {
            int nc = *cap ? 2 * *cap : 64;
            int32_t *p = realloc(*ids, (size_t)nc * sizeof(int32_t));
            if (!p)
                return -1;
            *ids = p;
            *cap = nc;
        }
        (*ids)[n++] = (int32_t)v;
    }
    return n;
}

typedef struct pending {
    int32_t *ids;
    int len;
} pending;

static int flush(td_worker *w, pending *p, int n, const td_decode_opts *o)
{
    const int32_t *src[256] = {0};
    int len[256] = {0};
    td_result res[256];
    char err[512];
    for (int i = 0; i < n; i++) {
        src[i] = p[i].ids;
        len[i] = p[i].len;
    }
    if (td_translate_batch(w, src, len, n, o, res, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const td_hypothesis *h = &res[i].hyps[0];
        for (int t = 0; t < h->n_tokens; t++)
            printf(t ? " %d" : "%d", h->tokens[t]);
        printf("\t%.6f\n", (double)h->score);
        td_result_free(&res[i]);
    }
    return 0;
}

static int cmd_translate_ids(int argc, char **argv)
{
    const char *model = NULL, *device = "cpu";
    int beam = 0, max_length = 0, threads = 0, batch = 32;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "transformerd: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--device"))
            device = v;
        else if (!strcmp(a, "--beam")) {
            if (parse_int(a, v, 1, TD_MAX_BEAM, &beam))
                return 2;
        } else if (!strcmp(a, "--max-length")) {
            if (parse_int(a, v, 1, 1 << 20, &max_length))
                return 2;
        } else if (!strcmp(a, "--threads")) {
            if (parse_int(a, v, 0, 1024, &threads))
                return 2;
        } else if (!strcmp(a, "--batch")) {
            if (parse_int(a, v, 1, 256, &batch))
                return 2;
        } else {
            fprintf(stderr, "transformerd: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        i++;
    }
    if (!model) {
        fprintf(stderr, "transformerd: --model DIR is required\n");
        return 2;
    }
    char err[1024];
    td_model *m = NULL;
    td_load_opts lo = {.device = device, .n_threads = threads};
    if (td_model_load(&m, model, &lo, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s: %s\n", model, err);
        return 1;
    }
    td_decode_opts o;
    td_decode_opts_default(m, &o);
    if (beam)
        o.beam_size = beam;
    if (max_length)
        o.max_length = max_length;
    td_worker_opts wo = {.max_batch = batch, .max_length = o.max_length,
                         .max_beam = o.beam_size, .n_threads = threads};
    td_worker *w = NULL;
    if (td_worker_init(&w, m, &wo, err, sizeof err) != 0) {
        fprintf(stderr, "transformerd: %s\n", err);
        td_model_free(m);
        return 1;
    }
    pending *p = calloc((size_t)batch, sizeof(pending));
    int np = 0, rc = 0, lineno = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (p && getline(&line, &lcap, stdin) > 0) {
        lineno++;
        int cap = 0;
        p[np].ids = NULL;
        p[np].len = parse_ids(line, &p[np].ids, &cap);
        if (p[np].len <= 0) {
            fprintf(stderr, "transformerd: line %d: expected space-separated token ids\n", lineno);
            free(p[np].ids);
            rc = 1;
            break;
        }
        if (++np == batch) {
            if (flush(w, p, np, &o)) {
                rc = 1;
                break;
            }
            for (int i = 0; i < np; i++)
                free(p[i].ids);
            np = 0;
        }
    }
    if (rc == 0 && np > 0 && flush(w, p, np, &o))
        rc = 1;
    for (int i = 0; p && i < np; i++)
        free(p[i].ids);
    free(p);
    free(line);
    td_worker_free(w);
    td_model_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "translate-ids"))
        return cmd_translate_ids(argc - 2, argv + 2);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "serve")) {
        fprintf(stderr, "transformerd: 'serve' (the HTTP daemon) is not built yet; "
                        "translate-ids works today\n");
        return 2;
    }
    fprintf(stderr, "transformerd: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
