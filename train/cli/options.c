/* options.c — strict parsing of the train/eval flags into TrainOptions, with
 * the usage texts: a getopt_long table per command (train_table, eval_table;
 * the loop is train/bench/bench_options.h's cli_next), one handler for both. */
#include "options.h"

#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/log.h"
#include "train/feed/feed.h"
#include "train/bench/bench_options.h"
#include "train/loop/resume_check.h"

/* ctrain eval's own text: the flags that say which model, weights and data. */
static void eval_options_usage(void)
{
    printf("usage: ctrain eval --load FILE [options]\n\n"
           "Top-1 / top-5 accuracy and loss of saved weights on the held-out split.\n\n"
           "  --load FILE          the weights (a ctrain --save file or a PyTorch safetensors)\n"
           "  --model NAME         the model they belong to (default mlp); --hidden, --seq,\n"
           "                       --head, --classes as when it was trained\n"
           "  --data SPEC          fashion-mnist[:DIR] | imagefolder:DIR | DIR (with val/) |\n"
           "                       fortunes-cls[:DIR] (with --vocab FILE)\n"
           "  --image-size S       ResNet input side (default 32 for fashion-mnist, else 224)\n"
           "  --workers N          data loader threads (default 4)\n"
           "  --decode D           auto | gpu | cpu: where an ImageFolder's JPEGs are decoded\n"
           "  --precision P        fp32 | tf32 | fp16 | bf16 | fp8 (default fp32)\n"
           "  --eval-batch N       batch size (default 256)\n"
           "  --json FILE          also write the result as one JSON object (atomically)\n"
           "  --device D           cpu | cuda | cuda:N (default cuda when a GPU is present)\n"
           "  --seed N             seed (default 42)\n"
           "  --help               this text\n"
           "Training flags (--lr, --optim, --steps, --log, --gpus, ...) are refused here.\n");
}

