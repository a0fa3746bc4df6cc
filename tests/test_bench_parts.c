/* test_bench_parts.c — the benchmark's building blocks on the CPU:
 *   - the bench JSON writer produces valid JSON (checked by a small parser
 *     here), keeps torch_bench.py's field names, and omits what was not
 *     measured (NaN, -1, NULL) instead of writing 0 or null;
 *   - the peak table: known CUDA device names find the right card, look-alike
 *     names do not, unknown cards have no peak; MFU arithmetic by hand;
 *   - the soak summary on a synthetic series with known drift, fluctuation,
 *     throttling and two non-finite losses; the CSV it writes;
 *   - NVML on a machine without the NVIDIA driver: unavailable with a reason,
 *     no crash, sampler start/stop a no-op; the sampler thread itself driven
 *     by a fake reader.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "train/bench/bench_config.h"
#include "train/bench/bench_json.h"
#include "train/bench/nvml.h"
#include "train/bench/peaks.h"
#include "train/bench/soak.h"

/* ---- A minimal JSON validator: returns the end of one value, NULL if bad. */
static const char *ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    return p;
}

static const char *jvalue(const char *p, int depth);

static const char *jstring(const char *p)
{
    if (*p != '"') return NULL;
    for (p++; *p && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL;
                p += 4;
            } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *jnumber(const char *p)
{
    const char *s = p;
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    return p > s ? p : NULL;
}

static const char *jvalue(const char *p, int depth)
{
    if (depth > 64) return NULL;
    p = ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        int obj = *p == '{';
        p = ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (obj) {
                p = jstring(ws(p));
                if (!p) return NULL;
                p = ws(p);
                if (*p++ != ':') return NULL;
            }
            p = jvalue(p, depth + 1);
            if (!p) return NULL;
            p = ws(p);
            if (*p == ',') { p++; continue; }
            if (*p == close) return p + 1;
            return NULL;
        }
    }
    if (*p == '"') return jstring(p);
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    return jnumber(p);
}

