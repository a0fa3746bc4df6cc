/* train_cmd.c — `ctrain train` and `ctrain eval`: the training loop.
 *
 * The run (context, feed, model, trainer, data parallel) is built by
 * run_open (train/loop/run.h). Each optimizer step is trainer_step
 * (train/loop/step.h: accumulation, backward, unscale, clip, optimizer,
 * scaler update, zero grads).
 * The host waits for the device only when it reports (--log-every), so the
 * data for the next step is prepared while the GPU runs this one.
 *
 * The data figures of a report cover the interval since the previous one
 * (the difference of two FeedStats readings, train/feed/feed_types.h), so
 * warm-up, algorithm search and graph capture do not hide in an average:
 *   data N img/s     images the feed handed over / interval wall time
 *   capacity M       images / decoder busy time x its parallelism: what the
 *                    decoder could deliver if never held back
 *   wait P%          time the step loop blocked for a batch / interval wall
 *                    time (large: the data is the bottleneck)
 * --log writes them as data_images_per_s, data_capacity_per_s and
 * data_wait_frac, with cpu_fallback (images the GPU decoder left to the CPU,
 * so far); the config record names the decoder (decode). This process's
 * feed only (a data-parallel rank's share).
 */
#include "commands.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif
#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "engine/settings.h"
#include "train/io/atomic_file.h"
#include "train/io/checkpoint.h"
#include "train/io/jsonlog.h"
#include "train/io/safetensors.h"
#include "train/loop/eval.h"
#include "train/loop/grad_scaler.h"
#include "train/loop/progress.h"
#include "train/loop/run.h"
#include "train/loop/schedule.h"
#include "train/loop/step.h"
#include "train/parallel/dist.h"
#include "train/bench/bench_json.h"
#include "train/bench/nvml.h"
#include "train/bench/timeline.h"
#include "options.h"

/* The feed's statistics now; zeros and "none" for a feed without any. */
static void feed_stats_read(Feed *fd, FeedStats *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->decode, sizeof s->decode, "none");
    if (fd->stats) fd->stats(fd, s);
}

/* The interval between readings a and b, dt seconds of wall time. */
typedef struct {
    double images_per_s, capacity_per_s, wait_frac;
} DataRates;

static DataRates data_rates(const FeedStats *a, const FeedStats *b, double dt)
{
    DataRates r = {NAN, NAN, NAN};
    double n = (double)(b->images - a->images), busy = b->decode_s - a->decode_s;
    if (dt <= 0) return r;
    r.images_per_s = n / dt;
    r.wait_frac = fmin(1.0, fmax(0.0, (b->wait_s - a->wait_s) / dt));
    if (busy > 0) r.capacity_per_s = n / busy * (b->decode_parallel > 0 ? b->decode_parallel : 1);
    return r;
}

/* "ctrain train ARGS...", each argument as typed (after --flag=value split). */
static void command_line(char *out, size_t len, int argc, char **argv)
{
    size_t n = (size_t)snprintf(out, len, "ctrain train");
    for (int i = 0; i < argc && n < len; i++)
        n += (size_t)snprintf(out + n, len - n, " %s", argv[i]);
}

/* The environment settings this run was given (set in the environment, as
 * typed): "NAME=value NAME=value", "" when none. */
static void settings_given(char *out, size_t len)
{
    size_t n = 0;
    out[0] = 0;
    for (int id = 0; id < SET_COUNT && n < len; id++) {
        const char *t = setting_text((SettingId)id);
        if (t) n += (size_t)snprintf(out + n, len - n, "%s%s=%s", n ? " " : "",
                                     setting_name((SettingId)id), t);
    }
}

