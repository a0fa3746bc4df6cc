/* permute.c — CPU reference for transpose12. */
#include "permute.h"

void transpose12_cpu(float *y, const float *x, size_t A, size_t B, size_t C, size_t D, int accum)
{
    #pragma omp parallel for collapse(2) if (A * B * C * D > 65536)
    for (size_t a = 0; a < A; a++)
        for (size_t b = 0; b < B; b++)
            for (size_t c = 0; c < C; c++) {
                const float *src = x + ((a * B + b) * C + c) * D;
                float *dst = y + ((a * C + c) * B + b) * D;
                if (accum) for (size_t d = 0; d < D; d++) dst[d] += src[d];
                else for (size_t d = 0; d < D; d++) dst[d] = src[d];
            }
}
