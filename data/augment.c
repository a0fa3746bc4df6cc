/* augment.c — RandomResizedCrop, flip, resize + center crop, pad + crop, and
 * normalisation (the transforms and their conventions are in augment.h).
 *
 * Every transform is one bilinear resampling pass through per-axis tap
 * tables. For output coordinate k of an axis, the source coordinate is
 *   c = start + (k + off + 0.5) * step - 0.5,  clamped to [lo, hi]
 * (half-pixel centers; clamping equals PyTorch's border handling, which
 * repeats the edge pixel), and the tap is {i0 = floor(c), i1 = min(i0+1, hi),
 * w = c - i0}: v = (1-w) src[i0] + w src[i1]. A virtual coordinate k + off
 * outside [0, vn) is padding: tap i0 = -1, value 0.
 *   RandomResizedCrop: start = box.top, step = box.h / S, off 0, [lo, hi] = box
 *   Resize + CenterCrop: start 0, step = H / H', off = crop top, [lo, hi] = [0, H-1]
 *   Resize + pad-crop:   start 0, step = H / S, off = dy - pad, padding outside [0, S)
 * The pixel loop then does 3 lerps per channel and one multiply-add to
 * normalise: x = v * a[c] + b[c] with a = 1/(255 std), b = -mean/std.
 *
 * Shape letters: H W input pixels, C input channels (1: replicated to 3),
 * S output side.
 */
#include "augment.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "engine/error.h"
#include "engine/philox.h"

typedef struct {
    int32_t i0, i1;  /* i0 < 0: padding */
    float w;
} Tap;

void aug_config_default(AugConfig *c, int size)
{
    memset(c, 0, sizeof *c);
    c->size = size;
    c->resize = (size * 256 + 112) / 224;
    c->scale[0] = 0.08f;
    c->scale[1] = 1.0f;
    c->ratio[0] = 3.0f / 4.0f;
    c->ratio[1] = 4.0f / 3.0f;
    c->hflip = 0.5f;
    c->pad = 4;
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(c->mean, mean, sizeof mean);
    memcpy(c->std, std, sizeof std);
}

