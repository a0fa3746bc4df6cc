/* bench.c — `ctrain bench`: options, the suite, the header, the command.
 *
 * Default suite on a GPU (each flag narrows it):
 *   ResNet50 224x224  batch 32, 64, 256             fp32, tf32, fp16, bf16
 *   BERT-base         batch 32, seq 128             fp32, tf32, fp16, bf16
 *   BERT-large        batch 24, 32 x seq 128, 512   fp32, tf32, fp16, bf16
 * --quick: ResNet50 batch 64 and 256, BERT-large batch 32 seq 128, in bf16
 * and tf32, 3 warm-up and 10 timed steps. Otherwise 5 warm-up and 20 timed
 * steps; on the GPU timing goes on until 2 s have passed (NVML's power is a
 * ~1 s running average) and stops after --time-limit (15 s) once 5 steps are
 * done, which bounds the slow fp32 configs. Without a GPU (or --device cpu):
 * a CPU bench of small configs (MLP batch 64; ResNet18 at width 16, 32x32,
 * batch 8; BERT-tiny seq 32 batch 4), labelled CPU everywhere.
 * Synthetic data generated once on the device; the step captured as CUDA
 * graphs in the warm-up (--graph on, the default; off or both on request).
 *
 * Every config runs in its own child process (bench.h says why); its row is
 * printed as soon as it is done, under a progress line on a terminal, and the
 * --json file is rewritten after each config, so an interrupted run keeps
 * what it measured.
 */
#include "bench.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/error.h"
#include "train/loop/progress.h"
#include "train/parallel/dist_env.h"
#include "bench_dist.h"
#include "bench_modes.h"
#include "bench_probe.h"
#include "bench_session.h"
#include "peaks.h"

#define MAX_LIST 16

typedef struct BenchOptions {
    ModelKind models[MAX_LIST];
    int n_models;
    Precision precs[MAX_LIST];
    int n_precs;
    int batches[MAX_LIST], n_batches;
    int seqs[MAX_LIST], n_seqs;
    int quick, steps, warmup;       /* -1: the mode's default */
    double time_limit_s;
    int image_size;
    RecomputePolicy recompute;
    int graph_modes;                /* bit 0: eager, bit 1: graph */
    int device_set;
    Device device;
    int device_id;
    int max_batch;
    int list;                       /* --list: print and write the suite, measure nothing */
    double soak_s;
    char soak_csv[512];
    int soak_every;
    char json_path[512];
    int gpus;                       /* --gpus N: the scaling mode (bench_dist.c) */
    DType grad_reduce;              /* --grad-reduce: f32 (default) or bf16 on the N GPUs */
} BenchOptions;

