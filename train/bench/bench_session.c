/* bench_session.c — the parent's side of `ctrain bench` (bench_session.h):
 * running one config in a child with a progress line (on a terminal:
 * redrawn in place every 250 ms and at each step the child reports), the
 * figures derived from what it measured (MFU over the datasheet peak and
 * over this run's matmul ceiling, samples/s per watt), the terminal table,
 * the JSON file, and which configs failed (other than by running out of
 * memory: those decide the exit status).
 */
#include "bench_session.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "train/loop/progress.h"
#include "bench_child.h"
#include "bench_conditions.h"
#include "bench_rank.h"
#include "bench_run.h"
#include "peaks.h"

#define CONFIG_LIMIT_S 900.0   /* a config's child is killed after this long */

/* ---- Rows, derived figures, JSON. */

void bench_row_derive(BenchRow *row, const BenchProbe *probe, double fps)
{
    BenchResult *r = &row->r;
    if (row->error[0] || !isfinite(r->samples_per_s)) return;
    r->flops_per_sample = fps > 0 ? fps : NAN;
    int gpu = strncmp(row->mode, "cpu", 3) != 0;
    r->peak_tflops = gpu ? peaks_tflops(probe->machine.gpu_name, row->precision) : NAN;
    r->mfu_peak = mfu(r->flops_per_sample, r->samples_per_s, r->peak_tflops);
    for (int i = 0; i < probe->n_ceilings; i++)
        if (!strcmp(probe->ceilings[i].precision, row->precision)) r->ceiling_tflops = probe->ceilings[i].tflops;
    r->mfu_measured_ceiling = mfu(r->flops_per_sample, r->samples_per_s, r->ceiling_tflops);
    if (r->power_avg_w > 0) r->samples_per_s_per_w = r->samples_per_s / r->power_avg_w;
}

BenchRow *bench_session_add(BenchSession *s, const BenchRow *row)
{
    if (s->n_rows == s->cap_rows) {
        s->cap_rows = s->cap_rows ? s->cap_rows * 2 : 32;
        s->rows = (BenchRow *)realloc(s->rows, (size_t)s->cap_rows * sizeof *s->rows);
        if (!s->rows) ct_fatal("out of host memory");
        for (int i = 0; i < s->n_rows; i++) bench_row_fix(&s->rows[i]);
    }
    BenchRow *r = &s->rows[s->n_rows++];
    *r = *row;
    bench_row_fix(r);
    bench_conditions_busy_pcie(&s->probe.machine, r->pcie_gen_busy, r->pcie_width_busy);
    return r;
}

int bench_row_failed(const BenchRow *row)
{
    return row->failure[0] && !bench_error_is_oom(row->failure);
}

int bench_session_failures(const BenchSession *s)
{
    int n = 0;
    for (int i = 0; i < s->n_rows; i++) n += bench_row_failed(&s->rows[i]);
    if (!n) return 0;
    printf("%d config%s failed (other than running out of memory, which is an answer):\n", n,
           n == 1 ? "" : "s");
    for (int i = 0; i < s->n_rows; i++)
        if (bench_row_failed(&s->rows[i]))
            printf("  %s: %s%s\n", s->rows[i].label, s->rows[i].failure,
                   s->rows[i].error[0] ? "" : " (after reporting its figures, which are kept)");
    fflush(stdout);
    return n;
}

void bench_session_write_json(BenchSession *s)
{
    if (!s->json_path || !s->json_path[0]) return;
    BenchResult *res = (BenchResult *)calloc((size_t)s->n_rows + 1, sizeof *res);
    if (!res) return;
    for (int i = 0; i < s->n_rows; i++) {
        bench_row_fix(&s->rows[i]);
        res[i] = s->rows[i].r;
    }
    BenchRun run;
    memset(&run, 0, sizeof run);
    run.machine = s->probe.machine;
    run.command = s->command;
    run.results = res;
    run.n_results = s->n_rows;
    run.ceilings = s->probe.ceilings;
    run.n_ceilings = s->probe.n_ceilings;
    if (bench_json_write_file(s->json_path, &run) != 0)
        ct_error_hint("check that the folder exists and is writable", "cannot write %s: %s",
                      s->json_path, strerror(errno));
    free(res);
}

/* ---- Running one config, with a progress line. */

typedef struct RunState {
    BenchSession *s;
    const char *prefix;
    char label[96];
    char phase[16];
    int step, of;
    double t0;
    BenchRow *row;
    int got_result;
} RunState;

static void draw(RunState *st)
{
    if (!st->s->tty) return;
    char a[32], b[32], what[64] = "starting";
    if (!strcmp(st->phase, "build")) snprintf(what, sizeof what, "building the model");
    else if (!strcmp(st->phase, "warmup")) snprintf(what, sizeof what, "warm-up %d/%d", st->step, st->of);
    else if (!strcmp(st->phase, "timed") && st->step <= st->of)
        snprintf(what, sizeof what, "timed step %d/%d", st->step, st->of);
    else if (!strcmp(st->phase, "timed"))   /* past --steps: filling the minimum time */
        snprintf(what, sizeof what, "timed step %d", st->step);
    double now = progress_now();
    printf("\r\033[K%s %s: %s  %s (total %s)", st->prefix, st->label, what,
           progress_fmt_time(a, sizeof a, now - st->t0), progress_fmt_time(b, sizeof b, now - st->s->t0));
    fflush(stdout);
}

