/* gpu_pool.c — the CUDA pooling launchers (ops/pool.h) against their CPU
 * references, for f32, f16 and bf16, and the tensor ops on a CUDA context.
 *
 * Max pool copies values, so y must match the CPU exactly, and the winners'
 * codes (their places in the window) must be identical, written over both
 * an all-ones and an all-zeros buffer (first maximum in window order: bf16 inputs,
 * with only 8 bits of mantissa, are full of ties, and a constant image is
 * all ties). The backward gathers in the same order as the CPU; dx is
 * compared with tol_atol(dt) + tol_rtol(dt) |ref| (exact in practice), for
 * accum 0 and 1, and must be bit-identical across two runs. Global average
 * pooling: f32 sums in a different order than the double reference, then
 * one rounding to dt. Outputs are poisoned (NaN) before each call.
 *
 * Shapes: the ResNet stem 2x112x112x64 with k3 s2 p1 (-> 56x56), odd sizes,
 * k2 s2 p0, k3 s1 p1, k1; average pool 2x7x7x2048 (ResNet-50's head),
 * 2x56x56x64, odd sizes and 1x1 images.
 *
 * Shape letters: x [N, H, W, C], max pool output [N, P, Q, C].
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/mem.h"
#include "ops/ops.h"
#include "ops/pool.h"
#include "check.h"
#include "gpu_util.h"

static void test_maxpool(DType dt, int N, int H, int W, int C, int k, int s, int pad,
                         int constant)
{
    char name[128], tag[80];
    snprintf(tag, sizeof tag, "%s.%dx%dx%dx%d.k%ds%dp%d%s", dtype_name(dt), N, H, W, C, k, s, pad,
             constant ? ".constant" : "");
    int P = pool_out_size(H, k, s, pad), Q = pool_out_size(W, k, s, pad);
    size_t n = (size_t)N * H * W * C, no = (size_t)N * P * Q * C;
    float *x = hrand(n, -2, 2, dt);
    if (constant)
        for (size_t i = 0; i < n; i++) x[i] = 0.5f;
    if (k == 16 && H >= 16 && W >= 16 && pad == 0)   /* code 255 at output (0, 0) */
        for (int ch = 0; ch < C; ch++) x[((size_t)15 * W + 15) * C + ch] = 3.0f;
    float *yref = hbuf(no), *got = hbuf(no);
    /* the winners' codes: u8 for k <= 16, else i32 (ops/pool.h) */
    const size_t cb = (size_t)maxpool_code_bytes(k);
    void *iref = malloc(no * cb), *igot = malloc(no * cb);
    maxpool2d_forward_cpu(yref, iref, x, k, s, pad, N, H, W, C);
    void *dx = gpu_upload(x, n, dt), *dy = gpu_alloc_poison(no, dt);
    /* over 0xFF.. (255 or -1) and then over zeros: a code left unwritten
     * differs from the CPU's in one of the two */
    void *didx = gpu_alloc_poison(no, DT_F32);
    for (int fill = 0; fill < 2; fill++) {
        if (fill) CUDA_CHECK(cudaMemset(didx, 0, no * cb));
        maxpool2d_forward_cuda(dy, didx, dx, dt, k, s, pad, N, H, W, C, 0);
        CUDA_CHECK(cudaMemcpy(igot, didx, no * cb, cudaMemcpyDeviceToHost));
        snprintf(name, sizeof name, "maxpool.code.fill%d.%s", fill, tag);
        check_true(name, memcmp(igot, iref, no * cb) == 0,
                   "codes differ from the CPU's first maximum's place");
    }
    gpu_download(got, dy, no, dt);
    snprintf(name, sizeof name, "maxpool.fwd.%s", tag);
    check_close(name, got, yref, no, 0, 0);

    /* forward without indices writes y only */
    void *dy2 = gpu_alloc_poison(no, dt);
    maxpool2d_forward_cuda(dy2, NULL, dx, dt, k, s, pad, N, H, W, C, 0);
    gpu_download(got, dy2, no, dt);
    snprintf(name, sizeof name, "maxpool.fwd.noidx.%s", tag);
    check_close(name, got, yref, no, 0, 0);

    /* backward, accum 0 and 1, from the CPU's indices on both sides */
    float *g = hrand(no, -1, 1, dt), *gx0 = hrand(n, -1, 1, dt);
    void *dg = gpu_upload(g, no, dt);
    void *dref = gpu_upload_raw(iref, no * cb);
    for (int accum = 0; accum <= 1; accum++) {
        float *rdx = hcopy(gx0, n);
        maxpool2d_backward_cpu(rdx, g, iref, k, s, pad, N, H, W, C, accum);
        void *ddx = accum ? gpu_upload(gx0, n, dt) : gpu_alloc_poison(n, dt);
        void *ddx2 = accum ? gpu_upload(gx0, n, dt) : gpu_alloc_poison(n, dt);
        maxpool2d_backward_cuda(ddx, dg, dref, dt, k, s, pad, N, H, W, C, accum, 0);
        maxpool2d_backward_cuda(ddx2, dg, dref, dt, k, s, pad, N, H, W, C, accum, 0);
        float *gd = hbuf(n), *gd2 = hbuf(n);
        gpu_download(gd, ddx, n, dt);
        gpu_download(gd2, ddx2, n, dt);
        snprintf(name, sizeof name, "maxpool.bwd.accum%d.%s", accum, tag);
        check_close(name, gd, rdx, n, tol_atol(dt), tol_rtol(dt));
        snprintf(name, sizeof name, "maxpool.bwd.deterministic.accum%d.%s", accum, tag);
        check_true(name, memcmp(gd, gd2, n * sizeof(float)) == 0, "two runs differ");
        free(rdx); free(gd); free(gd2);
        dfree(ddx); dfree(ddx2);
    }
    free(x); free(yref); free(got); free(iref); free(igot); free(g); free(gx0);
    dfree(dx); dfree(dy); dfree(dy2); dfree(didx); dfree(dg); dfree(dref);
}

