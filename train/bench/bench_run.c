/* bench_run.c — what the benchmark's measuring children run (bench_run.h).
 *
 * One config: the run (train/loop/run.h: fresh context -> synthetic feed on
 * the device -> model -> trainer, with the options of bench_train_options:
 * ResNet and the MLP SGD momentum 0.9, wd 1e-4, as scripts/torch_bench.py;
 * BERT AdamW, wd 0.01) -> `warmup` untimed steps
 * (cuDNN algorithm search, workspace growth, first allocations) -> timed
 * steps. On the GPU each timed step lies between two CUDA events recorded on
 * the stream (N steps, N + 1 events, one host sync after the last), so a
 * step's time includes any gap where the GPU waited for the host; on the CPU
 * the steps are synchronous and the host clock times them. The figure is the
 * median step (min and max kept, and the 50th and 99th percentiles of the
 * step times). Right after the timed steps the GPU's PCIe link is read (the
 * bench's warnings judge it under load: bench_conditions.h). Peak memory is the pool's high-water mark
 * over the timed steps (reset after warm-up); NVML is sampled every 50 ms
 * over the same window. samples_per_s_mean is the samples of all timed steps
 * over their summed time (a stall counts in full, where the median hides it).
 * A real-data row (--data DIR, bench_data.c) builds its run on the folder
 * with the row's decoder and loader threads, and reads the feed's cumulative
 * statistics (feed_types.h) just before and just after the timed window: the
 * difference is the window's data wait, decode time and fallbacks.
 */
#include "bench_run.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/mem.h"
#include "train/io/jsonlog.h"
#include "train/loop/progress.h"
#include "train/loop/run.h"
#include "train/parallel/dist.h"
#include "timeline.h"
#include "bench_child.h"
#include "nvml.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

/* ---- The job: the run (train/loop/run.h), and the MLP's own feed. */

/* One optimizer step, and the multi-GPU watchdog's progress marker. */
static void job_step(Run *j)
{
    trainer_step(&j->tr);
    dist_step_done(j->dist);
}

/* The MLP reads [B, 784]: random features and labels made once on the device. */
static void flat_next(Feed *f, Ctx *c, uint64_t e, uint32_t b) { (void)f; (void)c; (void)e; (void)b; }
static void flat_free(Feed *f, Ctx *c) { (void)f; (void)c; }

static void feed_flat_synthetic(Feed *f, Ctx *c, int batch, int features, int classes)
{
    memset(f, 0, sizeof *f);
    f->batch = batch;
    f->n_in = 2;
    f->in[0] = tensor_new(c, DT_F32, 2, (int64_t[]){batch, features});   /* OOM is reported here */
    f->in[1] = tensor_new(c, DT_I32, 1, (int64_t[]){batch});
    size_t n = (size_t)batch * features;
    float *x = (float *)malloc(n * sizeof(float));
    int32_t *y = (int32_t *)malloc((size_t)batch * sizeof(int32_t));
    if (!x || !y) ct_fatal("out of host memory for a batch of %d", batch);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
    }
    for (int i = 0; i < batch; i++) y[i] = i % classes;
    mem_to_device(c, f->in[0]->data, x, n * sizeof(float));
    mem_to_device(c, f->in[1]->data, y, (size_t)batch * sizeof(int32_t));
    free(x);
    free(y);
    f->batches_per_epoch = 1000000000L;
    f->classes = classes;
    f->next = flat_next;
    f->stats = NULL;   /* no host data to count */
    f->free = flat_free;
    snprintf(f->desc, sizeof f->desc, "synthetic features on the device (%d, %d classes)", features,
             classes);
}

/* The run's feed for the MLP: synthetic features (feed_open has none). */
static void open_flat(Feed *f, Ctx *c, const TrainOptions *o)
{
    feed_flat_synthetic(f, c, o->batch, 784, o->classes ? o->classes : 10);
}

static void job_open(Run *j, const BenchConfig *cfg)
{
    TrainOptions o;
    bench_train_options(cfg, &o);
    RunSpec spec = {RUN_TRAIN, cfg->gpus > 1, cfg->model == MODEL_MLP ? open_flat : NULL};
    run_open(j, &o, &spec);   /* with several GPUs: this rank's GPU */
    if (j->c.device == DEV_CUDA) j->tr.on_step = timeline_on_step;   /* CTRAIN_TIMELINE's window */
}

