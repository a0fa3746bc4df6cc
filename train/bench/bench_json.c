/* bench_json.c — the benchmark JSON builder and the run's machine record.
 * The schema is described in bench_json.h.
 */
#include "bench_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "nvml.h"
#ifdef CTRAIN_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#endif

/* ---- Builder. */

void jsonw_init(JsonW *w) { memset(w, 0, sizeof *w); }

void jsonw_free(JsonW *w)
{
    free(w->buf);
    memset(w, 0, sizeof *w);
}

static void put(JsonW *w, const char *s, size_t n)
{
    if (w->oom) return;
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (w->len + n + 1 > cap) cap *= 2;
        char *p = realloc(w->buf, cap);
        if (!p) { w->oom = 1; return; }
        w->buf = p;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = 0;
}

static void puts_(JsonW *w, const char *s) { put(w, s, strlen(s)); }

static void putf(JsonW *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(JsonW *w, const char *fmt, ...)
{
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) put(w, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void put_escaped(JsonW *w, const char *s)
{
    puts_(w, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; put(w, e, 2); }
        else if (c == '\n') puts_(w, "\\n");
        else if (c == '\t') puts_(w, "\\t");
        else if (c < 0x20) putf(w, "\\u%04x", c);
        else put(w, (const char *)&c, 1);
    }
    puts_(w, "\"");
}

/* Comma, newline and indent before an item, then its key. */
static void item(JsonW *w, const char *key)
{
    int d = w->depth < 31 ? w->depth : 31;
    if (w->has_item[d]) puts_(w, ",");
    if (d > 0 || w->has_item[d]) {
        puts_(w, "\n");
        for (int i = 0; i < d; i++) puts_(w, "  ");
    }
    w->has_item[d] = 1;
    if (key) {
        put_escaped(w, key);
        puts_(w, ": ");
    }
}

static void open_(JsonW *w, const char *key, const char *brace)
{
    item(w, key);
    puts_(w, brace);
    w->depth++;
    if (w->depth < 32) w->has_item[w->depth] = 0;
}

static void close_(JsonW *w, const char *brace)
{
    int had = w->depth < 32 ? w->has_item[w->depth] : 1;
    w->depth--;
    if (had) {
        puts_(w, "\n");
        for (int i = 0; i < w->depth; i++) puts_(w, "  ");
    }
    puts_(w, brace);
}

void jsonw_obj_begin(JsonW *w, const char *key) { open_(w, key, "{"); }
void jsonw_obj_end(JsonW *w) { close_(w, "}"); }
void jsonw_arr_begin(JsonW *w, const char *key) { open_(w, key, "["); }
void jsonw_arr_end(JsonW *w) { close_(w, "]"); }

void jsonw_num(JsonW *w, const char *key, double v)
{
    if (!isfinite(v)) return;
    item(w, key);
    /* integers (bytes, counts) exactly; measurements to 10 significant digits */
    if (v == floor(v) && fabs(v) < 9007199254740992.0) putf(w, "%.0f", v);
    else putf(w, "%.10g", v);
}

void jsonw_int(JsonW *w, const char *key, int64_t v)
{
    if (v < 0) return;
    item(w, key);
    putf(w, "%lld", (long long)v);
}

void jsonw_str(JsonW *w, const char *key, const char *v)
{
    if (!v || !*v) return;
    item(w, key);
    put_escaped(w, v);
}

void jsonw_bool(JsonW *w, const char *key, int v)
{
    item(w, key);
    puts_(w, v ? "true" : "false");
}

/* ---- Schema. */

void bench_result_init(BenchResult *r)
{
    memset(r, 0, sizeof *r);
    r->engine = "ctrain";
    r->batch = r->seq = r->image_size = r->steps = r->warmup = -1;
    double *nums[] = {&r->samples_per_s, &r->samples_per_s_min, &r->samples_per_s_max,
                      &r->ms_per_step, &r->peak_mem_bytes, &r->state_mem_bytes,
                      &r->flops_per_sample,
                      &r->peak_tflops, &r->mfu_peak, &r->ceiling_tflops,
                      &r->mfu_measured_ceiling, &r->power_avg_w, &r->power_peak_w,
                      &r->energy_j, &r->temp_avg_c, &r->temp_max_c, &r->sm_clock_avg_mhz,
                      &r->sm_clock_min_mhz, &r->samples_per_s_per_w, &r->final_loss};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) *nums[i] = NAN;
}

