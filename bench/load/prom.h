/*
 * prom.h - reading samples back from the daemon's Prometheus text.
 */
#ifndef BENCH_LOAD_PROM_H
#define BENCH_LOAD_PROM_H

/* The sum of the samples of metric `name` over all its series (unlabelled,
 * or one per label set, e.g. one per model), restricted to the series whose
 * labels contain `label` (e.g. "le=\"0\"") when label is not NULL; 0 when
 * there is none. */
double prom_sum(const char *text, const char *name, const char *label);

#endif
