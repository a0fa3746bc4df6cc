/* test_bench_conditions.c — the bench's record of its conditions and the
 * warnings they give (train/bench/bench_conditions.h), on the CPU:
 *   - the machine record of a measuring run carries every condition key;
 *     what the card or driver does not report (here: everything GPU) is
 *     null, the load averages are 3 numbers, the CPU count positive, the
 *     warnings and notes arrays; --list's record (conditions not read)
 *     carries none of the keys;
 *   - made-up GPU conditions give exactly the warnings and notes of the
 *     rules: other processes named (or by PID), a lowered power limit, a
 *     PCIe link below its maximum under load, host load at the start or
 *     growing by the end beyond the bench's own threads; ECC on and
 *     persistence off as notes; a quiet card and host give none, and an
 *     idle card's lowered link generation is no warning;
 *   - the probe's lines carry the GPU conditions to the parent unchanged;
 *   - NVML's standing-state readers without a driver: unknown, no crash;
 * and what a row says of itself: its step-time percentiles (by hand), which
 * errors are running out of memory (an answer, exit 0) and which failures
 * (exit 1), and the CPU ResNet18's model note.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "json_read.h"
#include "train/bench/bench_child.h"
#include "train/bench/bench_conditions.h"
#include "train/bench/bench_run.h"
#include "train/bench/nvml.h"

static J *machine_json(const BenchMachine *m, const char *path, J **doc)
{
    BenchRun run;
    memset(&run, 0, sizeof run);
    run.machine = *m;
    run.command = "ctrain bench (test)";
    *doc = bench_json_write_file(path, &run) == 0 ? jparse_file(path) : NULL;
    return jget(*doc, "machine");
}

static int count_with(char list[][BENCH_WARNING_LEN], int n, const char *text)
{
    int k = 0;
    for (int i = 0; i < n; i++) k += strstr(list[i], text) != NULL;
    return k;
}

/* ---- The record of a run on this machine: GPU conditions unknown. */
static void test_record_here(const char *path)
{
    static BenchMachine m;
    bench_machine_collect(&m, 0);
    bench_conditions_init(&m);
    bench_conditions_read_gpu(&m, 0, 1);   /* no GPU here: nothing to read */
    bench_conditions_start(&m, 0);
    bench_conditions_end(&m, 0, 1);
    J *doc, *mj = machine_json(&m, path, &doc);
    if (!check_true("record.parses", mj && mj->t == J_OBJ, "the JSON does not parse")) return;
    static const char *gpu_keys[] = {"ecc_enabled", "persistence_mode", "power_limit_w",
                                     "power_limit_default_w", "pcie_gen", "pcie_width", "pcie_gen_max",
                                     "pcie_width_max", "pcie_gen_under_load", "pcie_width_under_load",
                                     "nvlink_active_links", "other_gpu_processes"};
    int missing = 0, not_null = 0;
    for (size_t i = 0; i < sizeof gpu_keys / sizeof gpu_keys[0]; i++) {
        J *v = jget(mj, gpu_keys[i]);
        missing += v == NULL;
        not_null += v && v->t != J_NULL;
    }
    check_true("record.gpu_keys_present", missing == 0, "%d of the GPU condition keys missing", missing);
    if (!jget(mj, "gpu_name"))   /* a machine without a GPU (or a CPU-only build) */
        check_true("record.gpu_keys_null", not_null == 0, "%d GPU conditions not null without a GPU",
                   not_null);
    for (int k = 0; k < 2; k++) {
        const char *key = k ? "load_avg_end" : "load_avg_start";
        J *a = jget(mj, key);
        int ok = a && a->t == J_ARR && a->n == 3;
        for (int i = 0; ok && i < 3; i++) ok = a->items[i]->t == J_NUM && a->items[i]->num >= 0;
        check_true(k ? "record.load_avg_end" : "record.load_avg_start", ok, "%s is not 3 numbers >= 0", key);
    }
    check_true("record.cpu_count", jnum(mj, "cpu_count") > 0 && jnum(mj, "cpu_count") == sysconf(_SC_NPROCESSORS_ONLN),
               "cpu_count %g", jnum(mj, "cpu_count"));
    J *w = jget(mj, "warnings"), *n = jget(mj, "notes");
    check_true("record.warning_arrays", w && w->t == J_ARR && n && n->t == J_ARR && n->n == 0,
               "warnings / notes not arrays (or a note on a CPU run)");
    jfree(doc);

    /* not read (--list, older writers): no condition key at all */
    bench_machine_collect(&m, 0);
    mj = machine_json(&m, path, &doc);
    check_true("record.absent_unless_read", mj && !jget(mj, "cpu_count") && !jget(mj, "warnings") &&
               !jget(mj, "ecc_enabled"), "condition keys written without being read");
    jfree(doc);
}