void bench_json_soak(JsonW *w, const char *key, const SoakSummary *s)
{
    jsonw_obj_begin(w, key);
    jsonw_int(w, "rows", s->rows);
    jsonw_int(w, "rows_after_warmup", s->rows_after_warmup);
    jsonw_num(w, "duration_s", s->duration_s);
    jsonw_num(w, "samples_per_s_mean", s->samples_per_s_mean);
    jsonw_num(w, "mem_min_bytes", s->mem_min_bytes);
    jsonw_num(w, "mem_max_bytes", s->mem_max_bytes);
    jsonw_num(w, "mem_fluctuation_pct", s->mem_fluctuation_pct);
    jsonw_num(w, "throughput_first_mean", s->throughput_first_mean);
    jsonw_num(w, "throughput_last_mean", s->throughput_last_mean);
    jsonw_num(w, "throughput_drift_pct", s->throughput_drift_pct);
    jsonw_num(w, "power_avg_w", s->power_avg_w);
    jsonw_num(w, "power_peak_w", s->power_peak_w);
    jsonw_num(w, "temp_max_c", s->temp_max_c);
    jsonw_num(w, "sm_clock_min_mhz", s->sm_clock_min_mhz);
    if (s->throttle_seen >= 0) {   /* unmeasured: absent, not "false" */
        jsonw_bool(w, "throttling_seen", s->throttle_seen != 0);
        jsonw_str(w, "throttle", s->throttle_names);
        jsonw_int(w, "throttled_rows", s->throttled_rows);
    }
    jsonw_int(w, "nonfinite_loss", s->nonfinite_loss);
    jsonw_int(w, "first_nonfinite_step", s->first_nonfinite_step);
    jsonw_str(w, "cuda_error", s->cuda_error);
    jsonw_obj_end(w);
}

void bench_json_result(JsonW *w, const BenchResult *r)
{
    jsonw_obj_begin(w, NULL);
    jsonw_str(w, "engine", r->engine);
    jsonw_str(w, "mode", r->mode);
    jsonw_str(w, "model", r->model);
    jsonw_str(w, "precision", r->precision);
    jsonw_int(w, "batch", r->batch);
    jsonw_int(w, "seq", r->seq);
    jsonw_int(w, "image_size", r->image_size);
    jsonw_str(w, "layout", r->layout);
    jsonw_int(w, "steps", r->steps);
    jsonw_int(w, "warmup", r->warmup);
    jsonw_num(w, "samples_per_s", r->samples_per_s);
    jsonw_num(w, "samples_per_s_min", r->samples_per_s_min);
    jsonw_num(w, "samples_per_s_max", r->samples_per_s_max);
    jsonw_num(w, "ms_per_step", r->ms_per_step);
    jsonw_num(w, "peak_mem_bytes", r->peak_mem_bytes);
    jsonw_num(w, "state_mem_bytes", r->state_mem_bytes);
    jsonw_num(w, "flops_per_sample", r->flops_per_sample);
    jsonw_num(w, "peak_tflops", r->peak_tflops);
    jsonw_num(w, "mfu_peak", r->mfu_peak);
    jsonw_num(w, "ceiling_tflops", r->ceiling_tflops);
    jsonw_num(w, "mfu_measured_ceiling", r->mfu_measured_ceiling);
    jsonw_num(w, "power_avg_w", r->power_avg_w);
    jsonw_num(w, "power_peak_w", r->power_peak_w);
    jsonw_num(w, "energy_j", r->energy_j);
    jsonw_num(w, "temp_avg_c", r->temp_avg_c);
    jsonw_num(w, "temp_max_c", r->temp_max_c);
    jsonw_num(w, "sm_clock_avg_mhz", r->sm_clock_avg_mhz);
    jsonw_num(w, "sm_clock_min_mhz", r->sm_clock_min_mhz);
    jsonw_str(w, "throttle", r->throttle);
    jsonw_num(w, "samples_per_s_per_w", r->samples_per_s_per_w);
    jsonw_num(w, "final_loss", r->final_loss);
    jsonw_str(w, "error", r->error);
    if (r->soak) bench_json_soak(w, "soak", r->soak);
    jsonw_obj_end(w);
}

