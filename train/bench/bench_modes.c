/* bench_modes.c — `ctrain bench --max-batch` and `ctrain bench --soak`.
 *
 * --max-batch: for each model and precision, without and with --recompute
 * all, the largest batch that trains: double from the start batch (16, or
 * the first --batch) until a try fails, then bisect between the last batch
 * that fit and the first that failed, to 1 below batch 64, to a multiple of
 * 8 below 1024 and to about 1% above (the sizes people use; it halves the
 * tries). Peak memory grows linearly with the batch, so once two tries fit,
 * the batch where it would reach the card's memory is predicted and tried
 * (a jump while growing, the probe point while narrowing): near 3000 that
 * turns ~10 tries into ~4. Each try is its own
 * child process running one warm-up and one measured step, so running out of
 * memory is an ordinary answer, not the end of the search. Any failure
 * counts as "does not fit"; the reason of the smallest failing batch is
 * reported next to the answer.
 *
 * --soak: one config for a duration. The child sends a row every few
 * seconds (or every --soak-every steps): time, step, samples/s over the
 * interval, loss, memory in use, NVML power, temperature, SM clock and
 * throttle reasons. The parent writes the rows to the CSV (train/bench/soak.h) as
 * they come, so a crash or a kill keeps them, and at the end prints the soak
 * summary (memory fluctuation, throughput drift, throttling, non-finite
 * losses, the error if one ended it) and puts it into the JSON. Ctrl-C ends
 * the soak early with a last row and the summary.
 */
#include "bench_modes.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "train/loop/progress.h"
#include "bench_child.h"
#include "bench_run.h"
#include "soak.h"

#define GiB (1024.0 * 1024 * 1024)
#define MAX_BATCH_LIMIT (1 << 20)

/* ---- --max-batch */

/* The answer's step: 1 below batch 64, 8 below 1024, then 0.8-1.5% of the
 * batch (a power of two: 16 from 1024, 32 from 2048, ...), so a search near
 * 4000 needs no try for every 8. */
static int granularity(int lo)
{
    if (lo < 64) return 1;
    int g = 8;
    while (g * 128 <= lo) g *= 2;
    return g;
}

typedef struct Search {
    int best;                /* largest batch that fit (0: none) */
    BenchRow best_row;
    int failed;              /* smallest batch that failed (0: none) */
    char why[256];
    int tries;
    int fit_b[2];            /* the first and the latest batch that fit, and their peaks */
    double fit_peak[2];
    double capacity;         /* memory ctrain may use (bytes; 0 unknown) */
} Search;

/* The batch at which ctrain's peak would reach the capacity, from the first
 * and the latest fit (the widest base, the least noise): peak memory is close to linear in the batch (the state is the
 * intercept, activations the slope). 0 when there is no estimate. Only a
 * proposal: every answer is still a try that fitted. */
static double predict_batch(const Search *se)
{
    if (se->capacity <= 0 || se->fit_b[0] <= 0 || se->fit_b[1] <= se->fit_b[0]) return 0;
    double slope = (se->fit_peak[1] - se->fit_peak[0]) / (se->fit_b[1] - se->fit_b[0]);
    if (!(slope > 0)) return 0;
    double b = se->fit_b[1] + (se->capacity - se->fit_peak[1]) / slope;
    return b < MAX_BATCH_LIMIT ? b : MAX_BATCH_LIMIT;   /* cast to int by the callers */
}

static int try_batch(BenchSession *s, BenchConfig *cfg, int batch, Search *se)
{
    BenchRow row;
    char prefix[48];
    cfg->batch = batch;
    snprintf(prefix, sizeof prefix, "[max-batch try %d]", ++se->tries);
    bench_run_config(s, cfg, &row, prefix);
    int fits = row.error[0] == 0;
    char label[96];
    bench_config_label(cfg, label, sizeof label);
    if (fits) {
        printf("  %-40s fits: peak %.2f GiB  (%.0f s)\n", label, row.r.peak_mem_bytes / GiB, row.elapsed_s);
        se->best = batch;
        se->best_row = row;
        bench_row_fix(&se->best_row);
        int k = se->fit_b[0] == 0 ? 0 : 1;
        if (k == 1 && batch < se->fit_b[1]) k = -1; /* keep the widest base */
        if (k >= 0) {
            se->fit_b[k] = batch;
            se->fit_peak[k] = row.engine_peak_mem_bytes;
        }
    } else {
        printf("  %-40s %s  (%.0f s)\n", label, row.error, row.elapsed_s);
        se->failed = batch;
        snprintf(se->why, sizeof se->why, "%s", row.error);
    }
    fflush(stdout);
    return fits;
}