void aug_rng(uint32_t out[4], uint64_t seed, uint64_t epoch, uint32_t index, uint32_t stream)
{
    philox4x32_10(out, stream, index, (uint32_t)epoch, (uint32_t)(epoch >> 32),
                  (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* Uniform in [0, 1) from one word. */
static double u01(uint32_t w) { return (double)w * (1.0 / 4294967296.0); }

AugBox aug_rrc_box(int H, int W, const AugConfig *c, uint64_t seed, uint64_t epoch,
                   uint32_t index)
{
    CT_ASSERT(H > 0 && W > 0, "aug_rrc_box: image %d x %d", H, W);
    double area = (double)H * W;
    double rmin = fmin(c->ratio[0], c->ratio[1]), rmax = fmax(c->ratio[0], c->ratio[1]);
    double lr0 = log(c->ratio[0]), lr1 = log(c->ratio[1]);
    AugBox b;
    for (uint32_t t = 0; t < 10; t++) {
        uint32_t r[4];
        aug_rng(r, seed, epoch, index, AUG_STREAM_RRC + t);
        double target = area * (c->scale[0] + (c->scale[1] - c->scale[0]) * u01(r[0]));
        double ar = exp(lr0 + (lr1 - lr0) * u01(r[1]));
        int w = (int)rint(sqrt(target * ar));  /* rint: half to even, like Python round */
        int h = (int)rint(sqrt(target / ar));
        if (0 < w && w <= W && 0 < h && h <= H) {
            b.top = (int)aug_below(r[2], (uint32_t)(H - h + 1));
            b.left = (int)aug_below(r[3], (uint32_t)(W - w + 1));
            b.h = h;
            b.w = w;
            return b;
        }
    }
    /* Fallback: central crop at the nearest allowed aspect ratio. */
    double in_ratio = (double)W / H;
    if (in_ratio < rmin) {
        b.w = W;
        b.h = (int)rint(W / rmin);
    } else if (in_ratio > rmax) {
        b.h = H;
        b.w = (int)rint(H * rmax);
    } else {
        b.w = W;
        b.h = H;
    }
    if (b.h < 1) b.h = 1;
    if (b.w < 1) b.w = 1;
    if (b.h > H) b.h = H;
    if (b.w > W) b.w = W;
    b.top = (H - b.h) / 2;
    b.left = (W - b.w) / 2;
    return b;
}

int aug_flip(const AugConfig *c, uint64_t seed, uint64_t epoch, uint32_t index)
{
    if (c->hflip <= 0.0f) return 0;
    uint32_t r[4];
    aug_rng(r, seed, epoch, index, AUG_STREAM_FLIP);
    return u01(r[0]) < (double)c->hflip;
}

static void taps_make(Tap *t, int n, int off, int vn, double start, double step, int lo,
                      int hi)
{
    for (int k = 0; k < n; k++) {
        int v = k + off;
        if (v < 0 || v >= vn) {
            t[k].i0 = t[k].i1 = -1;
            t[k].w = 0.0f;
            continue;
        }
        double c = start + ((double)v + 0.5) * step - 0.5;
        if (c < lo) c = lo;
        if (c > hi) c = hi;
        int i0 = (int)floor(c);
        if (i0 > hi) i0 = hi;
        t[k].i0 = i0;
        t[k].i1 = i0 < hi ? i0 + 1 : hi;
        t[k].w = (float)(c - i0);
    }
}

/* out [S,S,3] from img [H,W,C] through the tap tables (ty, tx over S). */
static void resample(float *out, int S, const uint8_t *img, int W, int C, const Tap *ty,
                     const Tap *tx, int flip, const AugConfig *cfg)
{
    float a[3], b[3];
    for (int c = 0; c < 3; c++) {
        a[c] = 1.0f / (255.0f * cfg->std[c]);
        b[c] = -cfg->mean[c] / cfg->std[c];
    }
    const size_t row = (size_t)W * C;
    /* flip: write columns right to left */
    const ptrdiff_t step = flip ? -3 : 3;
    for (int oy = 0; oy < S; oy++) {
        float *o = out + (size_t)oy * S * 3 + (flip ? (size_t)(S - 1) * 3 : 0);
        const Tap y = ty[oy];
        if (y.i0 < 0) {
            for (int ox = 0; ox < S; ox++, o += step)
                for (int c = 0; c < 3; c++) o[c] = b[c];
            continue;
        }
        const uint8_t *r0 = img + (size_t)y.i0 * row, *r1 = img + (size_t)y.i1 * row;
        const float wy = y.w;
        if (C == 3) {
            for (int ox = 0; ox < S; ox++, o += step) {
                const Tap x = tx[ox];
                if (x.i0 < 0) {
                    o[0] = b[0], o[1] = b[1], o[2] = b[2];
                    continue;
                }
                const uint8_t *p00 = r0 + 3 * x.i0, *p01 = r0 + 3 * x.i1;
                const uint8_t *p10 = r1 + 3 * x.i0, *p11 = r1 + 3 * x.i1;
                for (int c = 0; c < 3; c++) {
                    float top = p00[c] + ((float)p01[c] - p00[c]) * x.w;
                    float bot = p10[c] + ((float)p11[c] - p10[c]) * x.w;
                    o[c] = (top + (bot - top) * wy) * a[c] + b[c];
                }
            }
        } else {  /* grey: one value, replicated */
            for (int ox = 0; ox < S; ox++, o += step) {
                const Tap x = tx[ox];
                if (x.i0 < 0) {
                    o[0] = b[0], o[1] = b[1], o[2] = b[2];
                    continue;
                }
                float top = r0[x.i0] + ((float)r0[x.i1] - r0[x.i0]) * x.w;
                float bot = r1[x.i0] + ((float)r1[x.i1] - r1[x.i0]) * x.w;
                float v = top + (bot - top) * wy;
                for (int c = 0; c < 3; c++) o[c] = v * a[c] + b[c];
            }
        }
    }
}

static void check_args(const uint8_t *img, int H, int W, int C, const AugConfig *c)
{
    CT_ASSERT(img && H > 0 && W > 0 && (C == 1 || C == 3), "augment: image %d x %d x %d", H,
              W, C);
    CT_ASSERT(c->size > 0 && c->size <= AUG_MAX_SIZE, "augment: size %d (1..%d)", c->size,
              AUG_MAX_SIZE);
}

void aug_crop_resize(float *out, const uint8_t *img, int H, int W, int C, AugBox box,
                     int flip, const AugConfig *c)
{
    check_args(img, H, W, C, c);
    CT_ASSERT(box.h > 0 && box.w > 0 && box.top >= 0 && box.left >= 0 &&
              box.top + box.h <= H && box.left + box.w <= W,
              "aug_crop_resize: box top %d left %d h %d w %d outside %d x %d", box.top,
              box.left, box.h, box.w, H, W);
    const int S = c->size;
    Tap ty[AUG_MAX_SIZE], tx[AUG_MAX_SIZE];
    taps_make(ty, S, 0, S, box.top, (double)box.h / S, box.top, box.top + box.h - 1);
    taps_make(tx, S, 0, S, box.left, (double)box.w / S, box.left, box.left + box.w - 1);
    resample(out, S, img, W, C, ty, tx, flip, c);
}

void aug_train(float *out, const uint8_t *img, int H, int W, int C, const AugConfig *c,
               uint64_t seed, uint64_t epoch, uint32_t index)
{
    AugBox box = aug_rrc_box(H, W, c, seed, epoch, index);
    aug_crop_resize(out, img, H, W, C, box, aug_flip(c, seed, epoch, index), c);
}

AugValWindow aug_val_window(int H, int W, const AugConfig *c)
{
    const int S = c->size, R = c->resize;
    CT_ASSERT(H > 0 && W > 0 && R >= S, "aug_val_window: image %d x %d, resize %d, crop %d", H,
              W, R, S);
    /* torchvision Resize(int): shorter side -> R, longer -> int(R * long / short) */
    AugValWindow v;
    if (H <= W) {
        v.nh = R;
        v.nw = (int)((int64_t)R * W / H);
    } else {
        v.nw = R;
        v.nh = (int)((int64_t)R * H / W);
    }
    v.top = (int)rint((v.nh - S) / 2.0);  /* rint: half to even, like Python round */
    v.left = (int)rint((v.nw - S) / 2.0);
    return v;
}

void aug_val_axes(RsAxis *ay, RsAxis *ax, int H, int W, const AugConfig *c)
{
    AugValWindow v = aug_val_window(H, W, c);
    *ay = rs_axis_resized(H, v.nh, v.top);
    *ax = rs_axis_resized(W, v.nw, v.left);
}

void aug_train_axes(RsAxis *ay, RsAxis *ax, int *flip, int H, int W, const AugConfig *c,
                    uint64_t seed, uint64_t epoch, uint32_t index)
{
    AugBox b = aug_rrc_box(H, W, c, seed, epoch, index);
    *ay = rs_axis_box(b.top, b.h, c->size);
    *ax = rs_axis_box(b.left, b.w, c->size);
    *flip = aug_flip(c, seed, epoch, index);
}

void aug_val(float *out, const uint8_t *img, int H, int W, int C, const AugConfig *c)
{
    check_args(img, H, W, C, c);
    const int S = c->size;
    AugValWindow v = aug_val_window(H, W, c);
    const int nh = v.nh, nw = v.nw, top = v.top, left = v.left;
    Tap ty[AUG_MAX_SIZE], tx[AUG_MAX_SIZE];
    taps_make(ty, S, top, nh, 0.0, (double)H / nh, 0, H - 1);
    taps_make(tx, S, left, nw, 0.0, (double)W / nw, 0, W - 1);
    resample(out, S, img, W, C, ty, tx, 0, c);
}

void aug_resize_pad_crop(float *out, const uint8_t *img, int H, int W, int C, int dy,
                         int dx, int flip, const AugConfig *c)
{
    check_args(img, H, W, C, c);
    const int S = c->size;
    CT_ASSERT(dy >= 0 && dx >= 0 && dy <= 2 * c->pad && dx <= 2 * c->pad,
              "aug_resize_pad_crop: offset %d %d outside [0, %d]", dy, dx, 2 * c->pad);
    Tap ty[AUG_MAX_SIZE], tx[AUG_MAX_SIZE];
    taps_make(ty, S, dy - c->pad, S, 0.0, (double)H / S, 0, H - 1);
    taps_make(tx, S, dx - c->pad, S, 0.0, (double)W / S, 0, W - 1);
    resample(out, S, img, W, C, ty, tx, flip, c);
}
