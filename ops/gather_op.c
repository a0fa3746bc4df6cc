/* gather_op.c — tensor op gather_rows with backward. */
#include "gather.h"

#include <stdlib.h>
#include "engine/autograd.h"
#include "engine/mem.h"
#include "cpu_f32.h"
#include "op_util.h"

/* forward: y[i] = x[idx[i]]   so   dx[idx[i]] += dy[i] */
static void gather_backward(Ctx *c, Node *n)
{
    int accum;
    Tensor *dx = ad_grad_dst(c, n->in[0], &accum), *dy = n->out->grad, *idx = n->saved[0];
    if (!dx) return;
    if (!accum) tensor_zero(dx);
    size_t D = tensor_cols(dy);
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        gather_rows_backward_cuda(dx->data, dy->data, dx->dtype, (const int32_t *)idx->data,
                                  idx->numel, D, c->stream);
#endif
        return;
    }
    F32View vdx = f32_view(dx, 1), vdy = f32_view(dy, 1);
    gather_rows_backward_cpu(vdx.p, vdy.p, (const int32_t *)idx->data, idx->numel, D);
    f32_done(&vdx, 1);
    f32_done(&vdy, 0);
}

Tensor *op_gather_rows(Ctx *c, Tensor *x, Tensor *idx)
{
    char d[96];
    op_check_float("gather_rows", x);
    op_check_device("gather_rows", c, x);
    op_check_device("gather_rows", c, idx);
    if (idx->dtype != DT_I32)
        ct_fatal("gather_rows: indices %s must be i32", tensor_desc(d, sizeof d, idx));
    size_t R = tensor_rows(x), D = tensor_cols(x), n = idx->numel;
    if (c->device == DEV_CPU) {
        /* indices must be in range and distinct (the backward relies on it) */
        const int32_t *ix = (const int32_t *)idx->data;
        unsigned char *seen = calloc(R ? R : 1, 1);
        for (size_t i = 0; i < n; i++) {
            if (ix[i] < 0 || (size_t)ix[i] >= R)
                ct_fatal("gather_rows: index %d at position %zu is outside [0, %zu)", ix[i], i, R);
            if (seen[ix[i]]++)
                ct_fatal("gather_rows: index %d appears twice; indices must be distinct", ix[i]);
        }
        free(seen);
    }
    Tensor *y = tensor_new(c, x->dtype, 2, (int64_t[]){(int64_t)n, (int64_t)D});
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        gather_rows_cuda(y->data, x->data, x->dtype, (const int32_t *)idx->data, n, D, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vy = f32_view(y, 0);
        gather_rows_cpu(vy.p, vx.p, (const int32_t *)idx->data, n, D);
        f32_done(&vx, 0);
        f32_done(&vy, 1);
    }
    if (ad_needs_grad(c, &x, 1)) ad_save(ad_record(c, "gather_rows", gather_backward, y, &x, 1), idx);
    return y;
}