static void usage(void)
{
    printf("usage: ctrain bench [options]\n\n"
           "Measures training throughput on synthetic data: samples/s (median of the timed steps,\n"
           "with min and max), ms per step, peak memory, MFU, power, temperature and clocks.\n\n"
           "suite (default: ResNet50 bs 32,64,256; BERT-base bs 32 seq 128; BERT-large bs 24,32\n"
           "seq 128,512; each in fp32, tf32, fp16 and bf16; every flag narrows it)\n"
           "  --models LIST        comma-separated: resnet50, bert-base, bert-large, any resnet*/bert-*, mlp\n"
           "  --precision LIST     fp32, tf32, fp16, bf16\n"
           "  --batch LIST         batch sizes (replace each model's defaults)\n"
           "  --seq LIST           BERT sequence lengths (replace the defaults)\n"
           "  --quick              ResNet50 bs 64,256 and BERT-large bs 32 seq 128 in bf16 and tf32,\n"
           "                       3 warm-up and 10 timed steps (a few minutes at most)\n"
           "  --steps N            timed steps per config (default 20; --quick 10)\n"
           "  --warmup N           untimed steps first (default 5; --quick 3)\n"
           "  --time-limit S       stop timing a config after S seconds, once 5 steps are done (default 15)\n"
           "  --image-size S       ResNet input side (default 224)\n"
           "  --recompute R        none | all | every:N (default none)\n"
           "  --graph G            on | off | both: capture each step as CUDA graphs (default on;\n"
           "                       'both' runs every config eager and with graphs)\n"
           "  --device D           cpu | cuda | cuda:N (default: cuda when a GPU is found, else a CPU\n"
           "                       bench of small configs)\n"
           "  --list               print the configs the suite would run (steps, warm-up, FLOPs per\n"
           "                       sample) and write them to --json, unmeasured; no device is touched\n"
           "                       (the GPU suite unless --device cpu)\n"
           "other modes\n"
           "  --gpus N             multi-GPU scaling: each config on 1 GPU, then data parallel on N\n"
           "                       (the same batch per GPU); per-GPU and total samples/s and the\n"
           "                       efficiency. Default configs: resnet50 bs 256 and bert-large bs 32\n"
           "                       seq 128, bf16 (the flags above narrow or replace them)\n"
           "  --grad-reduce T      with --gpus: f32 | bf16, the gradient all-reduce's type (default\n"
           "                       f32; bf16 sends half the bytes, see ctrain train --help)\n"
           "  --max-batch          the largest batch that fits, for each model and precision given\n"
           "                       (default resnet50 bf16), without and with --recompute all\n"
           "  --soak DURATION      one config (resnet50 bf16 bs 256 unless narrowed) for DURATION\n"
           "                       (30s, 10m, 72h): a CSV row every few seconds, then a summary\n"
           "  --soak-csv FILE      the soak's rows (default ctrain_soak.csv)\n"
           "  --soak-every N       a soak row every N steps (default: about every 1-10 s)\n"
           "output\n"
           "  --json FILE          the results as JSON (schema ctrain-bench/1; ctrain report reads it)\n"
           "  --help               this text\n");
}

static void bench_fail(const char *fmt, const char *a, const char *b)
{
    char msg[700];
    snprintf(msg, sizeof msg, fmt, a, b);
    ct_fatal_hint("run 'ctrain bench --help' for the options", "%s", msg);
}

static long parse_int(const char *flag, const char *v, long lo, long hi)
{
    char *end, range[64];
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        snprintf(range, sizeof range, "%ld..%ld", lo, hi);
        char msg[600];
        snprintf(msg, sizeof msg, "%s: '%s' is not a whole number in %s", flag, v, range);
        ct_fatal_hint("run 'ctrain bench --help' for the options", "%s", msg);
    }
    return x;
}

/* Split a comma list into items (each shorter than max_len). */
static int split_list(const char *flag, const char *v, char items[][32], int max_len)
{
    char buf[512];
    if (strlen(v) >= sizeof buf) bench_fail("%s: list too long", flag, "");
    snprintf(buf, sizeof buf, "%s", v);
    int n = 0;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (n == MAX_LIST) bench_fail("%s: at most 16 values", flag, "");
        if ((int)strlen(t) >= max_len) bench_fail("%s: '%s' is too long", flag, t);
        snprintf(items[n++], (size_t)max_len, "%s", t);
    }
    if (!n) bench_fail("%s needs at least one value", flag, "");
    return n;
}

/* "30s", "10m", "72h", "1.5h", "90" (seconds) -> seconds; -1 when not a
 * duration. */
static double parse_duration(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0)) return -1;
    double unit = 1;
    if (!strcmp(end, "") || !strcmp(end, "s")) unit = 1;
    else if (!strcmp(end, "m") || !strcmp(end, "min")) unit = 60;
    else if (!strcmp(end, "h")) unit = 3600;
    else if (!strcmp(end, "d")) unit = 86400;
    else return -1;
    return v * unit;
}

