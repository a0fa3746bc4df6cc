/* gpu_add_norm.c — the fused dropout + residual add + LayerNorm kernels
 * (ops/layernorm.h add_norm_*_cuda) against the three ops' kernels run one
 * after the other on the same inputs and Philox stream: dropout_*_cuda,
 * add_forward_cuda and LayerNorm's vector kernels (layernorm_cuda_set_kernels
 * (1)), and the CPU composition for the forward.
 *
 *   forward   s = x + dropout(z), y = LayerNorm(s): s, y, mean, invstd
 *             bit for bit; y within tol of the CPU's dropout + add + LayerNorm
 *   backward  dx = ds (fresh, and added to a preloaded dx), dz = dropout's
 *             backward of ds (fresh and accumulated), dgamma, dbeta: bit for
 *             bit against layernorm_backward_cuda + the add + dropout's
 *             backward; dx and dz NULL (each alone); the forward's keep
 *             bits equal the CPU's dropout mask, and a backward reading
 *             them gives the bits of one that draws the mask again
 * For f32, f16, bf16, p 0.1 and 0 (no draw: z passes whole), BERT-base and
 * BERT-large widths, rows no chunk divides; widths the fused kernels do not
 * take (D 100 in f16 / bf16: not a multiple of 8; f32 D 768 and 1024: over
 * 4 vectors a lane) must return 0 with nothing written. Then op_add_norm itself with CTRAIN_ADD_NORM=fused
 * (this process) against the three ops through autograd, same offsets.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/kernels.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/layernorm.h"
#include "ops/ops.h"
#include "check.h"
#include "gpu_util.h"

static void *dup_dev(const void *d, size_t bytes)
{
    void *o = NULL;
    CUDA_CHECK(cudaMalloc(&o, bytes ? bytes : 1));
    CUDA_CHECK(cudaMemcpy(o, d, bytes, cudaMemcpyDeviceToDevice));
    return o;
}

static void kernel_case(Ctx *g, DType dt, size_t R, size_t D, float p)
{
    char tag[96], name[192];
    snprintf(tag, sizeof tag, "%s (%zu,%zu) p %.1f", dtype_name(dt), R, D, (double)p);
    const size_t n = R * D, es = dtype_size(dt), bytes = n * es;
    const float eps = 1e-12f;
    const uint64_t seed = 0x1234abcdULL, offset = 777;
    float *x = hrand(n, -2.0f, 2.0f, dt), *z = hrand(n, -2.0f, 2.0f, dt);
    float *gm = hrand(D, 0.5f, 1.5f, DT_F32), *bt = hrand(D, -0.5f, 0.5f, DT_F32);
    float *dy = hrand(n, -1.0f, 1.0f, dt), *pre = hrand(n, -0.5f, 0.5f, dt);
    void *d_x = gpu_upload(x, n, dt), *d_z = gpu_upload(z, n, dt), *d_dy = gpu_upload(dy, n, dt);
    void *d_pre = gpu_upload(pre, n, dt);
    float *d_g = (float *)gpu_upload(gm, D, DT_F32), *d_b = (float *)gpu_upload(bt, D, DT_F32);

    /* fused forward */
    void *y1 = gpu_alloc_poison(n, dt), *s1 = gpu_alloc_poison(n, dt);
    float *m1 = (float *)gpu_alloc_poison(R, DT_F32), *i1 = (float *)gpu_alloc_poison(R, DT_F32);
    sync_all();
    const size_t nb = n / (16 / es);   /* keep bits: a byte a 16-byte vector */
    uint8_t *bits = (uint8_t *)gpu_alloc_poison(nb / 4 + 1, DT_F32);
    int took = add_norm_forward_cuda(y1, s1, m1, i1, d_x, d_z, d_g, d_b, dt, eps, p, seed, offset,
                                     NULL, bits, R, D, g->stream);
    /* the vector kernels' rows, at most 4 vectors a lane (the backward's budget) */
    const int vec_ok = D % (16 / es) == 0 && D / (16 / es) <= 128;
    snprintf(name, sizeof name, "add_norm.forward %s: %s", tag, vec_ok ? "taken" : "declined");
    check_true(name, took == vec_ok, "returned %d", took);
    if (!took) { /* nothing written: the poison is still there */
        float *h = falloc(n);
        gpu_download(h, y1, n, dt);
        snprintf(name, sizeof name, "add_norm.forward %s: declined writes nothing", tag);
        check_true(name, isnan(h[0]) && isnan(h[n - 1]), "y written");
        free(h);
    } else {
        /* the three ops' kernels */
        void *d2 = gpu_alloc_poison(n, dt), *s2 = gpu_alloc_poison(n, dt);
        void *y2 = gpu_alloc_poison(n, dt);
        float *m2 = (float *)gpu_alloc_poison(R, DT_F32), *i2 = (float *)gpu_alloc_poison(R, DT_F32);
        sync_all();
        if (p > 0.0f)
            dropout_forward_cuda(d2, d_z, dt, p, seed, offset, NULL, n, g->stream);
        else
            CUDA_CHECK(cudaMemcpyAsync(d2, d_z, bytes, cudaMemcpyDeviceToDevice, g->stream));
        add_forward_cuda(s2, d_x, d2, dt, n, g->stream);
        layernorm_forward_cuda(y2, m2, i2, s2, d_g, d_b, dt, eps, R, D, g->stream);
        snprintf(name, sizeof name, "add_norm.forward %s: s, y, mean, invstd same bits", tag);
        check_true(name, gpu_same_bytes(s1, s2, bytes) && gpu_same_bytes(y1, y2, bytes) &&
                   gpu_same_bytes(m1, m2, R * 4) && gpu_same_bytes(i1, i2, R * 4),
                   "s %d y %d mean %d invstd %d", gpu_same_bytes(s1, s2, bytes),
                   gpu_same_bytes(y1, y2, bytes), gpu_same_bytes(m1, m2, R * 4),
                   gpu_same_bytes(i1, i2, R * 4));
        /* the CPU's dropout + add + LayerNorm */
        float *dref = falloc(n), *sref = falloc(n), *yref = falloc(n), *yg = falloc(n);
        float *mr = falloc(R), *ir = falloc(R);
        if (p > 0.0f) dropout_forward_cpu(dref, z, p, seed, offset, n);
        else memcpy(dref, z, n * sizeof(float));
        quantize(dref, n, dt);
        for (size_t e = 0; e < n; e++) sref[e] = x[e] + dref[e];
        quantize(sref, n, dt);
        layernorm_forward_cpu(yref, mr, ir, sref, gm, bt, eps, R, D);
        gpu_download(yg, y1, n, dt);
        snprintf(name, sizeof name, "add_norm.forward %s: y against the CPU", tag);
        check_close(name, yg, yref, n, tol_atol(dt), tol_rtol(dt));
        if (p > 0.0f) { /* the keep bits are the CPU's mask: keep where dropout(1) != 0 */
            float *one = falloc(n), *kref = falloc(n);
            for (size_t e = 0; e < n; e++) one[e] = 1.0f;
            dropout_forward_cpu(kref, one, p, seed, offset, n);
            uint8_t *hb = (uint8_t *)malloc(nb);
            sync_all();
            CUDA_CHECK(cudaMemcpy(hb, bits, nb, cudaMemcpyDeviceToHost));
            size_t bad = 0;
            for (size_t e = 0; e < n; e++)
                bad += ((hb[e / (16 / es)] >> (e % (16 / es))) & 1u) != (kref[e] != 0.0f);
            snprintf(name, sizeof name, "add_norm.forward %s: keep bits are the CPU's mask", tag);
            check_true(name, bad == 0, "%zu of %zu elements differ", bad, n);
            free(one); free(kref); free(hb);
        }

        /* backward, fresh then accumulating, against the three backwards */
        for (int acc = 0; acc <= 1; acc++) {
            void *dx1 = acc ? dup_dev(d_pre, bytes) : gpu_alloc_poison(n, dt);
            void *dz1 = acc ? dup_dev(d_pre, bytes) : gpu_alloc_poison(n, dt);
            float *dg1 = (float *)gpu_upload(gm, D, DT_F32), *db1 = (float *)gpu_upload(bt, D, DT_F32);
            void *ds = gpu_alloc_poison(n, dt);
            void *dx2 = acc ? dup_dev(d_pre, bytes) : gpu_alloc_poison(n, dt);
            void *dz2 = acc ? dup_dev(d_pre, bytes) : gpu_alloc_poison(n, dt);
            float *dg2 = (float *)gpu_upload(gm, D, DT_F32), *db2 = (float *)gpu_upload(bt, D, DT_F32);
            sync_all();
            int tb = add_norm_backward_cuda(dx1, dz1, dg1, db1, d_dy, s1, m1, i1, d_g, dt, p, seed,
                                            offset, NULL, NULL, R, D, acc, acc, acc, acc,
                                            g->stream);
            layernorm_backward_cuda(ds, dg2, db2, d_dy, s2, m2, i2, d_g, dt, R, D, 0, acc, acc,
                                    g->stream);
            cast_cuda(dx2, dt, ds, dt, n, acc, g->stream);
            if (p > 0.0f)
                dropout_backward_cuda(dz2, ds, dt, p, seed, offset, NULL, n, acc, g->stream);
            else
                cast_cuda(dz2, dt, ds, dt, n, acc, g->stream);
            snprintf(name, sizeof name, "add_norm.backward %s accum %d: dx dz dgamma dbeta same bits",
                     tag, acc);
            check_true(name,
                       tb && gpu_same_bytes(dx1, dx2, bytes) && gpu_same_bytes(dz1, dz2, bytes) &&
                           gpu_same_bytes(dg1, dg2, D * 4) && gpu_same_bytes(db1, db2, D * 4),
                       "taken %d dx %d dz %d dgamma %d dbeta %d", tb,
                       gpu_same_bytes(dx1, dx2, bytes), gpu_same_bytes(dz1, dz2, bytes),
                       gpu_same_bytes(dg1, dg2, D * 4), gpu_same_bytes(db1, db2, D * 4));
            /* with the forward's keep bits in place of the second draw: the same bits */
            void *dx3 = acc ? dup_dev(d_pre, bytes) : gpu_alloc_poison(n, dt);
            void *dz3 = acc ? dup_dev(d_pre, bytes) : gpu_alloc_poison(n, dt);
            float *dg3 = (float *)gpu_upload(gm, D, DT_F32);
            float *db3 = (float *)gpu_upload(bt, D, DT_F32);
            sync_all();
            add_norm_backward_cuda(dx3, dz3, dg3, db3, d_dy, s1, m1, i1, d_g, dt, p, seed, offset,
                                   NULL, bits, R, D, acc, acc, acc, acc, g->stream);
            snprintf(name, sizeof name, "add_norm.backward %s accum %d: keep bits as the draw",
                     tag, acc);
            check_true(name, gpu_same_bytes(dx3, dx1, bytes) && gpu_same_bytes(dz3, dz1, bytes) &&
                       gpu_same_bytes(dg3, dg1, D * 4) && gpu_same_bytes(db3, db1, D * 4),
                       "dx %d dz %d dgamma %d dbeta %d", gpu_same_bytes(dx3, dx1, bytes),
                       gpu_same_bytes(dz3, dz1, bytes), gpu_same_bytes(dg3, dg1, D * 4),
                       gpu_same_bytes(db3, db1, D * 4));
            dfree(dx3); dfree(dz3); dfree(dg3); dfree(db3);
            /* dx alone, dz alone */
            void *dxa = gpu_alloc_poison(n, dt), *dza = gpu_alloc_poison(n, dt);
            sync_all();
            add_norm_backward_cuda(dxa, NULL, NULL, NULL, d_dy, s1, m1, i1, d_g, dt, p, seed, offset,
                                   NULL, NULL, R, D, 0, 0, 0, 0, g->stream);
            add_norm_backward_cuda(NULL, dza, NULL, NULL, d_dy, s1, m1, i1, d_g, dt, p, seed, offset,
                                   NULL, NULL, R, D, 0, 0, 0, 0, g->stream);
            if (!acc) {
                snprintf(name, sizeof name, "add_norm.backward %s: dx alone, dz alone", tag);
                check_true(name,
                           gpu_same_bytes(dxa, dx2, bytes) && gpu_same_bytes(dza, dz2, bytes),
                           "dx %d dz %d", gpu_same_bytes(dxa, dx2, bytes),
                           gpu_same_bytes(dza, dz2, bytes));
            }
            void *bufs[] = {dx1, dz1, dg1, db1, ds, dx2, dz2, dg2, db2, dxa, dza};
            for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) dfree(bufs[k]);
        }
        free(dref); free(sref); free(yref); free(yg); free(mr); free(ir);
        dfree(d2); dfree(s2); dfree(y2); dfree(m2); dfree(i2);
    }
    dfree(y1); dfree(s1); dfree(m1); dfree(i1); dfree(bits);
    dfree(d_x); dfree(d_z); dfree(d_dy); dfree(d_pre); dfree(d_g); dfree(d_b);
    free(x); free(z); free(gm); free(bt); free(dy); free(pre);
}

