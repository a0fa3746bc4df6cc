/* test_bench.c — `ctrain bench` end to end on the CPU backend:
 *   - the CPU quick suite (MLP, narrow ResNet18, BERT-tiny) runs, prints a
 *     table labelled CPU, and writes a --json file that parses, carries the
 *     ctrain-bench/1 field names, has positive finite figures, omits what a
 *     CPU cannot measure (power, temperature, datasheet peak) instead of
 *     writing 0 or null, and whose MFU figures are the arithmetic they claim
 *     (mfu = flops_per_sample * samples_per_s / (tflops * 1e12));
 *   - the machine record holds the run's conditions (GPU ones null without a
 *     GPU, the load averages, the CPU count, the warnings); each row its
 *     step-time p50 <= p99, and the CPU ResNet18 row says it is a width-16
 *     model, in the JSON and under its table row;
 *   - a config that cannot allocate (an MLP batch of 2^30: 3.4 TB of input;
 *     where the kernel always overcommits, a batch over CTRAIN_MEM_LIMIT)
 *     becomes an "out of memory" row, the next
 *     config still runs, and the exit status stays 0; a config whose process
 *     crashes (the test sends it SIGSEGV) becomes an error row, the next
 *     config still runs, the end lists the failure and the exit status is 1;
 *   - a short --soak writes its CSV and a summary into the JSON;
 *   - bad options end with a message and a hint; `ctrain report` merges the
 *     file (when python3 is installed);
 *   - scripts/torch_bench.py (PyTorch's side, run on a GPU machine) is
 *     checked without torch: its --dry-run lists the same configs as
 *     `ctrain bench --list` (same steps, warm-up, layout and FLOPs per
 *     sample, to the last digit) for the default, the quick and a narrowed
 *     suite; its --self-test (fake children, made-up figures) passes; and
 *     `ctrain report` puts the self-test's rows beside ctrain's configs.
 * Runs build/ctrain (CTRAIN_BIN overrides) from the repository root.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "cli_util.h"
#include "json_read.h"

static int rel_close(double a, double b, double tol) { return fabs(a - b) <= tol * fabs(b); }

/* ---- The checks on one result row that measured something. */
static void check_measured_row(const J *r, const J *ceilings, const char *want_model)
{
    char name[96];
    const char *model = jtext(r, "model");
#define NAME(s) (snprintf(name, sizeof name, "bench.%s.%s", model, s), name)
    check_true(NAME("model"), !strcmp(model, want_model), "model '%s', want '%s'", model, want_model);
    check_true(NAME("engine_mode"), !strcmp(jtext(r, "engine"), "ctrain") && !strcmp(jtext(r, "mode"), "cpu"),
               "engine '%s' mode '%s' (want ctrain, cpu)", jtext(r, "engine"), jtext(r, "mode"));
    check_true(NAME("precision"), !strcmp(jtext(r, "precision"), "fp32"), "%s", jtext(r, "precision"));
    static const char *pos[] = {"batch", "steps", "samples_per_s", "samples_per_s_min", "samples_per_s_max",
                                "ms_per_step", "peak_mem_bytes", "live_peak_bytes",
                                "flops_per_sample", "ceiling_tflops", "mfu_measured_ceiling"};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        double v = jnum(r, pos[i]);
        char what[64];
        snprintf(what, sizeof what, "%s_positive", pos[i]);
        check_true(NAME(what), isfinite(v) && v > 0, "%s = %g", pos[i], v);
    }
    check_true(NAME("warmup"), jnum(r, "warmup") >= 1, "warmup %g", jnum(r, "warmup"));
    const char *place = jtext(r, "live_peak_at");
    check_true(NAME("live_peak_at"), !strncmp(place, "backward of ", 12) ||
                                         !strncmp(place, "forward, after ", 15) ||
                                         !strcmp(place, "outside the forward and backward"),
               "live_peak_at '%s'", jtext(r, "live_peak_at"));
    check_true(NAME("final_loss"), isfinite(jnum(r, "final_loss")), "final_loss missing");
    /* absent on the CPU: never written as 0 or null */
    static const char *absent[] = {"power_avg_w", "power_peak_w", "energy_j", "temp_avg_c", "temp_max_c",
                                   "sm_clock_avg_mhz", "sm_clock_min_mhz", "samples_per_s_per_w",
                                   "peak_tflops", "mfu_peak", "error", "throttle"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s_absent", absent[i]);
        check_true(NAME(what), jget(r, absent[i]) == NULL, "%s is present", absent[i]);
    }
    int nulls = 0;
    for (int i = 0; i < r->n; i++) nulls += r->items[i]->t == J_NULL;
    check_true(NAME("no_nulls"), nulls == 0, "%d null fields", nulls);
    /* consistency */
    double sps = jnum(r, "samples_per_s"), b = jnum(r, "batch");
    check_true(NAME("min_med_max"), jnum(r, "samples_per_s_min") <= sps * (1 + 1e-9) &&
               sps <= jnum(r, "samples_per_s_max") * (1 + 1e-9), "min %g median %g max %g",
               jnum(r, "samples_per_s_min"), sps, jnum(r, "samples_per_s_max"));
    check_true(NAME("ms_per_step"), rel_close(jnum(r, "ms_per_step"), 1e3 * b / sps, 1e-6),
               "ms_per_step %g, batch / samples_per_s = %g ms", jnum(r, "ms_per_step"), 1e3 * b / sps);
    double p50 = jnum(r, "step_ms_p50"), p99 = jnum(r, "step_ms_p99");
    check_true(NAME("step_percentiles"), p50 > 0 && p50 <= p99 && rel_close(p50, jnum(r, "ms_per_step"), 1e-6) &&
               p99 <= 1e3 * b / jnum(r, "samples_per_s_min") * (1 + 1e-6),
               "p50 %g p99 %g ms_per_step %g", p50, p99, jnum(r, "ms_per_step"));
    double fps = jnum(r, "flops_per_sample"), ceil = jnum(r, "ceiling_tflops");
    check_true(NAME("mfu_ceiling_arith"), rel_close(jnum(r, "mfu_measured_ceiling"), fps * sps / (ceil * 1e12), 1e-6),
               "mfu_measured_ceiling %.9g, flops*sps/ceiling %.9g", jnum(r, "mfu_measured_ceiling"),
               fps * sps / (ceil * 1e12));
    if (jget(r, "peak_tflops"))
        check_true(NAME("mfu_peak_arith"), rel_close(jnum(r, "mfu_peak"),
                   fps * sps / (jnum(r, "peak_tflops") * 1e12), 1e-6), "mfu_peak %g", jnum(r, "mfu_peak"));
    double from_table = NAN;
    for (int i = 0; ceilings && i < ceilings->n; i++)
        if (!strcmp(jtext(ceilings->items[i], "precision"), "fp32")) from_table = jnum(ceilings->items[i], "tflops");
    check_true(NAME("ceiling_matches"), rel_close(ceil, from_table, 1e-9), "row ceiling %g, ceilings[] %g",
               ceil, from_table);
