/* bench_options.h — `ctrain bench`'s options (BenchOptions) and their
 * parser, with the usage text: every mistake a user can make on the command
 * line ends here with a message and a hint, before anything is measured.
 * The parsing loop is every command's (cli_opts.h).
 */
#ifndef CTRAIN_TRAIN_BENCH_OPTIONS_H
#define CTRAIN_TRAIN_BENCH_OPTIONS_H

#include "cli_opts.h"
#include "engine/ctx.h"
#include "engine/recompute.h"
#include "models/model.h"
#include "train/loop/precision.h"
#include "bench_data.h"

#define BENCH_MAX_LIST 16

typedef struct BenchOptions {
    ModelKind models[BENCH_MAX_LIST];
    int n_models;
    Precision precs[BENCH_MAX_LIST];
    int n_precs;
    int batches[BENCH_MAX_LIST], n_batches;
    int seqs[BENCH_MAX_LIST], n_seqs;
    int quick, steps, warmup;       /* -1: the mode's default */
    double time_limit_s;
    int image_size;
    RecomputePolicy recompute;
    int graph_modes;                /* bit 0: eager, bit 1: graph */
    int device_set;
    Device device;
    int device_id;
    int max_batch;
    int list;                       /* --list: print and write the suite, measure nothing */
    double soak_s;
    char soak_csv[512];
    int soak_every;
    char json_path[512];
    int gpus;                       /* --gpus N: the scaling mode (bench_dist.c) */
    DType grad_reduce;              /* --grad-reduce: f32 (default) or bf16 on the N GPUs */
    BenchData data;                 /* --data, --decode, --workers: the real-data rows */
    int decode_set, workers_set;
} BenchOptions;

/* Parse argv (the arguments after "bench"); --help prints the usage and
 * exits 0, a bad option is fatal with a hint. */
void bench_options_parse(BenchOptions *o, int argc, char **argv);

#endif