void train_options_usage(const char *cmd)
{
    if (!strcmp(cmd, "eval")) {
        eval_options_usage();
        return;
    }
    printf("usage: ctrain %s [options]\n\n"
           "model and data\n"
           "  --model NAME         mlp | resnet18 | resnet34 | resnet50 | resnet101 | resnet152 |\n"
           "                       bert-tiny | bert-mini | bert-small | bert-medium | bert-base | bert-large\n"
           "                       (default mlp)\n"
           "  --data SPEC          fashion-mnist | fashion-mnist:DIR | synthetic | imagefolder:DIR | DIR\n"
           "                       | mlm:SHARD (BERT masked LM on a token shard; see ctrain shard)\n"
           "                       | fortunes-cls[:DIR] (BERT topic classification of the fortunes\n"
           "                       package; --classes N largest topics, default 4; needs --vocab)\n"
           "                       (an ImageFolder root: DIR/CLASS/*.jpg|png; with train/ and val/\n"
           "                       subfolders those are used) (default fashion-mnist)\n"
           "  --image-size S       input side for ResNets (default 32 for fashion-mnist, 224 otherwise)\n"
           "  --classes N          classes for synthetic data (default 1000)\n"
           "  --workers N          data loader threads (default 4)\n"
           "  --decode D           auto | gpu | cpu: where an ImageFolder's JPEGs are decoded\n"
           "                       (gpu: nvJPEG on the device; cpu: libjpeg-turbo in the loader\n"
           "                       threads; auto: gpu on a CUDA device with nvJPEG, else cpu)\n"
           "  --hidden W1,W2,...   MLP hidden widths (default 512,256)\n"
           "  --seq T              BERT tokens per sequence (default 128)\n"
           "  --vocab FILE         BERT vocabulary (vocab.txt) for mlm:SHARD and fortunes-cls data\n"
           "  --head H             BERT head: mlm | cls (default cls on fortunes-cls, else mlm);\n"
           "                       --load of an MLM file into cls keeps the encoder, new pooler\n"
           "                       and classifier\n"
           "  --zero-init-residual start each residual block's last BN gamma at 0\n"
           "  --dropout P          BERT dropout (hidden and attention; default 0.1; 0 for exact\n"
           "                       comparisons between runs); drawn in steps of 1/256, rounded\n"
           "                       up (0.1 drops 26/256, the rest scaled by 256/230)\n"
           "steps\n"
           "  --epochs N           passes over the training set (default 1)\n"
           "  --steps N            stop after N optimizer steps instead of whole epochs\n"
           "  --batch N            samples per micro-batch (default 64)\n"
           "  --accum K            micro-batches per optimizer step (default 1)\n"
           "optimizer\n"
           "  --optim NAME         sgd | adamw | lamb (default sgd)\n"
           "  --lr X               peak learning rate (default 0.05)\n"
           "  --momentum X         SGD momentum (default 0.9)\n"
           "  --nesterov           Nesterov momentum\n"
           "  --wd X               weight decay (default 0)\n"
           "  --no-wd-bn-bias      no weight decay on batch-norm parameters and biases\n"
           "  --schedule S         constant | cosine | linear | poly | step (default constant)\n"
           "  --warmup N           linear warm-up steps (default 0)\n"
           "  --final-lr X         learning rate at the end of a decay (default 0)\n"
           "  --clip X             clip gradients to global norm X (default off)\n"
           "  --label-smoothing X  label smoothing in the loss (default 0)\n"
           "precision and memory\n"
           "  --precision P        fp32 | tf32 | fp16 | bf16 | fp8 (default fp32); fp8: bf16 with\n"
           "                       BERT's encoder Linear layers in FP8 (sm_89 and later)\n"
           "  --recompute R        none | all | every:N (default none)\n"
           "  --graph              capture the step as CUDA graphs after warm-up and replay it\n"
           "                       (one launch per micro-batch instead of thousands)\n"
           "  --graph-warmup N     eager steps before the capture (default 3)\n"
           "files\n"
           "  --save FILE          write the weights (safetensors, PyTorch names) at the end\n"
           "  --save-every N       make --save a training checkpoint (weights, optimizer, scaler,\n"
           "                       data position), written every N steps and at the end\n"
           "  --resume FILE        continue from a --save-every checkpoint: the remaining steps\n"
           "                       repeat an uninterrupted run (same flags, same --steps); a flag\n"
           "                       that defines the run (--lr, --steps, --data, ...) and differs\n"
           "                       from the checkpoint's is refused\n"
           "  --resume-change F,.. let these flags differ from the checkpoint's on purpose (e.g.\n"
           "                       steps,lr; each said as a warning)\n"
           "  --load FILE          start from these weights (a ctrain or PyTorch safetensors file)\n"
           "  --log FILE           one JSON object per line: steps and the final evaluation\n"
           "  --log-every N        progress/log interval in steps (default 50)\n"
           "multi-GPU (data parallel over NCCL; README \"Multi-GPU\")\n"
           "  --gpus N             one process per GPU on this machine, each with --batch samples\n"
           "                       (several machines: mpirun or the CTRAIN_* variables)\n"
           "  --bucket-mb X        gradient all-reduce bucket size in MB (default: 1/12 of the\n"
           "                       gradients, 25 to 100 MB; 0: one all-reduce after backward)\n"
           "  --sync-bn            batch norm statistics over all GPUs' batches (default: per GPU)\n"
           "  --grad-reduce T      f32 | bf16: the gradient all-reduce's type (default f32; bf16\n"
           "                       sends half the bytes, each rank's gradient rounded to bf16\n"
           "                       before the average; the optimizer still sees f32)\n"
           "  --dist-timeout S     a rank stops when the GPUs make no progress for S seconds (60)\n"
           "other\n"
           "  --seed N             initialisation, shuffling and augmentation seed (default 42)\n"
           "  --device D           cpu | cuda | cuda:N (default cuda when a GPU is present)\n"
           "  --eval-batch N       batch size for evaluation (default 256)\n"
           "  --no-eval            no evaluation on the held-out split at the end\n"
           "  --eval-every N       also evaluate on the held-out split every N steps (default: only\n"
           "                       at the end)\n"
           "  --trace              print what AMP, accumulation and recompute did at every step\n"
           "                       (loss scale, skipped steps, recomputed segments, memory;\n"
           "                       waits for the device each step: for learning, not timing)\n"
           "  --help               this text\n", cmd);
}

