/* test_cli.c — the ctrain command end to end on the CPU backend:
 *   - the MLP trains one epoch on real Fashion-MNIST: the logged loss falls
 *     and test accuracy is >= 80% (the bar), read from --log JSONL;
 *   - bad input ends with one clear message and exit status 1: unknown flag,
 *     bad number, missing data folder, corrupt data file, unknown command,
 *     a --grad-reduce that is not f32 or bf16;
 *   - number messages say what is wrong with the text typed: not a number,
 *     out of range (with the range; overflowing 64 bits too), too small for
 *     f32; --steps beyond 10^12 is refused and the largest prints its epochs
 *     right; --resume-change names are checked;
 *   - `ctrain report` on a file that is not bench JSON (not UTF-8, empty,
 *     an array, fields of the wrong type, nested too deeply, plain text)
 *     names the file and the cause and exits 1, without a traceback;
 *   - a --log write that fails (to /dev/full: every write is ENOSPC) stops
 *     the run at once, naming the file and the cause; json_end reports it;
 *   - ResNet18 trains on a small generated JPEG ImageFolder with --decode
 *     cpu: the progress line shows the data rate, capacity and wait; the
 *     log's config names the decoder and every step record has
 *     data_images_per_s > 0, data_capacity_per_s > 0, data_wait_frac in
 *     [0, 1] and cpu_fallback 0; --decode gpu on the CPU and on synthetic
 *     data, and an unknown --decode, are refused with a message and a hint;
 *   - option parsing (getopt_long): --flag value and --flag=value give the
 *     same options; an abbreviation, a value on a switch, a stray word and
 *     a clustered -h are refused naming what was typed, in every command;
 *     --eval-every N is train's, refused by eval; report's --label=F=NAME
 *     keeps NAME; every command's --help and -h print the usage, exit 0.
 * Runs build/ctrain (CTRAIN_BIN overrides) from the repository root.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <errno.h>
#include <sys/stat.h>
#include "check.h"
#include "cli_util.h"
#include "jpeg_fixture.h"
#include "train/cli/options.h"
#include "train/io/jsonlog.h"

static double json_field(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? atof(p + strlen(pat)) : NAN;
}

static void test_mlp_epoch(void)
{
    char dir[] = "/tmp/ctrain_cli_XXXXXX", cmd[2048], log[512], out[8192];
    if (!mkdtemp(dir)) { check_true("mlp.tmpdir", 0, "mkdtemp failed"); return; }
    snprintf(log, sizeof log, "%s/log.jsonl", dir);
    snprintf(cmd, sizeof cmd, "%s train --model mlp --data fashion-mnist --epochs 1 --device cpu "
             "--log-every 10 --log %s 2>&1", bin(), log);
    int st = run(cmd, out, sizeof out);
    printf("%s", out);
    check_true("mlp.exit_status", st == 0, "ctrain train exited with %d", st);
    FILE *f = fopen(log, "r");
    if (!f) { check_true("mlp.log_written", 0, "no log file at %s", log); return; }
    char line[4096];
    double first = NAN, last = NAN, acc = NAN, test_loss = NAN, tail[10] = {0};
    int steps = 0, has_fields = 1;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "\"event\":\"step\"")) {
            double l = json_field(line, "loss");
            if (steps == 0) first = l;
            tail[steps % 10] = l;
            steps++;
            if (isnan(json_field(line, "samples_per_s")) || isnan(json_field(line, "mem_bytes")) ||
                isnan(json_field(line, "lr")) || isnan(json_field(line, "epoch")))
                has_fields = 0;
        } else if (strstr(line, "\"event\":\"eval\"")) {
            acc = json_field(line, "test_acc");
            test_loss = json_field(line, "test_loss");
        }
    }
    fclose(f);
    last = 0;
    for (int i = 0; i < 10; i++) last += tail[i] / 10.0;   /* mean of the last 10 records */
    check_true("mlp.log_steps", steps >= 90, "%d step records", steps);
    check_true("mlp.log_fields", has_fields, "a step record lacks loss/lr/samples_per_s/mem_bytes/epoch");
    check_true("mlp.loss_falls", last < 0.5 * first, "loss at step 10 %.4f, mean of the last 10 records %.4f", first, last);
    check_true("mlp.test_acc_80", acc >= 0.80, "test accuracy %.4f after one epoch (want >= 0.80)", acc);
    check_true("mlp.test_loss", test_loss > 0 && test_loss < 0.7, "test loss %.4f", test_loss);
    printf("  mlp one epoch on CPU: loss %.4f -> %.4f, test accuracy %.2f%%\n", first, last, 100 * acc);
    unlink(log);
    rmdir(dir);
}

static void expect_error(const char *name, const char *args, const char *want1, const char *want2)
{
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin(), args);
    int st = run(cmd, out, sizeof out);
    check_true(name, st == 1 && strstr(out, want1) && (!want2 || strstr(out, want2)) &&
               !strstr(out, "Segmentation"),
               "exit %d, wanted \"%s\"%s%s, got: %s", st, want1, want2 ? " and " : "",
               want2 ? want2 : "", out);
}

