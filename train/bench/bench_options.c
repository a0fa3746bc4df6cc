/* bench_options.c — `ctrain bench`'s options, their usage text and their
 * parser (bench_options.h), on the strict getopt_long loop (cli_opts.h).
 */
#include "bench_options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "train/parallel/dist_env.h"

static void usage(void)
{
    printf("usage: ctrain bench [options]\n\n"
           "Measures training throughput on synthetic data (and with --data beside it, on a folder of\n"
           "JPEGs): samples/s (median of the timed steps, with min and max), ms per step, peak\n"
           "memory, MFU, power, temperature and clocks.\n\n"
           "suite (default: ResNet50 bs 32,64,256; BERT-base bs 32 seq 128; BERT-large bs 24,32\n"
           "seq 128,512 and bs 256 seq 128 (DLE's); each in fp32, tf32, fp16 and bf16; every flag\n"
           "narrows it)\n"
           "  --models LIST        comma-separated: resnet50, bert-base, bert-large, any resnet*/bert-*, mlp\n"
           "  --precision LIST     fp32, tf32, fp16, bf16, fp8 (BERT only; not in the default suite)\n"
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
           "real data\n"
           "  --data DIR           an ImageFolder (DIR/CLASS/*.jpg): after each ResNet config's synthetic\n"
           "                       row a real-data row, same window (at least 8 timed steps for both):\n"
           "                       samples/s, data-wait %%, decode img/s and capacity, CPU fallbacks\n"
           "  --decode LIST        auto | cpu | gpu, or a list (cpu,gpu: a real-data row each;\n"
           "                       default auto, the feed's own choice)\n"
           "  --workers N          loader threads of the real-data rows (default: every logical CPU)\n"
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
           "  --help               this text\n\n"
           "Each row has the median step time (ms p50) and the 99th percentile (ms p99); a row whose\n"
           "model is not the named one says so (the CPU bench's resnet18 is at width 16). The JSON's\n"
           "machine record keeps what the figures were measured under: ECC, persistence mode, the\n"
           "power limit and the card's default, the PCIe link (at the start, under load, its maximum),\n"
           "NVLinks up, other processes on the GPU, the host's load average at the start and the end,\n"
           "the CPUs. What can bias the figures is printed as 'bench: warning: ...' and kept in it:\n"
           "other GPU processes, host load, a power limit below the default, a PCIe link below its\n"
           "maximum under load; ECC on and persistence mode off are notes.\n\n"
           "Exit status: 1 when a config failed other than by running out of memory (a crash, a kill,\n"
           "a time-out, an error; the end lists them), else 0: an out-of-memory row is an answer.\n");
}

#define bench_fail(...) cli_fail("bench", __VA_ARGS__)

static long parse_int(const char *flag, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi)
        bench_fail("%s: '%s' is not a whole number in %ld..%ld", flag, v, lo, hi);
    return x;
}

/* Split a comma list into items (each shorter than max_len). */
static int split_list(const char *flag, const char *v, char items[][32], int max_len)
{
    char buf[512];
    if (strlen(v) >= sizeof buf) bench_fail("%s: list too long", flag);
    snprintf(buf, sizeof buf, "%s", v);
    int n = 0;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (n == BENCH_MAX_LIST) bench_fail("%s: at most 16 values", flag);
        if ((int)strlen(t) >= max_len) bench_fail("%s: '%s' is too long", flag, t);
        snprintf(items[n++], (size_t)max_len, "%s", t);
    }
    if (!n) bench_fail("%s needs at least one value", flag);
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

enum {
    B_MODELS = 256, B_PRECISION, B_BATCH, B_SEQ, B_QUICK, B_STEPS, B_WARMUP, B_TIME_LIMIT,
    B_IMAGE_SIZE, B_RECOMPUTE, B_GRAPH, B_DEVICE, B_LIST, B_DATA, B_DECODE, B_WORKERS, B_GPUS,
    B_GRAD_REDUCE, B_MAX_BATCH, B_SOAK, B_SOAK_CSV, B_SOAK_EVERY, B_JSON
};

/* The flags of usage() above, in its order. */
static const struct option bench_table[] = {
    CLI_VALUE("models", B_MODELS), CLI_VALUE("precision", B_PRECISION), CLI_VALUE("batch", B_BATCH),
    CLI_VALUE("seq", B_SEQ), CLI_SWITCH("quick", B_QUICK), CLI_VALUE("steps", B_STEPS),
    CLI_VALUE("warmup", B_WARMUP), CLI_VALUE("time-limit", B_TIME_LIMIT),
    CLI_VALUE("image-size", B_IMAGE_SIZE), CLI_VALUE("recompute", B_RECOMPUTE),
    CLI_VALUE("graph", B_GRAPH), CLI_VALUE("device", B_DEVICE), CLI_SWITCH("list", B_LIST),
    CLI_VALUE("data", B_DATA), CLI_VALUE("decode", B_DECODE), CLI_VALUE("workers", B_WORKERS),
    CLI_VALUE("gpus", B_GPUS), CLI_VALUE("grad-reduce", B_GRAD_REDUCE),
    CLI_SWITCH("max-batch", B_MAX_BATCH), CLI_VALUE("soak", B_SOAK), CLI_VALUE("soak-csv", B_SOAK_CSV),
    CLI_VALUE("soak-every", B_SOAK_EVERY), CLI_VALUE("json", B_JSON), CLI_HELP, {0}};