static void emit_progress(FILE *out, const char *phase, int step, int of)
{
    JsonLine j;
    json_begin(&j, "progress");
    json_str(&j, "phase", phase);
    json_int(&j, "step", step);
    json_int(&j, "of", of);
    json_end(&j, out);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_percentile(const double *sorted, int n, double q)
{
    if (n <= 0) return NAN;
    double pos = q * (n - 1);
    int i = (int)floor(pos);
    if (i >= n - 1) return sorted[n - 1];
    return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

/* NVML for the context's device, opened by PCI bus id; 0 when unavailable. */
static int nvml_open_for(NvmlDevice *d, const Ctx *c)
{
    memset(d, 0, sizeof *d);
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA && nvml_init()) {
        char bus[32];
        const char *b = cudaDeviceGetPCIBusId(bus, sizeof bus, c->device_id) == cudaSuccess ? bus : NULL;
        return nvml_device_open(d, c->device_id, b);
    }
#else
    (void)c;
#endif
    return 0;
}

static void pool_reset_high(Ctx *c)
{
    mem_reset_peak(c);
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA) {
        unsigned long long zero = 0;   /* cuuint64_t */
        CUDA_CHECK(cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrUsedMemHigh, &zero));
        CUDA_CHECK(cudaDeviceSetGraphMemAttribute(c->device_id, cudaGraphMemAttrUsedMemHigh,
                                                  &zero));
    }
#endif
}

/* Bytes of the pool in use at its high-water mark since pool_reset_high,
 * plus the same for the CUDA graphs' own memory (a replayed step allocates
 * its activations there, not in the pool); the engine's own peak on the CPU. */
static double pool_high(Ctx *c)
{
#ifdef CTRAIN_CUDA
    if (c->device == DEV_CUDA) {
        unsigned long long high = 0, graph_high = 0;
        CUDA_CHECK(cudaMemPoolGetAttribute(c->pool, cudaMemPoolAttrUsedMemHigh, &high));
        CUDA_CHECK(cudaDeviceGetGraphMemAttribute(c->device_id, cudaGraphMemAttrUsedMemHigh,
                                                  &graph_high));
        return (double)high + (double)graph_high;
    }
#endif
    return (double)c->mem.peak;
}

/* ---- One config. */

/* Build the job and run its untimed warm-up steps (the cuDNN search, the
 * graph capture); then the memory high-water marks start from here. */
static void job_open_warm(Run *j, const BenchConfig *cfg, FILE *out)
{
    emit_progress(out, "build", 0, 0);
    job_open(j, cfg);
    for (int i = 0; i < cfg->warmup; i++) {
        job_step(j);
        emit_progress(out, "warmup", i + 1, cfg->warmup);
    }
    ctx_sync(&j->c);
    pool_reset_high(&j->c);
}

/* Most timed steps a config runs (steps, or more to fill min_time_s). */
static int timed_cap(const BenchConfig *cfg)
{
    return cfg->min_time_s > 0 && cfg->steps < 2000 ? 2000 : cfg->steps;
}

/* Another timed step after n? */
static int timed_more(const BenchConfig *cfg, int n, double elapsed)
{
    int min_steps = cfg->min_steps < cfg->steps ? cfg->min_steps : cfg->steps;
    if (n >= min_steps && cfg->time_limit_s > 0 && elapsed > cfg->time_limit_s) return 0;
    return n < cfg->steps || (n < timed_cap(cfg) && elapsed < cfg->min_time_s);
}

/* Data parallel: every rank must run the same number of steps, or one
 * waits in an all-reduce that the other never starts (seen on 2 H200s: the
 * ranks' own clocks ended the timing at different steps). The count that
 * timed_more() would give is worked out once from one synced step, and the
 * ranks take the largest. -1 when not data parallel (the clock decides). */
static int timed_count_agreed(Run *j, const BenchConfig *cfg)
{
    if (!j->dist) return -1;
    ctx_sync(&j->c);
    double a = progress_now();
    job_step(j);   /* one more warm-up step, timed on the host */
    ctx_sync(&j->c);
    double step_s = progress_now() - a;
    int n = cfg->steps, cap = timed_cap(cfg);
    if (cfg->min_time_s > 0 && step_s > 0 && cfg->min_time_s / step_s > n)
        n = (int)ceil(cfg->min_time_s / step_s);
    if (cfg->time_limit_s > 0 && step_s > 0 && n * step_s > cfg->time_limit_s) {
        int min_steps = cfg->min_steps < cfg->steps ? cfg->min_steps : cfg->steps;
        n = (int)(cfg->time_limit_s / step_s);
        if (n < min_steps) n = min_steps;
    }
    if (n > cap) n = cap;
    if (n < 1) n = 1;
    return dist_all_max(j->dist, n);
}

