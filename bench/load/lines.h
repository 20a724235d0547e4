/*
 * lines.h - the load benchmarks' input: the non-empty lines of a file.
 */
#ifndef BENCH_LOAD_LINES_H
#define BENCH_LOAD_LINES_H

/* Appends the file's non-empty lines (line ends stripped, each malloc'd) to
 * *lines (realloc'd), counting them in *n. 0, or -1 when the file cannot be
 * read or memory runs out. */
int bench_read_lines(const char *path, char ***lines, int *n);

#endif
