/* conv1x1_bn.c — when the unit's 1 x 1 convolutions take ctrain's own
 * kernel, and its host side (the math: ops/conv1x1_bn.h; the kernel:
 * ops/conv1x1_bn.cu): the partials from the pool, the sums' finish, then
 * (mean, m2) from the sums.
 */
#include "conv1x1_bn.h"

#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#include <stdint.h>

#include "engine/error.h"
#include "engine/mem.h"
#include "engine/settings.h"
#include "batchnorm.h"

static int g_use = -1;
static long g_runs;

void conv1x1_bn_use(int on) { g_use = on < 0 ? -1 : on != 0; }
long conv1x1_bn_runs(void) { return g_runs; }

/* the current device: compute capability major, and the shared memory a
 * block may opt in to (asked once a device) */
static void card(int *major, int *optin)
{
    static int maj[64], opt[64];
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CT_ASSERT(dev >= 0 && dev < 64, "conv1x1_bn: device %d", dev);
    if (!maj[dev]) {
        CUDA_CHECK(cudaDeviceGetAttribute(&opt[dev], cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                          dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&maj[dev], cudaDevAttrComputeCapabilityMajor, dev));
    }
    *major = maj[dev];
    *optin = opt[dev];
}

int conv1x1_bn_fits(DType dt, const Conv2dShape *s)
{
    if (!((dt == DT_BF16 || dt == DT_F16) && s->R == 1 && s->S == 1 && s->stride_h == 1 &&
          s->stride_w == 1 && s->pad_h == 0 && s->pad_w == 0 && s->dil_h == 1 &&
          s->dil_w == 1 && s->C % 64 == 0 && s->K % 64 == 0 && s->K <= 2048 && s->C > 0 &&
          s->K > 0 && (size_t)s->N * s->P * s->Q > 0 &&
          (size_t)s->N * s->P * s->Q <= ((size_t)1 << 30)))
        return 0;
    int major, optin;
    card(&major, &optin);
    return major >= 8 && (size_t)optin >= conv1x1_bn_smem(s->K);
}

int conv1x1_bn_wanted(DType dt, const Conv2dShape *s, const void *y, const void *w,
                      const void *z)
{
    int on = g_use >= 0 ? g_use : setting_choice(SET_CONV_BN_1X1) == 1;
    /* 16-byte copies and stores: a weight view packed after a parameter of
     * an odd size may not be aligned */
    if (((uintptr_t)y | (uintptr_t)w | (uintptr_t)z) % 16) return 0;
    /* the shapes where it beat the separate way (stages 1-2), or any that
     * fits when a test forces it */
    return on && conv1x1_bn_fits(dt, s) && (g_use == 1 || (s->C <= 512 && s->K <= 512));
}

void conv1x1_bn_cuda(Ctx *c, void *z, float *mean, float *m2, const void *y, const float *scale,
                     const float *bias, const void *w, DType dt, size_t M, int C, int K)
{
    size_t pb = (conv1x1_bn_part_floats(M, K) + (mean ? 2 * (size_t)K : 0)) * sizeof(float);
    float *part = (float *)mem_alloc(c, pb);
    float *sums = mean ? part + conv1x1_bn_part_floats(M, K) : NULL;
    conv1x1_bn_launch(z, sums, part, y, scale, bias, w, dt, M, C, K, c->stream);
    if (mean) batchnorm_moments_from_sums_cuda(mean, m2, sums, sums + K, M, (size_t)K, c->stream);
    mem_free(c, part, pb);
    g_runs++;
}
#endif
