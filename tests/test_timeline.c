/* test_timeline.c — the timeline's formats (train/bench/timeline_fmt.h) on events
 * made up here: kernel names shortened, the Chrome trace (one complete
 * event per record, names escaped, microseconds from the first event,
 * written atomically), and the summary's arithmetic (per-stream busy time
 * as the union of overlapping events, the time two streams ran at once,
 * per-name totals and the tab-separated table), per step; and
 * scripts/timeline_diff.py's self-test. The CUPTI half
 * (train/bench/timeline.c) needs a GPU and is run there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "train/bench/timeline_api.h"
#include "train/bench/timeline_fmt.h"

extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status)
    __attribute__((weak));

#define MS 1000000ull   /* ns */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = (char *)malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

static void test_names(void)
{
    char out[256];
    timeline_short_name(out, sizeof out, "tc_fwd_kernel<64, (int)2>(float*, int)");
    check_true("short name: the parameter list dropped, template arguments kept",
               !strcmp(out, "tc_fwd_kernel<64, (int)2>"), "got \"%s\"", out);
    timeline_short_name(out, sizeof out, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    check_true("short name: a C name as it is", !strcmp(out, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
               "got \"%s\"", out);
    /* what libstdc++'s demangler gives for this project's kernels */
    timeline_short_name(out, sizeof out,
                        "void (anonymous namespace)::tc_fwd_kernel<64, __nv_bfloat16>(float*, int)");
    check_true("short name: the anonymous namespace and the return type dropped",
               !strcmp(out, "tc_fwd_kernel<64, __nv_bfloat16>"), "got \"%s\"", out);
    timeline_short_name(out, sizeof out, "void ln_bwd<(int)4>(float const*, float*)");
    check_true("short name: a return type dropped", !strcmp(out, "ln_bwd<(int)4>"), "got \"%s\"", out);
    /* a mangled name: demangled where libstdc++ is linked into the program
     * (ctrain), kept otherwise (this test links only libc) */
    timeline_short_name(out, sizeof out, "_Z10add_kernelPfPKfi");
    const char *want = __cxa_demangle ? "add_kernel" : "_Z10add_kernelPfPKfi";
    check_true("short name: a mangled name demangled, or kept without a demangler",
               !strcmp(out, want), "got \"%s\", want \"%s\"", out, want);
    char longname[400];
    memset(longname, 'k', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    timeline_short_name(out, sizeof out, longname);
    check_true("short name: at most 120 characters", strlen(out) == 120, "%zu", strlen(out));
}

/* Two steps on two streams (times in ms):
 *   stream 7: gemm [0, 10), gemm [5, 20), "odd \"name\"" [30, 40)
 *   stream 9: allreduce [15, 35), memset [50, 52) of 1 MB
 * stream 7 busy: [0, 20) + [30, 40) = 30; stream 9: 20 + 2 = 22;
 * both at once: [15, 20) + [30, 35) = 10; any: [0, 40) + [50, 52) = 42. */
static void fill(Timeline *tl)
{
    timeline_add(tl, TL_KERNEL, 0, 10 * MS, 7, "gemm", 0);
    timeline_add(tl, TL_KERNEL, 5 * MS, 20 * MS, 7, "gemm", 0);
    timeline_add(tl, TL_KERNEL, 30 * MS, 40 * MS, 7, "odd \"name\"", 0);
    timeline_add(tl, TL_KERNEL, 15 * MS, 35 * MS, 9, "allreduce", 0);
    timeline_add(tl, TL_MEMSET, 50 * MS, 52 * MS, 9, "memset", 1 << 20);
}

static void test_chrome(const char *dir)
{
    Timeline tl;
    timeline_init(&tl);
    fill(&tl);
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/t.json", dir);
    int rc = timeline_write_chrome(&tl, path, 3, err, sizeof err);
    check_true("chrome trace written", rc == 0, "%s", err);
    char *s = slurp(path);
    check_true("chrome trace: one complete event per record", s && count(s, "\"ph\":\"X\"") == 5,
               "%d", s ? count(s, "\"ph\":\"X\"") : -1);
    check_true("chrome trace: names escaped", s && strstr(s, "\"name\":\"odd \\\"name\\\"\""), "");
    check_true("chrome trace: microseconds from the first event, pid the rank, tid the stream",
               s && strstr(s, "\"ts\":15000.000,\"dur\":20000.000,\"pid\":3,\"tid\":9"), "");
    check_true("chrome trace: memset bytes", s && strstr(s, "\"args\":{\"bytes\":1048576}"), "");
    check_true("chrome trace: no temporary file left", access(strcat(path, ".tmp"), F_OK) != 0, "");
    free(s);
    snprintf(path, sizeof path, "%s/no/such/dir/t.json", dir);
    check_true("chrome trace: an unwritable path is an error",
               timeline_write_chrome(&tl, path, 0, err, sizeof err) != 0 && strstr(err, "cannot write"),
               "%s", err);
    timeline_free(&tl);
}

static void test_summary(const char *dir)
{
    Timeline tl;
    timeline_init(&tl);
    fill(&tl);
    check_true("names interned", tl.n_names == 4, "%zu", tl.n_names);
    char path[512];
    snprintf(path, sizeof path, "%s/s.txt", dir);
    FILE *f = fopen(path, "w");
    timeline_summary(&tl, f, 2);
    fclose(f);
    char *s = slurp(path);
    check_true("summary: span per step", s && strstr(s, "26.000 ms a step (window 52.000 ms)"), "%s", s);
    check_true("summary: stream 7 busy 15 ms a step (the union), 1.5 events",
               s && strstr(s, "  7                 15.000           1.5"), "%s", s);
    check_true("summary: stream 9 busy 11 ms a step",
               s && strstr(s, "  9                 11.000           1.0"), "%s", s);
    check_true("summary: any stream 21 ms, both at once 5 ms a step",
               s && strstr(s, "any stream busy 21.000 ms/step; two or more streams at once 5.000 ms/step"),
               "%s", s);
    check_true("summary: the table, largest first (gemm 12.5 ms and 1 call a step, allreduce 10 and 0.5)",
               s && strstr(s, "gemm\t1.000\t12.500000\t12500.000\nallreduce\t0.500\t10.000000\t20000.000\n"),
               "%s", s);
    check_true("summary: gemm's share of the busiest stream (25 of 30 ms)",
               s && strstr(s, "83.3%  gemm"), "%s", s);
    free(s);
    timeline_free(&tl);
    timeline_init(&tl);
    f = fopen(path, "w");
    timeline_summary(&tl, f, 1);
    fclose(f);
    s = slurp(path);
    check_true("summary: an empty timeline says so", s && strstr(s, "no events recorded"), "%s", s);
    free(s);
}

/* A script's own checks (`script --self-test`, made-up inputs), when
 * python3 is here: the tests run from the repository root.
 * timeline_diff.py: two summaries; timeline_phases.py: a two-step trace. */
static void test_script(const char *script)
{
    if (system("python3 -c pass > /dev/null 2>&1") != 0) {
        printf("  (python3 not found: %s not tested)\n", script);
        return;
    }
    char cmd[256], name[256];
    snprintf(cmd, sizeof cmd, "python3 %s --self-test 2>&1", script);
    FILE *p = popen(cmd, "r");
    char line[512], last[512] = "";
    while (p && fgets(line, sizeof line, p)) snprintf(last, sizeof last, "%s", line);
    int rc = p ? pclose(p) : -1;
    int passed = 0, failed = -1;
    sscanf(last, "%d passed, %d failed", &passed, &failed);
    snprintf(name, sizeof name, "%s --self-test", script);
    check_true(name, rc == 0 && passed > 0 && failed == 0, "status %d, last line \"%s\"", rc,
               last);
}

static const char *fake_name(int driver, uint32_t cbid)
{
    return driver && cbid == 7 ? "cuMemFree_v2" : NULL;
}

/* The host's table: rows per (thread, call), totals and maxima, longest
 * total first, names or "cbid N", the top cut. */
static void test_api(const char *dir)
{
    TlApi a;
    tl_api_init(&a);
    tl_api_add(&a, 1, 7, 11, 0, 36 * MS);          /* one long free on thread 11 */
    for (int i = 0; i < 39; i++) tl_api_add(&a, 1, 7, 11, 40 * MS, 40 * MS + MS / 10);
    tl_api_add(&a, 0, 200, 12, 0, 2 * MS);         /* a runtime call on thread 12, twice */
    tl_api_add(&a, 0, 200, 12, 5 * MS, 8 * MS);
    tl_api_add(&a, 1, 7, 12, 0, MS);               /* the same call on another thread: its own row */
    check_true("api: one row per thread and call", a.n == 3, "%zu rows", a.n);
    char path[600];
    snprintf(path, sizeof path, "%s/api.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) return;
    tl_api_write(&a, f, 2, fake_name);
    fclose(f);
    char *s = slurp(path);
    const char *first = s ? strstr(s, "cuMemFree_v2 (driver)") : NULL;
    const char *second = s ? strstr(s, "cbid 200 (runtime)") : NULL;
    check_true("api: longest total first, named", first && second && first < second,
               "table:\n%s", s ? s : "(none)");
    check_true("api: total, calls and longest of the free",
               s && strstr(s, "39.900") && strstr(s, "      40 ") && strstr(s, "36.000"),
               "table:\n%s", s ? s : "(none)");
    check_true("api: the top cut", s && strstr(s, "... 1 more") && count(s, "(driver)") == 1,
               "table:\n%s", s ? s : "(none)");
    free(s);
    tl_api_free(&a);
}

int main(void)
{
    char dir[] = "/tmp/ctrain-timeline-XXXXXX";
    if (!mkdtemp(dir)) {
        printf("cannot make a temp folder\n0 passed, 1 failed\n");
        return 1;
    }
    test_names();
    test_chrome(dir);
    test_summary(dir);
    test_api(dir);
    test_script("scripts/timeline_diff.py");
    test_script("scripts/timeline_phases.py");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
