/* soak.h — the soak recorder: one CSV row per sample over a long run, and a
 * summary that says whether the run stayed healthy.
 *
 * CSV (header first, one flushed row per soak_add, so a killed run keeps its
 * rows):
 *   time_s,step,samples_per_s,loss,mem_bytes,power_w,temp_c,sm_clock_mhz,throttle
 * An unmeasured field is an empty cell (never 0). throttle is NVML's reason
 * bitmask in decimal (see nvml.h; 4 = sw_power_cap, 64 = hw_thermal).
 *
 * Summary, over the rows after warm-up (step > warmup_steps):
 *   memory fluctuation %  (max - min) / mean of mem_bytes * 100
 *   throughput drift %    (mean of the last 10% of rows - mean of the first
 *                         10%) / mean of the first 10% * 100 (at least one
 *                         row each; negative = it slowed down)
 *   throttling            OR of every row's reasons restricted to slowdown
 *                         reasons (idle and app-clock settings are not
 *                         throttling), with names and the rows it was seen in
 * and over ALL rows (a NaN in warm-up is still a NaN):
 *   non-finite losses     rows whose loss is NaN or +-inf (so the caller must
 *                         record the loss in every row)
 *   CUDA error            the first message passed to soak_note_error
 */
#ifndef CTRAIN_TRAIN_SOAK_H
#define CTRAIN_TRAIN_SOAK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct SoakRow {
    double time_s;           /* since the soak started */
    int64_t step;
    double samples_per_s;    /* over the interval since the previous row */
    double loss;
    double mem_bytes;        /* the engine's device memory in use (NaN unknown) */
    double power_w, temp_c, sm_clock_mhz;   /* NaN when NVML is absent */
    int64_t throttle;        /* NVML reason bits; -1 when unknown */
} SoakRow;

typedef struct SoakSummary {
    int rows, rows_after_warmup;
    double duration_s;
    double samples_per_s_mean;      /* after warm-up */
    double mem_min_bytes, mem_max_bytes, mem_mean_bytes;
    double mem_fluctuation_pct;
    double throughput_first_mean, throughput_last_mean;
    double throughput_drift_pct;
    double power_avg_w, power_peak_w, temp_max_c, sm_clock_min_mhz;
    int64_t throttle_seen;          /* slowdown reasons seen; -1 when never measured */
    int throttled_rows;
    char throttle_names[160];       /* "none", or e.g. "sw_power_cap,hw_thermal" */
    int nonfinite_loss;
    int64_t first_nonfinite_step;   /* -1 when none */
    char cuda_error[256];           /* "" when none */
} SoakSummary;

typedef struct SoakRecorder {
    FILE *f;                 /* NULL: rows kept in memory only */
    SoakRow *rows;
    size_t n, cap;
    int64_t warmup_steps;
    char cuda_error[256];
} SoakRecorder;

/* Open the CSV (truncating it) and write the header; csv_path NULL keeps rows
 * in memory only. Returns 0, or -1 with errno set when the file cannot be
 * opened (the recorder is then in-memory only). */
int soak_open(SoakRecorder *s, const char *csv_path, int64_t warmup_steps);
/* Append a row: to memory and, when open, to the CSV (flushed). */
void soak_add(SoakRecorder *s, const SoakRow *r);
/* Keep the first CUDA error message; later ones are ignored. */
void soak_note_error(SoakRecorder *s, const char *msg);
void soak_summarize(const SoakRecorder *s, SoakSummary *sum);
/* The short block printed at the end of a soak. */
void soak_print(const SoakSummary *sum, FILE *out);
void soak_close(SoakRecorder *s);

#endif
