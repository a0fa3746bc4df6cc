/* image_source.c — the three image sources behind src_get / src_get_u8
 * (image_source.h): ImageFolder (read, header, crop axes, decode: u8 rows),
 * Fashion-MNIST resized to S x S RGB, and synthetic noise with
 * class-dependent channel means (f32 rows).
 *
 * Shape letters: N samples, S output side.
 */
#include "image_source.h"

#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "data_util.h"

/* ------------------------------------------------------------ ImageFolder */

/* Decoded on the CPU at once on the GPU path: a kind in `kinds`, or one no
 * GPU decoder reads (a JPEG of 2 or 4 components that is not CMYK). */
static int cpu_takes(const ImgInfo *info, unsigned kinds)
{
    if (info->format == IMG_PNG) return (kinds & SRC_CPU_PNG) != 0;
    if (info->cmyk) return (kinds & SRC_CPU_CMYK) != 0;
    if (info->channels != 1 && info->channels != 3) return 1;
    if (!info->chroma420 && (kinds & SRC_CPU_NOT420)) return 1;
    return info->progressive && (kinds & SRC_CPU_PROGRESSIVE);
}

int src_encoded_decode(uint8_t *out, const SrcEncoded *e, int S, char *err, size_t errlen)
{
    int st = img_decode_box(out, e->bytes, e->n, &e->info, e->ay, e->ax, e->flip, S, 8,
                            e->path, err, errlen);
    return imagefolder_image_status(st);
}

static int folder_get_u8(const ImageSource *s, uint32_t index, int train, uint64_t seed,
                         uint64_t epoch, uint8_t *out, int32_t *label, SrcEncoded *enc,
                         unsigned cpu_kinds, char *err, size_t errlen)
{
    const ImageFolder *f = s->impl;
    CT_ASSERT(index < f->n, "src_get: index %u, ImageFolder %s has %u images", index, f->root,
              f->n);
    SrcEncoded e;
    memset(&e, 0, sizeof e);
    e.path = imagefolder_path(f, index);
    int st = img_read_file(e.path, &e.bytes, &e.n, err, errlen);
    if (!st) st = img_header(&e.info, e.bytes, e.n, e.path, err, errlen);
    if (st) {
        free(e.bytes);
        return imagefolder_image_status(st);
    }
    if (train)
        aug_train_axes(&e.ay, &e.ax, &e.flip, e.info.height, e.info.width, &s->aug, seed,
                       epoch, index);
    else
        aug_val_axes(&e.ay, &e.ax, e.info.height, e.info.width, &s->aug);
    *label = f->labels[index];
    if (enc && !cpu_takes(&e.info, cpu_kinds)) {
        *enc = e;   /* the GPU decodes it; the bytes go with it */
        return 0;
    }
    st = src_encoded_decode(out, &e, s->size, err, errlen);
    free(e.bytes);
    e.bytes = NULL;
    if (enc) *enc = e;
    return st;
}

static void folder_free(ImageSource *s)
{
    imagefolder_free(s->impl);
    free(s->impl);
}

int src_imagefolder_open(ImageSource *s, const char *root, int size, const AugConfig *aug,
                         char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    ImageFolder *f = calloc(1, sizeof *f);
    if (!f) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return IMGF_ERR_NOMEM;
    }
    int st = imagefolder_open(f, root, err, errlen);
    if (st) {
        free(f);
        return st;
    }
    s->kind = "imagefolder";
    s->n = f->n;
    s->classes = f->nclasses;
    s->size = size;
    if (aug)
        s->aug = *aug;
    else
        aug_config_default(&s->aug, size);
    CT_ASSERT(s->aug.size == size, "src_imagefolder_open: aug.size %d != size %d",
              s->aug.size, size);
    s->pixels = SRC_U8;
    s->get_u8 = folder_get_u8;
    s->free_impl = folder_free;
    s->impl = f;
    return IMGF_OK;
}

const ImageFolder *src_imagefolder(const ImageSource *s)
{
    return s && s->get_u8 == folder_get_u8 ? s->impl : NULL;
}

int src_imagefolder_match(ImageSource *val, const ImageSource *train, char *err,
                          size_t errlen)
{
    CT_ASSERT(src_imagefolder(val) && src_imagefolder(train),
              "src_imagefolder_match: %s and %s sources", val->kind, train->kind);
    int st = imagefolder_match_classes(val->impl, train->impl, err, errlen);
    if (!st) val->classes = train->classes;
    return st;
}

/* ---------------------------------------------------------- Fashion-MNIST */

typedef struct {
    const FmnistSplit *sp;
} FmnistImpl;

