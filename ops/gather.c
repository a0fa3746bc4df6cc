/* gather.c — CPU reference for row gathering. */
#include "gather.h"

#include <string.h>

void gather_rows_cpu(float *y, const float *x, const int32_t *idx, size_t n, size_t D)
{
    for (size_t i = 0; i < n; i++) memcpy(y + i * D, x + (size_t)idx[i] * D, D * sizeof(float));
}

void gather_rows_backward_cpu(float *dx, const float *dy, const int32_t *idx, size_t n, size_t D)
{
    for (size_t i = 0; i < n; i++) {
        float *d = dx + (size_t)idx[i] * D;
        for (size_t j = 0; j < D; j++) d[j] += dy[i * D + j];
    }
}
