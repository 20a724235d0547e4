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
