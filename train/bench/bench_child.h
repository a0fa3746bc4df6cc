/* bench_child.h — running one benchmark measurement in a child process,
 * and the line protocol between the child and the parent (one flat JSON
 * object per line, train/io/jsonlog.h: "progress", "row", "result", ...).
 */
#ifndef CTRAIN_TRAIN_BENCH_CHILD_H
#define CTRAIN_TRAIN_BENCH_CHILD_H

#include <stdio.h>
#include "bench_config.h"

typedef void (*BenchChildFn)(FILE *out, const void *arg);
typedef void (*BenchLineFn)(const char *line, void *user);
typedef void (*BenchTickFn)(void *user);

typedef struct BenchExit {
    int exited, status;            /* exit status when exited */
    int signaled, sig;
    int timed_out;                 /* killed by the watchdog */
    double elapsed_s;
    char output[4096];             /* the tail of what it printed (stdout + stderr) */
} BenchExit;

/* Fork; in the child run fn(out, arg) with stdout and stderr captured, then
 * exit 0. In the parent, call on_line for every line the child writes as it
 * arrives and on_tick about every 250 ms, until the child ends (or runs past
 * limit_s: then it is killed). Returns 0 when the child exited with status 0. */
int bench_child_run(BenchChildFn fn, const void *arg, double limit_s, BenchLineFn on_line,
                    BenchTickFn on_tick, void *user, BenchExit *ex);
/* Why a child failed, in a few words: "out of memory", "timed out after
 * 600 s", "crashed: signal 11 (Segmentation fault)", or its error message. */
void bench_exit_reason(const BenchExit *ex, char *buf, size_t len);
/* 1 when a failure reads as running out of memory (ctrain's message, or a
 * library's allocation status). */
int bench_text_is_oom(const char *text);
/* A row's error when it ran out of memory: an answer about the card (the
 * config does not fit), not a failure of the bench. Anything else (a crash,
 * a kill, a time-out, an error message) is a failure: `ctrain bench` exits
 * 1 when a config failed. */
#define BENCH_OOM_REASON "out of memory"
int bench_error_is_oom(const char *error);

/* ---- The line protocol. */
/* 1 when line is an object with "event": event. */
int bench_line_is(const char *line, const char *event);
/* The number / string under key; 0 when absent (null, missing, wrong type). */
int bench_line_num(const char *line, const char *key, double *v);
int bench_line_str(const char *line, const char *key, char *buf, size_t len);
/* A row's measurements <-> a "result" line. */
void bench_row_write(FILE *out, const BenchRow *row);
void bench_row_read(BenchRow *row, const char *line);

#endif
