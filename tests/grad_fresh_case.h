/* grad_fresh_case.h — one case of CTRAIN_GRAD_FRESH for tests/test_grad_fresh.c
 * (CPU) and tests/gpu_grad_fresh.c: a run of `ctrain train` options trained
 * GRAD_FRESH_STEPS steps with the switch off, then on; whether the switch
 * took the step (one micro-batch, one device, the update after backward) or
 * stayed out, and the same losses and final weights, bit for bit (on the
 * GPU a written gradient's convolution takes its adding twin's algorithm;
 * its GEMM, the heuristic's answer, the same one with the search off).
 * Include after check.h. */
#ifndef CTRAIN_TESTS_GRAD_FRESH_CASE_H
#define CTRAIN_TESTS_GRAD_FRESH_CASE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/mem.h"
#include "train_run.h"

enum { GRAD_FRESH_STEPS = 4 };

static void grad_fresh_train(Ctx *c, Device dev, const char *args, int fresh, float *losses,
                             float **w, size_t *nw, int *engaged)
{
    setenv("CTRAIN_GRAD_FRESH", fresh ? "1" : "0", 1);
    Run r;
    run_open(&r, c, args, dev);
    *engaged = 0;
    for (int s = 0; s < GRAD_FRESH_STEPS; s++) {
        trainer_step(&r.tr);
        losses[s] = trainer_loss_value(&r.tr);
        *engaged |= r.tr.grad_fresh;
    }
    ParamSet *ps = &r.m.params;
    *nw = ps->total;
    *w = (float *)malloc(ps->total * sizeof(float));
    mem_to_host(ps->ctx, *w, ps->data, ps->total * sizeof(float));
    run_close(&r, c);
    unsetenv("CTRAIN_GRAD_FRESH");
}

__attribute__((unused)) static void grad_fresh_same_run(Ctx *c, Device dev, const char *name,
                                                        const char *args, int engages)
{
    float la[GRAD_FRESH_STEPS], lb[GRAD_FRESH_STEPS], *wa, *wb;
    size_t na = 0, nb = 0;
    int ea = 0, eb = 0;
    grad_fresh_train(c, dev, args, 0, la, &wa, &na, &ea);
    grad_fresh_train(c, dev, args, 1, lb, &wb, &nb, &eb);
    const int last = GRAD_FRESH_STEPS - 1;
    char n[240];
    snprintf(n, sizeof n, "%s: the switch %s the step", name, engages ? "takes" : "stays out of");
    check_true(n, ea == 0 && eb == engages, "engaged off %d, on %d", ea, eb);
    double dl = 0.0, dw = 0.0;
    for (int s = 0; s < GRAD_FRESH_STEPS; s++)
        dl = fmax(dl, fabs((double)la[s] - lb[s]) / fmax(fabs((double)la[s]), 1e-30));
    for (size_t i = 0; na == nb && i < na; i++) dw = fmax(dw, fabs((double)wa[i] - wb[i]));
    snprintf(n, sizeof n, "%s: %d losses bit for bit (%.5f -> %.5f)", name, GRAD_FRESH_STEPS,
             (double)la[0], (double)la[last]);
    check_true(n, !memcmp(la, lb, sizeof la) && isfinite(la[last]) && la[last] != la[0],
               "worst relative difference %.3g", dl);
    snprintf(n, sizeof n, "%s: final weights bit for bit", name);
    check_true(n, na == nb && !memcmp(wa, wb, na * sizeof(float)), "worst difference %.3g", dw);
    free(wa);
    free(wb);
}

#endif