static int fmnist_get(const ImageSource *s, uint32_t index, int train, uint64_t seed,
                      uint64_t epoch, float *out, int32_t *label, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    const FmnistSplit *sp = ((const FmnistImpl *)s->impl)->sp;
    CT_ASSERT(index < sp->n, "src_get: index %u, Fashion-MNIST split has %u images", index,
              sp->n);
    const uint8_t *img = sp->images + (size_t)index * FMNIST_PIXELS;
    const int pad = s->aug.pad;
    int dy = pad, dx = pad, flip = 0;
    if (train) {
        uint32_t r[4];
        aug_rng(r, seed, epoch, index, AUG_STREAM_CROP);
        dy = (int)aug_below(r[0], (uint32_t)(2 * pad + 1));
        dx = (int)aug_below(r[1], (uint32_t)(2 * pad + 1));
        flip = aug_flip(&s->aug, seed, epoch, index);
    }
    aug_resize_pad_crop(out, img, FMNIST_H, FMNIST_W, 1, dy, dx, flip, &s->aug);
    *label = sp->labels[index];
    return 0;
}

static void fmnist_src_free(ImageSource *s) { free(s->impl); }

void src_fmnist_init(ImageSource *s, const FashionMnist *ds, int split, int size,
                     const AugConfig *aug)
{
    CT_ASSERT(split == FMNIST_TRAIN || split == FMNIST_TEST, "src_fmnist_init: split %d",
              split);
    CT_ASSERT(ds->split[split].images, "src_fmnist_init: split %d is not loaded", split);
    memset(s, 0, sizeof *s);
    FmnistImpl *impl = calloc(1, sizeof *impl);
    if (!impl) ct_fatal("out of memory");
    impl->sp = &ds->split[split];
    s->kind = "fashion-mnist";
    s->n = impl->sp->n;
    s->classes = FMNIST_CLASSES;
    s->size = size;
    if (aug) {
        s->aug = *aug;
    } else {
        aug_config_default(&s->aug, size);
        for (int c = 0; c < 3; c++) {
            s->aug.mean[c] = FMNIST_MEAN;
            s->aug.std[c] = FMNIST_STD;
        }
    }
    CT_ASSERT(s->aug.size == size && s->aug.pad >= 0, "src_fmnist_init: aug.size %d size %d "
              "pad %d", s->aug.size, size, s->aug.pad);
    s->get = fmnist_get;
    s->free_impl = fmnist_src_free;
    s->impl = impl;
}

/* -------------------------------------------------------------- synthetic */

typedef struct {
    uint64_t seed;
} SynthImpl;

static int synth_get(const ImageSource *s, uint32_t index, int train, uint64_t seed,
                     uint64_t epoch, float *out, int32_t *label, char *err, size_t errlen)
{
    (void)train, (void)seed, (void)epoch, (void)err, (void)errlen;
    CT_ASSERT(index < s->n, "src_get: index %u, synthetic source has %u samples", index, s->n);
    const uint64_t ds = ((const SynthImpl *)s->impl)->seed;
    const uint64_t key = data_mix64(ds ^ data_mix64(index + DATA_MIX64_GOLDEN));
    const int32_t y = (int32_t)(key % (uint64_t)s->classes);
    float mu[3];
    for (int c = 0; c < 3; c++)  /* class mean per channel, in [-0.5, 0.5) */
        mu[c] = (float)(data_mix64(ds + (uint64_t)y * 3 + (uint64_t)c + 1) >> 40) *
                    (1.0f / 16777216.0f) - 0.5f;
    /* uniform [-sqrt(3), sqrt(3)): variance 1; two draws per 64-bit hash */
    const float scale = 3.4641016f / 16777216.0f, shift = 1.7320508f;
    const size_t n = (size_t)s->size * s->size * 3;
    for (size_t i = 0; i < n; i += 2) {
        uint64_t h = data_mix64(key + (i / 2 + 1) * DATA_MIX64_GOLDEN);
        out[i] = (float)(h >> 40) * scale - shift + mu[i % 3];
        if (i + 1 < n) out[i + 1] = (float)((h >> 8) & 0xFFFFFF) * scale - shift + mu[(i + 1) % 3];
    }
    *label = y;
    return 0;
}

static void synth_free(ImageSource *s) { free(s->impl); }

void src_synthetic_init(ImageSource *s, uint32_t n, int classes, int size, uint64_t data_seed)
{
    CT_ASSERT(n > 0 && classes > 0 && size > 0, "src_synthetic_init: n %u classes %d size %d",
              n, classes, size);
    memset(s, 0, sizeof *s);
    SynthImpl *impl = calloc(1, sizeof *impl);
    if (!impl) ct_fatal("out of memory");
    impl->seed = data_seed;
    s->kind = "synthetic";
    s->n = n;
    s->classes = classes;
    s->size = size;
    aug_config_default(&s->aug, size);
    s->get = synth_get;
    s->free_impl = synth_free;
    s->impl = impl;
}

void src_free(ImageSource *s)
{
    if (!s) return;
    if (s->free_impl) s->free_impl(s);
    memset(s, 0, sizeof *s);
}
