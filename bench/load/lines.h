/*
 * lines.h - the load benchmarks' input: the non-empty lines of a file.
 */
#ifndef BENCH_LOAD_LINES_H
#define BENCH_LOAD_LINES_H

/* Appends the file's non-empty lines (line ends stripped, each malloc'd) to
 * *lines (realloc'd), counting them in *n. 0, or -1 when the file cannot be
 * read or memory runs out. */
int bench_read_lines(const char *path, char ***lines, int *n);

/* Whitespace-separated (space, tab) words of s. */
int bench_count_words(const char *s);

/* The length class of each of the n lines by rank of its word count (ties
 * by position): cls[i] = 0 for the third with the fewest words, 2 for the
 * third with the most, 1 between; words[i] = its word count. 0, or -1 when
 * memory runs out. */
int bench_word_thirds(char *const *lines, int n, int *words, int *cls);

#endif
