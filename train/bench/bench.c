/* bench.c — `ctrain bench`: the suite, the header, the command (the options:
 * bench_options.c).
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
 * --data DIR adds a real-data row after each image config (bench_data.h).
 *
 * Every config runs in its own child process (bench.h says why); its row is
 * printed as soon as it is done, under a progress line on a terminal, and the
 * --json file is rewritten after each config, so an interrupted run keeps
 * what it measured. The header ends with the warnings and notes about the
 * run's conditions (bench_conditions.h); those only the end can judge (the
 * load average then, the PCIe link under load) follow the last row. The exit
 * status is 1 when a config failed other than by running out of memory (a
 * crash, a kill, a time-out, an error), and the end lists them; an
 * out-of-memory row is an answer about the card and keeps the status 0.
 */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "engine/error.h"
#include "train/loop/progress.h"
#include "bench_conditions.h"
#include "bench_data.h"
#include "bench_dist.h"
#include "bench_modes.h"
#include "bench_options.h"
#include "bench_probe.h"
#include "bench_session.h"
#include "peaks.h"

/* ---- The suite. */

/* The batch NVIDIA's DLE BERT-large pre-training runs at sequence 128: the
 * full GPU suite adds it to BERT-large's seq-128 configs (at 512 it would not
 * fit most cards). */
#define BENCH_BERT_LARGE_DLE_BATCH 256

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
    ModelKind models[BENCH_MAX_LIST];
    Precision precs[BENCH_MAX_LIST];
    int nm = 0, np = 0;
    if (o->n_models) for (int i = 0; i < o->n_models; i++) models[nm++] = o->models[i];
    else if (cpu) for (int i = 0; i < 3; i++) models[nm++] = cpu_models[i];
    else if (o->quick) for (int i = 0; i < 2; i++) models[nm++] = quick_models[i];
    else for (int i = 0; i < 3; i++) models[nm++] = gpu_models[i];
    if (o->n_precs) for (int i = 0; i < o->n_precs; i++) precs[np++] = o->precs[i];
    else if (cpu) precs[np++] = PREC_FP32;
    else if (o->quick) for (int i = 0; i < 2; i++) precs[np++] = quick_precs[i];
    else for (int i = 0; i <= PREC_BF16; i++) precs[np++] = (Precision)i;   /* fp32, tf32, fp16, bf16 */

    int cap = 16, n = 0;
    BenchConfig *v = (BenchConfig *)malloc((size_t)cap * sizeof *v);
    for (int mi = 0; mi < nm; mi++) {
        int b[BENCH_MAX_LIST], sq[BENCH_MAX_LIST], nb, ns;
        model_defaults(models[mi], cpu, o->quick, b, &nb, sq, &ns);
        int bert = model_kind_is_bert(models[mi]);
        if (o->n_batches) { nb = o->n_batches; memcpy(b, o->batches, sizeof(int) * (size_t)nb); }
        if (bert && o->n_seqs) { ns = o->n_seqs; memcpy(sq, o->seqs, sizeof(int) * (size_t)ns); }
        if (!bert) { ns = 1; sq[0] = 0; }
        int gmodes = cpu ? 1 : o->graph_modes;   /* graphs are a CUDA feature */
        const int dle = !cpu && !o->quick && !o->n_batches && !o->n_seqs &&
                        models[mi] == MODEL_BERT_LARGE;
        for (int pi = 0; pi < np; pi++)
            for (int si = 0; si < ns; si++)
                for (int bi = 0; bi < nb + (dle && sq[si] == 128); bi++)
                    for (int g = 0; g < 2; g++) {
                        if (!(gmodes & (1 << g))) continue;
                        if (n == cap) v = (BenchConfig *)realloc(v, (size_t)(cap *= 2) * sizeof *v);
                        if (!v) ct_fatal("out of host memory");
                        BenchConfig *c = &v[n++];
                        config_base(c, o, cpu);
                        bench_config_model(c, models[mi], o->image_size, cpu);
                        c->precision = precs[pi];
                        c->batch = bi < nb ? b[bi] : BENCH_BERT_LARGE_DLE_BATCH;
                        c->seq = sq[si];
                        c->graph = g;
                    }
    }
    *out = v;
    return n;
}

