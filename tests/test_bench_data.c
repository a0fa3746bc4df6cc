/* test_bench_data.c — `ctrain bench --data DIR` on the CPU backend
 * (train/bench/bench_data.h):
 *   - on a small ImageFolder made here (2 classes of photo-like JPEGs,
 *     tests/jpeg_fixture.h), the CPU bench of ResNet18 (width 16, 32x32,
 *     batch 8) and the MLP writes, for ResNet18, a synthetic row and right
 *     after it a real-data row (data = the folder, decode auto, the loader
 *     threads), both with the same warm-up and a timed window raised to the
 *     rule's 8 steps; the MLP keeps its synthetic row only and the header
 *     says so once; the table prints the real-data line; the feed's figures
 *     are sane when the feed reports them (images = steps x batch, wait a
 *     fraction, capacity >= the delivered rate, no fallback on the CPU) and
 *     absent all together when it does not;
 *   - --list with --decode cpu,auto lists one real-data row per decoder;
 *   - `ctrain report` (python3) renders that file, and a hand-made file
 *     whose figures are known: the Real data block with the synthetic and
 *     real samples/s, real % (4478 / 6877 = 65.1%), data wait, decode rate
 *     and capacity, fallbacks, the decoder, '–' for what a feed did not
 *     report, and an error row with its note;
 *   - a --data that is no folder (missing, a file) and the options that do
 *     not go with --data are refused with one error and a hint before
 *     anything is measured.
 * Runs build/ctrain (CTRAIN_BIN overrides) from the repository root.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "cli_util.h"
#include "jpeg_fixture.h"
#include "json_read.h"

#define N_PER_CLASS 16   /* 32 images, batch 8: 4 batches an epoch, so the window crosses epochs */

static void make_folder(const char *root)
{
    char path[800];
    const char *cls[2] = {"cat", "dog"};
    mkdir(root, 0755);
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof path, "%s/%s", root, cls[c]);
        mkdir(path, 0755);
        for (int i = 0; i < N_PER_CLASS; i++) {
            int H = 36 + 3 * i, W = 44 + 2 * (i % 5);
            uint8_t *img = malloc((size_t)H * W * 3);
            jfx_pattern(img, H, W, 3, (uint64_t)(c * 100 + i));
            JfxOptions o = {0};
            o.progressive = i % 4 == 3;
            snprintf(path, sizeof path, "%s/%s/%02d.jpg", root, cls[c], i);
            jfx_write_jpeg(path, img, H, W, 3, &o);
            free(img);
        }
    }
}

static int python_ok(void) { return system("python3 -c 'import json' >/dev/null 2>&1") == 0; }

static const char *const FEED_FIELDS[] = {"decoder", "data_images", "data_wait_s", "data_wait_fraction",
                                          "decode_s", "decode_parallel", "decode_images_per_s",
                                          "decode_capacity_images_per_s", "cpu_fallback"};
#define N_FEED_FIELDS (int)(sizeof FEED_FIELDS / sizeof FEED_FIELDS[0])

/* The real-data row's feed figures: all sane, or (a feed without
 * statistics) all absent. */
static void check_feed_figures(const J *r, double steps, double batch)
{
    int present = 0;
    for (int i = 0; i < N_FEED_FIELDS; i++) present += jget(r, FEED_FIELDS[i]) != NULL;
    if (!present) {
        printf("  (the image feed reports no statistics yet: the real-data row's feed figures are absent)\n");
        return;
    }
    if (!check_true("data.feed.all_or_none", present == N_FEED_FIELDS, "%d of %d feed fields present",
                    present, N_FEED_FIELDS))
        return;
    double wait = jnum(r, "data_wait_fraction"), timed = jnum(r, "timed_s");
    check_true("data.feed.images", jnum(r, "data_images") == steps * batch, "data_images %g, steps x batch %g",
               jnum(r, "data_images"), steps * batch);
    check_true("data.feed.wait", wait >= 0 && wait <= 1 + 1e-6 &&
               fabs(wait - jnum(r, "data_wait_s") / timed) <= 1e-6 * (1 + wait),
               "data_wait_fraction %g, data_wait_s %g, timed_s %g", wait, jnum(r, "data_wait_s"), timed);
    double rate = jnum(r, "decode_images_per_s"), cap = jnum(r, "decode_capacity_images_per_s");
    check_true("data.feed.rates", rate > 0 && fabs(rate - jnum(r, "data_images") / timed) <= 1e-6 * rate &&
               cap > 0 && jnum(r, "decode_parallel") >= 1,
               "decode_images_per_s %g capacity %g parallel %g", rate, cap, jnum(r, "decode_parallel"));
    check_true("data.feed.cpu", jnum(r, "cpu_fallback") == 0 && strstr(jtext(r, "decoder"), "cpu"),
               "cpu_fallback %g decoder '%s' (the CPU bench decodes on the CPU)", jnum(r, "cpu_fallback"),
               jtext(r, "decoder"));
}

