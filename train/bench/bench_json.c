/* bench_json.c — the benchmark JSON file (written with train/io/jsonw.h) and
 * the run's machine record.
 * The schema is described in bench_json.h.
 */
#include "bench_json.h"

#include <errno.h>
#include <math.h>
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

/* ---- A figure not measured is absent (bench_json.h). */

static void opt_num(JsonW *w, const char *key, double v)
{
    if (isfinite(v)) jsonw_num(w, key, v);
}

static void opt_int(JsonW *w, const char *key, int64_t v)
{
    if (v >= 0) jsonw_int(w, key, v);
}

static void opt_str(JsonW *w, const char *key, const char *v)
{
    if (v && *v) jsonw_str(w, key, v);
}

/* ---- The machine's conditions: every key written, null when unknown. */

static void null_int(JsonW *w, const char *key, int64_t v)
{
    if (v >= 0) jsonw_int(w, key, v);
    else jsonw_str(w, key, NULL);
}

static void null_bool(JsonW *w, const char *key, int v)
{
    if (v >= 0) jsonw_bool(w, key, v);
    else jsonw_str(w, key, NULL);
}

static void null_str(JsonW *w, const char *key, const char *v)
{
    jsonw_str(w, key, v && *v ? v : NULL);
}

static void load_avg(JsonW *w, const char *key, const double v[3])
{
    if (!isfinite(v[0])) { jsonw_str(w, key, NULL); return; }
    jsonw_arr_begin(w, key);
    for (int i = 0; i < 3; i++) jsonw_num(w, NULL, v[i]);
    jsonw_arr_end(w);
}

static void conditions(JsonW *w, const BenchMachine *m)
{
    const NvmlState *g = &m->gpu;
    null_bool(w, "ecc_enabled", g->ecc_enabled);
    null_bool(w, "persistence_mode", g->persistence_mode);
    jsonw_num(w, "power_limit_w", g->power_limit_w);   /* NaN: null */
    jsonw_num(w, "power_limit_default_w", g->power_default_w);
    null_int(w, "pcie_gen", g->pcie_gen);
    null_int(w, "pcie_width", g->pcie_width);
    null_int(w, "pcie_gen_max", g->pcie_gen_max);
    null_int(w, "pcie_width_max", g->pcie_width_max);
    null_int(w, "pcie_gen_under_load", m->pcie_gen_under_load);
    null_int(w, "pcie_width_under_load", m->pcie_width_under_load);
    null_int(w, "nvlink_active_links", g->nvlink_active);
    if (m->n_gpu_processes < 0) {
        jsonw_str(w, "other_gpu_processes", NULL);
    } else {
        jsonw_arr_begin(w, "other_gpu_processes");
        for (int i = 0; i < m->n_gpu_processes && i < BENCH_MAX_GPU_PROCESSES; i++) {
            const BenchGpuProcess *p = &m->gpu_processes[i];
            jsonw_obj_begin(w, NULL);
            jsonw_int(w, "gpu", p->gpu);
            jsonw_int(w, "pid", p->pid);
            null_str(w, "name", p->name);
            jsonw_num(w, "used_bytes", p->used_bytes);
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
    }
    load_avg(w, "load_avg_start", m->load_avg_start);
    load_avg(w, "load_avg_end", m->load_avg_end);
    null_int(w, "cpu_count", m->cpu_count);
    jsonw_arr_begin(w, "warnings");
    for (int i = 0; i < m->n_warnings; i++) jsonw_str(w, NULL, m->warnings[i]);
    jsonw_arr_end(w);
    jsonw_arr_begin(w, "notes");
    for (int i = 0; i < m->n_notes; i++) jsonw_str(w, NULL, m->notes[i]);
    jsonw_arr_end(w);
}

/* ---- Schema. */

void bench_result_init(BenchResult *r)
{
    memset(r, 0, sizeof *r);
    r->engine = "ctrain";
    r->batch = r->seq = r->image_size = r->steps = r->warmup = -1;
    r->workers = r->decode_parallel = -1;
    double *nums[] = {&r->samples_per_s, &r->samples_per_s_min, &r->samples_per_s_max,
                      &r->ms_per_step, &r->step_ms_p50, &r->step_ms_p99, &r->peak_mem_bytes,
                      &r->live_peak_bytes, &r->state_mem_bytes,
                      &r->flops_per_sample,
                      &r->peak_tflops, &r->mfu_peak, &r->ceiling_tflops,
                      &r->mfu_measured_ceiling, &r->power_avg_w, &r->power_peak_w,
                      &r->energy_j, &r->temp_avg_c, &r->temp_max_c, &r->sm_clock_avg_mhz,
                      &r->sm_clock_min_mhz, &r->samples_per_s_per_w, &r->final_loss,
                      &r->samples_per_s_mean, &r->timed_s, &r->data_images, &r->data_wait_s,
                      &r->data_wait_fraction, &r->decode_s, &r->decode_images_per_s,
                      &r->decode_capacity_images_per_s, &r->cpu_fallback};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) *nums[i] = NAN;
}

