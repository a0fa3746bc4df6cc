/* train_report.h — what `ctrain train` and `ctrain eval` say about a run: the
 * config record of --log, the data rates of an interval, the evaluation's
 * lines and records.
 *
 * The data figures of a report cover the interval since the previous one
 * (the difference of two FeedStats readings, train/feed/feed_types.h), so
 * warm-up, algorithm search and graph capture do not hide in an average:
 *   data N img/s     images the feed handed over / interval wall time
 *   capacity M       images / decoder busy time x its parallelism: what the
 *                    decoder could deliver if never held back
 *   wait P%          time the GPU stood still for a batch (its own clock,
 *                    train/feed/feed_gpu_wait.h; on the CPU the time the
 *                    step loop blocked) / interval wall time (large: the
 *                    data is the bottleneck)
 * --log writes them as data_images_per_s, data_capacity_per_s and
 * data_wait_frac, with cpu_fallback (images the GPU decoder left to the CPU,
 * so far); the config record names the decoder (decode). This process's
 * feed only (a data-parallel rank's share).
 */
#ifndef CTRAIN_TRAIN_REPORT_H
#define CTRAIN_TRAIN_REPORT_H

#include <stdio.h>
#include "models/model.h"
#include "train/feed/feed.h"
#include "train/loop/eval.h"
#include "train/loop/run_options.h"

/* The interval between readings a and b, dt seconds of wall time. */
typedef struct {
    double images_per_s, capacity_per_s, wait_frac;
} DataRates;
DataRates data_rates(const FeedStats *a, const FeedStats *b, double dt);

/* Move the interval's start reading `last` past what the feed did between
 * readings pre and post (an evaluation inside the interval), so the
 * interval's rates count training only. */
void feed_stats_skip(FeedStats *last, const FeedStats *pre, const FeedStats *post);

/* The --log config record: the command, revision, GPU and driver, the
 * environment settings given, and the resolved options. */
void log_config(FILE *f, const TrainOptions *o, const Model *m, Feed *fd, long total_steps,
                const Ctx *c, const char *cmdline);

/* --data mlm:SHARD: the evaluation scores masked tokens on the held-out tail */
int data_is_mlm(const TrainOptions *o);

/* The result's lines on stdout: masked-LM accuracy and perplexity, or top-1,
 * top-5, loss and the majority-class baseline (with per-class counts where
 * the feed names its classes). at: NULL for `ctrain eval` ("top-1 ..."),
 * a prefix during training ("" at the end: "test accuracy ...", or
 * "step 500: "). */
void eval_print(const EvalResult *ev, const TrainOptions *o, const Feed *fd, const char *at);

/* The --log "eval" record of a pass at `step`; final: the end of training
 * (train_s and the peak memory added). */
void eval_log(FILE *f, const TrainOptions *o, const EvalResult *ev, long step, int final,
              double train_s, size_t peak_bytes);

/* ctrain eval --json FILE: the result as one JSON object, written to a
 * temporary beside FILE and renamed over it (a failed write never replaces a
 * good file). */
void eval_write_json(const char *path, const TrainOptions *o, const char *data_desc,
                     const char *device, const EvalResult *ev);

#endif