/* ctrain bench ARGS --json DIR/NAME.json; the output into out, the path into json. */
static int bench_json(char *json, size_t jlen, char *out, size_t olen, const char *dir, const char *name,
                      const char *args)
{
    char cmd[2048];
    snprintf(json, jlen, "%s/%s.json", dir, name);
    snprintf(cmd, sizeof cmd, "%s bench %s --json %s 2>&1", bin(), args, json);
    return run(cmd, out, olen);
}

static void test_rows(const char *dir, const char *imf)
{
    char cmd[2048], out[16384], json[512];
    snprintf(cmd, sizeof cmd, "--device cpu --quick --models resnet18,mlp --data %s --workers 2", imf);
    int st = bench_json(json, sizeof json, out, sizeof out, dir, "data", cmd);
    printf("%s", out);
    check_true("data.exit", st == 0, "exit %d", st);
    check_true("data.header", strstr(out, "real data: mlp takes no images: synthetic rows only") &&
               strstr(out, "at least 8 steps"), "the header does not say which configs have no real-data row");
    check_true("data.table", strstr(out, "  real:auto") && strstr(out, "real data, decode auto "),
               "the table has no real-data row");
    J *doc = jparse_file(json);
    J *res = jget(doc, "results");
    if (!check_true("data.rows", res && res->t == J_ARR && res->n == 3, "%d results (want resnet18 synthetic, "
                    "resnet18 real, mlp synthetic)", res ? res->n : -1)) {
        jfree(doc);
        return;
    }
    J *syn = res->items[0], *real = res->items[1], *mlp = res->items[2];
    check_true("data.order", !strcmp(jtext(syn, "model"), "resnet18") && !strcmp(jtext(real, "model"), "resnet18")
               && !strcmp(jtext(mlp, "model"), "mlp"), "models %s, %s, %s", jtext(syn, "model"),
               jtext(real, "model"), jtext(mlp, "model"));
    check_true("data.synthetic", !strcmp(jtext(syn, "data"), "synthetic") && !strcmp(jtext(mlp, "data"), "synthetic")
               && !jget(syn, "decode") && !jget(syn, "decoder") && !jget(syn, "workers"),
               "synthetic rows: data '%s' / '%s'", jtext(syn, "data"), jtext(mlp, "data"));
    check_true("data.real", !strcmp(jtext(real, "data"), imf) && !strcmp(jtext(real, "decode"), "auto") &&
               jnum(real, "workers") == 2 && !jget(real, "error"), "real row: data '%s' decode '%s' workers %g "
               "error '%s'", jtext(real, "data"), jtext(real, "decode"), jnum(real, "workers"), jtext(real, "error"));
    check_true("data.same_window", jnum(syn, "steps") == 8 && jnum(real, "steps") == 8 &&
               jnum(syn, "warmup") == jnum(real, "warmup") && jnum(syn, "batch") == jnum(real, "batch") &&
               !strcmp(jtext(syn, "precision"), jtext(real, "precision")),
               "steps %g / %g, warmup %g / %g (--quick's 3 steps raised to 8 for both)", jnum(syn, "steps"),
               jnum(real, "steps"), jnum(syn, "warmup"), jnum(real, "warmup"));
    check_true("data.mlp_window", jnum(mlp, "steps") == 3, "the MLP has no real-data row: its window "
               "stays 3 steps, got %g", jnum(mlp, "steps"));
    for (int i = 0; i < 2; i++) {
        J *r = res->items[i];
        double sps = jnum(r, "samples_per_s"), mean = jnum(r, "samples_per_s_mean"), t = jnum(r, "timed_s");
        char name[64];
        snprintf(name, sizeof name, "data.%s.figures", i ? "real" : "synthetic");
        check_true(name, sps > 0 && mean > 0 && t > 0 && jnum(r, "final_loss") == jnum(r, "final_loss") &&
                   fabs(mean - jnum(r, "steps") * jnum(r, "batch") / t) <= 1e-6 * mean,
                   "samples_per_s %g samples_per_s_mean %g timed_s %g", sps, mean, t);
    }
    check_feed_figures(real, jnum(real, "steps"), jnum(real, "batch"));
    int nulls = 0;
    for (int i = 0; i < res->n; i++)
        for (int k = 0; k < res->items[i]->n; k++) nulls += res->items[i]->items[k]->t == J_NULL;
    check_true("data.no_nulls", nulls == 0, "%d null fields (absent, never null)", nulls);
    jfree(doc);

    if (!python_ok()) {
        printf("  (python3 not found: ctrain report of the real-data rows not tested)\n");
        return;
    }
    snprintf(cmd, sizeof cmd, "%s report %s 2>&1", bin(), json);
    st = run(cmd, out, sizeof out);
    const char *sec = strstr(out, "## Real data");
    const char *row = sec ? strstr(sec, "| resnet18 fp32 bs8 32px | auto") : NULL;
    check_true("data.report", st == 0 && row && strchr(row, '%'), "exit %d, no real-data row: %s", st, out);
}