/* ---- Made-up GPU conditions and the warnings they give. */

static void quiet_gpu(BenchMachine *m)
{
    memset(m, 0, sizeof *m);
    bench_conditions_init(m);
    m->cpu_count = 64;
    m->load_avg_start[0] = 1.0;
    m->load_avg_start[1] = m->load_avg_start[2] = 0.5;
    m->gpu.ecc_enabled = 0;
    m->gpu.persistence_mode = 1;
    m->gpu.power_limit_w = m->gpu.power_default_w = 700;
    m->gpu.pcie_gen = 1;          /* idle: the card has lowered its link generation */
    m->gpu.pcie_width = 16;
    m->gpu.pcie_gen_max = 5;
    m->gpu.pcie_width_max = 16;
    m->gpu.nvlink_active = 0;
    m->n_gpu_processes = 0;
}

static void test_warnings(const char *path)
{
    static BenchMachine m;
    quiet_gpu(&m);
    bench_conditions_start(&m, 1);
    bench_conditions_busy_pcie(&m, 5, 16);
    m.load_avg_end[0] = 2.0;
    bench_conditions_judge_end(&m, 1, 1);
    check_true("warn.quiet", m.n_warnings == 0 && m.n_notes == 0, "%d warnings, %d notes: %s",
               m.n_warnings, m.n_notes, m.n_warnings ? m.warnings[0] : m.n_notes ? m.notes[0] : "");

    /* the idle link at gen 1 with no reading under load: no warning */
    quiet_gpu(&m);
    bench_conditions_start(&m, 1);
    bench_conditions_judge_end(&m, 1, 1);
    check_true("warn.idle_gen_is_no_warning", m.n_warnings == 0, "%s", m.warnings[0]);
    /* the width below its maximum is, even at idle */
    quiet_gpu(&m);
    m.gpu.pcie_width = 8;
    bench_conditions_judge_end(&m, 1, 1);
    check_true("warn.width_at_start", m.n_warnings == 1 && strstr(m.warnings[0], "x8 at the start") &&
               strstr(m.warnings[0], "x16"), "%d: %s", m.n_warnings, m.warnings[0]);

    /* a busy card on a busy host */
    quiet_gpu(&m);
    m.gpu.ecc_enabled = 1;
    m.gpu.persistence_mode = 0;
    m.gpu.power_limit_w = 450;
    m.n_gpu_processes = 2;
    m.gpu_processes[0] = (BenchGpuProcess){0, 4242, "python3", 10.5 * 1024 * 1024 * 1024};
    m.gpu_processes[1] = (BenchGpuProcess){0, 77, "", NAN};
    m.load_avg_start[0] = 40;
    bench_conditions_start(&m, 1);
    bench_conditions_busy_pcie(&m, 3, 16);
    bench_conditions_busy_pcie(&m, 4, 16);   /* the highest under load counts */
    bench_conditions_busy_pcie(&m, -1, -1);
    m.load_avg_end[0] = 60;
    bench_conditions_judge_end(&m, 1, 1);
    check_true("warn.processes", count_with(m.warnings, m.n_warnings, "2 other processes on the GPU: "
               "python3 (pid 4242, 10.5 GiB), pid 77; they share") == 1, "%s", m.warnings[0]);
    check_true("warn.power", count_with(m.warnings, m.n_warnings, "power limit 450 W, below the card's "
               "default 700 W") == 1, "no power-limit warning");
    check_true("warn.load_start", count_with(m.warnings, m.n_warnings, "host load average 40.0 at the "
               "start, on 64 CPUs") == 1, "no load warning");
    check_true("warn.load_end_once", count_with(m.warnings, m.n_warnings, "at the end") == 0,
               "the end repeats the start's load warning");
    check_true("warn.pcie_under_load", m.pcie_gen_under_load == 4 && m.pcie_width_under_load == 16 &&
               count_with(m.warnings, m.n_warnings, "PCIe link at gen 4 x16 under load, below the gen 5 "
               "x16") == 1, "under load gen %d x%d", m.pcie_gen_under_load, m.pcie_width_under_load);
    check_true("warn.count", m.n_warnings == 4, "%d warnings (want processes, power, load, PCIe)",
               m.n_warnings);
    check_true("warn.notes", m.n_notes == 2 && count_with(m.notes, m.n_notes, "ECC is on") == 1 &&
               count_with(m.notes, m.n_notes, "persistence mode is off") == 1, "%d notes", m.n_notes);

    J *doc, *mj = machine_json(&m, path, &doc);
    J *procs = jget(mj, "other_gpu_processes");
    int ok = procs && procs->t == J_ARR && procs->n == 2;
    if (ok) {
        J *a = procs->items[0], *b = procs->items[1];
        ok = jnum(a, "pid") == 4242 && !strcmp(jtext(a, "name"), "python3") &&
             jnum(a, "used_bytes") == 10.5 * 1024 * 1024 * 1024 && jnum(a, "gpu") == 0 &&
             jget(b, "name") && jget(b, "name")->t == J_NULL && jget(b, "used_bytes")->t == J_NULL;
    }
    check_true("json.processes", ok, "other_gpu_processes wrong");
    J *ecc = jget(mj, "ecc_enabled"), *pm = jget(mj, "persistence_mode");
    check_true("json.state", ecc && ecc->t == J_BOOL && ecc->num == 1 && pm && pm->t == J_BOOL && pm->num == 0 &&
               jnum(mj, "power_limit_w") == 450 && jnum(mj, "pcie_gen_max") == 5 &&
               jnum(mj, "pcie_gen_under_load") == 4 && jnum(mj, "nvlink_active_links") == 0,
               "the GPU state is not written as set");
    J *w = jget(mj, "warnings");
    check_true("json.warnings", w && w->t == J_ARR && w->n == 4 && !strcmp(w->items[0]->str, m.warnings[0]),
               "warnings not written");
    jfree(doc);

    /* host load that grew during the run, beyond the bench's own threads */
    quiet_gpu(&m);
    m.load_avg_end[0] = 60;   /* 60 - 16 of its own > 0.5 x 64 */
    bench_conditions_judge_end(&m, 1, 16);
    check_true("warn.load_end", m.n_warnings == 1 && strstr(m.warnings[0], "host load average 60.0 at the "
               "end, on 64 CPUs, of which this bench accounts for about 16"), "%d: %s", m.n_warnings,
               m.warnings[0]);
    quiet_gpu(&m);
    m.load_avg_end[0] = 60;
    bench_conditions_judge_end(&m, 1, 64);   /* the CPU bench keeps every CPU busy itself */
    check_true("warn.load_end_own", m.n_warnings == 0, "%s", m.warnings[0]);

    /* the CPU bench: no GPU warning or note, whatever the card says */
    quiet_gpu(&m);
    m.gpu.ecc_enabled = 1;
    m.gpu.power_limit_w = 100;
    m.n_gpu_processes = 1;
    m.gpu_processes[0] = (BenchGpuProcess){0, 1, "other", 1e9};
    bench_conditions_start(&m, 0);
    bench_conditions_judge_end(&m, 0, 64);
    check_true("warn.cpu_bench", m.n_warnings == 0 && m.n_notes == 0, "%d warnings, %d notes", m.n_warnings,
               m.n_notes);
}

