/* test_softmax.c — the CPU references of ops/softmax.c and ops/optim.c against
 * double-precision math: softmax forward against the formula, the backwards
 * against central finite differences of double re-implementations of the
 * forwards, cross-entropy (ignore_index, label smoothing, accum) against a
 * double reference, and SGD against a double re-implementation of
 * torch.optim.SGD. Shapes: R rows, C classes.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ops/optim.h"
#include "ops/softmax.h"
#include "check.h"

static float *falloc(size_t n)
{
    float *p = (float *)malloc((n ? n : 1) * sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

static double maxabs(const float *a, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

/* ---- double re-implementations of the forwards (one row) ---- */

static void softmax_row_d(double *y, const double *x, size_t C)
{
    double m = -INFINITY, s = 0.0;
    for (size_t c = 0; c < C; c++) m = fmax(m, x[c]);
    for (size_t c = 0; c < C; c++) s += exp(x[c] - m);
    for (size_t c = 0; c < C; c++) y[c] = exp(x[c] - m) / s;
}

static double lse_row_d(const double *x, size_t C)
{
    double m = -INFINITY, s = 0.0;
    for (size_t c = 0; c < C; c++) m = fmax(m, x[c]);
    for (size_t c = 0; c < C; c++) s += exp(x[c] - m);
    return m + log(s);
}

/* loss_r = -sum_c q[c] log softmax(x)[c],  q = (1 - eps) onehot(t) + eps / C */
static double ce_row_d(const double *x, size_t C, int t, double eps)
{
    double l = lse_row_d(x, C), loss = 0.0;
    for (size_t c = 0; c < C; c++) {
        double q = eps / (double)C + ((size_t)t == c ? 1.0 - eps : 0.0);
        loss -= q * (x[c] - l);
    }
    return loss;
}

/* L_r = sum_c w[c] softmax(x)[c]: its gradient is the softmax backward with dy = w. */
static double softmax_dot_d(const double *x, const float *w, size_t C, double *tmp)
{
    softmax_row_d(tmp, x, C);
    double s = 0.0;
    for (size_t c = 0; c < C; c++) s += w[c] * tmp[c];
    return s;
}

/* Finite differences are O(C) per element; for wide rows check a sample of
 * the columns (every 7th, shifted per row) and always the target. */
static int fd_sampled(size_t r, size_t c, size_t C, int t)
{
    return C <= 64 || c % 7 == r % 7 || (size_t)t == c;
}

static const double FD_H = 1e-4;

/* ---- softmax ---- */