/* Grow from start until a try fails: doubling, or once two fits give a
 * slope, straight to 2% under the predicted limit (2% over it when already
 * there; doubling again when a fit lies past it). Then narrow the gap between the best fit and the smallest failure,
 * trying the predicted limit when it lies inside the gap, the middle
 * otherwise. */
static void search_batch(BenchSession *s, BenchConfig *cfg, int start, double capacity, Search *se)
{
    memset(se, 0, sizeof *se);
    se->capacity = capacity;
    int b = start;
    for (;;) {
        if (!try_batch(s, cfg, b, se)) break;
        if (b >= MAX_BATCH_LIMIT) return;
        double pb = predict_batch(se);
        int g = granularity(b);
        int next = b * 2;
        if (pb > b) {   /* (pb <= b: this batch fitted past the estimate; keep doubling) */
            next = (int)(0.98 * pb) / g * g;
            if (next < b + g) next = ((int)(1.02 * pb) + g - 1) / g * g;
            if (next < b + g) next = b + g;
        }
        b = next > MAX_BATCH_LIMIT ? MAX_BATCH_LIMIT : next;
    }
    while (se->failed - se->best > granularity(se->best)) {
        int g = granularity(se->best);
        int mid = (se->best + (se->failed - se->best) / 2) / g * g;
        int pb = (int)predict_batch(se) / g * g;
        if (pb > se->best && pb < se->failed) mid = pb;
        if (mid <= se->best) mid = se->best + g;
        if (mid >= se->failed) break;
        try_batch(s, cfg, mid, se);
    }
}

int bench_max_batch(BenchSession *s, const BenchConfig *base, const ModelKind *models,
                    int n_models, const Precision *precisions, int n_precisions)
{
    typedef struct Answer { char label[96]; int every; Search se; } Answer;
    Answer *ans = NULL;
    int n = 0;
    /* what ctrain may allocate, for the prediction: CTRAIN_MEM_LIMIT, else
     * the card's memory less 3% for the CUDA context and the libraries */
    double capacity = (double)ctx_mem_limit_from_env();
    if (capacity <= 0 && base->device != DEV_CPU && s->probe.machine.gpu_memory_bytes > 0)
        capacity = 0.97 * (double)s->probe.machine.gpu_memory_bytes;
    printf("largest batch that fits: from %d, doubling (or jumping to the limit that the peak "
           "memory of two fits predicts), then narrowing to 1 below batch 64, 8 below 1024 and "
           "about 1%% above;\neach try is one warm-up and one measured step in its own process\n",
           base->batch > 0 ? base->batch : 16);
    for (int mi = 0; mi < n_models; mi++) {
        ModelKind mk = models[mi];
        const char *m = model_kind_name(mk);
        for (int pi = 0; pi < n_precisions; pi++) {
            const char *p = precision_name(precisions[pi]);
            for (int rec = 0; rec < 2; rec++) {
                BenchConfig cfg = *base;
                bench_config_model(&cfg, mk, base->image_size > 0 ? base->image_size : 224,
                                   base->device == DEV_CPU);
                cfg.precision = precisions[pi];
                cfg.seq = model_kind_is_bert(mk) ? (base->seq > 0 ? base->seq : 128) : 0;
                cfg.recompute.every = rec;
                cfg.warmup = 1;
                cfg.steps = 1;
                cfg.min_steps = 1;
                cfg.min_time_s = 0;
                cfg.time_limit_s = 0;
                Answer *a = (Answer *)realloc(ans, (size_t)(n + 1) * sizeof *ans);
                if (!a) ct_fatal("out of host memory");
                ans = a;
                a = &ans[n++];
                memset(a, 0, sizeof *a);
                a->every = rec;
                snprintf(a->label, sizeof a->label, "%s %s", m, p);
                printf("%s %s, recompute %s:\n", m, p, rec ? "all" : "none");
                char why[256] = "";
                const BenchMachine *pm = &s->probe.machine;
                const int refused = bench_config_unsupported(&cfg, pm->compute_capability,
                                                             pm->gpu_name, why, sizeof why);
                if (refused) {   /* nothing to search: an answer */
                    printf("  %s\n", why);
                    snprintf(a->se.why, sizeof a->se.why, "%s", why);
                }
                else search_batch(s, &cfg, base->batch > 0 ? base->batch : 16, capacity, &a->se);
                BenchRow row;
                cfg.batch = a->se.best > 0 ? a->se.best : 1;
                bench_row_init(&row, &cfg);
                snprintf(row.mode, sizeof row.mode, "%s%s", cfg.device == DEV_CPU ? "cpu " : "",
                         rec ? "max-batch recompute-all" : "max-batch");
                row.r.warmup = -1;
                if (refused) {
                    snprintf(row.error, sizeof row.error, "%s", why);
                } else if (a->se.best) {
                    row.r.peak_mem_bytes = a->se.best_row.r.peak_mem_bytes;
                    row.engine_peak_mem_bytes = a->se.best_row.engine_peak_mem_bytes;
                } else {
                    snprintf(row.error, sizeof row.error, "does not fit at batch %d: %.200s",
                             a->se.failed, a->se.why);
                }
                bench_row_fix(&row);
                bench_session_add(s, &row);
                bench_session_write_json(s);
            }
        }
    }
    printf("\n%-24s %-9s %13s %9s  %s\n", "model", "recompute", "largest batch", "peak GiB", "smallest batch that failed");
    for (int i = 0; i < n; i++) {
        const Search *se = &ans[i].se;
        char fail[300] = "none up to the limit";
        if (se->failed) snprintf(fail, sizeof fail, "%d: %s", se->failed, se->why);
        else if (se->why[0]) snprintf(fail, sizeof fail, "%s", se->why);   /* not supported */
        if (!se->best && !se->failed && se->why[0])
            printf("%-24s %-9s %13s %9s  %s\n", ans[i].label, ans[i].every ? "all" : "none", "n/a", "-",
                   fail);
        else if (se->best)
            printf("%-24s %-9s %13d %9.2f  %s\n", ans[i].label, ans[i].every ? "all" : "none", se->best,
                   se->best_row.r.peak_mem_bytes / GiB, fail);
        else
            printf("%-24s %-9s %13s %9s  %s\n", ans[i].label, ans[i].every ? "all" : "none", "none", "-", fail);
    }
    if (s->json_path[0]) printf("wrote %s\n", s->json_path);
    free(ans);
    return 0;
}

