/* elementwise_op.c — tensor ops add, mul, scale, bias-add, relu/gelu/tanh,
 * cast: dispatch to ops/elementwise.{c,cu} and the backward of each, right
 * under its forward. */
#include "ops.h"

#include "engine/autograd.h"
#include "cpu_f32.h"
#include "op_util.h"

#define IS_CUDA(c) ((c)->device == DEV_CUDA)

/* ---- add ---- */

/* forward: y = a + b   so   da += dy,  db += dy */
static void add_backward(Ctx *c, Node *n)
{
    Tensor *dy = n->out->grad;
    /* the first input may take dy itself (ad_grad_pass); the second then
     * gets a copy, never the same memory */
    int passed = 0;
    for (int k = 0; k < 2; k++) {
        if (!passed && n->in[k] != n->in[1 - k] && ad_grad_pass(n->in[k], dy)) {
            passed = 1;
            continue;
        }
        int accum;
        Tensor *dx = ad_grad_dst(c, n->in[k], &accum);
        if (!dx) continue;
        if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
            scale_forward_cuda(dx->data, dy->data, 1.0f, dx->dtype, dx->numel, accum, c->stream);
#endif
        } else {
            F32View vdx = f32_view(dx, accum), vdy = f32_view(dy, 1);
            scale_forward_cpu(vdx.p, vdy.p, 1.0f, dx->numel, accum);
            f32_done(&vdx, 1);
            f32_done(&vdy, 0);
        }
    }
}

Tensor *op_add(Ctx *c, Tensor *a, Tensor *b)
{
    op_check_float("add", a);
    op_check_same("add", a, b);
    op_check_device("add", c, a);
    Tensor *y = tensor_new_like(c, a, a->dtype);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        add_forward_cuda(y->data, a->data, b->data, a->dtype, a->numel, c->stream);
#endif
    } else {
        F32View va = f32_view(a, 1), vb = f32_view(b, 1), vy = f32_view(y, 0);
        add_forward_cpu(vy.p, va.p, vb.p, a->numel);
        f32_done(&va, 0); f32_done(&vb, 0); f32_done(&vy, 1);
    }
    Tensor *in[2] = {a, b};
    if (ad_needs_grad(c, in, 2)) ad_record(c, "add", add_backward, y, in, 2);
    return y;
}

/* ---- scale ---- */

/* forward: y = alpha * x   so   dx += alpha * dy */
static void scale_backward(Ctx *c, Node *n)
{
    int accum;
    Tensor *dy = n->out->grad, *dx = ad_grad_dst(c, n->in[0], &accum);
    if (!dx) return;
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        scale_forward_cuda(dx->data, dy->data, n->f[0], dx->dtype, dx->numel, accum, c->stream);
#endif
    } else {
        F32View vdx = f32_view(dx, accum), vdy = f32_view(dy, 1);
        scale_forward_cpu(vdx.p, vdy.p, n->f[0], dx->numel, accum);
        f32_done(&vdx, 1); f32_done(&vdy, 0);
    }
}

Tensor *op_scale(Ctx *c, Tensor *x, float alpha)
{
    op_check_float("scale", x);
    op_check_device("scale", c, x);
    Tensor *y = tensor_new_like(c, x, x->dtype);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        scale_forward_cuda(y->data, x->data, alpha, x->dtype, x->numel, 0, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vy = f32_view(y, 0);
        scale_forward_cpu(vy.p, vx.p, alpha, x->numel, 0);
        f32_done(&vx, 0); f32_done(&vy, 1);
    }
    if (ad_needs_grad(c, &x, 1)) ad_record(c, "scale", scale_backward, y, &x, 1)->f[0] = alpha;
    return y;
}

/* ---- mul ---- */

/* forward: y = a * b   so   da += dy * b,  db += dy * a */
static void mul_backward(Ctx *c, Node *n)
{
    int acc_a = 0, acc_b = 0;
    Tensor *dy = n->out->grad, *a = n->saved[0], *b = n->saved[1];
    Tensor *da = ad_grad_dst(c, n->in[0], &acc_a);
    Tensor *db = ad_grad_dst(c, n->in[1], &acc_b);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        mul_backward_cuda(da ? da->data : NULL, db ? db->data : NULL, dy->data, a->data,
                          b->data, dy->dtype, dy->numel, acc_a, acc_b, c->stream);
#endif
    } else {
        F32View vda = f32_view(da, acc_a), vdb = f32_view(db, acc_b);
        F32View vdy = f32_view(dy, 1), va = f32_view(a, 1), vb = f32_view(b, 1);
        mul_backward_cpu(vda.p, vdb.p, vdy.p, va.p, vb.p, dy->numel, acc_a, acc_b);
        f32_done(&vda, 1); f32_done(&vdb, 1);
        f32_done(&vdy, 0); f32_done(&va, 0); f32_done(&vb, 0);
    }
}

