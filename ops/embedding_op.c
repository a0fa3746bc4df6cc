/* embedding_op.c — tensor op embedding lookup and its backward (math in
 * ops/embedding.h).
 *
 * Shape letters: N ids (any shape, flattened), V vocabulary rows, D width.
 * The table is an f32 parameter [V, D]; the output is f32, or the autocast
 * type under autocast (ops/autocast.h; the kernel rounds while it gathers: no cast op, no
 * copy of the table). Saved for the backward: the ids only (4 bytes a
 * position). Out-of-range ids: fatal on the CPU; on CUDA counted into the
 * device counter OP_FLAG_EMBEDDING_ID (ops/op_flags.h) and reported when
 * the host next checks the flags (ctx_check_flags), so the step never
 * syncs. Data parallel may take the table's gradient in compact form
 * (ctx->emb_defer; train/parallel/dist.c).
 */
#include "embedding.h"

#include "engine/autograd.h"
#include "autocast.h"
#include "cpu_f32.h"
#include "op_flags.h"
#include "op_util.h"

/* forward: out[n, :] = table[ids[n], :]   so   dtable[v, :] += sum_{ids[n] == v} dout[n, :] */
static void embedding_backward(Ctx *c, Node *n)
{
    float *rows = NULL;
    int32_t *ids_out = NULL;
    if (c->emb_defer && c->emb_defer(c->emb_defer_user, n, &rows, &ids_out)) {
        /* data parallel takes this table's lookup gradient in compact form */
        Tensor *dy = n->out->grad, *ids = n->saved[0];
        size_t V = (size_t)n->i[0], D = (size_t)n->i[1];
        if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
            embedding_backward_compact_cuda(rows, ids_out, dy->data, dy->dtype,
                                            (const int32_t *)ids->data, ids->numel, V, D, c->stream);
#endif
        } else {
            F32View vdy = f32_view(dy, 1);
            embedding_backward_compact_cpu(rows, ids_out, vdy.p, (const int32_t *)ids->data,
                                           ids->numel, V, D);
            f32_done(&vdy, 0);
        }
        return;
    }
    int accum;
    Tensor *dt = ad_grad_dst(c, n->in[0], &accum);
    if (!dt) return;
    CT_ASSERT(dt->dtype == DT_F32, "embedding: the table gradient must be f32");
    Tensor *dy = n->out->grad, *ids = n->saved[0];
    size_t V = (size_t)n->i[0], D = (size_t)n->i[1];
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        embedding_backward_cuda((float *)dt->data, dy->data, dy->dtype,
                                (const int32_t *)ids->data, ids->numel, V, D, accum, c->stream);
#endif
    } else {
        F32View vdy = f32_view(dy, 1);
        embedding_backward_cpu((float *)dt->data, vdy.p, (const int32_t *)ids->data, ids->numel,
                               V, D, accum);
        f32_done(&vdy, 0);
    }
}

Tensor *op_embedding(Ctx *c, Tensor *table, Tensor *ids)
{
    char dt[96], di[96];
    op_check_device("embedding", c, table);
    op_check_device("embedding", c, ids);
    if (table->dtype != DT_F32 || table->ndim != 2)
        ct_fatal("embedding: table %s must be an f32 [vocab, width] parameter",
                 tensor_desc(dt, sizeof dt, table));
    if (ids->dtype != DT_I32)
        ct_fatal_hint("convert token ids to i32 when the batch is built",
                      "embedding: ids %s must be i32", tensor_desc(di, sizeof di, ids));
    if (ids->ndim >= CT_MAX_DIMS)
        ct_fatal("embedding: ids %s have too many dims (the output adds one, max %d)",
                 tensor_desc(di, sizeof di, ids), CT_MAX_DIMS);
    if (!table->data || !ids->data)
        ct_fatal("embedding: an input has been freed (used after release)");
    size_t V = (size_t)table->shape[0], D = (size_t)table->shape[1], N = ids->numel;
    DType ot = autocast_dtype(c, table->dtype);   /* f32, or the autocast type */
    int64_t shape[CT_MAX_DIMS];
    for (int i = 0; i < ids->ndim; i++) shape[i] = ids->shape[i];
    shape[ids->ndim] = (int64_t)D;
    Tensor *out = tensor_new(c, ot, ids->ndim + 1, shape);
    if (c->device == DEV_CUDA) {
#ifdef CTRAIN_CUDA
        embedding_forward_cuda(out->data, ot, (const float *)table->data,
                               (const int32_t *)ids->data, op_flag(c, OP_FLAG_EMBEDDING_ID), N, V,
                               D, c->stream);
#endif
    } else {
        F32View vo = f32_view(out, 0);
        embedding_forward_cpu(vo.p, (const float *)table->data, (const int32_t *)ids->data, N, V,
                              D);
        f32_done(&vo, 1);
    }
    if (ad_needs_grad(c, &table, 1)) {
        Node *n = ad_record(c, "embedding", embedding_backward, out, &table, 1);
        n->i[0] = (int64_t)V;
        n->i[1] = (int64_t)D;
        ad_save(n, ids);
    }
    return out;
}
