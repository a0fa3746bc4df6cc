/* test_resume.c — exact resume, end to end on the CPU backend (f32):
 *   - an uninterrupted 20-step run, and a 10-step run saved with --save-every
 *     then resumed to 20 steps: the losses logged for steps 11..20 are
 *     bit-identical (the JSON prints them with %.9g, which round-trips f32).
 *     Three variants: AdamW; SGD with Nesterov momentum; AdamW with --accum 2;
 *   - resuming with another --batch is refused with a message naming batch;
 *   - what else defines the run is checked too: another --steps (cosine:
 *     the schedule spans it; --epochs sets it as well), --lr (the same value
 *     typed otherwise passes), --data, --wd, a switch (--nesterov) are each
 *     refused with the saved and this run's value and one hint;
 *     --resume-change lets named ones differ with a warning each; a
 *     checkpoint without those keys (older ctrain) resumes with one warning;
 *   - a corrupted checkpoint is refused;
 *   - `ctrain eval --load` reads the weights of a training checkpoint;
 *   - resuming with the same --log appends: steps 1..10 of the first run stay,
 *     a "resume" record says where the second took over, 11..20 follow;
 *   - a --save into a folder that does not exist stops before the first step.
 * Runs build/ctrain (CTRAIN_BIN overrides) from the repository root.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "cli_util.h"

/* The loss text (as printed) of each "step" line of a JSONL log, by step
 * number: loss[s] for s in 1..max. Returns how many steps were read. */
static int read_losses(const char *path, char loss[][32], int max)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"event\":\"step\"")) continue;
        const char *s = strstr(line, "\"step\":"), *l = strstr(line, "\"loss\":");
        if (!s || !l) continue;
        int step = atoi(s + 7);
        if (step < 1 || step > max) continue;
        l += 7;
        size_t k = strcspn(l, ",}");
        if (k >= 32) k = 31;
        memcpy(loss[step], l, k);
        loss[step][k] = 0;
        n++;
    }
    fclose(f);
    return n;
}

/* Uninterrupted vs saved-at-10-and-resumed, with the extra flags. */
static void check_resume(const char *name, const char *dir, const char *flags)
{
    char cmd[4096], out[8192], a[600], b[600], ck[600];
    snprintf(a, sizeof a, "%s/%s_A.jsonl", dir, name);
    snprintf(b, sizeof b, "%s/%s_B.jsonl", dir, name);
    snprintf(ck, sizeof ck, "%s/%s.ckpt", dir, name);
    const char *base = "train --model mlp --device cpu --log-every 1 --hidden 64";
    snprintf(cmd, sizeof cmd, "%s %s %s --steps 20 --log %s 2>&1", bin(), base, flags, a);
    int st = run(cmd, out, sizeof out);
    check_true("resume.uninterrupted_runs", st == 0, "%s: exit %d: %s", name, st, out);
    snprintf(cmd, sizeof cmd, "%s %s %s --steps 10 --save-every 10 --save %s 2>&1", bin(), base,
             flags, ck);
    st = run(cmd, out, sizeof out);
    check_true("resume.first_half_saves", st == 0 && access(ck, R_OK) == 0, "%s: exit %d: %s",
               name, st, out);
    snprintf(cmd, sizeof cmd, "%s %s %s --steps 20 --resume %s --log %s 2>&1", bin(), base, flags,
             ck, b);
    st = run(cmd, out, sizeof out);
    check_true("resume.second_half_runs", st == 0, "%s: exit %d: %s", name, st, out);

    static char la[21][32], lb[21][32];
    memset(la, 0, sizeof la);
    memset(lb, 0, sizeof lb);
    int na = read_losses(a, la, 20), nb = read_losses(b, lb, 20);
    int first_bad = 0;
    for (int s = 11; s <= 20 && !first_bad; s++)
        if (!la[s][0] || strcmp(la[s], lb[s])) first_bad = s;
    char what[64];
    snprintf(what, sizeof what, "resume.%s.losses_11_20_identical", name);
    check_true(what, na == 20 && nb == 10 && !first_bad,
               "%d and %d steps logged; step %d: uninterrupted %s, resumed %s", na, nb, first_bad,
               first_bad ? la[first_bad] : "-", first_bad ? lb[first_bad] : "-");
    /* the resumed run logs nothing before step 11 */
    snprintf(what, sizeof what, "resume.%s.starts_at_11", name);
    check_true(what, !lb[10][0] && lb[11][0], "resumed log: step 10 '%s', step 11 '%s'", lb[10],
               lb[11]);
}

