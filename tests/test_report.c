/* test_report.c — `ctrain report` across cards, on made-up bench files:
 *   - bench JSONs of 1, 2 and 4 cards (H200, A100-SXM4-80GB, RTX 4090,
 *     RTX A6000) with models of very different magnitudes (an MLP at 14,444
 *     samples/s, BERT-tiny at 82), a PyTorch file for the H200, one machine
 *     record with the newer fields null and one with them present (power
 *     limit, ECC, PCIe, NVLink, other processes, a warning);
 *   - the throughput table has the cards as columns, named by the GPU, plus
 *     PyTorch's column and a ctrain/PyTorch ratio for the card that has one;
 *     a figure a card lacks is "–"; the captions carry power limit and ECC
 *     (or "–"), the warning is shown; --price adds the cost table; every
 *     question's table appears when a file has its figures; two files of one
 *     card get distinguishable labels; --label and --baseline; bad --price;
 *     a file of recompute-only runs joins its card's column (the recompute
 *     table pairs them); the questions no file answers are listed with the
 *     command that measures each, and none when every one is answered;
 *   - with matplotlib (for the python3 ctrain report picks), the per-model,
 *     batch-curve and recompute charts exist as PNG (the PNG signature, a
 *     readable width) and SVG; without it (always checked with python3 -S,
 *     which hides site-packages), the report names the package to install
 *     and still writes the tables.
 * Runs build/ctrain (CTRAIN_BIN overrides) from the repository root; skips
 * when python3 is absent.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "cli_util.h"
#include "file_util.h"

/* ---- Writing the made-up bench files. */

typedef struct Buf { char s[16384]; size_t n; } Buf;

static void put(Buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
    va_end(ap);
    if (k > 0) b->n += (size_t)k < sizeof b->s - b->n ? (size_t)k : sizeof b->s - b->n - 1;
}

/* The machine record: the newer fields present (full) or null. */
static void machine(Buf *b, const char *gpu, int full)
{
    put(b, "{\"schema\": \"ctrain-bench/1\", \"command\": \"ctrain bench\", \"machine\": {\"gpu_name\": \"%s\", "
        "\"gpu_memory_bytes\": 85899345920, \"gpu_count\": 1, \"driver\": \"580.65.06\", "
        "\"cuda_runtime\": \"13.0\", \"cudnn\": \"9.14.0\", \"date\": \"2026-12-05T10:00:00Z\", ", gpu);
    if (full)
        put(b, "\"ecc_enabled\": true, \"power_limit_w\": 700, \"persistence_mode\": true, \"pcie_gen\": 5, "
            "\"pcie_width\": 16, \"nvlink_active_links\": 18, \"other_gpu_processes\": [{\"pid\": 4242, "
            "\"name\": \"python3\", \"used_bytes\": 1073741824}], \"load_avg_start\": [0.5, 0.4, 0.3], "
            "\"load_avg_end\": [1.5, 0.9, 0.4], \"warnings\": [\"another process (python3, pid 4242) "
            "holds 1.0 GiB of this GPU\"]}");
    else
        put(b, "\"ecc_enabled\": null, \"power_limit_w\": null, \"persistence_mode\": null, \"pcie_gen\": null, "
            "\"pcie_width\": null, \"nvlink_active_links\": null, \"other_gpu_processes\": null, "
            "\"load_avg_start\": null, \"load_avg_end\": null, \"warnings\": null}");
    put(b, ", \"results\": [");
}

/* One result row; sps 0 = not measured; extra: more fields, or NULL. */
static void result(Buf *b, const char *engine, const char *mode, const char *model, const char *prec, int batch,
                   double sps, double gib, double watts, const char *extra)
{
    put(b, "%s{\"engine\": \"%s\", \"mode\": \"%s\", \"model\": \"%s\", \"precision\": \"%s\", \"batch\": %d",
        b->s[b->n - 1] == '[' ? "" : ", ", engine, mode, model, prec, batch);
    if (!strncmp(model, "resnet", 6)) put(b, ", \"image_size\": 224, \"layout\": \"nhwc\"");
    if (!strncmp(model, "bert", 4)) put(b, ", \"seq\": 128");
    if (sps > 0)
        put(b, ", \"samples_per_s\": %.3f, \"ms_per_step\": %.4f, \"peak_mem_bytes\": %.0f, \"mfu_peak\": 0.25",
            sps, 1e3 * batch / sps, gib * 1073741824.0);
    if (watts > 0)
        put(b, ", \"power_avg_w\": %.1f, \"samples_per_s_per_w\": %.5f, \"temp_max_c\": 61, "
            "\"sm_clock_avg_mhz\": 1905, \"throttle\": \"none\"", watts, sps / watts);
    if (extra) put(b, ", %s", extra);
    put(b, "}");
}

