/* image_source.h — one interface over the image data sets a ResNet trains
 * on: an ImageFolder on disk, Fashion-MNIST adapted to RGB input, and
 * synthetic images. The loader (data/loader.h) only sees this interface.
 *
 *   src_get(s, index, train, seed, epoch, out, label, err, errlen)
 * writes sample `index` as f32 [S, S, 3] (NHWC row, normalised) into out and
 * its class into label. train selects the training transform (random, keyed
 * by (seed, epoch, index): data/augment.h) or the evaluation transform
 * (deterministic). Returns 0, or a negative ImgfStatus (imagefolder.h) with
 * one line in err naming the file and the reason (an image that does not
 * decode, or may not be read). src_get is reentrant: the loader's workers
 * call it concurrently on one source.
 *
 * Sources:
 *  (a) ImageFolder (data/imagefolder.h): decode (stb_image, RGB) + aug_train
 *      (RandomResizedCrop + flip) or aug_val (resize + center crop),
 *      ImageNet mean/std by default.
 *  (b) Fashion-MNIST for ResNet: the 28x28 grey image bilinearly resized to
 *      S x S (32, 64, 224, ...), replicated to 3 channels, normalised with
 *      FMNIST_MEAN / FMNIST_STD on every channel. Training adds the
 *      CIFAR-style augmentation: random crop with 4 pixels of zero padding
 *      (at the output size S) and a horizontal flip with p = 0.5; set
 *      s->aug.pad = 0 and s->aug.hflip = 0 after init to train without it.
 *      Evaluation is the plain resize.
 *  (c) Synthetic: image and label a pure function of (data seed, index),
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
#include "imagefolder.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ImageSource ImageSource;

struct ImageSource {
    const char *kind;     /* "imagefolder", "fashion-mnist", "synthetic" */
    uint32_t n;           /* N */
    int classes;
    int size;             /* S */
    AugConfig aug;
    int (*get)(const ImageSource *s, uint32_t index, int train, uint64_t seed,
               uint64_t epoch, float *out, int32_t *label, char *err, size_t errlen);
    void (*free_impl)(ImageSource *s);
    void *impl;
};

static inline int src_get(const ImageSource *s, uint32_t index, int train, uint64_t seed,
                          uint64_t epoch, float *out_hwc, int32_t *label, char *err,
                          size_t errlen)
{
    return s->get(s, index, train, seed, epoch, out_hwc, label, err, errlen);
}

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