static void check_refusals(const char *dir)
{
    char cmd[4096], out[8192], ck[600], bad[600];
    snprintf(ck, sizeof ck, "%s/adamw.ckpt", dir);
    const char *base = "train --model mlp --device cpu --hidden 64 --optim adamw --lr 1e-3";

    snprintf(cmd, sizeof cmd, "%s %s --steps 20 --batch 32 --resume %s 2>&1", bin(), base, ck);
    int st = run(cmd, out, sizeof out);
    check_true("resume.other_batch_refused",
               st == 1 && strstr(out, "--batch 64") && strstr(out, "--batch 32") &&
               strstr(out, "hint:"), "exit %d: %s", st, out);

    snprintf(cmd, sizeof cmd, "%s train --model mlp --device cpu --hidden 64 --optim sgd --steps 20 "
             "--resume %s 2>&1", bin(), ck);
    st = run(cmd, out, sizeof out);
    check_true("resume.other_optimizer_refused", st == 1 && strstr(out, "--optim adamw"),
               "exit %d: %s", st, out);

    /* flip bytes in the data section (the end of the file): the checksum catches it */
    snprintf(bad, sizeof bad, "%s/corrupt.ckpt", dir);
    snprintf(cmd, sizeof cmd, "cp %s %s && printf 'XXXXXXXX' | dd of=%s bs=1 seek=$(( $(stat -c %%s %s) - 4000 )) "
             "conv=notrunc 2>/dev/null", ck, bad, bad, bad);
    st = run(cmd, out, sizeof out);
    check_true("resume.corrupt_made", st == 0, "exit %d: %s", st, out);
    snprintf(cmd, sizeof cmd, "%s %s --steps 20 --resume %s 2>&1", bin(), base, bad);
    st = run(cmd, out, sizeof out);
    check_true("resume.corrupt_refused", st == 1 && strstr(out, "hint:") && !strstr(out, "trained"),
               "exit %d: %s", st, out);

    /* a truncated file too */
    snprintf(cmd, sizeof cmd, "head -c 3000 %s > %s", ck, bad);
    run(cmd, out, sizeof out);
    snprintf(cmd, sizeof cmd, "%s %s --steps 20 --resume %s 2>&1", bin(), base, bad);
    st = run(cmd, out, sizeof out);
    check_true("resume.truncated_refused", st == 1 && !strstr(out, "trained"), "exit %d: %s", st,
               out);

    /* a weights-only file is not a training state */
    snprintf(bad, sizeof bad, "%s/weights.safetensors", dir);
    snprintf(cmd, sizeof cmd, "%s %s --steps 2 --save %s 2>&1", bin(), base, bad);
    st = run(cmd, out, sizeof out);
    snprintf(cmd, sizeof cmd, "%s %s --steps 20 --resume %s 2>&1", bin(), base, bad);
    st = run(cmd, out, sizeof out);
    check_true("resume.weights_only_refused", st == 1 && strstr(out, "--load"), "exit %d: %s", st,
               out);

    /* eval reads a training checkpoint's weights and skips the __ctrain.* entries */
    snprintf(cmd, sizeof cmd, "%s eval --model mlp --hidden 64 --device cpu --load %s 2>&1", bin(), ck);
    st = run(cmd, out, sizeof out);
    const double top1 = eval_top1(out);
    check_true("resume.eval_loads_training_checkpoint", st == 0 && top1 > 30.0,
               "exit %d, top-1 %.2f: %s", st, top1, out);
}

/* An older checkpoint: blank out (with spaces, so the header keeps its
 * length and stays valid JSON) each ,"key":"value" of keys. 0 when done. */
static int strip_meta(const char *path, const char *const *keys, int n)
{
    FILE *f = fopen(path, "r+b");
    if (!f) return -1;
    unsigned char len8[8];
    if (fread(len8, 1, 8, f) != 8) { fclose(f); return -1; }
    size_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (size_t)len8[i] << (8 * i);
    char *h = calloc(hl + 1, 1);
    int ok = h && fread(h, 1, hl, f) == hl;
    for (int i = 0; i < n && ok; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, ",\"%s\":\"", keys[i]);
        char *at = strstr(h, pat), *end = at ? strchr(at + strlen(pat), '"') : NULL;
        if (!end) ok = 0;
        else memset(at, ' ', (size_t)(end + 1 - at));   /* the comma before it too */
    }
    ok = ok && fseek(f, 8, SEEK_SET) == 0 && fwrite(h, 1, hl, f) == hl;
    free(h);
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Resuming checks what defines the run: --lr, --schedule, --steps (when the
 * schedule decays over it; --epochs sets it too), --data, --wd, --nesterov
 * ...; --resume-change lets named ones differ; a checkpoint from before
 * these keys were stored is resumed with one warning. */
