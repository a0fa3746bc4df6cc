/* bench_conditions.h — what the figures were measured under, kept in the
 * machine record (bench_json.h, BenchMachine): the GPU's standing state (ECC,
 * persistence mode, power limit against the card's default, the PCIe link
 * and the NVLinks), other processes on the GPU, the host's load average at
 * the start and the end and its CPU count; and the few warnings and notes
 * the bench prints ("bench: warning: ...", "bench: note: ...") and stores.
 *
 * Who reads what. The parent never touches NVML (bench.h), so the probe
 * child reads the card (bench_conditions_read_gpu) before anything creates a
 * CUDA context: the process list then holds no process of this bench. It
 * sends what it read as lines (bench_conditions_write / _read). Each
 * config's child reads the PCIe link right after its timed steps, while the
 * card is still in its working state (BenchRow pcie_*_busy; the highest is
 * kept, bench_conditions_busy_pcie). The parent reads the load average at
 * the start (bench_conditions_init) and at the end (bench_conditions_end).
 *
 * Warnings: conditions that can bias the figures, each said once.
 *   GPU runs:
 *   - processes other than the bench's with a compute context on the
 *     bench's GPU(s) at the start (named from /proc/PID/comm where it can);
 *   - the enforced power limit more than 1 W below the card's default;
 *   - the PCIe link below the generation or width that card and slot allow,
 *     judged under load (right after a config's timed steps); with no
 *     reading under load, the width at the start only (an idle card lowers
 *     its link generation to save power, so the generation at idle says
 *     nothing).
 *   Every run:
 *   - the host's 1-minute load average at the start above 0.5 x the online
 *     CPUs;
 *   - else at the end: that load average less the bench's own busy threads
 *     (own_threads) above 0.5 x the CPUs.
 * Notes: context, not bias. GPU runs: ECC is on (the figures are with ECC);
 * persistence mode is off (start-up, not the timed steps, pays for it).
 */
#ifndef CTRAIN_TRAIN_BENCH_CONDITIONS_H
#define CTRAIN_TRAIN_BENCH_CONDITIONS_H

#include <stdio.h>
#include "bench_json.h"

/* Every condition unknown, then what the parent knows now: the online CPUs
 * and the load average at the start. Sets m->conditions (they are written). */
void bench_conditions_init(BenchMachine *m);

/* The probe child: the standing state of CUDA device `device` and the
 * processes on devices device .. device + gpus - 1, through NVML (nothing
 * without the CUDA build, a device or NVML). */
void bench_conditions_read_gpu(BenchMachine *m, int device, int gpus);
/* The GPU fields as "conditions" and "gpu_process" lines, and the parent's
 * reading of one such line into m (other lines are ignored). */
void bench_conditions_write(FILE *out, const BenchMachine *m);
void bench_conditions_read(BenchMachine *m, const char *line);

/* A config's reading of the PCIe link under load (-1: none). */
void bench_conditions_busy_pcie(BenchMachine *m, int gen, int width);

/* The warnings and notes of the start (gpu: the bench runs on the GPU). */
void bench_conditions_start(BenchMachine *m, int gpu);
/* At the end: the load average now, and the warnings only the end can give.
 * own_threads: the threads the bench itself kept busy (1 per GPU process,
 * every CPU for the CPU bench, plus real-data loader threads). */
void bench_conditions_end(BenchMachine *m, int gpu, double own_threads);
/* Its warnings alone, from what m holds (the tests' way in). */
void bench_conditions_judge_end(BenchMachine *m, int gpu, double own_threads);
/* Print warnings [w0, n_warnings) and notes [n0, n_notes) to out, one line each. */
void bench_conditions_print(const BenchMachine *m, int w0, int n0, FILE *out);

#endif
