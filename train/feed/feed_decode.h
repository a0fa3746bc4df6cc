/* feed_decode.h — which decoder the image feed uses (--decode), and the end
 * of the CPU path: u8 rows normalised into the model's input tensor.
 *
 * --decode (FeedSpec.decode):
 *   cpu   the loader's threads decode and resample every image
 *         (data/image_decode.h: libjpeg-turbo, stb_image for PNG); the u8
 *         rows are normalised on the device (jpeg_gpu_upload_u8, on the
 *         context's stream) or, on a CPU context, on the host;
 *   gpu   nvJPEG decodes the batch on the device (feed_jpeg.h); an
 *         ImageFolder only, a CUDA context, nvJPEG loaded: anything else is
 *         an error with the reason;
 *   auto  (NULL too) gpu when all of that holds, else cpu; on a GPU with an
 *         ImageFolder and no nvJPEG the reason is one warning line.
 *
 * Normalisation, both paths (train/feed/jpeg_gpu.h's rule):
 *   x[c] = fmaf(u, a[c], b[c]),  a[c] = 1 / (255 std[c]),  b[c] = -mean[c] / std[c]
 * in f32 from the u8 value u, so the host and the device give equal bits.
 *
 * Shape letters: n rows, S image side.
 */
#ifndef CTRAIN_TRAIN_FEED_DECODE_H
#define CTRAIN_TRAIN_FEED_DECODE_H

#include <stddef.h>
#include <stdint.h>
#include "feed_types.h"
#include "jpeg_gpu.h"

typedef enum { FEED_DECODE_CPU = 0, FEED_DECODE_GPU = 1 } FeedDecode;

/* The decoder for --decode `want` ("auto", "gpu", "cpu"; NULL: auto) on
 * data that is an ImageFolder (folder) or not, on a CUDA context (cuda) or
 * not. 0 with *out, and in note[notelen] the line to warn with when auto
 * could not have the GPU for a reason the user may want to know ("" none).
 * -1 with the message in err and *hint set: an unknown word, gpu on data
 * that is not an ImageFolder, gpu without nvJPEG (nvjpeg_available's reason;
 * NVJPEG_HINT) or without a CUDA context. */
int feed_decode_pick(FeedDecode *out, const char *want, int folder, int cuda, char *note,
                     size_t notelen, char *err, size_t errlen, const char **hint);

/* feed_decode_pick for data that is not an ImageFolder: fatal when it
 * refuses (--decode gpu). */
void feed_decode_check_other(const char *want, const char *data);

/* Rows 0..n-1 of x (f32 [>= n, S, S, 3] on c's device) = the normalised u8
 * rows px [n, S, S, 3]: on CUDA through up (an upload decoder:
 * jpeg_gpu_open with JPEG_GPU_UPLOAD), queued on c's stream, px pinned and
 * unchanged until the stream has passed it; on the CPU at once. Fatal on a
 * CUDA error. */
void feed_u8_to_input(Ctx *c, JpegGpu *up, Tensor *x, const uint8_t *px, int n,
                      const float mean[3], const float std[3]);

/* out[i] = fmaf(px[i], a[i % 3], b[i % 3]) for n_values values (n_values a
 * multiple of 3): the host's normalisation. */
void feed_u8_normalize_host(float *out, const uint8_t *px, size_t n_values, const float a[3],
                            const float b[3]);

#endif
