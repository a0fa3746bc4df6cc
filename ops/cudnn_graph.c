/* cudnn_graph.c — cuDNN's graph (backend) API from C: tensors, operation
 * graphs, the heuristics' candidates, plans timed on the real buffers
 * (cudnn_graph.h says what and why).
 *
 * Every object is a cudnnBackendDescriptor_t: created, given attributes,
 * finalized. The search:
 *   1. heuristics: an ENGINEHEUR descriptor on the graph (mode A, then
 *      FALLBACK) returns ENGINECFG descriptors, best guess first;
 *   2. each config's ENGINE tells its global index and its notes; configs
 *      with a forbidden note, or that compile at run time unless allowed,
 *      and repeats of an engine already taken from mode A are dropped;
 *   3. each kept config is finalized as an EXECUTION_PLAN (cuDNN may still
 *      refuse it here: skipped) whose workspace must fit the rule's limit;
 *   4. the plans run on the caller's buffers, one untimed run then three
 *      between two CUDA events; the fastest is kept, the rest destroyed.
 * cg_first_plan stops at step 3's first plan: no run, each config's notes
 * and finalize status kept for the caller to print.
 */
#ifdef CTRAIN_CUDA
/* CUDNN_ATTR_EXECUTION_PLAN_HANDLE and CUDNN_ATTR_OPERATIONGRAPH_HANDLE are
 * marked deprecated in cuDNN 9 but still required by its 9.x releases. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "cudnn_graph.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"

#define CG_MAX_CFGS 64

static CgDesc cg_create(cudnnBackendDescriptorType_t t)
{
    CgDesc d = NULL;
    CUDNN_CHECK(cudnnBackendCreateDescriptor(t, &d));
    return d;
}

static void cg_set(CgDesc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t t,
                   int64_t count, const void *v)
{
    CUDNN_CHECK(cudnnBackendSetAttribute(d, name, t, count, v));
}

void cg_destroy(CgDesc d)
{
    if (d) cudnnBackendDestroyDescriptor(d);
}

CgDesc cg_tensor(int64_t uid, cudnnDataType_t t, int nd, const int64_t *dims,
                 const int64_t *strides, int64_t align, int is_virtual)
{
    CgDesc d = cg_create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    bool virt = is_virtual != 0;
    cg_set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t);
    cg_set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims);
    cg_set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, strides);
    cg_set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    cg_set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    cg_set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
    CUDNN_CHECK(cudnnBackendFinalize(d));
    return d;
}

/* d finalized, or destroyed and NULL when cuDNN refuses it. */
static CgDesc finalized(CgDesc d)
{
    if (cudnnBackendFinalize(d) == CUDNN_STATUS_SUCCESS) return d;
    cg_destroy(d);
    return NULL;
}

/* Set an attribute; 0 when cuDNN refuses it. */
static int try_set(CgDesc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t t,
                   int64_t count, const void *v)
{
    return cudnnBackendSetAttribute(d, name, t, count, v) == CUDNN_STATUS_SUCCESS;
}

CgDesc cg_tensor_try(int64_t uid, cudnnDataType_t t, int nd, const int64_t *dims,
                     const int64_t *strides, int64_t align, int is_virtual)
{
    return cg_tensor_ex_try(uid, t, nd, dims, strides, align, is_virtual ? CG_VIRTUAL : 0);
}

CgDesc cg_tensor_ex_try(int64_t uid, cudnnDataType_t t, int nd, const int64_t *dims,
                        const int64_t *strides, int64_t align, int flags)
{
    CgDesc d = cg_create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    bool virt = (flags & CG_VIRTUAL) != 0, by_value = (flags & CG_BY_VALUE) != 0;
    cudnnBackendTensorReordering_t reorder = CUDNN_TENSOR_REORDERING_F16x16;
    int ok = try_set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t) &&
             try_set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims) &&
             try_set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, strides) &&
             try_set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) &&
             try_set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) &&
             try_set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt) &&
             (!by_value ||
              try_set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value)) &&
             (!(flags & CG_REORDER_F16x16) ||
              try_set(d, CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, 1,
                      &reorder));
    if (!ok) {
        cg_destroy(d);
        return NULL;
    }
    return finalized(d);
}

CgDesc cg_scalar_try(int64_t uid, cudnnDataType_t t, int by_value)
{
    const int64_t one[4] = {1, 1, 1, 1};
    return cg_tensor_ex_try(uid, t, 4, one, one, 16, by_value ? CG_BY_VALUE : 0);
}

