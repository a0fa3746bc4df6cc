/* bench_dist.h — `ctrain bench --gpus N`, the scaling mode (bench_dist.c). */
#ifndef CTRAIN_TRAIN_BENCH_DIST_H
#define CTRAIN_TRAIN_BENCH_DIST_H

#include "bench_session.h"

/* Each config on 1 GPU, then on N (one rank per GPU, the same per-GPU
 * batch); both rows, then per-GPU and total samples/s and the scaling
 * efficiency total_N / (N x one GPU). Returns 0. */
int bench_scaling(BenchSession *s, const BenchConfig *cfgs, int n, int gpus);

#endif