/* ---- --soak */

typedef struct SoakState {
    BenchSession *s;
    const BenchConfig *cfg;
    SoakRecorder rec;
    BenchRow *row;
    int got_result;
    double t0, last_print;
    char phase[16];
    SoakRow last;
    int have_last;
} SoakState;

static void soak_draw(SoakState *st, int force_line)
{
    char a[32], b[32], line[256];
    double now = progress_now();
    if (!st->have_last) {
        snprintf(line, sizeof line, "soak: %s  %s", !strcmp(st->phase, "warmup") ? "warm-up" : "building the model",
                 progress_fmt_time(a, sizeof a, now - st->t0));
    } else {
        const SoakRow *r = &st->last;
        char extra[96] = "";
        if (isfinite(r->power_w))
            snprintf(extra, sizeof extra, "  %.0f W  %.0f C  %.0f MHz", r->power_w, r->temp_c, r->sm_clock_mhz);
        snprintf(line, sizeof line, "soak %s / %s  step %lld  loss %.4f  %.1f samples/s  mem %.2f GiB%s",
                 progress_fmt_time(a, sizeof a, r->time_s), progress_fmt_time(b, sizeof b, st->cfg->soak_s),
                 (long long)r->step, r->loss, r->samples_per_s, r->mem_bytes / GiB, extra);
    }
    if (st->s->tty) {
        printf("\r\033[K%s", line);
        fflush(stdout);
    } else if (force_line && now - st->last_print >= 60) {
        printf("%s\n", line);
        fflush(stdout);
        st->last_print = now;
    }
}