static void finish(Buf *b, const char *dir, const char *name, const char *ceiling)
{
    put(b, "], \"ceilings\": [%s]}\n", ceiling ? ceiling : "");
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    file_write(path, b->s, b->n);
    b->n = 0;
}

static void write_files(const char *dir)
{
    Buf b = {.n = 0};
    /* the H200: every kind of row ctrain bench writes, the newer machine fields present */
    machine(&b, "NVIDIA H200", 1);
    result(&b, "ctrain", "graph", "resnet50", "bf16", 64, 5460, 3.4, 560, NULL);
    result(&b, "ctrain", "graph", "resnet50", "bf16", 256, 6865, 12.1, 580,
           "\"step_ms_p50\": 37.2, \"step_ms_p99\": 41.9, \"mfu_measured_ceiling\": 0.21");
    result(&b, "ctrain", "eager", "resnet50", "bf16", 256, 6100, 12.1, 570, NULL);
    result(&b, "ctrain", "graph recompute-all", "resnet50", "bf16", 256, 5600, 7.0, 575, NULL);
    result(&b, "ctrain", "graph dp-x2", "resnet50", "bf16", 256, 6731, 12.0, 590, NULL);
    result(&b, "ctrain", "graph", "mlp", "fp32", 128, 14444, 0.2, 150, NULL);
    result(&b, "ctrain", "graph", "bert-tiny", "fp32", 32, 82, 0.1, 90,
           "\"model_note\": \"BERT-tiny at hidden 64 (a reduced width)\"");
    result(&b, "ctrain", "graph", "resnet50", "bf16", 256, 5600, 12.1, 580,
           "\"data\": \"/data/imagenet\", \"decode\": \"gpu\", \"decoder\": \"gpu (nvJPEG hardware)\", "
           "\"samples_per_s_mean\": 5600, \"data_wait_fraction\": 0.12");
    result(&b, "ctrain", "max-batch", "resnet50", "bf16", 1400, 0, 0, 0, "\"peak_mem_bytes\": 130e9");
    result(&b, "ctrain", "max-batch recompute-all", "resnet50", "bf16", 3200, 0, 0, 0, "\"peak_mem_bytes\": 131e9");
    result(&b, "ctrain", "soak", "resnet50", "bf16", 256, 6800, 12.1, 585,
           "\"soak\": {\"duration_s\": 3600, \"mem_fluctuation_pct\": 0.01, \"throughput_drift_pct\": -0.4, "
           "\"temp_max_c\": 66, \"throttling_seen\": false, \"nonfinite_loss\": 0}");
    finish(&b, dir, "h200.json", "{\"name\": \"matmul bf16 8192^3\", \"precision\": \"bf16\", \"tflops\": 788}");
    /* the same card again (another run): the labels must tell them apart */
    machine(&b, "NVIDIA H200", 1);
    result(&b, "ctrain", "graph", "resnet50", "bf16", 256, 6790, 12.1, 580, NULL);
    finish(&b, dir, "h200_b.json", NULL);
    /* a recompute-only run of the H200 (ctrain bench --recompute all): folds into h200_b's column */
    machine(&b, "NVIDIA H200", 1);
    result(&b, "ctrain", "graph recompute-all", "resnet50", "bf16", 256, 5600, 7.0, 575, NULL);
    finish(&b, dir, "h200_rec.json", NULL);
    /* the same, from another machine (another driver): must not join */
    machine(&b, "NVIDIA H200", 1);
    char *drv = strstr(b.s, "580.65.06");
    if (drv) memcpy(drv, "570.86.15", 9);
    result(&b, "ctrain", "graph recompute-all", "resnet50", "bf16", 256, 5600, 7.0, 575, NULL);
    finish(&b, dir, "h200_rec_other.json", NULL);
    /* PyTorch on the H200, with an out-of-memory config ctrain did not run */
    machine(&b, "NVIDIA H200", 0);
    result(&b, "pytorch 2.11.0+cu130", "eager", "resnet50", "bf16", 64, 3900, 3.1, 600, NULL);
    result(&b, "pytorch 2.11.0+cu130", "eager", "resnet50", "bf16", 256, 4748, 11.5, 640, NULL);
    result(&b, "pytorch 2.11.0+cu130", "eager", "resnet50", "bf16", 1024, 0, 0, 0, "\"error\": \"out of memory\"");
    finish(&b, dir, "h200_torch.json", NULL);
    /* the A100: the newer machine fields null, no BERT row, no power */
    machine(&b, "NVIDIA A100-SXM4-80GB", 0);
    result(&b, "ctrain", "graph", "resnet50", "bf16", 64, 2500, 3.4, 0, NULL);
    result(&b, "ctrain", "graph", "resnet50", "bf16", 256, 2950, 12.1, 0, NULL);
    result(&b, "ctrain", "graph", "mlp", "fp32", 128, 9000, 0.2, 0, NULL);
    result(&b, "ctrain", "graph", "bert-tiny", "fp8", 32, 0, 0, 0, "\"error\": \"not supported: "
           "NVIDIA A100-SXM4-80GB (sm_80) has no FP8 tensor cores (sm_89 and later)\"");
    finish(&b, dir, "a100.json", NULL);
    machine(&b, "NVIDIA GeForce RTX 4090", 0);
    result(&b, "ctrain", "graph", "resnet50", "bf16", 256, 1900, 12.1, 420, NULL);
    result(&b, "ctrain", "graph", "mlp", "fp32", 128, 12000, 0.2, 200, NULL);
    finish(&b, dir, "rtx4090.json", NULL);
    machine(&b, "NVIDIA RTX A6000", 0);
    result(&b, "ctrain", "graph", "resnet50", "bf16", 256, 1300, 12.1, 290, NULL);
    result(&b, "ctrain", "graph", "bert-tiny", "fp32", 32, 60, 0.1, 100, NULL);
    finish(&b, dir, "a6000.json", NULL);
}

