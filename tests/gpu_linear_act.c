/* gpu_linear_act.c — the backward of Linear + activation with the bias
 * gradient summed in the activation's pass (act_backward_colsum_cuda,
 * ops/elementwise.cu) and the op that uses it (op_linear_act under
 * CTRAIN_LINEAR_ACT_BGRAD=1, set here before anything reads it):
 *
 *   h = x w^T + b,  y = act(h)      so  dh = dy act'(h),  db (+)= sum_r dh
 *
 * Kernel, against the two passes it replaces (act_backward_cuda, then
 * bias_backward_cuda over the dh it wrote), relu and gelu, f32 / f16 / bf16:
 *   - dh and db bit-identical (the same functor and one rounding; the same
 *     chunks and order as bias_backward's vector kernel, or the two passes
 *     themselves where the shape falls back);
 *   - db against a double-precision column sum of the downloaded dh within
 *     R 2^-23 sum_r |dh[r, c]| (an f32 sum of R terms in any order), and the
 *     same bits on a second run;
 *   - accum_b 1 adds to what db held;
 *   - shapes the vector kernel takes (BERT-large's intermediate layer
 *     width 4096, 1024, 768; rows not a multiple of the chunk) and the two
 *     passes' fallback (C not a multiple of the vector, pointers off 16
 *     bytes, db NULL);
 *   - dh written over h (in place, as the op runs it): the same bits.
 * Op, on the GPU under bf16 autocast, against op_linear then op_act: y, dx,
 * dw and db the same bits (the same kernels and GEMMs on the same dh, the
 * same column-sum order); relu and gelu; a 3-D x and no bias.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "engine/autograd.h"
#include "ops/elementwise.h"
#include "ops/ops.h"

/* |db[c] - sum_r dh[r, c]| <= R 2^-23 sum_r |dh[r, c]| + tiny, every column */
static int colsum_ok(const float *db, const float *base, const float *dh, size_t R, size_t C,
                     double *worst)
{
    int bad = 0;
    for (size_t c = 0; c < C; c++) {
        double s = base ? base[c] : 0.0, a = base ? fabs(base[c]) : 0.0;
        for (size_t r = 0; r < R; r++) {
            s += dh[r * C + c];
            a += fabs(dh[r * C + c]);
        }
        const double err = fabs(db[c] - s), tol = (double)(R + 1) * ldexp(1.0, -23) * a + 1e-30;
        if (err / tol > *worst) *worst = err / tol;
        if (err > tol) bad++;
    }
    return bad;
}