static void run_on_line(const char *line, void *user)
{
    RunState *st = (RunState *)user;
    double v;
    if (bench_line_is(line, "progress")) {
        bench_line_str(line, "phase", st->phase, sizeof st->phase);
        st->step = bench_line_num(line, "step", &v) ? (int)v : 0;
        st->of = bench_line_num(line, "of", &v) ? (int)v : 0;
    } else if (bench_line_is(line, "result")) {
        bench_row_read(st->row, line);
        st->got_result = 1;
    }
}

static void run_on_tick(void *user) { draw((RunState *)user); }

void bench_run_config(BenchSession *s, const BenchConfig *cfg, BenchRow *row, const char *prefix)
{
    bench_row_init(row, cfg);
    const BenchMachine *m = &s->probe.machine;
    if (bench_config_unsupported(cfg, m->compute_capability, m->gpu_name, row->error,
                                 sizeof row->error)) {
        row->r.warmup = -1;   /* a row that says why, and no figures: nothing ran */
        bench_row_fix(row);
        return;
    }
    RunState st;
    memset(&st, 0, sizeof st);
    st.s = s;
    st.prefix = prefix;
    st.row = row;
    st.t0 = progress_now();
    bench_config_label(cfg, st.label, sizeof st.label);
    draw(&st);
    BenchExit ex;
    int rc = bench_child_run(cfg->gpus > 1 ? bench_child_dist : bench_child_config, cfg,
                             CONFIG_LIMIT_S, run_on_line, run_on_tick, &st, &ex);
    if (s->tty) { printf("\r\033[K"); fflush(stdout); }
    row->elapsed_s = ex.elapsed_s;
    if (!st.got_result) {
        char why[256];
        bench_exit_reason(&ex, why, sizeof why);
        if (rc == 0) snprintf(why, sizeof why, "the benchmark process reported no result");
        bench_row_init(row, cfg);
        row->r.warmup = -1;
        snprintf(row->error, sizeof row->error, "%s", why);
        snprintf(row->failure, sizeof row->failure, "%s", why);
        row->elapsed_s = ex.elapsed_s;
        bench_row_fix(row);
        return;
    }
    if (rc != 0) {
        char why[256];
        bench_exit_reason(&ex, why, sizeof why);
        snprintf(row->failure, sizeof row->failure, "%s", why);
        fprintf(stderr, "note: %s: the process failed after measuring (%s); its figures are kept\n",
                st.label, why);
    }
    bench_row_derive(row, &s->probe, bench_config_flops(cfg));
}

/* ---- The terminal table. */

static void cell(char *buf, size_t len, double v, const char *fmt)
{
    if (isfinite(v)) snprintf(buf, len, fmt, v);
    else snprintf(buf, len, "-");
}

void bench_table_header(int gpu)
{
    printf("%-11s %-4s %5s %4s %9s %19s %8s %8s %8s %5s %5s %7s %8s %5s %6s\n", "model", "prec", "batch",
           "seq", gpu ? "samples/s" : "CPU smp/s", "(min .. max)", "ms p50", "ms p99", "peak GiB", "MFU%",
           "ceil%", "power W", "samp/s/W", "temp", "wall s");
}

/* Under a row whose model is not the named one: what it was. */
static void table_note(const BenchRow *row)
{
    if (row->model_note[0]) printf("%-11s model: %s\n", "", row->model_note);
}

void bench_table_row(const BenchRow *row)
{
    const BenchResult *r = &row->r;
    char seq[16] = "-";
    if (r->seq > 0) snprintf(seq, sizeof seq, "%d", r->seq);
    char model[32];   /* a real-data row: under its synthetic row, named by its decoder */
    if (r->data && strcmp(r->data, "synthetic")) snprintf(model, sizeof model, "  real:%s", row->decode);
    else snprintf(model, sizeof model, "%s", row->model);
    printf("%-11s %-4s %5d %4s ", model, row->precision, r->batch, seq);
    if (row->error[0]) {
        printf("%s", row->error);
        if (isfinite(row->elapsed_s)) printf("  (%.0f s)", row->elapsed_s);
        printf("\n");
        table_note(row);
        fflush(stdout);
        return;
    }
    char sps[32], mm[48], ms[32], p99[32], mem[32], m1[16], m2[16], pw[16], eff[16], tc[16], wall[16];
    cell(sps, sizeof sps, r->samples_per_s, r->samples_per_s < 100 ? "%.2f" : "%.1f");
    if (isfinite(r->samples_per_s_min))
        snprintf(mm, sizeof mm, r->samples_per_s < 100 ? "(%.2f .. %.2f)" : "(%.0f .. %.0f)",
                 r->samples_per_s_min, r->samples_per_s_max);
    else snprintf(mm, sizeof mm, "-");
    cell(ms, sizeof ms, r->ms_per_step, "%.2f");
    cell(p99, sizeof p99, r->step_ms_p99, "%.2f");
    double gib = r->peak_mem_bytes / (1024.0 * 1024 * 1024);
    cell(mem, sizeof mem, gib, gib < 1 ? "%.3f" : "%.2f");
    cell(m1, sizeof m1, 100 * r->mfu_peak, "%.1f");
    cell(m2, sizeof m2, 100 * r->mfu_measured_ceiling, "%.1f");
    cell(pw, sizeof pw, r->power_avg_w, "%.0f");
    cell(eff, sizeof eff, r->samples_per_s_per_w, r->samples_per_s_per_w < 1 ? "%.3f" : "%.2f");
    cell(tc, sizeof tc, r->temp_max_c, "%.0f");
    cell(wall, sizeof wall, row->elapsed_s, "%.0f");
    printf("%9s %19s %8s %8s %8s %5s %5s %7s %8s %5s %6s\n", sps, mm, ms, p99, mem, m1, m2, pw, eff, tc,
           wall);
    table_note(row);
    fflush(stdout);
}
