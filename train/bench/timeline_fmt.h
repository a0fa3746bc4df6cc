/* timeline_fmt.h — a GPU timeline's events, and what is written from them:
 * a Chrome trace (chrome://tracing, https://ui.perfetto.dev) and a summary
 * of where the window's time went. The events come from CUPTI
 * (train/bench/timeline.c); this half is plain C so the CPU tests check it.
 *
 * Summary (timeline_summary), for a window of `steps` training steps:
 *   - the window's span, per step;
 *   - per stream: the time at least one of its events ran (the union of
 *     its intervals), and the event count, per step;
 *   - the time two or more streams ran at once (overlap), per step;
 *   - per event name (kernels by their demangled name without parameters):
 *     calls and milliseconds per step, mean microseconds, share of the
 *     busiest stream's time; the 40 largest, then a tab-separated table of
 *     all of them ("name\tcalls_per_step\tms_per_step\tmean_us") for
 *     scripts/timeline_diff.py, which compares two runs (1 GPU against N).
 */
#ifndef CTRAIN_TRAIN_TIMELINE_FMT_H
#define CTRAIN_TRAIN_TIMELINE_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { TL_KERNEL, TL_MEMCPY, TL_MEMSET };

typedef struct TlEvent {
    uint64_t start, end;   /* ns, one clock for all events */
    uint64_t bytes;        /* memcpy / memset */
    uint32_t stream;
    int kind;              /* TL_KERNEL, TL_MEMCPY, TL_MEMSET */
    int name;              /* index into Timeline.names */
} TlEvent;

typedef struct Timeline {
    TlEvent *ev;
    size_t n, cap;
    char **names;          /* interned, owned */
    size_t n_names, cap_names;
    uint64_t begin, end;   /* the recorded window (0, 0: from the first to the last event) */
    uint64_t dropped;      /* records the source lost (CUPTI's count), for the summary */
} Timeline;

void timeline_init(Timeline *tl);
void timeline_free(Timeline *tl);
/* Adds an event; name is copied (kernels: shortened by timeline_short_name).
 * Returns 0, or -1 when out of memory. */
int timeline_add(Timeline *tl, int kind, uint64_t start, uint64_t end, uint32_t stream,
                 const char *name, uint64_t bytes);
/* A kernel's display name: demangled when it is a mangled C++ name (and
 * libstdc++'s demangler is linked), "(anonymous namespace)::", the return
 * type and the parameter list dropped, at most 120 characters. */
void timeline_short_name(char *out, size_t outlen, const char *raw);
/* Chrome trace JSON: one complete ("X") event per record, microseconds from
 * the first event, pid = `pid` (the rank), tid = the stream. */
int timeline_write_chrome(const Timeline *tl, const char *path, int pid, char *err, size_t errlen);
/* The summary above, for `steps` steps (>= 1). */
void timeline_summary(const Timeline *tl, FILE *out, int steps);
/* The same into the file `path` (written whole or not at all, as the trace
 * is), after the line first_line. */
int timeline_write_summary(const Timeline *tl, const char *path, const char *first_line,
                           int steps, char *err, size_t errlen);

#endif