static void parse_options(BenchOptions *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->steps = o->warmup = -1;
    o->time_limit_s = 15;
    o->image_size = 224;
    o->graph_modes = 2;
    snprintf(o->soak_csv, sizeof o->soak_csv, "ctrain_soak.csv");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(); exit(0); }
        if (!strcmp(a, "--quick")) { o->quick = 1; continue; }
        if (!strcmp(a, "--max-batch")) { o->max_batch = 1; continue; }
        if (!strcmp(a, "--list")) { o->list = 1; continue; }
        if (strncmp(a, "--", 2) != 0) bench_fail("unexpected argument '%s'", a, "");
        if (i + 1 >= argc) bench_fail("%s needs a value", a, "");
        const char *v = argv[++i];
        char items[MAX_LIST][32];
        if (!strcmp(a, "--models")) {
            o->n_models = split_list(a, v, items, 32);
            for (int k = 0; k < o->n_models; k++) {
                int m = model_kind_parse(items[k]);
                if (m < 0) {
                    char hint[300];
                    snprintf(hint, sizeof hint, "known models: %s", model_kind_list());
                    ct_fatal_hint(hint, "--models: unknown model '%s'", items[k]);
                }
                o->models[k] = (ModelKind)m;
            }
        } else if (!strcmp(a, "--precision")) {
            o->n_precs = split_list(a, v, items, 8);
            for (int k = 0; k < o->n_precs; k++) {
                char low[8];   /* the bench takes FP16 as fp16 */
                int n = 0;
                for (const char *c = items[k]; *c; c++) low[n++] = (char)tolower((unsigned char)*c);
                low[n] = 0;
                int p = precision_parse(low);
                if (p < 0)
                    bench_fail("--precision: '%s' is not " PRECISION_CHOICES, items[k], "");
                o->precs[k] = (Precision)p;
            }
        } else if (!strcmp(a, "--batch") || !strcmp(a, "--seq")) {
            int seq = a[2] == 's';
            int n = split_list(a, v, items, 32);
            for (int k = 0; k < n; k++) {
                if (seq) o->seqs[k] = (int)parse_int(a, items[k], 2, 512);
                else o->batches[k] = (int)parse_int(a, items[k], 1, 1 << 30);
            }
            if (seq) o->n_seqs = n;
            else o->n_batches = n;
        } else if (!strcmp(a, "--steps")) o->steps = (int)parse_int(a, v, 1, 100000);
        else if (!strcmp(a, "--warmup")) o->warmup = (int)parse_int(a, v, 0, 100000);
        else if (!strcmp(a, "--time-limit")) o->time_limit_s = (double)parse_int(a, v, 0, 86400);
        else if (!strcmp(a, "--image-size")) o->image_size = (int)parse_int(a, v, 8, 4096);
        else if (!strcmp(a, "--gpus")) o->gpus = (int)parse_int(a, v, 1, 1024);
        else if (!strcmp(a, "--grad-reduce")) {
            int t = dist_grad_reduce_parse(v);
            if (t < 0) bench_fail("--grad-reduce: '%s' is not f32 or bf16", v, "");
            o->grad_reduce = (DType)t;
        }
        else if (!strcmp(a, "--soak-every")) o->soak_every = (int)parse_int(a, v, 1, INT_MAX);
        else if (!strcmp(a, "--graph")) {
            if (!strcmp(v, "on")) o->graph_modes = 2;
            else if (!strcmp(v, "off")) o->graph_modes = 1;
            else if (!strcmp(v, "both")) o->graph_modes = 3;
            else bench_fail("--graph: '%s' is not on, off or both", v, "");
        } else if (!strcmp(a, "--recompute")) {
            if (recompute_parse(v, &o->recompute) != 0)
                bench_fail("--recompute: '%s' is not none, all or every:N", v, "");
        } else if (!strcmp(a, "--device")) {
            if (ctx_parse_device(v, &o->device, &o->device_id) != 0)
                bench_fail("--device: '%s' is not cpu, cuda or cuda:N", v, "");
            o->device_set = 1;
        } else if (!strcmp(a, "--soak")) {
            o->soak_s = parse_duration(v);
            if (!(o->soak_s > 0))
                bench_fail("--soak: '%s' is not a duration like 30s, 10m or 72h", v, "");
        } else if (!strcmp(a, "--soak-csv") || !strcmp(a, "--json")) {
            char *dst = a[2] == 'j' ? o->json_path : o->soak_csv;
            if (strlen(v) >= sizeof o->json_path) bench_fail("%s: path too long", a, "");
            snprintf(dst, sizeof o->json_path, "%s", v);
        } else {
            bench_fail("unknown option '%s'", a, "");
        }
    }
    if (o->max_batch && o->soak_s > 0) bench_fail("--max-batch and --soak: choose one", "", "");
    if (o->list && (o->max_batch || o->soak_s > 0))
        bench_fail("--list shows the throughput suite: drop %s", o->max_batch ? "--max-batch" : "--soak", "");
    if (o->gpus > 1 && (o->max_batch || o->soak_s > 0))
        bench_fail("--gpus measures the suite's configs; drop --max-batch / --soak", "", "");
    if (o->gpus > 1 && o->device_set && o->device == DEV_CPU)
        bench_fail("--gpus needs CUDA devices; drop --device cpu", "", "");
    if (o->grad_reduce != DT_F32 && o->gpus <= 1)
        bench_fail("--grad-reduce %s is for the multi-GPU scaling: add --gpus N (N > 1)",
                   dtype_name(o->grad_reduce), "");
}

