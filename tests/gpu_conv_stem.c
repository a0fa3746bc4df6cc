/* gpu_conv_stem.c — ResNet's stem on ctrain's implicit GEMM (ops/conv_stem.h)
 * against the CPU reference (ops/conv2d.c):
 *   - forward and weight gradient in TF32 (f32 storage), bf16 and f16, on
 *     the inputs rounded to the type; tolerances: TF32's 10-bit mantissa
 *     (relative norm 3e-3), bf16's output rounding in the forward (f16's is
 *     finer), the weight gradient's f32 sums of exact products in bf16 / f16;
 *   - shapes: 224 x 224 (Q 112), 63 x 63 (odd: the right and bottom windows
 *     leave the image), 256 x 256 (Q 128, the widest), 8 images of 224 x 224
 *     (more output rows than blocks: a block takes several, the weight
 *     gradient's sums carried across them), 300 x 31 (not square), 5 x 63
 *     (fewer rows than the window);
 *   - the weight gradient added to what dw holds (accumulate), and the same
 *     bits on a second run (the partials summed in block order);
 *   - dy not 16-byte aligned (its rows staged one value at a time, not in
 *     16-byte vectors): the same bits as aligned;
 *   - which convolutions the kernels take (conv_stem_applies): f16 only under
 *     CTRAIN_CONV_STEM=all.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "ops/conv_stem.h"

static void one_case(DType dt, int N, int H, int W)
{
    const Conv2dShape s = conv2d_shape(N, H, W, 3, 64, 7, 7, 2, 2, 3, 3, 1, 1);
    const size_t nx = (size_t)N * H * W * 3, nw = 64 * 147, ny = (size_t)N * s.P * s.Q * 64;
    float *x = hrand(nx, -1.0f, 1.0f, dt), *w = hrand(nw, -0.2f, 0.2f, dt);
    float *dy = hrand(ny, -1.0f, 1.0f, dt), *dw0 = hrand(nw, -1.0f, 1.0f, DT_F32);
    float *y_ref = hbuf(ny), *dw_ref = hbuf(nw), *y = hbuf(ny), *dw = hbuf(nw), *dw2 = hbuf(nw);
    conv2d_forward_cpu(y_ref, x, w, &s);
    conv2d_backward_filter_cpu(dw_ref, dy, x, &s, 0);
    void *dx = gpu_upload(x, nx, dt), *dwt = gpu_upload(w, nw, dt), *ddy = gpu_upload(dy, ny, dt);
    void *dyo = gpu_alloc_poison(ny, dt);
    float *ddw = (float *)gpu_upload(dw0, nw, DT_F32), *part;
    CUDA_CHECK(cudaMalloc((void **)&part, conv_stem_part_floats() * sizeof(float)));
    conv_stem_forward_launch(dyo, dx, dwt, dt, N, H, W, s.P, s.Q, NULL);
    conv_stem_wgrad_launch(ddw, part, ddy, dx, dt, N, H, W, s.P, s.Q, 1, NULL);
    sync_all();
    gpu_download(y, dyo, ny, dt);
    gpu_download(dw, ddw, nw, DT_F32);
    for (size_t i = 0; i < nw; i++) dw[i] -= dw0[i];   /* what was added */
    conv_stem_wgrad_launch(ddw, part, ddy, dx, dt, N, H, W, s.P, s.Q, 0, NULL);
    sync_all();
    gpu_download(dw2, ddw, nw, DT_F32);
    const double tf = dt == DT_F32 ? 3e-3 : 8e-3, tw = dt == DT_F32 ? 3e-3 : 1e-4;
    char n[128];
    snprintf(n, sizeof n, "stem %s N %d %dx%d (Q %d): forward", dtype_name(dt), N, H, W, s.Q);
    check_rel_norm(n, y, y_ref, ny, tf);
    snprintf(n, sizeof n, "stem %s N %d %dx%d: weight gradient, added to dw", dtype_name(dt), N,
             H, W);
    check_rel_norm(n, dw, dw_ref, nw, tw);
    snprintf(n, sizeof n, "stem %s N %d %dx%d: weight gradient written", dtype_name(dt), N, H, W);
    check_rel_norm(n, dw2, dw_ref, nw, tw);
    conv_stem_wgrad_launch(ddw, part, ddy, dx, dt, N, H, W, s.P, s.Q, 0, NULL);
    conv_stem_forward_launch(dyo, dx, dwt, dt, N, H, W, s.P, s.Q, NULL);
    sync_all();
    float *dw3 = hbuf(nw), *y3 = hbuf(ny);
    gpu_download(dw3, ddw, nw, DT_F32);
    gpu_download(y3, dyo, ny, dt);
    snprintf(n, sizeof n, "stem %s N %d %dx%d: a second run, the same bits", dtype_name(dt), N, H,
             W);
    check_true(n, !memcmp(dw3, dw2, nw * sizeof(float)) && !memcmp(y3, y, ny * sizeof(float)),
               "the results moved");
    dfree(dx); dfree(dwt); dfree(ddy); dfree(dyo); dfree(ddw); dfree(part);
    free(x); free(w); free(dy); free(dw0); free(y_ref); free(dw_ref); free(y); free(dw);
    free(dw2); free(dw3); free(y3);
}

