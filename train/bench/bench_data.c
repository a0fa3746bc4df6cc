/* bench_data.c — `ctrain bench --data DIR`: the real-data rows
 * (bench_data.h): the options, the suite's extra configs and their window,
 * the header's note and the table's line under each real-data row.
 */
#include "bench_data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "engine/error.h"

#define DATA_HINT "pass an ImageFolder root, DIR/CLASS/*.jpg (python3 scripts/make_image_folder.py " \
                  "DIR makes one)"

void bench_data_parse_dir(BenchData *d, const char *v)
{
    const char *dir = !strncmp(v, "imagefolder:", 12) ? v + 12 : v;
    struct stat st;
    if (strlen(dir) >= sizeof d->dir) ct_fatal_hint(DATA_HINT, "bench --data: path too long");
    if (stat(dir, &st) != 0)
        ct_fatal_hint(DATA_HINT, "bench --data %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) ct_fatal_hint(DATA_HINT, "bench --data %s: not a folder", dir);
    snprintf(d->dir, sizeof d->dir, "%s", dir);
}

void bench_data_parse_decode(BenchData *d, const char *v)
{
    char buf[64];
    if (strlen(v) >= sizeof buf)
        ct_fatal_hint("pass --decode auto, cpu, gpu or a list of them", "--decode: list too long");
    snprintf(buf, sizeof buf, "%s", v);
    d->n_decode = 0;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (strcmp(t, "auto") && strcmp(t, "cpu") && strcmp(t, "gpu"))
            ct_fatal_hint("pass --decode auto, cpu, gpu or a list of them (cpu,gpu: a row each)",
                          "--decode: '%s' is not auto, cpu or gpu", t);
        for (int i = 0; i < d->n_decode; i++)
            if (!strcmp(d->decode[i], t))
                ct_fatal_hint("name each decoder once", "--decode: '%s' given twice", t);
        snprintf(d->decode[d->n_decode++], sizeof d->decode[0], "%s", t);
    }
    if (!d->n_decode) ct_fatal_hint("pass --decode auto, cpu or gpu", "--decode needs a value");
}

int bench_data_takes_images(ModelKind model) { return model_kind_is_resnet(model); }

static int data_workers(const BenchData *d)
{
    if (d->workers > 0) return d->workers;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

int bench_data_expand(BenchConfig **cfgs, int n, const BenchData *d)
{
    if (!d->dir[0]) return n;
    int nd = d->n_decode ? d->n_decode : 1;
    BenchConfig *out = (BenchConfig *)malloc((size_t)(n * (nd + 1) + 1) * sizeof *out);
    if (!out) ct_fatal("out of host memory");
    int k = 0;
    for (int i = 0; i < n; i++) {
        BenchConfig c = (*cfgs)[i];
        int real = bench_data_takes_images(c.model);
        if (real) {   /* the window rule (bench_data.h), for both rows */
            if (c.steps < BENCH_DATA_MIN_STEPS) c.steps = BENCH_DATA_MIN_STEPS;
            if (c.min_steps < BENCH_DATA_MIN_STEPS) c.min_steps = BENCH_DATA_MIN_STEPS;
        }
        out[k++] = c;
        for (int j = 0; real && j < nd; j++) {
            BenchConfig r = c;
            snprintf(r.data, sizeof r.data, "%s", d->dir);
            snprintf(r.decode, sizeof r.decode, "%s", d->n_decode ? d->decode[j] : "auto");
            r.workers = data_workers(d);
            out[k++] = r;
        }
    }
    free(*cfgs);
    *cfgs = out;
    return k;
}

void bench_data_print_header(const BenchData *d, const BenchConfig *cfgs, int n)
{
    if (!d->dir[0]) return;
    char list[64] = "";
    for (int j = 0; j < (d->n_decode ? d->n_decode : 1); j++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%s", j ? ", " : "", d->n_decode ? d->decode[j] : "auto");
    }
    printf("real data: %s through the image feed, %d loader thread%s; a real-data row per decoder "
           "(%s) after each image config's synthetic row\n", d->dir, data_workers(d),
           data_workers(d) == 1 ? "" : "s", list);
    printf("real data: both rows of such a config time at least %d steps (the loader's %d-slot ring "
           "refilled at least once while timing)\n", BENCH_DATA_MIN_STEPS, LOADER_DEFAULT_SLOTS);
    char skipped[256] = "";
    for (int i = 0; i < n; i++) {
        const char *name = model_kind_name(cfgs[i].model);
        if (bench_data_takes_images(cfgs[i].model) || strstr(skipped, name)) continue;
        size_t l = strlen(skipped);
        snprintf(skipped + l, sizeof skipped - l, "%s%s", l ? ", " : "", name);
    }
    if (skipped[0]) printf("real data: %s take%s no images: synthetic rows only\n", skipped,
                           strchr(skipped, ',') ? "" : "s");
}

/* The row's mean throughput over the window, else its median figure. */
static double row_rate(const BenchRow *row)
{
    double v = row->r.samples_per_s_mean;
    return isfinite(v) ? v : row->r.samples_per_s;
}

void bench_data_table_row(const BenchRow *real, const BenchRow *synth)
{
    const BenchResult *r = &real->r;
    if (real->error[0]) return;   /* the row shows the error */
    char vs[96] = "", wait[48] = "", dec[96] = "", fb[48] = "";
    double a = row_rate(real), b = synth && !synth->error[0] ? row_rate(synth) : NAN;
    if (isfinite(a) && isfinite(b) && b > 0)
        snprintf(vs, sizeof vs, "%.1f%% of synthetic (%.0f vs %.0f samples/s over the window)", 100 * a / b,
                 a, b);
    else
        snprintf(vs, sizeof vs, "no synthetic figure to compare");
    if (isfinite(r->data_wait_fraction))
        snprintf(wait, sizeof wait, "; data wait %.1f%%", 100 * r->data_wait_fraction);
    if (isfinite(r->decode_images_per_s)) {
        size_t l = (size_t)snprintf(dec, sizeof dec, "; decode %.0f img/s", r->decode_images_per_s);
        if (isfinite(r->decode_capacity_images_per_s))
            snprintf(dec + l, sizeof dec - l, " (capacity %.0f)", r->decode_capacity_images_per_s);
    }
    if (isfinite(r->cpu_fallback)) snprintf(fb, sizeof fb, "; %.0f CPU fallback%s", r->cpu_fallback,
                                            r->cpu_fallback == 1 ? "" : "s");
    printf("    real data, decode %s %s %s: %s%s%s%s\n", real->decode, real->decoder[0] ? "->" : "(decoder",
           real->decoder[0] ? real->decoder : "not reported: the feed keeps no statistics)", vs, wait, dec, fb);
    fflush(stdout);
}
