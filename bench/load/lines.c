/*
 * lines.c - the load benchmarks' input (lines.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lines.h"

int bench_read_lines(const char *path, char ***lines, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int alloc = *n, rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (len == 0)
            continue;
        if (*n == alloc) {
            alloc = alloc ? 2 * alloc : 256;
            char **grown = realloc(*lines, (size_t)alloc * sizeof **lines);
            if (!grown) {
                rc = -1;
                break;
            }
            *lines = grown;
        }
        if (!((*lines)[*n] = strdup(line)))
            rc = -1;
        else
            (*n)++;
    }
    free(line);
    fclose(f);
    return rc;
}

int bench_count_words(const char *s)
{
    int n = 0, in = 0;
    for (; *s; s++) {
        const int sp = *s == ' ' || *s == '\t';
        n += !sp && !in;
        in = !sp;
    }
    return n;
}

static const int *g_sort_words;
static int cmp_by_words(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    if (g_sort_words[x] != g_sort_words[y])
        return g_sort_words[x] < g_sort_words[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

int bench_word_thirds(char *const *lines, int n, int *words, int *cls)
{
    int *ord = malloc((size_t)(n > 0 ? n : 1) * sizeof *ord);
    if (!ord)
        return -1;
    for (int i = 0; i < n; i++) {
        words[i] = bench_count_words(lines[i]);
        ord[i] = i;
    }
    g_sort_words = words;
    qsort(ord, (size_t)n, sizeof *ord, cmp_by_words);
    const int third = n / 3;
    for (int r = 0; r < n; r++)
        cls[ord[r]] = r < third ? 0 : r >= n - third ? 2 : 1;
    free(ord);
    return 0;
}