static void test_softmax(size_t R, size_t C, float lo, float hi)
{
    char name[128];
    size_t n = R * C;
    float *x = falloc(n), *y = falloc(n), *yref = falloc(n);
    float *dy = falloc(n), *dx = falloc(n), *dx0 = falloc(n);
    double *xr = (double *)malloc(C * sizeof(double)), *tmp = (double *)malloc(C * sizeof(double));
    float *got = falloc(n), *ref = falloc(n);
    check_fill(x, n, lo, hi);
    check_fill(dy, n, -1.0f, 1.0f);
    check_fill(dx0, n, -0.5f, 0.5f);

    softmax_forward_cpu(y, x, R, C);
    for (size_t r = 0; r < R; r++) {
        for (size_t c = 0; c < C; c++) xr[c] = x[r * C + c];
        softmax_row_d(tmp, xr, C);
        for (size_t c = 0; c < C; c++) yref[r * C + c] = (float)tmp[c];
    }
    snprintf(name, sizeof name, "softmax.y (%zu,%zu) x in [%g,%g)", R, C, lo, hi);
    check_close(name, y, yref, n, 1e-9, 2e-6);
    double *rowsum = (double *)malloc(R * sizeof(double));
    double *one = (double *)malloc(R * sizeof(double));
    for (size_t r = 0; r < R; r++) {
        rowsum[r] = 0.0;
        one[r] = 1.0;
        for (size_t c = 0; c < C; c++) rowsum[r] += y[r * C + c];
    }
    snprintf(name, sizeof name, "softmax.rowsum (%zu,%zu)", R, C);
    check_close_f64(name, rowsum, one, R, 1e-5, 0.0);
    free(rowsum);
    free(one);

    for (int accum = 0; accum <= 1; accum++) {
        memcpy(dx, dx0, n * sizeof(float));
        softmax_backward_cpu(dx, dy, y, R, C, accum);
        size_t k = 0;
        for (size_t r = 0; r < R; r++) {
            for (size_t c = 0; c < C; c++) xr[c] = x[r * C + c];
            for (size_t c = 0; c < C; c++) {
                if (!fd_sampled(r, c, C, -1)) continue;
                double x0 = xr[c];
                xr[c] = x0 + FD_H;
                double lp = softmax_dot_d(xr, dy + r * C, C, tmp);
                xr[c] = x0 - FD_H;
                double lm = softmax_dot_d(xr, dy + r * C, C, tmp);
                xr[c] = x0;
                double fd = (lp - lm) / (2.0 * FD_H);
                got[k] = dx[r * C + c];
                ref[k] = (float)(fd + (accum ? dx0[r * C + c] : 0.0));
                k++;
            }
        }
        snprintf(name, sizeof name, "softmax.dx (%zu,%zu) accum %d vs finite differences", R,
                 C, accum);
        check_close(name, got, ref, k, 1e-6 * maxabs(ref, k) + 1e-9, 1e-4);
    }
    free(x); free(y); free(yref); free(dy); free(dx); free(dx0);
    free(xr); free(tmp); free(got); free(ref);
}

/* ---- cross-entropy ---- */

enum { IGN_NONE, IGN_SOME, IGN_ALL };
static const char *ign_names[] = {"none ignored", "some ignored", "all ignored"};

