/* image_source.h — one interface over the image data sets a ResNet trains
 * on: an ImageFolder on disk, Fashion-MNIST adapted to RGB input, and
 * synthetic images. The loader (data/loader.h) only sees this interface.
 *
 *   src_get(s, index, train, seed, epoch, out, label, err, errlen)      SRC_F32
 *   src_get_u8(s, index, train, seed, epoch, out, label, NULL, 0, ...)  SRC_U8
 * write sample `index` as one NHWC row [S, S, 3] into out and its class
 * into label: f32 normalised (s->pixels == SRC_F32), or u8 resampled
 * pixels (SRC_U8: the feed normalises them on the device with s->aug's
 * mean and std, x = (v / 255 - mean[c]) / std[c]). train selects the
 * training transform (random, keyed by (seed, epoch, index):
 * data/augment.h) or the evaluation transform (deterministic). Returns 0,
 * or a negative ImgfStatus (imagefolder.h) with one line in err naming the
 * file and the reason (an image that does not decode, or may not be read).
 * Reentrant: the loader's workers call it concurrently on one source.
 *
 * For the GPU decoder, src_get_u8 with enc non-NULL does the host's part
 * only: read the file, read its header, draw the crop (SrcEncoded: the
 * bytes, header, axes and flip), and decode on the CPU at once only the
 * images of the kinds in cpu_kinds (SRC_CPU_*: PNG, CMYK, progressive, not 4:2:0),
 * which the GPU will not take; enc->bytes is then NULL and out holds the
 * pixels. src_encoded_decode decodes a kept one on the CPU later (an image
 * the GPU refused after all).
 *
 * Sources:
 *  (a) ImageFolder (data/imagefolder.h), SRC_U8: image_decode.h's reader
 *      (JPEG through libjpeg-turbo with DCT scaling, PNG through stb_image;
 *      every other format refused by name) with the axes of
 *      aug_train_axes (RandomResizedCrop + flip) or aug_val_axes (resize +
 *      center crop), resampled with antialiasing and rounded to u8
 *      (data/resample.h); ImageNet mean/std by default.
 *  (b) Fashion-MNIST for ResNet, SRC_F32: the 28x28 grey image bilinearly resized to
 *      S x S (32, 64, 224, ...), replicated to 3 channels, normalised with
 *      FMNIST_MEAN / FMNIST_STD on every channel. Training adds the
 *      CIFAR-style augmentation: random crop with 4 pixels of zero padding
 *      (at the output size S) and a horizontal flip with p = 0.5; set
 *      s->aug.pad = 0 and s->aug.hflip = 0 after init to train without it.
 *      Evaluation is the plain resize.
 *  (c) Synthetic, SRC_F32: image and label a pure function of (data seed, index),
 *      the same every epoch and for train and eval; no file, no decode. Pixels
 *      are uniform noise of variance 1 around a class-dependent mean per
 *      channel, so a model can learn the labels (loss falls) while the input
 *      costs almost nothing to make. For throughput runs without a data set
 *      (the trainer may instead fill its input on the device).
 *
 * s->aug may be changed between init and the first src_get (e.g. mean/std,
 * scale range, hflip); s->size must match s->aug.size.
 *
 * Shape letters: N samples, S output side.
 */
#ifndef CTRAIN_DATA_IMAGE_SOURCE_H
#define CTRAIN_DATA_IMAGE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"
#include "fashion_mnist.h"
#include "image_decode.h"
#include "imagefolder.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ImageSource ImageSource;

typedef enum { SRC_F32 = 0, SRC_U8 = 1 } SrcPixels;

/* Kinds of image the CPU decodes at once on the GPU path (bits). */
enum { SRC_CPU_PNG = 1u, SRC_CPU_CMYK = 2u, SRC_CPU_PROGRESSIVE = 4u,
       SRC_CPU_NOT420 = 8u };   /* JPEGs other than 4:2:0 colour: gray, 4:4:4, 4:2:2, ... */

