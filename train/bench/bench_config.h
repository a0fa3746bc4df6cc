/* bench_config.h — one benchmark measurement as the parent describes it to
 * a child (BenchConfig: model kind, precision, batch, steps, ...), what
 * comes back for it (BenchRow), and what both sides derive from a config:
 * its label, the model's shape fields, the training options it runs with
 * and its FLOPs per sample. The lowest file of the bench (train/bench/bench.h
 * says how the files stack); nothing here touches CUDA.
 */
#ifndef CTRAIN_TRAIN_BENCH_CONFIG_H
#define CTRAIN_TRAIN_BENCH_CONFIG_H

#include <stddef.h>
#include "engine/ctx.h"
#include "engine/recompute.h"
#include "models/model.h"
#include "train/loop/precision.h"
#include "train/loop/run_options.h"
#include "bench_json.h"

typedef struct BenchConfig {
    ModelKind model;
    Precision precision;
    int batch;
    int seq;                 /* BERT tokens per sequence; 0 for images */
    int image_size;          /* ResNet input side; 0 for text and the MLP */
    int width;               /* ResNet stem width; 0: the model's own (64) */
    int classes;             /* images: classes of the synthetic labels; 0: 1000 */
    RecomputePolicy recompute;
    int graph;               /* capture the step as CUDA graphs during the warm-up */
    int warmup;              /* untimed steps (cuDNN algorithm search happens here) */
    int steps;               /* timed steps (more while min_time_s has not passed) */
    int min_steps;           /* timed steps always run before time_limit_s may stop them */
    double min_time_s;       /* keep timing until this long has passed (NVML's power reading
                                is a ~1 s running average: a shorter window misreads it) */
    double time_limit_s;     /* stop timing after this long (0: no limit) */
    Device device;
    int device_id;
    int gpus;                /* > 1: data parallel on this many GPUs, one rank each (bench_rank.c) */
    DType grad_reduce;       /* with gpus > 1: the gradient all-reduce's type (--grad-reduce) */
    /* --soak */
    double soak_s;           /* run this long after warm-up */
    int soak_every;          /* a row every N steps; 0: every soak_interval_s */
    double soak_interval_s;
    /* --data DIR (bench_data.c): a real-data row reads this ImageFolder; "" synthetic */
    char data[512];
    char decode[8];          /* the decoder it asks for: "auto", "cpu", "gpu" */
    int workers;             /* its loader threads */
} BenchConfig;

/* What came back for one config. r's strings point into the buffers. */
typedef struct BenchRow {
    BenchResult r;
    char model[32], precision[8], layout[8], mode[64], throttle[160], error[256];
    char data[512], decode[8], decoder[64];       /* r.data, r.decode, r.decoder */
    char model_note[128];           /* r.model_note (bench_config_model_note) */
    char label[96];                 /* the config's label, for messages */
    char failure[256];              /* why its child failed ("": it did not), also when it
                                       failed after reporting its figures (they are kept) */
    double engine_peak_mem_bytes;   /* ctx->mem.peak (what ctrain asked for) */
    char live_peak_at[64];          /* r.live_peak_at: where it came (mem_peak_place) */
    int pcie_gen_busy, pcie_width_busy;   /* the PCIe link right after the timed steps; -1 unknown */
    double elapsed_s;               /* wall time of the child */
    int recompute_every;            /* the config's recompute policy */
} BenchRow;

void bench_row_init(BenchRow *row, const BenchConfig *cfg);
/* row->live_peak_at: where the context's peak came (mem_peak_place: "backward
 * of OP", "forward, after OP" or "outside the forward and backward"). */
void bench_row_peak_at(BenchRow *row, const Ctx *c);

/* A config the card or the model cannot run, known before running it: its
 * row's error, starting with BENCH_UNSUPPORTED ("not supported: ..."), is an
 * answer (like out of memory), not a failure. Today: --precision fp8 on a
 * model without FP8 Linear layers, or on a GPU before sm_89 (cc: the
 * probe's compute capability, major x 10 + minor; -1 unknown: let it run).
 * Returns 1 and the reason in why. */
#define BENCH_UNSUPPORTED "not supported"
int bench_config_unsupported(const BenchConfig *cfg, int cc, const char *gpu_name, char *why,
                             size_t len);
/* Point r's string fields at the row's own buffers (after copying a row). */
void bench_row_fix(BenchRow *row);

/* A model's shape fields (seq aside): image size for ResNets, and the CPU
 * suite's narrow ResNet18 (width 16, 10 classes, 32x32). */
void bench_config_model(BenchConfig *c, ModelKind model, int image_size, int cpu);
/* What the model as run differs in from the named one ("resnet18 at width
 * 16 (base width 64), 10 classes, CPU bench"), "" when it does not. */
const char *bench_config_model_note(const BenchConfig *cfg, char *buf, size_t len);
/* "bert-large bf16 bs 32 seq 128" style label. */
const char *bench_config_label(const BenchConfig *cfg, char *buf, size_t len);
/* The training options a config runs with: synthetic data (a real-data row:
 * its folder, decoder and loader threads); ResNets and the
 * MLP with SGD momentum 0.9, wd 1e-4 (as scripts/torch_bench.py), BERT with
 * AdamW, wd 0.01; the graph captured at the last warm-up step. */
void bench_train_options(const BenchConfig *cfg, TrainOptions *o);
/* Training FLOPs per sample for a config (0 when unknown). */
double bench_config_flops(const BenchConfig *cfg);

#endif