static void test_list(const char *dir, const char *imf)
{
    char args[1024], out[8192], json[512];
    snprintf(args, sizeof args, "--list --device cpu --models resnet18 --data imagefolder:%s --decode cpu,auto",
             imf);
    int st = bench_json(json, sizeof json, out, sizeof out, dir, "list", args);
    J *doc = jparse_file(json);
    J *res = jget(doc, "results");
    int ok = st == 0 && res && res->n == 3 && !strcmp(jtext(res->items[0], "data"), "synthetic") &&
             !strcmp(jtext(res->items[1], "decode"), "cpu") && !strcmp(jtext(res->items[2], "decode"), "auto") &&
             !strcmp(jtext(res->items[2], "data"), imf) && jnum(res->items[1], "steps") == 10 &&
             !jget(res->items[1], "samples_per_s");
    check_true("data.list", ok, "exit %d, %d rows (want synthetic, real cpu, real auto): %s", st,
               res ? res->n : -1, out);
    check_true("data.list.label", strstr(out, "resnet18 fp32 bs 8 32px, real data (decode cpu)") != NULL,
               "no real-data label: %s", out);
    jfree(doc);
}

/* ctrain report on a file whose figures are known. */
static void test_report_known(const char *dir)
{
    if (!python_ok()) {
        printf("  (python3 not found: the report's real-data block not tested)\n");
        return;
    }
    char path[512], cmd[1024], out[16384];
    snprintf(path, sizeof path, "%s/known.json", dir);
    const char *doc =
        "{\"schema\": \"ctrain-bench/1\", \"machine\": {\"gpu_name\": \"NVIDIA H200\"}, \"results\": [\n"
        "{\"engine\": \"ctrain\", \"mode\": \"graph\", \"model\": \"resnet50\", \"precision\": \"bf16\", "
        "\"batch\": 256, \"image_size\": 224, \"layout\": \"nhwc\", \"samples_per_s\": 6900, "
        "\"samples_per_s_mean\": 6877, \"timed_s\": 2.1, \"data\": \"synthetic\"},\n"
        "{\"engine\": \"ctrain\", \"mode\": \"graph\", \"model\": \"resnet50\", \"precision\": \"bf16\", "
        "\"batch\": 256, \"image_size\": 224, \"layout\": \"nhwc\", \"samples_per_s\": 5000, "
        "\"samples_per_s_mean\": 4478, \"timed_s\": 2.3, \"data\": \"/data/imf\", \"decode\": \"cpu\", "
        "\"decoder\": \"cpu (libjpeg-turbo, 16 threads)\", \"workers\": 16, \"data_images\": 10240, "
        "\"data_wait_s\": 0.7866, \"data_wait_fraction\": 0.342, \"decode_s\": 31.5, \"decode_parallel\": 16, "
        "\"decode_images_per_s\": 4452, \"decode_capacity_images_per_s\": 5201, \"cpu_fallback\": 3},\n"
        "{\"engine\": \"ctrain\", \"mode\": \"graph\", \"model\": \"resnet50\", \"precision\": \"bf16\", "
        "\"batch\": 256, \"image_size\": 224, \"layout\": \"nhwc\", \"data\": \"/data/imf\", \"decode\": \"gpu\", "
        "\"error\": \"nvJPEG is not installed\"},\n"
        "{\"engine\": \"ctrain\", \"mode\": \"graph\", \"model\": \"resnet50\", \"precision\": \"bf16\", "
        "\"batch\": 64, \"image_size\": 224, \"layout\": \"nhwc\", \"samples_per_s\": 6000, \"data\": \"synthetic\"},\n"
        "{\"engine\": \"ctrain\", \"mode\": \"graph\", \"model\": \"resnet50\", \"precision\": \"bf16\", "
        "\"batch\": 64, \"image_size\": 224, \"layout\": \"nhwc\", \"samples_per_s\": 3000, \"data\": \"/data/imf\", "
        "\"decode\": \"auto\"},\n"
        "{\"engine\": \"ctrain\", \"mode\": \"graph\", \"model\": \"bert-base\", \"precision\": \"bf16\", "
        "\"batch\": 32, \"seq\": 128, \"samples_per_s\": 900}\n"
        "], \"ceilings\": []}\n";
    file_write(path, doc, strlen(doc));
    snprintf(cmd, sizeof cmd, "%s report %s 2>&1", bin(), path);
    int st = run(cmd, out, sizeof out);
    const char *sec = strstr(out, "## Real data");
    check_true("report.real.exit", st == 0 && sec, "exit %d, no Real data section: %s", st, out);
    if (!sec) return;
    check_true("report.real.block", strstr(sec, "### ctrain graph") && strstr(sec, "`/data/imf`"),
               "no block per source with its folder: %s", sec);
    check_true("report.real.figures", strstr(sec, "| resnet50 bf16 bs256 | cpu → cpu (libjpeg-turbo, 16 threads) | "
               "6,877 | 4,478 | 65.1% | 34.2% | 4,452 | 5,201 | 3 |") != NULL, "the cpu row: %s", sec);
    check_true("report.real.error", strstr(sec, "| resnet50 bf16 bs256 | gpu | 6,877 | error [r1] |") &&
               strstr(sec, "[r1] nvJPEG is not installed"), "the error row and its note: %s", sec);
    check_true("report.real.unreported", strstr(sec, "| resnet50 bf16 bs64 | auto | 6,000 | 3,000 | 50.0% | – | – "
               "| – | – |") != NULL, "a row without feed figures: %s", sec);
    /* the main table keeps one row per config (the real rows are not duplicates of it) */
    const char *main_tab = strstr(out, "| resnet50 | bf16 | 256 |");
    check_true("report.real.main_table", main_tab && strstr(main_tab, "6,900") && !strstr(out, "appears twice") &&
               !strstr(sec, "bert-base"), "main table: %s", out);
}

