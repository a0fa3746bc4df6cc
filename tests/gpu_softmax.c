/* gpu_softmax.c — the CUDA softmax, cross-entropy and SGD kernels against
 * the CPU references (ops/softmax.c, ops/optim.c), for every storage dtype.
 *
 * Inputs are quantized to the storage dtype first, so both sides compute on
 * the same values; outputs are poisoned (NaN) so an unwritten element fails.
 * Shapes: R rows, C classes; n parameters for SGD. Cross-entropy's backward
 * takes its 16-byte vector kernel where C is a multiple of the vector (1024,
 * 1000, 3000, 5000 and BERT's padded 30528 in f16/bf16; also 100 in f32), into a
 * buffer of its own and over the logits (in place, as the op runs it).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops/optim.h"
#include "ops/softmax.h"
#include "check.h"
#include "gpu_util.h"

/* The dtype's absolute tolerance, scaled down for outputs much smaller than 1
 * (probabilities over 30522 classes are ~1e-5: an absolute 1e-5 would pass
 * anything). */
static double atol_prob(DType dt, const float *ref, size_t n)
{
    return tol_atol(dt) * fmin(1.0, maxabs(ref, n));
}

/* ---- softmax ---- */

static void gpu_softmax_case(DType dt, size_t R, size_t C)
{
    char name[160];
    const char *dn = dtype_name(dt);
    size_t n = R * C;
    float *x = falloc(n), *y = falloc(n), *yref = falloc(n);
    float *dy = falloc(n), *dx0 = falloc(n), *dx = falloc(n), *dxref = falloc(n);
    check_fill(x, n, -8.0f, 8.0f);
    quantize(x, n, dt);
    softmax_forward_cpu(yref, x, R, C);

    void *d_x = gpu_upload(x, n, dt), *d_y = gpu_alloc_poison(n, dt);
    softmax_forward_cuda(d_y, d_x, dt, R, C, 0);
    gpu_download(y, d_y, n, dt);
    snprintf(name, sizeof name, "gpu.softmax.y %s (%zu,%zu)", dn, R, C);
    check_close(name, y, yref, n, atol_prob(dt, yref, n), tol_rtol(dt));

    /* backward on the forward's (rounded) output, as training would run it */
    float *yq = yref;
    quantize(yq, n, dt);
    check_fill(dy, n, -1.0f, 1.0f);
    quantize(dy, n, dt);
    check_fill(dx0, n, -0.01f, 0.01f);
    quantize(dx0, n, dt);
    void *d_yq = gpu_upload(yq, n, dt), *d_dy = gpu_upload(dy, n, dt);
    for (int accum = 0; accum <= 1; accum++) {
        memcpy(dxref, dx0, n * sizeof(float));
        softmax_backward_cpu(dxref, dy, yq, R, C, accum);
        void *d_dx = accum ? gpu_upload(dx0, n, dt) : gpu_alloc_poison(n, dt);
        softmax_backward_cuda(d_dx, d_dy, d_yq, dt, R, C, accum, 0);
        gpu_download(dx, d_dx, n, dt);
        snprintf(name, sizeof name, "gpu.softmax.dx %s (%zu,%zu) accum %d", dn, R, C, accum);
        check_close(name, dx, dxref, n, atol_prob(dt, dxref, n), tol_rtol(dt));
        CUDA_CHECK(cudaFree(d_dx));
    }
    CUDA_CHECK(cudaFree(d_x)); CUDA_CHECK(cudaFree(d_y));
    CUDA_CHECK(cudaFree(d_yq)); CUDA_CHECK(cudaFree(d_dy));
    free(x); free(y); free(yref); free(dy); free(dx0); free(dx); free(dxref);
}

/* ---- cross-entropy ---- */

/* Targets: every 5th row ignored (ignore_index -100), and with nbad > 0 some
 * rows out of range (C, -5, C + 1000). t_ok gets the same targets with the
 * bad rows turned into ignored ones: what the kernels must compute. */
static size_t make_targets(int32_t *t, int32_t *t_ok, size_t R, size_t C, int with_bad)
{
    size_t bad = 0;
    for (size_t r = 0; r < R; r++) {
        t[r] = (int32_t)(check_uniform(0.0f, 1.0f) * (float)C) % (int32_t)C;
        if (r % 5 == 2) t[r] = -100;
        t_ok[r] = t[r];
        if (with_bad && r % 7 == 3) {
            t[r] = r % 3 == 0 ? (int32_t)C : r % 3 == 1 ? -5 : (int32_t)C + 1000;
            t_ok[r] = -100;
            bad++;
        }
    }
    return bad;
}