/* A pointwise descriptor of mode with math in prec and, axis >= 0, an axis. */
static CgDesc pointwise_desc_ex(int mode, cudnnDataType_t prec, int64_t axis)
{
    CgDesc pw = cg_create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnPointwiseMode_t m = (cudnnPointwiseMode_t)mode;
    if (!try_set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &m) ||
        !try_set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec) ||
        (axis >= 0 && !try_set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis))) {
        cg_destroy(pw);
        return NULL;
    }
    return finalized(pw);
}

/* A pointwise descriptor of mode with f32 math. */
static CgDesc pointwise_desc(int mode) { return pointwise_desc_ex(mode, CUDNN_DATA_FLOAT, -1); }

/* The pointwise operation of descriptor pw on x (and b, t where set). */
static CgDesc pointwise_build(CgDesc pw, CgDesc x, CgDesc b, CgDesc t, float alpha2, CgDesc y)
{
    CgDesc op = cg_create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    int ok = try_set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw) &&
             try_set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &x) &&
             (!b || try_set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b)) &&
             (!t || try_set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t)) &&
             (alpha2 == 1.0f || try_set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2,
                                        CUDNN_TYPE_FLOAT, 1, &alpha2)) &&
             try_set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &y);
    if (!ok) {
        cg_destroy(op);
        return NULL;
    }
    return finalized(op);
}

CgDesc cg_pointwise_op(int mode, CgDesc x, CgDesc b, CgDesc y, CgDesc *pw)
{
    return cg_pointwise_op2(mode, x, b, 1.0f, y, pw);
}

CgDesc cg_pointwise_op2(int mode, CgDesc x, CgDesc b, float alpha2, CgDesc y, CgDesc *pw)
{
    *pw = x && y ? pointwise_desc(mode) : NULL;
    if (!*pw || (b == NULL && (mode == CUDNN_POINTWISE_ADD || mode == CUDNN_POINTWISE_MUL ||
                               mode == CUDNN_POINTWISE_SUB)))
        return NULL;
    return pointwise_build(*pw, x, b, NULL, alpha2, y);
}

CgDesc cg_pointwise_op3(int mode, cudnnDataType_t prec, int64_t axis, CgDesc x, CgDesc b,
                        CgDesc t, CgDesc y, CgDesc *pw)
{
    *pw = x && y ? pointwise_desc_ex(mode, prec, axis) : NULL;
    return *pw ? pointwise_build(*pw, x, b, t, 1.0f, y) : NULL;
}

CgDesc cg_matmul_op(CgDesc a, CgDesc b, CgDesc c, CgDesc *mm)
{
    *mm = NULL;
    if (!a || !b || !c) return NULL;
    CgDesc m = cg_create(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    *mm = try_set(m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp)
              ? finalized(m) : (cg_destroy(m), (CgDesc)NULL);
    if (!*mm) return NULL;
    CgDesc op = cg_create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    int ok = try_set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a) &&
             try_set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b) &&
             try_set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c) &&
             try_set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, mm);
    if (!ok) {
        cg_destroy(op);
        return NULL;
    }
    return finalized(op);
}

CgDesc cg_rng_op(double keep, CgDesc seed, CgDesc offset, CgDesc y, CgDesc *rng)
{
    *rng = NULL;
    if (!seed || !offset || !y) return NULL;
    CgDesc r = cg_create(CUDNN_BACKEND_RNG_DESCRIPTOR);
    cudnnRngDistribution_t dist = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
    int ok = try_set(r, CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1, &dist) &&
             try_set(r, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, 1, &keep);
    *rng = ok ? finalized(r) : (cg_destroy(r), (CgDesc)NULL);
    if (!*rng) return NULL;
    CgDesc op = cg_create(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR);
    /* the seed as a tensor (CUDNN_ATTR_OPERATION_RNG_SEED also takes an
     * int64 value): the graph then runs with any seed */
    ok = try_set(op, CUDNN_ATTR_OPERATION_RNG_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, rng) &&
         try_set(op, CUDNN_ATTR_OPERATION_RNG_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) &&
         try_set(op, CUDNN_ATTR_OPERATION_RNG_SEED, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &seed) &&
         try_set(op, CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                 &offset);
    if (!ok) {
        cg_destroy(op);
        return NULL;
    }
    return finalized(op);
}

CgDesc cg_reshape_op(CgDesc x, CgDesc y)
{
    if (!x || !y) return NULL;
    CgDesc op = cg_create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    if (!try_set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
        !try_set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y)) {
        cg_destroy(op);
        return NULL;
    }
    return finalized(op);
}

