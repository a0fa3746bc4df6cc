/* bench_json.h — the benchmark's JSON file: one file per run, schema
 * "ctrain-bench/1", read by scripts/report.py (`ctrain report`). Two engines
 * write it: `ctrain bench --json` and scripts/torch_bench.py --json
 * (PyTorch, engine "pytorch <version>" or "pytorch <version> compile", the
 * same suite measured the same way). torch_bench.py adds what only it has:
 * machine.torch / torchvision / transformers (versions), a result's
 * peak_mem_reserved_bytes (the caching allocator's reserved peak beside
 * peak_mem_bytes, its allocated peak) and a top-level "notes" list (how it
 * measured); report.py shows them, and older torch_bench.py JSON lines.
 *
 *   {"schema": "ctrain-bench/1",
 *    "command": "ctrain bench ...",
 *    "machine": {"gpu_name", "gpu_memory_bytes", "gpu_count", "driver",
 *                "cuda_runtime", "cudnn", "cublas", "cpu", "host",
 *                "ctrain_revision", "date",
 *                [the conditions:] "ecc_enabled", "persistence_mode",
 *                "power_limit_w", "power_limit_default_w", "pcie_gen",
 *                "pcie_width", "pcie_gen_max", "pcie_width_max",
 *                "pcie_gen_under_load", "pcie_width_under_load",
 *                "nvlink_active_links", "other_gpu_processes": [{"gpu",
 *                "pid", "name", "used_bytes"}, ...], "load_avg_start",
 *                "load_avg_end", "cpu_count", "warnings": [...],
 *                "notes": [...]},
 *    "results": [{"engine": "ctrain", "mode", "model", "precision", "batch",
 *                 "seq", "image_size", "layout", "model_note", "steps", "warmup",
 *                 "samples_per_s", "samples_per_s_min", "samples_per_s_max",
 *                 "ms_per_step", "step_ms_p50", "step_ms_p99",
 *                 "peak_mem_bytes", "live_peak_bytes", "live_peak_at", "flops_per_sample",
 *                 "peak_tflops", "mfu_peak", "ceiling_tflops",
 *                 "mfu_measured_ceiling", "power_avg_w", "power_peak_w",
 *                 "energy_j", "temp_avg_c", "temp_max_c", "sm_clock_avg_mhz",
 *                 "sm_clock_min_mhz", "throttle", "samples_per_s_per_w",
 *                 "final_loss", "error", "soak": {...},
 *                 "data", "samples_per_s_mean", "timed_s", [real-data rows:] "decode",
 *                 "decoder", "workers", "data_images", "data_wait_s",
 *                 "data_wait_fraction", "decode_s", "decode_parallel",
 *                 "decode_images_per_s", "decode_capacity_images_per_s",
 *                 "cpu_fallback"}, ...],
 *    "ceilings": [{"name": "matmul fp16 8192^3", "precision": "fp16",
 *                  "tflops": 731.2}, ...]}
 *
 * The data a row trained on (ctrain bench --data DIR, train/bench/bench_data.c):
 * "data" is "synthetic" or the ImageFolder root (a real-data row). Every
 * measured row has samples_per_s_mean (samples over timed_s, the timed window's
 * seconds: the steps' sum, so a stall in any step counts, which the median
 * hides). A real-data row adds what its feed reported (train/feed/feed_types.h
 * FeedStats), each over the timed window: "decode" the decoder asked for
 * ("auto", "cpu", "gpu"), "decoder" what decoded ("gpu (nvJPEG hardware)"),
 * "workers" loader threads, data_images handed to the model, data_wait_s the
 * time the GPU stood still for its batches (on its own clock: two events
 * around each batch's hand-over, train/feed/feed_gpu_wait.h; on a CPU
 * context the time the step waited for a batch) and data_wait_fraction =
 * data_wait_s / timed_s, decode_s the decoder's
 * busy seconds summed over its decode_parallel threads or engines,
 * decode_images_per_s = data_images / timed_s (delivered),
 * decode_capacity_images_per_s = data_images / decode_s x decode_parallel
 * (what the decoder could sustain), cpu_fallback images the GPU decoder
 * handed to the CPU. A feed without statistics leaves them absent. The
 * real-data row's model has the folder's classes (the synthetic one 1000 on
 * the GPU): its flops_per_sample and MFU are the synthetic config's.
 *
 * The step times: step_ms_p50 and step_ms_p99 are percentiles of the timed
 * steps' times (linear between the nearest two, as numpy.percentile; p50 is
 * the median, ms_per_step; with fewer than 100 steps p99 lies between the
 * two slowest). model_note says what a row's model was when it is not the
 * named model as its authors defined it: the CPU bench's "resnet18 at width
 * 16 (base width 64), 10 classes, CPU bench".
 *
 * The conditions (bench_conditions.h says who reads each and when): the GPU
 * card's ECC mode (current), persistence mode, enforced and default power
 * limits (W), its PCIe link at the start (an idle card lowers the
 * generation), the most its card and slot allow, and the highest read right
 * after a config's timed steps (under load), the NVLinks up, the processes
 * with a compute context on the bench's GPU(s) at the start (none of them
 * the bench's: it has created no CUDA context yet; "name" from
 * /proc/PID/comm), the host's 1-, 5- and 15-minute load averages at the
 * start and the end (the end's includes the bench's own threads), its
 * online CPUs, and the warnings and notes the bench printed. They are
 * written for a measuring run (not --list), every key then present and null
 * where the card, driver or host does not say (no NVML: every GPU one).
 *
 * Elsewhere a figure that was not measured is ABSENT (the key is omitted),
 * never 0 or null: doubles that are NaN, integers < 0 and NULL or "" strings
 * are left out. Units: bytes, seconds, W, C, MHz, TFLOP/s (1e12); mfu_* are fractions
 * (0.42 = 42%) of peak_tflops / ceiling_tflops. Written by the JSON writer
 * (train/io/jsonw.h), pretty, with short escapes and exact integers
 * (BENCH_JSON_STYLE).
 */
