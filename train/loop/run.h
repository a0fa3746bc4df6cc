/* run.h — the one run builder: `ctrain train`, `ctrain eval` and the
 * bench's child build their run here, from the decisions (TrainOptions,
 * run_options.h), and free it here.
 *
 * run_open, in this order (each step's side effects, messages and errors
 * are the ones `ctrain train` has always had):
 *   dist_setup        [spec->dist] this process may be a data-parallel rank:
 *                     its GPU; ranks other than 0 drop --log and --save
 *   --log FILE        [training] opened for writing (rank 0 only)
 *   context           device, seed, precision (precision_apply); a note when
 *                     reduced precision runs on the CPU reference backend
 *   dist_start        [a rank] rendezvous and NCCL; the feed takes its share
 *   feed              feed_open of train_options_feed_spec, or spec->open_feed;
 *                     o.vocab_size from it. Evaluation: batch 1 (the training
 *                     side is unused) and the held-out split is required
 *   model             model_build (the BERT head: train_options_head)
 *   --load FILE       evaluation: the weights, strictly; training: the start
 *                     weights (a BERT classifier takes a pre-trained MLM's
 *                     encoder and keeps its new pooler and classifier)
 * and for training:
 *   steps             optimizer steps per epoch (fatal with a hint when an
 *                     epoch is shorter than one step), the total (--steps, or
 *                     --epochs whole passes) and the epochs it spans
 *   trainer           trainer_init over the total (train/loop/step.h)
 *   --resume FILE     the training state, before the ranks synchronize
 *   trainer_dist_attach  [a rank] rank 0's weights to all, the gradient buckets
 * run_close frees in reverse: data parallel, the log, trainer, model, feed,
 * context.
 *
 * What differs between the three callers is in RunSpec: `ctrain train`
 * {RUN_TRAIN, dist 1}; `ctrain eval` {RUN_EVAL}; the bench's child
 * {RUN_TRAIN, dist when the config has several GPUs, its own feed for the
 * MLP's synthetic features}. The bench never sets --log, --load or --resume.
 */
#ifndef CTRAIN_TRAIN_RUN_H
#define CTRAIN_TRAIN_RUN_H

#include <stdio.h>
#include "engine/ctx.h"
#include "models/model.h"
#include "train/feed/feed.h"
#include "run_options.h"
#include "step.h"

typedef enum { RUN_TRAIN = 0, RUN_EVAL } RunGoal;

/* A feed other than feed_open's, made on the run's context. */
typedef void (*RunFeedOpen)(Feed *f, Ctx *c, const TrainOptions *o);

typedef struct RunSpec {
    RunGoal goal;            /* RUN_EVAL: no log, trainer or data parallel */
    int dist;                /* call dist_setup: the process may be one rank of several */
    RunFeedOpen open_feed;   /* NULL: feed_open */
} RunSpec;

typedef struct Run {
    TrainOptions o;          /* the decisions, with dist_setup's answer applied (a rank's GPU) */
    struct Dist *dist;       /* a data-parallel rank (train/parallel/dist.h); NULL alone */
    FILE *log;               /* --log FILE; NULL when not asked (or not rank 0) */
    Ctx c;
    Feed fd;
    Model m;
    Trainer tr;              /* RUN_TRAIN only */
    long steps_per_epoch;    /* RUN_TRAIN: optimizer steps per pass over the feed */
    long total_steps;        /* the run's optimizer steps */
    long epochs;             /* passes those steps span (the last may be partial) */
    RunGoal goal;
} Run;

void run_open(Run *r, const TrainOptions *o, const RunSpec *spec);
void run_close(Run *r);

#endif