CgDesc cg_relu_bwd_op(CgDesc dy, CgDesc x, CgDesc dx, CgDesc *pw)
{
    *pw = dy && x && dx ? pointwise_desc(CUDNN_POINTWISE_RELU_BWD) : NULL;
    if (!*pw) return NULL;
    CgDesc op = cg_create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    int ok = try_set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, pw) &&
             try_set(op, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &dy) &&
             try_set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &x) &&
             try_set(op, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &dx);
    if (!ok) {
        cg_destroy(op);
        return NULL;
    }
    return finalized(op);
}

CgDesc cg_bn_bwd_weights_op(CgDesc x, CgDesc mean, CgDesc invstd, CgDesc scale, CgDesc dy,
                            CgDesc dscale, CgDesc dbias, CgDesc eq_dy, CgDesc eq_x,
                            CgDesc eq_bias)
{
    if (!x || !mean || !invstd || !scale || !dy || !dscale || !dbias || !eq_dy || !eq_x ||
        !eq_bias)
        return NULL;
    CgDesc op = cg_create(CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR);
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    const CgDesc *ds[10] = {&x, &mean, &invstd, &scale, &dy, &dscale, &dbias, &eq_dy, &eq_x,
                            &eq_bias};
    const cudnnBackendAttributeName_t names[10] = {
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC,
        CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS};
    int ok = try_set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1,
                     &prec);
    for (int i = 0; i < 10 && ok; i++)
        ok = try_set(op, names[i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, ds[i]);
    if (!ok) {
        cg_destroy(op);
        return NULL;
    }
    return finalized(op);
}

CgDesc cg_genstats_op(CgDesc x, CgDesc sum, CgDesc sqsum)
{
    if (!x || !sum || !sqsum) return NULL;
    CgDesc op = cg_create(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
    cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    int ok = try_set(op, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode) &&
             try_set(op, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec) &&
             try_set(op, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &x) &&
             try_set(op, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &sum) &&
             try_set(op, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &sqsum);
    if (!ok) {
        cg_destroy(op);
        return NULL;
    }
    return finalized(op);
}

CgDesc cg_reduction_op(CgDesc x, CgDesc y, int deterministic, CgDesc *red)
{
    return cg_reduction_op_mode(CUDNN_REDUCE_TENSOR_ADD, x, y, deterministic, red);
}

CgDesc cg_reduction_op_mode(int mode, CgDesc x, CgDesc y, int deterministic, CgDesc *red)
{
    *red = NULL;
    if (!x || !y) return NULL;
    CgDesc r = cg_create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnReduceTensorOp_t rop = (cudnnReduceTensorOp_t)mode;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    bool det = deterministic != 0;
    int ok = try_set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1,
                     &rop) &&
             try_set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    /* older cuDNN 9 releases know no determinism attribute: asked for (1)
     * it is skipped there, required (2) the reduction is refused */
    if (ok && deterministic &&
        !try_set(r, CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &det) &&
        deterministic == 2)
        ok = 0;
    *red = ok ? finalized(r) : (cg_destroy(r), (CgDesc)NULL);
    if (!*red) return NULL;
    CgDesc op = cg_create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    ok = try_set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, red) &&
         try_set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) &&
         try_set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    if (!ok) {
        cg_destroy(op);
        return NULL;
    }
    return finalized(op);
}

