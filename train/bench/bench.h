/* bench.h — `ctrain bench` (throughput suite, --max-batch, --soak, --gpus N),
 * `ctrain report`, and the bench's pieces for the tests.
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
 * Files, each using only those below it (no file calls one above it):
 *   bench.c          the command: the suite, the header
 *   bench_options.c  the options, their usage text and parser
 *   bench_data.c     --data DIR: the real-data rows beside the synthetic ones
 *   bench_modes.c    --max-batch and --soak
 *   bench_dist.c     --gpus N: each config on 1 and N GPUs, the scaling table
 *   bench_session.c  a config run in a child with its progress line, derived
 *                    figures, the table, the JSON file
 *   bench_rank.c     the N-GPU config's child and its ranks (`ctrain bench-rank`)
 *   bench_run.c      what the measuring children run (a config, the soak)
 *   bench_probe.c    the probe child (machine facts, matmul ceilings) and its lines
 *   bench_conditions.c  the run's conditions (GPU state, other processes, host
 *                    load) and the warnings they give
 *   bench_child.c    fork, pipe, the line protocol
 *   bench_config.c   a config, its row, label, training options and FLOPs
 * beside them: peaks.c (datasheet peaks), nvml.c and nvml_sampler.c, soak.c,
 * bench_json.c, and report.c (`ctrain report`).
 */
#ifndef CTRAIN_TRAIN_BENCH_H
#define CTRAIN_TRAIN_BENCH_H

#include "bench_child.h"
#include "bench_config.h"
#include "bench_rank.h"
#include "report.h"

int cmd_bench(int argc, char **argv);

#endif