#ifndef CTRAIN_TRAIN_BENCH_JSON_H
#define CTRAIN_TRAIN_BENCH_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "nvml.h"
#include "soak.h"
#include "train/io/jsonw.h"

#define BENCH_SCHEMA "ctrain-bench/1"
#define BENCH_JSON_STYLE (JSONW_PRETTY | JSONW_SHORT_ESCAPES | JSONW_EXACT_NUMBERS)

/* ---- The run. Strings "" = unknown. */
#define BENCH_MAX_GPU_PROCESSES 16
#define BENCH_MAX_WARNINGS 12
#define BENCH_WARNING_LEN 320

typedef struct BenchGpuProcess {
    int gpu;                      /* the CUDA device it was found on */
    int64_t pid;
    char name[64];                /* /proc/PID/comm; "" unknown */
    double used_bytes;            /* its device memory; NaN unknown */
} BenchGpuProcess;

typedef struct BenchMachine {
    char gpu_name[256];           /* cudaDeviceProp.name */
    int64_t gpu_memory_bytes;     /* -1 unknown */
    int gpu_count;                /* -1 unknown */
    int compute_capability;       /* major x 10 + minor (90: Hopper); -1 unknown */
    char driver[64];              /* NVIDIA driver, "580.65.06" */
    char cuda_runtime[32];        /* "13.0" */
    char cudnn[32];               /* "9.14.0" */
    char cublas[32];              /* "13.1.0" */
    char cpu[160];
    char host[128];
    char ctrain_revision[64];     /* git describe --always --dirty */
    char date[40];                /* UTC, ISO 8601 */
    /* the conditions (bench_conditions.h); written only when `conditions` is set */
    int conditions;
    NvmlState gpu;                              /* the card at the start; -1 / NaN unknown */
    int pcie_gen_under_load, pcie_width_under_load;   /* -1 unknown */
    int n_gpu_processes;                        /* -1 unknown; may exceed the array */
    BenchGpuProcess gpu_processes[BENCH_MAX_GPU_PROCESSES];
    double load_avg_start[3], load_avg_end[3];  /* NaN unknown */
    int cpu_count;
    int n_warnings, n_notes;
    char warnings[BENCH_MAX_WARNINGS][BENCH_WARNING_LEN];
    char notes[BENCH_MAX_WARNINGS][BENCH_WARNING_LEN];
} BenchMachine;

