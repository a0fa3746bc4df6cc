/* image_cpu_probe.c — how fast one CPU core prepares a training image on the
 * CPU decode path (--decode cpu): a generated photo-like 460 x 375 JPEG
 * (tests/jpeg_fixture.h, 4:2:0) decoded and resampled onto S x S through
 * RandomResizedCrop boxes with flips (img_decode_box: libjpeg-turbo, DCT
 * scaling where the box allows, then data/resample.c), and the resample
 * alone (rs_resample_u8 on the decoded pixels). A measurement, not a test.
 *
 *   make build/image_cpu_probe
 *   build/image_cpu_probe [N [QUALITY [S]]]      default 2000 90 224
 *
 * One JSON line: ms per image for decode + resample and for resample
 * alone, single-threaded (the loader runs one such chain per worker).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "data/augment.h"
#include "data/image_decode.h"
#include "data/resample.h"
#include "tests/jpeg_fixture.h"

#define JH 375
#define JW 460

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    const int N = argc > 1 ? atoi(argv[1]) : 2000, Q = argc > 2 ? atoi(argv[2]) : 90;
    const int S = argc > 3 ? atoi(argv[3]) : 224;
    if (N < 1 || Q < 1 || Q > 100 || S < 1 || S > 4096) {
        fprintf(stderr, "usage: image_cpu_probe [N [QUALITY [S]]]\n");
        return 2;
    }
    uint8_t *pix = malloc((size_t)JH * JW * 3), *out = malloc((size_t)S * S * 3);
    jfx_pattern(pix, JH, JW, 3, 7000);
    JfxOptions o = {0};
    o.quality = Q;
    unsigned char *jpg;
    unsigned long n;
    jfx_jpeg_encode(&jpg, &n, pix, JH, JW, 3, &o);
    ImgInfo info;
    char err[512];
    if (img_header(&info, jpg, n, "probe", err, sizeof err) ||
        img_decode_rgb(pix, jpg, n, &info, "probe", err, sizeof err)) {
        fprintf(stderr, "image_cpu_probe: %s\n", err);
        return 1;
    }
    AugConfig cfg;
    aug_config_default(&cfg, S);
    double t_dec = 0, t_rs = 0;
    unsigned sum = 0;
    for (int pass = 0; pass < 2; pass++) {
        const double t0 = now_s();
        for (int i = 0; i < N; i++) {
            AugBox b = aug_rrc_box(JH, JW, &cfg, 1, 0, (uint32_t)i);
            RsAxis ay = rs_axis_box(b.top, b.h, S), ax = rs_axis_box(b.left, b.w, S);
            if (pass == 0) {
                if (img_decode_box(out, jpg, n, &info, ay, ax, i & 1, S, 8, "probe", err, sizeof err)) {
                    fprintf(stderr, "image_cpu_probe: %s\n", err);
                    return 1;
                }
            } else {
                rs_resample_u8(out, pix, ay, ax, i & 1, S, 0, 0, JH, JW);
            }
            sum += out[(size_t)i % ((size_t)S * S * 3)];
        }
        *(pass == 0 ? &t_dec : &t_rs) = now_s() - t0;
    }
    printf("{\"probe\":\"image_cpu\",\"jpeg\":\"%dx%d q%d 4:2:0\",\"bytes\":%lu,\"S\":%d,\"images\":%d,"
           "\"decode_resample_ms\":%.4f,\"resample_ms\":%.4f,\"check\":%u}\n",
           JW, JH, Q, n, S, N, 1e3 * t_dec / N, 1e3 * t_rs / N, sum);
    free(pix);
    free(out);
    free(jpg);
    return 0;
}