static void test_bad_input(void)
{
    expect_error("cli.unknown_flag", "train --bogus 1 --device cpu", "unknown option '--bogus'", "hint:");
    expect_error("cli.bad_number", "train --batch 12x --device cpu", "--batch: '12x' is not a whole number", NULL);
    expect_error("cli.missing_value", "train --device cpu --lr", "--lr needs a value", NULL);
    expect_error("cli.eval_refuses_training_flags",
                 "eval --model mlp --device cpu --load x.safetensors --optim lamb --lr 7",
                 "--optim is a training flag: ctrain eval does not take it", "hint:");
    expect_error("cli.eval_refuses_log", "eval --device cpu --log e.jsonl --load x",
                 "--log is a training flag", NULL);
    /* --flag=value: the same parser, the same messages */
    expect_error("cli.equals.unknown_flag", "train --bogus=1 --device=cpu",
                 "unknown option '--bogus'", "hint:");
    expect_error("cli.equals.bad_number", "train --device=cpu --batch=12x",
                 "--batch: '12x' is not a whole number", NULL);
    {
        char cmd[512], out[4096];
        snprintf(cmd, sizeof cmd, "%s train --device=cpu --model=resnet18 --data=synthetic "
                 "--image-size=16 --classes=10 --batch=2 --steps=1 --lr=0.25 2>&1", bin());
        const int st = run(cmd, out, sizeof out);
        check_true("cli.equals.train_runs", st == 0 && strstr(out, "lr 0.25") &&
                   strstr(out, "trained 1 step"), "exit %d: %.300s", st, out);
        check_true("cli.no_heldout_split_said",
                   strstr(out, "no evaluation: --data synthetic has no held-out split") != NULL,
                   "%.300s", out);
    }
    {   /* the log's config record says how the run was started */
        char log[] = "/tmp/ctrain_cfg_XXXXXX", cmd[512], out[4096];
        const int fd = mkstemp(log);
        if (fd >= 0) close(fd);
        /* (make test sets CTRAIN_SCRIPTS for a build outside the checkout) */
        snprintf(cmd, sizeof cmd, "env -u CTRAIN_SCRIPTS CTRAIN_LOG=info %s train --device cpu "
                 "--model mlp --batch 8 "
                 "--steps 1 --log %s > /dev/null 2>&1; head -n 1 %s", bin(), log, log);
        const int st = run(cmd, out, sizeof out);
        char want[300];
        snprintf(want, sizeof want, "\"command\":\"ctrain train --device cpu --model mlp "
                 "--batch 8 --steps 1 --log %s\"", log);
        check_true("cli.log_config_command", st == 0 && strstr(out, "\"event\":\"config\"") &&
                   strstr(out, want) && strstr(out, "\"revision\":\"") &&
                   strstr(out, "\"env\":\"CTRAIN_LOG=info\"") && strstr(out, "\"gpu_name\""),
                   "%.500s", out);
        unlink(log);
    }
    {   /* --load into a ResNet with another class count: a new fc, said */
        char ck[] = "/tmp/ctrain_head_XXXXXX", cmd[768], out[4096];
        const int fd = mkstemp(ck);
        if (fd >= 0) close(fd);
        snprintf(cmd, sizeof cmd, "%s train --device cpu --model resnet18 --data synthetic "
                 "--image-size 16 --classes 10 --batch 2 --steps 1 --save %s > /dev/null 2>&1 && "
                 "%s train --device cpu --model resnet18 --data synthetic --image-size 16 "
                 "--classes 5 --batch 2 --steps 1 --load %s 2>&1", bin(), ck, bin(), ck);
        const int st = run(cmd, out, sizeof out);
        check_true("cli.load_new_head", st == 0 && strstr(out, "fc.weight head of 10 classes, "
                   "this model 5") && strstr(out, "trained 1 step"), "exit %d: %.400s", st, out);
        unlink(ck);
    }
    {   /* ctrain export: a training checkpoint's weights alone, loadable strictly */
        static char exe[4096];
        char dir[] = "/tmp/ctrain_export_XXXXXX", cmd[16384], out[4096];
        if (mkdtemp(dir) && realpath(bin(), exe)) {
            snprintf(cmd, sizeof cmd, "cd %s && %s train --device cpu --model mlp --hidden 32 "
                     "--batch 8 --steps 2 --save ck.safetensors --save-every 1 > /dev/null 2>&1 "
                     "&& %s export ck.safetensors w.safetensors 2>&1 && %s eval --device cpu "
                     "--model mlp --hidden 32 --load w.safetensors 2>&1", dir, exe, exe,
                     exe);
            int st = run(cmd, out, sizeof out);
            check_true("cli.export.runs", st == 0 && strstr(out, "exported 4 tensors") &&
                       strstr(out, "left out") && strstr(out, "top-1"), "exit %d: %.400s", st,
                       out);
            snprintf(cmd, sizeof cmd, "%s/w.safetensors", dir);
            size_t len = 0;
            FILE *f = fopen(cmd, "rb");
            char head[4096] = "";
            if (f) { len = fread(head, 1, sizeof head - 1, f); fclose(f); }
            head[len] = 0;
            check_true("cli.export.no_training_state", len > 8 && strstr(head + 8, "fc1.weight") &&
                       !strstr(head + 8, "__ctrain"), "%zu bytes read", len);
            snprintf(cmd, sizeof cmd, "cd %s && %s eval --device cpu --model mlp --hidden 32 "
                     "--load w.safetensors --json e.json > /dev/null 2>&1 && cat e.json && "
                     "ls", dir, exe);
            st = run(cmd, out, sizeof out);
            check_true("cli.eval_json", st == 0 && strstr(out, "{\"event\":\"eval\"") &&
                       strstr(out, "\"top1\":") && strstr(out, "\"n\":10000") &&
                       !strstr(out, ".tmp."), "exit %d: %.400s", st, out);
            expect_error("cli.train_refuses_json", "train --device cpu --json x.json",
                         "--json is ctrain eval's", NULL);
            snprintf(cmd, sizeof cmd, "cd %s && %s export ck.safetensors 2>&1", dir, exe);
            st = run(cmd, out, sizeof out);
            check_true("cli.export.needs_two_files", st == 1 && strstr(out, "hint:"), "exit %d: %s",
                       st, out);
            snprintf(cmd, sizeof cmd, "cd %s && %s export nope.safetensors x.safetensors 2>&1; "
                     "ls x.safetensors 2>&1", dir, exe);
            st = run(cmd, out, sizeof out);
            check_true("cli.export.missing_input", strstr(out, "nope.safetensors") &&
                       strstr(out, "No such file"), "%s", out);
            snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
            if (system(cmd) != 0) printf("  (could not remove %s)\n", dir);
        }
    }
    {   /* scripts/plot_log.py on two logs: a PNG and an SVG, or the package to install */
        char dir[] = "/tmp/ctrain_plot_XXXXXX", cmd[2048], out[4096];
        if (mkdtemp(dir)) {
            snprintf(cmd, sizeof cmd, "for lr in 0.05 0.1; do %s train --device cpu --model mlp "
                     "--hidden 16 --batch 8 --steps 6 --log-every 2 --lr $lr --log %s/r$lr.jsonl "
                     "> /dev/null 2>&1 || exit 9; done; printf '{\"event\":\"config\"}\\n' > "
                     "%s/empty.jsonl; py=python3; /usr/bin/python3 -c 'import matplotlib' "
                     "2>/dev/null && py=/usr/bin/python3; $py scripts/plot_log.py %s/r0.05.jsonl "
                     "%s/r0.1.jsonl --out %s/c.png 2>&1; echo \"status $?\"; $py "
                     "scripts/plot_log.py %s/empty.jsonl --out %s/e.png 2>&1; echo \"status $?\"",
                     bin(), dir, dir, dir, dir, dir, dir, dir);
            run(cmd, out, sizeof out);
            char png[256], svg[256];
            snprintf(png, sizeof png, "%s/c.png", dir);
            snprintf(svg, sizeof svg, "%s/c.svg", dir);
            unsigned char sig[8] = {0};
            FILE *f = fopen(png, "rb");
            if (f) { if (fread(sig, 1, 8, f) != 8) sig[0] = 0; fclose(f); }
            const int drew = strstr(out, "wrote") && strstr(out, "status 0") &&
                             !memcmp(sig, "\x89PNG\r\n\x1a\n", 8) && access(svg, R_OK) == 0;
            const int said = strstr(out, "python3-matplotlib") && strstr(out, "status 2");
            check_true("plot_log.curves_or_package_named", drew || said, "%.500s", out);
            check_true("plot_log.no_steps_refused", strstr(out, "has no step records") &&
                       strstr(out, "status 1"), "%.500s", out);
            snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
            if (system(cmd) != 0) printf("  (could not remove %s)\n", dir);
        }
    }
    {   /* on a 40-column terminal (script(1) gives one) the progress line fits 39 */
        char cmd[512], out[4096];
        snprintf(cmd, sizeof cmd, "command -v script > /dev/null || { echo no-script; exit 0; }; "
                 "script -qc 'stty cols 40; %s train --device cpu --steps 2 --batch 8 "
                 "--log-every 1' /dev/null 2>&1 | tr '\\r' '\\n' | grep 'step 2/2'", bin());
        run(cmd, out, sizeof out);
        if (strstr(out, "no-script")) {
            printf("  skip cli.progress_fits_terminal: script(1) is not installed\n");
        } else {
            const char *l = strstr(out, "epoch 1/1");
            size_t n = l ? strcspn(l, "\n") : 0;
            check_true("cli.progress_fits_terminal", l && n > 10 && n <= 39, "%zu columns: %.200s",
                       n, out);
        }
    }
    {   /* --no-eval: no evaluation at the end, and nothing said about one */
        char cmd[512], out[4096];
        snprintf(cmd, sizeof cmd, "%s train --device cpu --model mlp --hidden 16 --batch 8 "
                 "--steps 1 --no-eval 2>&1", bin());
        const int st = run(cmd, out, sizeof out);
        check_true("cli.no_eval", st == 0 && strstr(out, "trained 1 step") &&
                   !strstr(out, "test accuracy") && !strstr(out, "no evaluation"),
                   "exit %d: %.300s", st, out);
        expect_error("cli.eval_refuses_no_eval", "eval --device cpu --no-eval --load x",
                     "--no-eval is a training flag", NULL);
    }
    {   /* the logged loss is the mean of the interval's micro-batches: with
         * --log-every 2, the mean of the two steps' losses that --trace
         * prints one by one (accumulation 1: a step's loss is its one
         * micro-batch's) */
        char cmd[1024], out[8192];
        snprintf(cmd, sizeof cmd, "%s train --device cpu --model mlp --hidden 16 --batch 8 "
                 "--steps 4 --log-every 2 --trace 2>&1 | grep -E '^(trace step|epoch)'", bin());
        run(cmd, out, sizeof out);
        double tr[5] = {0}, logged[5] = {0};
        for (const char *p = out; (p = strstr(p, "trace step ")); p++) {
            int st;
            double v;
            if (sscanf(p, "trace step %d: loss %lf", &st, &v) == 2 && st >= 1 && st <= 4) tr[st] = v;
        }
        for (const char *p = out; (p = strstr(p, "step ")); p++) {
            int st, of;
            double v;
            if (sscanf(p, "step %d/%d  loss %lf", &st, &of, &v) == 3 && st >= 1 && st <= 4)
                logged[st] = v;
        }
        const double m12 = (tr[1] + tr[2]) / 2, m34 = (tr[3] + tr[4]) / 2;
        check_true("cli.logged_loss_is_interval_mean", tr[4] != 0 &&
                   fabs(logged[2] - m12) < 1e-4 && fabs(logged[4] - m34) < 1e-4 &&
                   fabs(logged[4] - tr[4]) > 1e-6, "steps 1-4 %g %g %g %g, logged %g %g", tr[1],
                   tr[2], tr[3], tr[4], logged[2], logged[4]);
    }
    {   /* flags without effect in this run are said */
        char cmd[512], out[4096];
        snprintf(cmd, sizeof cmd, "%s train --device cpu --model mlp --graph --recompute all "
                 "--batch 8 --steps 1 2>&1", bin());
        const int st = run(cmd, out, sizeof out);
        check_true("cli.no_effect_flags_warned", st == 0 &&
                   strstr(out, "--graph has no effect on the CPU") &&
                   strstr(out, "--recompute has no effect on the MLP"), "exit %d: %.400s", st,
                   out);
        /* one warning per idle flag, and none for the flags that act (--hidden on the MLP,
         * --momentum with SGD, --final-lr with cosine, --graph-warmup's is said once) */
        snprintf(cmd, sizeof cmd, "%s train --device cpu --model mlp --hidden 32 --batch 8 --steps 1 "
                 "--seq 64 --image-size 64 --decode cpu --workers 2 --bucket-mb 4 --graph-warmup 2 "
                 "--optim sgd --momentum 0.5 --schedule cosine --final-lr 0.001 --no-eval "
                 "--eval-batch 16 2>&1", bin());
        const int st2 = run(cmd, out, sizeof out);
        const char *said[] = {"--seq has no effect on this model: it is a BERT option",
                              "--image-size has no effect on this model: it is a ResNet option",
                              "--decode has no effect on this data",
                              "--workers has no effect on this data",
                              "--bucket-mb has no effect in one process",
                              "--graph-warmup has no effect here", "--eval-batch has no effect with --no-eval"};
        int all = st2 == 0;
        for (size_t i = 0; i < sizeof said / sizeof said[0]; i++) all = all && strstr(out, said[i]);
        check_true("cli.each_idle_flag_warned", all && !strstr(out, "--hidden has no effect") &&
                   !strstr(out, "--momentum has no effect") && !strstr(out, "--final-lr has no effect"),
                   "exit %d: %.1500s", st2, out);
    }
    expect_error("cli.unknown_model", "train --model vgg --device cpu", "unknown model 'vgg'", NULL);
    expect_error("cli.unknown_command", "fly", "unknown command 'fly'", "ctrain help");
    expect_error("cli.missing_data", "train --device cpu --data fashion-mnist:/nonexistent/fm",
                 "/nonexistent/fm", "hint:");
    expect_error("cli.bad_device", "train --device tpu", "--device: 'tpu'", NULL);
    expect_error("cli.hidden_empty", "train --device cpu --hidden ''", "--hidden '': a width is missing",
                 "hint:");
    expect_error("cli.hidden_commas", "train --device cpu --hidden ,,,", "--hidden ',,,': a width is missing",
                 "hint:");
    expect_error("cli.hidden_gap", "train --device cpu --hidden 64,,32", "a width is missing", NULL);
    expect_error("cli.bad_grad_reduce", "train --device cpu --grad-reduce fp8",
                 "--grad-reduce: 'fp8' is not f32 or bf16", "hint:");

    /* numbers: the message says what is wrong, quoting what was typed */
    expect_error("cli.lr_rounds_to_zero", "train --device cpu --lr 1e-50",
                 "--lr: '1e-50' is too small to hold in f32", "hint: pass 0 for none");
    expect_error("cli.lr_subnormal", "train --device cpu --lr 1e-40", "'1e-40' is too small", NULL);
    expect_error("cli.lr_not_a_number", "train --device cpu --lr abc", "--lr: 'abc' is not a number",
                 "hint:");
    expect_error("cli.lr_nan", "train --device cpu --lr nan", "--lr: 'nan' is not a number", NULL);
    expect_error("cli.lr_out_of_range", "train --device cpu --lr 101",
                 "--lr: '101' is out of range: it must be in [0, 100]", NULL);
    expect_error("cli.wd_overflow", "train --device cpu --wd 1e999",
                 "--wd: '1e999' is out of range: it must be in [0, 1]", NULL);
    expect_error("cli.batch_out_of_range", "train --device cpu --batch 99999999999",
                 "--batch: '99999999999' is out of range: it must be in 1..1048576", NULL);
    expect_error("cli.seed_overflow", "train --device cpu --seed 99999999999999999999",
                 "--seed: '99999999999999999999' is out of range", NULL);
    expect_error("cli.steps_beyond_max", "train --device cpu --steps 4611686018427387903",
                 "--steps: '4611686018427387903' is out of range: it must be in 1..1000000000000",
                 "hint:");
    expect_error("cli.device_id_range", "train --device cuda:4294967296",
                 "--device: 'cuda:4294967296': the GPU number is out of range (0..1023)", NULL);
    expect_error("cli.hidden_width_range", "train --device cpu --hidden 64,99999999999",
                 "--hidden: '99999999999' is out of range", NULL);
    /* the largest --steps: the epochs it spans are counted in 64 bits (an int
     * once printed 1215752192); /dev/full stops the run at its first record */
    if (access("/dev/full", W_OK) == 0)
        expect_error("cli.steps_max_epochs", "train --device cpu --steps 1000000000000 --batch 6000 "
                     "--log /dev/full", "1000000000000 steps (100000000000 epochs)", NULL);
    else
        printf("  skip cli.steps_max_epochs: no /dev/full to stop the run at its first record\n");
    /* --resume-change: names checked, and only with --resume */
    expect_error("cli.resume_change_unknown", "train --device cpu --resume-change steps,bogus",
                 "'bogus' is not an option a resumed run may change", "lr, schedule, warmup");
    expect_error("cli.resume_change_fixed", "train --device cpu --resume-change batch",
                 "'batch' is not an option a resumed run may change", NULL);
    expect_error("cli.resume_change_needs_resume", "train --device cpu --resume-change lr",
                 "there is no --resume", "hint: pass --resume FILE");

    /* a corrupt copy of the data set: one flipped byte in the middle */
    char dir[] = "/tmp/ctrain_cli_bad_XXXXXX", cmd[1024], out[4096];
    if (!mkdtemp(dir)) return;
    snprintf(cmd, sizeof cmd, "cp /usr/share/datasets/fashion-mnist/*.gz %s/ && "
             "printf '\\377\\377\\377\\377' | dd of=%s/train-images-idx3-ubyte.gz bs=1 seek=300000 "
             "conv=notrunc 2>/dev/null", dir, dir);
    if (run(cmd, out, sizeof out) == 0) {
        char args[512];
        snprintf(args, sizeof args, "train --device cpu --data fashion-mnist:%s", dir);
        expect_error("cli.corrupt_data", args, "train-images-idx3-ubyte.gz", "hint:");
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd, out, sizeof out);
}

