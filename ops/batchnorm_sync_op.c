/* batchnorm_sync_op.c — the sync batch norm sequences the batch-norm op
 * runs when the context has an all-reduce (math in ops/batchnorm_sync.h):
 * local kernels, then all-reduces of per-channel vectors through
 * ctx->bn_allreduce (queued on the context's stream: no host sync, so the
 * step stays capturable in a CUDA graph), then the global values. */
#include "batchnorm_sync.h"

#include "engine/error.h"
#include "engine/mem.h"
#include "batchnorm.h"
#include "cpu_f32.h"

#define IS_CUDA(c) ((c)->device == DEV_CUDA)

static void allreduce(Ctx *c, float *buf, size_t n)
{
    c->bn_allreduce(c, buf, n, c->bn_allreduce_user);
}

void batchnorm_sync_stats(Ctx *c, float *mean, float *invstd, float *running_mean,
                          float *running_var, int64_t *num_batches_tracked, float momentum,
                          float eps, size_t M, size_t C)
{
    CT_ASSERT(c->bn_allreduce, "batchnorm_sync_stats without an all-reduce in the context");
    size_t world = c->dp_world > 1 ? (size_t)c->dp_world : 1, bytes = 2 * C * sizeof(float);
    float *buf = (float *)mem_alloc(c, bytes);   /* [mean (C), var (C)] over all ranks */
    mem_copy(c, buf, mean, C * sizeof(float));
    allreduce(c, buf, C);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        bn_sync_center_cuda(buf + C, mean, invstd, buf, eps, C, c->stream);
#endif
    } else {
        bn_sync_center_cpu(buf + C, mean, invstd, buf, eps, C);
    }
    allreduce(c, buf + C, C);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        bn_sync_finish_cuda(mean, invstd, running_mean, running_var, num_batches_tracked, buf,
                            buf + C, momentum, eps, M * world, C, c->stream);
#endif
    } else {
        bn_sync_finish_cpu(mean, invstd, running_mean, running_var, num_batches_tracked, buf,
                           buf + C, momentum, eps, M * world, C);
    }
    mem_free(c, buf, bytes);
}

void batchnorm_sync_backward(Ctx *c, Tensor *dx, Tensor *dz, float *dgamma, float *dbeta,
                             Tensor *dy, Tensor *x, Tensor *y, const float *mean,
                             const float *invstd, const float *gamma, int relu, int accum_x,
                             int accum_z, int accum_g, int accum_b)
{
    CT_ASSERT(c->bn_allreduce, "batchnorm_sync_backward without an all-reduce in the context");
    size_t C = tensor_cols(x), M = tensor_rows(x), bytes = 2 * C * sizeof(float);
    float *sums = (float *)mem_alloc(c, bytes);   /* [sg (C), sgx (C)], then the means */
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        size_t sbytes = batchnorm_scratch_bytes(M, C);
        void *scratch = mem_alloc(c, sbytes);
        /* local sums only: dbeta <- sg, dgamma <- sgx (no dx, no dz yet) */
        batchnorm_backward_cuda(NULL, NULL, sums + C, sums, dy->data, x->data,
                                y ? y->data : NULL, mean, invstd, gamma, NULL, x->dtype, 1, relu,
                                M, C,
                                0, 0, 0, scratch, sbytes, c->stream);
        mem_free(c, scratch, sbytes);
        bn_sync_grads_cuda(dgamma, dbeta, sums, M, C, accum_g, accum_b, c->stream);
        allreduce(c, sums, 2 * C);
        batchnorm_backward_dx_cuda(dx ? dx->data : NULL, dz ? dz->data : NULL, dy->data, x->data,
                                   y ? y->data : NULL, mean, invstd, gamma, NULL, sums, sums + C,
                                   x->dtype, 1, relu, M, C, accum_x, accum_z, c->stream);
#endif
    } else {
        F32View vdx = f32_view(dx, accum_x), vdz = f32_view(dz, accum_z);
        F32View vdy = f32_view(dy, 1), vx = f32_view(x, 1), vy = f32_view(y, 1);
        batchnorm_backward_cpu(NULL, NULL, sums + C, sums, vdy.p, vx.p, vy.p, mean, invstd,
                               gamma, NULL, 1, relu, M, C, 0, 0, 0);
        bn_sync_grads_cpu(dgamma, dbeta, sums, M, C, accum_g, accum_b);
        allreduce(c, sums, 2 * C);
        batchnorm_backward_dx_cpu(vdx.p, vdz.p, vdy.p, vx.p, vy.p, mean, invstd, gamma, NULL, sums,
                                  sums + C, 1, relu, M, C, accum_x, accum_z);
        f32_done(&vdx, 1); f32_done(&vdz, 1);
        f32_done(&vdy, 0); f32_done(&vx, 0); f32_done(&vy, 0);
    }
    mem_free(c, sums, bytes);
}