void bench_json_soak(JsonW *w, const char *key, const SoakSummary *s)
{
    jsonw_obj_begin(w, key);
    opt_int(w, "rows", s->rows);
    opt_int(w, "rows_after_warmup", s->rows_after_warmup);
    opt_num(w, "duration_s", s->duration_s);
    opt_num(w, "samples_per_s_mean", s->samples_per_s_mean);
    opt_num(w, "mem_min_bytes", s->mem_min_bytes);
    opt_num(w, "mem_max_bytes", s->mem_max_bytes);
    opt_num(w, "mem_fluctuation_pct", s->mem_fluctuation_pct);
    opt_num(w, "throughput_first_mean", s->throughput_first_mean);
    opt_num(w, "throughput_last_mean", s->throughput_last_mean);
    opt_num(w, "throughput_drift_pct", s->throughput_drift_pct);
    opt_num(w, "power_avg_w", s->power_avg_w);
    opt_num(w, "power_peak_w", s->power_peak_w);
    opt_num(w, "temp_max_c", s->temp_max_c);
    opt_num(w, "sm_clock_min_mhz", s->sm_clock_min_mhz);
    if (s->throttle_seen >= 0) {   /* unmeasured: absent, not "false" */
        jsonw_bool(w, "throttling_seen", s->throttle_seen != 0);
        opt_str(w, "throttle", s->throttle_names);
        opt_int(w, "throttled_rows", s->throttled_rows);
    }
    opt_int(w, "nonfinite_loss", s->nonfinite_loss);
    opt_int(w, "first_nonfinite_step", s->first_nonfinite_step);
    opt_str(w, "cuda_error", s->cuda_error);
    jsonw_obj_end(w);
}