#undef NAME
}

/* ---- The run's conditions in the machine record (bench_conditions.h). */
static void check_conditions(const J *m)
{
    /* no GPU here: the twelve GPU conditions, and nothing else, are null */
    int nulls = 0;
    for (int i = 0; i < m->n; i++) nulls += m->items[i]->t == J_NULL;
    J *ecc = jget(m, "ecc_enabled"), *procs = jget(m, "other_gpu_processes"), *busy = jget(m, "pcie_gen_under_load");
    check_true("bench.conditions.gpu_null", nulls == 12 && ecc && ecc->t == J_NULL && procs && procs->t == J_NULL &&
               busy && busy->t == J_NULL, "%d null keys (want the 12 GPU conditions)", nulls);
    for (int k = 0; k < 2; k++) {
        J *a = jget(m, k ? "load_avg_end" : "load_avg_start");
        int ok = a && a->t == J_ARR && a->n == 3;
        for (int i = 0; ok && i < 3; i++) ok = a->items[i]->t == J_NUM && a->items[i]->num >= 0;
        check_true(k ? "bench.conditions.load_end" : "bench.conditions.load_start", ok, "not 3 numbers");
    }
    J *w = jget(m, "warnings"), *n = jget(m, "notes");
    check_true("bench.conditions.cpu_count", jnum(m, "cpu_count") > 0, "cpu_count %g", jnum(m, "cpu_count"));
    check_true("bench.conditions.warnings", w && w->t == J_ARR && n && n->t == J_ARR, "warnings or notes not arrays");
}

