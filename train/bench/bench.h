/* bench.h — `ctrain bench` (throughput suite, --max-batch, --soak) and
 * `ctrain report`, and the pieces the bench files share.
 *
 * Process layout. The parent process never touches CUDA or NVML: it parses
 * the options, forks one child per measurement, reads what the child writes
 * to a pipe (one JSON object per line: "progress", "row", "result", ...),
 * draws the progress line and the table, and writes the JSON file. Each child
 * builds a fresh context, feed, model and trainer, measures, reports and
 * exits, so
 *   - a config that runs out of memory (mem_alloc is fatal on OOM) or
 *     crashes becomes an error row, and the suite goes on;
 *   - memory peaks are per config, and no config inherits another's pool,
 *     cuDNN plans or fragmentation.
 * CUDA must not be initialized before fork (a child cannot use a context its
 * parent created), so machine facts that need CUDA (GPU name, memory, library
 * versions) and the matmul ceilings come from a first "probe" child.
 *
 * Files: bench.c (options, suite, header), bench_session.c (a config with
 * its progress line, derived figures, table, JSON), bench_modes.c
 * (--max-batch, --soak), bench_child.c (fork, pipe, the line protocol),
 * bench_run.c (what the children run), bench_dist.c (--gpus N: the
 * multi-GPU configs and the scaling table), report.c (`ctrain report`).
 */
#ifndef CTRAIN_TRAIN_BENCH_H
#define CTRAIN_TRAIN_BENCH_H

#include <stdio.h>
#include "engine/ctx.h"
#include "engine/recompute.h"
#include "bench_json.h"
#include "nvml.h"
#include "train/cli/options.h"
#include "soak.h"

int cmd_bench(int argc, char **argv);
int cmd_report(int argc, char **argv);
/* The hidden `ctrain bench-rank`: one rank of a `bench --gpus N` config
 * (bench_dist.c); the config comes from the environment. */
int cmd_bench_rank(int argc, char **argv);

/* ---- One measurement, as the parent describes it to a child. */
typedef struct BenchConfig {
    char model[32];          /* mlp | resnet* | bert-* */
    char precision[8];       /* fp32 | tf32 | fp16 | bf16 */
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
    int gpus;                /* > 1: data parallel on this many GPUs, one rank each (bench_dist.c) */
    DType grad_reduce;       /* with gpus > 1: the gradient all-reduce's type (--grad-reduce) */
    /* --soak */
    double soak_s;           /* run this long after warm-up */
    int soak_every;          /* a row every N steps; 0: every soak_interval_s */
    double soak_interval_s;
} BenchConfig;

/* ---- What came back for one config. r's strings point into the buffers. */
typedef struct BenchRow {
    BenchResult r;
    char model[32], precision[8], layout[8], mode[48], throttle[160], error[256];
    double engine_peak_mem_bytes;   /* ctx->mem.peak (what ctrain asked for) */
    double elapsed_s;               /* wall time of the child */
    int recompute_every;            /* the config's recompute policy */
} BenchRow;

void bench_row_init(BenchRow *row, const BenchConfig *cfg);
/* Point r's string fields at the row's own buffers (after copying a row). */
void bench_row_fix(BenchRow *row);

/* ---- The probe: machine facts and the matmul ceilings. */
#define BENCH_MAX_CEILINGS 4
typedef struct BenchProbe {
    BenchMachine machine;
    int cuda_devices;              /* -1: unknown (no CUDA build) */
    char no_gpu_reason[160];       /* why no device was found */
    int nvml;                      /* NVML usable */
    char nvml_reason[160];
    int n_ceilings;
    BenchCeiling ceilings[BENCH_MAX_CEILINGS];
    char ceiling_names[BENCH_MAX_CEILINGS][40], ceiling_precs[BENCH_MAX_CEILINGS][8];
    double ceiling_ms[BENCH_MAX_CEILINGS];
    int ceiling_reps;
} BenchProbe;

typedef struct BenchProbeArgs {
    Device device;                 /* DEV_CUDA: measure GPU ceilings; DEV_CPU: the CPU one */
    int device_id;
    int auto_device;               /* no --device: GPU if one is found, else CPU */
    int ceilings;                  /* measure them at all */
} BenchProbeArgs;

/* The training options a config runs with (bench_run.c). */
void bench_train_options(const BenchConfig *cfg, TrainOptions *o);

/* ---- Children (bench_run.c): write JSON lines to `out`, then return. */
void bench_child_probe(FILE *out, const void *args);     /* BenchProbeArgs */
void bench_child_config(FILE *out, const void *cfg);     /* BenchConfig */
void bench_child_soak(FILE *out, const void *cfg);       /* BenchConfig */

