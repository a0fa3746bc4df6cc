/* options.c — strict parsing of the train/eval flags into TrainOptions, with a usage text. */
#include "options.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
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
           "  --precision P        fp32 | tf32 | fp16 | bf16 (default fp32)\n"
           "  --eval-batch N       batch size (default 256)\n"
           "  --json FILE          also write the result as one JSON object (atomically)\n"
           "  --device D           cpu | cuda | cuda:N (default cuda when a GPU is present)\n"
           "  --seed N             seed (default 42)\n"
           "  --help               this text\n"
           "Training flags (--lr, --optim, --steps, --log, --gpus, ...) are refused here.\n");
}

/* Flags that only shape training; ctrain eval refuses them rather than
 * accept and ignore them. */
static const char *const train_only_flags[] = {
    "--epochs", "--steps", "--batch", "--accum", "--optim", "--lr", "--final-lr",
    "--momentum", "--nesterov", "--wd", "--no-wd-bn-bias", "--schedule", "--warmup", "--clip",
    "--label-smoothing", "--recompute", "--graph", "--graph-warmup", "--save", "--save-every",
    "--resume", "--resume-change", "--log", "--log-every", "--gpus", "--bucket-mb", "--sync-bn",
    "--grad-reduce", "--dist-timeout", "--zero-init-residual", "--trace", "--dropout",
    "--no-eval", NULL};

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
           "                       comparisons between runs)\n"
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
           "  --precision P        fp32 | tf32 | fp16 | bf16 (default fp32)\n"
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

static void opt_fail(const char *cmd, const char *msg)
{
    char hint[128];
    snprintf(hint, sizeof hint, "run 'ctrain %s --help' for the options", cmd);
    ct_fatal_hint(hint, "%s", msg);
}

/* A whole number in lo..hi. The 64-bit parse is range-checked before any
 * caller narrows it to int, and every message quotes what was typed. */
static long parse_long(const char *cmd, const char *flag, const char *v, long lo, long hi)
{
    char *end, msg[700];
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end) {
        snprintf(msg, sizeof msg, "%s: '%s' is not a whole number (expected %ld..%ld)", flag, v,
                 lo, hi);
        opt_fail(cmd, msg);
    }
    if (errno == ERANGE || x < lo || x > hi) {
        snprintf(msg, sizeof msg, "%s: '%s' is out of range: it must be in %ld..%ld", flag, v, lo,
                 hi);
        opt_fail(cmd, msg);
    }
    return (long)x;
}

/* A number in [lo, hi], stored as f32: parsed as a double, range-checked,
 * and refused when f32 cannot hold it (a nonzero value below the smallest
 * normal f32 would silently become 0 or lose its digits). */
static float parse_float(const char *cmd, const char *flag, const char *v, float lo, float hi)
{
    char *end, msg[700];
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end) {
        snprintf(msg, sizeof msg, "%s: '%s' is not a number", flag, v);
        opt_fail(cmd, msg);
    }
    if (isnan(x)) {
        snprintf(msg, sizeof msg, "%s: '%s' is not a number (NaN): it must be in [%g, %g]", flag, v,
                 (double)lo, (double)hi);
        opt_fail(cmd, msg);
    }
    int tiny = x != 0 ? fabs(x) < FLT_MIN : errno == ERANGE;   /* ERANGE at 0: underflow */
    if (tiny && !(x < lo)) {
        snprintf(msg, sizeof msg, "%s: '%s' is too small to hold in f32 (below %g, the smallest "
                 "normal f32, it rounds to 0 or loses its digits)", flag, v, (double)FLT_MIN);
        ct_fatal_hint("pass 0 for none, or a value of at least 1.2e-38", "%s", msg);
    }
    if ((errno == ERANGE && x != 0) || !(x >= lo && x <= hi)) {
        snprintf(msg, sizeof msg, "%s: '%s' is out of range: it must be in [%g, %g]", flag, v,
                 (double)lo, (double)hi);
        opt_fail(cmd, msg);
    }
    return (float)x;
}

static void copy_str(const char *cmd, const char *flag, char *dst, size_t n, const char *v)
{
    char msg[256];
    if (strlen(v) >= n) {
        snprintf(msg, sizeof msg, "%s: value too long (at most %zu characters)", flag, n - 1);
        opt_fail(cmd, msg);
    }
    snprintf(dst, n, "%s", v);
}

