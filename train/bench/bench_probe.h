/* bench_probe.h — the bench's first child: machine facts (GPU, driver,
 * libraries, CPU; they need CUDA, which the parent must not initialize
 * before it forks), the GPU's conditions (ECC, power limit, PCIe, other
 * processes: bench_conditions.h), whether a GPU is there, NVML's
 * availability, and the matmul ceilings: cuBLASLt 8192^3 in fp16 and bf16,
 * 4096^3 in fp32 and tf32 (random inputs, 3 warm-up runs, median of 10
 * event-timed runs); on the CPU, 1024^3 f32 through the reference matmul
 * (median of 3).
 */
#ifndef CTRAIN_TRAIN_BENCH_PROBE_H
#define CTRAIN_TRAIN_BENCH_PROBE_H

#include <stdio.h>
#include "engine/ctx.h"
#include "bench_json.h"

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
    int gpus;                      /* the GPUs the bench will use from device_id (--gpus; 1) */
} BenchProbeArgs;

/* The child (BenchProbeArgs): "machine" and "ceiling" lines to out. */
void bench_child_probe(FILE *out, const void *args);
/* The parent: one of those lines into p. */
void bench_probe_read(BenchProbe *p, const char *line);

#endif