/* ---- Running a child (bench_child.c). */
typedef void (*BenchChildFn)(FILE *out, const void *arg);
typedef void (*BenchLineFn)(const char *line, void *user);
typedef void (*BenchTickFn)(void *user);

typedef struct BenchExit {
    int exited, status;            /* exit status when exited */
    int signaled, sig;
    int timed_out;                 /* killed by the watchdog */
    double elapsed_s;
    char output[4096];             /* the tail of what it printed (stdout + stderr) */
} BenchExit;

/* Fork; in the child run fn(out, arg) with stdout and stderr captured, then
 * exit 0. In the parent, call on_line for every line the child writes as it
 * arrives and on_tick about every 250 ms, until the child ends (or runs past
 * limit_s: then it is killed). Returns 0 when the child exited with status 0. */
int bench_child_run(BenchChildFn fn, const void *arg, double limit_s, BenchLineFn on_line,
                    BenchTickFn on_tick, void *user, BenchExit *ex);
/* Why a child failed, in a few words: "out of memory", "timed out after
 * 600 s", "crashed: signal 11 (Segmentation fault)", or its error message. */
void bench_exit_reason(const BenchExit *ex, char *buf, size_t len);
/* 1 when a failure reads as running out of memory (ctrain's message, or a
 * library's allocation status). */
int bench_text_is_oom(const char *text);

/* ---- The line protocol: one flat JSON object per line (jsonlog.h). */
/* 1 when line is an object with "event": event. */
int bench_line_is(const char *line, const char *event);
/* The number / string under key; 0 when absent (null, missing, wrong type). */
int bench_line_num(const char *line, const char *key, double *v);
int bench_line_str(const char *line, const char *key, char *buf, size_t len);
/* A row's measurements <-> a "result" line. */
void bench_row_write(FILE *out, const BenchRow *row);
void bench_row_read(BenchRow *row, const char *line);
/* Probe lines -> probe. */
void bench_probe_read(BenchProbe *p, const char *line);

/* ---- The parent's session (bench_session.c unless noted). */
typedef struct BenchSession {
    BenchProbe probe;
    int tty;
    char command[1024];
    const char *json_path;
    BenchRow *rows;
    int n_rows, cap_rows;
    double t0;
} BenchSession;

BenchRow *bench_session_add(BenchSession *s, const BenchRow *row);
/* Write --json (when given) with everything so far; warns on failure. */
void bench_session_write_json(BenchSession *s);
/* Derived figures: MFU over the peak and the ceiling, samples/s per watt. */
void bench_row_derive(BenchRow *row, const BenchProbe *probe, double flops_per_sample);
/* A model's shape fields (seq aside): image size for ResNets, and the CPU
 * suite's narrow ResNet18 (width 16, 10 classes, 32x32). (bench.c) */
void bench_config_model(BenchConfig *c, const char *model, int image_size, int cpu);
/* Training FLOPs per sample for a config (0 when unknown). (bench_run.c) */
double bench_config_flops(const BenchConfig *cfg);
/* "bert-large bf16 bs 32 seq 128" style label. */
const char *bench_config_label(const BenchConfig *cfg, char *buf, size_t len);
/* Run one config in a child and fill row (error rows included); on a
 * terminal a progress line starting with prefix is drawn meanwhile. */
void bench_run_config(BenchSession *s, const BenchConfig *cfg, BenchRow *row, const char *prefix);

/* The terminal table: column titles, and one row (or its error). */
void bench_table_header(int gpu);
void bench_table_row(const BenchRow *row);

/* The modes (bench_modes.c). models and precisions are comma lists; base
 * gives the device, image size, seq and the start batch (0: 16). */
int bench_max_batch(BenchSession *s, const BenchConfig *base, const char *models,
                    const char *precisions);
/* cfg->soak_s of cfg; rows into csv_path. Returns 1 when the soak saw a
 * non-finite loss or an error. */
int bench_soak(BenchSession *s, const BenchConfig *cfg, const char *csv_path);

/* --gpus N (bench_dist.c): each config on 1 GPU, then on N (one rank per
 * GPU, the same per-GPU batch); both rows, then per-GPU and total samples/s
 * and the scaling efficiency total_N / (N x one GPU). Returns 0. */
int bench_scaling(BenchSession *s, const BenchConfig *cfgs, int n, int gpus);
/* The child of a config with cfg->gpus > 1: launches the ranks. */
void bench_child_dist(FILE *out, const void *cfg);

/* "30s", "10m", "72h", "1.5h", "90" (seconds) -> seconds; -1 when not a
 * duration. (bench.c) */
double bench_parse_duration(const char *s);

#endif
