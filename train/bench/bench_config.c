/* bench_config.c — a config's row, label, shape, training options and FLOPs
 * (bench_config.h); the parent and the child agree on all of them. */
#include "bench_config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "engine/mem.h"
#include "models/resnet.h"
#include "train/loop/model_build.h"

void bench_row_peak_at(BenchRow *row, const Ctx *c)
{
    mem_peak_place(c, row->live_peak_at, sizeof row->live_peak_at);
    bench_row_fix(row);
}

void bench_row_fix(BenchRow *row)
{
    BenchResult *r = &row->r;
    r->model = row->model;
    r->precision = row->precision;
    r->layout = row->layout[0] ? row->layout : NULL;
    r->mode = row->mode[0] ? row->mode : NULL;
    r->throttle = row->throttle[0] ? row->throttle : NULL;
    r->error = row->error[0] ? row->error : NULL;
    r->data = row->data[0] ? row->data : NULL;
    r->decode = row->decode[0] ? row->decode : NULL;
    r->decoder = row->decoder[0] ? row->decoder : NULL;
    r->model_note = row->model_note[0] ? row->model_note : NULL;
    r->live_peak_at = row->live_peak_at[0] ? row->live_peak_at : NULL;
}

int bench_config_unsupported(const BenchConfig *cfg, int cc, const char *gpu_name, char *why,
                             size_t len)
{
    if (cfg->precision != PREC_FP8) return 0;
    if (!model_kind_is_bert(cfg->model)) {
        snprintf(why, len, BENCH_UNSUPPORTED ": %s has no FP8 Linear layers (BERT's encoder has)",
                 model_kind_name(cfg->model));
        return 1;
    }
    if (cfg->device == DEV_CUDA && cc >= 0 && cc < 89) {
        snprintf(why, len, BENCH_UNSUPPORTED ": %s (sm_%d) has no FP8 tensor cores (sm_89 and "
                 "later)", gpu_name[0] ? gpu_name : "this GPU", cc);
        return 1;
    }
    return 0;
}

void bench_row_init(BenchRow *row, const BenchConfig *cfg)
{
    memset(row, 0, sizeof *row);
    bench_result_init(&row->r);
    row->engine_peak_mem_bytes = NAN;
    row->elapsed_s = NAN;
    row->pcie_gen_busy = row->pcie_width_busy = -1;
    bench_config_model_note(cfg, row->model_note, sizeof row->model_note);
    bench_config_label(cfg, row->label, sizeof row->label);
    snprintf(row->model, sizeof row->model, "%s", model_kind_name(cfg->model));
    snprintf(row->precision, sizeof row->precision, "%s", precision_name(cfg->precision));
    /* the recompute policy has no field of its own in the schema: it names the mode */
    char rec[32] = "";  /* " recompute-every:" and an int: 29 at most */
    if (cfg->recompute.every == 1) snprintf(rec, sizeof rec, " recompute-all");
    else if (cfg->recompute.every > 1) snprintf(rec, sizeof rec, " recompute-every:%d", cfg->recompute.every);
    char dp[24] = "";   /* data parallel: "graph dp-x2", "graph dp-x2-bf16" (--grad-reduce) */
    if (cfg->gpus > 1)
        snprintf(dp, sizeof dp, " dp-x%d%s", cfg->gpus, cfg->grad_reduce == DT_BF16 ? "-bf16" : "");
    /* mode[64] holds "graph", dp (23) and rec (31) whole */
    snprintf(row->mode, sizeof row->mode, "%s%s%s",
             cfg->device == DEV_CPU ? "cpu" : cfg->graph ? "graph" : "eager", dp, rec);
    if (model_kind_is_resnet(cfg->model)) snprintf(row->layout, sizeof row->layout, "nhwc");
    row->r.batch = cfg->batch;
    row->r.seq = cfg->seq > 0 ? cfg->seq : -1;
    row->r.image_size = cfg->image_size > 0 ? cfg->image_size : -1;
    row->r.warmup = cfg->warmup;
    row->recompute_every = cfg->recompute.every;
    snprintf(row->data, sizeof row->data, "%s", cfg->data[0] ? cfg->data : "synthetic");
    if (cfg->data[0]) {
        snprintf(row->decode, sizeof row->decode, "%s", cfg->decode);
        row->r.workers = cfg->workers;
    }
    bench_row_fix(row);
}