static void check_run_defining(const char *dir)
{
    char cmd[4096], out[8192], ck[600], old[600];
    snprintf(ck, sizeof ck, "%s/cosine.ckpt", dir);
    const char *base = "train --model mlp --device cpu --hidden 16 --optim adamw --lr 1e-3 "
                       "--schedule cosine --log-every 5";
    snprintf(cmd, sizeof cmd, "%s %s --steps 10 --save-every 10 --save %s 2>&1", bin(), base, ck);
    int st = run(cmd, out, sizeof out);
    check_true("resume.defining.saved", st == 0, "exit %d: %s", st, out);

    snprintf(cmd, sizeof cmd, "%s %s --steps 20 --resume %s 2>&1", bin(), base, ck);
    st = run(cmd, out, sizeof out);
    check_true("resume.defining.steps_refused",
               st == 1 && strstr(out, "saved with --steps 10; this run has --steps 20") &&
               strstr(out, "hint: run with the saved value (--steps 10), or add --resume-change "
                      "steps to change it deliberately") && !strstr(out, "trained"),
               "exit %d: %s", st, out);

    snprintf(cmd, sizeof cmd, "%s %s --epochs 1 --resume %s 2>&1", bin(), base, ck);
    st = run(cmd, out, sizeof out);
    check_true("resume.defining.epochs_refused", st == 1 && strstr(out, "--steps 10; this run has "
               "--steps 937"), "exit %d: %s", st, out);

    snprintf(cmd, sizeof cmd, "%s %s --steps 10 --lr 2e-3 --resume %s 2>&1", bin(), base, ck);
    st = run(cmd, out, sizeof out);
    check_true("resume.defining.lr_refused", st == 1 && strstr(out, "saved with --lr 0.001; this "
               "run has --lr 0.002") && strstr(out, "--resume-change lr "), "exit %d: %s", st, out);

    /* the same value typed another way is the same value */
    snprintf(cmd, sizeof cmd, "%s %s --steps 10 --lr 0.0010 --resume %s 2>&1", bin(), base, ck);
    st = run(cmd, out, sizeof out);
    check_true("resume.defining.lr_same_value_accepted", st == 0 && strstr(out, "nothing left to "
               "train"), "exit %d: %s", st, out);

    snprintf(cmd, sizeof cmd, "%s %s --steps 10 --wd 0.01 --data fashion-mnist:/usr/share/datasets/"
             "fashion-mnist --resume %s 2>&1", bin(), base, ck);
    st = run(cmd, out, sizeof out);
    check_true("resume.defining.data_and_wd_refused", st == 1 &&
               strstr(out, "saved with --data fashion-mnist, --wd 0; this run has --data "
                      "fashion-mnist:/usr/share/datasets/fashion-mnist, --wd 0.01") &&
               strstr(out, "--resume-change data,wd to change them"), "exit %d: %s", st, out);

    snprintf(cmd, sizeof cmd, "%s %s --steps 20 --lr 2e-3 --resume-change steps,--lr --resume %s "
             "2>&1", bin(), base, ck);
    st = run(cmd, out, sizeof out);
    check_true("resume.defining.change_allowed", st == 0 &&
               strstr(out, "[warn] --resume-change lr: ") && strstr(out, "was saved with --lr "
               "0.001, this run has --lr 0.002") && strstr(out, "[warn] --resume-change steps: ") &&
               strstr(out, "trained 10 steps"), "exit %d: %s", st, out);

    /* a switch: saved with --nesterov, resumed without */
    snprintf(ck, sizeof ck, "%s/nesterov.ckpt", dir);
    snprintf(cmd, sizeof cmd, "%s train --model mlp --device cpu --hidden 16 --nesterov --steps 2 "
             "--save-every 2 --save %s 2>&1", bin(), ck);
    st = run(cmd, out, sizeof out);
    snprintf(cmd, sizeof cmd, "%s train --model mlp --device cpu --hidden 16 --steps 2 --resume %s "
             "2>&1", bin(), ck);
    st = run(cmd, out, sizeof out);
    check_true("resume.defining.switch_refused", st == 1 && strstr(out, "saved with --nesterov; "
               "this run has no --nesterov") && strstr(out, "run with the saved value (--nesterov)"),
               "exit %d: %s", st, out);

    /* a checkpoint written before the keys were stored: resumed, said once */
    snprintf(ck, sizeof ck, "%s/cosine.ckpt", dir);
    snprintf(old, sizeof old, "%s/old.ckpt", dir);
    snprintf(cmd, sizeof cmd, "cp %s %s", ck, old);
    run(cmd, out, sizeof out);
    static const char *const added[] = {"lr", "schedule", "warmup", "final_lr", "total_steps",
                                        "data", "momentum", "nesterov", "weight_decay",
                                        "no_wd_bn_bias", "clip", "label_smoothing", "dropout",
                                        "seq", "image_size", "world_size"};
    check_true("resume.defining.old_file_made", strip_meta(old, added, 16) == 0, "%s", old);
    snprintf(cmd, sizeof cmd, "%s %s --steps 20 --lr 2e-3 --resume %s 2>&1", bin(), base, old);
    st = run(cmd, out, sizeof out);
    const char *w = strstr(out, "could not be checked");
    check_true("resume.defining.old_file_warned_once", st == 0 && w &&
               !strstr(w + 1, "could not be checked") && strstr(out, "--lr, --schedule, --warmup, "
               "--final-lr, --steps, --data, --wd,") && !strstr(out, "--momentum") &&
               strstr(out, "trained 10 steps"), "exit %d: %s", st, out);
}

