/* soak.c — soak CSV rows and their summary (see soak.h for the definitions). */
#include "soak.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "nvml.h"

int soak_open(SoakRecorder *s, const char *csv_path, int64_t warmup_steps)
{
    memset(s, 0, sizeof *s);
    s->warmup_steps = warmup_steps;
    if (!csv_path) return 0;
    s->f = fopen(csv_path, "w");
    if (!s->f) return -1;
    fprintf(s->f, "time_s,step,samples_per_s,loss,mem_bytes,power_w,temp_c,sm_clock_mhz,throttle\n");
    fflush(s->f);
    return 0;
}

/* A CSV cell: the number, or nothing when it was not measured. */
static void cell(FILE *f, double v, const char *fmt, int last)
{
    if (isfinite(v)) fprintf(f, fmt, v);
    else if (isnan(v)) { /* empty */ }
    else fprintf(f, "%s", v > 0 ? "inf" : "-inf");   /* a diverged loss is worth seeing */
    fputc(last ? '\n' : ',', f);
}

void soak_add(SoakRecorder *s, const SoakRow *r)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        SoakRow *p = realloc(s->rows, cap * sizeof *p);
        if (p) {
            s->rows = p;
            s->cap = cap;
        }
    }
    if (s->n < s->cap) s->rows[s->n++] = *r;
    if (!s->f) return;
    cell(s->f, r->time_s, "%.3f", 0);
    fprintf(s->f, "%lld,", (long long)r->step);
    cell(s->f, r->samples_per_s, "%.6g", 0);
    /* a NaN loss must show: "nan" (the empty cell means "not recorded") */
    if (isnan(r->loss)) fprintf(s->f, "nan,");
    else cell(s->f, r->loss, "%.9g", 0);
    cell(s->f, r->mem_bytes, "%.0f", 0);
    cell(s->f, r->power_w, "%.3f", 0);
    cell(s->f, r->temp_c, "%.0f", 0);
    cell(s->f, r->sm_clock_mhz, "%.0f", 0);
    if (r->throttle >= 0) fprintf(s->f, "%lld\n", (long long)r->throttle);
    else fputc('\n', s->f);
    fflush(s->f);
}

void soak_note_error(SoakRecorder *s, const char *msg)
{
    if (!s->cuda_error[0] && msg && *msg) snprintf(s->cuda_error, sizeof s->cuda_error, "%s", msg);
}

/* Mean of the finite samples_per_s in rows[a, b); NaN when none. */
static double mean_sps(const SoakRow *rows, size_t a, size_t b)
{
    double sum = 0;
    int n = 0;
    for (size_t i = a; i < b; i++)
        if (isfinite(rows[i].samples_per_s)) { sum += rows[i].samples_per_s; n++; }
    return n ? sum / n : NAN;
}