/* One sample as the GPU decoder takes it (src_get_u8 with enc). */
typedef struct {
    const char *path;     /* the file (the source's string) */
    uint8_t *bytes;       /* its contents (malloc'd; free()), or NULL: decoded into the row */
    size_t n;
    ImgInfo info;         /* img_header's */
    RsAxis ay, ax;        /* the crop, in the header's H x W (augment.h) */
    int flip;
} SrcEncoded;

struct ImageSource {
    const char *kind;     /* "imagefolder", "fashion-mnist", "synthetic" */
    uint32_t n;           /* N */
    int classes;
    int size;             /* S */
    AugConfig aug;
    SrcPixels pixels;     /* what a row holds: get (f32) or get_u8 (u8) */
    int (*get)(const ImageSource *s, uint32_t index, int train, uint64_t seed,
               uint64_t epoch, float *out, int32_t *label, char *err, size_t errlen);
    int (*get_u8)(const ImageSource *s, uint32_t index, int train, uint64_t seed,
                  uint64_t epoch, uint8_t *out, int32_t *label, SrcEncoded *enc,
                  unsigned cpu_kinds, char *err, size_t errlen);
    void (*free_impl)(ImageSource *s);
    void *impl;
};

static inline int src_get(const ImageSource *s, uint32_t index, int train, uint64_t seed,
                          uint64_t epoch, float *out_hwc, int32_t *label, char *err,
                          size_t errlen)
{
    return s->get(s, index, train, seed, epoch, out_hwc, label, err, errlen);
}

/* enc NULL: the whole sample into out. enc non-NULL (its bytes NULL or
 * freed): the host's part; out is written only when the image is of a kind
 * in cpu_kinds (then enc->bytes is NULL). */
static inline int src_get_u8(const ImageSource *s, uint32_t index, int train, uint64_t seed,
                             uint64_t epoch, uint8_t *out_hwc, int32_t *label,
                             SrcEncoded *enc, unsigned cpu_kinds, char *err, size_t errlen)
{
    return s->get_u8(s, index, train, seed, epoch, out_hwc, label, enc, cpu_kinds, err,
                     errlen);
}

/* Bytes of one row: S S 3 of the source's pixel type. */
static inline size_t src_row_bytes(const ImageSource *s)
{
    return (size_t)s->size * s->size * 3 * (s->pixels == SRC_U8 ? 1 : sizeof(float));
}

/* out u8 [S, S, 3] = the kept sample e decoded on the CPU (e->bytes
 * non-NULL). 0, or a negative ImgfStatus with err naming the file. */
int src_encoded_decode(uint8_t *out, const SrcEncoded *e, int S, char *err, size_t errlen);

/* ImageFolder at root, output side size; aug NULL: aug_config_default(size).
 * Returns IMGF_OK or a negative ImgfStatus with err set (imagefolder_hint). */
int src_imagefolder_open(ImageSource *s, const char *root, int size, const AugConfig *aug,
                         char *err, size_t errlen);

/* The ImageFolder behind an imagefolder source (class names, paths), NULL
 * for other kinds. */
const ImageFolder *src_imagefolder(const ImageSource *s);

/* The val split's classes matched to train's by name
 * (imagefolder_match_classes; both imagefolder sources): val's labels and
 * class count become train's. Returns IMGF_OK or a negative ImgfStatus
 * with err set. */
int src_imagefolder_match(ImageSource *val, const ImageSource *train, char *err,
                          size_t errlen);

/* Fashion-MNIST split (FMNIST_TRAIN / FMNIST_TEST) of a loaded data set,
 * which must outlive the source. aug NULL: aug_config_default(size) with
 * FMNIST_MEAN / FMNIST_STD on all three channels. */
void src_fmnist_init(ImageSource *s, const FashionMnist *ds, int split, int size,
                     const AugConfig *aug);

/* n synthetic samples of `classes` classes, side size, from data_seed. */
void src_synthetic_init(ImageSource *s, uint32_t n, int classes, int size,
                        uint64_t data_seed);

void src_free(ImageSource *s);

#ifdef __cplusplus
}
#endif
#endif