/* ---- Reading the report. */

static char *slurp(const char *path)
{
    size_t n;
    return file_read(path, &n);
}

/* The cells of the table row that starts with `start`, as "a|b|c" (trimmed,
 * '|'-joined) into out; the number of cells, 0 when there is no such row. */
static int row_cells(const char *md, const char *start, char *out, size_t len)
{
    const char *p = md ? strstr(md, start) : NULL;
    out[0] = 0;
    if (!p) return 0;
    const char *end = strchr(p, '\n');
    if (!end) end = p + strlen(p);
    int n = 0;
    size_t o = 0;
    for (const char *c = p + 1; c < end;) {
        const char *bar = memchr(c, '|', (size_t)(end - c));
        if (!bar) break;
        const char *a = c, *z = bar;
        while (a < z && *a == ' ') a++;
        while (z > a && z[-1] == ' ') z--;
        o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%.*s", n ? "|" : "", (int)(z - a), a);
        n++;
        c = bar + 1;
    }
    return n;
}

#define HEADER "| model | precision | batch | seq / image |"

/* Passes when ok and the row starting with `start` has exactly the cells want. */
static int check_row(const char *name, int ok, const char *md, const char *start, const char *want)
{
    char cells[1024];
    row_cells(md, start, cells, sizeof cells);
    return check_true(name, ok && !strcmp(cells, want), "row \"%s\": %s (want %s)", start,
                      ok ? cells : "the report failed", want);
}

/* Run ctrain report with args (files relative to dir); the output into out,
 * the markdown (--out) into *md (free it). */
static int report(const char *dir, const char *args, char *out, size_t len, char **md)
{
    char cmd[3 * PATH_MAX], exe[PATH_MAX];
    if (!realpath(bin(), exe)) snprintf(exe, sizeof exe, "%s", bin());
    snprintf(cmd, sizeof cmd, "cd %s && %s report %s --out report.md 2>&1", dir, exe, args);
    char path[600];
    snprintf(path, sizeof path, "%s/report.md", dir);
    unlink(path);
    int st = run(cmd, out, len);
    *md = slurp(path);
    return st;
}