void bench_config_model(BenchConfig *c, ModelKind model, int image_size, int cpu)
{
    c->model = model;
    c->seq = 0;
    c->image_size = 0;
    c->width = 0;
    c->classes = 0;
    if (model_kind_is_resnet(model)) {
        c->image_size = image_size;
        if (cpu && model == MODEL_RESNET18) {
            c->width = 16;
            c->classes = 10;
            c->image_size = image_size != 224 ? image_size : 32;
        }
    }
}

const char *bench_config_model_note(const BenchConfig *c, char *buf, size_t len)
{
    buf[0] = 0;
    int depth = model_kind_resnet_depth(c->model);
    if (depth <= 0) return buf;   /* the MLP and BERT run as named */
    ResNetConfig base;
    resnet_config_default(&base, depth);
    if (!c->width || c->width == base.width) return buf;
    char classes[32] = "";
    if (c->classes > 0 && c->classes != base.classes) snprintf(classes, sizeof classes, ", %d classes", c->classes);
    snprintf(buf, len, "%s at width %d (base width %d)%s%s", model_kind_name(c->model), c->width,
             base.width, classes, c->device == DEV_CPU ? ", CPU bench" : "");
    return buf;
}

const char *bench_config_label(const BenchConfig *c, char *buf, size_t len)
{
    char extra[64] = "", rec[32] = "";
    if (c->seq) snprintf(extra, sizeof extra, " seq %d", c->seq);
    else if (c->image_size && c->image_size != 224) snprintf(extra, sizeof extra, " %dpx", c->image_size);
    if (c->recompute.every == 1) snprintf(rec, sizeof rec, " recompute all");
    else if (c->recompute.every > 1) snprintf(rec, sizeof rec, " recompute every:%d", c->recompute.every);
    char gpus[48] = "";
    if (c->gpus > 1)
        snprintf(gpus, sizeof gpus, " on %d GPUs%s", c->gpus,
                 c->grad_reduce == DT_BF16 ? " (bf16 all-reduce)" : "");
    char data[32] = "";
    if (c->data[0]) snprintf(data, sizeof data, ", real data (decode %s)", c->decode);
    snprintf(buf, len, "%s %s bs %d%s%s%s%s", model_kind_name(c->model), precision_name(c->precision),
             c->batch, extra, rec, gpus, data);
    return buf;
}

void bench_train_options(const BenchConfig *cfg, TrainOptions *o)
{
    train_options_default(o);
    o->model = cfg->model;
    snprintf(o->data, sizeof o->data, "%s", cfg->data[0] ? cfg->data : "synthetic");
    o->precision = cfg->precision;
    o->batch = cfg->batch;
    o->seq = cfg->seq > 0 ? cfg->seq : 128;
    o->image_size = cfg->image_size;
    o->width = cfg->width;
    o->classes = cfg->classes;
    o->recompute = cfg->recompute;
    o->device = cfg->device;
    o->device_id = cfg->device_id;
    o->steps = cfg->warmup + cfg->steps;
    o->workers = cfg->data[0] && cfg->workers > 0 ? cfg->workers : 1;
    if (cfg->data[0]) snprintf(o->decode, sizeof o->decode, "%s", cfg->decode);
    o->dist.grad_reduce = cfg->grad_reduce;
    /* the capture happens at the start of the last warm-up step, so every
     * timed step is a replay */
    o->graph = cfg->graph && cfg->warmup >= 2;
    o->graph_warmup = cfg->warmup - 1;
    if (model_kind_is_bert(cfg->model)) {
        o->optim.kind = OPT_ADAMW;
        o->lr = 1e-4f;
        o->optim.weight_decay = 0.01f;
    } else {
        o->optim.kind = OPT_SGD;
        o->lr = 0.1f;
        o->optim.momentum = 0.9f;
        o->optim.weight_decay = 1e-4f;
    }
}

double bench_config_flops(const BenchConfig *cfg)
{
    TrainOptions o;
    bench_train_options(cfg, &o);
    return model_train_flops_per_sample(&o, cfg->classes);
}
