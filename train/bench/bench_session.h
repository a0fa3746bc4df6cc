/* bench_session.h — the parent's side of `ctrain bench`: the session (the
 * probe's facts, the rows so far, the JSON file), one config run in a child
 * with a progress line, the figures derived from what it measured, and the
 * terminal table. */
#ifndef CTRAIN_TRAIN_BENCH_SESSION_H
#define CTRAIN_TRAIN_BENCH_SESSION_H

#include "bench_config.h"
#include "bench_probe.h"

typedef struct BenchSession {
    BenchProbe probe;
    int tty;
    char command[1024];
    const char *json_path;
    BenchRow *rows;
    int n_rows, cap_rows;
    double t0;
} BenchSession;

BenchRow *bench_session_add(BenchSession *s, const BenchRow *row);
/* Write --json (when given) with everything so far; warns on failure. */
void bench_session_write_json(BenchSession *s);
/* Derived figures: MFU over the peak and the ceiling, samples/s per watt. */
void bench_row_derive(BenchRow *row, const BenchProbe *probe, double flops_per_sample);
/* Run one config in a child and fill row (error rows included); on a
 * terminal a progress line starting with prefix is drawn meanwhile. */
void bench_run_config(BenchSession *s, const BenchConfig *cfg, BenchRow *row, const char *prefix);

/* 1 when the row's config failed other than by running out of memory (a
 * crash, a kill, a time-out, an error; bench_child.h BENCH_OOM_REASON). */
int bench_row_failed(const BenchRow *row);
/* Print the configs that failed so, with why; returns how many (the
 * suite's and --gpus' exit status is 1 when any did). */
int bench_session_failures(const BenchSession *s);

/* The terminal table: column titles, and one row (or its error); a row
 * whose model is not the named one gets a line under it saying what it was. */
void bench_table_header(int gpu);
void bench_table_row(const BenchRow *row);

#endif