/* op_add_norm (fused: CTRAIN_ADD_NORM set before its first call) against
 * the three ops on the same Philox offset, through autograd. */
static void op_case(Ctx *g, DType dt, int64_t B, int64_t T, int64_t D, float p)
{
    char tag[96], name[192];
    snprintf(tag, sizeof tag, "%s [%lld,%lld,%lld] p %.1f", dtype_name(dt), (long long)B,
             (long long)T, (long long)D, (double)p);
    const int64_t shape[3] = {B, T, D};
    const size_t n = (size_t)(B * T * D);
    float *hx = hrand(n, -2.0f, 2.0f, dt), *hz = hrand(n, -2.0f, 2.0f, dt);
    float *hg = hrand((size_t)D, 0.5f, 1.5f, DT_F32), *hb = hrand((size_t)D, -0.5f, 0.5f, DT_F32);
    float *hdy = hrand(n, -1.0f, 1.0f, dt);
    float *out[2][5];
    for (int way = 0; way < 2; way++) {
        Tensor *x = tensor_from_f32(g, hx, dt, 3, shape), *z = tensor_from_f32(g, hz, dt, 3, shape);
        Tensor *gm = tensor_from_f32(g, hg, DT_F32, 1, &D), *bt = tensor_from_f32(g, hb, DT_F32, 1, &D);
        x->requires_grad = z->requires_grad = gm->requires_grad = bt->requires_grad = 1;
        const uint64_t off0 = g->rng_offset;
        Tensor *y;
        if (way == 0) {
            y = op_add_norm(g, x, z, gm, bt, p, 1e-12f);
        } else {
            Tensor *d = op_dropout(g, z, p), *s = op_add(g, x, d);
            y = op_layernorm(g, s, gm, bt, 1e-12f);
            tensor_release(d);
            tensor_release(s);
        }
        g->rng_offset = off0; /* the next way draws the same mask */
        Tensor *ty = tensor_from_f32(g, hdy, dt, 3, shape);
        Tensor *m = op_mul(g, y, ty), *loss = op_sum(g, m);
        ad_backward(g, loss, 1.0f);
        Tensor *keep[5] = {y, x->grad, z->grad, gm->grad, bt->grad};
        for (int k = 0; k < 5; k++) {
            out[way][k] = falloc(keep[k]->numel);
            tensor_to_f32(out[way][k], keep[k]);
        }
        tensor_release(loss); tensor_release(m); tensor_release(ty); tensor_release(y);
        tensor_release(x); tensor_release(z); tensor_release(gm); tensor_release(bt);
    }
    static const char *what[5] = {"y", "dx", "dz", "dgamma", "dbeta"};
    const size_t sizes[5] = {n, n, n, (size_t)D, (size_t)D};
    for (int k = 0; k < 5; k++) {
        snprintf(name, sizeof name, "op_add_norm %s: %s as the three ops", tag, what[k]);
        check_close(name, out[0][k], out[1][k], sizes[k], 0.0, 0.0); /* the same bits */
        free(out[0][k]);
        free(out[1][k]);
    }
    free(hx); free(hz); free(hg); free(hb); free(hdy);
}

int main(void)
{
    setenv("CTRAIN_ADD_NORM", "fused", 1);
    setenv("CTRAIN_ADD_NORM_BITS", "1", 1);   /* the op cases keep the mask as bits (default) */
    gpu_require();
    check_seed(31);
    Ctx g;
    ctx_init(&g, DEV_CUDA, 0, 0x5eedULL);
    layernorm_cuda_set_kernels(1);
    const DType types[3] = {DT_F32, DT_F16, DT_BF16};
    for (int t = 0; t < 3; t++) {
        for (int pi = 0; pi < 2; pi++) {
            const float p = pi ? 0.0f : 0.1f;
            kernel_case(&g, types[t], 256, 768, p);
            kernel_case(&g, types[t], 301, 1024, p);
            kernel_case(&g, types[t], 37, 100, p);
            kernel_case(&g, types[t], 45, 512, p);
        }
        op_case(&g, types[t], 2, 64, 768, 0.1f);
        op_case(&g, types[t], 3, 17, 1024, 0.0f);
    }
    ctx_free(&g);
    return check_summary();
}