/* "known models: mlp, resnet18, ...": the hint of an unknown --model. */
static const char *hint_models(void)
{
    static char hint[300];
    snprintf(hint, sizeof hint, "known models: %s", model_kind_list());
    return hint;
}

/* A whole number in lo..hi. The 64-bit parse is range-checked before any
 * caller narrows it to int, and every message quotes what was typed. */
static long parse_long(const char *cmd, const char *flag, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end)
        cli_fail(cmd, "%s: '%s' is not a whole number (expected %ld..%ld)", flag, v, lo, hi);
    if (errno == ERANGE || x < lo || x > hi)
        cli_fail(cmd, "%s: '%s' is out of range: it must be in %ld..%ld", flag, v, lo, hi);
    return (long)x;
}

/* A number in [lo, hi], stored as f32: parsed as a double, range-checked,
 * and refused when f32 cannot hold it (a nonzero value below the smallest
 * normal f32 would silently become 0 or lose its digits). */
static float parse_float(const char *cmd, const char *flag, const char *v, float lo, float hi)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end) cli_fail(cmd, "%s: '%s' is not a number", flag, v);
    if (isnan(x))
        cli_fail(cmd, "%s: '%s' is not a number (NaN): it must be in [%g, %g]", flag, v, (double)lo,
                 (double)hi);
    int tiny = x != 0 ? fabs(x) < FLT_MIN : errno == ERANGE;   /* ERANGE at 0: underflow */
    if (tiny && !(x < lo))
        ct_fatal_hint("pass 0 for none, or a value of at least 1.2e-38", "%s: '%s' is too small to "
                      "hold in f32 (below %g, the smallest normal f32, it rounds to 0 or loses its "
                      "digits)", flag, v, (double)FLT_MIN);
    if ((errno == ERANGE && x != 0) || !(x >= lo && x <= hi))
        cli_fail(cmd, "%s: '%s' is out of range: it must be in [%g, %g]", flag, v, (double)lo,
                 (double)hi);
    return (float)x;
}

static void copy_str(const char *cmd, const char *flag, char *dst, size_t n, const char *v)
{
    if (strlen(v) >= n) cli_fail(cmd, "%s: value too long (at most %zu characters)", flag, n - 1);
    snprintf(dst, n, "%s", v);
}

enum {
    O_MODEL = 256, O_DATA, O_IMAGE_SIZE, O_CLASSES, O_WORKERS, O_DECODE, O_HIDDEN, O_SEQ, O_VOCAB,
    O_HEAD, O_ZERO_INIT_RESIDUAL, O_DROPOUT, O_EPOCHS, O_STEPS, O_BATCH, O_ACCUM, O_OPTIM, O_LR,
    O_MOMENTUM, O_NESTEROV, O_WD, O_NO_WD_BN_BIAS, O_SCHEDULE, O_WARMUP, O_FINAL_LR, O_CLIP,
    O_LABEL_SMOOTHING, O_PRECISION, O_RECOMPUTE, O_GRAPH, O_GRAPH_WARMUP, O_SAVE, O_SAVE_EVERY,
    O_RESUME, O_RESUME_CHANGE, O_LOAD, O_LOG, O_LOG_EVERY, O_GPUS, O_BUCKET_MB, O_SYNC_BN,
    O_GRAD_REDUCE, O_DIST_TIMEOUT, O_SEED, O_DEVICE, O_EVAL_BATCH, O_NO_EVAL, O_EVAL_EVERY, O_TRACE,
    O_JSON
};