static void test_one_card(const char *dir)
{
    char out[8192], *md;
    int st = report(dir, "h200.json", out, sizeof out, &md);
    if (!check_row("report.one_card.header", st == 0, md, HEADER, "model|precision|batch|seq / image|H200"))
        printf("%s", out);
    check_row("report.one_card.mlp", st == 0, md, "| mlp |", "mlp|fp32|128|–|14,444");
    check_row("report.one_card.bert_tiny", st == 0, md, "| bert-tiny |", "bert-tiny|fp32|32|128|82.0 [n1]");
    check_true("report.one_card.model_note", md && strstr(md, "[n1] H200, bert-tiny fp32 bs32 seq128: BERT-tiny "
               "at hidden 64"), "the model note is not a footnote");
    const char *tables[] = {"## Cards", "## Throughput", "## Step time (ms, p50 / p99)", "## Energy", "## MFU",
                            "## Power, temperature, clock", "## Peak memory", "## Recompute", "## Largest batch",
                            "## Eager vs CUDA graphs", "## Real data", "## Multi-GPU scaling", "## Soak",
                            "## Measured matmul ceilings"};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "report.one_card.table.%.40s", tables[i] + 3);
        check_true(name, md && strstr(md, tables[i]), "no \"%s\" section", tables[i]);
    }
    check_true("report.one_card.rows", md && strstr(md, "| resnet50 bf16 bs256 | 37.2 / 41.9 |") &&
               strstr(md, "| resnet50 bf16 | 1,400 / 3,200 |") && strstr(md, "6,100 → 6,865 (1.13×)") &&
               strstr(md, "| resnet50 bf16 bs256 | 2 | 13,462 (98.0%) |") &&
               strstr(md, "12.1 → 7.0 GiB, -18% samples/s"),
               "step time, largest batch, eager/graph, scaling or recompute cell wrong");
    check_true("report.one_card.caption", md && strstr(md, "power limit 700 W · ECC on") &&
               strstr(md, "PCIe gen 5 x16") && strstr(md, "NVLink 18 active links") &&
               strstr(md, "other processes on the GPU: python3 (pid 4242, 1.0 GiB)") &&
               strstr(md, "**warning:** another process (python3, pid 4242) holds 1.0 GiB of this GPU"),
               "the H200 caption misses a machine field or the warning");
    free(md);
}

static void test_two_cards(const char *dir)
{
    char out[8192], *md;
    int st = report(dir, "h200.json a100.json h200_torch.json --price H200=3.5", out, sizeof out, &md);
    if (!check_row("report.two_cards.header", st == 0, md, HEADER, "model|precision|batch|seq / image|"
                   "H200|H200 PyTorch|H200 ctrain/PyTorch|A100-SXM4-80GB"))
        printf("%s", out);
    check_row("report.two_cards.row", st == 0, md, "| resnet50 | bf16 | 256 |",
              "resnet50|bf16|256|224|6,865|4,748|1.45×|2,950");
    check_row("report.two_cards.missing_is_dash", st == 0, md, "| bert-tiny |",
              "bert-tiny|fp32|32|128|82.0 [n1]|–|–|–");
    check_row("report.two_cards.oom", st == 0, md, "| resnet50 | bf16 | 1024 |",
              "resnet50|bf16|1024|224|–|OOM|–|–");
    /* a config the card cannot run is an answer too, with its reason as a note */
    check_row("report.two_cards.unsupported", st == 0, md, "| bert-tiny | fp8 |",
              "bert-tiny|fp8|32|128|–|–|–|n/a [1]");
    check_true("report.two_cards.unsupported_note", md && strstr(md, "(sm_80) has no FP8 tensor cores"),
               "the reason a card cannot run fp8 is not in the notes");
    check_true("report.two_cards.captions", md && strstr(md, "- **A100-SXM4-80GB** (`a100.json`): NVIDIA "
               "A100-SXM4-80GB 80 GiB · ctrain (graph) · driver 580.65.06 · CUDA 13.0 · cuDNN 9.14.0 · "
               "power limit – · ECC – · 2026-12-05 10:00 UTC") && strstr(md, "**warning:** another process"),
               "the A100's caption (null fields: –) or the H200's warning is wrong");
    /* the H200's price is PyTorch's on it too; the A100 has none */
    check_row("report.two_cards.price", md && strstr(md, "## Cost (US$ per million samples)"), md,
              "| resnet50 bf16 bs256 | $", "resnet50 bf16 bs256|$0.142|$0.205");
    check_true("report.two_cards.energy_columns", md && strstr(md, "## Energy (J/sample, samples/s per W)\n\n") &&
               strstr(strstr(md, "## Energy"), "| config | H200 | H200 PyTorch |\n"),
               "the energy table's columns are not H200, H200 PyTorch (the A100 has no power)");
    const char *tp = md ? strstr(md, "## Throughput") : NULL, *te = tp ? strstr(tp + 3, "\n## ") : NULL;
    int zero = 0;
    for (const char *p = tp; p && p < te; p++) zero |= !strncmp(p, "| 0 |", 5) || !strncmp(p, "| 0.0 |", 7);
    check_true("report.two_cards.no_zero", tp && te && !zero, "a throughput cell says 0 (not measured is –)");
    free(md);
}

