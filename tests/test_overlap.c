/* test_overlap.c — the overlapped update (train/loop/overlap.h) on the CPU:
 *   1. training with the update split into buckets and run during backward
 *      gives the same losses and final weights as the update after
 *      backward, bit for bit: bert-tiny (AdamW with warm-up, dropout,
 *      accumulation 2; and recompute all, so buckets become final inside
 *      re-run segments), resnet18 (SGD with Nesterov momentum and weight
 *      decay, batch norm); with small buckets (CTRAIN_OVERLAP_BUCKET_MB) so that
 *      most are handed over mid-backward, which is checked too;
 *   2. the cases that must not overlap do not, and still train: --clip and
 *      LAMB even with CTRAIN_OVERLAP_UPDATE=1; CTRAIN_OVERLAP_UPDATE=0 and
 *      unset (the default is off).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "train/loop/overlap.h"
#include "train_run.h"

/* run_open with CTRAIN_OVERLAP_UPDATE=overlap while the Trainer is made */
static void overlap_run_open(Run *r, Ctx *c, const char *args, const char *overlap)
{
    setenv("CTRAIN_OVERLAP_UPDATE", overlap, 1);
    run_open(r, c, args, DEV_CPU);
    unsetenv("CTRAIN_OVERLAP_UPDATE");
}

enum { STEPS = 4 };

/* Train STEPS steps; losses and a copy of the weights out; returns the
 * buckets handed over during backward (-1: the run did not overlap). */
static int train(Ctx *c, const char *args, const char *overlap, float *losses, float **w,
                 int *buckets)
{
    Run r;
    overlap_run_open(&r, c, args, overlap);
    for (int s = 0; s < STEPS; s++) {
        trainer_step(&r.tr);
        losses[s] = trainer_loss_value(&r.tr);
    }
    ParamSet *ps = &r.m.params;
    *w = (float *)malloc(ps->total * sizeof(float));
    memcpy(*w, ps->data, ps->total * sizeof(float));
    int early = r.tr.overlap ? overlap_early_buckets(r.tr.ov) : -1;
    *buckets = overlap_buckets(r.tr.ov);
    run_close(&r, c);
    return early;
}

static void same_as_after(Ctx *c, const char *name, const char *args, size_t *P)
{
    float la[STEPS], lo[STEPS], *wa, *wo;
    int nb = 0, nb0 = 0;
    int none = train(c, args, "0", la, &wa, &nb0);
    int early = train(c, args, "1", lo, &wo, &nb);
    char n1[160];
    snprintf(n1, sizeof n1, "%s: CTRAIN_OVERLAP_UPDATE=0 keeps the update after backward", name);
    check_true(n1, none == -1, "it overlapped");
    snprintf(n1, sizeof n1, "%s: %d of %d buckets x %d steps updated during backward", name,
             early, nb, STEPS);
    check_true(n1, nb >= 3 && early >= (nb - 2) * STEPS,
               "%d buckets, %d handed over during backward", nb, early);
    int first = -1;
    for (int s = 0; s < STEPS && first < 0; s++)
        if (memcmp(&la[s], &lo[s], sizeof(float))) first = s;
    snprintf(n1, sizeof n1, "%s: %d losses, overlapped == after backward bit for bit", name, STEPS);
    check_true(n1, first < 0, "first difference at step %d: %.9g vs %.9g", first + 1,
               first >= 0 ? (double)la[first] : 0.0, first >= 0 ? (double)lo[first] : 0.0);
    snprintf(n1, sizeof n1, "%s: the loss moved (%.5f -> %.5f)", name, (double)la[0],
             (double)la[STEPS - 1]);
    check_true(n1, isfinite(la[STEPS - 1]) && la[STEPS - 1] != la[0], "it did not");
    Run probe;
    overlap_run_open(&probe, c, args, "0");
    *P = probe.m.params.total;
    run_close(&probe, c);
    snprintf(n1, sizeof n1, "%s: final weights, overlapped == after backward bit for bit", name);
    check_close(n1, wo, wa, *P, 0, 0);
    free(wa);
    free(wo);
}

static void does_not_overlap(Ctx *c, const char *name, const char *args, const char *overlap)
{
    float l[STEPS], *w;
    int nb = 0;
    int early = train(c, args, overlap, l, &w, &nb);
    char n1[160];
    snprintf(n1, sizeof n1, "%s: the update stays after backward", name);
    check_true(n1, early == -1 && nb == 0, "it overlapped (%d buckets)", nb);
    snprintf(n1, sizeof n1, "%s: it trains (loss %.5f -> %.5f)", name, (double)l[0],
             (double)l[STEPS - 1]);
    check_true(n1, isfinite(l[STEPS - 1]) && l[STEPS - 1] != l[0], "it did not");
    free(w);
}

int main(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    size_t P = 0;
    /* small buckets: each holds one or a few parameters, so most are final
     * (and updated) while backward still has layers to go */
    setenv("CTRAIN_OVERLAP_BUCKET_MB", "0.004", 1);
    const char *bert = "--model bert-tiny --data synthetic --batch 4 --seq 32 --steps 4 --optim adamw "
                       "--lr 1e-3 --warmup 2 --wd 0.01 --accum 2";
    same_as_after(&c, "bert-tiny adamw accum 2", bert, &P);
    char br[400];
    snprintf(br, sizeof br, "%s --recompute all", bert);
    same_as_after(&c, "bert-tiny adamw recompute all", br, &P);
    const char *rn = "--model resnet18 --data synthetic --batch 4 --image-size 32 --classes 10 "
                     "--steps 4 --optim sgd --lr 0.05 --momentum 0.9 --nesterov --wd 1e-4";
    same_as_after(&c, "resnet18 sgd nesterov", rn, &P);
    does_not_overlap(&c, "--clip 1", "--model bert-tiny --data synthetic --batch 4 --seq 32 --steps 4 "
                     "--optim adamw --lr 1e-3 --clip 1", "1");
    does_not_overlap(&c, "unset", "--model bert-tiny --data synthetic --batch 4 --seq 32 --steps 4 "
                     "--optim adamw --lr 1e-3", "");
    does_not_overlap(&c, "lamb", "--model bert-tiny --data synthetic --batch 4 --seq 32 --steps 4 "
                     "--optim lamb --lr 1e-2", "1");
    unsetenv("CTRAIN_OVERLAP_BUCKET_MB");
    ctx_free(&c);
    return check_summary();
}