/* TrainOptions.given has a bit per flag code */
_Static_assert(O_JSON - O_MODEL < 64, "more flags than TrainOptions.given has bits");

/* ctrain train's flags, in the order of its usage text. */
static const struct option train_table[] = {
    CLI_VALUE("model", O_MODEL), CLI_VALUE("data", O_DATA), CLI_VALUE("image-size", O_IMAGE_SIZE),
    CLI_VALUE("classes", O_CLASSES), CLI_VALUE("workers", O_WORKERS), CLI_VALUE("decode", O_DECODE),
    CLI_VALUE("hidden", O_HIDDEN), CLI_VALUE("seq", O_SEQ), CLI_VALUE("vocab", O_VOCAB),
    CLI_VALUE("head", O_HEAD), CLI_SWITCH("zero-init-residual", O_ZERO_INIT_RESIDUAL),
    CLI_VALUE("dropout", O_DROPOUT),
    CLI_VALUE("epochs", O_EPOCHS), CLI_VALUE("steps", O_STEPS), CLI_VALUE("batch", O_BATCH),
    CLI_VALUE("accum", O_ACCUM),
    CLI_VALUE("optim", O_OPTIM), CLI_VALUE("lr", O_LR), CLI_VALUE("momentum", O_MOMENTUM),
    CLI_SWITCH("nesterov", O_NESTEROV), CLI_VALUE("wd", O_WD),
    CLI_SWITCH("no-wd-bn-bias", O_NO_WD_BN_BIAS), CLI_VALUE("schedule", O_SCHEDULE),
    CLI_VALUE("warmup", O_WARMUP), CLI_VALUE("final-lr", O_FINAL_LR), CLI_VALUE("clip", O_CLIP),
    CLI_VALUE("label-smoothing", O_LABEL_SMOOTHING),
    CLI_VALUE("precision", O_PRECISION), CLI_VALUE("recompute", O_RECOMPUTE),
    CLI_SWITCH("graph", O_GRAPH), CLI_VALUE("graph-warmup", O_GRAPH_WARMUP),
    CLI_VALUE("save", O_SAVE), CLI_VALUE("save-every", O_SAVE_EVERY), CLI_VALUE("resume", O_RESUME),
    CLI_VALUE("resume-change", O_RESUME_CHANGE), CLI_VALUE("load", O_LOAD), CLI_VALUE("log", O_LOG),
    CLI_VALUE("log-every", O_LOG_EVERY),
    CLI_VALUE("gpus", O_GPUS), CLI_VALUE("bucket-mb", O_BUCKET_MB), CLI_SWITCH("sync-bn", O_SYNC_BN),
    CLI_VALUE("grad-reduce", O_GRAD_REDUCE), CLI_VALUE("dist-timeout", O_DIST_TIMEOUT),
    CLI_VALUE("seed", O_SEED), CLI_VALUE("device", O_DEVICE), CLI_VALUE("eval-batch", O_EVAL_BATCH),
    CLI_SWITCH("no-eval", O_NO_EVAL), CLI_VALUE("eval-every", O_EVAL_EVERY),
    CLI_SWITCH("trace", O_TRACE), CLI_HELP, {0}};

/* ctrain eval's: the flags that say which model, weights and data
 * (eval_options_usage). The others of train_table are refused by name. */
