/*
 * alloc_count.h - force-included (-include) into the daemon's sources by
 * the test_request_alloc target only: the daemon's own calls of malloc,
 * calloc, realloc, strdup and strndup go to the counters of
 * test_request_alloc.c. The libraries' allocations (jansson,
 * libmicrohttpd, ICU) and the engine's and tokenizer's (test_alloc counts
 * those) are not compiled with it. It includes nothing, so that a file's
 * own feature macros still come before the system headers.
 */
#ifndef TD_ALLOC_COUNT_H
#define TD_ALLOC_COUNT_H

#include <stddef.h>

void *tc_count_malloc(size_t n);
void *tc_count_calloc(size_t n, size_t size);
void *tc_count_realloc(void *p, size_t n);
char *tc_count_strdup(const char *s);
char *tc_count_strndup(const char *s, size_t n);

#define malloc(n) tc_count_malloc(n)
#define calloc(n, size) tc_count_calloc(n, size)
#define realloc(p, n) tc_count_realloc(p, n)
#define strdup(s) tc_count_strdup(s)
#define strndup(s, n) tc_count_strndup(s, n)

#endif /* TD_ALLOC_COUNT_H */