CgDesc cg_graph(cudnnHandle_t h, const CgDesc *ops, int n, cudnnStatus_t *st)
{
    CgDesc g = cg_create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    cg_set(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, ops);
    cg_set(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    cudnnStatus_t s = cudnnBackendFinalize(g);
    if (st) *st = s;
    if (s != CUDNN_STATUS_SUCCESS) {
        cg_destroy(g);
        return NULL;
    }
    return g;
}

CgDesc cg_conv_desc(int nsp, const int64_t *pad, const int64_t *stride, const int64_t *dil)
{
    return cg_conv_desc_pads(nsp, pad, pad, stride, dil);
}

CgDesc cg_conv_desc_pads(int nsp, const int64_t *pre, const int64_t *post, const int64_t *stride,
                         const int64_t *dil)
{
    CgDesc d = cg_create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    int64_t dims = nsp;
    cg_set(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    cg_set(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    cg_set(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
    cg_set(d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nsp, pre);
    cg_set(d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nsp, post);
    cg_set(d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nsp, stride);
    cg_set(d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nsp, dil);
    CUDNN_CHECK(cudnnBackendFinalize(d));
    return d;
}

/* The convolution operation; fatal (a bug) or NULL (try) when cuDNN
 * refuses it. */
static CgDesc conv_op_build(int dir, CgDesc conv, CgDesc a, CgDesc b, CgDesc c, float alpha,
                            float beta, int try_only)
{
    static const struct {
        cudnnBackendDescriptorType_t type;
        cudnnBackendAttributeName_t a, b, c, conv, alpha, beta;
    } k[3] = {
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
    };
    CT_ASSERT(dir >= 0 && dir < 3, "cg_conv_op: direction %d", dir);
    if (try_only) {
        if (!a || !b || !c || !conv) return NULL;
        CgDesc op = cg_create(k[dir].type);
        const int ok = try_set(op, k[dir].a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a) &&
                       try_set(op, k[dir].b, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b) &&
                       try_set(op, k[dir].c, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c) &&
                       try_set(op, k[dir].conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv) &&
                       try_set(op, k[dir].alpha, CUDNN_TYPE_FLOAT, 1, &alpha) &&
                       try_set(op, k[dir].beta, CUDNN_TYPE_FLOAT, 1, &beta);
        if (!ok) {
            cg_destroy(op);
            return NULL;
        }
        return finalized(op);
    }
    CgDesc op = cg_create(k[dir].type);
    cg_set(op, k[dir].a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    cg_set(op, k[dir].b, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    cg_set(op, k[dir].c, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    cg_set(op, k[dir].conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
    cg_set(op, k[dir].alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
    cg_set(op, k[dir].beta, CUDNN_TYPE_FLOAT, 1, &beta);
    CUDNN_CHECK(cudnnBackendFinalize(op));
    return op;
}

CgDesc cg_conv_op(int dir, CgDesc conv, CgDesc a, CgDesc b, CgDesc c, float alpha, float beta)
{
    return conv_op_build(dir, conv, a, b, c, alpha, beta, 0);
}

CgDesc cg_conv_op_try(int dir, CgDesc conv, CgDesc a, CgDesc b, CgDesc c, float alpha,
                      float beta)
{
    return conv_op_build(dir, conv, a, b, c, alpha, beta, 1);
}

/* ---- candidates ---- */

/* The configs heuristics mode `mode` proposes for g, appended to cfgs
 * (finalized ENGINECFG descriptors); returns the new count. */
static int heur_configs(CgDesc g, cudnnBackendHeurMode_t mode, CgDesc *cfgs, int have)
{
    CgDesc h = cg_create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cg_set(h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
    cg_set(h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (cudnnBackendFinalize(h) != CUDNN_STATUS_SUCCESS) {
        cg_destroy(h);
        return have;
    }
    int64_t count = 0;
    if (cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 0, &count, NULL) != CUDNN_STATUS_SUCCESS)
        count = 0;
    if (count > CG_MAX_CFGS - have) count = CG_MAX_CFGS - have;
    if (count > 0) {
        CgDesc got[CG_MAX_CFGS];
        for (int64_t i = 0; i < count; i++) got[i] = cg_create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        int64_t n = 0;
        if (cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &n,
                                     got) != CUDNN_STATUS_SUCCESS)
            n = 0;
        for (int64_t i = 0; i < count; i++) {
            if (i < n) cfgs[have++] = got[i];
            else cg_destroy(got[i]);
        }
    }
    cg_destroy(h);
    return have;
}

/* The configs of mode A, then of the fallback list, into cfgs: the count;
 * *from_a of them from mode A. */
static int heur_all(CgDesc g, CgDesc *cfgs, int *from_a)
{
    *from_a = heur_configs(g, CUDNN_HEUR_MODE_A, cfgs, 0);
    return heur_configs(g, CUDNN_HEUR_MODE_FALLBACK, cfgs, *from_a);
}

/* The engine of config cfg: its global index, notes and behaviour. */
typedef struct {
    int64_t index;
    uint32_t notes;        /* CG_NOTE bits */
    uint32_t behavior;     /* behaviour notes, the same bits */
    int runtime_compile;
} EngineInfo;

/* The notes an engine carries under attribute `name` (numerical or
 * behaviour notes, both enums), as bits 1 << note. */
static uint32_t note_bits(CgDesc eng, cudnnBackendAttributeName_t name,
                          cudnnBackendAttributeType_t type)
{
    int v[32]; /* enum values are int-sized */
    int64_t n = 0;
    uint32_t bits = 0;
    if (cudnnBackendGetAttribute(eng, name, type, 32, &n, v) == CUDNN_STATUS_SUCCESS)
        for (int64_t i = 0; i < n; i++)
            if (v[i] >= 0 && v[i] < 32) bits |= CG_NOTE(v[i]);
    return bits;
}

static int engine_notes(CgDesc eng, EngineInfo *e)
{
    memset(e, 0, sizeof *e);
    int64_t n = 0;
    if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                 &e->index) != CUDNN_STATUS_SUCCESS)
        return 0;
    e->notes = note_bits(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE);
    e->behavior = note_bits(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE);
    e->runtime_compile = (e->behavior >> CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) & 1u;
    return 1;
}

/* Why rule drops engine e: CG_SKIP_NOTE, CG_SKIP_COMPILE, or 0. */
static int rule_drops(const CgRule *rule, const EngineInfo *e)
{
    if (e->notes & rule->forbid_notes) return CG_SKIP_NOTE;
    return e->runtime_compile && !rule->runtime_compile ? CG_SKIP_COMPILE : 0;
}

static int engine_info(CgDesc cfg, EngineInfo *e)
{
    memset(e, 0, sizeof *e);
    CgDesc eng = cg_create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t n = 0;
    int ok = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                      &eng) == CUDNN_STATUS_SUCCESS && n == 1;
    ok = ok && engine_notes(eng, e);
    cg_destroy(eng);
    return ok;
}

/* Configs (default knobs) of every engine of g that the heuristics did not
 * propose and that cuDNN accepts for it, appended to cfgs. */
static int other_engines(CgDesc g, const int64_t *taken, int ntaken, CgDesc *cfgs, int have)
{
    int64_t count = 0, n = 0;
    if (cudnnBackendGetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                 CUDNN_TYPE_INT64, 1, &n, &count) != CUDNN_STATUS_SUCCESS)
        return have;
    for (int64_t idx = 0; idx < count && have < CG_MAX_CFGS; idx++) {
        int seen = 0;
        for (int j = 0; j < ntaken; j++) seen |= taken[j] == idx;
        if (seen) continue;
        CgDesc eng = cg_create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        cg_set(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
        cg_set(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &idx);
        if (cudnnBackendFinalize(eng) != CUDNN_STATUS_SUCCESS) {
            cg_destroy(eng);
            continue;
        }
        CgDesc cfg = cg_create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        cg_set(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &eng);
        if (cudnnBackendFinalize(cfg) == CUDNN_STATUS_SUCCESS) cfgs[have++] = cfg;
        else cg_destroy(cfg);
        cg_destroy(eng);
    }
    return have;
}

/* A finalized plan for cfg, or NULL when cuDNN refuses it (the status in
 * *st when st is not NULL). */
static CgDesc plan_for(cudnnHandle_t h, CgDesc cfg, size_t *ws, cudnnStatus_t *st)
{
    CgDesc p = cg_create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cg_set(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    cg_set(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
    int64_t bytes = 0, n = 0;
    cudnnStatus_t s = cudnnBackendFinalize(p);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                     1, &n, &bytes);
    if (st) *st = s;
    if (s != CUDNN_STATUS_SUCCESS) {
        cg_destroy(p);
        return NULL;
    }
    *ws = (size_t)bytes;
    return p;
}

/* The knob settings of config cfg into k[.][0] (type) and k[.][1] (value):
 * the count, or -1 when they cannot all be read (more than CG_MAX_KNOBS, or
 * a read refused): a partial set would rebuild another configuration. */
static int cfg_knobs(CgDesc cfg, int64_t (*k)[2])
{
    CgDesc d[CG_MAX_KNOBS];
    for (int i = 0; i < CG_MAX_KNOBS; i++) d[i] = cg_create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    int64_t n = 0;
    int got = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, CG_MAX_KNOBS, &n,
                                       d) == CUDNN_STATUS_SUCCESS && n >= 0 && n <= CG_MAX_KNOBS
                  ? 0 : -1;
    for (int64_t i = 0; got >= 0 && i < n; i++) {
        cudnnBackendKnobType_t type;
        int64_t value = 0, m = 0;
        if (cudnnBackendGetAttribute(d[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE,
                                     1, &m, &type) != CUDNN_STATUS_SUCCESS ||
            cudnnBackendGetAttribute(d[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                                     &m, &value) != CUDNN_STATUS_SUCCESS) {
            got = -1;
            break;
        }
        k[got][0] = (int64_t)type;
        k[got][1] = value;
        got++;
    }
    for (int i = 0; i < CG_MAX_KNOBS; i++) cg_destroy(d[i]);
    return got;
}

int cg_engine_knobs(CgDesc g, int64_t engine, CgKnobInfo *out, int max)
{
    CgDesc eng = cg_create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cg_set(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
    cg_set(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &engine);
    int n = -1;
    CgDesc d[CG_MAX_KNOBS];
    for (int i = 0; i < CG_MAX_KNOBS; i++) d[i] = cg_create(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR);
    int64_t got = 0;
    if (cudnnBackendFinalize(eng) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 CG_MAX_KNOBS, &got, d) == CUDNN_STATUS_SUCCESS) {
        n = 0;
        for (int64_t i = 0; i < got && n < max; i++) {
            cudnnBackendKnobType_t type;
            int64_t m = 0;
            CgKnobInfo k = {0, 0, 0, 1};
            if (cudnnBackendGetAttribute(d[i], CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1,
                                         &m, &type) != CUDNN_STATUS_SUCCESS)
                continue;
            k.type = (int64_t)type;
            (void)cudnnBackendGetAttribute(d[i], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE,
                                           CUDNN_TYPE_INT64, 1, &m, &k.min);
            (void)cudnnBackendGetAttribute(d[i], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE,
                                           CUDNN_TYPE_INT64, 1, &m, &k.max);
            (void)cudnnBackendGetAttribute(d[i], CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, 1,
                                           &m, &k.stride);
            if (k.stride < 1) k.stride = 1;
            out[n++] = k;
        }
    }
    for (int i = 0; i < CG_MAX_KNOBS; i++) cg_destroy(d[i]);
    cg_destroy(eng);
    return n;
}

int cg_plan_for_engine(Ctx *c, CgDesc g, const CgRule *rule, int64_t engine,
                       const int64_t (*knobs)[2], int nknobs, CgPlan *out)
{
    memset(out, 0, sizeof *out);
    if (nknobs < 0 || nknobs > CG_MAX_KNOBS) return 0;
    CgDesc eng = cg_create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cg_set(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
    cg_set(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &engine);
    EngineInfo e;
    if (cudnnBackendFinalize(eng) != CUDNN_STATUS_SUCCESS || !engine_notes(eng, &e) ||
        rule_drops(rule, &e)) {
        cg_destroy(eng);
        return 0;
    }
    CgDesc kd[CG_MAX_KNOBS];
    int nk = 0, ok = 1;
    for (; nk < nknobs && ok; nk++) {
        kd[nk] = cg_create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
        cudnnBackendKnobType_t type = (cudnnBackendKnobType_t)knobs[nk][0];
        ok = (int)type >= 0 && type < CUDNN_KNOB_TYPE_COUNTS &&
             cudnnBackendSetAttribute(kd[nk], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                      CUDNN_TYPE_KNOB_TYPE, 1, &type) == CUDNN_STATUS_SUCCESS &&
             cudnnBackendSetAttribute(kd[nk], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64,
                                      1, &knobs[nk][1]) == CUDNN_STATUS_SUCCESS &&
             cudnnBackendFinalize(kd[nk]) == CUDNN_STATUS_SUCCESS;
    }
    CgDesc cfg = cg_create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    ok = ok && cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &eng) ==
                   CUDNN_STATUS_SUCCESS;
    if (ok && nknobs > 0)
        ok = cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, nknobs, kd) ==
             CUDNN_STATUS_SUCCESS;
    ok = ok && cudnnBackendFinalize(cfg) == CUDNN_STATUS_SUCCESS;
    size_t ws = 0;
    CgDesc p = ok ? plan_for(c->cudnn, cfg, &ws, NULL) : NULL;
    for (int i = 0; i < nk; i++) cg_destroy(kd[i]);
    cg_destroy(cfg);
    cg_destroy(eng);
    if (!p) return 0;
    if (ws > rule->ws_limit) {
        cg_destroy(p);
        return 0;
    }
    out->plan = p;
    out->ws_bytes = ws;
    out->engine = engine;
    out->nknobs = nknobs;
    for (int i = 0; i < nknobs; i++) {
        out->knobs[i][0] = knobs[i][0];
        out->knobs[i][1] = knobs[i][1];
    }
    return 1;
}

int cg_first_plan(Ctx *c, CgDesc g, const CgRule *rule, CgPlan *out, CgCandidate *cand,
                  int max_cand, int *ncand)
{
    memset(out, 0, sizeof *out);
    *ncand = 0;
    CgDesc cfgs[CG_MAX_CFGS];
    int from_a = 0, ncfg = heur_all(g, cfgs, &from_a);
    const int cap = rule->max_candidates > 0 ? rule->max_candidates : 8;
    int64_t seen[CG_MAX_CFGS];
    int attempts = 0, found = 0;
    for (int i = 0; i < ncfg && !found; i++) {
        EngineInfo e;
        CgCandidate k;
        memset(&k, 0, sizeof k);
        k.fallback = i >= from_a;
        k.status = CUDNN_STATUS_NOT_SUPPORTED;
        k.engine = engine_info(cfgs[i], &e) ? e.index : -1;
        k.notes = e.notes;
        k.behavior = e.behavior;
        seen[i] = k.engine;
        for (int j = 0; j < from_a && i >= from_a && !k.skipped; j++)
            if (seen[j] == k.engine && k.engine >= 0) k.skipped = CG_SKIP_REPEAT;
        if (!k.skipped) k.skipped = rule_drops(rule, &e);
        if (!k.skipped && attempts >= cap) k.skipped = CG_SKIP_CAP;
        if (!k.skipped) {
            attempts++;
            CgDesc p = plan_for(c->cudnn, cfgs[i], &k.ws_bytes, &k.status);
            if (p && k.ws_bytes > rule->ws_limit) {
                k.skipped = CG_SKIP_WS;
                cg_destroy(p);
            } else if (p) {
                out->plan = p;
                out->ws_bytes = k.ws_bytes;
                out->engine = k.engine;
                out->nknobs = cfg_knobs(cfgs[i], out->knobs);
                out->tried = attempts;
                found = 1;
            }
        }
        if (k.skipped == CG_SKIP_REPEAT) continue; /* the fallback list repeats mode A */
        if (*ncand < max_cand) cand[(*ncand)++] = k;
    }
    for (int i = 0; i < ncfg; i++) cg_destroy(cfgs[i]);
    return found;
}

/* ---- running ---- */

CgDesc cg_variant_pack_try(const int64_t *uids, void *const *ptrs, int n, void *workspace,
                           cudnnStatus_t *st)
{
    CgDesc v = cg_create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    cudnnStatus_t s = cudnnBackendSetAttribute(v, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                               CUDNN_TYPE_INT64, n, uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(v, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                     n, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(v, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                     &workspace);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(v);
    if (st) *st = s;
    if (s != CUDNN_STATUS_SUCCESS) {
        cg_destroy(v);
        return NULL;
    }
    return v;
}

static CgDesc variant_pack(const int64_t *uids, void *const *ptrs, int n, void *ws)
{
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    CgDesc v = cg_variant_pack_try(uids, ptrs, n, ws, &st);
    CUDNN_CHECK(st);
    return v;
}

/* One run; per_call: the workspace as a convolution's (ctx_workspace_call). */
static cudnnStatus_t execute(Ctx *c, const CgPlan *p, const int64_t *uids, void *const *ptrs,
                             int n, int per_call)
{
    CT_ASSERT(p->plan != NULL, "cg_execute: no plan");
    size_t own = 0, len = 0;
    void *ws = !p->ws_bytes ? NULL
               : per_call   ? ctx_workspace_call(c, p->ws_bytes, &own, &len)
                            : ctx_workspace(c, p->ws_bytes);
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    CgDesc v = cg_variant_pack_try(uids, ptrs, n, ws, &st);
    if (v) {
        st = cudnnBackendExecute(c->cudnn, p->plan, v);
        cg_destroy(v);
    }
    ctx_workspace_done(c, ws, own);
    return st;
}

cudnnStatus_t cg_execute_try(Ctx *c, const CgPlan *p, const int64_t *uids, void *const *ptrs,
                             int n)
{
    return execute(c, p, uids, ptrs, n, 0);
}

void cg_execute(Ctx *c, const CgPlan *p, const int64_t *uids, void *const *ptrs, int n)
{
    CUDNN_CHECK(execute(c, p, uids, ptrs, n, 1));
}

/* Milliseconds per run of plan on v (one untimed run first), or -1 when
 * a run fails. */
static float time_plan(Ctx *c, CgDesc plan, CgDesc v, cudaEvent_t e0, cudaEvent_t e1)
{
    if (cudnnBackendExecute(c->cudnn, plan, v) != CUDNN_STATUS_SUCCESS) return -1.0f;
    CUDA_CHECK(cudaEventRecord(e0, c->stream));
    for (int i = 0; i < 3; i++)
        if (cudnnBackendExecute(c->cudnn, plan, v) != CUDNN_STATUS_SUCCESS) return -1.0f;
    CUDA_CHECK(cudaEventRecord(e1, c->stream));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms / 3.0f;
}

int cg_search(Ctx *c, CgDesc g, const CgRule *rule, const int64_t *uids, void *const *ptrs,
              int n, CgPlan *best)
{
    memset(best, 0, sizeof *best);
    CgDesc cfgs[CG_MAX_CFGS];
    int from_a = 0, ncfg = heur_all(g, cfgs, &from_a);
    const int max_cand = rule->max_candidates > 0 ? rule->max_candidates : 32;

    /* the plans worth timing: the heuristics' proposals, then (rule->
     * all_engines) every other engine with its default knobs */
    CgDesc plans[CG_MAX_CFGS];
    size_t ws[CG_MAX_CFGS];
    int64_t idx[CG_MAX_CFGS];
    int64_t knobs[CG_MAX_CFGS][CG_MAX_KNOBS][2];   /* each candidate's knob settings (~45 KiB) */
    int nknobs[CG_MAX_CFGS];
    int np = 0, first = 0, compiles = 0;
    size_t ws_max = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = first; i < ncfg && np < max_cand; i++) {
            EngineInfo e;
            if (!engine_info(cfgs[i], &e)) continue;
            const int drop = rule_drops(rule, &e);
            if (drop == CG_SKIP_NOTE) {
                best->dropped_notes++;
                best->notes_seen |= e.notes & rule->forbid_notes;
            }
            if (drop) continue;
            int seen = 0; /* the fallback list repeats engines mode A proposed */
            for (int j = 0; j < np && i >= from_a; j++) seen |= idx[j] == e.index;
            if (seen) continue;
            /* an engine that compiles at plan time costs seconds even
             * when it then fails to finalize: their attempts are capped */
            if (e.runtime_compile && ++compiles > 2 * max_cand) continue;
            size_t w = 0;
            CgDesc p = plan_for(c->cudnn, cfgs[i], &w, NULL);
            if (!p) continue;
            if (w > rule->ws_limit) {
                best->over_ws++;
                cg_destroy(p);
                continue;
            }
            plans[np] = p;
            ws[np] = w;
            idx[np] = e.index;
            nknobs[np] = cfg_knobs(cfgs[i], knobs[np]);
            if (w > ws_max) ws_max = w;
            np++;
        }
        if (pass == 1 || !rule->all_engines) break;
        first = ncfg;
        ncfg = other_engines(g, idx, np, cfgs, ncfg);
    }
    for (int i = 0; i < ncfg; i++) cg_destroy(cfgs[i]);

    /* time them on the caller's buffers */
    int win = -1;
    if (np > 0) {
        void *wbuf = ws_max ? mem_alloc(c, ws_max) : NULL;
        CgDesc v = variant_pack(uids, ptrs, n, wbuf);
        cudaEvent_t e0, e1;
        CUDA_CHECK(cudaEventCreate(&e0));
        CUDA_CHECK(cudaEventCreate(&e1));
        float best_ms = 0.0f;
        for (int i = 0; i < np; i++) {
            float ms = time_plan(c, plans[i], v, e0, e1);
            if (ms < 0.0f) best->run_failed++;
            LOG_T("cg_search: engine %lld, workspace %zu bytes: %.3f ms", (long long)idx[i],
                  ws[i], (double)ms);
            if (ms >= 0.0f && (win < 0 || ms < best_ms)) {
                win = i;
                best_ms = ms;
            }
        }
        /* a failed launch may leave an error: clear it before going on */
        CUDA_CHECK(cudaStreamSynchronize(c->stream));
        (void)cudaGetLastError();
        CUDA_CHECK(cudaEventDestroy(e0));
        CUDA_CHECK(cudaEventDestroy(e1));
        cg_destroy(v);
        if (wbuf) mem_free(c, wbuf, ws_max);
        if (win >= 0) {
            best->plan = plans[win];
            best->ws_bytes = ws[win];
            best->engine = idx[win];
            best->nknobs = nknobs[win];
            if (nknobs[win] > 0)
                memcpy(best->knobs, knobs[win], (size_t)nknobs[win] * sizeof best->knobs[0]);
            best->ms = best_ms;
        }
    }
    best->tried = np;
    for (int i = 0; i < np; i++)
        if (i != win) cg_destroy(plans[i]);
    return win >= 0;
}

void cg_plan_free(CgPlan *p)
{
    cg_destroy(p->plan);
    for (int i = p->nkeep - 1; i >= 0; i--) cg_destroy(p->keep[i]);
    memset(p, 0, sizeof *p);
}
#else
typedef int ct_cudnn_graph_unused_; /* ISO C forbids an empty translation unit */
#endif