static void test_cross_entropy(size_t R, size_t C, int ignore_mode, int ignore_index,
                               float eps)
{
    char name[192], tag[96];
    snprintf(tag, sizeof tag, "(%zu,%zu) %s (ignore %d) eps %g", R, C,
             ign_names[ignore_mode], ignore_index, eps);
    size_t n = R * C;
    float *x = falloc(n), *lse = falloc(R), *lse_ref = falloc(R);
    float *dx = falloc(n), *dx0 = falloc(n), *got = falloc(n), *ref = falloc(n);
    int32_t *t = (int32_t *)malloc(R * sizeof(int32_t));
    double *xr = (double *)malloc(C * sizeof(double));
    check_fill(x, n, -6.0f, 6.0f);
    check_fill(dx0, n, -0.5f, 0.5f);
    size_t nvalid_ref = 0;
    double total = 0.0;
    for (size_t r = 0; r < R; r++) {
        int ign = ignore_mode == IGN_ALL || (ignore_mode == IGN_SOME && r % 3 == 1);
        if (ign) {
            t[r] = ignore_index;
        } else {
            do t[r] = (int32_t)(check_uniform(0.0f, 1.0f) * (float)C) % (int32_t)C;
            while (t[r] == ignore_index);
        }
        if (t[r] == ignore_index) { lse_ref[r] = 0.0f; continue; }
        for (size_t c = 0; c < C; c++) xr[c] = x[r * C + c];
        lse_ref[r] = (float)lse_row_d(xr, C);
        total += ce_row_d(xr, C, t[r], eps);
        nvalid_ref++;
    }
    float loss_ref = nvalid_ref ? (float)(total / (double)nvalid_ref) : 0.0f;
    float loss = NAN, nvalid = NAN;
    cross_entropy_forward_cpu(&loss, lse, &nvalid, x, t, R, C, ignore_index, eps);
    snprintf(name, sizeof name, "ce.loss %s", tag);
    check_close(name, &loss, &loss_ref, 1, 1e-6, 1e-6);
    snprintf(name, sizeof name, "ce.lse %s", tag);
    check_close(name, lse, lse_ref, R, 1e-6, 1e-6);
    snprintf(name, sizeof name, "ce.nvalid %s", tag);
    check_true(name, nvalid == (float)nvalid_ref, "nvalid %g, expected %zu", nvalid,
               nvalid_ref);

    const float dloss = 0.75f;
    for (int accum = 0; accum <= 1; accum++) {
        memcpy(dx, dx0, n * sizeof(float));
        cross_entropy_backward_cpu(dx, &dloss, x, lse, &nvalid, t, R, C, ignore_index, eps,
                                   accum);
        size_t k = 0;
        for (size_t r = 0; r < R; r++) {
            int ign = t[r] == ignore_index;
            for (size_t c = 0; c < C; c++) xr[c] = x[r * C + c];
            for (size_t c = 0; c < C; c++) {
                if (!fd_sampled(r, c, C, t[r])) continue;
                double fd = 0.0;
                if (!ign) {
                    double x0 = xr[c];
                    xr[c] = x0 + FD_H;
                    double lp = ce_row_d(xr, C, t[r], eps);
                    xr[c] = x0 - FD_H;
                    double lm = ce_row_d(xr, C, t[r], eps);
                    xr[c] = x0;
                    fd = dloss * (lp - lm) / (2.0 * FD_H) / (double)nvalid_ref;
                }
                got[k] = dx[r * C + c];
                ref[k] = (float)(fd + (accum ? dx0[r * C + c] : 0.0));
                k++;
            }
        }
        snprintf(name, sizeof name, "ce.dx accum %d %s vs finite differences", accum, tag);
        check_close(name, got, ref, k, 1e-6 * maxabs(ref, k) + 1e-9, 1e-4);
    }
    if (ignore_mode == IGN_ALL) {
        /* nothing to learn from: loss 0, gradient exactly 0 / untouched */
        snprintf(name, sizeof name, "ce.all_ignored %s", tag);
        memcpy(dx, dx0, n * sizeof(float));
        cross_entropy_backward_cpu(dx, &dloss, x, lse, &nvalid, t, R, C, ignore_index, eps, 1);
        int same = memcmp(dx, dx0, n * sizeof(float)) == 0;
        cross_entropy_backward_cpu(dx, &dloss, x, lse, &nvalid, t, R, C, ignore_index, eps, 0);
        check_true(name, loss == 0.0f && nvalid == 0.0f && same && maxabs(dx, n) == 0.0,
                   "loss %g nvalid %g, accum left dx %s, max |dx| %g", loss, nvalid,
                   same ? "as it was" : "changed", maxabs(dx, n));
    }
    free(x); free(lse); free(lse_ref); free(dx); free(dx0); free(got); free(ref);
    free(t); free(xr);
}

/* Large logits: no overflow, the row max is subtracted. */
static void test_cross_entropy_large_logits(void)
{
    const size_t R = 4, C = 50;
    float x[4 * 50], lse[4], lse_ref[4], loss, nvalid;
    int32_t t[4] = {0, 7, 49, 23};
    double xr[50], total = 0.0;
    check_fill(x, R * C, 900.0f, 1000.0f);
    for (size_t r = 0; r < R; r++) {
        for (size_t c = 0; c < C; c++) xr[c] = x[r * C + c];
        lse_ref[r] = (float)lse_row_d(xr, C);
        total += ce_row_d(xr, C, t[r], 0.1);
    }
    float loss_ref = (float)(total / R);
    cross_entropy_forward_cpu(&loss, lse, &nvalid, x, t, R, C, -100, 0.1f);
    check_close("ce.lse logits ~1000", lse, lse_ref, R, 0.0, 1e-7);
    /* the loss is a difference of numbers ~1000 held in f32 */
    check_close("ce.loss logits ~1000", &loss, &loss_ref, 1, 1e-4, 1e-5);
}

