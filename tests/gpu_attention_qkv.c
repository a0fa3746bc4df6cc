/* gpu_attention_qkv.c — op_attention_qkv on CUDA (cuDNN's attention reading
 * q, k, v in place from one projection [B, T, 3 H Dh], writing dq, dk, dv
 * in place into its gradient) against op_attention_bthd on q, k, v copied
 * out of it, with the same (seed, offset):
 *   - out, and dqkv against dq | dk | dv interleaved, within bf16 / f16
 *     rounding (the two run cuDNN plans of different strides, which may be
 *     different engines), without and with dropout (the same cuDNN mask:
 *     a different mask would differ by ~sqrt(p / (1 - p)) of out);
 *   - the key mask (-10000 on the last keys of the second sequence);
 *   - qkv's gradient adding (the projection read by a second op);
 *   - the same bits twice (the op's backward is deterministic);
 *   - op_attention_qkv_supported 0 for an f32 compute type.
 * Shapes: BERT-large's head width at seq 128 and 512 (B 2, H 4, Dh 64).
 * The same cases again in a child with CTRAIN_ATTN=sm90 (ctrain's wgmma kernels,
 * ops/attention_sm90.h, on an sm_90 device; SKIP elsewhere): op_attention_bthd
 * then runs the tensor-core flash kernels, whose dropout mask is the wgmma
 * kernels' too, so out and dqkv agree within rounding with dropout as well.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/autograd.h"
#include "engine/ctx.h"
#include "engine/settings.h"
#include "ops/attention.h"
#include "ops/attention_sm90.h"
#include "ops/ops.h"
#include "check.h"
#include "gpu_util.h"

/* loss = sum(out * w) */
static Tensor *weighted_sum(Ctx *c, Tensor *y, Tensor *w)
{
    Tensor *m = op_mul(c, y, w);
    Tensor *s = op_sum(c, m);
    tensor_release(m);
    return s;
}

typedef struct {
    float *out, *dqkv;
} Result;

/* One run: through op_attention_qkv (fused 1) or op_attention_bthd on copies. */
static Result run(Ctx *c, DType dt, int B, int T, int H, int Dh, const float *x, const float *w,
                  const float *mask, float p, int fused, int twice)
{
    const int D = H * Dh;
    const size_t n = (size_t)B * T * D;
    int64_t xs[3] = {B, T, 3 * D}, ts[4] = {B, T, H, Dh}, ms[2] = {B, T};
    Tensor *tw = tensor_from_f32(c, w, dt, 4, ts);
    Tensor *tm = mask ? tensor_from_f32(c, mask, DT_F32, 2, ms) : NULL;
    Result r = {hbuf(n), hbuf(3 * n)};
    c->rng_offset = 4242;
    if (fused) {
        Tensor *tx = tensor_from_f32(c, x, dt, 3, xs);
        tx->requires_grad = 1;
        Tensor *o = op_attention_qkv(c, tx, H, tm, p);
        Tensor *l = weighted_sum(c, o, tw);
        if (twice) {
            Tensor *s = op_sum(c, tx), *l2 = op_add(c, l, s);
            tensor_release(s);
            tensor_release(l);
            l = l2;
        }
        ad_backward(c, l, 1.0f);
        tensor_to_f32(r.out, o);
        tensor_to_f32(r.dqkv, tx->grad);
        tensor_release(l); tensor_release(o); tensor_release(tx);
    } else {
        float *part = hbuf(n);
        Tensor *tp[3];
        for (int j = 0; j < 3; j++) {
            for (size_t row = 0; row < (size_t)B * T; row++)
                memcpy(part + row * D, x + row * 3 * D + (size_t)j * D, (size_t)D * sizeof(float));
            tp[j] = tensor_from_f32(c, part, dt, 4, ts);
            tp[j]->requires_grad = 1;
        }
        Tensor *o = op_attention_bthd(c, tp[0], tp[1], tp[2], tm, p);
        Tensor *l = weighted_sum(c, o, tw);
        ad_backward(c, l, 1.0f);
        tensor_to_f32(r.out, o);
        for (int j = 0; j < 3; j++) {
            tensor_to_f32(part, tp[j]->grad);
            for (size_t row = 0; row < (size_t)B * T; row++)
                for (int e = 0; e < D; e++)
                    r.dqkv[row * 3 * D + (size_t)j * D + e] =
                        part[row * D + e] + (twice ? 1.0f : 0.0f);
        }
        tensor_release(l); tensor_release(o);
        for (int j = 0; j < 3; j++) tensor_release(tp[j]);
        free(part);
    }
    tensor_release(tw);
    tensor_release(tm);
    return r;
}