static void kernel_case(ActKind k, DType dt, size_t R, size_t C, int offset, int with_db)
{
    char name[160];
    const size_t n = R * C, es = dtype_size(dt);
    float *dy = falloc(n), *h = falloc(n), *base = falloc(C);
    check_fill(dy, n, -1.0f, 1.0f);
    check_fill(h, n, -3.0f, 3.0f);
    check_fill(base, C, -2.0f, 2.0f);
    /* `offset` elements in front: pointers off 16 bytes when it is not a multiple of 16 / es */
    float *hdy = hbuf(n + offset), *hh = hbuf(n + offset);   /* zeroed: the padding too */
    memcpy(hdy + offset, dy, n * 4);
    memcpy(hh + offset, h, n * 4);
    char *d_dy = gpu_upload(hdy, n + offset, dt), *d_h = gpu_upload(hh, n + offset, dt);
    char *d_dh = gpu_alloc_poison(n + offset, dt), *d_ref = gpu_alloc_poison(n + offset, dt);
    float *d_db = (float *)gpu_upload(base, C, DT_F32), *d_dbref = (float *)gpu_upload(base, C, DT_F32);
    float *d_db2 = (float *)gpu_alloc_poison(C, DT_F32);
    void *pdh = d_dh + offset * es, *pref = d_ref + offset * es;
    const void *pdy = d_dy + offset * es, *ph = d_h + offset * es;
    /* fused, accumulating into base; then fresh into db2 (the determinism run) */
    act_backward_colsum_cuda(k, pdh, with_db ? d_db : NULL, 1, pdy, ph, dt, R, C, 0);
    if (with_db) act_backward_colsum_cuda(k, pdh, d_db2, 0, pdy, ph, dt, R, C, 0);
    act_backward_cuda(k, pref, pdy, ph, NULL, dt, n, 0, 0);
    if (with_db) bias_backward_cuda(d_dbref, pref, dt, R, C, 1, 0);
    sync_all();
    float *got = falloc(n), *ref = falloc(n), *db = falloc(C), *dbref = falloc(C), *db2 = falloc(C);
    gpu_download(got, pdh, n, dt);
    gpu_download(ref, pref, n, dt);
    const char *kn = k == ACT_RELU ? "relu" : "gelu";
    snprintf(name, sizeof name, "act_colsum.%s.%s.%zux%zu%s: dh as act_backward_cuda", kn,
             dtype_name(dt), R, C, offset ? " (misaligned)" : "");
    check_true(name, !memcmp(got, ref, n * 4), "dh differs from the plain backward's bits");
    if (with_db) {
        CUDA_CHECK(cudaMemcpy(db, d_db, C * 4, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(dbref, d_dbref, C * 4, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(db2, d_db2, C * 4, cudaMemcpyDeviceToHost));
        double worst = 0.0;
        const int bad = colsum_ok(db, base, ref, R, C, &worst);
        const int bad_ref = colsum_ok(dbref, base, ref, R, C, &worst);
        snprintf(name, sizeof name, "act_colsum.%s.%s.%zux%zu%s: db (accumulated) within the bound",
                 kn, dtype_name(dt), R, C, offset ? " (misaligned)" : "");
        check_true(name, bad == 0 && bad_ref == 0,
                   "%d columns (bias_backward: %d) off by more than R 2^-23 sum |dh|; worst %.3g of it",
                   bad, bad_ref, worst);
        snprintf(name, sizeof name, "act_colsum.%s.%s.%zux%zu%s: db as bias_backward's", kn,
                 dtype_name(dt), R, C, offset ? " (misaligned)" : "");
        check_true(name, !memcmp(db, dbref, C * 4), "db differs from bias_backward over dh");
        /* fresh db2 plus base, in f32, is what the accumulating run must hold only up to
         * rounding; the fixed order shows as equal bits between two fresh runs */
        act_backward_colsum_cuda(k, pdh, d_db, 0, pdy, ph, dt, R, C, 0);
        sync_all();
        CUDA_CHECK(cudaMemcpy(db, d_db, C * 4, cudaMemcpyDeviceToHost));
        snprintf(name, sizeof name, "act_colsum.%s.%s.%zux%zu%s: db the same bits twice", kn,
                 dtype_name(dt), R, C, offset ? " (misaligned)" : "");
        check_true(name, !memcmp(db, db2, C * 4), "two fresh runs gave different db");
    }
    /* dh written over h (the op does so where its node holds h alone): the same dh
     * and db bits as into a buffer of their own */
    char *d_hi = gpu_upload(hh, n + offset, dt);
    void *phi = d_hi + offset * es;
    act_backward_colsum_cuda(k, phi, with_db ? d_db : NULL, 0, pdy, phi, dt, R, C, 0);
    sync_all();
    gpu_download(got, phi, n, dt);
    int same_db = 1;
    if (with_db) {
        CUDA_CHECK(cudaMemcpy(db, d_db, C * 4, cudaMemcpyDeviceToHost));
        same_db = !memcmp(db, db2, C * 4);
    }
    snprintf(name, sizeof name, "act_colsum.%s.%s.%zux%zu%s: dh over h, same bits", kn,
             dtype_name(dt), R, C, offset ? " (misaligned)" : "");
    check_true(name, !memcmp(got, ref, n * 4) && same_db, "dh %s, db %s",
               memcmp(got, ref, n * 4) ? "differs" : "same", same_db ? "same" : "differs");
    dfree(d_hi);
    dfree(d_dy); dfree(d_h); dfree(d_dh); dfree(d_ref); dfree(d_db); dfree(d_dbref); dfree(d_db2);
    free(dy); free(h); free(base); free(hdy); free(hh); free(got); free(ref); free(db);
    free(dbref); free(db2);
}

static Tensor *mk(Ctx *c, const float *h, int ndim, const int64_t *shape)
{
    Tensor *t = tensor_from_f32(c, h, DT_F32, ndim, shape);
    t->requires_grad = 1;
    return t;
}

/* op_linear_act (fused 1) or op_linear + op_act (0) on g under bf16
 * autocast, one backward from G; results to host f32. */
static void op_run(Ctx *g, ActKind k, int fused, int ndim, const int64_t *xs, int out, int bias,
                   const float *x, const float *w, const float *b, const float *G, float *y,
                   float *dx, float *dw, float *db)
{
    const int64_t in = xs[ndim - 1];
    int64_t ys[3];
    for (int i = 0; i < ndim; i++) ys[i] = xs[i];
    ys[ndim - 1] = out;
    Tensor *tx = mk(g, x, ndim, xs), *tw = mk(g, w, 2, (int64_t[]){out, in});
    Tensor *tb = bias ? mk(g, b, 1, (int64_t[]){out}) : NULL;
    g->autocast = DT_BF16;
    Tensor *t;
    if (fused) {
        t = op_linear_act(g, tx, tw, tb, k);
    } else {
        Tensor *h = op_linear(g, tx, tw, tb);
        t = op_act(g, h, k);
        tensor_release(h);
    }
    g->autocast = DT_F32;
    tensor_to_f32(y, t);
    t->grad = tensor_from_f32(g, G, t->dtype, ndim, ys);
    ad_backward_from(g, t);
    tensor_release(t);
    tensor_to_f32(dx, tx->grad);
    tensor_to_f32(dw, tw->grad);
    if (tb) tensor_to_f32(db, tb->grad);
    tensor_release(tx); tensor_release(tw);
    if (tb) tensor_release(tb);
}

static void op_case(Ctx *g, ActKind k, int ndim, const int64_t *xs, int out, int bias)
{
    const int64_t in = xs[ndim - 1];
    size_t R = 1;
    for (int i = 0; i < ndim - 1; i++) R *= (size_t)xs[i];
    const size_t nx = R * in, nw = (size_t)out * in, ny = R * out;
    float *x = falloc(nx), *w = falloc(nw), *b = falloc(out), *G = falloc(ny);
    check_fill(x, nx, -1.0f, 1.0f);
    check_fill(w, nw, -0.1f, 0.1f);
    check_fill(b, out, -0.5f, 0.5f);
    check_fill(G, ny, -1.0f, 1.0f);
    quantize(G, ny, DT_BF16);
    float *y[2], *dx[2], *dw[2], *db[2];
    for (int f = 0; f < 2; f++) {
        y[f] = falloc(ny); dx[f] = falloc(nx); dw[f] = falloc(nw); db[f] = falloc(out);
        op_run(g, k, f, ndim, xs, out, bias, x, w, b, G, y[f], dx[f], dw[f], db[f]);
    }
    char name[160];
    snprintf(name, sizeof name, "op_linear_act.%s.bf16.%dd_%zux%lldx%d%s: y, dx, dw, db as the two ops",
             k == ACT_RELU ? "relu" : "gelu", ndim, R, (long long)in, out, bias ? "" : " (no bias)");
    check_true(name, !memcmp(y[0], y[1], ny * 4) && !memcmp(dx[0], dx[1], nx * 4) &&
                         !memcmp(dw[0], dw[1], nw * 4) && (!bias || !memcmp(db[0], db[1], out * 4)),
               "y %d dx %d dw %d db %d differ", memcmp(y[0], y[1], ny * 4) != 0,
               memcmp(dx[0], dx[1], nx * 4) != 0, memcmp(dw[0], dw[1], nw * 4) != 0,
               bias && memcmp(db[0], db[1], out * 4) != 0);
    for (int f = 0; f < 2; f++) { free(y[f]); free(dx[f]); free(dw[f]); free(db[f]); }
    free(x); free(w); free(b); free(G);
}

int main(void)
{
    setenv("CTRAIN_LINEAR_ACT_BGRAD", "1", 1);
    gpu_require();
    check_seed(23);
    const DType types[3] = {DT_F32, DT_F16, DT_BF16};
    for (int t = 0; t < 3; t++)
        for (int a = 0; a < 2; a++) {
            const ActKind k = a ? ACT_GELU : ACT_RELU;
            kernel_case(k, types[t], 1000, 1024, 0, 1);
            kernel_case(k, types[t], 77, 768, 0, 1);
            kernel_case(k, types[t], 64, 102, 0, 1);    /* C % 8 (% 4 in f32) != 0: two passes */
            kernel_case(k, types[t], 33, 1024, 1, 1);   /* pointers off 16 bytes: two passes */
            kernel_case(k, types[t], 50, 256, 0, 0);    /* no db */
        }
    kernel_case(ACT_GELU, DT_BF16, 4096, 4096, 0, 1);   /* BERT-large bs 32 seq 128 */
    kernel_case(ACT_GELU, DT_BF16, 1, 4096, 0, 1);
    Ctx g;
    ctx_init(&g, DEV_CUDA, 0, 0x5eedULL);
    op_case(&g, ACT_GELU, 2, (int64_t[]){512, 256}, 1024, 1);
    op_case(&g, ACT_RELU, 2, (int64_t[]){512, 256}, 1024, 1);
    op_case(&g, ACT_GELU, 3, (int64_t[]){2, 64, 128}, 512, 1);
    op_case(&g, ACT_GELU, 2, (int64_t[]){100, 64}, 256, 0);
    ctx_free(&g);
    return check_summary();
}