/* ---- The suite. */

/* Default batches and sequence lengths of a model in the chosen suite. */
static void model_defaults(ModelKind m, int cpu, int quick, int *b, int *nb, int *sq, int *ns)
{
    *nb = *ns = 0;
    int resnet = model_kind_is_resnet(m), bert = model_kind_is_bert(m);
    if (cpu && m == MODEL_MLP) b[(*nb)++] = 64;
    else if (cpu && resnet) b[(*nb)++] = 8;
    else if (cpu && bert) { b[(*nb)++] = 4; sq[(*ns)++] = 32; }
    else if (m == MODEL_RESNET50 && !quick) { b[0] = 32; b[1] = 64; b[2] = 256; *nb = 3; }
    else if (resnet) { b[0] = 64; b[1] = 256; *nb = 2; }
    else if (m == MODEL_BERT_LARGE && !quick) {
        b[0] = 24; b[1] = 32; *nb = 2;
        sq[0] = 128; sq[1] = 512; *ns = 2;
    } else if (bert) { b[(*nb)++] = 32; sq[(*ns)++] = 128; }
    else b[(*nb)++] = 64;
}

static void config_base(BenchConfig *c, const BenchOptions *o, int cpu)
{
    memset(c, 0, sizeof *c);
    c->device = cpu ? DEV_CPU : DEV_CUDA;
    c->device_id = o->device_id;
    c->recompute = o->recompute;
    c->warmup = o->warmup >= 0 ? o->warmup : cpu ? (o->quick ? 1 : 2) : (o->quick ? 3 : 5);
    c->steps = o->steps > 0 ? o->steps : cpu ? (o->quick ? 3 : 10) : (o->quick ? 10 : 20);
    c->min_steps = 5;
    c->min_time_s = cpu ? 0 : 2;
    c->time_limit_s = o->time_limit_s;
    c->grad_reduce = o->grad_reduce;
}

