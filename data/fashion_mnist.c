/* fashion_mnist.c — load the four Fashion-MNIST IDX files, check that they
 * fit together, and turn batches into normalized f32 (see fashion_mnist.h).
 *
 * Shape letters: N images in a split, B batch.
 */
#include "fashion_mnist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "idx.h"
#include "engine/error.h"
#include "engine/log.h"

const char *const fmnist_class_names[FMNIST_CLASSES] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot",
};

static const char *const split_files[2][2] = {
    {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
    {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
};
static const char *const split_names[2] = {"train", "test"};

const char *fmnist_hint(int status)
{
    switch (status) {
    case IDX_OK: return NULL;
    case IDX_ERR_OPEN:
        return "install the Debian package dataset-fashion-mnist (apt-get install "
               "dataset-fashion-mnist) or pass --data fashion-mnist:DIR";
    case IDX_ERR_NOMEM:
        return "Fashion-MNIST needs about 55 MB of memory; free some and retry";
    default:
        return "the file is damaged or is not Fashion-MNIST: reinstall it (apt-get "
               "install --reinstall dataset-fashion-mnist) or pass --data "
               "fashion-mnist:DIR with the four original files";
    }
}

const char *fmnist_hint_dir(int status, const char *dir)
{
    if (status == IDX_ERR_OPEN && dir)
        return "check the path: --data fashion-mnist:DIR takes the folder holding "
               "train-images-idx3-ubyte.gz and the other three Fashion-MNIST files";
    return fmnist_hint(status);
}

/* dir/NAME.gz, or dir/NAME when only the unpacked file is there. Returns 0,
 * or -1 when the path does not fit. */
static int file_path(char *buf, size_t len, const char *dir, const char *name)
{
    int k = snprintf(buf, len, "%s/%s.gz", dir, name);
    if (k < 0 || (size_t)k >= len) return -1;
    struct stat sb;
    if (stat(buf, &sb) != 0) {
        char plain[4096];
        k = snprintf(plain, sizeof plain, "%s/%s", dir, name);
        if (k >= 0 && (size_t)k < sizeof plain && (size_t)k < len && stat(plain, &sb) == 0)
            memcpy(buf, plain, (size_t)k + 1);
    }
    return 0;
}

static void shape_str(char *buf, size_t len, const IdxArray *a)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < a->ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, i ? ",%u" : "%u", a->dims[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

static int load_split(FmnistSplit *sp, const char *dir, int s, char *err, size_t errlen)
{
    char ipath[4096], lpath[4096], shape[128];
    if (file_path(ipath, sizeof ipath, dir, split_files[s][0]) ||
        file_path(lpath, sizeof lpath, dir, split_files[s][1]))
        return ct_fail(err, errlen, IDX_ERR_OPEN, "data directory path is too long: %s", dir);

    IdxArray im, lb;
    int st = idx_load(&im, ipath, err, errlen);
    if (st) return st;
    st = idx_load(&lb, lpath, err, errlen);
    if (st) {
        idx_free(&im);
        return st;
    }

    if (im.ndim != 3 || im.dims[1] != FMNIST_H || im.dims[2] != FMNIST_W) {
        shape_str(shape, sizeof shape, &im);
        st = ct_fail(err, errlen, IDX_ERR_FORMAT,
                     "%s: expected images of shape [N,%d,%d], the file holds %s", ipath,
                     FMNIST_H, FMNIST_W, shape);
    } else if (lb.ndim != 1) {
        shape_str(shape, sizeof shape, &lb);
        st = ct_fail(err, errlen, IDX_ERR_FORMAT,
                     "%s: expected labels of shape [N], the file holds %s", lpath, shape);
    } else if (im.dims[0] != lb.dims[0]) {
        st = ct_fail(err, errlen, IDX_ERR_FORMAT,
                     "%s split: %s holds %u images but %s holds %u labels", split_names[s],
                     ipath, im.dims[0], lpath, lb.dims[0]);
    } else if (im.dims[0] == 0) {
        st = ct_fail(err, errlen, IDX_ERR_FORMAT, "%s split: %s holds no images",
                     split_names[s], ipath);
    } else {
        for (size_t i = 0; i < lb.n; i++)
            if (lb.data[i] >= FMNIST_CLASSES) {
                st = ct_fail(err, errlen, IDX_ERR_FORMAT,
                             "%s: label %u at index %zu is out of range (Fashion-MNIST "
                             "has %d classes, 0..%d)", lpath, lb.data[i], i,
                             FMNIST_CLASSES, FMNIST_CLASSES - 1);
                break;
            }
    }
    if (st) {
        idx_free(&im);
        idx_free(&lb);
        return st;
    }
    sp->n = im.dims[0];
    sp->images = im.data;  /* ownership moves to the split */
    sp->labels = lb.data;
    return IDX_OK;
}

int fmnist_load(FashionMnist *ds, const char *dir, char *err, size_t errlen)
{
    memset(ds, 0, sizeof *ds);
    if (err && errlen) err[0] = 0;
    if (!dir) dir = FMNIST_DEFAULT_DIR;
    for (int s = 0; s < 2; s++) {
        int st = load_split(&ds->split[s], dir, s, err, errlen);
        if (st) {
            fmnist_free(ds);
            return st;
        }
    }
    LOG_D("Fashion-MNIST from %s: %u train, %u test images", dir, ds->split[0].n,
          ds->split[1].n);
    return IDX_OK;
}

void fmnist_load_or_die(FashionMnist *ds, const char *dir)
{
    char err[1024];
    int st = fmnist_load(ds, dir, err, sizeof err);
    if (st) ct_fatal_hint(fmnist_hint_dir(st, dir), "%s", err);
}

void fmnist_free(FashionMnist *ds)
{
    if (!ds) return;
    for (int s = 0; s < 2; s++) {
        free(ds->split[s].images);
        free(ds->split[s].labels);
    }
    memset(ds, 0, sizeof *ds);
}

void fmnist_batch_f32(float *x, int32_t *y, const FashionMnist *ds, int split,
                      const uint32_t *indices, int B, float mean, float std)
{
    CT_ASSERT(split == FMNIST_TRAIN || split == FMNIST_TEST, "fmnist_batch_f32: split %d", split);
    const FmnistSplit *sp = &ds->split[split];
    CT_ASSERT(sp->images, "fmnist_batch_f32: split %d is not loaded", split);
    CT_ASSERT(B >= 0 && std != 0.0f, "fmnist_batch_f32: B %d std %g", B, (double)std);

    /* 256 possible pixel values: normalize each once. */
    float lut[256];
    for (int v = 0; v < 256; v++) lut[v] = ((float)v / 255.0f - mean) / std;

    for (int b = 0; b < B; b++) {
        uint32_t i = indices[b];
        CT_ASSERT(i < sp->n, "fmnist_batch_f32: index %u at batch row %d, %s split has %u",
                  i, b, split_names[split], sp->n);
        const uint8_t *img = sp->images + (size_t)i * FMNIST_PIXELS;
        float *xb = x + (size_t)b * FMNIST_PIXELS;
        for (int p = 0; p < FMNIST_PIXELS; p++) xb[p] = lut[img[p]];
        y[b] = sp->labels[i];
    }
}