/* A full disk under --log: /dev/full fails every write with ENOSPC, so no
 * hook in the program is needed. The run stops with status 1 at the first
 * record, naming the file, the cause and what to do. */
static void test_log_full_disk(void)
{
    FILE *f = fopen("/dev/full", "w");
    if (!f) { printf("  skip log.full_disk: no /dev/full\n"); return; }
    JsonLine j;
    json_begin(&j, "step");
    json_int(&j, "step", 1);
    errno = 0;
    int rc = json_end(&j, f);
    int err = errno;
    check_true("log.json_end_reports", rc == -1 && err == ENOSPC, "json_end returned %d, errno %d",
               rc, err);
    fclose(f);
    json_begin(&j, "step");
    check_true("log.json_end_null_file", json_end(&j, NULL) == 0, "json_end(NULL) failed");

    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "%s train --model mlp --hidden 16 "
             "--device cpu --steps 2 --log-every 1 --log /dev/full 2>&1", bin());
    int st = run(cmd, out, sizeof out);
    check_true("log.full_disk_stops", st == 1 && strstr(out, "cannot write log file /dev/full") &&
               strstr(out, "No space left") && strstr(out, "hint: free space on the disk of /dev/full"),
               "exit %d: %s", st, out);
    check_true("log.full_disk_at_once", !strstr(out, "trained 2 steps"),
               "the run went on after the failed write: %s", out);
}