/* Run the timed steps; step seconds into t[], returns how many ran. */
static int timed_steps(Run *j, const BenchConfig *cfg, FILE *out, double *t)
{
    int n = 0, cap = timed_cap(cfg), fixed = timed_count_agreed(j, cfg);
    double t0 = progress_now();
#define MORE() (fixed >= 0 ? n < fixed : timed_more(cfg, n, progress_now() - t0))
#ifdef CTRAIN_CUDA
    if (j->c.device == DEV_CUDA) {
        cudaEvent_t *ev = (cudaEvent_t *)calloc((size_t)cap + 1, sizeof *ev);
        if (!ev) ct_fatal("out of host memory");
        for (int i = 0; i <= cap; i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
        CUDA_CHECK(cudaEventRecord(ev[0], j->c.stream));
        while (MORE()) {
            job_step(j);
            CUDA_CHECK(cudaEventRecord(ev[++n], j->c.stream));
            emit_progress(out, "timed", n, cfg->steps);
        }
        CUDA_CHECK(cudaEventSynchronize(ev[n]));
        for (int i = 0; i < n; i++) {
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
            t[i] = ms * 1e-3;
        }
        for (int i = 0; i <= cap; i++) CUDA_CHECK(cudaEventDestroy(ev[i]));
        free(ev);
        return n;
    }
#endif
    (void)cap;
    while (MORE()) {
        double a = progress_now();
        job_step(j);
        ctx_sync(&j->c);
        t[n++] = progress_now() - a;
        emit_progress(out, "timed", n, cfg->steps);
    }
    return n;
#undef MORE
}

/* A real-data row's figures over the timed window: the difference of two
 * readings of the feed's cumulative statistics, over timed_s. */
static void data_figures(BenchRow *row, const FeedStats *a, const FeedStats *b, double timed_s)
{
    BenchResult *r = &row->r;
    double images = (double)(b->images - a->images), decode_s = b->decode_s - a->decode_s;
    r->data_images = images;
    /* the GPU's own stall where measured (the host's wait only bounds it) */
    r->data_wait_s = b->gpu_wait_s >= 0 && a->gpu_wait_s >= 0 ? b->gpu_wait_s - a->gpu_wait_s
                                                              : b->wait_s - a->wait_s;
    r->data_wait_fraction = timed_s > 0 ? r->data_wait_s / timed_s : NAN;
    r->decode_s = decode_s;
    r->decode_parallel = b->decode_parallel;
    r->decode_images_per_s = timed_s > 0 ? images / timed_s : NAN;
    r->decode_capacity_images_per_s =
        decode_s > 0 && b->decode_parallel > 0 ? images / decode_s * b->decode_parallel : NAN;
    r->cpu_fallback = (double)(b->cpu_fallback - a->cpu_fallback);
    snprintf(row->decoder, sizeof row->decoder, "%s", b->decode);
}

void bench_child_config(FILE *out, const void *arg)
{
    const BenchConfig *cfg = (const BenchConfig *)arg;
    BenchRow row;
    bench_row_init(&row, cfg);
    Run *j = (Run *)calloc(1, sizeof *j);
    if (!j) ct_fatal("out of host memory");
    job_open_warm(j, cfg, out);
    ctx_check_flags(&j->c);
    double state_bytes = (double)j->c.mem.current;   /* between steps: no activations live */

    NvmlDevice nd;
    NvmlSampler smp;
    memset(&smp, 0, sizeof smp);
    int nvml = nvml_open_for(&nd, &j->c) && nvml_sampler_start(&smp, &nd, 50);
    double *t = (double *)calloc((size_t)timed_cap(cfg) + 1, sizeof *t);
    if (!t) ct_fatal("out of host memory");
    FeedStats st0, st1;
    int stats = cfg->data[0] && feed_stats_now(&j->fd, &st0);
    int n = timed_steps(j, cfg, out, t);
    if (stats) feed_stats_now(&j->fd, &st1);   /* timed_steps has synced: the window is over */
    /* the link right away, before the idle card lowers its generation */
    nvml_device_pcie(&nd, &row.pcie_gen_busy, &row.pcie_width_busy);
    double timed_s = 0;
    for (int i = 0; i < n; i++) timed_s += t[i];
    NvmlSummary sum;
    if (nvml) {
        nvml_sampler_stop(&smp);
        nvml_sampler_summary(&smp, &sum);
        nvml_sampler_free(&smp);
    }

    if (cfg->graph && j->tr.graph.state != GRAPH_ON && !strncmp(row.mode, "graph", 5)) {
        memcpy(row.mode, "eager", 5);   /* measured eager: say so (same length) */
    }
    BenchResult *r = &row.r;
    double med = bench_median(t, n);
    double per_step = (double)cfg->batch * j->o.accum;
    r->steps = n;
    r->samples_per_s = per_step / med;
    r->samples_per_s_min = per_step / t[n - 1];   /* t is sorted now */
    r->samples_per_s_max = per_step / t[0];
    r->ms_per_step = med * 1e3;
    r->step_ms_p50 = bench_percentile(t, n, 0.50) * 1e3;
    r->step_ms_p99 = bench_percentile(t, n, 0.99) * 1e3;
    r->timed_s = timed_s;
    r->samples_per_s_mean = timed_s > 0 ? per_step * n / timed_s : NAN;
    if (stats) data_figures(&row, &st0, &st1, timed_s);
    r->peak_mem_bytes = pool_high(&j->c);
    r->state_mem_bytes = state_bytes;
    row.engine_peak_mem_bytes = (double)j->c.mem.peak;
    bench_row_peak_at(&row, &j->c);
    r->final_loss = trainer_loss_value(&j->tr);
    if (nvml && sum.samples > 0) {
        r->power_avg_w = sum.power_avg_w;
        r->power_peak_w = sum.power_peak_w;
        r->energy_j = sum.energy_j;
        r->temp_avg_c = sum.temp_avg_c;
        r->temp_max_c = sum.temp_max_c;
        r->sm_clock_avg_mhz = sum.sm_clock_avg_mhz;
        r->sm_clock_min_mhz = sum.sm_clock_min_mhz;
        if (sum.throttle_seen >= 0) snprintf(row.throttle, sizeof row.throttle, "%s", sum.throttle_names);
    }
    bench_row_write(out, &row);
    free(t);
    run_close(j);
    free(j);
}

/* ---- The soak: one config for a duration, a row now and then. */

static volatile sig_atomic_t soak_stop;
static void soak_on_signal(int sig) { (void)sig; soak_stop = 1; }

void bench_child_soak(FILE *out, const void *arg)
{
    const BenchConfig *cfg = (const BenchConfig *)arg;
    Run *j = (Run *)calloc(1, sizeof *j);
    if (!j) ct_fatal("out of host memory");
    signal(SIGINT, soak_on_signal);   /* Ctrl-C ends the soak with a last row */
    signal(SIGTERM, soak_on_signal);
    job_open_warm(j, cfg, out);
    NvmlDevice nd;
    int nvml = nvml_open_for(&nd, &j->c);
    double t0 = progress_now(), t_last = t0;
    long last_step = j->tr.step, n = 0;
    for (;;) {
        job_step(j);
        n++;
        double now = progress_now();
        int end = now - t0 >= cfg->soak_s || soak_stop;
        int due = cfg->soak_every > 0 ? n % cfg->soak_every == 0 : now - t_last >= cfg->soak_interval_s;
        if (!due && !end) continue;
        float loss = trainer_loss_value(&j->tr);   /* waits: the interval's time is honest */
        now = progress_now();
        NvmlSample s = {0, NAN, NAN, NAN, NAN, NAN, -1};
        if (nvml) nvml_device_sample(&nd, &s);
        JsonLine jl;
        json_begin(&jl, "row");
        json_num(&jl, "time_s", now - t0);
        json_int(&jl, "step", j->tr.step);
        json_num(&jl, "samples_per_s", (double)(j->tr.step - last_step) * cfg->batch / (now - t_last));
        json_num(&jl, "loss", loss);
        json_str(&jl, "loss_text", isnan(loss) ? "nan" : isinf(loss) ? (loss > 0 ? "inf" : "-inf") : "");
        json_num(&jl, "mem_bytes", (double)j->c.mem.current);
        json_num(&jl, "power_w", s.power_w);
        json_num(&jl, "temp_c", s.temp_c);
        json_num(&jl, "sm_clock_mhz", s.sm_clock_mhz);
        json_int(&jl, "throttle", s.throttle);
        json_end(&jl, out);
        t_last = now;
        last_step = j->tr.step;
        if (end) break;
    }
    if (soak_stop) emit_progress(out, "interrupted", (int)(n < 2147483647L ? n : 2147483647L), 0);
    BenchRow row;
    bench_row_init(&row, cfg);
    row.r.steps = (int)(n < 2147483647L ? n : 2147483647L);
    row.r.peak_mem_bytes = pool_high(&j->c);
    row.engine_peak_mem_bytes = (double)j->c.mem.peak;
    bench_row_peak_at(&row, &j->c);
    row.r.final_loss = trainer_loss_value(&j->tr);
    bench_row_write(out, &row);
    run_close(j);
    free(j);
}