static void one_case(Ctx *c, DType dt, int T, float p, int with_mask, int twice)
{
    const int B = 2, H = 4, Dh = 64, D = H * Dh;
    const size_t n = (size_t)B * T * D;
    float *x = hrand(3 * n, -1.0f, 1.0f, dt), *w = hrand(n, -1.0f, 1.0f, dt);
    float *mask = NULL;
    if (with_mask) {
        mask = hbuf((size_t)B * T);
        for (int t = T - T / 4; t < T; t++) mask[T + t] = -10000.0f;
    }
    char tag[96];
    snprintf(tag, sizeof tag, "attention_qkv.%s.T%d.p%g%s%s", dtype_name(dt), T, (double)p,
             with_mask ? ".mask" : "", twice ? ".twice" : "");
    const int64_t Bq = B, Tq = T, ms[2] = {B, T};
    Tensor *tm = mask ? tensor_from_f32(c, mask, DT_F32, 2, ms) : NULL;
    const int ok = op_attention_qkv_supported(c, dt, Bq, Tq, H, Dh, tm, p);
    tensor_release(tm);
    if (!ok) {
        check_true(tag, 0, "cuDNN plans no strided attention for this shape here");
        free(x); free(w); free(mask);
        return;
    }
    Result a = run(c, dt, B, T, H, Dh, x, w, mask, p, 1, twice);
    Result b = run(c, dt, B, T, H, Dh, x, w, mask, p, 0, twice);
    Result a2 = run(c, dt, B, T, H, Dh, x, w, mask, p, 1, twice);
    char name[160];
    const double tol = dt == DT_BF16 ? 2e-2 : 4e-3;
    snprintf(name, sizeof name, "%s.out", tag);
    check_rel_norm(name, a.out, b.out, n, tol);
    snprintf(name, sizeof name, "%s.dqkv", tag);
    check_rel_norm(name, a.dqkv, b.dqkv, 3 * n, 2 * tol);
    snprintf(name, sizeof name, "%s.repeat_bit_identical", tag);
    check_true(name, memcmp(a.out, a2.out, n * 4) == 0 && memcmp(a.dqkv, a2.dqkv, 3 * n * 4) == 0,
               "two runs differ");
    free(a.out); free(a.dqkv); free(b.out); free(b.dqkv); free(a2.out); free(a2.dqkv);
    free(x); free(w); free(mask);
}

/* the cases under CTRAIN_ATTN=sm90 (a child: settings are read once) */
static void sm90_cases(void *arg, void *payload)
{
    (void)arg; (void)payload;
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 0x5eedULL);
    if (!attention_sm90_supports(&c, DT_BF16, 2, 4, 128, 64)) {
        printf("SKIP attention_qkv.sm90: no sm_90 device, or a build without 90 in ARCH\n");
    } else {
        const DType dts[2] = {DT_BF16, DT_F16};
        for (int d = 0; d < 2; d++) {
            one_case(&c, dts[d], 128, 0.0f, 0, 0);
            one_case(&c, dts[d], 128, 0.1f, 1, 0);
            one_case(&c, dts[d], 128, 0.1f, 0, 1);
            one_case(&c, dts[d], 512, 0.1f, 1, 0);
        }
    }
    ctx_free(&c);
}

int main(void)
{
    gpu_child_run("CTRAIN_ATTN", "sm90", sm90_cases, NULL, NULL, 0);
    gpu_require();
    check_seed(20261206);
    setenv("CTRAIN_ATTN", "cudnn", 1);
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 0x5eedULL);
    check_true("attention_qkv.f32_not_supported",
               !op_attention_qkv_supported(&c, DT_F32, 2, 128, 4, 64, NULL, 0.0f), "f32 taken");
    const DType dts[2] = {DT_BF16, DT_F16};
    for (int d = 0; d < 2; d++) {
        one_case(&c, dts[d], 128, 0.0f, 0, 0);
        one_case(&c, dts[d], 128, 0.1f, 0, 0);
        one_case(&c, dts[d], 128, 0.1f, 1, 0);
        one_case(&c, dts[d], 128, 0.1f, 0, 1);
        one_case(&c, dts[d], 512, 0.1f, 1, 0);
    }
    ctx_free(&c);
    return check_summary();
}