/* --save writes a checkpoint; `ctrain eval --load` reads it back and
 * reports top-1 / top-5; a checkpoint of another model is refused by name. */
static void test_save_eval(void)
{
    char dir[] = "/tmp/ctrain_cli_ck_XXXXXX", cmd[2048], out[8192], ck[512];
    if (!mkdtemp(dir)) return;
    snprintf(ck, sizeof ck, "%s/mlp.safetensors", dir);
    snprintf(cmd, sizeof cmd, "%s train --model mlp --device cpu --steps 40 --log-every 40 --save %s 2>&1",
             bin(), ck);
    int st = run(cmd, out, sizeof out);
    check_true("save.written", st == 0 && access(ck, R_OK) == 0, "exit %d: %s", st, out);
    snprintf(cmd, sizeof cmd, "%s eval --model mlp --device cpu --load %s 2>&1", bin(), ck);
    st = run(cmd, out, sizeof out);
    const double top1 = eval_top1(out);
    check_true("eval.loads_and_scores", st == 0 && top1 > 50.0, "exit %d, top-1 %.2f: %s", st, top1, out);
    char args[700];
    snprintf(args, sizeof args, "eval --model mlp --hidden 100 --device cpu --load %s", ck);
    expect_error("eval.wrong_shape_refused", args, "fc1.weight", "hint:");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd, out, sizeof out);
}