static void gpu_ce_case(DType dt, size_t R, size_t C, float eps, int with_bad)
{
    char name[192], tag[96];
    snprintf(tag, sizeof tag, "%s (%zu,%zu) eps %g%s", dtype_name(dt), R, C, eps,
             with_bad ? " with bad targets" : "");
    size_t n = R * C;
    float *x = falloc(n), *lse = falloc(R), *lse_ref = falloc(R);
    float *dx0 = falloc(n), *dx = falloc(n), *dxref = falloc(n), *dx0_sep = falloc(n);
    int32_t *t = (int32_t *)malloc(R * sizeof(int32_t));
    int32_t *t_ok = (int32_t *)malloc(R * sizeof(int32_t));
    check_fill(x, n, -8.0f, 8.0f);
    quantize(x, n, dt);
    size_t nbad_ref = make_targets(t, t_ok, R, C, with_bad);
    float loss_ref, nvalid_ref;
    cross_entropy_forward_cpu(&loss_ref, lse_ref, &nvalid_ref, x, t_ok, R, C, -100, eps);

    void *d_x = gpu_upload(x, n, dt);
    int32_t *d_t = (int32_t *)gpu_upload_raw(t, R * sizeof(int32_t));
    float *d_loss = (float *)gpu_alloc_poison(1, DT_F32);
    float *d_lse = (float *)gpu_alloc_poison(R, DT_F32);
    float *d_nvalid = (float *)gpu_alloc_poison(1, DT_F32);
    int32_t *d_nbad = (int32_t *)gpu_alloc_poison(1, DT_I32);
    cross_entropy_forward_cuda(d_loss, d_lse, d_nvalid, d_nbad, d_x, dt, d_t, R, C, -100, eps,
                               0);
    float loss, nvalid;
    int32_t nbad = -1;
    gpu_download(&loss, d_loss, 1, DT_F32);
    gpu_download(lse, d_lse, R, DT_F32);
    gpu_download(&nvalid, d_nvalid, 1, DT_F32);
    CUDA_CHECK(cudaMemcpy(&nbad, d_nbad, sizeof nbad, cudaMemcpyDeviceToHost));
    /* f32 results from identical inputs: only summation order differs */
    snprintf(name, sizeof name, "gpu.ce.loss %s", tag);
    check_close(name, &loss, &loss_ref, 1, 1e-5, 2e-5);
    snprintf(name, sizeof name, "gpu.ce.lse %s", tag);
    check_close(name, lse, lse_ref, R, 1e-5, 2e-5);
    snprintf(name, sizeof name, "gpu.ce.nvalid,nbad %s", tag);
    check_true(name, nvalid == nvalid_ref && nbad == (int32_t)nbad_ref,
               "nvalid %g (expected %g), nbad %d (expected %zu)", nvalid, nvalid_ref, nbad,
               nbad_ref);

    const float dloss = 0.75f;
    float *d_dloss = (float *)gpu_upload(&dloss, 1, DT_F32);
    check_fill(dx0, n, -0.01f, 0.01f);
    quantize(dx0, n, dt);
    for (int accum = 0; accum <= 1; accum++) {
        memcpy(dxref, dx0, n * sizeof(float));
        cross_entropy_backward_cpu(dxref, &dloss, x, lse_ref, &nvalid_ref, t_ok, R, C, -100,
                                   eps, accum);
        void *d_dx = accum ? gpu_upload(dx0, n, dt) : gpu_alloc_poison(n, dt);
        cross_entropy_backward_cuda(d_dx, d_dloss, d_x, d_lse, d_nvalid, dt, d_t, R, C, -100,
                                    eps, accum, 0);
        gpu_download(dx, d_dx, n, dt);
        snprintf(name, sizeof name, "gpu.ce.dx accum %d %s", accum, tag);
        check_close(name, dx, dxref, n, atol_prob(dt, dxref, n), tol_rtol(dt));
        if (!accum) memcpy(dx0_sep, dx, n * sizeof(float));
        CUDA_CHECK(cudaFree(d_dx));
    }
    /* written over the logits (the op does so when nothing else holds
     * them): the same bits as into a buffer of its own */
    void *d_xi = gpu_upload(x, n, dt);
    cross_entropy_backward_cuda(d_xi, d_dloss, d_xi, d_lse, d_nvalid, dt, d_t, R, C, -100, eps,
                                0, 0);
    gpu_download(dx, d_xi, n, dt);
    snprintf(name, sizeof name, "gpu.ce.dx over x, same bits %s", tag);
    check_close(name, dx, dx0_sep, n, 0, 0);
    CUDA_CHECK(cudaFree(d_xi));
    free(dx0_sep);
    CUDA_CHECK(cudaFree(d_x)); CUDA_CHECK(cudaFree(d_t)); CUDA_CHECK(cudaFree(d_loss));
    CUDA_CHECK(cudaFree(d_lse)); CUDA_CHECK(cudaFree(d_nvalid)); CUDA_CHECK(cudaFree(d_nbad));
    CUDA_CHECK(cudaFree(d_dloss));
    free(x); free(lse); free(lse_ref); free(dx0); free(dx); free(dxref); free(t); free(t_ok);
}

