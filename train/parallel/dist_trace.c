/* dist_trace.c — the step phase timer of dist_trace.h. */
#include "dist_trace.h"

#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/log.h"
#include "engine/settings.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>

#define TRACE_SKIP 3   /* timed steps left out (after the first step, which has no start) */

struct DistTrace {
    int rank;
    cudaEvent_t ev[TRACE_N], prev_end;
    unsigned seen;        /* bit per marker recorded this step */
    int have_prev;
    long steps;           /* steps added up */
    long total_steps;
    double sum[5];        /* forward, backward, comm span, exposed, update (ms) */
};

DistTrace *dist_trace_open(int rank)
{
    if (setting_switch(SET_DIST_TRACE) != 1) return NULL;
    DistTrace *tr = (DistTrace *)calloc(1, sizeof *tr);
    if (!tr) ct_fatal("out of host memory");
    tr->rank = rank;
    for (int i = 0; i < TRACE_N; i++) CUDA_CHECK(cudaEventCreate(&tr->ev[i]));
    CUDA_CHECK(cudaEventCreate(&tr->prev_end));
    return tr;
}

void dist_trace_mark(DistTrace *tr, int what, void *stream)
{
    if (!tr) return;
    enum cudaStreamCaptureStatus st;
    CUDA_CHECK(cudaStreamIsCapturing((cudaStream_t)stream, &st));
    if (st != cudaStreamCaptureStatusNone) return;
    if (what == TRACE_COMM_FIRST && (tr->seen >> TRACE_COMM_FIRST & 1)) return;
    CUDA_CHECK(cudaEventRecord(tr->ev[what], (cudaStream_t)stream));
    tr->seen |= 1u << what;
}

static double ms(cudaEvent_t a, cudaEvent_t b)
{
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    return t;
}

void dist_trace_step(DistTrace *tr)
{
    if (!tr) return;
    unsigned all = (1u << TRACE_N) - 1;
    if (tr->seen != all) {   /* a replayed graph, or a step without all-reduce */
        tr->seen = 0;
        tr->have_prev = 0;
        return;
    }
    CUDA_CHECK(cudaEventSynchronize(tr->ev[TRACE_STEP_END]));
    if (tr->have_prev && ++tr->total_steps > TRACE_SKIP) {
        double bwd_end = ms(tr->ev[TRACE_BWD_BEGIN], tr->ev[TRACE_BWD_END]);
        double comm_end = ms(tr->ev[TRACE_BWD_BEGIN], tr->ev[TRACE_COMM_DONE]);
        double exposed = comm_end > bwd_end ? comm_end - bwd_end : 0.0;
        tr->sum[0] += ms(tr->prev_end, tr->ev[TRACE_BWD_BEGIN]);
        tr->sum[1] += bwd_end;
        tr->sum[2] += ms(tr->ev[TRACE_COMM_FIRST], tr->ev[TRACE_COMM_DONE]);
        tr->sum[3] += exposed;
        tr->sum[4] += ms(tr->ev[TRACE_BWD_END], tr->ev[TRACE_STEP_END]) - exposed;
        tr->steps++;
    }
    /* the next step's "forward" starts where this one ended: swap the events */
    cudaEvent_t t = tr->prev_end;
    tr->prev_end = tr->ev[TRACE_STEP_END];
    tr->ev[TRACE_STEP_END] = t;
    tr->have_prev = 1;
    tr->seen = 0;
}

void dist_trace_close(DistTrace *tr)
{
    if (!tr) return;
    if (tr->steps > 0) {
        double n = (double)tr->steps, *s = tr->sum;
        LOG_I("rank %d step trace, mean of %ld eager steps (ms): forward %.2f, backward %.2f, "
              "all-reduce span %.2f, exposed after backward %.2f, update %.2f; step %.2f",
              tr->rank, tr->steps, s[0] / n, s[1] / n, s[2] / n, s[3] / n, s[4] / n,
              (s[0] + s[1] + s[3] + s[4]) / n);
    } else {
        LOG_W("rank %d: CTRAIN_DIST_TRACE=1 timed no step (captured steps record no markers: "
              "add CTRAIN_DIST_GRAPH=0)", tr->rank);
    }
    for (int i = 0; i < TRACE_N; i++) CUDA_CHECK(cudaEventDestroy(tr->ev[i]));
    CUDA_CHECK(cudaEventDestroy(tr->prev_end));
    free(tr);
}

#else

DistTrace *dist_trace_open(int rank) { (void)rank; return NULL; }
void dist_trace_mark(DistTrace *tr, int what, void *stream) { (void)tr; (void)what; (void)stream; }
void dist_trace_step(DistTrace *tr) { (void)tr; }
void dist_trace_close(DistTrace *tr) { (void)tr; }

#endif
