/* bench_rank.h — the ranks of `ctrain bench --gpus N`: the child of an
 * N-GPU config launches N processes of the hidden `ctrain bench-rank`, each
 * one rank running the ordinary config (bench_run.h). */
#ifndef CTRAIN_TRAIN_BENCH_RANK_H
#define CTRAIN_TRAIN_BENCH_RANK_H

#include <stdio.h>

/* The child of a config with cfg->gpus > 1 (BenchConfig): launches the ranks. */
void bench_child_dist(FILE *out, const void *cfg);
/* The hidden `ctrain bench-rank`: one rank of a `bench --gpus N` config;
 * the config comes from the environment. */
int cmd_bench_rank(int argc, char **argv);

#endif
