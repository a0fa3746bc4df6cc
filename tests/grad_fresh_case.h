/* grad_fresh_case.h — one case of CTRAIN_GRAD_FRESH for tests/test_grad_fresh.c
 * (CPU) and tests/gpu_grad_fresh.c: a run of `ctrain train` options trained
 * GRAD_FRESH_STEPS steps with the switch off, then on; whether the switch
 * took the step (one micro-batch, one device, the update after backward) or
 * stayed out, and the same losses and final weights: bit for bit (tol 0),
 * or within tol elementwise where the GPU's searched algorithms may differ
 * between the two runs (a written gradient's GEMM or convolution is a plan
 * of its own, beta 0, searched apart from the adding one's).
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
                                                        const char *args, int engages, float tol)
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
    snprintf(n, sizeof n, "%s: %d losses %s (%.5f -> %.5f)", name, GRAD_FRESH_STEPS,
             tol == 0.0f ? "bit for bit" : "within 1e-2 relative", (double)la[0],
             (double)la[last]);
    const int same_l = tol == 0.0f ? !memcmp(la, lb, sizeof la) : dl <= 1e-2;
    check_true(n, same_l && isfinite(la[last]) && la[last] != la[0],
               "worst relative difference %.3g", dl);
    snprintf(n, sizeof n, "%s: final weights %s", name, tol == 0.0f ? "bit for bit" : "close");
    const int same_w = na == nb && (tol == 0.0f ? !memcmp(wa, wb, na * sizeof(float))
                                                : dw <= (double)tol);
    check_true(n, same_w, "worst difference %.3g (tolerance %.3g)", dw, (double)tol);
    free(wa);
    free(wb);
}

#endif