static const struct option eval_table[] = {
    CLI_VALUE("load", O_LOAD), CLI_VALUE("model", O_MODEL), CLI_VALUE("hidden", O_HIDDEN),
    CLI_VALUE("seq", O_SEQ), CLI_VALUE("head", O_HEAD), CLI_VALUE("classes", O_CLASSES),
    CLI_VALUE("data", O_DATA), CLI_VALUE("vocab", O_VOCAB), CLI_VALUE("image-size", O_IMAGE_SIZE),
    CLI_VALUE("workers", O_WORKERS), CLI_VALUE("decode", O_DECODE),
    CLI_VALUE("precision", O_PRECISION), CLI_VALUE("eval-batch", O_EVAL_BATCH),
    CLI_VALUE("json", O_JSON), CLI_VALUE("device", O_DEVICE), CLI_VALUE("seed", O_SEED), CLI_HELP,
    {0}};

/* 1 when flag ("--lr") is one of train_table's. */
static int train_flag(const char *flag)
{
    for (const struct option *t = train_table; t->name; t++)
        if (!strcmp(t->name, flag + 2)) return 1;
    return 0;
}

/* --hidden W1,W2,...: every width given ("" or ",," would silently build
 * fewer layers), at most 7. */
static void parse_hidden(TrainOptions *o, const char *cmd, const char *v)
{
    char buf[256];
    copy_str(cmd, "--hidden", buf, sizeof buf, v);
    o->n_hidden = 0;
    for (char *tok = buf;;) {
        char *comma = strchr(tok, ',');
        if (comma) *comma = 0;
        if (!*tok)
            cli_fail(cmd, "--hidden '%s': a width is missing (W1,W2,...: one number per hidden "
                     "layer)", v);
        if (o->n_hidden == 7) cli_fail(cmd, "--hidden: at most 7 hidden layers");
        o->hidden[o->n_hidden++] = (int)parse_long(cmd, "--hidden", tok, 1, 1 << 16);
        if (!comma) break;
        tok = comma + 1;
    }
}

/* --device cpu | cuda | cuda:N, the GPU number range-checked before
 * ctx_parse_device narrows it to int. */
static void parse_device(TrainOptions *o, const char *cmd, const char *v)
{
    char *end;
    errno = 0;
    long long id = strncmp(v, "cuda:", 5) ? 0 : strtoll(v + 5, &end, 10);
    if (id && !*end && (errno || id < 0 || id > 1023))
        cli_fail(cmd, "--device: '%s': the GPU number is out of range (0..1023)", v);
    if (ctx_parse_device(v, &o->device, &o->device_id) != 0)
        cli_fail(cmd, "--device: '%s' is not cpu, cuda or cuda:N", v);
}

/* A flag whose value is a number or a path (a, as typed; v, its value).
 * 0 when val is none of them. */