/* --trace shows what the mechanisms did each step: fp16 loss scale,
 * recomputed segments (bert-tiny has 2 encoder layers), memory. */
static void test_trace(void)
{
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "%s train --model bert-tiny --data synthetic --batch 2 --seq 16 "
             "--steps 2 --recompute all --precision fp16 --optim adamw --lr 1e-4 --trace "
             "--device cpu 2>&1", bin());
    int st = run(cmd, out, sizeof out);
    check_true("trace.lines", st == 0 && strstr(out, "trace step 1:") && strstr(out, "trace step 2:") &&
               strstr(out, "recomputed 2 segments") && strstr(out, "scale 65536") &&
               strstr(out, "fp16 scale ok"), "exit %d: %s", st, out);
}

/* ctrain tokenize: ids and tokens per input line on a hand-made vocab;
 * a line that is not UTF-8 is refused with its number. */
static void test_tokenize(void)
{
    char dir[] = "/tmp/ctrain_tok_XXXXXX", vocab[128], text[128], bad[128], cmd[1024], out[4096];
    if (!mkdtemp(dir)) {
        check_true("tokenize.tmpdir", 0, "mkdtemp failed");
        return;
    }
    snprintf(vocab, sizeof vocab, "%s/vocab.txt", dir);
    snprintf(text, sizeof text, "%s/text.txt", dir);
    snprintf(bad, sizeof bad, "%s/bad.txt", dir);
    FILE *f = fopen(vocab, "w");
    fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n,\n!\nun\n##aff\n##able\n", f);
    fclose(f);
    f = fopen(text, "w");
    fputs("H\xc3\xa9llo, WORLD!\nunaffable zzz\n\n", f);   /* "Héllo": accents stripped */
    fclose(f);
    f = fopen(bad, "w");
    fputs("hello\nbad \xff byte\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s tokenize --vocab %s --in %s 2>&1", bin(), vocab, text);
    int st = run(cmd, out, sizeof out);
    check_true("tokenize.ids", st == 0 && strcmp(out, "5 7 6 8\n9 10 11 1\n\n") == 0,
               "exit %d, got: %s", st, out);
    snprintf(cmd, sizeof cmd, "%s tokenize --vocab %s --tokens < %s 2>&1", bin(), vocab, text);
    st = run(cmd, out, sizeof out);
    check_true("tokenize.tokens", st == 0 &&
               strcmp(out, "hello , world !\nun ##aff ##able [UNK]\n\n") == 0,
               "exit %d, got: %s", st, out);
    char args[512];
    snprintf(args, sizeof args, "tokenize --vocab %s --in %s", vocab, bad);
    expect_error("tokenize.bad_utf8", args, "line 2: invalid UTF-8", "hint:");
    expect_error("tokenize.no_vocab", "tokenize --in /dev/null", "tokenize needs --vocab", NULL);
    unlink(vocab);
    unlink(text);
    unlink(bad);
    rmdir(dir);
}