static int build_suite(const BenchOptions *o, int cpu, BenchConfig **out)
{
    static const ModelKind gpu_models[] = {MODEL_RESNET50, MODEL_BERT_BASE, MODEL_BERT_LARGE};
    static const ModelKind quick_models[] = {MODEL_RESNET50, MODEL_BERT_LARGE};
    static const ModelKind cpu_models[] = {MODEL_MLP, MODEL_RESNET18, MODEL_BERT_TINY};
    static const Precision quick_precs[] = {PREC_BF16, PREC_TF32};
    ModelKind models[MAX_LIST];
    Precision precs[MAX_LIST];
    int nm = 0, np = 0;
    if (o->n_models) for (int i = 0; i < o->n_models; i++) models[nm++] = o->models[i];
    else if (cpu) for (int i = 0; i < 3; i++) models[nm++] = cpu_models[i];
    else if (o->quick) for (int i = 0; i < 2; i++) models[nm++] = quick_models[i];
    else for (int i = 0; i < 3; i++) models[nm++] = gpu_models[i];
    if (o->n_precs) for (int i = 0; i < o->n_precs; i++) precs[np++] = o->precs[i];
    else if (cpu) precs[np++] = PREC_FP32;
    else if (o->quick) for (int i = 0; i < 2; i++) precs[np++] = quick_precs[i];
    else for (int i = 0; i < PREC_COUNT; i++) precs[np++] = (Precision)i;   /* fp32, tf32, fp16, bf16 */

    int cap = 16, n = 0;
    BenchConfig *v = (BenchConfig *)malloc((size_t)cap * sizeof *v);
    for (int mi = 0; mi < nm; mi++) {
        int b[MAX_LIST], sq[MAX_LIST], nb, ns;
        model_defaults(models[mi], cpu, o->quick, b, &nb, sq, &ns);
        int bert = model_kind_is_bert(models[mi]);
        if (o->n_batches) { nb = o->n_batches; memcpy(b, o->batches, sizeof(int) * (size_t)nb); }
        if (bert && o->n_seqs) { ns = o->n_seqs; memcpy(sq, o->seqs, sizeof(int) * (size_t)ns); }
        if (!bert) { ns = 1; sq[0] = 0; }
        int gmodes = cpu ? 1 : o->graph_modes;   /* graphs are a CUDA feature */
        for (int pi = 0; pi < np; pi++)
            for (int si = 0; si < ns; si++)
                for (int bi = 0; bi < nb; bi++)
                    for (int g = 0; g < 2; g++) {
                        if (!(gmodes & (1 << g))) continue;
                        if (n == cap) v = (BenchConfig *)realloc(v, (size_t)(cap *= 2) * sizeof *v);
                        if (!v) ct_fatal("out of host memory");
                        BenchConfig *c = &v[n++];
                        config_base(c, o, cpu);
                        bench_config_model(c, models[mi], o->image_size, cpu);
                        c->precision = precs[pi];
                        c->batch = b[bi];
                        c->seq = sq[si];
                        c->graph = g;
                    }
    }
    *out = v;
    return n;
}

/* ---- Session start: the probe, the header. */

static void command_line(char *buf, size_t len, int argc, char **argv)
{
    size_t n = (size_t)snprintf(buf, len, "ctrain bench");
    for (int i = 0; i < argc && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, strchr(argv[i], ' ') ? " '%s'" : " %s", argv[i]);
}

static void probe_on_line(const char *line, void *user) { bench_probe_read((BenchProbe *)user, line); }

/* Run the probe; returns 1 when the suite runs on the GPU. */
static int session_probe(BenchSession *s, const BenchOptions *o, int want_ceilings)
{
    BenchProbe *p = &s->probe;
    memset(p, 0, sizeof *p);
    p->machine.gpu_memory_bytes = -1;
    p->machine.gpu_count = -1;
    p->cuda_devices = -1;
    BenchProbeArgs a = {o->device_set ? o->device : DEV_CUDA, o->device_id, !o->device_set,
                        want_ceilings};
    if (s->tty) {
        printf("ctrain bench: probing the machine%s ...", want_ceilings ? " and measuring the matmul ceilings" : "");
        fflush(stdout);
    }
    BenchExit ex;
    int rc = bench_child_run(bench_child_probe, &a, 300, probe_on_line, NULL, p, &ex);
    if (s->tty) { printf("\r\033[K"); fflush(stdout); }
    if (rc != 0) {
        char why[256];
        bench_exit_reason(&ex, why, sizeof why);
        ct_error("the machine probe failed (%s); continuing with what it reported", why);
    }
    int gpu = p->cuda_devices > 0;
    if (o->device_set && o->device == DEV_CUDA) {
        if (!gpu)
            ct_fatal_hint("pass --device cpu for the CPU bench", "--device cuda: no CUDA device (%s)",
                          p->no_gpu_reason[0] ? p->no_gpu_reason : "the probe failed");
        if (o->device_id >= p->cuda_devices)
            ct_fatal_hint("list devices with: ctrain info", "cuda:%d does not exist (%d device%s)",
                          o->device_id, p->cuda_devices, p->cuda_devices == 1 ? "" : "s");
    }
    return o->device_set ? o->device == DEV_CUDA : gpu;
}