static int set_plain(TrainOptions *o, const char *cmd, int val, const char *a, const char *v)
{
    switch (val) {
    case O_DATA: copy_str(cmd, a, o->data, sizeof o->data, v); break;
    case O_IMAGE_SIZE: o->image_size = (int)parse_long(cmd, a, v, 8, 4096); break;
    case O_CLASSES: o->classes = (int)parse_long(cmd, a, v, 2, 1 << 20); break;
    case O_WORKERS: o->workers = (int)parse_long(cmd, a, v, 1, 256); break;
    case O_SEQ: o->seq = (int)parse_long(cmd, a, v, 2, 512); break;
    case O_VOCAB: copy_str(cmd, a, o->vocab, sizeof o->vocab, v); break;
    case O_DROPOUT: o->dropout = parse_float(cmd, a, v, 0.0f, 0.99f); break;
    case O_EPOCHS: o->epochs = (int)parse_long(cmd, a, v, 1, 100000); break;
    case O_STEPS: o->steps = parse_long(cmd, a, v, 1, TRAIN_MAX_STEPS); break;
    case O_BATCH: o->batch = (int)parse_long(cmd, a, v, 1, 1 << 20); break;
    case O_ACCUM: o->accum = (int)parse_long(cmd, a, v, 1, 1 << 16); break;
    case O_LR: o->lr = parse_float(cmd, a, v, 0.0f, 100.0f); break;
    case O_MOMENTUM: o->optim.momentum = parse_float(cmd, a, v, 0.0f, 0.9999f); break;
    case O_WD: o->optim.weight_decay = parse_float(cmd, a, v, 0.0f, 1.0f); break;
    case O_WARMUP: o->warmup = parse_long(cmd, a, v, 0, TRAIN_MAX_STEPS); break;
    case O_FINAL_LR: o->final_lr = parse_float(cmd, a, v, 0.0f, 100.0f); break;
    case O_CLIP: o->clip = parse_float(cmd, a, v, 0.0f, 1e9f); break;
    case O_LABEL_SMOOTHING: o->label_smoothing = parse_float(cmd, a, v, 0.0f, 1.0f); break;
    case O_GRAPH_WARMUP: o->graph_warmup = parse_long(cmd, a, v, 1, 1000); break;
    case O_SAVE: copy_str(cmd, a, o->save_path, sizeof o->save_path, v); break;
    case O_SAVE_EVERY: o->save_every = parse_long(cmd, a, v, 1, TRAIN_MAX_STEPS); break;
    case O_RESUME: copy_str(cmd, a, o->resume_path, sizeof o->resume_path, v); break;
    case O_LOAD: copy_str(cmd, a, o->load_path, sizeof o->load_path, v); break;
    case O_LOG: copy_str(cmd, a, o->log_path, sizeof o->log_path, v); break;
    case O_LOG_EVERY: o->log_every = (int)parse_long(cmd, a, v, 1, 1 << 30); break;
    case O_GPUS: o->dist.gpus = (int)parse_long(cmd, a, v, 1, 1024); break;
    case O_BUCKET_MB: o->dist.bucket_mb = parse_float(cmd, a, v, 0.0f, 65536.0f); break;
    case O_DIST_TIMEOUT: o->dist.timeout_s = (int)parse_long(cmd, a, v, 1, 86400); break;
    case O_SEED: o->seed = (uint64_t)parse_long(cmd, a, v, 0, LONG_MAX); break;
    case O_EVAL_BATCH: o->eval_batch = (int)parse_long(cmd, a, v, 1, 1 << 20); break;
    case O_EVAL_EVERY: o->eval_every = parse_long(cmd, a, v, 1, TRAIN_MAX_STEPS); break;
    case O_JSON: copy_str(cmd, a, o->json_path, sizeof o->json_path, v); break;
    default: return 0;
    }
    return 1;
}

/* A switch, or a flag whose value names something: a model, a device, a
 * policy (v, its value). */
