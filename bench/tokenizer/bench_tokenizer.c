/*
 * bench_tokenizer.c - SentencePiece encode/decode throughput of tokenizer/spm.c.
 *
 *   bench_tokenizer MODEL LINES.jsonl [--repeat N]
 *
 * LINES.jsonl holds one JSON string per line (tests/data/spm/lines.jsonl).
 * Prints one JSON line: lines/s and MB/s for encode and for decode, best of
 * --repeat passes. bench/tokenizer/run.sh runs the Python library on the
 * same file in the same run and prints the ratio.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spm.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tokenizer MODEL LINES.jsonl [--repeat N]\n");
        return 2;
    }
    int repeat = 5;
    if (argc == 5 && !strcmp(argv[3], "--repeat"))
        repeat = atoi(argv[4]);
    char err[512];
    spm_model *m = NULL;
    if (spm_load(&m, argv[1], err, sizeof err)) {
        fprintf(stderr, "bench_tokenizer: %s\n", err);
        return 1;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    char **lines = NULL;
    size_t *lens = NULL;
    int n = 0, cap = 0;
    size_t bytes = 0;
    char *buf = NULL;
    size_t bcap = 0;
    while (getline(&buf, &bcap, f) > 0) {
        json_error_t je;
        json_t *s = json_loads(buf, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!json_is_string(s)) {
            json_decref(s);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            lines = realloc(lines, (size_t)cap * sizeof *lines);
            lens = realloc(lens, (size_t)cap * sizeof *lens);
            if (!lines || !lens)
                return 1;
        }
        lens[n] = json_string_length(s);
        lines[n] = malloc(lens[n] + 1);
        memcpy(lines[n], json_string_value(s), lens[n] + 1);
        bytes += lens[n];
        n++;
        json_decref(s);
    }
    free(buf);
    fclose(f);
    int32_t **ids = calloc((size_t)n, sizeof *ids);
    int *nids = calloc((size_t)n, sizeof *nids);
    double best_enc = 1e30, best_dec = 1e30;
    long pieces = 0;
    for (int r = 0; r < repeat; r++) {
        double t0 = now();
        pieces = 0;
        for (int i = 0; i < n; i++) {
            free(ids[i]);
            if (spm_encode(m, lines[i], lens[i], &ids[i], &nids[i]))
                return 1;
            pieces += nids[i];
        }
        double t1 = now();
        for (int i = 0; i < n; i++) {
            char *text;
            size_t tl;
            if (spm_decode(m, ids[i], nids[i], &text, &tl))
                return 1;
            free(text);
        }
        double t2 = now();
        if (t1 - t0 < best_enc)
            best_enc = t1 - t0;
        if (t2 - t1 < best_dec)
            best_dec = t2 - t1;
    }
    printf("{\"impl\": \"transformerd\", \"lines\": %d, \"bytes\": %zu, \"pieces\": %ld, "
           "\"encode_lines_per_s\": %.0f, \"encode_mb_per_s\": %.2f, \"decode_lines_per_s\": %.0f}\n",
           n, bytes, pieces, n / best_enc, bytes / best_enc / 1e6, n / best_dec);
    for (int i = 0; i < n; i++) {
        free(lines[i]);
        free(ids[i]);
    }
    free(lines);
    free(lens);
    free(ids);
    free(nids);
    spm_free(m);
    return 0;
}
