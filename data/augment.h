/* augment.h — image transforms for training and evaluation: the crop boxes
 * and flips (pure functions of the sample), as resampling axes for the
 * ImageFolder decoders, and bilinear f32 transforms of decoded u8 images
 * (Fashion-MNIST's resize + pad-crop; aug_train / aug_val, which the
 * ImageFolder feed no longer uses: it resamples with antialiasing through
 * the axes below).
 *
 * Output: f32 [S, S, 3] (one image of an NHWC batch), each channel c
 *   x = (v / 255 - mean[c]) / std[c]
 * with v the resampled pixel value in [0, 255] (not rounded back to u8, as
 * PIL would: a difference of at most 0.5/255 before normalisation).
 * Defaults are ImageNet's statistics, mean 0.485 0.456 0.406, std 0.229
 * 0.224 0.225.
 *
 * Training (aug_train), torchvision's RandomResizedCrop(S) +
 * RandomHorizontalFlip():
 *   1. a crop box (top, left, h, w) drawn as torchvision does: up to 10
 *      attempts of area fraction ~ U(scale) and aspect ratio
 *      exp(U(log ratio)), w = round(sqrt(A*r)), h = round(sqrt(A/r))
 *      (Python's round: half to even), kept when it fits, placed uniformly;
 *      else the fallback: the whole image, cropped at the center to the
 *      nearest allowed ratio. Default scale (0.08, 1), ratio (3/4, 4/3).
 *   2. bilinear resampling of the box onto S x S (half-pixel centers, the
 *      align_corners=False convention; samples clamp at the box's edges as
 *      they would on the cropped image). No antialiasing: when the box is
 *      much larger than S (big images, large crops) high frequencies alias,
 *      where PIL's resize would low-pass first. ImageNet boxes are mostly
 *      within 2x of 224, where this is mild.
 *   3. horizontal flip with probability hflip (default 0.5).
 * Evaluation (aug_val), torchvision's Resize(resize) + CenterCrop(S): the
 * shorter side scaled to `resize` (the longer to int(resize*long/short)),
 * then the central S x S window, top = round((H' - S)/2); done in one pass
 * (only the window's pixels are computed). Default resize = S*256/224.
 * Fashion-MNIST (aug_resize_pad_crop): the whole image bilinearly resized to
 * S x S, then the CIFAR-style random crop: pad `pad` zero pixels (black, before
 * normalisation) on every side and take an S x S window at a random offset in
 * [0, 2*pad]^2; flip as above. Evaluation uses offset (pad, pad), no flip.
 *
 * The same crops as resampling axes (data/resample.h), for the decoders of
 * data/image_decode.h and train/feed/jpeg_gpu.h, which resample with
 * antialiasing and round to u8 (normalisation follows on the device):
 *   aug_train_axes  aug_rrc_box's box -> rs_axis_box per side, and aug_flip
 *   aug_val_axes    aug_val_window (Resize(resize) + CenterCrop(S): the
 *                   scaled size H' x W' and the window's top, left, the one
 *                   computation aug_val uses too) -> rs_axis_resized
 * Both are pure functions of (H, W, config, seed, epoch, index): the CPU and
 * the GPU path of the image feed draw every sample's crop from them.
 *
 * Randomness is addressed, not iterated (Philox 4x32-10, engine/philox.h):
 *   aug_rng(out, seed, epoch, index, stream) = Philox(counter = {stream,
 *   index, epoch lo, epoch hi}, key = seed)
 * streams 0..9: RandomResizedCrop attempt t; AUG_STREAM_FLIP; AUG_STREAM_CROP.
 * An image's augmentation is a pure function of (seed, epoch, index): the
 * same for any worker count, scheduling, or resumed run.
 *
 * Shape letters: H W input pixels, C input channels (1 or 3), S output side.
 */
#ifndef CTRAIN_DATA_AUGMENT_H
#define CTRAIN_DATA_AUGMENT_H

#include <stdint.h>

#include "resample.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AUG_MAX_SIZE 2048  /* largest S */

enum { AUG_STREAM_RRC = 0, AUG_STREAM_FLIP = 16, AUG_STREAM_CROP = 17 };

typedef struct {
    int size;         /* S */
    int resize;       /* evaluation: shorter side before the center crop */
    float scale[2];   /* RandomResizedCrop area fraction range */
    float ratio[2];   /* RandomResizedCrop aspect ratio (w/h) range */
    float hflip;      /* horizontal flip probability */
    int pad;          /* Fashion-MNIST random-crop padding, pixels at size S */
    float mean[3], std[3];
} AugConfig;

typedef struct {
    int top, left, h, w;  /* crop box in input pixels */
} AugBox;

/* ImageNet defaults for output side S: resize = S*256/224 (rounded), scale
 * (0.08, 1), ratio (3/4, 4/3), hflip 0.5, pad 4, ImageNet mean/std. */
void aug_config_default(AugConfig *c, int size);

/* Four random words for (seed, epoch, index, stream). */
void aug_rng(uint32_t out[4], uint64_t seed, uint64_t epoch, uint32_t index, uint32_t stream);

/* RandomResizedCrop's box for an H x W image. */
AugBox aug_rrc_box(int H, int W, const AugConfig *c, uint64_t seed, uint64_t epoch,
                   uint32_t index);

/* 1 with probability c->hflip. */
int aug_flip(const AugConfig *c, uint64_t seed, uint64_t epoch, uint32_t index);

/* Resize(resize) + CenterCrop(S) of an H x W image: the image scaled to
 * nh x nw (shorter side resize, the longer int(resize * long / short)) and
 * the S x S window at (top, left) of it, top = round((nh - S) / 2). */
typedef struct {
    int nh, nw, top, left;
} AugValWindow;
AugValWindow aug_val_window(int H, int W, const AugConfig *c);

/* The evaluation crop of an H x W image as axes: rows ay, columns ax. */
void aug_val_axes(RsAxis *ay, RsAxis *ax, int H, int W, const AugConfig *c);

/* The training crop of sample (seed, epoch, index) of an H x W image as
 * axes (aug_rrc_box through rs_axis_box), and its flip (aug_flip). */
void aug_train_axes(RsAxis *ay, RsAxis *ax, int *flip, int H, int W, const AugConfig *c,
                    uint64_t seed, uint64_t epoch, uint32_t index);

/* out f32 [S,S,3] = box of img u8 [H,W,C] bilinearly resampled to S x S,
 * mirrored left-right when flip, normalised. */
void aug_crop_resize(float *out, const uint8_t *img, int H, int W, int C, AugBox box,
                     int flip, const AugConfig *c);

/* RandomResizedCrop + flip + normalise (training). */
void aug_train(float *out, const uint8_t *img, int H, int W, int C, const AugConfig *c,
               uint64_t seed, uint64_t epoch, uint32_t index);

/* Resize shorter side + center crop + normalise (evaluation). */
void aug_val(float *out, const uint8_t *img, int H, int W, int C, const AugConfig *c);

/* Whole image resized to S x S, then the S x S window at (dy - pad, dx - pad)
 * of it (zero pixels outside), flipped when flip, normalised. dy, dx in
 * [0, 2*pad]. */
void aug_resize_pad_crop(float *out, const uint8_t *img, int H, int W, int C, int dy,
                         int dx, int flip, const AugConfig *c);

/* Uniform integer in [0, n) from a random word (n >= 1). */
static inline uint32_t aug_below(uint32_t word, uint32_t n)
{
    return (uint32_t)(((uint64_t)word * n) >> 32);
}

#ifdef __cplusplus
}
#endif
#endif