static void set_named(TrainOptions *o, const char *cmd, int val, const char *v)
{
    char msg[700];
    int k;
    switch (val) {
    case O_ZERO_INIT_RESIDUAL: o->zero_init_residual = 1; break;
    case O_NESTEROV: o->optim.nesterov = 1; break;
    case O_NO_WD_BN_BIAS: o->no_wd_bn_bias = 1; break;
    case O_GRAPH: o->graph = 1; break;
    case O_SYNC_BN: o->dist.sync_bn = 1; break;
    case O_NO_EVAL: o->no_eval = 1; break;
    case O_TRACE: o->trace = 1; break;
    case O_MODEL: {
        char name[32];
        copy_str(cmd, "--model", name, sizeof name, v);
        if ((k = model_kind_parse(name)) < 0)
            ct_fatal_hint(hint_models(), "--model: unknown model '%s'", name);
        o->model = (ModelKind)k;
        break;
    }
    case O_DECODE:
        if (strcmp(v, "auto") && strcmp(v, "gpu") && strcmp(v, "cpu"))
            cli_fail(cmd, "--decode: '%s' is not auto, gpu or cpu", v);
        snprintf(o->decode, sizeof o->decode, "%s", v);
        break;
    case O_HIDDEN: parse_hidden(o, cmd, v); break;
    case O_DEVICE: parse_device(o, cmd, v); break;
    case O_HEAD:
        if (strcmp(v, "mlm") && strcmp(v, "cls")) cli_fail(cmd, "--head: '%s' is not mlm or cls", v);
        o->head = v[0] == 'm' ? HEAD_MLM : HEAD_CLS;
        break;
    case O_GRAD_REDUCE:
        if ((k = dist_grad_reduce_parse(v)) < 0)
            cli_fail(cmd, "--grad-reduce: '%s' is not f32 or bf16", v);
        o->dist.grad_reduce = (DType)k;
        break;
    case O_PRECISION:
        if ((k = precision_parse(v)) < 0)
            cli_fail(cmd, "--precision: '%s' is not " PRECISION_CHOICES, v);
        o->precision = (Precision)k;
        break;
    case O_OPTIM:
        if ((k = optim_parse(v)) < 0) cli_fail(cmd, "--optim: '%s' is not sgd, adamw or lamb", v);
        o->optim.kind = (OptimKind)k;
        break;
    case O_SCHEDULE:
        if ((k = sched_parse(v)) < 0)
            cli_fail(cmd, "--schedule: '%s' is not constant, cosine, linear, poly or step", v);
        o->schedule = (SchedKind)k;
        break;
    case O_RECOMPUTE:
        if (recompute_parse(v, &o->recompute) != 0)
            cli_fail(cmd, "--recompute: '%s' is not none, all or every:N", v);
        break;
    case O_RESUME_CHANGE:
        if (resume_change_parse(&o->resume_change, v, msg, sizeof msg) != 0)
            ct_fatal_hint("name flags without their values, e.g. --resume-change steps,lr", "%s",
                          msg);
        break;
    }
}

void train_options_parse(TrainOptions *o, int argc, char **argv, const char *cmd)
{
    const int eval = !strcmp(cmd, "eval");
    CliOpts p;
    cli_begin(&p, cmd, eval ? eval_table : train_table, argc, argv);
    for (int val; (val = cli_next(&p)) != -1;) {
        if (val == 'h') {
            train_options_usage(cmd);
            exit(0);
        }
        if (val == '?' && eval && train_flag(p.flag))
            cli_fail(cmd, "%s is a training flag: ctrain eval does not take it", p.flag);
        if (val == '?' && !strcmp(p.flag, "--json"))
            cli_fail(cmd, "--json is ctrain eval's (a training run writes JSON lines with --log FILE)");
        if (val == '?' || val == CLI_WORD) cli_refuse(&p);
        if (!set_plain(o, cmd, val, p.flag, p.value)) set_named(o, cmd, val, p.value);
        o->given |= 1ull << (val - O_MODEL);
    }
}

/* ---- flags that do nothing in this run ---- */

static int is_bert(const TrainOptions *o) { return model_kind_is_bert(o->model); }
static int is_resnet(const TrainOptions *o) { return model_kind_is_resnet(o->model); }

/* --data names a folder of images (imagefolder:DIR or a bare DIR) */
static int data_is_folder(const TrainOptions *o)
{
    return strcmp(o->data, "synthetic") && strncmp(o->data, "fashion-mnist", 13) &&
           strncmp(o->data, "mlm:", 4) && !feed_is_cls(o->data);
}

/* What decides whether a flag acts: the options, the device, the processes,
 * whether the data has a held-out split. */
typedef struct RunFacts {
    const TrainOptions *o;
    Device device;
    int world, has_eval;
} RunFacts;

typedef struct NoEffect {
    int flag;
    int (*idle)(const RunFacts *f);   /* 1: the flag does nothing in this run */
    const char *why;
} NoEffect;