static void soak_on_line(const char *line, void *user)
{
    SoakState *st = (SoakState *)user;
    double v;
    if (bench_line_is(line, "progress")) {
        bench_line_str(line, "phase", st->phase, sizeof st->phase);
    } else if (bench_line_is(line, "row")) {
        SoakRow r = {NAN, 0, NAN, NAN, NAN, NAN, NAN, NAN, -1};
        char lt[8] = "";
        if (bench_line_num(line, "time_s", &v)) r.time_s = v;
        if (bench_line_num(line, "step", &v)) r.step = (int64_t)v;
        if (bench_line_num(line, "samples_per_s", &v)) r.samples_per_s = v;
        if (bench_line_num(line, "loss", &v)) r.loss = v;
        else if (bench_line_str(line, "loss_text", lt, sizeof lt) && strstr(lt, "inf"))
            r.loss = lt[0] == '-' ? -INFINITY : INFINITY;
        if (bench_line_num(line, "mem_bytes", &v)) r.mem_bytes = v;
        if (bench_line_num(line, "power_w", &v)) r.power_w = v;
        if (bench_line_num(line, "temp_c", &v)) r.temp_c = v;
        if (bench_line_num(line, "sm_clock_mhz", &v)) r.sm_clock_mhz = v;
        if (bench_line_num(line, "throttle", &v)) r.throttle = (int64_t)v;
        soak_add(&st->rec, &r);
        st->last = r;
        st->have_last = 1;
        soak_draw(st, 1);
    } else if (bench_line_is(line, "result")) {
        bench_row_read(st->row, line);
        st->got_result = 1;
    }
}

static void soak_on_tick(void *user) { soak_draw((SoakState *)user, 0); }

int bench_soak(BenchSession *s, const BenchConfig *cfg, const char *csv_path)
{
    SoakState st;
    memset(&st, 0, sizeof st);
    st.s = s;
    st.cfg = cfg;
    st.t0 = progress_now();
    st.last_print = -1e9;   /* the first row is printed at once */
    BenchRow row;
    bench_row_init(&row, cfg);
    snprintf(row.mode, sizeof row.mode, "%s", cfg->device == DEV_CPU ? "cpu soak" : "soak");
    st.row = &row;
    if (soak_open(&st.rec, csv_path, cfg->warmup) != 0)
        ct_fatal_hint("pass --soak-csv FILE in a writable folder", "cannot write %s: %s", csv_path,
                      strerror(errno));
    char label[96], d[32];
    bench_config_label(cfg, label, sizeof label);
    char every[48];
    if (cfg->soak_every) snprintf(every, sizeof every, "%d steps", cfg->soak_every);
    else snprintf(every, sizeof every, "%.0f s", cfg->soak_interval_s);
    printf("soak: %s for %s after %d warm-up steps; a row every %s into %s (Ctrl-C ends it early)\n",
           label, progress_fmt_time(d, sizeof d, cfg->soak_s), cfg->warmup, every, csv_path);
    fflush(stdout);

    void (*old_int)(int) = signal(SIGINT, SIG_IGN);   /* Ctrl-C reaches the child, which stops cleanly */
    BenchExit ex;
    int rc = bench_child_run(bench_child_soak, cfg, cfg->soak_s + 1800, soak_on_line, soak_on_tick, &st, &ex);
    signal(SIGINT, old_int);
    if (s->tty) { printf("\r\033[K"); fflush(stdout); }
    row.elapsed_s = ex.elapsed_s;
    if (!strcmp(st.phase, "interrupted")) printf("soak ended early: interrupted (Ctrl-C or SIGTERM)\n");
    if (rc != 0) {
        char why[256];
        bench_exit_reason(&ex, why, sizeof why);
        soak_note_error(&st.rec, why);
        if (!st.got_result) snprintf(row.error, sizeof row.error, "%s", why);
    }
    static SoakSummary sum;   /* row.r.soak points here until the JSON is written */
    soak_summarize(&st.rec, &sum);
    soak_close(&st.rec);
    row.r.soak = &sum;
    row.r.samples_per_s = sum.samples_per_s_mean;
    row.r.power_avg_w = sum.power_avg_w;
    row.r.power_peak_w = sum.power_peak_w;
    row.r.temp_max_c = sum.temp_max_c;
    row.r.sm_clock_min_mhz = sum.sm_clock_min_mhz;
    if (sum.throttle_seen >= 0) snprintf(row.throttle, sizeof row.throttle, "%s", sum.throttle_names);
    bench_row_fix(&row);
    bench_row_derive(&row, &s->probe, bench_config_flops(cfg));
    bench_table_header(cfg->device == DEV_CUDA);
    bench_table_row(&row);
    soak_print(&sum, stdout);
    printf("rows in %s\n", csv_path);
    bench_session_add(s, &row);
    bench_session_write_json(s);
    if (s->json_path[0]) printf("wrote %s\n", s->json_path);
    return sum.nonfinite_loss || sum.cuda_error[0] ? 1 : 0;
}