static void test_avgpool(DType dt, int N, int H, int W, int C)
{
    char name[128], tag[80];
    snprintf(tag, sizeof tag, "%s.%dx%dx%dx%d", dtype_name(dt), N, H, W, C);
    int HW = H * W;
    size_t n = (size_t)N * HW * C, no = (size_t)N * C;
    float *x = hrand(n, -2, 2, dt), *yref = hbuf(no);
    avgpool_global_forward_cpu(yref, x, N, HW, C);
    void *dx = gpu_upload(x, n, dt), *dy = gpu_alloc_poison(no, dt);
    avgpool_global_forward_cuda(dy, dx, dt, N, HW, C, 0);
    float *got = hbuf(no);
    gpu_download(got, dy, no, dt);
    snprintf(name, sizeof name, "avgpool.fwd.%s", tag);
    check_close(name, got, yref, no, tol_atol(dt), tol_rtol(dt));

    float *g = hrand(no, -1, 1, dt), *gx0 = hrand(n, -1, 1, dt);
    void *dg = gpu_upload(g, no, dt);
    for (int accum = 0; accum <= 1; accum++) {
        float *rdx = hcopy(gx0, n);
        avgpool_global_backward_cpu(rdx, g, N, HW, C, accum);
        void *ddx = accum ? gpu_upload(gx0, n, dt) : gpu_alloc_poison(n, dt);
        avgpool_global_backward_cuda(ddx, dg, dt, N, HW, C, accum, 0);
        float *gd = hbuf(n);
        gpu_download(gd, ddx, n, dt);
        snprintf(name, sizeof name, "avgpool.bwd.accum%d.%s", accum, tag);
        check_close(name, gd, rdx, n, tol_atol(dt), tol_rtol(dt));
        free(rdx); free(gd);
        dfree(ddx);
    }
    free(x); free(yref); free(got); free(g); free(gx0);
    dfree(dx); dfree(dy); dfree(dg);
}

/* The tensor ops on CUDA against the same ops on the CPU: y, and dx through
 * autograd for L = sum(w * maxpool(x)) + sum(v * avgpool(x)). */
