/*
 * golden_check.h - runs the engine on the fixture models of
 * tests/data/fixtures and compares with the transformers goldens
 * (tools/make_fixtures.py). Shared by tests/test_golden.c (CPU) and
 * tests/gpu/test_gpu_golden.c (CUDA), which differ only in device and
 * tolerances.
 */
#ifndef TD_GOLDEN_CHECK_H
#define TD_GOLDEN_CHECK_H

#include <jansson.h>
#include <stddef.h>

#include "translator.h"

typedef struct golden_tol {
    double abs, rel;  /* scores: |got - want| <= abs + rel * |want| */
    double attn;      /* attention: max |got - want| */
    int half;         /* token mismatches are counted (for a % bar), not failed */
} golden_tol;

typedef struct golden_count {
    _Atomic long hyps, exact; /* hypotheses compared, token-exact ones */
} golden_count;

/* Fills names with the fixture directories that hold a golden.json, sorted;
 * returns how many (at most max). */
int golden_list(char (*names)[256], int max);

/* Runs every case of one fixture with one worker, the model loaded with lo
 * (device, dtype, precision; n_threads 0 is taken as 1); each case as
 * its batch and sentence by sentence. Returns the number of mismatches
 * (printed to stderr), or -1 with err set when the model or the golden
 * cannot be loaded. */
int golden_run_fixture(const char *variant, const td_load_opts *lo, const golden_tol *tol,
                       golden_count *count, char *err, size_t errlen);

/* Loads the fixture once and runs every case twice from each of n_workers
 * threads, each with its own worker (workers share one read-only model).
 * Returns mismatches, or -1 with err set. */
int golden_run_shared(const char *variant, const td_load_opts *lo, int n_workers,
                      const golden_tol *tol, golden_count *count, char *err, size_t errlen);

#endif /* TD_GOLDEN_CHECK_H */