/* A target outside [0, C) is fatal, and the message names row, target and C. */
static void test_bad_target(void)
{
    int fds[2];
    if (pipe(fds) != 0) { check_true("ce.bad_target", 0, "pipe failed"); return; }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        float x[5 * 13], lse[5], loss, nvalid;
        int32_t t[5] = {1, -100, 4, 13, 0};
        check_fill(x, 5 * 13, -1.0f, 1.0f);
        cross_entropy_forward_cpu(&loss, lse, &nvalid, x, t, 5, 13, -100, 0.0f);
        _exit(0); /* not reached when the reference aborts */
    }
    close(fds[1]);
    char buf[1024] = {0};
    size_t len = 0;
    ssize_t got;
    while (len < sizeof buf - 1 && (got = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)got;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    check_true("ce.bad_target exits with status 1", WIFEXITED(st) && WEXITSTATUS(st) == 1,
               "status %d", st);
    check_true("ce.bad_target message names row, target, C and a hint",
               strstr(buf, "row 3") && strstr(buf, "target 13") && strstr(buf, "C = 13") &&
                   strstr(buf, "hint:"),
               "stderr was: %s", buf);
}

/* ---- SGD ---- */

/* torch.optim.SGD(momentum, dampening 0, weight_decay, nesterov), in double:
 *   d = g + wd p; buf = step 1 ? d : momentum buf + d;
 *   d = nesterov ? d + momentum buf : buf;  p -= lr d */
static void sgd_torch_d(double *p, double *buf, const float *g, size_t n, double lr,
                        double mom, double wd, int nesterov, int first)
{
    for (size_t i = 0; i < n; i++) {
        double d = g[i] + wd * p[i];
        if (mom != 0.0) {
            buf[i] = first ? d : mom * buf[i] + d;
            d = nesterov ? d + mom * buf[i] : buf[i];
        }
        p[i] -= lr * d;
    }
}

static void test_sgd(float momentum, float wd, int nesterov)
{
    const size_t n = 37;
    const int steps = 5;
    const float lr = 0.1f;
    float p[37], m[37], g[37], pref[37], mref[37];
    double pd[37], bd[37];
    check_fill(p, n, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i++) { m[i] = 0.0f; pd[i] = p[i]; bd[i] = 0.0; }
    for (int s = 0; s < steps; s++) {
        check_fill(g, n, -1.0f, 1.0f);
        sgd_step_cpu(p, m, g, n, lr, momentum, wd, nesterov);
        sgd_torch_d(pd, bd, g, n, lr, momentum, wd, nesterov, s == 0);
    }
    for (size_t i = 0; i < n; i++) { pref[i] = (float)pd[i]; mref[i] = (float)bd[i]; }
    char name[128];
    snprintf(name, sizeof name, "sgd.p momentum %g wd %g nesterov %d, %d steps", momentum, wd,
             nesterov, steps);
    check_close(name, p, pref, n, 1e-6, 1e-5);
    if (momentum != 0.0f) {
        snprintf(name, sizeof name, "sgd.m momentum %g wd %g nesterov %d, %d steps", momentum,
                 wd, nesterov, steps);
        check_close(name, m, mref, n, 1e-6, 1e-5);
    }
}

int main(void)
{
    check_seed(1);
    test_softmax(1, 5, -3.0f, 3.0f);
    test_softmax(7, 13, -4.0f, 4.0f);
    test_softmax(33, 1000, -8.0f, 8.0f);
    test_softmax(3, 40, 1000.0f, 1010.0f); /* exp would overflow without the max */
    test_softmax(4, 2, -2.0f, 2.0f);

    check_seed(2);
    const size_t shapes[][2] = {{4, 2}, {7, 13}, {16, 5}, {33, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ig = IGN_NONE; ig <= IGN_ALL; ig++)
            for (int e = 0; e < 2; e++)
                test_cross_entropy(shapes[s][0], shapes[s][1], ig, -100, e ? 0.1f : 0.0f);
    /* ignore_index inside [0, C): rows with target 0 are ignored, not class 0 */
    test_cross_entropy(9, 6, IGN_SOME, 0, 0.1f);
    test_cross_entropy_large_logits();
    test_bad_target();

    check_seed(3);
    for (int nest = 0; nest <= 1; nest++) {
        test_sgd(0.9f, 1e-4f, nest);
        test_sgd(0.9f, 0.0f, nest);
    }
    test_sgd(0.0f, 1e-4f, 0);
    return check_summary();
}