static void test_cpu_suite(const char *dir)
{
    char cmd[1024], out[16384], json[512];
    snprintf(json, sizeof json, "%s/cpu.json", dir);
    snprintf(cmd, sizeof cmd, "%s bench --device cpu --quick --json %s 2>&1", bin(), json);
    int st = run(cmd, out, sizeof out);
    printf("%s", out);
    check_true("bench.cpu.exit", st == 0, "exit %d", st);
    check_true("bench.cpu.labelled", strstr(out, "on the CPU") && strstr(out, "CPU smp/s"),
               "the output does not say CPU");
    check_true("bench.cpu.rows", strstr(out, "mlp ") && strstr(out, "resnet18 ") && strstr(out, "bert-tiny "),
               "a row is missing from the table");
    J *doc = jparse_file(json);
    if (!check_true("bench.json.parses", doc != NULL, "%s is missing or not JSON", json)) return;
    check_true("bench.json.schema", !strcmp(jtext(doc, "schema"), "ctrain-bench/1"), "schema '%s'",
               jtext(doc, "schema"));
    J *m = jget(doc, "machine"), *res = jget(doc, "results"), *ceil = jget(doc, "ceilings");
    check_true("bench.json.machine", m && m->t == J_OBJ && jtext(m, "cpu")[0] && jtext(m, "date")[0],
               "machine.cpu / machine.date missing");
    check_true("bench.json.no_gpu_name", !jget(m, "gpu_name"), "a CPU run names a GPU");
    check_true("bench.json.command", strstr(jtext(doc, "command"), "ctrain bench") != NULL, "command '%s'",
               jtext(doc, "command"));
    if (!check_true("bench.json.results", res && res->t == J_ARR && res->n == 3, "%d results (want 3)",
                    res ? res->n : -1)) { jfree(doc); return; }
    check_true("bench.json.ceilings", ceil && ceil->t == J_ARR && ceil->n == 1 &&
               jnum(ceil->items[0], "tflops") > 0, "want one positive CPU fp32 ceiling");
    const char *want[] = {"mlp", "resnet18", "bert-tiny"};
    for (int i = 0; i < 3; i++) check_measured_row(res->items[i], ceil, want[i]);
    check_true("bench.resnet18.image", jnum(res->items[1], "image_size") == 32 &&
               !strcmp(jtext(res->items[1], "layout"), "nhwc") && !jget(res->items[1], "seq"),
               "image_size %g layout '%s'", jnum(res->items[1], "image_size"), jtext(res->items[1], "layout"));
    check_true("bench.bert.seq", jnum(res->items[2], "seq") == 32 && !jget(res->items[2], "image_size"),
               "seq %g", jnum(res->items[2], "seq"));
    const char *note = "resnet18 at width 16 (base width 64), 10 classes, CPU bench";
    check_true("bench.resnet18.model_note", !strcmp(jtext(res->items[1], "model_note"), note) &&
               !jget(res->items[0], "model_note") && !jget(res->items[2], "model_note"),
               "resnet18 model_note '%s'", jtext(res->items[1], "model_note"));
    check_true("bench.resnet18.note_in_table", strstr(out, note) != NULL, "the table does not show the note");
    check_conditions(m);
    jfree(doc);

    /* ctrain report runs scripts/report.py on the file */
    if (system("python3 -c 'import json' >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd, "%s report %s 2>&1", bin(), json);
        st = run(cmd, out, sizeof out);
        check_true("report.runs", st == 0 && strstr(out, "bert-tiny") && strstr(out, "|"),
                   "exit %d: %s", st, out);
    } else {
        printf("  (python3 not found: ctrain report not tested)\n");
    }
}

static void test_oom_row(const char *dir)
{
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    int mode = f ? fgetc(f) - '0' : 0;
    if (f) fclose(f);
    /* "always overcommit": the huge allocation would succeed and then thrash;
     * a memory limit gives the same row there */
    const char *limit = mode == 1 ? "CTRAIN_MEM_LIMIT=12M " : "";
    double big = mode == 1 ? 100000 : 1073741824;
    char cmd[1024], out[8192], json[512];
    snprintf(json, sizeof json, "%s/oom.json", dir);
    snprintf(cmd, sizeof cmd, "%s%s bench --device cpu --quick --models mlp --batch %.0f,64 --json %s 2>&1",
             limit, bin(), big, json);
    int st = run(cmd, out, sizeof out);
    printf("%s", out);
    check_true("oom.exit_0", st == 0 && !strstr(out, "failed"), "exit %d (out of memory is an answer)", st);
    check_true("oom.table", strstr(out, "out of memory") != NULL, "no 'out of memory' row");
    J *doc = jparse_file(json);
    J *res = jget(doc, "results");
    if (!check_true("oom.rows", res && res->t == J_ARR && res->n == 2, "want 2 results")) { jfree(doc); return; }
    J *bad = res->items[0], *good = res->items[1];
    check_true("oom.error", !strcmp(jtext(bad, "error"), "out of memory") && jnum(bad, "batch") == big,
               "error '%s' batch %g", jtext(bad, "error"), jnum(bad, "batch"));
    check_true("oom.nothing_measured", !jget(bad, "samples_per_s") && !jget(bad, "peak_mem_bytes") &&
               !jget(bad, "mfu_measured_ceiling"), "an error row carries figures");
    check_true("oom.suite_goes_on", jnum(good, "samples_per_s") > 0 && !jget(good, "error"),
               "the config after the failing one did not run");
    jfree(doc);
}

/* `ctrain bench --device cpu ARGS --json DIR/FILE` with env before it; the
 * output into out, the JSON's path into json; the exit status. */
static int bench_json(const char *dir, const char *file, const char *env, const char *args,
                      char *json, size_t jlen, char *out, size_t olen)
{
    char cmd[2048];
    snprintf(json, jlen, "%s/%s", dir, file);
    snprintf(cmd, sizeof cmd, "%s%s bench --device cpu %s --json %s 2>&1", env, bin(), args, json);
    return run(cmd, out, olen);
}

/* --precision fp8 on a model without FP8 layers: a row that says so, nothing
 * run, the suite goes on, and the bench does not fail */
static void test_unsupported_row(const char *dir)
{
    char out[8192], json[512];
    int st = bench_json(dir, "fp8.json", "", "--quick --models mlp --precision fp8,fp32", json,
                        sizeof json, out, sizeof out);
    check_true("unsupported.exit_0", st == 0 && strstr(out, "not supported: mlp has no FP8 Linear layers"),
               "exit %d (a config the model cannot run is an answer): %s", st, out);
    J *doc = jparse_file(json);
    J *res = jget(doc, "results");
    if (!check_true("unsupported.rows", res && res->t == J_ARR && res->n == 2, "want 2 results")) {
        jfree(doc);
        return;
    }
    J *no = res->items[0], *yes = res->items[1];
    check_true("unsupported.row", !strncmp(jtext(no, "error"), "not supported: ", 15) &&
               !jget(no, "samples_per_s") && !strcmp(jtext(no, "precision"), "fp8") &&
               jnum(yes, "samples_per_s") > 0, "error '%s'", jtext(no, "error"));
    jfree(doc);
    /* --max-batch: no search, the answer said (n/a), not "none fits" */
    st = bench_json(dir, "fp8_maxb.json", "", "--max-batch --models mlp --precision fp8", json,
                    sizeof json, out, sizeof out);
    doc = jparse_file(json);
    res = jget(doc, "results");
    check_true("unsupported.max_batch", st == 0 && !strstr(out, "max-batch try") && strstr(out, "n/a") &&
               res && res->t == J_ARR && res->n == 2 &&
               !strncmp(jtext(res->items[0], "error"), "not supported: ", 15) &&
               !strncmp(jtext(res->items[1], "error"), "not supported: ", 15), "exit %d: %s", st, out);
    jfree(doc);
}

/* The bench's one child process now (the probe has ended), by /proc; 0 none. */
static pid_t child_of(pid_t parent)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (d && !found && (e = readdir(d))) {
        char path[300], buf[512];
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t k = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[k] = 0;
        const char *p = strrchr(buf, ')');   /* after the command name: state, ppid */
        int ppid = 0;
        if (p && sscanf(p + 1, " %*c %d", &ppid) == 1 && ppid == parent) found = (pid_t)atoi(e->d_name);
    }
    if (d) closedir(d);
    return found;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A config whose process crashes: the first of two MLP configs (each timed
 * for 2 s) is sent SIGSEGV while it runs. Its row says so, the second
 * config runs, the end lists the failure, and the exit status is 1. */
static void test_crash_row(const char *dir)
{
    char log[512], json[512], out[16384] = "";
    snprintf(log, sizeof log, "%s/crash.out", dir);
    snprintf(json, sizeof json, "%s/crash.json", dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(127);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execl(bin(), bin(), "bench", "--device", "cpu", "--models", "mlp", "--batch", "64,32", "--steps", "100000",
              "--time-limit", "2", "--json", json, (char *)NULL);
        _exit(127);
    }
    if (!check_true("crash.fork", pid > 0, "fork failed")) return;
    /* the table's header is flushed just before the first config's child is forked */
    pid_t child = 0;
    for (int i = 0; i < 3000 && !child; i++) {
        FILE *f = fopen(log, "r");
        size_t k = f ? fread(out, 1, sizeof out - 1, f) : 0;
        if (f) fclose(f);
        out[k] = 0;
        if (strstr(out, "CPU smp/s")) child = child_of(pid);
        if (!child) sleep_ms(10);
    }
    check_true("crash.child_found", child > 0, "no config process appeared: %s", out);
    if (child > 0) kill(child, SIGSEGV);
    int st = 0;
    waitpid(pid, &st, 0);
    FILE *f = fopen(log, "r");
    size_t k = f ? fread(out, 1, sizeof out - 1, f) : 0;
    if (f) fclose(f);
    out[k] = 0;
    printf("%s", out);
    check_true("crash.exit_1", WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
    check_true("crash.listed", strstr(out, "1 config failed") && strstr(out, ": crashed: signal 11"),
               "the end does not list the crashed config");
    J *doc = jparse_file(json);
    J *res = jget(doc, "results");
    int crashed = 0, measured = 0;
    for (int i = 0; res && i < res->n; i++) {
        crashed += strstr(jtext(res->items[i], "error"), "crashed: signal 11") != NULL;
        measured += jnum(res->items[i], "samples_per_s") > 0 && !jget(res->items[i], "error");
    }
    check_true("crash.rows", res && res->n == 2 && crashed == 1 && measured == 1,
               "%d rows, %d crashed, %d measured (want 2, 1, 1)", res ? res->n : -1, crashed, measured);
    jfree(doc);
}

static void test_soak(const char *dir)
{
    char cmd[2048], out[8192], json[256], csv[256];
    snprintf(json, sizeof json, "%s/soak.json", dir);
    snprintf(csv, sizeof csv, "%s/soak.csv", dir);
    snprintf(cmd, sizeof cmd, "%s bench --device cpu --soak 3s --models mlp --soak-csv %s --json %s 2>&1",
             bin(), csv, json);
    int st = run(cmd, out, sizeof out);
    check_true("soak.exit", st == 0 && strstr(out, "throughput") && strstr(out, "memory"), "exit %d: %s", st, out);
    FILE *f = fopen(csv, "r");
    int lines = 0;
    char line[512], first[512] = "";
    while (f && fgets(line, sizeof line, f)) if (lines++ == 0) snprintf(first, sizeof first, "%s", line);
    if (f) fclose(f);
    check_true("soak.csv", lines >= 3 && !strncmp(first, "time_s,step,samples_per_s,loss,mem_bytes", 40),
               "%d lines, header '%s'", lines, first);
    J *doc = jparse_file(json);
    J *res = jget(doc, "results");
    J *sk = res && res->n == 1 ? jget(res->items[0], "soak") : NULL;
    check_true("soak.json", sk && jnum(sk, "rows") >= 2 && jnum(sk, "samples_per_s_mean") > 0 &&
               jnum(sk, "nonfinite_loss") == 0 && !jget(sk, "power_avg_w"),
               "soak summary missing or wrong in %s", json);
    jfree(doc);
}

/* --max-batch under CTRAIN_MEM_LIMIT (a card of 12 MiB, as far as ctrain's
 * allocations go): the answer fits under the limit, the next size up does
 * not, for both recompute settings. */
static void test_max_batch(const char *dir)
{
    char out[16384], json[512];
    int st = bench_json(dir, "maxb.json", "CTRAIN_MEM_LIMIT=12M ", "--max-batch --models mlp "
                        "--precision fp32 --batch 64", json, sizeof json, out, sizeof out);
    check_true("max_batch.exit", st == 0 && strstr(out, "largest batch"), "exit %d: %s", st, out);
    J *doc = jparse_file(json);
    J *res = jget(doc, "results");
    int rows = res ? res->n : 0;
    check_true("max_batch.rows", rows == 2, "%d result rows in %s", rows, json);
    for (int i = 0; i < rows; i++) {
        J *r = res->items[i];
        double b = jnum(r, "batch"), peak = jnum(r, "peak_mem_bytes");
        char name[64];
        snprintf(name, sizeof name, "max_batch.%s", jtext(r, "mode"));
        check_true(name, b >= 64 && peak > 0 && peak <= 12.0 * 1024 * 1024 && !jget(r, "error"),
                   "batch %g peak %g", b, peak);
    }
    jfree(doc);
    /* the table's last column: the smallest batch that failed, one step (8) above */
    int ok = 0, best = 0, failed = 0;
    for (const char *p = strstr(out, "mlp fp32 "); p; p = strstr(p + 1, "mlp fp32 ")) {
        char rec[16];
        if (sscanf(p, "mlp fp32 %15s %d %*f %d:", rec, &best, &failed) == 3 && failed > best &&
            failed - best <= 8)
            ok++;
    }
    check_true("max_batch.bisected", ok == 2, "summary lines not found or not bisected: %s", out);
}

/* ---- scripts/torch_bench.py against ctrain bench, without torch. */

static int same_str(const J *a, const J *b, const char *key)
{
    return !strcmp(jtext(a, key), jtext(b, key));
}

static int same_num(const J *a, const J *b, const char *key, double tol)
{
    double x = jnum(a, key), y = jnum(b, key);
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);   /* both absent */
    return x == y || fabs(x - y) <= tol * fabs(y);
}

/* --dry-run and --list with the same arguments: the same configs in the same order. */
static void torch_same_suite(const char *dir, const char *name, const char *args)
{
    char cmd[1500], out[16384], a[512], b[512], what[96];
    snprintf(a, sizeof a, "%s/list.json", dir);
    snprintf(b, sizeof b, "%s/dry.json", dir);
    snprintf(cmd, sizeof cmd, "%s bench --list %s --json %s 2>&1", bin(), args, a);
    int st = run(cmd, out, sizeof out);
    snprintf(what, sizeof what, "torch.%s.list", name);
    check_true(what, st == 0, "exit %d: %s", st, out);
    snprintf(cmd, sizeof cmd, "python3 scripts/torch_bench.py --dry-run %s --json %s 2>&1", args, b);
    st = run(cmd, out, sizeof out);
    snprintf(what, sizeof what, "torch.%s.dry_run", name);
    check_true(what, st == 0, "exit %d: %s", st, out);
    J *ca = jparse_file(a);
    J *ra = jget(ca, "results");
    int na = ra && ra->t == J_ARR ? ra->n : -1;
    J *cb = jparse_file(b);   /* the reader's buffer is static: parse a first, then b */
    J *rb = jget(cb, "results");
    int nb = rb && rb->t == J_ARR ? rb->n : -1;
    snprintf(what, sizeof what, "torch.%s.count", name);
    if (!check_true(what, na > 0 && na == nb, "ctrain lists %d configs, torch_bench %d", na, nb)) {
        jfree(ca);
        jfree(cb);
        return;
    }
    snprintf(what, sizeof what, "torch.%s.schema", name);
    check_true(what, !strcmp(jtext(cb, "schema"), "ctrain-bench/1"), "schema '%s'", jtext(cb, "schema"));
    int bad = 0;
    for (int i = 0; i < na; i++) {
        const J *x = ra->items[i], *y = rb->items[i];
        static const char *strs[] = {"model", "precision", "layout"};
        static const char *nums[] = {"batch", "seq", "image_size", "steps", "warmup"};
        int ok = !strncmp(jtext(y, "engine"), "pytorch", 7);
        for (int k = 0; k < 3; k++) ok &= same_str(x, y, strs[k]);
        for (int k = 0; k < 5; k++) ok &= same_num(x, y, nums[k], 0);
        ok &= isfinite(jnum(y, "flops_per_sample")) && same_num(x, y, "flops_per_sample", 1e-12);
        if (!ok && bad++ < 3)
            printf("  config %d: ctrain %s %s bs %g seq %g img %g steps %g warmup %g flops %.17g; torch_bench "
                   "(%s) %s %s bs %g seq %g img %g steps %g warmup %g flops %.17g\n", i, jtext(x, "model"),
                   jtext(x, "precision"), jnum(x, "batch"), jnum(x, "seq"), jnum(x, "image_size"),
                   jnum(x, "steps"), jnum(x, "warmup"), jnum(x, "flops_per_sample"), jtext(y, "engine"),
                   jtext(y, "model"), jtext(y, "precision"), jnum(y, "batch"), jnum(y, "seq"),
                   jnum(y, "image_size"), jnum(y, "steps"), jnum(y, "warmup"), jnum(y, "flops_per_sample"));
    }
    snprintf(what, sizeof what, "torch.%s.same_configs", name);
    check_true(what, bad == 0, "%d of %d configs differ", bad, na);
    jfree(ca);
    jfree(cb);
}

static void test_torch_bench(const char *dir)
{
    if (system("python3 -c 'import json' >/dev/null 2>&1") != 0) {
        printf("  (python3 not found: scripts/torch_bench.py not tested)\n");
        return;
    }
    torch_same_suite(dir, "default", "");
    torch_same_suite(dir, "quick", "--quick");
    torch_same_suite(dir, "narrowed",
                     "--models resnet18,resnet34,resnet101,resnet152,bert-tiny,bert-mini,bert-small,bert-medium "
                     "--precision fp16,tf32 --batch 8,3 --seq 64,256,2 --image-size 160 --steps 7 --warmup 2 "
                     "--time-limit 3");

    /* the self-test: fork, pipe, NVML summary, OOM and crash rows, JSON, with fake children */
    char cmd[2200], out[16384], list[512], self[512];
    snprintf(self, sizeof self, "%s/selftest.json", dir);
    snprintf(cmd, sizeof cmd, "python3 scripts/torch_bench.py --self-test --json %s 2>&1", self);
    int st = run(cmd, out, sizeof out);
    check_true("torch.self_test", st == 0 && strstr(out, "self-test: ") && strstr(out, " 0 failed"), "exit %d: %s",
               st, out);

    /* ctrain report: the self-test's rows (the quick suite's configs) beside ctrain's */
    snprintf(list, sizeof list, "%s/quick.json", dir);
    snprintf(cmd, sizeof cmd, "%s bench --list --quick --json %s >/dev/null 2>&1 && %s report %s %s 2>&1", bin(),
             list, bin(), list, self);
    st = run(cmd, out, sizeof out);
    int rows = 0;
    for (const char *p = out; (p = strstr(p, "\n| ")); p++)
        rows += !strncmp(p + 3, "resnet50 | ", 11) || !strncmp(p + 3, "bert-large | ", 13);
    check_true("torch.report", st == 0 && rows == 6 && strstr(out, "OOM") && strstr(out, "self-test (fake figures"),
               "exit %d, %d config rows (want 6: the two files' configs side by side): %s", st, rows, out);
}

static void expect_error(const char *name, const char *args, const char *want)
{
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin(), args);
    int st = run(cmd, out, sizeof out);
    check_true(name, st == 1 && strstr(out, want) && strstr(out, "hint:"), "exit %d, wanted \"%s\": %s", st,
               want, out);
}