/* ctrain report on files that are not bench JSON: one line per file naming
 * the cause and what to pass, exit status 1, never a Python traceback. */
static void report_refuses(const char *name, const char *dir, const char *file, const void *bytes,
                           size_t n, const char *cause)
{
    char path[600], cmd[1400], out[8192], want[900];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    if (n) fwrite(bytes, 1, n, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s report %s 2>&1", bin(), path);
    int st = run(cmd, out, sizeof out);
    snprintf(want, sizeof want, "report: %s: not a bench JSON (%s", path, cause);
    check_true(name, st == 1 && strstr(out, want) && strstr(out, "): pass the JSON that ctrain "
               "bench --json wrote") && !strstr(out, "Traceback"), "exit %d, wanted \"%s\", got: %s",
               st, want, out);
}

static void test_report_bad_files(void)
{
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        printf("  skip report.*: python3 is not installed (ctrain report runs scripts/report.py)\n");
        return;
    }
    char dir[] = "/tmp/ctrain_report_XXXXXX", cmd[1400], out[8192];
    if (!mkdtemp(dir)) { check_true("report.tmpdir", 0, "mkdtemp failed"); return; }
    static const char latin1[] = "{\"results\": [{\"model\": \"caf\xe9\"}]}";
    report_refuses("report.not_utf8", dir, "latin1.json", latin1, sizeof latin1 - 1,
                   "not UTF-8 text: byte 0xe9 at offset 27");
    report_refuses("report.empty", dir, "empty.json", "", 0, "the file is empty");
    report_refuses("report.json_array", dir, "array.json", "[1, 2, 3]\n", 10,
                   "JSON without results");
    const char *mach = "{\"schema\": \"ctrain-bench/1\", \"machine\": \"h200\", \"results\": []}";
    report_refuses("report.machine_not_object", dir, "machine.json", mach, strlen(mach),
                   "\"machine\" is a string, not an object");
    const char *mode = "{\"results\": [{\"model\": \"mlp\", \"mode\": [\"eager\"]}]}";
    report_refuses("report.mode_not_string", dir, "mode.json", mode, strlen(mode),
                   "result 1: \"mode\" is an array, not a string");
    const char *res = "{\"results\": 5}";
    report_refuses("report.results_not_array", dir, "results.json", res, strlen(res),
                   "\"results\" is a number, not an array");
    static char deep[200001];
    memset(deep, '[', 100000);
    memset(deep + 100000, ']', 100000);
    report_refuses("report.deep_json", dir, "deep.json", deep, 200000, "JSON nested too deeply");
    report_refuses("report.not_json", dir, "notes.txt", "samples/s: 1000\n", 16, "JSON error at line 1");

    /* a good file beside a bad one: the bad one is named, the report stops */
    char good[600], bad[600];
    snprintf(good, sizeof good, "%s/good.json", dir);
    snprintf(bad, sizeof bad, "%s/empty.json", dir);
    FILE *f = fopen(good, "w");
    fputs("{\"results\": [{\"model\": \"mlp\", \"precision\": \"fp32\", \"batch\": \"64\", "
          "\"seq\": 1.5, \"samples_per_s\": 1000}]}\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s report %s 2>&1", bin(), good);
    int st = run(cmd, out, sizeof out);
    check_true("report.good_file_reads", st == 0 && strstr(out, "| mlp | fp32 | 64 |"),
               "exit %d: %s", st, out);
    /* --label=FILE=NAME splits at the first '=': the value is FILE=NAME, the
     * same as --label FILE=NAME */
    char spaced[8192];
    snprintf(cmd, sizeof cmd, "%s report --label good.json=H200 %s 2>&1", bin(), good);
    st = run(cmd, spaced, sizeof spaced);
    snprintf(cmd, sizeof cmd, "%s report %s --label=good.json=H200 2>&1", bin(), good);
    const int st2 = run(cmd, out, sizeof out);
    check_true("report.label_equals", st == 0 && st2 == 0 && strstr(out, "**H200** (`good.json`)") &&
               !strcmp(out, spaced), "exit %d and %d: %.400s", st, st2, out);
    snprintf(cmd, sizeof cmd, "%s report %s %s 2>&1", bin(), good, bad);
    st = run(cmd, out, sizeof out);
    check_true("report.one_bad_file_stops", st == 1 && strstr(out, "empty.json: not a bench JSON") &&
               !strstr(out, "| mlp |"), "exit %d: %s", st, out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd, out, sizeof out);
}

