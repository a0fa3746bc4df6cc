/* options.h — command-line options of `ctrain train` and `ctrain eval`.
 *
 * Parsing is strict: an unknown flag, a missing value, a number that does not
 * parse or is out of range each end with a message naming the flag and a
 * hint to run `ctrain train --help`.
 */
#ifndef CTRAIN_TRAIN_OPTIONS_H
#define CTRAIN_TRAIN_OPTIONS_H

#include <stdint.h>
#include "engine/ctx.h"
#include "engine/recompute.h"
#include "train/parallel/dist_env.h"
#include "train/loop/schedule.h"

typedef enum { OPT_SGD = 0, OPT_ADAMW, OPT_LAMB } OptimKind;
/* BERT's head: AUTO = classifier on a classification set (fortunes-cls), else MLM */
typedef enum { HEAD_AUTO = 0, HEAD_MLM, HEAD_CLS } HeadKind;

typedef struct TrainOptions {
    char model[32];          /* mlp | resnet18..152 | bert-tiny..large */
    char data[512];          /* synthetic | fashion-mnist[:DIR] | imagefolder:DIR | DIR */
    int epochs;              /* whole passes (when --steps is not given) */
    long steps;              /* optimizer steps; 0: run whole epochs */
    int batch;               /* samples per micro-batch */
    int accum;               /* micro-batches per optimizer step */
    OptimKind optim;
    float lr, momentum, weight_decay, label_smoothing, final_lr, clip;
    int nesterov, no_wd_bn_bias, zero_init_residual;
    long warmup;
    SchedKind schedule;
    uint64_t seed;
    Device device;
    int device_id;
    char precision[8];       /* fp32 | tf32 | fp16 | bf16 */
    RecomputePolicy recompute;
    int graph;               /* --graph: capture the step as CUDA graphs */
    long graph_warmup;       /* eager steps before the capture */
    int image_size;          /* 0: the data set's natural size for the model */
    int workers;
    int seq;                 /* BERT tokens per sequence */
    int classes;             /* 0: from the data */
    char save_path[512], load_path[512];
    long save_every;         /* --save-every N: a training checkpoint every N steps; 0: off */
    char resume_path[512];   /* --resume FILE: continue a training checkpoint */
    char log_path[512];
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

void train_options_default(TrainOptions *o);
/* Parse argv[0..argc) (the words after the subcommand). */
void train_options_parse(TrainOptions *o, int argc, char **argv, const char *cmd);
void train_options_usage(const char *cmd);
/* Autocast dtype for the precision string (DT_F32 for fp32 / tf32). */
DType options_autocast(const TrainOptions *o);
const char *optim_name(OptimKind k);

#endif
