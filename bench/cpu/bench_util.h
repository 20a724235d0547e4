/*
 * bench_util.h - what the CPU micro-benchmarks share: a monotonic clock in
 * seconds and a comparison for qsort of doubles (min and median of rounds).
 */
#ifndef TD_BENCH_UTIL_H
#define TD_BENCH_UTIL_H

#include <time.h>

static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmpd(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif /* TD_BENCH_UTIL_H */
