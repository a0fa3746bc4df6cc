/* train_cmd.c — `ctrain train` and `ctrain eval`: the training loop.
 *
 * The run (context, feed, model, trainer, data parallel) is built by
 * run_open (train/loop/run.h). Each optimizer step is trainer_step
 * (train/loop/step.h: accumulation, backward, unscale, clip, optimizer,
 * scaler update, zero grads).
 * The host prepares the next step's data while the GPU runs this one; it
 * waits for the device only when it reports: every --log-every
 * steps (the interval's mean loss is read), and on a terminal when the
 * progress line is redrawn between reports (at most twice a second, so the
 * rate and ETA it shows are the device's, not the host's queue).
 * --eval-every N evaluates on the held-out split every N steps; its time is
 * left out of the throughput and the ETA. What is printed and logged:
 * train_report.h.
 */
#include "commands.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"
#include "ops/fp8_recipe.h"
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
#include "train/bench/cli_opts.h"
#include "train/bench/timeline.h"
#include "options.h"
#include "train_report.h"

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
    if (dist_is_main(r.dist)) train_options_warn_unused(o, c->device, c->dp_world, r.fd.has_eval);
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
    cli_command_line(cmdline, sizeof cmdline, "train", argc, argv);
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
    feed_stats_now(fd, &ds_last);
    long step = tr->step, last_step = tr->step, first_step = tr->step, saved_step = -1;
    mem_reset_peak(c);
    long recomputed_before = c->recomputed;
    float lv_shown = NAN;            /* the last interval's mean loss, for the redraws */
    double drawn_at = t0;
    const int eval_during = o->eval_every > 0 && fd->has_eval && !o->no_eval;
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
            if (m->fp8) {   /* the next step's scales of the first FP8 layer */
                Fp8TensorState sx, sw, sg;
                fp8_recipe_read(m->fp8, 0, 0, &sx);
                fp8_recipe_read(m->fp8, 0, 1, &sw);
                fp8_recipe_read(m->fp8, 1, 0, &sg);
                printf("      fp8 scales of the first FP8 layer: x %g, w %g, dy %g; tensors "
                       "overflowed so far %d\n", (double)sx.scale, (double)sw.scale,
                       (double)sg.scale, fp8_recipe_overflows(m->fp8));
            }
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
            feed_stats_now(fd, &ds_now);
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
            lv_shown = lv;
            drawn_at = now;
        } else if (pg.tty && progress_now() - drawn_at >= 0.5) {
            /* between reports: the device's pace (one wait), the last interval's loss */
            ctx_sync(c);
            double now = progress_now(), eta = (now - t0) / (double)(step - first_step)
                                                 * (double)(total - step);
            double sps = (double)(step - last_step) * o->batch * o->accum * c->dp_world
                         / (now - t_last);
            char eb[32], lb[32] = "";
            if (isfinite(lv_shown)) snprintf(lb, sizeof lb, "  loss %.4f", (double)lv_shown);
            progress_update(&pg, "epoch %ld/%ld  step %ld/%ld%s  lr %.4g  %.0f samples/s  ETA %s",
                            trainer_epoch(tr), epochs, step, total, lb, (double)lr, sps,
                            progress_fmt_time(eb, sizeof eb, eta));
            drawn_at = now;
        }
        if (eval_during && step % o->eval_every == 0 && step < total) {
            /* its time and memory are not training's: the rate, the ETA and the peak
             * skip them (the steps queued before it finish first) */
            ctx_sync(c);
            const double e0 = progress_now();
            const size_t peak = c->mem.peak;
            FeedStats pre, post;
            feed_stats_now(fd, &pre);
            progress_done(&pg);
            EvalResult ev = evaluate(c, m, fd);
            char at[48];
            snprintf(at, sizeof at, "step %ld: ", step);
            eval_print(&ev, o, fd, at);
            if (logf) eval_log(logf, o, &ev, step, 0, 0.0, 0);
            eval_result_free(&ev);
            feed_stats_now(fd, &post);
            feed_stats_skip(&ds_last, &pre, &post);
            c->mem.peak = peak;
            const double spent = progress_now() - e0;
            t0 += spent;
            t_last += spent;
            drawn_at = progress_now();
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
    char place[96];
    printf("trained %ld steps in %.1f s (%.0f samples/s), peak memory %.1f MiB (%s)\n",
           step - first_step, train_s,
           (double)(step - first_step) * o->batch * o->accum * c->dp_world / train_s,
           (double)c->mem.peak / (1024.0 * 1024.0), mem_peak_place(c, place, sizeof place));

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
        eval_print(&ev, o, fd, "");
        if (logf) eval_log(logf, o, &ev, step, 1, train_s, c->mem.peak);
        eval_result_free(&ev);
    } else if (dist_is_main(r.dist) && !o->no_eval) {
        printf("no evaluation: --data %s has no held-out split (an ImageFolder needs a val/ "
               "folder beside train/; synthetic data has none; an mlm: shard holds out 1%% of "
               "its sequences from 100 on)\n", o->data);
    }
    run_close(&r);                 /* [dist] barrier, then NCCL teardown; the log; the rest */
    return 0;
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
    train_options_warn_unused(&opts, r.c.device, 1, r.fd.has_eval);
    if (r.m.fp8) {
        /* a weights-only file carries no FP8 scales: one pass over the held-out split
         * records the amaxes, one recipe step turns them into scales */
        r.m.fp8->calibrating = 1;
        EvalResult cal = evaluate(&r.c, &r.m, &r.fd);
        eval_result_free(&cal);
        r.m.fp8->calibrating = 0;
        fp8_recipe_step(&r.c, r.m.fp8);
        LOG_I("--precision fp8: the scales calibrated on one pass over the held-out split "
              "(the weights file carries none)");
    }
    const Feed *fd = &r.fd;
    EvalResult ev = evaluate(&r.c, &r.m, &r.fd);
    printf("%s on %s:\n", r.m.name, fd->desc);
    eval_print(&ev, &opts, fd, NULL);
    if (opts.json_path[0]) eval_write_json(opts.json_path, &opts, r.fd.desc, ctx_device_name(&r.c), &ev);
    eval_result_free(&ev);
    run_close(&r);
    return 0;
}