/* --decode cpu on an ImageFolder of 12 JPEGs, and the --decode refusals. */
static void test_decode_folder(void)
{
    char dir[] = "/tmp/ctrain_cli_jpg_XXXXXX", cmd[2048], out[8192], log[600], p[600];
    if (!mkdtemp(dir)) { check_true("decode.tmpdir", 0, "mkdtemp failed"); return; }
    uint8_t *img = malloc(64 * 80 * 3);
    for (int c = 0; c < 2; c++) {
        snprintf(p, sizeof p, "%s/%c", dir, 'a' + c);
        mkdir(p, 0755);
        for (int i = 0; i < 6; i++) {
            jfx_pattern(img, 64, 80, 3, (uint64_t)(10 * c + i));
            snprintf(p, sizeof p, "%s/%c/%d.jpg", dir, 'a' + c, i);
            jfx_write_jpeg(p, img, 64, 80, 3, NULL);
        }
    }
    free(img);
    snprintf(log, sizeof log, "%s/log.jsonl", dir);
    snprintf(cmd, sizeof cmd, "%s train --model resnet18 --data %s --decode cpu --device cpu "
             "--image-size 32 --batch 4 --workers 2 --steps 4 --log-every 2 --log %s 2>&1", bin(),
             dir, log);
    int st = run(cmd, out, sizeof out);
    check_true("decode.cpu.trains", st == 0 && strstr(out, "img/s (capacity ") &&
               strstr(out, ", wait "), "exit %d: %s", st, out);
    size_t n = 0;
    char *text = file_read(log, &n);
    int steps = 0, fields = 1;
    if (text) {
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            if (!strstr(line, "\"event\":\"step\"")) continue;
            steps++;
            double rate = json_field(line, "data_images_per_s");
            double cap = json_field(line, "data_capacity_per_s");
            double wait = json_field(line, "data_wait_frac");
            double fb = json_field(line, "cpu_fallback");
            if (!(rate > 0 && cap > 0 && wait >= 0 && wait <= 1 && fb == 0)) {
                fields = 0;
                printf("  %s\n", line);
            }
        }
    }
    check_true("decode.cpu.log_steps", steps == 2 && fields, "%d step records; data fields "
               "missing or out of range (above)", steps);
    text = file_read(log, &n);
    check_true("decode.cpu.log_config", text && strstr(text, "\"decode\":\"cpu (libjpeg-turbo, "
               "2 threads)\""), "the config record does not name the decoder");
    free(text);
    char args[800];
    snprintf(args, sizeof args, "train --model resnet18 --device cpu --data %s --decode gpu "
             "--steps 1", dir);
    expect_error("decode.gpu_on_cpu_refused", args, "--decode gpu: ", "hint:");
    expect_error("decode.gpu_synthetic_refused", "train --model resnet18 --device cpu --data "
                 "synthetic --decode gpu --steps 1", "not an ImageFolder", "hint:");
    expect_error("decode.unknown", "train --device cpu --decode fast",
                 "--decode: 'fast' is not auto, gpu or cpu", "hint:");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd, out, sizeof out);
}

/* --flag value and --flag=value, parsed in this process one after the
 * other (getopt_long starts over each time), give the same options. */