/* the weight gradient from dy at an odd element offset (not 16-byte aligned)
 * against the aligned one: the same values staged another way, the same bits */
static void unaligned_dy(DType dt)
{
    const int N = 2, H = 63, W = 63;
    const Conv2dShape s = conv2d_shape(N, H, W, 3, 64, 7, 7, 2, 2, 3, 3, 1, 1);
    const size_t nx = (size_t)N * H * W * 3, ny = (size_t)N * s.P * s.Q * 64, nw = 64 * 147;
    float *x = hrand(nx, -1.0f, 1.0f, dt), *dy = hrand(ny, -1.0f, 1.0f, dt);
    float *shifted = hbuf(ny + 1), *a = hbuf(nw), *b = hbuf(nw);
    memcpy(shifted + 1, dy, ny * sizeof(float));
    void *dx = gpu_upload(x, nx, dt), *ddy = gpu_upload(dy, ny, dt);
    void *dsh = gpu_upload(shifted, ny + 1, dt);
    const void *dy_odd = (const char *)dsh + dtype_size(dt);
    float *ddw, *part;
    CUDA_CHECK(cudaMalloc((void **)&ddw, nw * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&part, conv_stem_part_floats() * sizeof(float)));
    conv_stem_wgrad_launch(ddw, part, ddy, dx, dt, N, H, W, s.P, s.Q, 0, NULL);
    sync_all();
    gpu_download(a, ddw, nw, DT_F32);
    conv_stem_wgrad_launch(ddw, part, dy_odd, dx, dt, N, H, W, s.P, s.Q, 0, NULL);
    sync_all();
    gpu_download(b, ddw, nw, DT_F32);
    char n[96];
    snprintf(n, sizeof n, "stem %s: dy not 16-byte aligned, the same bits", dtype_name(dt));
    check_true(n, !memcmp(a, b, nw * sizeof(float)), "the weight gradient moved");
    dfree(dx); dfree(ddy); dfree(dsh); dfree(ddw); dfree(part);
    free(x); free(dy); free(shifted); free(a); free(b);
}

static void applies(void)
{
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    setenv("CTRAIN_CONV_STEM", "own", 1);
    const Conv2dShape stem = conv2d_shape(8, 224, 224, 3, 64, 7, 7, 2, 2, 3, 3, 1, 1);
    const Conv2dShape odd = conv2d_shape(8, 30, 30, 3, 64, 7, 7, 2, 2, 3, 3, 1, 1);   /* Q 15 */
    const Conv2dShape wide = conv2d_shape(8, 320, 320, 3, 64, 7, 7, 2, 2, 3, 3, 1, 1); /* Q 160 */
    const Conv2dShape c4 = conv2d_shape(8, 224, 224, 4, 64, 7, 7, 2, 2, 3, 3, 1, 1);
    const Conv2dShape s1 = conv2d_shape(8, 224, 224, 3, 64, 7, 7, 1, 1, 3, 3, 1, 1);
    c.allow_tf32 = 0;
    const int strict = conv_stem_applies(&c, &stem, DT_F32);
    c.allow_tf32 = 1;
    check_true("applies: the stem in bf16 and TF32; not strict f32, f16, Q % 16, Q > 128, C 4, "
               "stride 1",
               conv_stem_applies(&c, &stem, DT_BF16) && conv_stem_applies(&c, &stem, DT_F32) &&
                   !strict && !conv_stem_applies(&c, &stem, DT_F16) &&
                   !conv_stem_applies(&c, &odd, DT_BF16) && !conv_stem_applies(&c, &wide, DT_BF16) &&
                   !conv_stem_applies(&c, &c4, DT_BF16) && !conv_stem_applies(&c, &s1, DT_BF16),
               "the rule disagrees");
    setenv("CTRAIN_CONV_STEM", "all", 1);
    check_true("applies: f16 too with CTRAIN_CONV_STEM=all",
               conv_stem_applies(&c, &stem, DT_F16) && conv_stem_applies(&c, &stem, DT_BF16) &&
                   !conv_stem_applies(&c, &odd, DT_F16),
               "the rule disagrees");
    setenv("CTRAIN_CONV_STEM", "cudnn", 1);
    check_true("applies: not with CTRAIN_CONV_STEM=cudnn", !conv_stem_applies(&c, &stem, DT_BF16),
               "taken");
    unsetenv("CTRAIN_CONV_STEM");
    ctx_free(&c);
}

int main(void)
{
    gpu_require();
    applies();
    const DType types[3] = {DT_F32, DT_BF16, DT_F16};
    for (int t = 0; t < 3; t++) {
        one_case(types[t], 2, 224, 224);
        one_case(types[t], 3, 63, 63);
        one_case(types[t], 1, 256, 256);
        one_case(types[t], 8, 224, 224);   /* 896 output rows: blocks take several */
        one_case(types[t], 2, 300, 31);    /* not square: Q 16, P 150 */
        one_case(types[t], 2, 5, 63);      /* H < 7: every window leaves the image */
        one_case(types[t], 3, 29, 63);     /* P 15, odd: the forward's last pass has one row */
        unaligned_dy(types[t]);
    }
    return check_summary();
}
