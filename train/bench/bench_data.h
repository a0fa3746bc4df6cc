/* bench_data.h — `ctrain bench --data DIR`: a real-data row beside each
 * synthetic one, measured in the same run and written to the same JSON.
 *
 * For every config of the suite whose model takes images (the ResNets), the
 * suite gets, right after the synthetic config, one real-data config per
 * decoder of --decode (default: "auto", the feed's own choice): the same
 * model, precision, batch, warm-up and timed window, reading the ImageFolder
 * DIR through the image feed (train/feed/feed.h) with --workers loader
 * threads (default: every logical CPU). BERT and the MLP take no images:
 * they keep their synthetic row only, and the header says so once.
 *
 * The timed window's rule. After the warm-up the loader's ring may hold up
 * to LOADER_DEFAULT_SLOTS (4) finished batches; steps that draw them measure
 * the model, not the data. A config with a real-data row therefore times at
 * least BENCH_DATA_MIN_STEPS = 2 x 4 = 8 steps, and the time limit may not
 * stop it earlier (min_steps likewise): at least 4 batches — one whole refill
 * of the ring — are made while the window runs. Its synthetic row gets the
 * same window, so the two rows differ only in the data.
 *
 * What a real-data row measures (over the timed window, from the feed's
 * FeedStats read before and after it: bench_run.c; field names and units in
 * bench_json.h): samples/s (median, as every row) and samples_per_s_mean
 * (all samples over the window's time: stalls count), the fraction of the
 * window the step waited for data, the decoder's delivered rate and its
 * capacity, the images the GPU decoder gave to the CPU, and what decoded.
 */
#ifndef CTRAIN_TRAIN_BENCH_DATA_H
#define CTRAIN_TRAIN_BENCH_DATA_H

#include "data/loader.h"
#include "bench_config.h"

#define BENCH_DATA_MAX_DECODE 3
#define BENCH_DATA_MIN_STEPS (2 * LOADER_DEFAULT_SLOTS)

typedef struct BenchData {
    char dir[512];                               /* "": no real-data rows */
    char decode[BENCH_DATA_MAX_DECODE][8];       /* "auto", "cpu", "gpu" */
    int n_decode;                                /* 0: {"auto"} */
    int workers;                                 /* 0: every logical CPU */
} BenchData;

/* --data V: DIR or imagefolder:DIR, which must be a folder (fatal, with a
 * hint, otherwise: before any config runs). */
void bench_data_parse_dir(BenchData *d, const char *v);
/* --decode LIST: comma-separated auto, cpu, gpu, each at most once (fatal
 * otherwise). */
void bench_data_parse_decode(BenchData *d, const char *v);

/* 1 when the model reads images (a real-data row is possible). */
int bench_data_takes_images(ModelKind model);

/* The suite with the real-data configs inserted after each image config's
 * synthetic one (and the window rule above applied to both); *cfgs is
 * reallocated. Returns the new count; unchanged without --data. */
int bench_data_expand(BenchConfig **cfgs, int n, const BenchData *d);

/* The header's lines about the real data (nothing without --data). */
void bench_data_print_header(const BenchData *d, const BenchConfig *cfgs, int n);
/* Under a real-data row of the table: what it measured against the
 * synthetic row of the same config (synth may be NULL). */
void bench_data_table_row(const BenchRow *real, const BenchRow *synth);

#endif
