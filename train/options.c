/* options.c — strict parsing of the train/eval flags, with a usage text. */
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../engine/error.h"

void train_options_default(TrainOptions *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->model, sizeof o->model, "mlp");
    snprintf(o->data, sizeof o->data, "fashion-mnist");
    o->epochs = 1;
    o->batch = 64;
    o->lr = 0.05f;
    o->momentum = 0.9f;
    o->seed = 42;
    o->device = DEV_CPU;
    snprintf(o->precision, sizeof o->precision, "fp32");
    o->log_every = 50;
    o->hidden[0] = 512;
    o->hidden[1] = 256;
    o->n_hidden = 2;
}

void train_options_usage(const char *cmd)
{
    printf("usage: ctrain %s [options]\n\n"
           "  --model NAME         mlp (default mlp)\n"
           "  --data SPEC          fashion-mnist | fashion-mnist:DIR (default fashion-mnist,\n"
           "                       read from /usr/share/datasets/fashion-mnist)\n"
           "  --epochs N           passes over the training set (default 1)\n"
           "  --steps N            stop after N optimizer steps instead of whole epochs\n"
           "  --batch N            samples per step (default 64)\n"
           "  --lr X               learning rate (default 0.05)\n"
           "  --momentum X         SGD momentum (default 0.9)\n"
           "  --wd X               weight decay (default 0)\n"
           "  --nesterov           Nesterov momentum\n"
           "  --label-smoothing X  label smoothing in the loss (default 0)\n"
           "  --hidden W1,W2,...   MLP hidden widths (default 512,256)\n"
           "  --seed N             initialisation and shuffling seed (default 42)\n"
           "  --device D           cpu | cuda | cuda:N (default cuda when a GPU is present)\n"
           "  --precision P        fp32 | tf32 (default fp32)\n"
           "  --log FILE           write one JSON object per line: steps and the final eval\n"
           "  --log-every N        progress/log interval in steps (default 50)\n"
           "  --help               this text\n", cmd);
}

static void opt_fail(const char *cmd, const char *fmt, const char *a, const char *b)
{
    char msg[512], hint[128];
    snprintf(msg, sizeof msg, fmt, a, b);
    snprintf(hint, sizeof hint, "run 'ctrain %s --help' for the options", cmd);
    ct_fatal_hint(hint, "%s", msg);
}

static long parse_long(const char *cmd, const char *flag, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        char range[64];
        snprintf(range, sizeof range, "%ld..%ld", lo, hi);
        char both[600];
        snprintf(both, sizeof both, "%s: '%s' is not a whole number in %s", flag, v, range);
        opt_fail(cmd, "%s%s", both, "");
    }
    return x;
}

static float parse_float(const char *cmd, const char *flag, const char *v, float lo, float hi)
{
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi)) {
        char both[600];
        snprintf(both, sizeof both, "%s: '%s' is not a number in [%g, %g]", flag, v, (double)lo,
                 (double)hi);
        opt_fail(cmd, "%s%s", both, "");
    }
    return x;
}

void train_options_parse(TrainOptions *o, int argc, char **argv, const char *cmd)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { train_options_usage(cmd); exit(0); }
        if (!strcmp(a, "--nesterov")) { o->nesterov = 1; continue; }
        if (strncmp(a, "--", 2) != 0) opt_fail(cmd, "unexpected argument '%s'%s", a, "");
        if (i + 1 >= argc) opt_fail(cmd, "%s needs a value%s", a, "");
        const char *v = argv[++i];
        if (!strcmp(a, "--model")) {
            if (strcmp(v, "mlp") != 0) opt_fail(cmd, "--model: unknown model '%s'%s (known: mlp)", v, "");
            snprintf(o->model, sizeof o->model, "%s", v);
        } else if (!strcmp(a, "--data")) {
            if (strlen(v) >= sizeof o->data) opt_fail(cmd, "--data: path too long%s%s", "", "");
            snprintf(o->data, sizeof o->data, "%s", v);
        } else if (!strcmp(a, "--epochs")) {
            o->epochs = (int)parse_long(cmd, a, v, 1, 100000);
        } else if (!strcmp(a, "--steps")) {
            o->steps = parse_long(cmd, a, v, 1, LONG_MAX / 2);
        } else if (!strcmp(a, "--batch")) {
            o->batch = (int)parse_long(cmd, a, v, 1, 1 << 20);
        } else if (!strcmp(a, "--lr")) {
            o->lr = parse_float(cmd, a, v, 0.0f, 100.0f);
        } else if (!strcmp(a, "--momentum")) {
            o->momentum = parse_float(cmd, a, v, 0.0f, 0.9999f);
        } else if (!strcmp(a, "--wd")) {
            o->weight_decay = parse_float(cmd, a, v, 0.0f, 1.0f);
        } else if (!strcmp(a, "--label-smoothing")) {
            o->label_smoothing = parse_float(cmd, a, v, 0.0f, 1.0f);
        } else if (!strcmp(a, "--seed")) {
            o->seed = (uint64_t)parse_long(cmd, a, v, 0, LONG_MAX);
        } else if (!strcmp(a, "--log-every")) {
            o->log_every = (int)parse_long(cmd, a, v, 1, 1 << 30);
        } else if (!strcmp(a, "--log")) {
            snprintf(o->log_path, sizeof o->log_path, "%s", v);
        } else if (!strcmp(a, "--device")) {
            if (ctx_parse_device(v, &o->device, &o->device_id) != 0)
                opt_fail(cmd, "--device: '%s' is not cpu, cuda or cuda:N%s", v, "");
            o->device_given = 1;
        } else if (!strcmp(a, "--precision")) {
            if (strcmp(v, "fp32") && strcmp(v, "tf32"))
                opt_fail(cmd, "--precision: '%s' is not fp32 or tf32%s", v, "");
            snprintf(o->precision, sizeof o->precision, "%s", v);
        } else if (!strcmp(a, "--hidden")) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            o->n_hidden = 0;
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                if (o->n_hidden == 7) opt_fail(cmd, "--hidden: at most 7 hidden layers%s%s", "", "");
                o->hidden[o->n_hidden++] = (int)parse_long(cmd, a, tok, 1, 1 << 16);
            }
        } else {
            opt_fail(cmd, "unknown option '%s'%s", a, "");
        }
    }
}