/* ---- The probe's lines. */
static void test_lines(void)
{
    static BenchMachine a, b;
    quiet_gpu(&a);
    a.gpu.ecc_enabled = 1;
    a.gpu.power_limit_w = 312.5;
    a.gpu.nvlink_active = 18;
    a.n_gpu_processes = 2;
    a.gpu_processes[0] = (BenchGpuProcess){1, 4242, "python3", 1e9};
    a.gpu_processes[1] = (BenchGpuProcess){1, 77, "", NAN};
    FILE *f = tmpfile();
    if (!check_true("lines.tmpfile", f != NULL, "tmpfile failed")) return;
    bench_conditions_write(f, &a);
    rewind(f);
    memset(&b, 0, sizeof b);
    bench_conditions_init(&b);
    char line[4096];
    while (fgets(line, sizeof line, f)) bench_conditions_read(&b, line);
    fclose(f);
    check_true("lines.state", b.gpu.ecc_enabled == 1 && b.gpu.persistence_mode == 1 && b.gpu.power_limit_w == 312.5 &&
               b.gpu.power_default_w == 700 && b.gpu.pcie_gen == 1 && b.gpu.pcie_width_max == 16 &&
               b.gpu.nvlink_active == 18 && b.n_gpu_processes == 2, "state not carried");
    check_true("lines.processes", b.gpu_processes[0].pid == 4242 && b.gpu_processes[0].gpu == 1 &&
               !strcmp(b.gpu_processes[0].name, "python3") && b.gpu_processes[0].used_bytes == 1e9 &&
               b.gpu_processes[1].pid == 77 && !b.gpu_processes[1].name[0] &&
               isnan(b.gpu_processes[1].used_bytes), "processes not carried");
    check_true("lines.parent_keeps_host", b.cpu_count == sysconf(_SC_NPROCESSORS_ONLN) &&
               b.pcie_gen_under_load == -1, "the lines overwrote what the parent reads itself");
}