/* A recompute-only file joins its card's column (the recompute table pairs
 * it with the other file's run); what no file measured is listed with the
 * command that measures it. */
static void test_fold_and_unmeasured(const char *dir)
{
    char out[8192], *md;
    int st = report(dir, "h200_b.json h200_rec.json", out, sizeof out, &md);
    check_true("report.fold.one_column", st == 0 && md && strstr(md, "- **H200** (`h200_b.json`, "
               "`h200_rec.json`):") && strstr(md, "| resnet50 bf16 bs256 recompute all | 12.1 → 7.0 GiB, "
               "-18% samples/s |"), "exit %d: the recompute file did not join the H200 column: %s", st,
               md ? md : out);
    free(md);
    st = report(dir, "h200_rec.json h200_b.json", out, sizeof out, &md);
    check_true("report.fold.any_order", st == 0 && md && strstr(md, "- **H200** (`h200_b.json`, "
               "`h200_rec.json`):") && strstr(md, "| resnet50 bf16 bs256 recompute all | 12.1 → 7.0 GiB"),
               "exit %d: given first, the recompute file did not join: %s", st, md ? md : out);
    free(md);
    st = report(dir, "h200_b.json h200_rec_other.json", out, sizeof out, &md);
    check_true("report.fold.same_machine_only", st == 0 && md && !strstr(md, "## Recompute") &&
               strstr(md, "(`h200_rec_other.json`)"), "exit %d: another machine's file joined: %s", st,
               md ? md : out);
    free(md);
    st = report(dir, "h200_b.json h200_rec.json", out, sizeof out, &md);
    const char *nm = md ? strstr(md, "## Not measured in these files") : NULL;
    check_true("report.unmeasured.listed", nm && strstr(nm, "- Largest batch: `ctrain bench --max-batch`") &&
               strstr(nm, "- Multi-GPU scaling: `ctrain bench --gpus N`") && strstr(nm, "torch_bench.py") &&
               strstr(nm, "- Cost (US$ per million samples): ") && !strstr(nm, "- Recompute"),
               "the unmeasured questions are not listed as they should be: %s", nm ? nm : "(no section)");
    free(md);
    st = report(dir, "h200.json h200_torch.json --price H200=3", out, sizeof out, &md);
    nm = md ? strstr(md, "## Not measured in these files") : NULL;
    check_true("report.unmeasured.none", st == 0 && md && !nm, "exit %d: a file with every measurement "
               "still lists: %s", st, nm ? nm : out);
    free(md);
}