/* One config and what was measured for it. Initialize with
 * bench_result_init (everything absent), then set what you have. */
typedef struct BenchResult {
    const char *engine;           /* "ctrain" */
    const char *mode;             /* "eager", "graph" */
    const char *model, *precision, *layout;
    const char *model_note;       /* the model as run, when it is not the named one */
    int batch, seq, image_size, steps, warmup;  /* -1 absent */
    double samples_per_s, samples_per_s_min, samples_per_s_max, ms_per_step;
    double step_ms_p50, step_ms_p99;
    double peak_mem_bytes;
    double live_peak_bytes;       /* ctrain's own count at its high point (ctx mem.peak):
                                     the bytes live tensors held, where peak_mem_bytes is
                                     the pool's and the CUDA graphs' high-water marks */
    const char *live_peak_at;     /* where that high point came (mem_peak_place): "backward
                                     of OP" (the autograd node), "forward, after OP" (the
                                     op recorded before it), "outside the forward and
                                     backward" */
    double state_mem_bytes;       /* held between steps: weights, gradients, optimizer
                                     state, inputs; peak - state = the activations' peak */
    double flops_per_sample;
    double peak_tflops, mfu_peak;                 /* datasheet peak (peaks.h) */
    double ceiling_tflops, mfu_measured_ceiling;  /* matmul measured this run */
    double power_avg_w, power_peak_w, energy_j;
    double temp_avg_c, temp_max_c, sm_clock_avg_mhz, sm_clock_min_mhz;
    const char *throttle;         /* slowdown reasons seen: "none", "sw_power_cap" */
    double samples_per_s_per_w;
    double final_loss;
    const char *error;            /* "out of memory", a CUDA error, ... */
    const SoakSummary *soak;      /* --soak only */
    /* the data (bench_data.c): "synthetic" or the folder; the real-data row's feed figures */
    const char *data, *decode, *decoder;
    int workers, decode_parallel;                 /* -1 absent */
    double samples_per_s_mean, timed_s;
    double data_images, data_wait_s, data_wait_fraction;
    double decode_s, decode_images_per_s, decode_capacity_images_per_s, cpu_fallback;
} BenchResult;

typedef struct BenchCeiling {
    const char *name;             /* "matmul fp16 8192^3" */
    const char *precision;
    double tflops;
} BenchCeiling;

typedef struct BenchRun {
    BenchMachine machine;
    const char *command;
    const BenchResult *results;
    int n_results;
    const BenchCeiling *ceilings;
    int n_ceilings;
} BenchRun;

void bench_result_init(BenchResult *r);
/* Fill what this process can find out: CPU, host, date, revision always;
 * GPU name, memory, count, CUDA/cuDNN/cuBLAS versions in CUDA builds (device
 * `device`); the driver version through NVML when it is available. */
void bench_machine_collect(BenchMachine *m, int device);
/* This binary's git revision ("git describe --always --dirty" at build
 * time, else read beside the binary), "" when unknown. */
void bench_revision(char *out, size_t len);

/* The whole document, malloc'd and NUL-terminated (free it); NULL on OOM. */
char *bench_json_string(const BenchRun *run);
/* Write it to path; 0, or -1 with errno set. */
int bench_json_write_file(const char *path, const BenchRun *run);

/* Append one result / a soak summary object (for other writers; a JsonW
 * of BENCH_JSON_STYLE). */
void bench_json_result(JsonW *w, const BenchResult *r);
void bench_json_soak(JsonW *w, const char *key, const SoakSummary *s);

#endif