/* ---- NVML's state readers without a device. */
static void test_nvml_state(void)
{
    NvmlDevice d;
    memset(&d, 0, sizeof d);
    NvmlState st;
    NvmlProcess p[4];
    int gen = 0, width = 0;
    nvml_device_pcie(&d, &gen, &width);
    check_true("nvml.state_unknown", nvml_device_state(&d, &st) == 0 && st.ecc_enabled == -1 &&
               st.persistence_mode == -1 && isnan(st.power_limit_w) && isnan(st.power_default_w) &&
               st.pcie_gen == -1 && st.pcie_width_max == -1 && st.nvlink_active == -1 && gen == -1 &&
               width == -1, "an unopened device reported a state");
    check_true("nvml.processes_unknown", nvml_device_processes(&d, p, 4) == -1,
               "an unopened device listed processes");
}

/* ---- What a row says of itself. */
static void test_row_parts(void)
{
    double t[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, one = 4.5;
    check_true("row.percentiles", bench_percentile(t, 10, 0.5) == 5.5 &&
               fabs(bench_percentile(t, 10, 0.99) - 9.91) < 1e-12 && bench_percentile(t, 10, 1) == 10 &&
               bench_percentile(&one, 1, 0.99) == 4.5 && isnan(bench_percentile(t, 0, 0.5)),
               "p50 %g p99 %g", bench_percentile(t, 10, 0.5), bench_percentile(t, 10, 0.99));
    check_true("row.oom_is_an_answer", bench_error_is_oom("out of memory") && !bench_error_is_oom(NULL) &&
               !bench_error_is_oom("crashed: signal 11 (Segmentation fault)") &&
               !bench_error_is_oom("timed out after 900 s") &&
               !bench_error_is_oom("killed (signal 9): the system may have run out of host memory"),
               "OOM classification");
    BenchConfig c;
    memset(&c, 0, sizeof c);
    char note[128];
    c.device = DEV_CPU;
    bench_config_model(&c, MODEL_RESNET18, 224, 1);
    check_true("row.model_note_cpu_resnet18", !strcmp(bench_config_model_note(&c, note, sizeof note),
               "resnet18 at width 16 (base width 64), 10 classes, CPU bench"), "'%s'", note);
    c.device = DEV_CUDA;
    bench_config_model(&c, MODEL_RESNET50, 224, 0);
    int none = !bench_config_model_note(&c, note, sizeof note)[0];
    bench_config_model(&c, MODEL_MLP, 224, 1);
    check_true("row.model_note_none", none && !bench_config_model_note(&c, note, sizeof note)[0],
               "a model run as named has a note: '%s'", note);
}

int main(void)
{
    char path[] = "/tmp/ctrain_conditions_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    test_record_here(path);
    test_warnings(path);
    test_lines();
    test_nvml_state();
    test_row_parts();
    unlink(path);
    return check_summary();
}