/* --models and --precision: the lists, each name checked. */
static void bench_lists(BenchOptions *o, int val, const char *a, const char *v)
{
    char items[BENCH_MAX_LIST][32];
    if (val == B_MODELS) {
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
        return;
    }
    o->n_precs = split_list(a, v, items, 8);
    for (int k = 0; k < o->n_precs; k++) {
        char low[8];   /* the bench takes FP16 as fp16 */
        int n = 0;
        for (const char *c = items[k]; *c; c++) low[n++] = (char)tolower((unsigned char)*c);
        low[n] = 0;
        int p = precision_parse(low);
        if (p < 0) bench_fail("--precision: '%s' is not " PRECISION_CHOICES, items[k]);
        o->precs[k] = (Precision)p;
    }
}

/* One flag a of bench_table (v: its value). */
static void bench_option(BenchOptions *o, int val, const char *a, const char *v)
{
    char items[BENCH_MAX_LIST][32];
    switch (val) {
    case B_QUICK: o->quick = 1; break;
    case B_MAX_BATCH: o->max_batch = 1; break;
    case B_LIST: o->list = 1; break;
    case B_MODELS: case B_PRECISION: bench_lists(o, val, a, v); break;
    case B_BATCH: case B_SEQ: {
        int n = split_list(a, v, items, 32);
        for (int k = 0; k < n; k++) {
            if (val == B_SEQ) o->seqs[k] = (int)parse_int(a, items[k], 2, 512);
            else o->batches[k] = (int)parse_int(a, items[k], 1, 1 << 30);
        }
        if (val == B_SEQ) o->n_seqs = n;
        else o->n_batches = n;
        break;
    }
    case B_STEPS: o->steps = (int)parse_int(a, v, 1, 100000); break;
    case B_WARMUP: o->warmup = (int)parse_int(a, v, 0, 100000); break;
    case B_TIME_LIMIT: o->time_limit_s = (double)parse_int(a, v, 0, 86400); break;
    case B_IMAGE_SIZE: o->image_size = (int)parse_int(a, v, 8, 4096); break;
    case B_GPUS: o->gpus = (int)parse_int(a, v, 1, 1024); break;
    case B_DATA: bench_data_parse_dir(&o->data, v); break;
    case B_DECODE: bench_data_parse_decode(&o->data, v); o->decode_set = 1; break;
    case B_WORKERS: o->data.workers = (int)parse_int(a, v, 1, 256); o->workers_set = 1; break;
    case B_GRAD_REDUCE: {
        int t = dist_grad_reduce_parse(v);
        if (t < 0) bench_fail("--grad-reduce: '%s' is not f32 or bf16", v);
        o->grad_reduce = (DType)t;
        break;
    }
    case B_SOAK_EVERY: o->soak_every = (int)parse_int(a, v, 1, INT_MAX); break;
    case B_GRAPH:
        if (!strcmp(v, "on")) o->graph_modes = 2;
        else if (!strcmp(v, "off")) o->graph_modes = 1;
        else if (!strcmp(v, "both")) o->graph_modes = 3;
        else bench_fail("--graph: '%s' is not on, off or both", v);
        break;
    case B_RECOMPUTE:
        if (recompute_parse(v, &o->recompute) != 0)
            bench_fail("--recompute: '%s' is not none, all or every:N", v);
        break;
    case B_DEVICE:
        if (ctx_parse_device(v, &o->device, &o->device_id) != 0)
            bench_fail("--device: '%s' is not cpu, cuda or cuda:N", v);
        o->device_set = 1;
        break;
    case B_SOAK:
        o->soak_s = parse_duration(v);
        if (!(o->soak_s > 0)) bench_fail("--soak: '%s' is not a duration like 30s, 10m or 72h", v);
        break;
    case B_SOAK_CSV: case B_JSON: {
        char *dst = val == B_JSON ? o->json_path : o->soak_csv;
        if (strlen(v) >= sizeof o->json_path) bench_fail("%s: path too long", a);
        snprintf(dst, sizeof o->json_path, "%s", v);
        break;
    }
    }
}

void bench_options_parse(BenchOptions *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->steps = o->warmup = -1;
    o->time_limit_s = 15;
    o->image_size = 224;
    o->graph_modes = 2;
    snprintf(o->soak_csv, sizeof o->soak_csv, "ctrain_soak.csv");
    CliOpts p;
    cli_begin(&p, "bench", bench_table, argc, argv);
    for (int val; (val = cli_next(&p)) != -1;) {
        if (val == 'h') { usage(); exit(0); }
        if (val == '?' || val == CLI_WORD) cli_refuse(&p);
        bench_option(o, val, p.flag, p.value);
    }
    if (o->max_batch && o->soak_s > 0) bench_fail("--max-batch and --soak: choose one");
    if ((o->decode_set || o->workers_set) && !o->data.dir[0])
        bench_fail("%s sets the real-data rows: add --data DIR", o->decode_set ? "--decode" : "--workers");
    if (o->data.dir[0] && (o->max_batch || o->soak_s > 0 || o->gpus > 1))
        bench_fail("--data adds real-data rows to the throughput suite: drop %s",
                   o->max_batch ? "--max-batch" : o->soak_s > 0 ? "--soak" : "--gpus");
    if (o->list && (o->max_batch || o->soak_s > 0))
        bench_fail("--list shows the throughput suite: drop %s", o->max_batch ? "--max-batch" : "--soak");
    if (o->gpus > 1 && (o->max_batch || o->soak_s > 0))
        bench_fail("--gpus measures the suite's configs; drop --max-batch / --soak");
    if (o->gpus > 1 && o->device_set && o->device == DEV_CPU)
        bench_fail("--gpus needs CUDA devices; drop --device cpu");
    if (o->grad_reduce != DT_F32 && o->gpus <= 1)
        bench_fail("--grad-reduce %s is for the multi-GPU scaling: add --gpus N (N > 1)",
                   dtype_name(o->grad_reduce));
}