void bench_json_result(JsonW *w, const BenchResult *r)
{
    jsonw_obj_begin(w, NULL);
    opt_str(w, "engine", r->engine);
    opt_str(w, "mode", r->mode);
    opt_str(w, "model", r->model);
    opt_str(w, "precision", r->precision);
    opt_int(w, "batch", r->batch);
    opt_int(w, "seq", r->seq);
    opt_int(w, "image_size", r->image_size);
    opt_str(w, "layout", r->layout);
    opt_str(w, "model_note", r->model_note);
    opt_int(w, "steps", r->steps);
    opt_int(w, "warmup", r->warmup);
    opt_num(w, "samples_per_s", r->samples_per_s);
    opt_num(w, "samples_per_s_min", r->samples_per_s_min);
    opt_num(w, "samples_per_s_max", r->samples_per_s_max);
    opt_num(w, "ms_per_step", r->ms_per_step);
    opt_num(w, "step_ms_p50", r->step_ms_p50);
    opt_num(w, "step_ms_p99", r->step_ms_p99);
    opt_num(w, "peak_mem_bytes", r->peak_mem_bytes);
    opt_num(w, "live_peak_bytes", r->live_peak_bytes);
    opt_str(w, "live_peak_at", r->live_peak_at);
    opt_num(w, "state_mem_bytes", r->state_mem_bytes);
    opt_num(w, "flops_per_sample", r->flops_per_sample);
    opt_num(w, "peak_tflops", r->peak_tflops);
    opt_num(w, "mfu_peak", r->mfu_peak);
    opt_num(w, "ceiling_tflops", r->ceiling_tflops);
    opt_num(w, "mfu_measured_ceiling", r->mfu_measured_ceiling);
    opt_num(w, "power_avg_w", r->power_avg_w);
    opt_num(w, "power_peak_w", r->power_peak_w);
    opt_num(w, "energy_j", r->energy_j);
    opt_num(w, "temp_avg_c", r->temp_avg_c);
    opt_num(w, "temp_max_c", r->temp_max_c);
    opt_num(w, "sm_clock_avg_mhz", r->sm_clock_avg_mhz);
    opt_num(w, "sm_clock_min_mhz", r->sm_clock_min_mhz);
    opt_str(w, "throttle", r->throttle);
    opt_num(w, "samples_per_s_per_w", r->samples_per_s_per_w);
    opt_num(w, "final_loss", r->final_loss);
    opt_str(w, "error", r->error);
    opt_str(w, "data", r->data);
    opt_num(w, "samples_per_s_mean", r->samples_per_s_mean);
    opt_num(w, "timed_s", r->timed_s);
    opt_str(w, "decode", r->decode);
    opt_str(w, "decoder", r->decoder);
    opt_int(w, "workers", r->workers);
    opt_num(w, "data_images", r->data_images);
    opt_num(w, "data_wait_s", r->data_wait_s);
    opt_num(w, "data_wait_fraction", r->data_wait_fraction);
    opt_num(w, "decode_s", r->decode_s);
    opt_int(w, "decode_parallel", r->decode_parallel);
    opt_num(w, "decode_images_per_s", r->decode_images_per_s);
    opt_num(w, "decode_capacity_images_per_s", r->decode_capacity_images_per_s);
    opt_num(w, "cpu_fallback", r->cpu_fallback);
    if (r->soak) bench_json_soak(w, "soak", r->soak);
    jsonw_obj_end(w);
}

char *bench_json_string(const BenchRun *run)
{
    JsonW w;
    jsonw_init(&w, BENCH_JSON_STYLE);
    const BenchMachine *m = &run->machine;
    jsonw_obj_begin(&w, NULL);
    opt_str(&w, "schema", BENCH_SCHEMA);
    opt_str(&w, "command", run->command);
    jsonw_obj_begin(&w, "machine");
    opt_str(&w, "gpu_name", m->gpu_name);
    opt_int(&w, "gpu_memory_bytes", m->gpu_memory_bytes);
    opt_int(&w, "gpu_count", m->gpu_count);
    if (m->compute_capability > 0) jsonw_int(&w, "compute_capability", m->compute_capability);
    opt_str(&w, "driver", m->driver);
    opt_str(&w, "cuda_runtime", m->cuda_runtime);
    opt_str(&w, "cudnn", m->cudnn);
    opt_str(&w, "cublas", m->cublas);
    opt_str(&w, "cpu", m->cpu);
    opt_str(&w, "host", m->host);
    opt_str(&w, "ctrain_revision", m->ctrain_revision);
    opt_str(&w, "date", m->date);
    if (m->conditions) conditions(&w, m);
    jsonw_obj_end(&w);
    jsonw_arr_begin(&w, "results");
    for (int i = 0; i < run->n_results; i++) bench_json_result(&w, &run->results[i]);
    jsonw_arr_end(&w);
    jsonw_arr_begin(&w, "ceilings");
    for (int i = 0; i < run->n_ceilings; i++) {
        const BenchCeiling *c = &run->ceilings[i];
        jsonw_obj_begin(&w, NULL);
        opt_str(&w, "name", c->name);
        opt_str(&w, "precision", c->precision);
        opt_num(&w, "tflops", c->tflops);
        jsonw_obj_end(&w);
    }
    jsonw_arr_end(&w);
    jsonw_obj_end(&w);
    jsonw_raw(&w, "\n");
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
void bench_revision(char *out, size_t len)
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
    m->compute_capability = -1;
    read_cpu(m->cpu, sizeof m->cpu);
    if (gethostname(m->host, sizeof m->host) != 0) m->host[0] = 0;
    m->host[sizeof m->host - 1] = 0;
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    bench_revision(m->ctrain_revision, sizeof m->ctrain_revision);
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
            m->compute_capability = p.major * 10 + p.minor;
        }
    } else {
        cudaGetLastError();   /* clear the sticky "no device" status */
    }
#else
    (void)device;
#endif
}