static void log_config(FILE *f, const TrainOptions *o, const Model *m, Feed *fd,
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
    feed_stats_read(fd, &fs);
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

/* --data mlm:SHARD: the evaluation scores masked tokens on the held-out tail */
static int is_mlm(const TrainOptions *o) { return !strncmp(o->data, "mlm:", 4); }

static void print_mlm_eval(const EvalResult *ev)
{
    printf("held-out masked LM: masked-token accuracy %.2f%% (top-5 %.2f%%)  loss %.4f  "
           "perplexity %.2f  (%ld masked tokens)\n", 100.0 * ev->top1, 100.0 * ev->top5,
           ev->loss, exp(ev->loss), ev->n);
    printf("most-common-token baseline %.2f%%\n", 100.0 * ev->majority);
}

/* --trace: what the graph machinery did for this step. */
static const char *graph_what(const Trainer *t, char *buf, size_t n)
{
    switch (t->graph.state) {
    case GRAPH_OFF: return "eager";
    case GRAPH_WARMUP: return "eager (graph warm-up)";
    case GRAPH_FAILED: return "eager (graph refused)";
    case GRAPH_ON: snprintf(buf, n, "graph replay #%ld", t->graph.replays); return buf;
    }
    return "?";
}

int cmd_train(int argc, char **argv)
{
    TrainOptions opts;
    train_options_default(&opts);
    if (ctx_cuda_available()) opts.device = DEV_CUDA;
    train_options_parse(&opts, argc, argv, "train");

    if (opts.save_every && !opts.save_path[0])
        ct_fatal_hint("pass --save FILE with --save-every N", "--save-every needs a file to write");
    if (opts.resume_change && !opts.resume_path[0])
        ct_fatal_hint("pass --resume FILE, or drop --resume-change",
                      "--resume-change lets a resumed run differ from its checkpoint; there is "
                      "no --resume");
    if (opts.resume_path[0] && opts.load_path[0])
        ct_fatal_hint("drop --load: --resume restores the weights too",
                      "--resume and --load both set the starting weights");
    if (opts.save_path[0]) {   /* a bad --save path is found now, not after the last step */
        char err[1400];
        if (st_probe_writable(opts.save_path, err, sizeof err) != ST_OK)
            ct_fatal_hint("check that the folder exists and is writable, or pass --save elsewhere",
                          "--save: %s", err);
    }
    int launched_rc;
    if (dist_launch_if_asked(&opts.dist, opts.device, "train", argc, argv, &launched_rc))   /* [dist] --gpus N */
        return launched_rc;
    Run r;
    RunSpec spec = {RUN_TRAIN, 1, NULL};   /* [dist] a rank: its GPU, rank 0 writes files */
    run_open(&r, &opts, &spec);
    const TrainOptions *o = &r.o;   /* as dist_setup left them */
    if (r.c.device == DEV_CUDA) r.tr.on_step = timeline_on_step;   /* CTRAIN_TIMELINE's window */
    Ctx *c = &r.c;
    Feed *fd = &r.fd;
    Model *m = &r.m;
    Trainer *tr = &r.tr;
    Dist *dist = r.dist;
    FILE *logf = r.log;
    long total = r.total_steps;
    long epochs = r.epochs;
    GradScaler *sc = &tr->scaler;
    LOG_I("train %s (%zu parameters) on %s; batch %d x accum %d, %ld steps (%ld epoch%s), %s, %s",
          m->name, m->params.total, fd->desc, o->batch, o->accum, total, epochs, epochs == 1 ? "" : "s",
          ctx_device_name(c), precision_name(o->precision));
    char cmdline[4096];
    command_line(cmdline, sizeof cmdline, argc, argv);
    if (logf) log_config(logf, o, m, fd, total, c, cmdline);
    if (logf && o->resume_path[0]) {   /* the log was appended to: say where this run took over */
        JsonLine j;
        json_begin(&j, "resume");
        json_str(&j, "from", o->resume_path);
        json_int(&j, "step", tr->step);
        json_int(&j, "micro", tr->micro);
        json_log(&j, logf, o->log_path);
    }

    Progress pg;
    progress_init(&pg);
    double t0 = progress_now(), t_last = t0;
    FeedStats ds_last, ds_now;
    feed_stats_read(fd, &ds_last);
    long step = tr->step, last_step = tr->step, first_step = tr->step, saved_step = -1;
    mem_reset_peak(c);
    long recomputed_before = c->recomputed;
    while (step < total) {
        trainer_step(tr);
        dist_step_done(dist);      /* [dist] the watchdog's progress marker */
        step = tr->step;
        float lr = tr->lr;
        if (o->trace) {
            /* what the mechanisms did this step; waits for the device, so
             * it is for watching, not for timing */
            float lv = trainer_loss_value(tr);
            ScalerState ss;
            scaler_read(&tr->scaler, &ss, NULL);
            char mb[32], pb[32], gb[64];
            printf("trace step %ld: loss %.6f lr %.6g | accum %d micro-batches | %s | "
                   "recomputed %ld segments | %s | mem %s peak %s\n", step, (double)lv, (double)lr,
                   o->accum,
                   tr->scaler.enabled ? (ss.found_inf ? "fp16 overflow: step SKIPPED, scale halved"
                                                     : "fp16 scale ok") : "no loss scaling",
                   c->recomputed - recomputed_before, graph_what(tr, gb, sizeof gb),
                   mem_fmt(mb, sizeof mb, c->mem.current),
                   mem_fmt(pb, sizeof pb, c->mem.peak));
            if (tr->scaler.enabled) printf("      scale %g, skipped so far %lld\n", (double)ss.scale,
                                          (long long)ss.skipped);
            recomputed_before = c->recomputed;
        }

        if (step % o->log_every == 0 || step == total) {
            /* the mean over the interval's micro-batches; waits; [dist] rank average */
            float lv = trainer_loss_interval(tr);
            ctx_check_flags(c);
            ScalerState ss;
            float gnorm = NAN;
            scaler_read(sc, &ss, o->clip > 0 ? &gnorm : NULL);
            if (!isfinite(lv) && !sc->enabled)
                ct_fatal_hint("lower --lr, add --warmup or --clip", "the loss became %g at step %ld",
                              (double)lv, step);
            double now = progress_now();
            double sps = (double)(step - last_step) * o->batch * o->accum * c->dp_world / (now - t_last);
            double eta = (now - t0) / (double)(step - first_step) * (double)(total - step);
            feed_stats_read(fd, &ds_now);
            DataRates dr = data_rates(&ds_last, &ds_now, now - t_last);
            char eb[32], mb[32], pb[32], db[96] = "", cb[40] = "", sb[64] = "";
            if (fd->stats) {
                if (isfinite(dr.capacity_per_s))
                    snprintf(cb, sizeof cb, " (capacity %.0f)", dr.capacity_per_s);
                snprintf(db, sizeof db, "  data %.0f img/s%s, wait %.0f%%", dr.images_per_s, cb,
                         100.0 * dr.wait_frac);
            }
            if (sc->enabled) snprintf(sb, sizeof sb, "  scale %g skipped %lld", (double)ss.scale,
                                      (long long)ss.skipped);
            progress_update(&pg, "epoch %ld/%ld  step %ld/%ld  loss %.4f  lr %.4g  %.0f samples/s%s%s  ETA %s  mem %s (peak %s)",
                            trainer_epoch(tr), epochs, step,
                            total, (double)lv, (double)lr, sps, db, sb,
                            progress_fmt_time(eb, sizeof eb, eta),
                            mem_fmt(mb, sizeof mb, c->mem.current), mem_fmt(pb, sizeof pb, c->mem.peak));
            if (logf) {
                JsonLine j;
                json_begin(&j, "step");
                json_int(&j, "step", step);
                json_int(&j, "epoch", trainer_epoch(tr));
                json_num(&j, "loss", lv);
                json_num(&j, "lr", lr);
                json_num(&j, "samples_per_s", sps);
                if (fd->stats) {
                    json_num(&j, "data_images_per_s", dr.images_per_s);
                    json_num(&j, "data_capacity_per_s", dr.capacity_per_s);
                    json_num(&j, "data_wait_frac", dr.wait_frac);
                    json_int(&j, "cpu_fallback", (int64_t)ds_now.cpu_fallback);
                }
                json_int(&j, "mem_bytes", (int64_t)c->mem.current);
                json_int(&j, "peak_mem_bytes", (int64_t)c->mem.peak);
                if (sc->enabled) {
                    json_num(&j, "loss_scale", ss.scale);
                    json_int(&j, "skipped_steps", (int64_t)ss.skipped);
                }
                if (o->clip > 0) json_num(&j, "grad_norm", gnorm);
                json_num(&j, "time_s", now - t0);
                json_log(&j, logf, o->log_path);
            }
            t_last = now;
            ds_last = ds_now;
            last_step = step;
        }
        tensor_release(tr->last_loss);   /* as soon as it has been read (or not) */
        tr->last_loss = NULL;
        dist_before_save(tr->dist, step, 0);   /* [dist] the sharded optimizer state, gathered */
        if (o->save_every && step % o->save_every == 0) {
            trainer_save(tr, o, o->save_path);
            saved_step = step;
        }
    }
    progress_done(&pg);
    ctx_sync(c);
    double train_s = progress_now() - t0;
    printf("trained %ld steps in %.1f s (%.0f samples/s), peak memory %.1f MiB\n", step - first_step,
           train_s, (double)(step - first_step) * o->batch * o->accum * c->dp_world / train_s, (double)c->mem.peak / (1024.0 * 1024.0));

    dist_before_save(tr->dist, step, 1);
    if (o->save_path[0] && o->save_every) {
        if (saved_step != step) trainer_save(tr, o, o->save_path);
        printf("saved %s (training checkpoint at step %ld)\n", o->save_path, step);
    } else if (o->save_path[0]) {
        char steps_s[32];
        snprintf(steps_s, sizeof steps_s, "%ld", step);
        const char *meta[] = {"model", model_kind_name(o->model), "steps", steps_s, "precision",
                              precision_name(o->precision)};
        ckpt_save_params_or_die(&m->params, o->save_path, meta, 3);
        printf("saved %s\n", o->save_path);
    }
    if (fd->has_eval && !o->no_eval) {
        EvalResult ev = evaluate(c, m, fd);
        if (is_mlm(o))
            print_mlm_eval(&ev);
        else {
            printf("test accuracy %.2f%% (top-5 %.2f%%)  test loss %.4f  (%ld %s)\n",
                   100.0 * ev.top1, 100.0 * ev.top5, ev.loss, ev.n,
                   fd->vocab_size ? "examples" : "images");
            printf("majority-class baseline %.2f%% (always the held-out split's most common "
                   "label)\n", 100.0 * ev.majority);
        }
        if (fd->class_names) eval_print_classes(&ev, fd->class_names);
        if (logf) {
            JsonLine j;
            json_begin(&j, "eval");
            json_str(&j, "split", "test");
            json_int(&j, "step", step);
            json_num(&j, "test_acc", ev.top1);
            json_num(&j, "test_top5", ev.top5);
            json_num(&j, "test_loss", ev.loss);
            json_num(&j, "majority_acc", ev.majority);
            if (is_mlm(o)) json_num(&j, "perplexity", exp(ev.loss));
            json_int(&j, "test_n", ev.n);
            json_num(&j, "train_time_s", train_s);
            json_int(&j, "peak_mem_bytes", (int64_t)c->mem.peak);
            json_log(&j, logf, o->log_path);
        }
        eval_result_free(&ev);
    } else if (dist_is_main(r.dist) && !o->no_eval) {
        printf("no evaluation: --data %s has no held-out split (an ImageFolder needs a val/ "
               "folder beside train/; synthetic data has none; an mlm: shard holds out 1%% of "
               "its sequences from 100 on)\n", o->data);
    }
    run_close(&r);                 /* [dist] barrier, then NCCL teardown; the log; the rest */
    return 0;
}

/* ctrain eval --json FILE: the result as one JSON object, written to a
 * temporary beside FILE and renamed over it, so a failed write never
 * replaces a good file. */
static void eval_write_json(const char *path, const TrainOptions *o, const Run *r,
                            const EvalResult *ev)
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
    json_str(&j, "data", r->fd.desc);
    json_str(&j, "precision", precision_name(o->precision));
    json_str(&j, "device", ctx_device_name(&r->c));
    json_str(&j, "revision", rev);
    json_num(&j, "top1", ev->top1);
    json_num(&j, "top5", ev->top5);
    json_num(&j, "loss", ev->loss);
    json_num(&j, "majority", ev->majority);
    if (is_mlm(o)) json_num(&j, "perplexity", exp(ev->loss));
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

int cmd_eval(int argc, char **argv)
{
    TrainOptions opts;
    train_options_default(&opts);
    if (ctx_cuda_available()) opts.device = DEV_CUDA;
    train_options_parse(&opts, argc, argv, "eval");
    if (!opts.load_path[0])
        ct_fatal_hint("pass --load FILE (a checkpoint written with --save, or a PyTorch state_dict "
                      "saved as safetensors)", "eval needs weights");
    Run r;
    RunSpec spec = {RUN_EVAL, 0, NULL};
    run_open(&r, &opts, &spec);
    const Feed *fd = &r.fd;
    EvalResult ev = evaluate(&r.c, &r.m, &r.fd);
    printf("%s on %s:\n", r.m.name, fd->desc);
    if (is_mlm(&opts))
        print_mlm_eval(&ev);
    else {
        printf("top-1 %.2f%%  top-5 %.2f%%  loss %.4f  (%ld %s)\n", 100.0 * ev.top1,
               100.0 * ev.top5, ev.loss, ev.n, fd->vocab_size ? "examples" : "images");
        printf("majority-class baseline %.2f%% (always the held-out split's most common "
               "label)\n", 100.0 * ev.majority);
    }
    if (fd->class_names) eval_print_classes(&ev, fd->class_names);
    if (opts.json_path[0]) eval_write_json(opts.json_path, &opts, &r, &ev);
    eval_result_free(&ev);
    run_close(&r);
    return 0;
}