/* No rows: the outputs are still written (loss 0, nvalid 0, nbad 0). */
static void gpu_ce_empty(void)
{
    float *d_loss = (float *)gpu_alloc_poison(1, DT_F32);
    float *d_nvalid = (float *)gpu_alloc_poison(1, DT_F32);
    int32_t *d_nbad = (int32_t *)gpu_alloc_poison(1, DT_I32);
    float *d_lse = (float *)gpu_alloc_poison(1, DT_F32);
    void *d_x = gpu_alloc_poison(1, DT_F32);
    int32_t *d_t = (int32_t *)gpu_alloc_poison(1, DT_I32);
    cross_entropy_forward_cuda(d_loss, d_lse, d_nvalid, d_nbad, d_x, DT_F32, d_t, 0, 10, -100,
                               0.0f, 0);
    float loss, nvalid;
    int32_t nbad = -1;
    gpu_download(&loss, d_loss, 1, DT_F32);
    gpu_download(&nvalid, d_nvalid, 1, DT_F32);
    CUDA_CHECK(cudaMemcpy(&nbad, d_nbad, sizeof nbad, cudaMemcpyDeviceToHost));
    check_true("gpu.ce R = 0 gives loss 0, nvalid 0, nbad 0",
               loss == 0.0f && nvalid == 0.0f && nbad == 0, "loss %g nvalid %g nbad %d", loss,
               nvalid, nbad);
    CUDA_CHECK(cudaFree(d_loss)); CUDA_CHECK(cudaFree(d_nvalid)); CUDA_CHECK(cudaFree(d_nbad));
    CUDA_CHECK(cudaFree(d_lse)); CUDA_CHECK(cudaFree(d_x)); CUDA_CHECK(cudaFree(d_t));
}

/* ---- SGD ---- */

/* One step on n parameters, starting `off` floats into the buffers (off 1
 * makes every pointer unaligned for float4: the scalar path). skip_val < 0
 * passes skip = NULL. */
