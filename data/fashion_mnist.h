/* fashion_mnist.h — the Fashion-MNIST data set (Xiao et al. 2017): 70000
 * 28x28 grey-scale images of clothing in 10 classes, 60000 train / 10000 test.
 *
 * Files in the data directory (IDX format, see data/idx.h), gzip or unpacked
 * (the loader tries NAME.gz first, then NAME):
 *   train-images-idx3-ubyte  u8 [N,28,28]    train-labels-idx1-ubyte  u8 [N]
 *   t10k-images-idx3-ubyte   u8 [N,28,28]    t10k-labels-idx1-ubyte   u8 [N]
 * Debian's dataset-fashion-mnist package installs them in FMNIST_DEFAULT_DIR.
 *
 * Shape letters: N images in a split, B batch, H W = 28 28 pixels.
 *
 * fmnist_batch_f32 turns a batch into network input:
 *   x[b, p] = (img[idx[b]][p] / 255 - mean) / std      x: f32 [B, 784]
 *   y[b]    = label[idx[b]]                              y: i32 [B]
 * with the data set's statistics mean 0.2860, std 0.3530 (pixel/255 over the
 * 60000 train images; tests/test_data_mnist.c recomputes them).
 */
#ifndef CTRAIN_DATA_FASHION_MNIST_H
#define CTRAIN_DATA_FASHION_MNIST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FMNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define FMNIST_H 28
#define FMNIST_W 28
#define FMNIST_PIXELS (FMNIST_H * FMNIST_W)
#define FMNIST_CLASSES 10
#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f

enum { FMNIST_TRAIN = 0, FMNIST_TEST = 1 };

typedef struct {
    uint32_t n;        /* N */
    uint8_t *images;   /* u8 [N, 28, 28] */
    uint8_t *labels;   /* u8 [N], each < 10 */
} FmnistSplit;

typedef struct {
    FmnistSplit split[2];  /* [FMNIST_TRAIN], [FMNIST_TEST] */
} FashionMnist;

/* "T-shirt/top", "Trouser", ..., "Ankle boot", indexed by label. */
extern const char *const fmnist_class_names[FMNIST_CLASSES];

/* Load both splits from dir (FMNIST_DEFAULT_DIR when dir is NULL). Returns 0,
 * or a negative IdxStatus with a one-line message in err; fmnist_hint(status)
 * then says what the user can do. On failure ds is left empty. */
int fmnist_load(FashionMnist *ds, const char *dir, char *err, size_t errlen);

/* What to do about a failed fmnist_load, by its status. */
const char *fmnist_hint(int status);

/* The same for a load from dir (NULL: the default folder, which the package
 * installs): a folder the user named that cannot be opened is a path to
 * check, not a package to install. */
const char *fmnist_hint_dir(int status, const char *dir);

/* fmnist_load, or ct_fatal_hint with the message and hint. */
void fmnist_load_or_die(FashionMnist *ds, const char *dir);

void fmnist_free(FashionMnist *ds);

/* x f32 [B, 784] = (pixel/255 - mean)/std and y i32 [B] for the images
 * split[indices[b]], b < B. Every index must be < split's N (asserted). */
void fmnist_batch_f32(float *x, int32_t *y, const FashionMnist *ds, int split,
                      const uint32_t *indices, int B, float mean, float std);

#ifdef __cplusplus
}
#endif
#endif