static void print_header(const BenchSession *s, const BenchOptions *o, int gpu, const BenchConfig *c)
{
    const BenchMachine *m = &s->probe.machine;
    const BenchProbe *p = &s->probe;
    char rev[80] = "";
    if (m->ctrain_revision[0]) snprintf(rev, sizeof rev, ", ctrain %s", m->ctrain_revision);
    if (gpu) {
        printf("ctrain bench on %s (%.1f GiB), driver %s, CUDA %s, cuDNN %s, cuBLASLt %s%s\n",
               m->gpu_name[0] ? m->gpu_name : "an unknown GPU",
               m->gpu_memory_bytes > 0 ? (double)m->gpu_memory_bytes / (1024.0 * 1024 * 1024) : 0.0,
               m->driver[0] ? m->driver : "unknown", m->cuda_runtime[0] ? m->cuda_runtime : "?",
               m->cudnn[0] ? m->cudnn : "?", m->cublas[0] ? m->cublas : "?", rev);
        printf("settings: synthetic data on the device; %s; ResNets NHWC\n",
               o->graph_modes == 3 ? "every config eager and with the step captured as CUDA graphs"
               : o->graph_modes == 2 ? "the step captured as CUDA graphs during warm-up (mode graph)"
                                     : "eager steps");
        if (p->nvml) printf("NVML: power, temperature and SM clock sampled every 50 ms over the timed steps\n");
        else printf("NVML: not available (%s): power, temperature and clocks not measured\n",
                    p->nvml_reason[0] ? p->nvml_reason : "unknown reason");
        double peak = peaks_tflops(m->gpu_name, precision_name(PREC_BF16));
        if (!isfinite(peak))
            printf("peaks: '%s' is not in the peak table (train/bench/peaks.c): MFU%% is absent, ceil%% "
                   "(over the measured matmul) remains\n", m->gpu_name);
    } else {
        printf("ctrain bench on the CPU: %s — %s\n", m->cpu[0] ? m->cpu : "unknown CPU",
               o->device_set ? "--device cpu" : p->no_gpu_reason[0] ? p->no_gpu_reason : "no GPU");
        printf("settings: CPU backend (reference kernels, OpenMP), small configs; these are CPU "
               "figures, not a GPU's%s\n", rev);
    }
    if (o->recompute.every)
    {
        char pol[32] = "all";
        if (o->recompute.every > 1) snprintf(pol, sizeof pol, "every:%d", o->recompute.every);
        printf("recompute: %s (a recomputed block or layer re-runs its forward in backward; the JSON "
               "mode names it)\n", pol);
    }
    if (c) {
        char more[96] = "";
        if (c->min_time_s > 0)
            snprintf(more, sizeof more, ", more until %.0f s have passed (NVML averages power over ~1 s)",
                     c->min_time_s);
        printf("method: %d warm-up step%s, then the median of %d timed step%s%s; timing stops after "
               "%.0f s once %d are done; %s\n", c->warmup, c->warmup == 1 ? "" : "s", c->steps,
               c->steps == 1 ? "" : "s", more, c->time_limit_s,
               c->min_steps < c->steps ? c->min_steps : c->steps,
               gpu ? "each step between two CUDA events" : "each step timed by the host clock");
    }
    if (p->n_ceilings) {
        printf("matmul ceilings (%s, median of %d):", gpu ? "cuBLASLt" : "CPU reference", p->ceiling_reps);
        for (int i = 0; i < p->n_ceilings; i++) {
            double tf = p->ceilings[i].tflops;
            printf("%s %s %.1f %s (%.3f ms)", i ? "," : "", p->ceilings[i].name + 7, tf >= 1 ? tf : tf * 1e3,
                   tf >= 1 ? "TFLOP/s" : "GFLOP/s", p->ceiling_ms[i]);
        }
        printf("\n");
    } else if (gpu) {
        printf("matmul ceilings: not measured (%s)\n", o->max_batch || o->soak_s > 0 ? "not used by this mode" : "the probe failed");
    }
    fflush(stdout);
}