static int cpu(const RunFacts *f) { return f->device == DEV_CPU; }
static int no_graph(const RunFacts *f) { return !f->o->graph || f->device == DEV_CPU; }
static int mlp_recompute(const RunFacts *f)
{
    return f->o->model == MODEL_MLP && f->o->recompute.every > 0;
}
static int no_loader(const RunFacts *f) { return !is_resnet(f->o) || !strcmp(f->o->data, "synthetic"); }
static int no_jpeg(const RunFacts *f) { return !data_is_folder(f->o); }
static int not_bert(const RunFacts *f) { return !is_bert(f->o); }
static int not_resnet(const RunFacts *f) { return !is_resnet(f->o); }
static int not_mlp(const RunFacts *f) { return f->o->model != MODEL_MLP; }
static int one_process(const RunFacts *f) { return f->world <= 1; }
static int not_sgd(const RunFacts *f) { return f->o->optim.kind != OPT_SGD; }
static int no_decay(const RunFacts *f)
{
    return f->o->schedule == SCHED_CONSTANT || f->o->schedule == SCHED_STEP;
}
static int no_eval(const RunFacts *f) { return f->o->no_eval; }
static int mlm_eval(const RunFacts *f) { return !f->o->no_eval && !strncmp(f->o->data, "mlm:", 4); }
static int no_held_out(const RunFacts *f) { return !f->o->no_eval && !f->has_eval; }

/* "--FLAG has no effect " + why */
static const NoEffect NO_EFFECT[] = {
    {O_GRAPH, cpu, "on the CPU backend: CUDA graphs need a GPU (the steps run eagerly)"},
    {O_GRAPH_WARMUP, no_graph, "here: the steps are not captured (--graph on a GPU captures them)"},
    {O_RECOMPUTE, mlp_recompute, "on the MLP: it has no checkpointed segments (the ResNets and BERT "
                                 "have)"},
    {O_WORKERS, no_loader, "on this data: it has no loader threads (a ResNet on an ImageFolder or "
                           "Fashion-MNIST has)"},
    {O_DECODE, no_jpeg, "on this data: only an ImageFolder's JPEGs are decoded"},
    {O_VOCAB, not_bert, "on this model: it is a BERT option"},
    {O_SEQ, not_bert, "on this model: it is a BERT option"},
    {O_HEAD, not_bert, "on this model: it is a BERT option"},
    {O_DROPOUT, not_bert, "on this model: it is a BERT option (the others have no dropout)"},
    {O_IMAGE_SIZE, not_resnet, "on this model: it is a ResNet option"},
    {O_ZERO_INIT_RESIDUAL, not_resnet, "on this model: it is a ResNet option"},
    {O_HIDDEN, not_mlp, "on this model: it sets the MLP's widths"},
    {O_BUCKET_MB, one_process, "in one process: it is for data parallel (--gpus N)"},
    {O_DIST_TIMEOUT, one_process, "in one process: it is for data parallel (--gpus N)"},
    {O_MOMENTUM, not_sgd, "with this optimizer: it is SGD's (AdamW and LAMB use betas 0.9, "
                          "0.999)"},
    {O_NESTEROV, not_sgd, "with this optimizer: it is SGD's"},
    {O_FINAL_LR, no_decay, "with this schedule: it is where cosine, linear and poly decay to"},
    {O_EVAL_BATCH, no_eval, "with --no-eval"},
    {O_EVAL_EVERY, no_eval, "with --no-eval"},
    {O_EVAL_EVERY, no_held_out, "on this data: it has no held-out split"},
    {O_EVAL_BATCH, mlm_eval, "on a masked-LM shard: its held-out batches are --batch sequences"},
};

void train_options_warn_unused(const TrainOptions *o, Device device, int world, int has_eval)
{
    const RunFacts facts = {o, device, world, has_eval};
    for (size_t i = 0; i < sizeof NO_EFFECT / sizeof NO_EFFECT[0]; i++) {
        const NoEffect *e = &NO_EFFECT[i];
        if (!(o->given >> (e->flag - O_MODEL) & 1) || !e->idle(&facts)) continue;
        const char *name = "?";
        for (const struct option *t = train_table; t->name; t++)
            if (t->val == e->flag) name = t->name;
        LOG_W("--%s has no effect %s", name, e->why);
    }
}