char *bench_json_string(const BenchRun *run)
{
    JsonW w;
    jsonw_init(&w);
    const BenchMachine *m = &run->machine;
    jsonw_obj_begin(&w, NULL);
    jsonw_str(&w, "schema", BENCH_SCHEMA);
    jsonw_str(&w, "command", run->command);
    jsonw_obj_begin(&w, "machine");
    jsonw_str(&w, "gpu_name", m->gpu_name);
    jsonw_int(&w, "gpu_memory_bytes", m->gpu_memory_bytes);
    jsonw_int(&w, "gpu_count", m->gpu_count);
    jsonw_str(&w, "driver", m->driver);
    jsonw_str(&w, "cuda_runtime", m->cuda_runtime);
    jsonw_str(&w, "cudnn", m->cudnn);
    jsonw_str(&w, "cublas", m->cublas);
    jsonw_str(&w, "cpu", m->cpu);
    jsonw_str(&w, "host", m->host);
    jsonw_str(&w, "ctrain_revision", m->ctrain_revision);
    jsonw_str(&w, "date", m->date);
    jsonw_obj_end(&w);
    jsonw_arr_begin(&w, "results");
    for (int i = 0; i < run->n_results; i++) bench_json_result(&w, &run->results[i]);
    jsonw_arr_end(&w);
    jsonw_arr_begin(&w, "ceilings");
    for (int i = 0; i < run->n_ceilings; i++) {
        const BenchCeiling *c = &run->ceilings[i];
        jsonw_obj_begin(&w, NULL);
        jsonw_str(&w, "name", c->name);
        jsonw_str(&w, "precision", c->precision);
        jsonw_num(&w, "tflops", c->tflops);
        jsonw_obj_end(&w);
    }
    jsonw_arr_end(&w);
    jsonw_obj_end(&w);
    puts_(&w, "\n");
    if (w.oom) {
        jsonw_free(&w);
        return NULL;
    }
    return w.buf;
}

int bench_json_write_file(const char *path, const BenchRun *run)
{
    char *s = bench_json_string(run);
    if (!s) { errno = ENOMEM; return -1; }
    FILE *f = fopen(path, "w");
    if (!f) { int e = errno; free(s); errno = e; return -1; }
    size_t n = strlen(s);
    int ok = fwrite(s, 1, n, f) == n;
    int e = errno;
    if (fclose(f) != 0 && ok) { ok = 0; e = errno; }
    free(s);
    if (!ok) { errno = e; return -1; }
    return 0;
}

/* ---- Machine. */

static void read_cpu(char *out, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) {
                p += 1 + (p[1] == ' ');
                p[strcspn(p, "\n")] = 0;
                snprintf(out, len, "%s (%ld logical CPUs)", p, sysconf(_SC_NPROCESSORS_ONLN));
            }
            break;
        }
    fclose(f);
}

/* The revision: baked in at build time when the Makefile passes
 * -DCTRAIN_GIT_REVISION="\"...\"", else `git describe` in the folder of the
 * running binary (a build inside the checkout). Absent when neither works. */
static void read_revision(char *out, size_t len)
{
#ifdef CTRAIN_GIT_REVISION
    snprintf(out, len, "%s", CTRAIN_GIT_REVISION);
    if (*out) return;
#endif
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = 0;
    if (strchr(exe, '\'')) return;        /* keep the shell quoting simple */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "git -C '%s' describe --always --dirty 2>/dev/null", exe);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char buf[128] = "";
    if (fgets(buf, sizeof buf, p)) {
        buf[strcspn(buf, "\r\n")] = 0;
        snprintf(out, len, "%s", buf);
    }
    pclose(p);
}

#ifdef CTRAIN_CUDA
/* cuDNN 9 numbers versions major*10000 + minor*100 + patch, cuDNN 8
 * major*1000 + minor*100 + patch; cuBLAS major*10000 + minor*100 + patch. */
static void fmt_version(char *out, size_t len, size_t v, size_t major_unit)
{
    snprintf(out, len, "%zu.%zu.%zu", v / major_unit, (v % major_unit) / 100, v % 100);
}
#endif

void bench_machine_collect(BenchMachine *m, int device)
{
    memset(m, 0, sizeof *m);
    m->gpu_memory_bytes = -1;
    m->gpu_count = -1;
    read_cpu(m->cpu, sizeof m->cpu);
    if (gethostname(m->host, sizeof m->host) != 0) m->host[0] = 0;
    m->host[sizeof m->host - 1] = 0;
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    read_revision(m->ctrain_revision, sizeof m->ctrain_revision);
    if (nvml_init()) nvml_driver_version(m->driver, sizeof m->driver);
#ifdef CTRAIN_CUDA
    int rt = 0, n = 0;
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
        snprintf(m->cuda_runtime, sizeof m->cuda_runtime, "%d.%d", rt / 1000, (rt % 1000) / 10);
    size_t dnn = cudnnGetVersion();
    if (dnn) fmt_version(m->cudnn, sizeof m->cudnn, dnn, dnn >= 90000 ? 10000 : 1000);
    size_t blas = cublasLtGetVersion();
    if (blas) fmt_version(m->cublas, sizeof m->cublas, blas, 10000);
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
        m->gpu_count = n;
        struct cudaDeviceProp p;
        if (device >= 0 && device < n && cudaGetDeviceProperties(&p, device) == cudaSuccess) {
            snprintf(m->gpu_name, sizeof m->gpu_name, "%s", p.name);
            m->gpu_memory_bytes = (int64_t)p.totalGlobalMem;
        }
    } else {
        cudaGetLastError();   /* clear the sticky "no device" status */
    }
#else
    (void)device;
#endif
}
