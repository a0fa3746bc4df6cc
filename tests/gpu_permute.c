/* gpu_permute.c — transpose12 on CUDA against the CPU reference, each dtype
 * (an exact move: bit-identical), accum 0 and 1, BERT's head shape. */
#include "check.h"
#include "gpu_util.h"
#include "../ops/permute.h"

int main(void)
{
    gpu_require();
    check_seed(8);
    size_t A = 4, B = 128, C = 12, D = 64, n = A * B * C * D;
    float *x = malloc(n * 4), *y0 = malloc(n * 4), *ref = malloc(n * 4), *got = malloc(n * 4);
    for (int k = 0; k < 3; k++) {
        DType dt = gpu_float_types[k];
        check_fill(x, n, -2, 2);
        check_fill(y0, n, -2, 2);
        quantize(x, n, dt);
        quantize(y0, n, dt);
        for (int accum = 0; accum <= 1; accum++) {
            memcpy(ref, y0, n * 4);
            transpose12_cpu(ref, x, A, B, C, D, accum);
            quantize(ref, n, dt);
            void *dx = gpu_upload(x, n, dt);
            void *dy = accum ? gpu_upload(y0, n, dt) : gpu_alloc_poison(n, dt);
            transpose12_cuda(dy, dx, dt, A, B, C, D, accum, 0);
            gpu_download(got, dy, n, dt);
            char name[64];
            snprintf(name, sizeof name, "transpose12.%s.accum%d", dtype_name(dt), accum);
            check_close(name, got, ref, n, accum ? tol_atol(dt) : 0, accum ? tol_rtol(dt) : 0);
            cudaFree(dx);
            cudaFree(dy);
        }
    }
    free(x); free(y0); free(ref); free(got);
    return check_summary();
}