static void test_flag_forms(void)
{
    char *spaced[] = {"--lr", "0.25", "--data", "synthetic", "--eval-every", "5", "--graph"};
    char *joined[] = {"--lr=0.25", "--data=synthetic", "--eval-every=5", "--graph"};
    TrainOptions a, b, d;
    train_options_default(&a);
    train_options_default(&b);
    train_options_default(&d);
    train_options_parse(&a, 7, spaced, "train");
    train_options_parse(&b, 4, joined, "train");
    train_options_parse(&d, 0, joined, "train");
    check_true("cli.forms.number", a.lr == 0.25f && b.lr == 0.25f, "lr %g and %g", (double)a.lr,
               (double)b.lr);
    check_true("cli.forms.string", !strcmp(a.data, "synthetic") && !strcmp(b.data, "synthetic"),
               "data '%s' and '%s'", a.data, b.data);
    check_true("cli.forms.switch", a.graph == 1 && b.graph == 1 && d.graph == 0,
               "graph %d, %d, %d", a.graph, b.graph, d.graph);
    check_true("cli.eval_every", a.eval_every == 5 && b.eval_every == 5 && d.eval_every == 0,
               "eval_every %ld, %ld, default %ld", a.eval_every, b.eval_every, d.eval_every);

    expect_error("cli.prefix_refused", "train --device cpu --ep 3",
                 "unknown option '--ep' (did you mean --epochs?)", "hint:");
    expect_error("cli.prefix_equals_refused", "train --device cpu --ep=3",
                 "unknown option '--ep' (did you mean --epochs?)", NULL);
    expect_error("cli.switch_value_refused", "train --device cpu --graph=1",
                 "--graph takes no value", "'--graph=1'");
    expect_error("cli.stray_word_refused", "train --device cpu 3", "unexpected argument '3'",
                 "hint:");
    expect_error("cli.after_dashes_refused", "train --device cpu -- --lr", "unexpected argument "
                 "'--lr'", NULL);
    expect_error("cli.short_cluster_refused", "train --device cpu -hx", "unknown option '-hx'",
                 NULL);
    expect_error("cli.eval_every_range", "train --device cpu --eval-every 0",
                 "--eval-every: '0' is out of range", NULL);
    expect_error("cli.eval_refuses_eval_every", "eval --device cpu --load x --eval-every 5",
                 "--eval-every is a training flag: ctrain eval does not take it", "hint:");
    expect_error("cli.eval_refuses_equals_form", "eval --device cpu --load x --lr=0.1",
                 "--lr is a training flag: ctrain eval does not take it", NULL);
    expect_error("cli.bench_prefix_refused", "bench --quic",
                 "unknown option '--quic' (did you mean --quick?)", "ctrain bench --help");
    expect_error("cli.vocab_prefix_refused", "vocab --cor x --out y",
                 "unknown option '--cor' (did you mean --corpus?)", "ctrain vocab --help");
    expect_error("cli.tokenize_needs_value", "tokenize --vocab", "--vocab needs a value", NULL);
    expect_error("cli.export_prefix_refused", "export --hf d --voc v x",
                 "unknown option '--voc' (did you mean --vocab?)", NULL);
    expect_error("cli.export_vocab_needs_hf", "export --vocab v a b", "--vocab goes with --hf",
                 NULL);
    expect_error("cli.report_prefix_refused", "report --lab=a.json=H200 a.json",
                 "unknown option '--lab' (did you mean --label?)", NULL);
}

/* Every command's --help prints its usage and exits 0. */
static void test_help(void)
{
    const char *cmds[] = {"help", "train", "eval", "bench", "report", "vocab", "shard",
                          "tokenize", "info", "env", "export"};
    for (size_t i = 0; i < 2 * sizeof cmds / sizeof cmds[0]; i++) {
        const char *c = cmds[i / 2], *flag = i % 2 ? "-h" : "--help";
        char cmd[256], out[4096], name[64];
        /* the first lines (the usage) and the command's own exit status */
        snprintf(cmd, sizeof cmd,
                 "o=$(%s %s %s 2>&1); s=$?; printf '%%s\\n' \"$o\" | head -n 3; exit $s",
                 bin(), strcmp(c, "help") ? c : "", flag);
        const int st = run(cmd, out, sizeof out);
        snprintf(name, sizeof name, "help.%s%s", c, i % 2 ? ".h" : "");
        check_true(name, st == 0 && strstr(out, "usage") != NULL, "exit %d: %.200s", st, out);
    }
    char cmd[256], out[4096];
    snprintf(cmd, sizeof cmd, "%s --version 2>&1", bin());
    int vs = run(cmd, out, sizeof out);
    check_true("version", vs == 0 && !strncmp(out, "ctrain ", 7) && strstr(out, " build)"),
               "exit %d: %.300s", vs, out);
    snprintf(cmd, sizeof cmd, "%s eval --help 2>&1", bin());
    const int st = run(cmd, out, sizeof out);
    check_true("help.eval_is_its_own", st == 0 && strstr(out, "ctrain eval --load") &&
               !strstr(out, "--momentum"), "exit %d: %.300s", st, out);
}

int main(void)
{
    if (access(bin(), X_OK) != 0) {
        printf("  FAIL %s is not built: run make first\n", bin());
        printf("0 passed, 1 failed\n");
        return 1;
    }
    test_help();
    test_flag_forms();
    test_bad_input();
    test_report_bad_files();
    test_log_full_disk();
    test_tokenize();
    test_save_eval();
    test_trace();
    test_decode_folder();
    test_mlp_epoch();
    return check_summary();
}
