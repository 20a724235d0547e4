/*
 * bench_util.h - what the CPU micro-benchmarks share: a monotonic clock in
 * seconds, a comparison for qsort of doubles (min and median of rounds) and
 * a CPU backend made through the registry, as --dtype asks for it.
 */
#ifndef TD_BENCH_UTIL_H
#define TD_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend.h"
#include "device.h"

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

/* The CPU backend with weights stored as store, n_threads threads; exits
 * with the registry's message where this CPU refuses it. */
static inline td_backend *bench_cpu_backend(td_store store, int n_threads)
{
    td_device dev;
    char err[256];
    if (td_device_resolve("cpu", &dev, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    const td_backend_params p = {.n_threads = n_threads, .store = store};
    td_backend *be = dev.create(&dev, &p, err, sizeof err);
    if (!be) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    return be;
}

#endif /* TD_BENCH_UTIL_H */