/* ---- Session start: the probe, the header. */

static void probe_on_line(const char *line, void *user) { bench_probe_read((BenchProbe *)user, line); }

/* Run the probe; returns 1 when the suite runs on the GPU. */
static int session_probe(BenchSession *s, const BenchOptions *o, int want_ceilings)
{
    BenchProbe *p = &s->probe;
    memset(p, 0, sizeof *p);
    p->machine.gpu_memory_bytes = -1;
    p->machine.gpu_count = -1;
    p->machine.compute_capability = -1;
    p->cuda_devices = -1;
    bench_conditions_init(&p->machine);   /* the CPUs and the load average, now */
    BenchProbeArgs a = {o->device_set ? o->device : DEV_CUDA, o->device_id, !o->device_set,
                        want_ceilings, o->gpus > 1 ? o->gpus : 1};
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
    gpu = o->device_set ? o->device == DEV_CUDA : gpu;
    bench_conditions_start(&p->machine, gpu);
    return gpu;
}

/* The threads the bench itself keeps busy, for the load average at the end:
 * one per GPU process, every CPU for the CPU bench, and the real-data rows'
 * loader threads. */
static double own_threads(const BenchOptions *o, const BenchMachine *m, int gpu)
{
    double cpus = m->cpu_count > 0 ? m->cpu_count : 1;
    double own = gpu ? (o->gpus > 1 ? o->gpus : 1) : cpus;
    if (o->data.dir[0]) own += o->data.workers > 0 ? o->data.workers : cpus;
    return own;
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
    bench_conditions_print(m, 0, 0, stdout);   /* the start's warnings and notes */
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
    s->probe.machine.compute_capability = -1;
    BenchConfig *cfgs;
    int n = build_suite(o, !gpu, &cfgs);
    n = bench_data_expand(&cfgs, n, &o->data);
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
    if (!gpu)
        for (int i = 0; i < o->data.n_decode; i++)
            if (!strcmp(o->data.decode[i], "gpu"))
                ct_fatal_hint("pass --decode cpu (or auto) for the CPU bench",
                              "--decode gpu: this bench runs on the CPU, with no GPU decoder");
    BenchConfig *cfgs;
    int n = build_suite(o, !gpu, &cfgs);
    n = bench_data_expand(&cfgs, n, &o->data);
    print_header(s, o, gpu, n ? &cfgs[0] : NULL);
    bench_data_print_header(&o->data, cfgs, n);
    bench_table_header(gpu);
    int failed = 0, synth = -1;   /* synth: the row of the last synthetic config */
    for (int i = 0; i < n; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "[%d/%d]", i + 1, n);
        BenchRow row;
        bench_run_config(s, &cfgs[i], &row, prefix);
        bench_session_add(s, &row);
        bench_table_row(&row);
        if (!cfgs[i].data[0]) synth = s->n_rows - 1;
        else bench_data_table_row(&row, synth >= 0 ? &s->rows[synth] : NULL);
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
    bench_options_parse(&o, argc, argv);
    BenchSession s;
    memset(&s, 0, sizeof s);
    s.tty = isatty(STDOUT_FILENO);
    s.t0 = progress_now();
    s.json_path = o.json_path;
    cli_command_line(s.command, sizeof s.command, "bench", argc, argv);
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
        int b[BENCH_MAX_LIST], sq[BENCH_MAX_LIST], nb, ns;
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
    BenchMachine *m = &s.probe.machine;
    int w0 = m->n_warnings, n0 = m->n_notes;
    bench_conditions_end(m, gpu, own_threads(&o, m, gpu));
    bench_conditions_print(m, w0, n0, stdout);
    bench_session_write_json(&s);   /* with the load average at the end */
    /* a config that failed, not for lack of memory, fails the suite (--max-batch: every
     * failed try is an answer; --soak has its own rule) */
    if (!o.max_batch && o.soak_s <= 0 && bench_session_failures(&s)) rc = 1;
    free(s.rows);
    return rc;
}