void soak_summarize(const SoakRecorder *s, SoakSummary *sum)
{
    memset(sum, 0, sizeof *sum);
    sum->duration_s = sum->samples_per_s_mean = NAN;
    sum->mem_min_bytes = sum->mem_max_bytes = sum->mem_mean_bytes = sum->mem_fluctuation_pct = NAN;
    sum->throughput_first_mean = sum->throughput_last_mean = sum->throughput_drift_pct = NAN;
    sum->power_avg_w = sum->power_peak_w = sum->temp_max_c = sum->sm_clock_min_mhz = NAN;
    sum->throttle_seen = -1;
    sum->first_nonfinite_step = -1;
    snprintf(sum->cuda_error, sizeof sum->cuda_error, "%s", s->cuda_error);
    sum->rows = (int)s->n;
    if (!s->n) return;
    sum->duration_s = s->rows[s->n - 1].time_s;

    for (size_t i = 0; i < s->n; i++)
        if (!isfinite(s->rows[i].loss)) {
            if (!sum->nonfinite_loss) sum->first_nonfinite_step = s->rows[i].step;
            sum->nonfinite_loss++;
        }

    /* Rows after warm-up: [w, n). */
    size_t w = 0;
    while (w < s->n && s->rows[w].step <= s->warmup_steps) w++;
    size_t m = s->n - w;
    sum->rows_after_warmup = (int)m;
    if (!m) return;
    const SoakRow *r = s->rows + w;

    sum->samples_per_s_mean = mean_sps(r, 0, m);
    size_t k = m / 10 ? m / 10 : 1;
    sum->throughput_first_mean = mean_sps(r, 0, k);
    sum->throughput_last_mean = mean_sps(r, m - k, m);
    if (sum->throughput_first_mean > 0)
        sum->throughput_drift_pct =
            (sum->throughput_last_mean - sum->throughput_first_mean) / sum->throughput_first_mean * 100;

    double mem_sum = 0, pow_sum = 0;
    int n_mem = 0, n_pow = 0;
    for (size_t i = 0; i < m; i++) {
        double v = r[i].mem_bytes;
        if (isfinite(v)) {
            sum->mem_min_bytes = n_mem ? fmin(sum->mem_min_bytes, v) : v;
            sum->mem_max_bytes = n_mem ? fmax(sum->mem_max_bytes, v) : v;
            mem_sum += v;
            n_mem++;
        }
        if (isfinite(r[i].power_w)) {
            sum->power_peak_w = n_pow ? fmax(sum->power_peak_w, r[i].power_w) : r[i].power_w;
            pow_sum += r[i].power_w;
            n_pow++;
        }
        if (isfinite(r[i].temp_c))
            sum->temp_max_c = isnan(sum->temp_max_c) ? r[i].temp_c : fmax(sum->temp_max_c, r[i].temp_c);
        if (isfinite(r[i].sm_clock_mhz))
            sum->sm_clock_min_mhz = isnan(sum->sm_clock_min_mhz) ? r[i].sm_clock_mhz
                                                                 : fmin(sum->sm_clock_min_mhz, r[i].sm_clock_mhz);
        if (r[i].throttle >= 0) {
            int64_t slow = (int64_t)((uint64_t)r[i].throttle & NVML_THROTTLE_SLOWDOWN_MASK);
            sum->throttle_seen = (sum->throttle_seen < 0 ? 0 : sum->throttle_seen) | slow;
            if (slow) sum->throttled_rows++;
        }
    }
    if (n_mem) {
        sum->mem_mean_bytes = mem_sum / n_mem;
        if (sum->mem_mean_bytes > 0)
            sum->mem_fluctuation_pct =
                (sum->mem_max_bytes - sum->mem_min_bytes) / sum->mem_mean_bytes * 100;
    }
    if (n_pow) sum->power_avg_w = pow_sum / n_pow;
    if (sum->throttle_seen >= 0)
        nvml_throttle_names(sum->throttle_seen, sum->throttle_names, sizeof sum->throttle_names);
}

void soak_print(const SoakSummary *s, FILE *out)
{
    const double GiB = 1024.0 * 1024 * 1024;
    fprintf(out, "soak: %d rows over %.0f s (%d after warm-up)\n", s->rows,
            isfinite(s->duration_s) ? s->duration_s : 0.0, s->rows_after_warmup);
    if (isfinite(s->mem_fluctuation_pct))
        fprintf(out, "  memory      %.3f .. %.3f GiB, fluctuation %.2f%%\n", s->mem_min_bytes / GiB,
                s->mem_max_bytes / GiB, s->mem_fluctuation_pct);
    else
        fprintf(out, "  memory      not measured\n");
    if (isfinite(s->throughput_drift_pct))
        fprintf(out, "  throughput  %.1f samples/s mean, first 10%% %.1f, last 10%% %.1f: drift %+.2f%%\n",
                s->samples_per_s_mean, s->throughput_first_mean, s->throughput_last_mean,
                s->throughput_drift_pct);
    else
        fprintf(out, "  throughput  not measured\n");
    if (s->throttle_seen < 0)
        fprintf(out, "  throttling  not measured (no NVML)\n");
    else if (s->throttle_seen == 0)
        fprintf(out, "  throttling  none\n");
    else
        fprintf(out, "  throttling  %s in %d of %d rows\n", s->throttle_names, s->throttled_rows,
                s->rows_after_warmup);
    if (isfinite(s->power_avg_w))
        fprintf(out, "  power       %.0f W mean, %.0f W peak\n", s->power_avg_w, s->power_peak_w);
    if (isfinite(s->temp_max_c) || isfinite(s->sm_clock_min_mhz))
        fprintf(out, "  GPU         max %.0f C, SM clock min %.0f MHz\n", s->temp_max_c,
                s->sm_clock_min_mhz);
    if (s->nonfinite_loss)
        fprintf(out, "  loss        %d non-finite values, first at step %lld\n", s->nonfinite_loss,
                (long long)s->first_nonfinite_step);
    else
        fprintf(out, "  loss        finite throughout\n");
    fprintf(out, "  CUDA errors %s\n", s->cuda_error[0] ? s->cuda_error : "none");
}

void soak_close(SoakRecorder *s)
{
    if (s->f) fclose(s->f);
    free(s->rows);
    memset(s, 0, sizeof *s);
}
