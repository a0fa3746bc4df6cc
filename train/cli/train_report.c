/* train_report.c — the config record, interval data rates and evaluation
 * reports of `ctrain train` / `ctrain eval` (the figures: train_report.h). */
#include "train_report.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif
#include "engine/error.h"
#include "engine/settings.h"
#include "engine/atomic_file.h"
#include "train/io/jsonlog.h"
#include "train/bench/bench_json.h"
#include "train/bench/nvml.h"

DataRates data_rates(const FeedStats *a, const FeedStats *b, double dt)
{
    DataRates r = {NAN, NAN, NAN};
    double n = (double)(b->images - a->images), busy = b->decode_s - a->decode_s;
    if (dt <= 0) return r;
    r.images_per_s = n / dt;
    /* the GPU's own stall where it was measured, else the host's wait */
    const double wait = b->gpu_wait_s >= 0 && a->gpu_wait_s >= 0 ? b->gpu_wait_s - a->gpu_wait_s
                                                                 : b->wait_s - a->wait_s;
    r.wait_frac = fmin(1.0, fmax(0.0, wait / dt));
    if (busy > 0) r.capacity_per_s = n / busy * (b->decode_parallel > 0 ? b->decode_parallel : 1);
    return r;
}

void feed_stats_skip(FeedStats *last, const FeedStats *pre, const FeedStats *post)
{
    last->images += post->images - pre->images;
    last->wait_s += post->wait_s - pre->wait_s;
    if (last->gpu_wait_s >= 0) last->gpu_wait_s += post->gpu_wait_s - pre->gpu_wait_s;
    last->decode_s += post->decode_s - pre->decode_s;
}

/* The environment settings this run was given (set in the environment, as
 * typed): "NAME=value NAME=value", "" when none. Other software's folders
 * (HOME, XDG_CACHE_HOME, TMPDIR) are left out: they say where files go,
 * not how the run computes, and every shell sets HOME. */
static void settings_given(char *out, size_t len)
{
    size_t n = 0;
    out[0] = 0;
    for (int id = 0; id < SET_COUNT && n < len; id++) {
        const Setting *info = setting_info((SettingId)id);
        if (info->audience == SA_FOREIGN && info->kind == SK_PATH) continue;
        if (setting_by_ctrain((SettingId)id)) continue;   /* ctrain's, not the user's */
        const char *t = setting_text((SettingId)id);
        if (t) n += (size_t)snprintf(out + n, len - n, "%s%s=%s", n ? " " : "",
                                     setting_name((SettingId)id), t);
    }
}

void log_config(FILE *f, const TrainOptions *o, const Model *m, Feed *fd,
                       long total_steps, const Ctx *c, const char *cmdline)
{
    JsonLine j;
    json_begin(&j, "config");
    char rev[64] = "", drv[64] = "", gpu[256] = "", env[2048];
    bench_revision(rev, sizeof rev);
    json_str(&j, "command", cmdline);
    json_str(&j, "revision", rev);
#ifdef CTRAIN_CUDA
    struct cudaDeviceProp p;
    if (c->device == DEV_CUDA && cudaGetDeviceProperties(&p, c->device_id) == cudaSuccess)
        snprintf(gpu, sizeof gpu, "%s", p.name);
    if (c->device == DEV_CUDA && nvml_init()) nvml_driver_version(drv, sizeof drv);
#endif
    json_str(&j, "gpu_name", gpu);
    json_str(&j, "driver", drv);
    settings_given(env, sizeof env);
    json_str(&j, "env", env);
    json_str(&j, "model", model_kind_name(o->model));
    json_str(&j, "data", o->data);
    json_str(&j, "data_desc", fd->desc);
    FeedStats fs;
    feed_stats_now(fd, &fs);
    json_str(&j, "decode", fs.decode);
    json_str(&j, "device", ctx_device_name(c));
    json_str(&j, "precision", precision_name(o->precision));
    json_str(&j, "optimizer", optim_name(o->optim.kind));
    json_str(&j, "schedule", sched_name(o->schedule));
    json_int(&j, "batch", o->batch);
    json_int(&j, "accum", o->accum);
    json_int(&j, "steps", total_steps);
    json_int(&j, "params", (int64_t)m->params.total);
    json_num(&j, "lr", o->lr);
    json_int(&j, "warmup", o->warmup);
    json_num(&j, "weight_decay", o->optim.weight_decay);
    json_num(&j, "label_smoothing", o->label_smoothing);
    json_int(&j, "recompute_every", o->recompute.every);
    json_int(&j, "seed", (int64_t)o->seed);
    json_log(&j, f, o->log_path);
}