static void expect_refused(const char *name, const char *args, const char *want)
{
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "%s bench --device cpu %s 2>&1", bin(), args);
    int st = run(cmd, out, sizeof out);
    int one = 0;
    for (const char *p = out; (p = strstr(p, "ctrain: ")); p++) one++;
    check_true(name, st == 1 && strstr(out, want) && strstr(out, "hint:") && one == 1 &&
               !strstr(out, "probing") && !strstr(out, "samples/s") && !strstr(out, "CPU smp/s"),
               "exit %d, want one error \"%s\" before anything runs: %s", st, want, out);
}

int main(void)
{
    char dir[] = "/tmp/ctrain_bench_data_XXXXXX";
    if (!mkdtemp(dir)) { check_true("data.tmpdir", 0, "mkdtemp failed"); return 1; }
    char imf[64], file[128], args[400];
    snprintf(imf, sizeof imf, "%s/imf", dir);
    make_folder(imf);
    test_rows(dir, imf);
    test_list(dir, imf);
    test_report_known(dir);

    snprintf(args, sizeof args, "--data %s/missing", dir);
    expect_refused("data.refused.missing", args, "/missing: No such file or directory");
    snprintf(file, sizeof file, "%s/cat/00.jpg", imf);
    snprintf(args, sizeof args, "--models resnet18 --data %s", file);
    expect_refused("data.refused.file", args, "00.jpg: not a folder");
    expect_refused("data.refused.decode_alone", "--decode cpu", "--decode sets the real-data rows: add --data DIR");
    snprintf(args, sizeof args, "--data %s --decode cpu,jpeg", imf);
    expect_refused("data.refused.decode_bad", args, "--decode: 'jpeg' is not auto, cpu or gpu");
    snprintf(args, sizeof args, "--data %s --decode cpu,cpu", imf);
    expect_refused("data.refused.decode_twice", args, "--decode: 'cpu' given twice");
    snprintf(args, sizeof args, "--data %s --soak 3s", imf);
    expect_refused("data.refused.soak", args, "--data adds real-data rows to the throughput suite: drop --soak");
    snprintf(args, sizeof args, "--data %s --decode gpu --models resnet18", imf);
    {   /* after the probe (which says whether a GPU is there), before any config */
        char cmd[2048], out[4096];
        snprintf(cmd, sizeof cmd, "%s bench --device cpu %s 2>&1", bin(), args);
        int st = run(cmd, out, sizeof out);
        check_true("data.refused.gpu_on_cpu", st == 1 && strstr(out, "--decode gpu: this bench runs on the CPU") &&
                   strstr(out, "hint:") && !strstr(out, "CPU smp/s"), "exit %d: %s", st, out);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) printf("  (could not remove %s)\n", dir);
    printf("%d passed, %d failed\n", check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}