/* ---- The command. */

/* --list: the suite's configs, unmeasured (scripts/torch_bench.py --dry-run
 * writes the same rows: its self-check compares the two files). Nothing
 * here touches CUDA or NVML, so the machine block stays empty. */
static int list_suite(BenchSession *s, const BenchOptions *o)
{
    int gpu = !(o->device_set && o->device == DEV_CPU);
    s->probe.machine.gpu_memory_bytes = -1;   /* unknown: absent from the JSON */
    s->probe.machine.gpu_count = -1;
    BenchConfig *cfgs;
    int n = build_suite(o, !gpu, &cfgs);
    printf("ctrain bench --list: the %s suite, %d config%s (nothing is measured)\n", gpu ? "GPU" : "CPU", n,
           n == 1 ? "" : "s");
    printf("%-40s %6s %6s %16s\n", "config", "warmup", "steps", "GFLOP/sample");
    for (int i = 0; i < n; i++) {
        char label[96];
        BenchRow row;
        bench_row_init(&row, &cfgs[i]);
        row.r.steps = cfgs[i].steps;
        row.r.flops_per_sample = bench_config_flops(&cfgs[i]);
        if (!(row.r.flops_per_sample > 0)) row.r.flops_per_sample = NAN;
        printf("%-40s %6d %6d %16.4f\n", bench_config_label(&cfgs[i], label, sizeof label), cfgs[i].warmup,
               cfgs[i].steps, row.r.flops_per_sample / 1e9);
        bench_session_add(s, &row);
    }
    bench_session_write_json(s);
    if (s->json_path[0]) printf("wrote %s\n", s->json_path);
    free(cfgs);
    return 0;
}

static int run_suite(BenchSession *s, const BenchOptions *o, int gpu)
{
    BenchConfig *cfgs;
    int n = build_suite(o, !gpu, &cfgs);
    print_header(s, o, gpu, n ? &cfgs[0] : NULL);
    bench_table_header(gpu);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "[%d/%d]", i + 1, n);
        BenchRow row;
        bench_run_config(s, &cfgs[i], &row, prefix);
        bench_session_add(s, &row);
        bench_table_row(&row);
        failed += row.error[0] != 0;
        bench_session_write_json(s);
    }
    char t[32];
    printf("%d config%s in %s%s", n, n == 1 ? "" : "s", progress_fmt_time(t, sizeof t, progress_now() - s->t0),
           failed ? "" : "\n");
    if (failed) printf(", %d with an error (the error column says which)\n", failed);
    if (s->json_path[0]) printf("wrote %s\n", s->json_path);
    free(cfgs);
    return 0;
}

/* --gpus N: resnet50 bs 256 and bert-large bs 32 seq 128 in bf16 unless the
 * flags say otherwise; the largest batch only when no --batch was given. */