/* CTRAIN_MEM_LIMIT that is not a size: one clear error before anything runs. */
static void test_mem_limit_bad(void)
{
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "CTRAIN_MEM_LIMIT=lots %s train --model mlp --data fashion-mnist "
             "--device cpu --steps 1 2>&1", bin());
    int st = run(cmd, out, sizeof out);
    check_true("mem_limit.bad_value", st == 1 && strstr(out, "CTRAIN_MEM_LIMIT='lots' is not a "
               "memory size") && strstr(out, "hint:"), "exit %d: %s", st, out);
    snprintf(cmd, sizeof cmd, "CTRAIN_MEM_LIMIT=1K %s train --model mlp --data fashion-mnist "
             "--device cpu --steps 1 2>&1", bin());
    st = run(cmd, out, sizeof out);
    check_true("mem_limit.oom", st == 1 && strstr(out, "out of memory") &&
               strstr(out, "over CTRAIN_MEM_LIMIT"), "exit %d: %s", st, out);
}

int main(void)
{
    char dir[] = "/tmp/ctrain_bench_XXXXXX";
    if (!mkdtemp(dir)) { check_true("bench.tmpdir", 0, "mkdtemp failed"); return 1; }
    test_cpu_suite(dir);
    test_oom_row(dir);
    test_crash_row(dir);
    test_soak(dir);
    test_max_batch(dir);
    test_unsupported_row(dir);
    test_mem_limit_bad();
    test_torch_bench(dir);
    expect_error("bench.list_and_max_batch", "bench --list --max-batch", "--list shows the throughput suite");
    expect_error("bench.bad_flag", "bench --bogus 1", "unknown option '--bogus'");
    expect_error("bench.bad_model", "bench --models vgg", "unknown model 'vgg'");
    expect_error("bench.bad_precision", "bench --precision fp4", "--precision: 'fp4'");
    expect_error("bench.bad_duration", "bench --soak 10x", "not a duration");
    expect_error("bench.bad_grad_reduce", "bench --gpus 2 --grad-reduce fp8",
                 "--grad-reduce: 'fp8' is not f32 or bf16");
    expect_error("bench.grad_reduce_without_gpus", "bench --grad-reduce bf16", "add --gpus N");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) printf("  (could not remove %s)\n", dir);
    printf("%d passed, %d failed\n", check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}
