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
static long g_runs[CONV1X1_KINDS];

void conv1x1_bn_use(int on) { g_use = on < 0 ? -1 : on != 0; }
long conv1x1_bn_runs(int kind) { return kind >= 0 && kind < CONV1X1_KINDS ? g_runs[kind] : 0; }

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

/* the kernel takes a 1 x 1 convolution of s whose GEMM is n channels wide
 * (K forward, C for the data gradient) in tiles of the shared memory of
 * conv1x1_bn_smem(tn) */
static int fits_n(DType dt, const Conv2dShape *s, int n, int tn)
{
    if (!((dt == DT_BF16 || dt == DT_F16) && s->R == 1 && s->S == 1 && s->stride_h == 1 &&
          s->stride_w == 1 && s->pad_h == 0 && s->pad_w == 0 && s->dil_h == 1 &&
          s->dil_w == 1 && s->C % 64 == 0 && s->K % 64 == 0 && n <= 2048 && s->C > 0 &&
          s->K > 0 && (size_t)s->N * s->P * s->Q > 0 &&
          (size_t)s->N * s->P * s->Q <= ((size_t)1 << 30)))
        return 0;
    int major, optin;
    card(&major, &optin);
    return major >= 8 && (size_t)optin >= conv1x1_bn_smem(tn);
}

int conv1x1_bn_fits(DType dt, const Conv2dShape *s) { return fits_n(dt, s, s->K, s->K); }

/* the setting (or the override), and the shapes where the forward beat the
 * separate way (stages 1-2), or any that fits when a test forces it */
static int wanted_n(DType dt, const Conv2dShape *s, int n, int tn, int forward)
{
    int v = setting_choice(SET_CONV_BN_1X1);   /* library | own | backward */
    int on = g_use >= 0 ? g_use : v == 1 || (v == 2 && !forward);
    return on && fits_n(dt, s, n, tn) && (g_use == 1 || (s->C <= 512 && s->K <= 512));
}

int conv1x1_bn_wanted(DType dt, const Conv2dShape *s, const void *y, const void *w,
                      const void *z)
{
    /* 16-byte copies and stores: a weight view packed after a parameter of
     * an odd size may not be aligned */
    if (((uintptr_t)y | (uintptr_t)w | (uintptr_t)z) % 16) return 0;
    return wanted_n(dt, s, s->K, s->K, 1);
}

int conv1x1_dgrad_bn_wanted(DType dt, const Conv2dShape *s, const void *dz, const void *w,
                            const void *y, const void *g)
{
    if (((uintptr_t)dz | (uintptr_t)w | (uintptr_t)y | (uintptr_t)g) % 16) return 0;
    return wanted_n(dt, s, s->C, 64, 0);   /* 64-wide tiles */
}

int conv1x1_wgrad_bn_wanted(DType dt, const Conv2dShape *s, const void *dz, const void *y)
{
    if (((uintptr_t)dz | (uintptr_t)y) % 16 || s->K % 128) return 0;
    return wanted_n(dt, s, s->K, 64, 0);   /* its shared memory is under the forward's at 64 */
}

void conv1x1_bn_cuda(Ctx *c, void *z, float *mean, float *m2, const void *y, const float *scale,
                     const float *bias, const void *w, DType dt, size_t M, int C, int K)
{
    /* no statistics wanted: no partials, and the kernel without its sums */
    size_t pb = mean ? (conv1x1_bn_part_floats(M, K) + 2 * (size_t)K) * sizeof(float) : 0;
    float *part = pb ? (float *)mem_alloc(c, pb) : NULL;
    float *sums = part ? part + conv1x1_bn_part_floats(M, K) : NULL;
    conv1x1_bn_launch(z, sums, part, y, scale, bias, w, dt, M, C, K, c->stream);
    if (mean) batchnorm_moments_from_sums_cuda(mean, m2, sums, sums + K, M, (size_t)K, c->stream);
    if (part) mem_free(c, part, pb);
    g_runs[CONV1X1_FWD]++;
}

void conv1x1_dgrad_bn_cuda(Ctx *c, void *g, float *sums, const void *dz, const void *w,
                           const void *y, const float *mean, const float *invstd,
                           const float *gamma, const float *beta, DType dt, size_t M, int C,
                           int K)
{
    size_t pb = conv1x1_bn_part_floats(M, C) * sizeof(float);
    float *part = (float *)mem_alloc(c, pb);
    conv1x1_dgrad_bn_launch(g, sums, part, dz, w, y, mean, invstd, gamma, beta, dt, M, C, K,
                            c->stream);
    mem_free(c, part, pb);
    g_runs[CONV1X1_DGRAD]++;
}

void conv1x1_wgrad_bn_cuda(Ctx *c, void *dw, DType tdw, int accum, const void *dz, const void *y,
                           const float *scale, const float *bias, DType dt, size_t M, int C,
                           int K)
{
    size_t n = conv1x1_wgrad_bn_part_floats(M, C, K);
    float *part = (float *)mem_alloc(c, n * sizeof(float));
    conv1x1_wgrad_bn_launch(dw, tdw, accum, part, n, dz, y, scale, bias, dt, M, C, K, c->stream);
    mem_free(c, part, n * sizeof(float));
    g_runs[CONV1X1_WGRAD]++;
}
#endif