static int run_scaling(BenchSession *s, BenchOptions *o, int gpu)
{
    if (!gpu)
        ct_fatal_hint("run it on a machine with several GPUs (and the CUDA build)",
                      "bench --gpus %d: no CUDA device", o->gpus);
    if (o->gpus > s->probe.cuda_devices)
        ct_fatal_hint("pass --gpus at most the number of GPUs (CUDA_VISIBLE_DEVICES may hide some)",
                      "bench --gpus %d: this machine shows %d GPU%s", o->gpus,
                      s->probe.cuda_devices, s->probe.cuda_devices == 1 ? "" : "s");
    if (!o->n_models) {
        o->models[0] = MODEL_RESNET50;
        o->models[1] = MODEL_BERT_LARGE;
        o->n_models = 2;
    }
    if (!o->n_precs) {
        o->precs[0] = PREC_BF16;
        o->n_precs = 1;
    }
    int user_batches = o->n_batches > 0;
    o->quick = 1;   /* the quick suite's timing and defaults: bs 64, 256 / 32, seq 128 */
    BenchConfig *cfgs;
    int n = build_suite(o, 0, &cfgs), k = 0;
    for (int i = 0; i < n; i++) {   /* without --batch: the largest default batch of each */
        int keep = 1;
        for (int j = 0; j < n && !user_batches; j++)
            if (j != i && cfgs[j].model == cfgs[i].model &&
                cfgs[j].precision == cfgs[i].precision && cfgs[j].seq == cfgs[i].seq &&
                cfgs[j].batch > cfgs[i].batch)
                keep = 0;
        if (keep) cfgs[k++] = cfgs[i];
    }
    print_header(s, o, gpu, k ? &cfgs[0] : NULL);
    int rc = bench_scaling(s, cfgs, k, o->gpus);
    if (s->json_path[0]) printf("wrote %s\n", s->json_path);
    free(cfgs);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    BenchOptions o;
    parse_options(&o, argc, argv);
    BenchSession s;
    memset(&s, 0, sizeof s);
    s.tty = isatty(STDOUT_FILENO);
    s.t0 = progress_now();
    s.json_path = o.json_path;
    command_line(s.command, sizeof s.command, argc, argv);
    if (o.json_path[0]) {   /* fail now, not after an hour of measuring */
        int existed = access(o.json_path, F_OK) == 0;
        FILE *f = fopen(o.json_path, "a");
        if (!f)
            ct_fatal_hint("check that the folder exists and is writable", "cannot write %s: %s",
                          o.json_path, strerror(errno));
        fclose(f);
        if (!existed) unlink(o.json_path);
    }
    if (o.list) {
        int rc = list_suite(&s, &o);
        free(s.rows);
        return rc;
    }
    int gpu = session_probe(&s, &o, !o.max_batch && o.soak_s <= 0);
    int rc;
    if (o.max_batch || o.soak_s > 0) {
        /* one config: the first of each list, else resnet50 bf16 (the CPU: the MLP in fp32) at
         * the model's largest default batch */
        BenchConfig base;
        config_base(&base, &o, !gpu);
        ModelKind model = o.n_models ? o.models[0] : gpu ? MODEL_RESNET50 : MODEL_MLP;
        bench_config_model(&base, model, o.image_size, !gpu);
        base.precision = o.n_precs ? o.precs[0] : gpu ? PREC_BF16 : PREC_FP32;
        int b[MAX_LIST], sq[MAX_LIST], nb, ns;
        model_defaults(model, !gpu, 0, b, &nb, sq, &ns);
        base.batch = o.n_batches ? o.batches[0] : b[nb - 1];
        base.seq = !model_kind_is_bert(model) ? 0 : o.n_seqs ? o.seqs[0] : ns ? sq[0] : 128;
        print_header(&s, &o, gpu, NULL);
        if (o.max_batch) {
            base.batch = o.n_batches ? o.batches[0] : 0;
            base.image_size = o.image_size;
            /* every model and precision given, else the one config's */
            rc = bench_max_batch(&s, &base, o.n_models ? o.models : &model, o.n_models ? o.n_models : 1,
                                 o.n_precs ? o.precs : &base.precision, o.n_precs ? o.n_precs : 1);
        } else {
            base.soak_s = o.soak_s;
            base.soak_every = o.soak_every;
            base.soak_interval_s = fmin(10.0, fmax(1.0, o.soak_s / 100.0));
            rc = bench_soak(&s, &base, o.soak_csv);
        }
    } else if (o.gpus > 1) {
        rc = run_scaling(&s, &o, gpu);
    } else {
        rc = run_suite(&s, &o, gpu);
    }
    free(s.rows);
    return rc;
}