void train_options_parse(TrainOptions *o, int argc, char **argv, const char *cmd)
{
    char msg[700];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { train_options_usage(cmd); exit(0); }
        if (!strcmp(cmd, "eval"))
            for (int k = 0; train_only_flags[k]; k++)
                if (!strcmp(a, train_only_flags[k])) {
                    snprintf(msg, sizeof msg, "%s is a training flag: ctrain eval does not take "
                             "it", a);
                    opt_fail(cmd, msg);
                }
        if (!strcmp(a, "--nesterov")) { o->optim.nesterov = 1; continue; }
        if (!strcmp(a, "--no-wd-bn-bias")) { o->no_wd_bn_bias = 1; continue; }
        if (!strcmp(a, "--zero-init-residual")) { o->zero_init_residual = 1; continue; }
        if (!strcmp(a, "--graph")) { o->graph = 1; continue; }
        if (!strcmp(a, "--no-eval")) { o->no_eval = 1; continue; }
        if (!strcmp(a, "--trace")) { o->trace = 1; continue; }
        if (!strcmp(a, "--sync-bn")) { o->dist.sync_bn = 1; continue; }
        if (strncmp(a, "--", 2) != 0) {
            snprintf(msg, sizeof msg, "unexpected argument '%s'", a);
            opt_fail(cmd, msg);
        }
        if (i + 1 >= argc) {
            snprintf(msg, sizeof msg, "%s needs a value", a);
            opt_fail(cmd, msg);
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--model")) {
            char name[32];
            copy_str(cmd, a, name, sizeof name, v);
            int k = model_kind_parse(name);
            if (k < 0)
                ct_fatal_hint(hint_models(), "--model: unknown model '%s'", name);
            o->model = (ModelKind)k;
        } else if (!strcmp(a, "--data")) copy_str(cmd, a, o->data, sizeof o->data, v);
        else if (!strcmp(a, "--epochs")) o->epochs = (int)parse_long(cmd, a, v, 1, 100000);
        else if (!strcmp(a, "--steps")) o->steps = parse_long(cmd, a, v, 1, TRAIN_MAX_STEPS);
        else if (!strcmp(a, "--batch")) o->batch = (int)parse_long(cmd, a, v, 1, 1 << 20);
        else if (!strcmp(a, "--accum")) o->accum = (int)parse_long(cmd, a, v, 1, 1 << 16);
        else if (!strcmp(a, "--lr")) o->lr = parse_float(cmd, a, v, 0.0f, 100.0f);
        else if (!strcmp(a, "--final-lr")) o->final_lr = parse_float(cmd, a, v, 0.0f, 100.0f);
        else if (!strcmp(a, "--momentum")) o->optim.momentum = parse_float(cmd, a, v, 0.0f, 0.9999f);
        else if (!strcmp(a, "--wd")) o->optim.weight_decay = parse_float(cmd, a, v, 0.0f, 1.0f);
        else if (!strcmp(a, "--clip")) o->clip = parse_float(cmd, a, v, 0.0f, 1e9f);
        else if (!strcmp(a, "--label-smoothing")) o->label_smoothing = parse_float(cmd, a, v, 0.0f, 1.0f);
        else if (!strcmp(a, "--warmup")) o->warmup = parse_long(cmd, a, v, 0, TRAIN_MAX_STEPS);
        else if (!strcmp(a, "--seed")) o->seed = (uint64_t)parse_long(cmd, a, v, 0, LONG_MAX);
        else if (!strcmp(a, "--graph-warmup")) o->graph_warmup = parse_long(cmd, a, v, 1, 1000);
        else if (!strcmp(a, "--log-every")) o->log_every = (int)parse_long(cmd, a, v, 1, 1 << 30);
        else if (!strcmp(a, "--log")) copy_str(cmd, a, o->log_path, sizeof o->log_path, v);
        else if (!strcmp(a, "--json")) {
            if (strcmp(cmd, "eval"))
                opt_fail(cmd, "--json is ctrain eval's (a training run writes JSON lines with "
                         "--log FILE)");
            copy_str(cmd, a, o->json_path, sizeof o->json_path, v);
        }
        else if (!strcmp(a, "--vocab")) copy_str(cmd, a, o->vocab, sizeof o->vocab, v);
        else if (!strcmp(a, "--save")) copy_str(cmd, a, o->save_path, sizeof o->save_path, v);
        else if (!strcmp(a, "--load")) copy_str(cmd, a, o->load_path, sizeof o->load_path, v);
        else if (!strcmp(a, "--resume")) copy_str(cmd, a, o->resume_path, sizeof o->resume_path, v);
        else if (!strcmp(a, "--resume-change")) {
            if (resume_change_parse(&o->resume_change, v, msg, sizeof msg) != 0)
                ct_fatal_hint("name flags without their values, e.g. --resume-change steps,lr",
                              "%s", msg);
        }
        else if (!strcmp(a, "--save-every")) o->save_every = parse_long(cmd, a, v, 1, TRAIN_MAX_STEPS);
        else if (!strcmp(a, "--image-size")) o->image_size = (int)parse_long(cmd, a, v, 8, 4096);
        else if (!strcmp(a, "--classes")) o->classes = (int)parse_long(cmd, a, v, 2, 1 << 20);
        else if (!strcmp(a, "--workers")) o->workers = (int)parse_long(cmd, a, v, 1, 256);
        else if (!strcmp(a, "--decode")) {
            if (strcmp(v, "auto") && strcmp(v, "gpu") && strcmp(v, "cpu")) {
                snprintf(msg, sizeof msg, "--decode: '%s' is not auto, gpu or cpu", v);
                opt_fail(cmd, msg);
            }
            snprintf(o->decode, sizeof o->decode, "%s", v);
        }
        else if (!strcmp(a, "--seq")) o->seq = (int)parse_long(cmd, a, v, 2, 512);
        else if (!strcmp(a, "--eval-batch")) o->eval_batch = (int)parse_long(cmd, a, v, 1, 1 << 20);
        else if (!strcmp(a, "--dropout")) o->dropout = parse_float(cmd, a, v, 0.0f, 0.99f);
        else if (!strcmp(a, "--gpus")) o->dist.gpus = (int)parse_long(cmd, a, v, 1, 1024);
        else if (!strcmp(a, "--bucket-mb")) o->dist.bucket_mb = parse_float(cmd, a, v, 0.0f, 65536.0f);
        else if (!strcmp(a, "--dist-timeout")) o->dist.timeout_s = (int)parse_long(cmd, a, v, 1, 86400);
        else if (!strcmp(a, "--device")) {
            char *end;
            errno = 0;
            long long id = strncmp(v, "cuda:", 5) ? 0 : strtoll(v + 5, &end, 10);
            if (id && !*end && (errno || id < 0 || id > 1023)) {   /* before ctx_parse_device's int */
                snprintf(msg, sizeof msg, "--device: '%s': the GPU number is out of range (0..1023)", v);
                opt_fail(cmd, msg);
            }
            if (ctx_parse_device(v, &o->device, &o->device_id) != 0) {
                snprintf(msg, sizeof msg, "--device: '%s' is not cpu, cuda or cuda:N", v);
                opt_fail(cmd, msg);
            }
        } else if (!strcmp(a, "--head")) {
            if (!strcmp(v, "mlm")) o->head = HEAD_MLM;
            else if (!strcmp(v, "cls")) o->head = HEAD_CLS;
            else {
                snprintf(msg, sizeof msg, "--head: '%s' is not mlm or cls", v);
                opt_fail(cmd, msg);
            }
        } else if (!strcmp(a, "--grad-reduce")) {
            int t = dist_grad_reduce_parse(v);
            if (t < 0) {
                snprintf(msg, sizeof msg, "--grad-reduce: '%s' is not f32 or bf16", v);
                opt_fail(cmd, msg);
            }
            o->dist.grad_reduce = (DType)t;
        } else if (!strcmp(a, "--precision")) {
            int p = precision_parse(v);
            if (p < 0) {
                snprintf(msg, sizeof msg, "--precision: '%s' is not " PRECISION_CHOICES, v);
                opt_fail(cmd, msg);
            }
            o->precision = (Precision)p;
        } else if (!strcmp(a, "--optim")) {
            int k = optim_parse(v);
            if (k < 0) {
                snprintf(msg, sizeof msg, "--optim: '%s' is not sgd, adamw or lamb", v);
                opt_fail(cmd, msg);
            }
            o->optim.kind = (OptimKind)k;
        } else if (!strcmp(a, "--schedule")) {
            int k = sched_parse(v);
            if (k < 0) {
                snprintf(msg, sizeof msg, "--schedule: '%s' is not constant, cosine, linear, poly or step", v);
                opt_fail(cmd, msg);
            }
            o->schedule = (SchedKind)k;
        } else if (!strcmp(a, "--recompute")) {
            if (recompute_parse(v, &o->recompute) != 0) {
                snprintf(msg, sizeof msg, "--recompute: '%s' is not none, all or every:N", v);
                opt_fail(cmd, msg);
            }
        } else if (!strcmp(a, "--hidden")) {
            char buf[256];
            copy_str(cmd, a, buf, sizeof buf, v);
            o->n_hidden = 0;
            /* every width given: "" or ",," would silently build fewer layers */
            for (char *tok = buf;;) {
                char *comma = strchr(tok, ',');
                if (comma) *comma = 0;
                if (!*tok) {
                    snprintf(msg, sizeof msg, "--hidden '%s': a width is missing (W1,W2,...: "
                             "one number per hidden layer)", v);
                    opt_fail(cmd, msg);
                }
                if (o->n_hidden == 7) opt_fail(cmd, "--hidden: at most 7 hidden layers");
                o->hidden[o->n_hidden++] = (int)parse_long(cmd, a, tok, 1, 1 << 16);
                if (!comma) break;
                tok = comma + 1;
            }
        } else {
            snprintf(msg, sizeof msg, "unknown option '%s'", a);
            opt_fail(cmd, msg);
        }
    }
}
