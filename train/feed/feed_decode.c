/* feed_decode.c — the --decode choice and the CPU path's normalisation
 * (feed_decode.h). */
#include "feed_decode.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "engine/error.h"
#include "nvjpeg_lib.h"

#define DECODE_WORDS_HINT "pass --decode auto, gpu or cpu"

int feed_decode_pick(FeedDecode *out, const char *want, int folder, int cuda, char *note,
                     size_t notelen, char *err, size_t errlen, const char **hint)
{
    if (note && notelen) note[0] = 0;
    *out = FEED_DECODE_CPU;
    *hint = NULL;
    const char *w = want ? want : "auto";
    if (!strcmp(w, "cpu")) return 0;
    int gpu = !strcmp(w, "gpu");
    if (!gpu && strcmp(w, "auto")) {
        *hint = DECODE_WORDS_HINT;
        return ct_fail(err, errlen, -1, "--decode: '%s' is not auto, gpu or cpu", w);
    }
    if (!folder) {
        if (!gpu) return 0;
        *hint = "drop --decode gpu (or pass --decode cpu): the GPU decodes the JPEG and PNG "
                "files of an ImageFolder only";
        return ct_fail(err, errlen, -1, "--decode gpu: this --data is not an ImageFolder, so "
                       "there are no image files to decode on the GPU");
    }
    char why[400] = "";
    if (!nvjpeg_available(why, sizeof why)) {
        if (!gpu) {
            if (cuda && note && notelen)
                snprintf(note, notelen, "decoding the images on the CPU: %s (hint: %s)", why,
                         NVJPEG_HINT);
            return 0;
        }
        *hint = NVJPEG_HINT;
        return ct_fail(err, errlen, -1, "--decode gpu: %s", why);
    }
    if (!cuda) {
        if (!gpu) return 0;
        *hint = "drop --device cpu, or pass --decode cpu";
        return ct_fail(err, errlen, -1, "--decode gpu: this run is on the CPU (--device cpu); "
                       "the GPU decoder needs a CUDA device");
    }
    *out = FEED_DECODE_GPU;
    return 0;
}

void feed_decode_check_other(const char *want, const char *data)
{
    FeedDecode d;
    char err[600];
    const char *hint;
    if (feed_decode_pick(&d, want, 0, 0, NULL, 0, err, sizeof err, &hint))
        ct_fatal_hint(hint, "%s (--data %s)", err, data);
}

void feed_u8_normalize_host(float *out, const uint8_t *px, size_t n_values, const float a[3],
                            const float b[3])
{
    #pragma omp parallel for if (n_values > (1u << 18))
    for (size_t p = 0; p < n_values / 3; p++)
        for (int c = 0; c < 3; c++)
            out[3 * p + c] = fmaf((float)px[3 * p + c], a[c], b[c]);
}

void feed_u8_to_input(Ctx *c, JpegGpu *up, Tensor *x, const uint8_t *px, int n,
                      const float mean[3], const float std[3])
{
    const size_t vals = (size_t)n * (size_t)x->shape[1] * (size_t)x->shape[2] * 3;
    CT_ASSERT(x->dtype == DT_F32 && x->ndim == 4 && x->shape[3] == 3 && x->shape[0] >= n,
              "feed_u8_to_input: the input is not f32 [>= %d, S, S, 3]", n);
    if (c->device == DEV_CPU) {
        float a[3], b[3];
        jpeg_gpu_norm_coeffs(a, b, mean, std);
        feed_u8_normalize_host((float *)x->data, px, vals, a, b);
        return;
    }
#ifdef CTRAIN_CUDA
    char err[512];
    if (jpeg_gpu_upload_u8(up, x, NULL, px, n, mean, std, c->stream, err, sizeof err))
        ct_fatal("the image feed's upload: %s", err);
#else
    (void)up;
    ct_fatal("feed_u8_to_input: a CUDA context in a build without CUDA");
#endif
}