Tensor *op_mul(Ctx *c, Tensor *a, Tensor *b)
{
    op_check_float("mul", a);
    op_check_same("mul", a, b);
    op_check_device("mul", c, a);
    Tensor *y = tensor_new_like(c, a, a->dtype);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        mul_forward_cuda(y->data, a->data, b->data, a->dtype, a->numel, c->stream);
#endif
    } else {
        F32View va = f32_view(a, 1), vb = f32_view(b, 1), vy = f32_view(y, 0);
        mul_forward_cpu(vy.p, va.p, vb.p, a->numel);
        f32_done(&va, 0); f32_done(&vb, 0); f32_done(&vy, 1);
    }
    Tensor *in[2] = {a, b};
    if (ad_needs_grad(c, in, 2)) {
        Node *n = ad_record(c, "mul", mul_backward, y, in, 2);
        ad_save(n, a);
        ad_save(n, b);
    }
    return y;
}

/* ---- cast ---- */

static void cast_into(Ctx *c, Tensor *y, Tensor *x, int accum)
{
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        cast_cuda(y->data, y->dtype, x->data, x->dtype, x->numel, accum, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vy = f32_view(y, accum);
        if (accum) for (size_t i = 0; i < x->numel; i++) vy.p[i] += vx.p[i];
        else for (size_t i = 0; i < x->numel; i++) vy.p[i] = vx.p[i];
        f32_done(&vx, 0); f32_done(&vy, 1);
    }
}

/* forward: y = (to) x   so   dx += (type of x) dy */
static void cast_backward(Ctx *c, Node *n)
{
    int accum;
    Tensor *dx = ad_grad_dst(c, n->in[0], &accum);
    if (dx) cast_into(c, dx, n->out->grad, accum);
}

Tensor *op_cast(Ctx *c, Tensor *x, DType to)
{
    op_check_float("cast", x);
    op_check_device("cast", c, x);
    CT_ASSERT(dtype_is_float(to), "cast: target type %s is not a float type", dtype_name(to));
    if (x->dtype == to) { tensor_retain(x); return x; }
    /* a parameter's working copy (engine/params.h: params_lowp_enable) is
     * cast(x) already; a recorded cast still gets its own node */
    if (x->lowp && x->lowp->dtype == to && !ad_needs_grad(c, &x, 1)) {
        tensor_retain(x->lowp);
        return x->lowp;
    }
    Tensor *y = tensor_new_like(c, x, to);
    cast_into(c, y, x, 0);
    if (ad_needs_grad(c, &x, 1)) ad_record(c, "cast", cast_backward, y, &x, 1);
    return y;
}

/* ---- bias-add ---- */

/* forward: y[r,j] = x[r,j] + b[j]   so   dx += dy,  db[j] += sum_r dy[r,j] (f32) */
static void bias_add_backward(Ctx *c, Node *n)
{
    Tensor *dy = n->out->grad;
    size_t C = tensor_cols(dy), R = tensor_rows(dy);
    int acc_x, acc_b;
    Tensor *dx = ad_grad_dst(c, n->in[0], &acc_x);
    Tensor *db = ad_grad_dst(c, n->in[1], &acc_b);
    if (db) CT_ASSERT(db->dtype == DT_F32, "bias gradient must be f32 (biases are f32 parameters)");
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        if (dx) scale_forward_cuda(dx->data, dy->data, 1.0f, dx->dtype, dx->numel, acc_x, c->stream);
        if (db) bias_backward_cuda((float *)db->data, dy->data, dy->dtype, R, C, acc_b, c->stream);
#endif
    } else {
        F32View vdy = f32_view(dy, 1);
        if (dx) {
            F32View vdx = f32_view(dx, acc_x);
            scale_forward_cpu(vdx.p, vdy.p, 1.0f, dx->numel, acc_x);
            f32_done(&vdx, 1);
        }
        if (db) bias_backward_cpu((float *)db->data, vdy.p, R, C, acc_b);
        f32_done(&vdy, 0);
    }
}