int data_is_mlm(const TrainOptions *o) { return !strncmp(o->data, "mlm:", 4); }

void eval_print(const EvalResult *ev, const TrainOptions *o, const Feed *fd, const char *at)
{
    const char *unit = fd->vocab_size ? "examples" : "images";
    if (data_is_mlm(o)) {
        printf("%sheld-out masked LM: masked-token accuracy %.2f%% (top-5 %.2f%%)  loss %.4f  "
               "perplexity %.2f  (%ld masked tokens)\n", at ? at : "", 100.0 * ev->top1,
               100.0 * ev->top5, ev->loss, exp(ev->loss), ev->n);
        printf("most-common-token baseline %.2f%%\n", 100.0 * ev->majority);
    } else {
        if (at)
            printf("%stest accuracy %.2f%% (top-5 %.2f%%)  test loss %.4f  (%ld %s)\n", at,
                   100.0 * ev->top1, 100.0 * ev->top5, ev->loss, ev->n, unit);
        else
            printf("top-1 %.2f%%  top-5 %.2f%%  loss %.4f  (%ld %s)\n", 100.0 * ev->top1,
                   100.0 * ev->top5, ev->loss, ev->n, unit);
        printf("majority-class baseline %.2f%% (always the held-out split's most common "
               "label)\n", 100.0 * ev->majority);
    }
    if (fd->class_names) eval_print_classes(ev, fd->class_names);
    fflush(stdout);
}

void eval_log(FILE *f, const TrainOptions *o, const EvalResult *ev, long step, int final,
              double train_s, size_t peak_bytes)
{
    JsonLine j;
    json_begin(&j, "eval");
    json_str(&j, "split", "test");
    json_int(&j, "step", step);
    json_int(&j, "final", final);
    json_num(&j, "test_acc", ev->top1);
    json_num(&j, "test_top5", ev->top5);
    json_num(&j, "test_loss", ev->loss);
    json_num(&j, "majority_acc", ev->majority);
    if (data_is_mlm(o)) json_num(&j, "perplexity", exp(ev->loss));
    json_int(&j, "test_n", ev->n);
    if (final) {
        json_num(&j, "train_time_s", train_s);
        json_int(&j, "peak_mem_bytes", (int64_t)peak_bytes);
    }
    json_log(&j, f, o->log_path);
}

/* ctrain eval --json FILE: the result as one JSON object, written to a
 * temporary beside FILE and renamed over it, so a failed write never
 * replaces a good file. */
void eval_write_json(const char *path, const TrainOptions *o, const char *data_desc,
                     const char *device, const EvalResult *ev)
{
    char tmp[600], err[700];
    FILE *f = atomic_file_open(path, tmp, sizeof tmp, err, sizeof err);
    if (!f) ct_fatal_hint("check that the folder exists and is writable", "--json: %s", err);
    char rev[64] = "";
    bench_revision(rev, sizeof rev);
    JsonLine j;
    json_begin(&j, "eval");
    json_str(&j, "model", model_kind_name(o->model));
    json_str(&j, "weights", o->load_path);
    json_str(&j, "data", data_desc);
    json_str(&j, "precision", precision_name(o->precision));
    json_str(&j, "device", device);
    json_str(&j, "revision", rev);
    json_num(&j, "top1", ev->top1);
    json_num(&j, "top5", ev->top5);
    json_num(&j, "loss", ev->loss);
    json_num(&j, "majority", ev->majority);
    if (data_is_mlm(o)) json_num(&j, "perplexity", exp(ev->loss));
    json_int(&j, "n", ev->n);
    const int bad = json_end(&j, f) != 0;
    if (bad) {
        fclose(f);
        remove(tmp);
        ct_fatal_hint("check the disk space and the folder", "--json: cannot write %s: %s", path,
                      strerror(errno));
    }
    if (atomic_file_commit(f, tmp, path, err, sizeof err) != 0)
        ct_fatal_hint("check the disk space and the folder", "--json: %s", err);
    printf("wrote %s\n", path);
}
