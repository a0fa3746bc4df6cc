/* timeline.h — a GPU timeline of a few training steps, recorded with CUPTI
 * (NVIDIA's profiling interface, loaded at run time: no build dependency),
 * to see where a step's time goes when no profiler is at hand.
 *
 *   CTRAIN_TIMELINE=FILE[:START[:STEPS]] ctrain train ...
 *
 * records every kernel, memcpy and memset that starts during steps START ..
 * START + STEPS - 1 (default 10 and 5: after the warm-up and the CUDA-graph
 * capture; a run resumed past START records its first STEPS steps), on
 * every stream, CUDA-graph replays and NCCL's kernels included, and writes
 *   FILE        a Chrome trace (open it in https://ui.perfetto.dev or
 *               chrome://tracing): one row per stream
 *   FILE.txt    the summary of train/bench/timeline_fmt.h: busy time per stream,
 *               overlap, and time per kernel name, per step; then where the
 *               host waited: the CUDA runtime and driver calls per thread,
 *               longest total first (train/bench/timeline_api.h)
 * In FILE, "%r" becomes the rank (CTRAIN_RANK; 0 alone) and "%p" the
 * process id; with several ranks and no "%r" each rank appends ".rankR".
 * `ctrain bench` runs each config in its own process: use "%p" there.
 *
 * How: CUPTI's activity API (CONCURRENT_KERNEL, MEMCPY, MEMSET) is enabled
 * at the first step, so kernels of graphs instantiated later are seen too;
 * the device is synchronized at the window's two ends and CUPTI's
 * timestamps taken there, and only records starting between them are kept.
 * Tracing adds a little time to each kernel launch; compare timelines with
 * each other, not with untraced throughput. CTRAIN_CUPTI_LIB names the
 * library when it is not found (libcupti.so under the CUDA toolkit).
 */
#ifndef CTRAIN_TRAIN_TIMELINE_H
#define CTRAIN_TRAIN_TIMELINE_H

/* The trainer's per-step hook (Trainer.on_step, train/loop/trainer.h): set
 * by `ctrain train` and the bench's runs on a CUDA device, called as each
 * step starts. */
void timeline_on_step(long step);

#endif
