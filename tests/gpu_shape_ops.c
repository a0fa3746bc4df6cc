/* gpu_shape_ops.c — transpose12 and gather_rows on CUDA against the CPU
 * reference, each dtype (exact moves: bit-identical), BERT's shapes. */
#include "check.h"
#include "gpu_util.h"
#include "ops/permute.h"
#include "ops/gather.h"

int main(void)
{
    gpu_require();
    check_seed(8);
    size_t cap = 4096 * 768;   /* room for the gather case below too */
    float *x = malloc(cap * 4), *y0 = malloc(cap * 4), *ref = malloc(cap * 4), *got = malloc(cap * 4);
    /* BERT's shape (16-byte runs along D) and an odd one (one element a thread) */
    static const size_t shapes[2][4] = {{4, 128, 12, 64}, {3, 5, 7, 6}};
    for (int sh = 0; sh < 2; sh++)
    for (int k = 0; k < 3; k++) {
        size_t A = shapes[sh][0], B = shapes[sh][1], C = shapes[sh][2], D = shapes[sh][3], n = A * B * C * D;
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
            snprintf(name, sizeof name, "transpose12.%s.D%zu.accum%d", dtype_name(dt), D, accum);
            check_close(name, got, ref, n, accum ? tol_atol(dt) : 0, accum ? tol_rtol(dt) : 0);
            cudaFree(dx);
            cudaFree(dy);
        }
    }
    /* gather 2000 distinct rows of [4096, 768] (MLM masked positions) */
    size_t R = 4096, Dm = 768, ng = 2000;
    int32_t *ix = malloc(ng * 4);
    for (size_t i = 0; i < ng; i++) ix[i] = (int32_t)((i * 2654435761u) % R);  /* distinct: odd multiplier mod 2^12 */
    void *didx = gpu_upload_raw(ix, ng * 4);
    for (int k = 0; k < 3; k++) {
        DType dt = gpu_float_types[k];
        char name[64];
        check_fill(x, R * Dm, -2, 2);
        quantize(x, R * Dm, dt);
        gather_rows_cpu(ref, x, ix, ng, Dm);
        void *dx = gpu_upload(x, R * Dm, dt), *dy = gpu_alloc_poison(ng * Dm, dt);
        gather_rows_cuda(dy, dx, dt, didx, ng, Dm, 0);
        gpu_download(got, dy, ng * Dm, dt);
        snprintf(name, sizeof name, "gather.fwd.%s", dtype_name(dt));
        check_close(name, got, ref, ng * Dm, 0, 0);
        /* backward into a preloaded gradient: base + scattered rows */
        check_fill(y0, R * Dm, -1, 1);
        quantize(y0, R * Dm, dt);
        memcpy(ref, y0, R * Dm * 4);
        gather_rows_backward_cpu(ref, x, ix, ng, Dm);
        quantize(ref, R * Dm, dt);
        void *dg = gpu_upload(y0, R * Dm, dt), *dsrc = gpu_upload(x, ng * Dm, dt);
        gather_rows_backward_cuda(dg, dsrc, dt, didx, ng, Dm, 0);
        gpu_download(got, dg, R * Dm, dt);
        snprintf(name, sizeof name, "gather.bwd.%s", dtype_name(dt));
        check_close(name, got, ref, R * Dm, 0, 0);
        cudaFree(dx); cudaFree(dy); cudaFree(dg); cudaFree(dsrc);
    }
    cudaFree(didx);
    free(ix);
    free(x); free(y0); free(ref); free(got);
    return check_summary();
}