/* Resumed with the same --log (as the docs say): nothing before the resume is lost. */
static void check_log_append(const char *dir)
{
    char cmd[4096], out[8192], log[600], ck[600];
    snprintf(log, sizeof log, "%s/append.jsonl", dir);
    snprintf(ck, sizeof ck, "%s/append.ckpt", dir);
    const char *base = "train --model mlp --device cpu --log-every 1 --hidden 64 --optim adamw";
    snprintf(cmd, sizeof cmd, "%s %s --steps 10 --save-every 10 --save %s --log %s 2>&1", bin(),
             base, ck, log);
    int st = run(cmd, out, sizeof out);
    check_true("resume.append.first_half", st == 0, "exit %d: %s", st, out);
    snprintf(cmd, sizeof cmd, "%s %s --steps 20 --resume %s --log %s 2>&1", bin(), base, ck, log);
    st = run(cmd, out, sizeof out);
    check_true("resume.append.second_half", st == 0, "exit %d: %s", st, out);
    static char l[21][32];
    memset(l, 0, sizeof l);
    int n = read_losses(log, l, 20);
    check_true("resume.append.steps_1_20_kept", n == 20 && l[1][0] && l[10][0] && l[20][0],
               "%d step records in %s (step 1 '%s', 10 '%s', 20 '%s')", n, log, l[1], l[10], l[20]);
    FILE *f = fopen(log, "r");
    char line[4096];
    int resume_at = -1, configs = 0;
    while (f && fgets(line, sizeof line, f)) {
        configs += strstr(line, "\"event\":\"config\"") != NULL;
        const char *s = strstr(line, "\"step\":");
        if (strstr(line, "\"event\":\"resume\"") && s) resume_at = atoi(s + 7);
    }
    if (f) fclose(f);
    check_true("resume.append.resume_record", resume_at == 10 && configs == 2,
               "resume record at step %d, %d config records (want 10 and 2)", resume_at, configs);
}

/* A --save path that cannot be written is found before training. */
static void check_save_probe(void)
{
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "%s train --model mlp --device cpu --hidden 64 --steps 300 "
             "--save /nonexistent_ctrain_dir/d/w.safetensors 2>&1", bin());
    int st = run(cmd, out, sizeof out);
    check_true("save.bad_path_refused_first",
               st == 1 && strstr(out, "/nonexistent_ctrain_dir/d/w.safetensors") &&
                   strstr(out, "hint:") && !strstr(out, "train mlp"),
               "exit %d: %s", st, out);
}

int main(void)
{
    if (access(bin(), X_OK) != 0) {
        printf("  FAIL %s is not built: run make first\n", bin());
        printf("0 passed, 1 failed\n");
        return 1;
    }
    char dir[] = "/tmp/ctrain_resume_XXXXXX", cmd[700], out[256];
    if (!mkdtemp(dir)) {
        check_true("resume.tmpdir", 0, "mkdtemp failed");
        return check_summary();
    }
    check_resume("adamw", dir, "--optim adamw --lr 1e-3");
    check_resume("sgd_nesterov", dir, "--optim sgd --nesterov --lr 0.05");
    check_resume("adamw_accum2", dir, "--optim adamw --lr 1e-3 --accum 2");
    check_refusals(dir);
    check_run_defining(dir);
    check_log_append(dir);
    check_save_probe();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd, out, sizeof out);
    return check_summary();
}
