/* image_decode.h — the CPU image decoder: a file's bytes to the u8 [S, S, 3]
 * crop a sample needs, reading only the formats we mean to read.
 *
 * The path of one image (the loader's worker calls these in order):
 *   img_read_file   the whole file into memory (size cap IMG_MAX_FILE_BYTES;
 *                   errno-specific messages: permission, directory, empty)
 *   img_header      the format from the magic bytes (img_sniff), then width,
 *                   height and components from the header alone; refuses
 *                   every format but JPEG and PNG, a zero side, and more
 *                   than IMG_MAX_PIXELS pixels, before anything is decoded
 *   (the caller draws the crop on (H, W): aug_rrc_box + rs_axis_box, or
 *    rs_axis_resized for evaluation; data/resample.h)
 *   img_decode_box  decode the source window those axes read, resample it
 *                   to u8 [S, S, 3] (flipped when asked), rs_resample_u8
 *
 * Formats. Decided by the bytes, never the extension (a PNG named .JPEG
 * decodes): JPEG `FF D8 FF`, PNG `89 50 4E 47 0D 0A 1A 0A`. Everything else
 * is refused with its detected type named (GIF, BMP, TIFF, WebP, PSD,
 * Radiance HDR, Softimage PIC, PNM, JPEG 2000, JPEG XL, HEIF/AVIF, text, an
 * empty file; TGA has no signature: "not a JPEG or PNG image"), so no file
 * reaches stb_image's GIF/PIC/HDR/TGA/PSD/PNM decoders.
 *  - JPEG: libjpeg-turbo through its libjpeg API (jpeglib.h) from memory.
 *    The API of the same library as Debian's libturbojpeg0-dev, chosen
 *    because it exposes DCT-domain scaling and scanline skipping/cropping.
 *    Errors longjmp out of libjpeg (its default error_exit would exit())
 *    and come back as the library's own message. Gray is replicated to RGB
 *    (libjpeg's colour converter), YCbCr converted by libjpeg (islow IDCT,
 *    fancy upsampling: libjpeg's and PIL's defaults), CMYK and YCCK decoded
 *    to CMYK and converted as PIL does, R = (255 - C)(255 - K)/255 on the
 *    ink values, where an Adobe marker means the file stores them inverted
 *    (Photoshop's CMYK: R = C' K' / 255). EXIF orientation is ignored, as
 *    torchvision's ImageFolder (PIL's Image.open, no exif_transpose) does:
 *    a sample's pixels are the stored raster.
 *  - PNG: the IHDR chunk (first, 13 bytes, CRC checked) gives the size;
 *    stb_image decodes (stbi_load_from_memory, 3 channels: grey replicated,
 *    alpha dropped, palettes expanded, 16 bits reduced to 8, as stb does).
 *
 * DCT scaling (JPEG only). libjpeg can decode at 1/d of the size, d in
 * {1, 2, 4, 8}, for little more than the entropy decoding. The rule:
 *     d = the largest of {1, 2, 4, 8}, d <= max_d, with step / d >= 1 on
 *         both axes (img_dct_denom)
 * i.e. the region the S outputs cover (S * step source pixels) still spans
 * at least S decoded pixels on each axis, so every output pixel averages at
 * least one decoded pixel per axis and antialiasing is never weakened (the
 * 1/d IDCT is itself a low-pass). The axes are moved to the decoded size
 * with rs_axis_scaled (coordinates / d; H_d = ceil(H / d), libjpeg's
 * output size). Pixels
 * differ from a full decode + the same resample within the tolerance
 * tests/test_image_decode.c states.
 *
 * Only the needed pixels: the rows [j0, j1) and columns the axes read
 * (rs_window) are decoded, skipping the rows above (jpeg_skip_scanlines),
 * cropping the columns (jpeg_crop_scanline, to an iMCU boundary, widened by
 * 2 pixels each side so fancy upsampling sees the same neighbours as a full
 * decode) and stopping after the last row (jpeg_abort_decompress).
 *
 * Truncation. libjpeg pads a stream that ends early with gray and warns.
 * Decided: data that ends inside a scan (libjpeg's "premature end of data
 * segment" with the input exhausted) is an error, "truncated JPEG: N bytes,
 * the data ends early"; a stream that lacks only its EOI marker after the
 * last scan decodes (libjpeg's "premature end of JPEG file" alone; ImageNet
 * holds such files and PIL reads them). Stopping after the window would
 * miss a cut below it, so a stream that does not end in EOI (FF D9 within
 * its last 1 KiB, after the first scan's header) is always decoded to the
 * end: the verdict is the same for every crop. Corrupt-data warnings of
 * other kinds (extraneous bytes, a bad Huffman code) are not errors, as in
 * libjpeg's tools and PIL. A progressive stream cut exactly between two
 * scans is indistinguishable from one missing its EOI: it decodes at the
 * quality of the scans it holds.
 *
 * Errors: every function returns IMG_OK or a negative ImgStatus and writes
 * one line into err naming the file and the cause ("PATH: a GIF image, not
 * JPEG or PNG"); img_hint(status) is the one hint the caller adds
 * (ct_fatal_hint(img_hint(st), "%s", err)). Reentrant: no state outside
 * the arguments (loader workers decode concurrently).
 *
 * Shape letters: H W source pixels, S output side, d DCT scale denominator.
 */