static void op_run(Ctx *c, DType dt, const float *x, const float *w, const float *v, float *y1,
                   float *y2, float *dx, int N, int H, int W, int C)
{
    size_t base = c->mem.current;
    Tensor *tx = tensor_from_f32(c, x, dt, 4, (int64_t[]){N, H, W, C});
    int P = pool_out_size(H, 3, 2, 1), Q = pool_out_size(W, 3, 2, 1);
    Tensor *tw = tensor_from_f32(c, w, dt, 4, (int64_t[]){N, P, Q, C});
    Tensor *tv = tensor_from_f32(c, v, dt, 2, (int64_t[]){N, C});
    tx->requires_grad = 1;
    Tensor *a = op_maxpool2d(c, tx, 3, 2, 1), *b = op_avgpool_global(c, tx);
    Tensor *pa = op_mul(c, a, tw), *pb = op_mul(c, b, tv);
    Tensor *la = op_sum(c, pa), *lb = op_sum(c, pb), *loss = op_add(c, la, lb);
    ad_backward(c, loss, 1.0f);
    tensor_to_f32(y1, a);
    tensor_to_f32(y2, b);
    tensor_to_f32(dx, tx->grad);
    Tensor *all[] = {a, b, pa, pb, la, lb, loss, tx, tw, tv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tensor_release(all[i]);
    if (c->device == DEV_CUDA)
        check_true("pool.op.cuda.no_leak", c->mem.current == base, "%zu bytes held, base %zu",
                   c->mem.current, base);
}

static void test_op(Ctx *cpu, Ctx *gpu, DType dt)
{
    char name[96];
    const int N = 2, H = 11, W = 9, C = 6;
    int P = pool_out_size(H, 3, 2, 1), Q = pool_out_size(W, 3, 2, 1);
    size_t n = (size_t)N * H * W * C, no = (size_t)N * P * Q * C, nc = (size_t)N * C;
    float *x = hrand(n, -2, 2, dt), *w = hrand(no, -1, 1, dt), *v = hrand(nc, -1, 1, dt);
    float *ya = hbuf(no), *yb = hbuf(no), *za = hbuf(nc), *zb = hbuf(nc);
    float *da = hbuf(n), *db = hbuf(n);
    op_run(cpu, dt, x, w, v, ya, za, da, N, H, W, C);
    op_run(gpu, dt, x, w, v, yb, zb, db, N, H, W, C);
    snprintf(name, sizeof name, "pool.op.cuda.maxpool.%s", dtype_name(dt));
    check_close(name, yb, ya, no, 0, 0);
    snprintf(name, sizeof name, "pool.op.cuda.avgpool.%s", dtype_name(dt));
    check_close(name, zb, za, nc, tol_atol(dt), tol_rtol(dt));
    snprintf(name, sizeof name, "pool.op.cuda.dx.%s", dtype_name(dt));
    check_close(name, db, da, n, tol_atol(dt), tol_rtol(dt));
    free(x); free(w); free(v); free(ya); free(yb); free(za); free(zb); free(da); free(db);
}

int main(void)
{
    gpu_require();
    check_seed(31337);
    for (int t = 0; t < 3; t++) {
        DType dt = gpu_float_types[t];
        test_maxpool(dt, 2, 112, 112, 64, 3, 2, 1, 0);
        test_maxpool(dt, 3, 13, 11, 5, 3, 2, 1, 0);
        test_maxpool(dt, 2, 9, 8, 3, 2, 2, 0, 0);
        test_maxpool(dt, 1, 7, 7, 8, 3, 1, 1, 0);
        test_maxpool(dt, 2, 6, 5, 4, 1, 1, 0, 0);
        test_maxpool(dt, 1, 10, 10, 7, 3, 3, 1, 0);
        test_maxpool(dt, 2, 9, 9, 16, 3, 2, 1, 1);
        /* the stem pool's 2 x 2 patch backward: odd rows with even columns, one row */
        test_maxpool(dt, 3, 14, 9, 8, 3, 2, 1, 0);
        test_maxpool(dt, 2, 1, 2, 16, 3, 2, 1, 0);
        test_maxpool(dt, 1, 19, 18, 8, 17, 2, 8, 0);   /* k > 16: i32 codes */
        test_maxpool(dt, 2, 17, 16, 16, 16, 1, 0, 0);  /* k 16: u8 codes up to 255 */
        test_avgpool(dt, 2, 7, 7, 2048);
        test_avgpool(dt, 2, 56, 56, 64);
        test_avgpool(dt, 3, 13, 11, 5);
        test_avgpool(dt, 4, 1, 1, 16);
    }
    Ctx cpu, gpu;
    ctx_init(&cpu, DEV_CPU, 0, 1);
    ctx_init(&gpu, DEV_CUDA, 0, 1);
    for (int t = 0; t < 3; t++) test_op(&cpu, &gpu, gpu_float_types[t]);
    ctx_free(&gpu);
    ctx_free(&cpu);
    return check_summary();
}
