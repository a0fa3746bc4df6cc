/* bench_run.h — what the benchmark's measuring children run: one config
 * (its warm-up, the timed steps, one "result" line), and the soak (one
 * config for a duration, a "row" line now and then). Both build the run
 * with train/loop/run.h from bench_train_options (bench_config.h).
 */
#ifndef CTRAIN_TRAIN_BENCH_RUN_H
#define CTRAIN_TRAIN_BENCH_RUN_H

#include <stdio.h>
#include "bench_config.h"

void bench_child_config(FILE *out, const void *cfg);     /* BenchConfig */
void bench_child_soak(FILE *out, const void *cfg);       /* BenchConfig */

/* The median of n values (sorted in place): the mean of the middle two
 * when n is even. */
double bench_median(double *v, int n);
/* The q-quantile (0..1) of n sorted values, linear between the nearest two
 * (numpy.percentile's default); NaN when n is 0. */
double bench_percentile(const double *sorted, int n, double q);

#endif
