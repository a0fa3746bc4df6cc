/* dist_watchdog.h — the thread that ends a stuck rank of a multi-GPU run
 * within a bounded time (train/parallel/dist.h says when it fires and why).
 *
 * Set-up phase: if the rendezvous and NCCL's initialisation have not
 * finished by the deadline, the rank prints why and exits.
 * Run phase, every 100 ms: ncclCommGetAsyncError on the communicators (an
 * error is fatal at once), and the oldest progress marker not yet passed by
 * the GPU: when it is older than the timeout, the GPU has been waiting that
 * long (a collective whose peer died or hangs). Either way the rank prints
 * "ctrain: rank R: <cause>" and a hint, aborts the communicators
 * (ncclCommAbort: the blocked kernels return, peers on sockets see the
 * error) and exits with status 1, after at most 5 s even if the abort hangs.
 *
 * Host sections (watchdog_host_section): a deadline of the same timeout on
 * a stretch of host code that can block without a marker pending.
 *
 * Markers: watchdog_mark records an event on the compute stream (skipped
 * while the stream is being captured into a CUDA graph, where a record does
 * not happen at replay time) into a ring the thread drains in order: one
 * producer (the main thread), one consumer (the watchdog). The thread runs
 * in relaxed stream-capture mode, so its event queries never disturb a
 * capture on the main thread.
 */
#ifndef CTRAIN_TRAIN_DIST_WATCHDOG_H
#define CTRAIN_TRAIN_DIST_WATCHDOG_H

#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

typedef struct DistWatchdog DistWatchdog;

/* Start the thread in the set-up phase, which must end within deadline_s. */
DistWatchdog *watchdog_start(int rank, int device, int timeout_s, double deadline_s);
/* Move the set-up deadline to deadline_s from now. */
void watchdog_setup_deadline(DistWatchdog *w, double deadline_s);
/* Set-up done: watch comm and comm2 (either may be NULL) and the markers. */
void watchdog_run(DistWatchdog *w, ncclComm_t comm, ncclComm_t comm2);
/* A progress marker on stream s (main thread only). */
void watchdog_mark(DistWatchdog *w, cudaStream_t s);
/* what non-NULL: the main thread enters a section that may block on the
 * host (capturing a step with NCCL calls) with no marker to watch; the
 * thread ends the rank, naming what, if it lasts longer than the timeout.
 * NULL: the section is over. what must stay valid until then. */
void watchdog_host_section(DistWatchdog *w, const char *what);
/* Stop and join the thread (before the communicators are destroyed). */
void watchdog_stop(DistWatchdog *w);
#endif

#endif
