/* imagefolder.h — an image-classification data set in torchvision's
 * ImageFolder layout: the scan, the labels, and the statuses of its images.
 *
 * Layout (the one torchvision.datasets.ImageFolder reads, e.g. ImageNet's
 * train/ and val/ after the usual valprep script):
 *   ROOT/CLASS_A/xxx.jpg
 *   ROOT/CLASS_A/sub/yyy.png      (subfolders of a class are walked too)
 *   ROOT/CLASS_B/zzz.JPEG
 * Classes are the subfolders of ROOT sorted by name (byte order, which is
 * Python's code-point order for UTF-8), and a class's label is its index in
 * that order. Files are found as torchvision's make_dataset does: every
 * folder under the class (symlinks followed) in sorted path order, and in
 * each folder the file names sorted. Names starting with '.' (hidden files,
 * macOS "._x.jpg" forks) are skipped, files and folders alike.
 *
 * Extensions, case-insensitive: .jpg .jpeg .png .bmp .ppm .pgm .pnm .tga
 * .tif .tiff .webp (torchvision's list and the formats stb_image knows).
 * Every such file is listed, whatever it holds: the decoder
 * (data/image_decode.h) decides the format from the bytes and reads JPEG
 * and PNG only, so a BMP, TIFF or WebP file stops the epoch with an error
 * naming it and its detected type (a PNG named .JPEG decodes). Nothing is
 * skipped: skipping would change the batches, and so the run, silently.
 *
 * Errors are returned, not fatal (like idx_load): imagefolder_open writes one
 * line into err naming the folder and returns a negative ImgfStatus;
 * imagefolder_hint(status) says what the user can do. A folder or file the
 * process may not read is IMGF_ERR_PERM (from errno), apart from a missing
 * one (IMGF_ERR_OPEN).
 *
 * Splits (ROOT/train, ROOT/val): labels are indices into train's classes,
 * so val's are matched to train's by NAME (imagefolder_match_classes), not
 * by position: a val class folder train lacks is refused when the data set
 * is opened (naming it and train's classes); a val that lacks some of
 * train's classes is fine, its labels are train's indices all the same.
 *
 * An image that fails (image_decode.h's ImgStatus) becomes an ImgfStatus
 * through imagefolder_image_status: permission denied is IMGF_ERR_PERM
 * (the same hint as an unreadable folder), the rest one status each, whose
 * hint is image_decode's (img_hint).
 *
 * Shape letters: N images, H W pixels, C channels.
 */
#ifndef CTRAIN_DATA_IMAGEFOLDER_H
#define CTRAIN_DATA_IMAGEFOLDER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    IMGF_OK = 0,
    IMGF_ERR_OPEN = -1,    /* root missing or unreadable */
    IMGF_ERR_EMPTY = -2,   /* no class folders, or a class with no images */
    IMGF_ERR_DECODE = -3,  /* an image that is damaged or does not decode */
    IMGF_ERR_NOMEM = -4,
    IMGF_ERR_LIMIT = -5,   /* more than 2^31 - 1 images */
    IMGF_ERR_PERM = -6,    /* a folder or image the process may not read (EACCES, EPERM) */
    IMGF_ERR_CLASSES = -7, /* a val class that train lacks */
    IMGF_ERR_FILE = -8,    /* an image file gone, a directory, or not a regular file */
    IMGF_ERR_EMPTY_FILE = -9, /* a zero-byte image file */
    IMGF_ERR_FORMAT = -10, /* an image file that is not JPEG or PNG */
    IMGF_ERR_SIZE = -11,   /* an image above the pixel or file-size limit */
} ImgfStatus;

typedef struct {
    char *root;
    int nclasses;
    char **classes;        /* [nclasses] folder names, sorted; label = index */
    uint32_t *class_count; /* [nclasses] images per class */
    uint32_t n;            /* N */
    int32_t *labels;       /* [N] */
    uint64_t *path_off;    /* [N] offsets into paths */
    char *paths;           /* N NUL-terminated full paths "ROOT/CLASS/.../NAME" */
} ImageFolder;

/* Scan root. Returns IMGF_OK, or a negative ImgfStatus with the reason in
 * err; on failure f is left empty (imagefolder_free is still safe). */
int imagefolder_open(ImageFolder *f, const char *root, char *err, size_t errlen);

/* What to do about a failed imagefolder_open or image, by status. */
const char *imagefolder_hint(int status);

/* imagefolder_open, or ct_fatal_hint with the message and hint. */
void imagefolder_open_or_die(ImageFolder *f, const char *root);

static inline const char *imagefolder_path(const ImageFolder *f, uint32_t i)
{
    return f->paths + f->path_off[i];
}

void imagefolder_free(ImageFolder *f);

/* Relabel the split `val` with the classes of `train`, matched by name:
 * afterwards val's classes, nclasses and class_count are train's (a class
 * val lacks has count 0) and each label is train's index of the sample's
 * class name. Returns IMGF_OK; IMGF_ERR_CLASSES (val unchanged) when val
 * has a class train lacks, with err naming it and listing train's classes
 * (the first few when there are many); IMGF_ERR_NOMEM. */
int imagefolder_match_classes(ImageFolder *val, const ImageFolder *train, char *err,
                              size_t errlen);

/* 1 when name ends in a listed image extension (case-insensitive). */
int imagefolder_is_image(const char *name);

/* The ImgfStatus of an image_decode.h ImgStatus (IMG_OK: IMGF_OK). */
int imagefolder_image_status(int img_status);

#ifdef __cplusplus
}
#endif
#endif
