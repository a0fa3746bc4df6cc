/* bench_modes.h — `ctrain bench --max-batch` and `ctrain bench --soak`
 * (bench_modes.c says how each searches and measures). */
#ifndef CTRAIN_TRAIN_BENCH_MODES_H
#define CTRAIN_TRAIN_BENCH_MODES_H

#include "bench_session.h"

/* The largest batch for each model and precision (every pair, without and
 * with --recompute all); base gives the device, image size, seq and the
 * start batch (0: 16). */
int bench_max_batch(BenchSession *s, const BenchConfig *base, const ModelKind *models,
                    int n_models, const Precision *precisions, int n_precisions);
/* cfg->soak_s of cfg; rows into csv_path. Returns 1 when the soak saw a
 * non-finite loss or an error. */
int bench_soak(BenchSession *s, const BenchConfig *cfg, const char *csv_path);

#endif