static int json_valid(const char *s)
{
    const char *e = jvalue(s, 0);
    return e && *ws(e) == 0;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* ---- JSON writer. */
static void test_json(void)
{
    check_true("json.validator_rejects", !json_valid("{\"a\": 1,}") && !json_valid("{\"a\" 1}") &&
                   !json_valid("[1, nan]") && json_valid("{\"a\": [1, -2.5e3, \"x\\n\"], \"b\": {}}"),
               "the test's own validator is wrong");

    BenchResult r[2];
    bench_result_init(&r[0]);
    r[0].mode = "eager";
    r[0].model = "resnet50";
    r[0].precision = "bf16";
    r[0].layout = "nhwc";
    r[0].batch = 256;
    r[0].image_size = 224;
    r[0].steps = 25;
    r[0].warmup = 10;
    r[0].samples_per_s = 8012.5;
    r[0].samples_per_s_min = 7990.25;
    r[0].samples_per_s_max = 8100;
    r[0].ms_per_step = 31.95;
    r[0].peak_mem_bytes = 11811160064.0;   /* 11 GiB: must print exactly */
    r[0].flops_per_sample = 24.5e9;
    r[0].peak_tflops = 989.4;
    r[0].mfu_peak = mfu(r[0].flops_per_sample, r[0].samples_per_s, r[0].peak_tflops);
    r[0].final_loss = 6.9;
    /* power, temperature, clocks, ceiling: not measured -> absent */

    bench_result_init(&r[1]);
    r[1].model = "bert-large";
    r[1].precision = "fp16";
    r[1].batch = 512;
    r[1].seq = 512;
    r[1].error = "out of memory: \"cudaMallocAsync\"\ntried 80 GiB";
    SoakSummary soak;
    memset(&soak, 0, sizeof soak);
    soak.rows = 10;
    soak.mem_fluctuation_pct = 0.5;
    soak.throttle_seen = -1;            /* not measured: no throttling keys */
    soak.first_nonfinite_step = -1;
    soak.duration_s = soak.samples_per_s_mean = soak.mem_min_bytes = soak.mem_max_bytes = NAN;
    soak.throughput_first_mean = soak.throughput_last_mean = soak.throughput_drift_pct = NAN;
    soak.power_avg_w = soak.power_peak_w = soak.temp_max_c = soak.sm_clock_min_mhz = NAN;
    r[1].soak = &soak;

    BenchCeiling c[1] = {{"matmul fp16 8192^3", "fp16", 731.25}};
    BenchRun run;
    memset(&run, 0, sizeof run);
    bench_machine_collect(&run.machine, 0);
    run.command = "ctrain bench --models resnet50";
    run.results = r;
    run.n_results = 2;
    run.ceilings = c;
    run.n_ceilings = 1;
    char *s = bench_json_string(&run);
    check_true("json.built", s != NULL, "bench_json_string returned NULL");
    if (!s) return;
    if (getenv("CHECK_VERBOSE")) printf("%s", s);
    check_true("json.valid", json_valid(s), "output does not parse:\n%s", s);
    check_true("json.schema", strstr(s, "\"schema\": \"ctrain-bench/1\"") != NULL, "no schema");
    check_true("json.torch_names",
               strstr(s, "\"engine\": \"ctrain\"") && strstr(s, "\"mode\": \"eager\"") &&
                   strstr(s, "\"model\": \"resnet50\"") && strstr(s, "\"precision\": \"bf16\"") &&
                   strstr(s, "\"batch\": 256") && strstr(s, "\"image_size\": 224") &&
                   strstr(s, "\"layout\": \"nhwc\"") && strstr(s, "\"samples_per_s\": 8012.5") &&
                   strstr(s, "\"samples_per_s_min\": 7990.25") &&
                   strstr(s, "\"samples_per_s_max\": 8100") &&
                   strstr(s, "\"ms_per_step\": 31.95") && strstr(s, "\"final_loss\": 6.9"),
               "a shared field is missing or renamed");
    check_true("json.bytes_exact", strstr(s, "\"peak_mem_bytes\": 11811160064") != NULL,
               "peak_mem_bytes not written as an exact integer");
    check_true("json.mfu", strstr(s, "\"mfu_peak\": 0.198") != NULL, "mfu_peak missing");
    check_true("json.absent_omitted",
               !strstr(s, "power_avg_w\": ") && !strstr(s, "\"temp_max_c\"") &&
                   !strstr(s, "\"sm_clock_avg_mhz\"") && !strstr(s, "\"mfu_measured_ceiling\"") &&
                   !strstr(s, "samples_per_s_per_w") && !strstr(s, "null") &&
                   !strstr(s, "nan") && !strstr(s, "NaN"),
               "an unmeasured value was written");
    check_true("json.seq_only_for_bert", count(s, "\"seq\": ") == 1 && count(s, "\"image_size\"") == 1,
               "seq/image_size written where absent");
    check_true("json.error_escaped",
               strstr(s, "\"error\": \"out of memory: \\\"cudaMallocAsync\\\"\\ntried 80 GiB\"") != NULL,
               "error string not escaped");
    check_true("json.soak_nested", strstr(s, "\"soak\": {") && strstr(s, "\"mem_fluctuation_pct\": 0.5") &&
                   !strstr(s, "throttling_seen"),
               "soak summary wrong");
    check_true("json.ceiling", strstr(s, "\"name\": \"matmul fp16 8192^3\"") &&
                   strstr(s, "\"tflops\": 731.25"), "ceiling missing");
    check_true("json.machine", strstr(s, "\"machine\": {") && strstr(s, "\"date\": \"20") &&
                   strstr(s, "\"cpu\": ") && strstr(s, "\"host\": "),
               "machine record incomplete");
#ifndef CTRAIN_CUDA
    check_true("json.no_gpu_fields", !strstr(s, "gpu_name") && !strstr(s, "gpu_memory_bytes") &&
                   !strstr(s, "\"driver\""), "GPU fields written on a CPU-only build");
#endif
    free(s);

    /* An empty run is still a valid document with empty arrays. */
    BenchRun empty;
    memset(&empty, 0, sizeof empty);
    empty.machine.gpu_memory_bytes = -1;
    empty.machine.gpu_count = -1;
    s = bench_json_string(&empty);
    check_true("json.empty_valid", s && json_valid(s) && strstr(s, "\"results\": []") &&
                   strstr(s, "\"machine\": {}"), "empty run: %s", s ? s : "(null)");
    free(s);

    char path[] = "/tmp/ctrain_bench_json_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    run.n_results = 1;
    int rc = bench_json_write_file(path, &run);
    FILE *f = fopen(path, "r");
    char buf[16384] = "";
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    unlink(path);
    check_true("json.file", rc == 0 && json_valid(buf) && strstr(buf, "resnet50"),
               "write_file rc %d", rc);
    check_true("json.file_bad_path", bench_json_write_file("/nonexistent/dir/x.json", &run) == -1,
               "writing into a missing folder did not fail");
}

/* ---- Peaks and MFU. */
static void check_card(const char *device, const char *card)
{
    const PeakEntry *e = peaks_lookup(device);
    char name[160];
    snprintf(name, sizeof name, "peaks.lookup[%s]", device);
    if (card)
        check_true(name, e && !strcmp(e->card, card), "got %s, want %s", e ? e->card : "not found",
                   card);
    else
        check_true(name, e == NULL, "got %s, want not found", e ? e->card : "");
}

static void check_peak(const char *device, const char *prec, double want)
{
    char name[160];
    snprintf(name, sizeof name, "peaks.tflops[%s,%s]", device, prec);
    double got = peaks_tflops(device, prec);
    if (isnan(want)) check_true(name, isnan(got), "got %g, want no peak", got);
    else check_close_f64(name, &got, &want, 1, 1e-9, 0);
}

static void test_peaks(void)
{
    check_card("NVIDIA H200", "H200 SXM");
    check_card("NVIDIA H200 NVL", "H200 NVL");
    check_card("NVIDIA GH200 480GB", "GH200");
    check_card("NVIDIA H100 80GB HBM3", "H100 SXM5");
    check_card("NVIDIA H100 PCIe", "H100 PCIe");
    check_card("NVIDIA H100 NVL", "H100 NVL");
    check_card("NVIDIA A100-SXM4-80GB", "A100 SXM4");
    check_card("NVIDIA A100-SXM4-40GB", "A100 SXM4");
    check_card("NVIDIA A100-PCIE-40GB", "A100 PCIe");
    check_card("NVIDIA A100 80GB PCIe", "A100 PCIe");
    check_card("NVIDIA A10", "A10");
    check_card("NVIDIA A10G", NULL);              /* not the A10, not in the table */
    check_card("NVIDIA RTX A6000", "RTX A6000");
    check_card("NVIDIA GeForce RTX 4090", "GeForce RTX 4090");
    check_card("NVIDIA GeForce RTX 4090 D", NULL); /* fewer SMs */
    check_card("NVIDIA GeForce RTX 4090 Laptop GPU", NULL);
    check_card("NVIDIA GeForce RTX 3090", "GeForce RTX 3090");
    check_card("NVIDIA GeForce RTX 3090 Ti", NULL);
    check_card("NVIDIA L40S", "L40S");
    check_card("NVIDIA L40", "L40");
    check_card("NVIDIA L4", "L4");
    check_card("Tesla V100-SXM2-16GB", "V100 SXM2");
    check_card("Tesla V100-PCIE-32GB", "V100 PCIe");
    check_card("Tesla V100S-PCIE-32GB", "V100S PCIe");
    check_card("Tesla T4", "T4");
    check_card("Some Future GPU 9000", NULL);
    check_card("", NULL);
    check_card(NULL, NULL);

    check_peak("NVIDIA H200", "fp16", 989.4);
    check_peak("NVIDIA H200", "bf16", 989.4);
    check_peak("NVIDIA H200", "tf32", 494.7);
    check_peak("NVIDIA H200", "FP32", 67.0);
    check_peak("NVIDIA A100-SXM4-80GB", "bf16", 312.0);
    check_peak("NVIDIA A100-SXM4-80GB", "tf32", 156.0);
    check_peak("NVIDIA GeForce RTX 4090", "fp16", 165.2);   /* fp32 accumulate: half of 330.3 */
    check_peak("NVIDIA GeForce RTX 4090", "fp32", 82.6);
    check_peak("Tesla V100-SXM2-16GB", "tf32", 15.7);       /* no TF32: fp32 math */
    check_peak("Tesla V100-SXM2-16GB", "bf16", NAN);
    check_peak("Some Future GPU 9000", "fp16", NAN);
    check_peak("NVIDIA H200", "int8", NAN);
    check_peak("NVIDIA H200", "fp8", 1978.9);
    check_peak("NVIDIA GeForce RTX 4090", "fp8", 330.3);      /* fp32 accumulate */
    check_peak("NVIDIA A100-SXM4-80GB", "fp8", NAN);           /* no FP8 tensor cores */

    check_true("peaks.precision_parse",
               peaks_precision_parse("BF16") == PEAK_BF16 && peaks_precision_parse("fp32") == PEAK_FP32 &&
                   peaks_precision_parse("int8") == -1 && peaks_precision_parse(NULL) == -1,
               "precision names");
    int n = 0;
    const PeakEntry *t = peaks_table(&n);
    int sane = n >= 20;
    for (int i = 0; i < n; i++) {
        const double *p = t[i].tflops;
        /* fp32 always there; tensor fp16 above fp32; tf32 (if any) between */
        if (!(p[PEAK_FP32] > 0 && p[PEAK_FP16] > p[PEAK_FP32] && t[i].source && t[i].source[0]))
            sane = 0;
        if (!isnan(p[PEAK_TF32]) && !(p[PEAK_TF32] >= p[PEAK_FP32] && p[PEAK_TF32] < p[PEAK_FP16]))
            sane = 0;
        if (!isnan(p[PEAK_BF16]) && p[PEAK_BF16] != p[PEAK_FP16]) sane = 0;
        if (!sane) { printf("  bad row: %s\n", t[i].card); break; }
    }
    check_true("peaks.table_sane", sane, "%d rows", n);

    /* ResNet50 at 24.5 GFLOP per trained image, 8,000 img/s on an H200 in
     * bf16: 196 TFLOP/s of 989.4 -> 0.19810. BERT-large seq 128 at 0.26 TFLOP
     * per sequence, 1,000 seq/s: 260 / 989.4 -> 0.26279. */
    double got[2] = {mfu(24.5e9, 8000, 989.4), mfu(0.26e12, 1000, 989.4)};
    double want[2] = {196.0 / 989.4, 260.0 / 989.4};
    check_close_f64("mfu.hand", got, want, 2, 1e-12, 1e-12);
    check_true("mfu.by_hand_digits", fabs(got[0] - 0.198100) < 5e-7 && fabs(got[1] - 0.262786) < 5e-7,
               "%.6f %.6f", got[0], got[1]);
    check_true("mfu.absent", isnan(mfu(24.5e9, 8000, NAN)) && isnan(mfu(24.5e9, NAN, 989.4)) &&
                   isnan(mfu(NAN, 8000, 989.4)) && isnan(mfu(24.5e9, 8000, 0)),
               "mfu of an unknown is not NaN");
}

/* ---- Soak. */
/* --precision fp8 rows the card or model cannot run: said before running */
static void test_unsupported(void)
{
    BenchConfig c;
    memset(&c, 0, sizeof c);
    c.model = MODEL_BERT_LARGE;
    c.precision = PREC_FP8;
    c.device = DEV_CUDA;
    char why[256] = "";
    int a100 = bench_config_unsupported(&c, 80, "NVIDIA A100-SXM4-80GB", why, sizeof why);
    check_true("bench.fp8_refused_before_sm89", a100 && !strncmp(why, BENCH_UNSUPPORTED, 13) &&
               strstr(why, "A100-SXM4-80GB (sm_80) has no FP8 tensor cores"), "%d: %s", a100, why);
    check_true("bench.fp8_runs_on_sm89_sm90_unknown",
               !bench_config_unsupported(&c, 89, "NVIDIA L4", why, sizeof why) &&
               !bench_config_unsupported(&c, 90, "NVIDIA H200", why, sizeof why) &&
               !bench_config_unsupported(&c, -1, "", why, sizeof why), "refused: %s", why);
    c.model = MODEL_RESNET50;
    int r50 = bench_config_unsupported(&c, 90, "NVIDIA H200", why, sizeof why);
    check_true("bench.fp8_refused_without_fp8_layers", r50 && strstr(why, "resnet50 has no FP8 Linear"),
               "%d: %s", r50, why);
    c.precision = PREC_BF16;
    check_true("bench.bf16_never_refused", !bench_config_unsupported(&c, 70, "V100", why, sizeof why),
               "refused: %s", why);
}

static void test_soak(void)
{
    char dir[] = "/tmp/ctrain_soak_XXXXXX", path[256];
    if (!mkdtemp(dir)) { check_true("soak.tmpdir", 0, "mkdtemp"); return; }
    snprintf(path, sizeof path, "%s/soak.csv", dir);
    SoakRecorder s;
    check_true("soak.open", soak_open(&s, path, 5) == 0, "cannot open %s", path);
    /* 5 warm-up rows (slow, big memory, throttled: all must be ignored), then
     * 100 rows: throughput 1000 for the first 10, 950 for the last 10, 980
     * between; memory alternates 1000/1100 MB (mean 1050: fluctuation
     * 100/1050 = 9.5238%); sw_power_cap in 3 rows, gpu_idle in one; loss NaN
     * at step 40 and +inf at step 70. */
    for (int step = 1; step <= 105; step++) {
        SoakRow r;
        r.time_s = step * 0.5;
        r.step = step;
        r.loss = 2.0 - step * 0.01;
        r.power_w = 500;
        r.temp_c = 60 + step % 7;
        r.sm_clock_mhz = 1980 - (step == 50) * 200;
        r.throttle = 0;
        if (step <= 5) {
            r.samples_per_s = 100;
            r.mem_bytes = 5000e6;
            r.throttle = NVML_THROTTLE_HW_THERMAL;
        } else {
            int i = step - 6;   /* 0..99 */
            r.samples_per_s = i < 10 ? 1000 : i >= 90 ? 950 : 980;
            r.mem_bytes = (i % 2 ? 1100e6 : 1000e6);
            if (step == 20 || step == 21 || step == 90) r.throttle = NVML_THROTTLE_SW_POWER_CAP;
            if (step == 30) r.throttle = NVML_THROTTLE_GPU_IDLE;
        }
        if (step == 40) r.loss = NAN;
        if (step == 70) r.loss = INFINITY;
        if (step == 60) r.power_w = NAN;   /* a failed NVML read: an empty cell */
        soak_add(&s, &r);
        if (step == 80) soak_note_error(&s, "CUDA error: an illegal memory access was encountered");
        if (step == 81) soak_note_error(&s, "CUDA error: a later one");
    }
    SoakSummary sum;
    soak_summarize(&s, &sum);
    double got[6] = {sum.mem_fluctuation_pct, sum.throughput_drift_pct, sum.throughput_first_mean,
                     sum.throughput_last_mean, sum.mem_mean_bytes, sum.power_avg_w};
    double want[6] = {100.0 / 1050.0 * 100, -5.0, 1000, 950, 1050e6, 500};
    check_close_f64("soak.fluct_drift", got, want, 6, 1e-9, 1e-12);
    check_true("soak.rows", sum.rows == 105 && sum.rows_after_warmup == 100, "%d rows, %d after",
               sum.rows, sum.rows_after_warmup);
    check_true("soak.nonfinite", sum.nonfinite_loss == 2 && sum.first_nonfinite_step == 40,
               "%d non-finite, first at %lld", sum.nonfinite_loss, (long long)sum.first_nonfinite_step);
    check_true("soak.throttle", sum.throttle_seen == (int64_t)NVML_THROTTLE_SW_POWER_CAP &&
                   sum.throttled_rows == 3 && !strcmp(sum.throttle_names, "sw_power_cap"),
               "seen 0x%llx in %d rows: %s", (long long)sum.throttle_seen, sum.throttled_rows,
               sum.throttle_names);
    check_true("soak.first_error", !strcmp(sum.cuda_error, "CUDA error: an illegal memory access was encountered"),
               "kept '%s'", sum.cuda_error);
    check_true("soak.clock_min", sum.sm_clock_min_mhz == 1780 && sum.temp_max_c == 66,
               "min clock %g, max temp %g", sum.sm_clock_min_mhz, sum.temp_max_c);
    if (getenv("CHECK_VERBOSE")) soak_print(&sum, stdout);
    soak_close(&s);

    FILE *f = fopen(path, "r");
    char line[512];
    int lines = 0, header_ok = 0, nan_cell = 0, empty_power = 0, inf_cell = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (lines == 0)
            header_ok = !strcmp(line, "time_s,step,samples_per_s,loss,mem_bytes,power_w,temp_c,"
                                      "sm_clock_mhz,throttle\n");
        if (!strncmp(line, "20.000,40,", 10)) nan_cell = strstr(line, ",nan,") != NULL;
        if (!strncmp(line, "35.000,70,", 10)) inf_cell = strstr(line, ",inf,") != NULL;
        if (!strncmp(line, "30.000,60,", 10)) {
            /* time,step,sps,loss,mem,POWER,... -> the 6th cell is empty */
            char *p = line;
            for (int i = 0; i < 5 && p; i++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
            empty_power = p && *p == ',';
        }
        lines++;
    }
    if (f) fclose(f);
    unlink(path);
    rmdir(dir);
    check_true("soak.csv", header_ok && lines == 106, "header %d, %d lines", header_ok, lines);
    check_true("soak.csv_cells", nan_cell && inf_cell && empty_power,
               "nan %d inf %d empty power %d", nan_cell, inf_cell, empty_power);

    /* Nothing after warm-up: the summary says "not measured", not 0. */
    SoakRecorder e;
    soak_open(&e, NULL, 100);
    SoakRow r = {1.0, 1, 10, 1.0, 1e9, NAN, NAN, NAN, -1};
    soak_add(&e, &r);
    soak_summarize(&e, &sum);
    check_true("soak.warmup_only", sum.rows == 1 && sum.rows_after_warmup == 0 &&
                   isnan(sum.mem_fluctuation_pct) && isnan(sum.throughput_drift_pct) &&
                   sum.throttle_seen == -1 && sum.nonfinite_loss == 0,
               "unexpected summary of a warm-up-only soak");
    soak_close(&e);
}

/* ---- NVML. */
typedef struct Fake {
    int calls;
} Fake;

static int fake_read(void *ctx, NvmlSample *s)
{
    Fake *f = ctx;
    f->calls++;
    s->power_w = 250;
    s->temp_c = 50 + f->calls % 3;         /* 50, 51, 52 */
    s->sm_clock_mhz = f->calls % 2 ? 1800 : 1900;
    s->mem_clock_mhz = 2619;
    s->mem_used_bytes = 1e9 + f->calls;
    s->throttle = f->calls % 2 ? (int64_t)NVML_THROTTLE_GPU_IDLE : (int64_t)NVML_THROTTLE_SW_POWER_CAP;
    return 6;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_nvml(void)
{
    char buf[160];
    check_true("nvml.names", !strcmp(nvml_throttle_names(0x44, buf, sizeof buf), "sw_power_cap,hw_thermal") &&
                   !strcmp(nvml_throttle_names(0, buf, sizeof buf), "none") &&
                   !strcmp(nvml_throttle_names(-1, buf, sizeof buf), "") &&
                   !strcmp(nvml_throttle_names(0x1000, buf, sizeof buf), "other_0x1000"),
               "throttle names");
    nvml_shutdown();   /* bench_machine_collect above loaded it */
    check_true("nvml.before_init", !nvml_available() && strstr(nvml_reason(), "not initialized"),
               "reason before init: %s", nvml_reason());

    unsetenv("CTRAIN_NVML_LIB");
    int avail = nvml_init();
    printf("  nvml on this machine: %s%s\n", avail ? "available" : "unavailable: ",
           avail ? "" : nvml_reason());
    if (!avail) {
        check_true("nvml.unavailable_reason", strlen(nvml_reason()) > 10, "empty reason");
        NvmlDevice d;
        check_true("nvml.open_fails", nvml_device_open(&d, 0, NULL) == 0 && d.handle == NULL &&
                       isnan(d.power_limit_w), "device opened without NVML");
        NvmlSample x;
        check_true("nvml.sample_nan", nvml_device_sample(&d, &x) == 0 && isnan(x.power_w) &&
                       isnan(x.temp_c) && isnan(x.sm_clock_mhz) && x.throttle == -1,
                   "a reading without NVML is not NaN");
        char drv[64];
        check_true("nvml.no_driver_version", nvml_driver_version(drv, sizeof drv) == -1 && !drv[0],
                   "driver version without NVML: %s", drv);
        NvmlSampler s;
        int started = nvml_sampler_start(&s, &d, 10);
        sleep_ms(30);
        nvml_sampler_stop(&s);
        nvml_sampler_stop(&s);                       /* twice is harmless */
        NvmlSummary sum;
        nvml_sampler_summary(&s, &sum);
        NvmlSample latest;
        check_true("nvml.sampler_noop", !started && sum.samples == 0 && isnan(sum.power_avg_w) &&
                       isnan(sum.temp_max_c) && sum.throttle_seen == -1 &&
                       !nvml_sampler_latest(&s, &latest),
                   "sampler without NVML did something");
        nvml_sampler_free(&s);
        nvml_sampler_free(&s);
    } else {
        check_true("nvml.available_here", 1, NULL);  /* a GPU machine: nothing to assert */
    }
    nvml_shutdown();

    /* A library that is not NVML: a clear reason, no crash. */
    setenv("CTRAIN_NVML_LIB", "libm.so.6", 1);
    int m = nvml_init();
    check_true("nvml.wrong_library", !m && strstr(nvml_reason(), "nvmlInit_v2"),
               "reason: %s", nvml_reason());
    nvml_shutdown();
    setenv("CTRAIN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    m = nvml_init();
    check_true("nvml.missing_library", !m && strstr(nvml_reason(), "/nonexistent/libnvidia-ml.so.1"),
               "reason: %s", nvml_reason());
    nvml_shutdown();
    unsetenv("CTRAIN_NVML_LIB");

    /* The sampler thread, driven by a fake reader: every 5 ms, ring of 8. */
    Fake fake = {0};
    NvmlSampler s;
    int started = nvml_sampler_start_fn(&s, fake_read, &fake, 5, 8);
    sleep_ms(80);
    NvmlSample latest;
    int have = nvml_sampler_latest(&s, &latest);
    nvml_sampler_stop(&s);
    NvmlSummary sum;
    nvml_sampler_summary(&s, &sum);
    NvmlSample ring[16];
    size_t held = nvml_sampler_copy(&s, ring, 16);
    int ordered = 1;
    for (size_t i = 1; i < held; i++) ordered &= ring[i].t_s >= ring[i - 1].t_s;
    check_true("nvml.fake_started", started && have && latest.power_w == 250, "sampler did not run");
    check_true("nvml.fake_count", sum.samples == fake.calls && sum.samples >= 3 && sum.samples <= 40,
               "%d readings in 80 ms at 5 ms (reader called %d times)", sum.samples, fake.calls);
    check_true("nvml.fake_ring", held == 8 && ordered, "ring holds %zu, ordered %d", held, ordered);
    check_true("nvml.fake_summary", sum.power_avg_w == 250 && sum.power_peak_w == 250 &&
                   sum.temp_max_c == 52 && sum.sm_clock_min_mhz == 1800 &&
                   sum.sm_clock_max_mhz == 1900 && fabs(sum.sm_clock_avg_mhz - 1850) <= 50 &&
                   sum.mem_used_max_bytes == 1e9 + fake.calls,
               "avg %g peak %g tmax %g clk %g..%g", sum.power_avg_w, sum.power_peak_w, sum.temp_max_c,
               sum.sm_clock_min_mhz, sum.sm_clock_max_mhz);
    double e_want = 250 * sum.duration_s;
    check_true("nvml.fake_energy", fabs(sum.energy_j - e_want) < 1e-6 * e_want + 1e-9 &&
                   sum.duration_s > 0.05, "energy %g J over %g s", sum.energy_j, sum.duration_s);
    check_true("nvml.fake_throttle", !strcmp(sum.throttle_names, "sw_power_cap") &&
                   sum.throttle_seen == (int64_t)(NVML_THROTTLE_GPU_IDLE | NVML_THROTTLE_SW_POWER_CAP) &&
                   sum.throttled_samples == sum.samples / 2,
               "names '%s', %d throttled of %d", sum.throttle_names, sum.throttled_samples, sum.samples);
    nvml_sampler_free(&s);

    /* Stop returns at once even with a long period (the wait is a condvar). */
    fake.calls = 0;
    nvml_sampler_start_fn(&s, fake_read, &fake, 10000, 0);
    sleep_ms(20);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    nvml_sampler_stop(&s);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double waited = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
    nvml_sampler_summary(&s, &sum);
    check_true("nvml.stop_prompt", waited < 0.5 && sum.samples == 2,
               "stop took %.3f s, %d readings (want start + stop)", waited, sum.samples);
    nvml_sampler_free(&s);
}

int main(void)
{
    test_json();
    test_peaks();
    test_unsupported();
    test_soak();
    test_nvml();
    return check_summary();
}
