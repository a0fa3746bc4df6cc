/* timeline_api.h — where the host waits: the CUDA runtime and driver calls
 * of a timeline's window (CUPTI's API records), added up per thread and
 * call, longest total first. A call that blocks (a sync, a cuMemFree that
 * waits for the whole device, a graph launch queued behind it) shows up
 * here and nowhere in the kernel rows.
 *
 *   thread      total ms   calls   longest ms   call
 *   2835288064   113.971     119       36.551   cuMemFree_v2 (driver)
 *
 * Plain C, no CUPTI: train/bench/timeline.c feeds it the records and the
 * names (cuptiGetCallbackName). */
#ifndef CTRAIN_TRAIN_BENCH_TIMELINE_API_H
#define CTRAIN_TRAIN_BENCH_TIMELINE_API_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    int driver;              /* 1: driver API, 0: runtime API */
    uint32_t cbid, thread;   /* CUPTI's callback id, the calling thread's id */
    long calls;
    uint64_t total_ns, max_ns;
} TlApiRow;

typedef struct {
    TlApiRow *rows;
    size_t n, cap;
    int oom;                 /* a row could not be added */
} TlApi;

void tl_api_init(TlApi *a);
void tl_api_free(TlApi *a);
/* One call [start, end) in ns. */
void tl_api_add(TlApi *a, int driver, uint32_t cbid, uint32_t thread, uint64_t start,
                uint64_t end);
/* The top rows by total time (all when top <= 0), with names from
 * name(driver, cbid) (NULL, or a NULL answer: "cbid N"), under a heading. */
void tl_api_write(TlApi *a, FILE *out, int top, const char *(*name)(int driver, uint32_t cbid));

#endif