static void test_four_cards(const char *dir)
{
    char out[8192], *md;
    int st = report(dir, "h200.json a100.json rtx4090.json a6000.json", out, sizeof out, &md);
    check_row("report.four_cards.header", st == 0, md, HEADER, "model|precision|batch|seq / image|"
              "H200|A100-SXM4-80GB|RTX 4090|RTX A6000");
    check_row("report.four_cards.dash", st == 0, md, "| bert-tiny |", "bert-tiny|fp32|32|128|82.0 [n1]|–|–|60.0");
    free(md);

    st = report(dir, "h200.json h200_b.json", out, sizeof out, &md);
    check_row("report.same_card.labels", st == 0, md, HEADER, "model|precision|batch|seq / image|"
              "H200 (h200)|H200 (h200_b)");
    free(md);
    st = report(dir, "h200.json a100.json --label a100.json=A100 --baseline a100.json", out, sizeof out, &md);
    check_row("report.label_baseline", st == 0, md, HEADER, "model|precision|batch|seq / image|H200|A100|H200/A100");
    free(md);
    st = report(dir, "h200.json --price V100=1.2", out, sizeof out, &md);
    check_true("report.price_unknown_card", st == 1 && strstr(out, "--price V100: no column is labelled V100") &&
               !strstr(out, "Traceback"), "exit %d: %s", st, out);
    free(md);
}

/* PNG: the signature, then IHDR's width (big-endian, bytes 16..19). */
static int png_width(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char h[24] = {0};
    size_t n = f ? fread(h, 1, sizeof h, f) : 0;
    if (f) fclose(f);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n < 24 || memcmp(h, sig, 8)) return -1;
    return (h[16] << 24) | (h[17] << 16) | (h[18] << 8) | h[19];
}

static long file_size(const char *path)
{
    size_t n = 0;
    char *s = file_read(path, &n);
    free(s);
    return s ? (long)n : -1;
}

static void test_plots(const char *dir)
{
    char out[8192], *md, path[700];
    int have = system("python3 -c 'import matplotlib' >/dev/null 2>&1") == 0 ||
               system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0;
    int st = report(dir, "h200.json a100.json h200_torch.json --plots plots", out, sizeof out, &md);
    if (have) {
        const char *charts[] = {"resnet50", "mlp", "bert-tiny", "resnet50_batch", "recompute"};
        for (size_t i = 0; i < sizeof charts / sizeof charts[0]; i++) {
            char name[96];
            snprintf(path, sizeof path, "%s/plots/%s.png", dir, charts[i]);
            int w = png_width(path);
            snprintf(name, sizeof name, "report.plots.%s.png", charts[i]);
            check_true(name, st == 0 && w > 200 && w <= 1700, "%s: width %d (want a PNG 200..1700 px wide): %s",
                       path, w, out);
            snprintf(path, sizeof path, "%s/plots/%s.svg", dir, charts[i]);
            snprintf(name, sizeof name, "report.plots.%s.svg", charts[i]);
            check_true(name, file_size(path) > 1000, "%s missing or empty", path);
        }
        check_true("report.plots.linked", md && strstr(md, "](plots/resnet50.png)"), "no link to the chart");
    } else {
        printf("  (no python3 with matplotlib: the charts are not drawn; checking the message)\n");
        check_true("report.plots.missing_said", st == 0 && strstr(out, "python3-matplotlib") && md &&
                   strstr(md, HEADER), "exit %d: %s", st, out);
    }
    free(md);
    /* python3 -S: no site-packages, so no matplotlib whatever is installed */
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "python3 -S scripts/report.py %s/h200.json --plots %s/noplots --out %s/np.md 2>&1",
             dir, dir, dir);
    st = run(cmd, out, sizeof out);
    snprintf(path, sizeof path, "%s/np.md", dir);
    md = slurp(path);
    check_true("report.no_matplotlib.says_fix", st == 0 && strstr(out, "matplotlib is not installed for ") &&
               strstr(out, "install the Debian package python3-matplotlib (sudo apt-get install "
                      "python3-matplotlib) or pip install matplotlib for "), "exit %d: %s", st, out);
    check_true("report.no_matplotlib.tables", md && strstr(md, HEADER) && strstr(md, "python3-matplotlib"),
               "the tables (and the note) are not written without matplotlib");
    free(md);
}

int main(void)
{
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        printf("  skip report.*: python3 is not installed (ctrain report runs scripts/report.py)\n");
        return check_summary();
    }
    char dir[] = "/tmp/ctrain_report_XXXXXX";
    if (!mkdtemp(dir)) { check_true("report.tmpdir", 0, "mkdtemp failed"); return check_summary(); }
    write_files(dir);
    test_one_card(dir);
    test_two_cards(dir);
    test_fold_and_unmeasured(dir);
    test_four_cards(dir);
    test_plots(dir);
    char cmd[600], out[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd, out, sizeof out);
    return check_summary();
}