Tensor *op_bias_add(Ctx *c, Tensor *x, Tensor *b)
{
    char dx[96], dbs[96];
    op_check_float("bias_add", x);
    op_check_float("bias_add", b);
    op_check_device("bias_add", c, x);
    if (b->ndim != 1 || (size_t)b->shape[0] != tensor_cols(x))
        ct_fatal("bias_add: bias %s does not match the last dim of %s",
                 tensor_desc(dbs, sizeof dbs, b), tensor_desc(dx, sizeof dx, x));
    /* under autocast the f32 bias is read in x's type; its gradient still
     * goes to the f32 parameter */
    Tensor *bl = b;
    if (b->dtype != x->dtype) {
        int g = ad_set_grad(c, 0);
        bl = op_cast(c, b, x->dtype);
        ad_set_grad(c, g);
    }
    Tensor *y = tensor_new_like(c, x, x->dtype);
    size_t C = tensor_cols(x), R = tensor_rows(x);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        bias_add_forward_cuda(y->data, x->data, bl->data, x->dtype, R, C, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vb = f32_view(bl, 1), vy = f32_view(y, 0);
        bias_add_forward_cpu(vy.p, vx.p, vb.p, R, C);
        f32_done(&vx, 0); f32_done(&vb, 0); f32_done(&vy, 1);
    }
    if (bl != b) tensor_release(bl);
    Tensor *in[2] = {x, b};
    if (ad_needs_grad(c, in, 2)) ad_record(c, "bias_add", bias_add_backward, y, in, 2);
    return y;
}

/* ---- activations ---- */

static const char *act_names[] = {"relu", "gelu", "tanh"};

/* forward: y = act(x)   so   dx += dy * act'(x)   (relu, gelu read x; tanh reads y) */
static void act_backward(Ctx *c, Node *n)
{
    int accum;
    ActKind k = (ActKind)n->i[0];
    Tensor *dy = n->out->grad, *dx = ad_grad_dst(c, n->in[0], &accum);
    if (!dx) return;
    Tensor *x = k == ACT_TANH ? NULL : n->saved[0];
    Tensor *y = k == ACT_TANH ? n->saved[0] : NULL;
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        act_backward_cuda(k, dx->data, dy->data, x ? x->data : NULL, y ? y->data : NULL,
                          dx->dtype, dx->numel, accum, c->stream);
#endif
    } else {
        F32View vdx = f32_view(dx, accum), vdy = f32_view(dy, 1);
        F32View vx = f32_view(x, 1), vy = f32_view(y, 1);
        act_backward_cpu(k, vdx.p, vdy.p, vx.p, vy.p, dx->numel, accum);
        f32_done(&vdx, 1); f32_done(&vdy, 0); f32_done(&vx, 0); f32_done(&vy, 0);
    }
}

Tensor *op_act(Ctx *c, Tensor *x, ActKind k)
{
    CT_ASSERT(k >= ACT_RELU && k <= ACT_TANH, "op_act: activation kind %d", (int)k);
    op_check_float(act_names[k], x);
    op_check_device(act_names[k], c, x);
    Tensor *y = tensor_new_like(c, x, x->dtype);
    if (IS_CUDA(c)) {
#ifdef CTRAIN_CUDA
        act_forward_cuda(k, y->data, x->data, x->dtype, x->numel, c->stream);
#endif
    } else {
        F32View vx = f32_view(x, 1), vy = f32_view(y, 0);
        act_forward_cpu(k, vy.p, vx.p, x->numel);
        f32_done(&vx, 0); f32_done(&vy, 1);
    }
    if (ad_needs_grad(c, &x, 1)) {
        Node *n = ad_record(c, act_names[k], act_backward, y, &x, 1);
        n->i[0] = k;
        ad_save(n, k == ACT_TANH ? y : x);
    }
    return y;
}

Tensor *op_relu(Ctx *c, Tensor *x) { return op_act(c, x, ACT_RELU); }
Tensor *op_gelu(Ctx *c, Tensor *x) { return op_act(c, x, ACT_GELU); }
Tensor *op_tanh(Ctx *c, Tensor *x) { return op_act(c, x, ACT_TANH); }
