/* run_options.h — the decisions one training or evaluation run is built
 * from (train/loop/run.h builds it): a plain struct with its defaults. The
 * CLI fills it from argv (train/cli/options.c), the bench from a config
 * (train/bench/bench_config.c), the tests directly; nothing here parses a
 * command line.
 *
 * Each setting is a typed value decided once: the model kind
 * (models/model.h), the precision (precision.h), the optimizer
 * (train/optim/optimizer.h), the schedule (schedule.h), the data-parallel
 * options (train/parallel/dist_env.h). Derived decisions are functions of
 * it, each written once: the BERT head (train_options_head), the feed's
 * spec (train_options_feed_spec), optimizer steps per epoch
 * (train_steps_per_epoch).
 */
#ifndef CTRAIN_TRAIN_RUN_OPTIONS_H
#define CTRAIN_TRAIN_RUN_OPTIONS_H

#include <stdint.h>
#include "engine/ctx.h"
#include "engine/recompute.h"
#include "models/model.h"
#include "train/feed/feed.h"
#include "train/optim/optimizer.h"
#include "train/parallel/dist_env.h"
#include "precision.h"
#include "schedule.h"

/* The most optimizer steps a run may have (--steps, --warmup, --save-every,
 * and --epochs times the steps per epoch): 10^12, 30 years at 1000 steps/s.
 * The step counter is a long and the micro-batch counter (steps x --accum,
 * at most 2^16) must fit in 64 bits with room to spare; a larger --steps is
 * a typo, not a run. */
#define TRAIN_MAX_STEPS 1000000000000L

/* BERT's head: AUTO = classifier on a classification set (fortunes-cls), else MLM */
typedef enum { HEAD_AUTO = 0, HEAD_MLM, HEAD_CLS } HeadKind;

typedef struct TrainOptions {
    ModelKind model;         /* --model */
    char data[512];          /* synthetic | fashion-mnist[:DIR] | imagefolder:DIR | DIR */
    int epochs;              /* whole passes (when --steps is not given) */
    long steps;              /* optimizer steps; 0: run whole epochs */
    int batch;               /* samples per micro-batch */
    int accum;               /* micro-batches per optimizer step */
    OptimConfig optim;       /* --optim, --momentum, --wd, --nesterov */
    float lr, label_smoothing, final_lr, clip;
    int no_wd_bn_bias, zero_init_residual;
    long warmup;
    SchedKind schedule;
    uint64_t seed;
    Device device;
    int device_id;
    Precision precision;     /* --precision */
    RecomputePolicy recompute;
    int graph;               /* --graph: capture the step as CUDA graphs */
    int no_eval;             /* --no-eval: no evaluation at the end of training */
    long eval_every;         /* --eval-every N: also evaluate every N steps; 0: only at the end */
    uint64_t given;          /* the flags the command line gave, a bit each (train/cli/options.c) */
    long graph_warmup;       /* eager steps before the capture */
    int image_size;          /* 0: the data set's natural size for the model */
    int width;               /* ResNet stem width; 0: the model's 64 (not a flag: the CPU
                                bench's narrow ResNet18) */
    int workers;
    char decode[8];          /* --decode: auto | gpu | cpu (train/feed/feed_decode.h) */
    int seq;                 /* BERT tokens per sequence */
    int classes;             /* 0: from the data */
    char save_path[512], load_path[512];
    long save_every;         /* --save-every N: a training checkpoint every N steps; 0: off */
    char resume_path[512];   /* --resume FILE: continue a training checkpoint */
    unsigned resume_change;  /* --resume-change FLAG,...: a bit per option that may differ
                                from the checkpoint's (resume_check.h) */
    char log_path[512];
    char json_path[512];     /* ctrain eval --json FILE: the result as one JSON object */
    int log_every;
    int trace;
    int hidden[8];
    int n_hidden;
    int eval_batch;
    char vocab[512];         /* BERT: vocab.txt */
    HeadKind head;           /* --head mlm | cls */
    int vocab_size;          /* BERT: not a flag; the feed's vocabulary, set before model_build */
    float dropout;           /* --dropout: BERT hidden + attention dropout; < 0: the model's 0.1 */
    DistOptions dist;        /* --gpus, --bucket-mb, --sync-bn, --dist-timeout, --grad-reduce
                                (train/parallel/dist.h) */
} TrainOptions;

/* `ctrain train`'s defaults: the MLP on Fashion-MNIST, SGD lr 0.05
 * momentum 0.9, batch 64, fp32 on the CPU (the CLI picks CUDA when present). */
void train_options_default(TrainOptions *o);

/* The BERT head this run trains: --head, or with AUTO the classifier on a
 * classification set (fortunes-cls) and MLM otherwise. HEAD_MLM or HEAD_CLS
 * (meaningful for BERT only). */
HeadKind train_options_head(const TrainOptions *o);

/* The feed for these options (its strings point into o). */
FeedSpec train_options_feed_spec(const TrainOptions *o);

/* Optimizer steps per pass over a feed of batches_per_epoch micro-batches,
 * accum per step; 0 when an epoch has fewer micro-batches than one step. */
long train_steps_per_epoch(long batches_per_epoch, int accum);

#endif