#ifndef CTRAIN_DATA_IMAGE_DECODE_H
#define CTRAIN_DATA_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "resample.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IMG_MAX_PIXELS (1ull << 28)            /* W * H above this: refused */
#define IMG_MAX_FILE_BYTES (256ull << 20)      /* img_read_file's size cap */

typedef enum { IMG_UNKNOWN = 0, IMG_JPEG = 1, IMG_PNG = 2 } ImgFormat;

typedef enum {
    IMG_OK = 0,
    IMG_ERR_OPEN = -1,     /* missing, a directory, not a regular file, a read error */
    IMG_ERR_ACCESS = -2,   /* permission denied */
    IMG_ERR_EMPTY = -3,    /* a zero-byte file */
    IMG_ERR_FORMAT = -4,   /* not JPEG or PNG (GIF, BMP, text, ...) */
    IMG_ERR_SIZE = -5,     /* above IMG_MAX_PIXELS, above the file size cap */
    IMG_ERR_DAMAGED = -6,  /* a bad header (a zero side), truncated or undecodable data */
    IMG_ERR_NOMEM = -7,
} ImgStatus;

typedef struct {
    ImgFormat format;
    int width, height;     /* W, H as the header says */
    int channels;          /* in the file: JPEG 1, 3 or 4 (CMYK/YCCK); PNG 1..4 */
    int progressive;       /* JPEG: progressive (SOF2) */
    int cmyk;              /* JPEG: CMYK or YCCK */
    int chroma420;         /* JPEG: 3 components, Y sampled 2 x 2 over chroma 1 x 1 (4:2:0,
                              what cameras and PIL write) */
} ImgInfo;

/* The format from the first bytes; *type (when non-NULL) names what was
 * found, with its article, for a message: "a JPEG image", "a GIF image",
 * "a text file", "an empty file", "not a JPEG or PNG image". */
ImgFormat img_sniff(const uint8_t *bytes, size_t n, const char **type);

/* Read path whole into *bytes (malloc'd; free()) of *n bytes. Errors:
 * IMG_ERR_ACCESS, IMG_ERR_OPEN (missing, directory, not a regular file, read
 * error), IMG_ERR_EMPTY, IMG_ERR_SIZE (above IMG_MAX_FILE_BYTES). */
int img_read_file(const char *path, uint8_t **bytes, size_t *n, char *err, size_t errlen);

/* Sniff, then the header of a JPEG or PNG in bytes[0..n): fills info.
 * Errors: IMG_ERR_EMPTY, IMG_ERR_FORMAT, IMG_ERR_DAMAGED (libjpeg's message,
 * a bad IHDR or its CRC, a zero side), IMG_ERR_SIZE (W * H above
 * IMG_MAX_PIXELS). path is only named in messages. */
int img_header(ImgInfo *info, const uint8_t *bytes, size_t n, const char *path, char *err,
               size_t errlen);

/* The DCT scale denominator for axes ay, ax (full-size source coordinates)
 * under the rule above; max_d caps it (1: no scaling). */
int img_dct_denom(RsAxis ay, RsAxis ax, int max_d);

/* out u8 [S, S, 3] = the image in bytes (info from img_header on the same
 * bytes) resampled through ay, ax (coordinates of the H x W source the
 * header gives), mirrored when flip; JPEGs decoded at 1/img_dct_denom(ay,
 * ax, max_d) (max_d 8 normally, 1 for a full-resolution decode). Errors:
 * IMG_ERR_DAMAGED (libjpeg's or stb's message; "truncated JPEG: N bytes,
 * the data ends early"), IMG_ERR_NOMEM. */
int img_decode_box(uint8_t *out, const uint8_t *bytes, size_t n, const ImgInfo *info,
                   RsAxis ay, RsAxis ax, int flip, int S, int max_d, const char *path,
                   char *err, size_t errlen);

/* The whole image at full resolution: out u8 [H, W, 3] (H, W from info).
 * For tests, and for a caller that needs every pixel. Errors as above. */
int img_decode_rgb(uint8_t *out, const uint8_t *bytes, size_t n, const ImgInfo *info,
                   const char *path, char *err, size_t errlen);

/* What to do about a failed call, by status (NULL for IMG_OK). */
const char *img_hint(int status);

#ifdef __cplusplus
}
#endif
#endif