static void gpu_sgd_case(size_t n, size_t off, DType lowp_t, int nesterov, int skip_val)
{
    char name[192], tag[128];
    snprintf(tag, sizeof tag, "n %zu off %zu lowp %s nesterov %d skip %s", n, off,
             lowp_t == DT_F32 ? "none" : dtype_name(lowp_t), nesterov,
             skip_val < 0 ? "NULL" : skip_val ? "1" : "0");
    const float lr = 0.05f, mom = 0.9f, wd = 1e-4f;
    size_t nt = n + off;
    float *p = falloc(nt), *m = falloc(nt), *g = falloc(nt);
    float *pref = falloc(nt), *mref = falloc(nt), *pg = falloc(nt), *mg = falloc(nt);
    check_fill(p, nt, -1.0f, 1.0f);
    check_fill(m, nt, -0.1f, 0.1f);
    check_fill(g, nt, -1.0f, 1.0f);
    memcpy(pref, p, nt * sizeof(float));
    memcpy(mref, m, nt * sizeof(float));
    if (skip_val <= 0) sgd_step_cpu(pref + off, mref + off, g + off, n, lr, mom, wd, nesterov);

    float *d_p = (float *)gpu_upload(p, nt, DT_F32), *d_m = (float *)gpu_upload(m, nt, DT_F32);
    float *d_g = (float *)gpu_upload(g, nt, DT_F32);
    float *d_lr = (float *)gpu_upload_raw(&lr, sizeof lr);
    int *d_skip = NULL;
    if (skip_val >= 0) d_skip = (int *)gpu_upload_raw(&skip_val, sizeof skip_val);
    void *d_lowp = lowp_t == DT_F32 ? NULL : gpu_alloc_poison(nt, lowp_t);
    void *lowp_at = d_lowp ? (char *)d_lowp + off * 2 : NULL;
    sgd_step_cuda(d_p + off, d_m + off, lowp_at, lowp_t, d_g + off, n, d_lr, mom, wd, nesterov,
                  d_skip, 0);
    gpu_download(pg, d_p, nt, DT_F32);
    gpu_download(mg, d_m, nt, DT_F32);

    if (skip_val > 0) {
        snprintf(name, sizeof name, "gpu.sgd skipped step leaves p, m bit for bit %s", tag);
        check_true(name, memcmp(pg, p, nt * sizeof(float)) == 0 &&
                             memcmp(mg, m, nt * sizeof(float)) == 0,
                   "p or m changed");
    } else {
        /* one rounding per operation on both sides: equal up to compiler fusing */
        snprintf(name, sizeof name, "gpu.sgd.p %s", tag);
        check_close(name, pg, pref, nt, 1e-7, 1e-6);
        snprintf(name, sizeof name, "gpu.sgd.m %s", tag);
        check_close(name, mg, mref, nt, 1e-7, 1e-6);
    }
    if (d_lowp) {
        float *lg = falloc(nt);
        gpu_download(lg, d_lowp, nt, lowp_t);
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < nt; i++) {
            int written = i >= off && skip_val <= 0;
            /* RNE, as the kernel must store */
            float want = lowp_t == DT_F16 ? f16_to_f32(f32_to_f16(pg[i]))
                                          : bf16_to_f32(f32_to_bf16(pg[i]));
            int ok = written ? lg[i] == want : isnan(lg[i]);
            if (!ok && wrong++ == 0) first = i;
        }
        snprintf(name, sizeof name, "gpu.sgd.p_lowp %s", tag);
        check_true(name, wrong == 0,
                   "%zu elements differ from RNE(p) (untouched: NaN); first [%zu]: got %g p %g",
                   wrong, first, wrong ? (double)lg[first] : 0.0,
                   wrong ? (double)pg[first] : 0.0);
        free(lg);
        CUDA_CHECK(cudaFree(d_lowp));
    }
    CUDA_CHECK(cudaFree(d_p)); CUDA_CHECK(cudaFree(d_m)); CUDA_CHECK(cudaFree(d_g));
    CUDA_CHECK(cudaFree(d_lr));
    if (d_skip) CUDA_CHECK(cudaFree(d_skip));
    free(p); free(m); free(g); free(pref); free(mref); free(pg); free(mg);
}

int main(void)
{
    gpu_require();
    check_seed(11);
    const size_t shapes[][2] = {{1, 5}, {128, 10}, {37, 1024}, {5, 1025},
                                {3, 5000}, {256, 30522}, {4096, 1000}, {64, 30528}};
    for (int d = 0; d < 3; d++) {
        DType dt = gpu_float_types[d];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            gpu_softmax_case(dt, shapes[s][0], shapes[s][1]);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int e = 0; e < 2; e++)
                gpu_ce_case(dt, shapes[s][0], shapes[s][1], e ? 0.1f : 0.0f, 0);
        gpu_ce_case(dt, 64, 100, 0.0f, 1);
        gpu_ce_case(dt, 64, 3000, 0.1f, 1);
    }
    gpu_ce_empty();

    check_seed(12);
    const DType lowps[3] = {DT_F32 /* none */, DT_F16, DT_BF16};
    for (int l = 0; l < 3; l++)
        for (int nest = 0; nest <= 1; nest++)
            for (size_t off = 0; off <= 1; off++)
                gpu_sgd_case(1000003, off, lowps[l], nest, -1);
    gpu_sgd_case(4099, 0, DT_BF16, 1, 0);
    gpu_sgd_case(4099, 0, DT_BF16, 1, 1);
    gpu_sgd_case(4099, 1, DT_F16, 0, 1);
    gpu_sgd_case(3, 0, DT_F16, 0, -1); /* tail only */
    sgd_step_cuda(NULL, NULL, NULL, DT_F16, NULL, 0, NULL, 0.9f, 0.0f, 0, NULL, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    check_true("gpu.sgd n = 0 launches nothing", cudaGetLastError() == cudaSuccess, "error");
    return check_summary();
}
