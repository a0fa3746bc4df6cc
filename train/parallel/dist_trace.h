/* dist_trace.h — where a data-parallel step's time goes, for tuning
 * (CTRAIN_DIST_TRACE=1; off by default, and it costs nothing then).
 *
 * Timing events mark, on each rank, the start and end of backward and the
 * optimizer on the compute stream, and the first and last gradient
 * all-reduce on the communication stream. After each step the rank waits for
 * its markers (that host wait is the only change to the step) and adds up:
 *   forward    end of the previous step -> backward begins (host gaps too)
 *   backward   backward begins -> its last node has run
 *   comm span  the first bucket's all-reduce starts -> the last one ends
 *   exposed    backward ended -> the last all-reduce ended (0 when hidden)
 *   update     the rest: unscale, clip, optimizer, zeroing the gradients
 * dist_finish prints the means (the first 4 steps left out: warm-up,
 * algorithm searches) at info level: rank 0's, and every rank's with
 * CTRAIN_LOG=info (the other ranks log errors only by default). With
 * --accum K "forward" also holds the first K - 1 micro-batches' forward and
 * backward. Eager steps only: a captured step records no markers, so run it
 * with CTRAIN_DIST_GRAPH=0. */
#ifndef CTRAIN_TRAIN_DIST_TRACE_H
#define CTRAIN_TRAIN_DIST_TRACE_H

typedef struct DistTrace DistTrace;

enum { TRACE_BWD_BEGIN, TRACE_BWD_END, TRACE_COMM_FIRST, TRACE_COMM_DONE, TRACE_STEP_END,
       TRACE_N };

/* A trace for this rank when CTRAIN_DIST_TRACE=1, else NULL (every call below takes NULL). */
DistTrace *dist_trace_open(int rank);
/* Marks `what` on `stream` (a cudaStream_t): skipped while the stream is captured. */
void dist_trace_mark(DistTrace *tr, int what, void *stream);
/* After TRACE_STEP_END: waits for this step's markers and adds up its phases. */
void dist_trace_step(DistTrace *tr);
/* Prints the means (LOG_I) and frees. */
void dist_trace_close(DistTrace *tr);

#endif
