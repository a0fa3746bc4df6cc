/* gpu_transformer_ops.c — the CUDA LayerNorm, embedding, dropout and
 * attention against the CPU references, for f32, f16 and bf16 storage, at
 * BERT-base shapes (B 2, H 12, T 128, Dh 64; D 768; vocab 30522):
 *   - inputs quantized to the storage type first (both sides see the same
 *     values), outputs poisoned (NaN) so an unwritten element fails;
 *   - tolerances per dtype; relative-norm checks where a result is a long
 *     accumulation (attention outputs and gradients);
 *   - dropout masks bit-identical CPU vs GPU for the same (seed, offset),
 *     with aligned and unaligned buffers (the kernel's vector and scalar
 *     paths) and p above 255/256 (nothing kept), also inside the fused
 *     attention softmax, and the backward's rebuilt
 *     Pd equal to the forward's bit for bit;
 *   - determinism: two runs of the embedding and LayerNorm backwards give
 *     the same bits;
 *   - LayerNorm's kernel choices (row, vector, auto by row count);
 *   - bad token ids counted on the device (no crash, zero rows);
 *   - the tensor ops through autograd on a CUDA context against a CPU
 *     context (f32, and attention / embedding under bf16 / f16 autocast).
 * Shape letters: R rows, D width; V vocab, N positions; B, H, T, Dh.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "tensor_check.h"
#include "engine/autograd.h"
#include "engine/mem.h"
#include "ops/dropout_mask.h"
#include "ops/attention.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/ops.h"


static int same_bits(const void *a, const void *b, size_t n, DType dt)
{
    return memcmp(a, b, n * dtype_size(dt)) == 0;
}

static void *download_raw(const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    sync_all();
    CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

/* ---- LayerNorm ---- */

/* x, y, dy and dx one element past a 16-byte boundary (a view into a larger
 * buffer): the vector kernels must hand such rows to the row kernels, and
 * the results match the CPU either way. Forward, then dx alone. */
static void gpu_layernorm_misaligned(Ctx *g, DType dt, size_t R, size_t D)
{
    char name[160];
    const size_t n = R * D, es = dtype_size(dt);
    const float eps = 1e-5f;
    float *x = falloc(n), *gm = falloc(D), *bt = falloc(D), *y = falloc(n), *yref = falloc(n);
    float *mref = falloc(R), *iref = falloc(R), *dy = falloc(n), *dx = falloc(n), *dxref = falloc(n);
    check_fill(x, n, -2.0f, 2.0f);
    quantize(x, n, dt);
    check_fill(dy, n, -1.0f, 1.0f);
    quantize(dy, n, dt);
    check_fill(gm, D, 0.5f, 1.5f);
    check_fill(bt, D, -0.5f, 0.5f);
    layernorm_forward_cpu(yref, mref, iref, x, gm, bt, eps, R, D);
    layernorm_backward_cpu(dxref, NULL, NULL, dy, x, mref, iref, gm, R, D, 0, 0, 0);
    float *xp = falloc(n + 1), *dyp = falloc(n + 1); /* one element of padding in front */
    memcpy(xp + 1, x, n * sizeof(float));
    memcpy(dyp + 1, dy, n * sizeof(float));
    char *d_x = gpu_upload(xp, n + 1, dt), *d_dy = gpu_upload(dyp, n + 1, dt);
    char *d_y = gpu_alloc_poison(n + 1, dt), *d_dx = gpu_alloc_poison(n + 1, dt);
    float *d_g = (float *)gpu_upload(gm, D, DT_F32), *d_b = (float *)gpu_upload(bt, D, DT_F32);
    float *d_m = (float *)gpu_alloc_poison(R, DT_F32), *d_i = (float *)gpu_alloc_poison(R, DT_F32);
    sync_all();
    layernorm_forward_cuda(d_y + es, d_m, d_i, d_x + es, d_g, d_b, dt, eps, R, D, g->stream);
    layernorm_backward_cuda(d_dx + es, NULL, NULL, d_dy + es, d_x + es, d_m, d_i, d_g, dt, R, D,
                            0, 0, 0, g->stream);
    gpu_download(y, d_y + es, n, dt);
    gpu_download(dx, d_dx + es, n, dt);
    snprintf(name, sizeof name, "gpu.layernorm.misaligned rows %s (%zu,%zu): y", dtype_name(dt), R, D);
    check_close(name, y, yref, n, tol_atol(dt), tol_rtol(dt));
    snprintf(name, sizeof name, "gpu.layernorm.misaligned rows %s (%zu,%zu): dx", dtype_name(dt), R, D);
    check_close(name, dx, dxref, n, atol_for(dt, dxref, n), tol_rtol(dt));
    CUDA_CHECK(cudaFree(d_x)); CUDA_CHECK(cudaFree(d_dy)); CUDA_CHECK(cudaFree(d_y));
    CUDA_CHECK(cudaFree(d_dx)); CUDA_CHECK(cudaFree(d_g)); CUDA_CHECK(cudaFree(d_b));
    CUDA_CHECK(cudaFree(d_m)); CUDA_CHECK(cudaFree(d_i));
    free(x); free(gm); free(bt); free(y); free(yref); free(mref); free(iref); free(dy); free(dx);
    free(dxref); free(xp); free(dyp);
}

/* One LayerNorm call's inputs on the host and the device (R rows of D in
 * dt; gamma, beta, mean, invstd f32): x in [-2, 2), dy in [-1, 1), gamma in
 * [0.5, 1.5), beta in [-0.5, 0.5). */
typedef struct {
    float *x, *dy, *gm, *bt;
    void *d_x, *d_dy, *d_y;
    float *d_g, *d_b, *d_m, *d_i;
} LnFix;

static LnFix ln_fix(DType dt, size_t R, size_t D)
{
    const size_t n = R * D;
    LnFix f;
    f.x = falloc(n), f.dy = falloc(n), f.gm = falloc(D), f.bt = falloc(D);
    check_fill(f.x, n, -2.0f, 2.0f);
    check_fill(f.dy, n, -1.0f, 1.0f);
    check_fill(f.gm, D, 0.5f, 1.5f);
    check_fill(f.bt, D, -0.5f, 0.5f);
    f.d_x = gpu_upload(f.x, n, dt), f.d_dy = gpu_upload(f.dy, n, dt);
    f.d_y = gpu_alloc_poison(n, dt);
    f.d_g = (float *)gpu_upload(f.gm, D, DT_F32), f.d_b = (float *)gpu_upload(f.bt, D, DT_F32);
    f.d_m = (float *)gpu_alloc_poison(R, DT_F32), f.d_i = (float *)gpu_alloc_poison(R, DT_F32);
    return f;
}

static void ln_fix_free(LnFix *f)
{
    dfree(f->d_x); dfree(f->d_dy); dfree(f->d_y); dfree(f->d_g); dfree(f->d_b); dfree(f->d_m);
    dfree(f->d_i);
    free(f->x); free(f->dy); free(f->gm); free(f->bt);
}

/* CTRAIN_LN_KERNELS=split (layernorm_cuda_set_kernels(3)): its backward's
 * dx has the vector kernel's bits (the same row sums in the same order);
 * dgamma and dbeta are summed in another order, so close, not equal; with
 * and without accumulation into dx. */
static void gpu_layernorm_split_vs_vec(Ctx *g, DType dt, size_t R, size_t D)
{
    const size_t n = R * D, es = dtype_size(dt);
    LnFix f = ln_fix(dt, R, D);
    for (int accum = 0; accum <= 1; accum++) {
        void *dxh[2];
        float *dgh[2], *dbh[2];
        for (int k = 0; k < 2; k++) {   /* vec, split */
            layernorm_cuda_set_kernels(k ? 3 : 1);
            void *d_dx = accum ? gpu_upload(f.dy, n, dt) : gpu_alloc_poison(n, dt);
            float *d_dg = (float *)gpu_upload(f.gm, D, DT_F32);
            float *d_db = (float *)gpu_upload(f.bt, D, DT_F32);
            layernorm_forward_cuda(f.d_y, f.d_m, f.d_i, f.d_x, f.d_g, f.d_b, dt, 1e-5f, R, D,
                                   g->stream);
            layernorm_backward_cuda(d_dx, d_dg, d_db, f.d_dy, f.d_x, f.d_m, f.d_i, f.d_g, dt, R,
                                    D, accum, accum, accum, g->stream);
            sync_all();
            dxh[k] = malloc(n * es);
            dgh[k] = falloc(D);
            dbh[k] = falloc(D);
            CUDA_CHECK(cudaMemcpy(dxh[k], d_dx, n * es, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(dgh[k], d_dg, D * 4, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(dbh[k], d_db, D * 4, cudaMemcpyDeviceToHost));
            dfree(d_dx); dfree(d_dg); dfree(d_db);
        }
        layernorm_cuda_set_kernels(0);
        char name[128];
        snprintf(name, sizeof name, "gpu.layernorm.split.%s.R%zu.D%zu.accum%d.dx_bits_of_vec",
                 dtype_name(dt), R, D, accum);
        check_true(name, !memcmp(dxh[0], dxh[1], n * es), "split's dx differs from vec's");
        snprintf(name, sizeof name, "gpu.layernorm.split.%s.R%zu.D%zu.accum%d.dgamma",
                 dtype_name(dt), R, D, accum);
        check_close(name, dgh[1], dgh[0], D, 1e-3, 1e-4);
        /* the two add a chunk's rows in different orders: equal bits in
         * every column would mean split never ran */
        snprintf(name, sizeof name, "gpu.layernorm.split.%s.R%zu.D%zu.accum%d.split_ran",
                 dtype_name(dt), R, D, accum);
        check_true(name, memcmp(dgh[0], dgh[1], D * 4) != 0,
                   "dgamma has vec's bits in every column: did split run?");
        snprintf(name, sizeof name, "gpu.layernorm.split.%s.R%zu.D%zu.accum%d.dbeta",
                 dtype_name(dt), R, D, accum);
        check_close(name, dbh[1], dbh[0], D, 1e-3, 1e-4);
        for (int k = 0; k < 2; k++) {
            free(dxh[k]);
            free(dgh[k]);
            free(dbh[k]);
        }
    }
    ln_fix_free(&f);
}

/* CTRAIN_LN_KERNELS=auto (layernorm_cuda_set_kernels(2)) takes the vector
 * kernels from 16,384 rows a call and the row kernels below: its dx and
 * dgamma bits equal the row kernels' at 4,096 rows and the vector kernels'
 * at 16,384 (bf16, D 1024: the two sum dgamma in different orders, so the
 * bits tell which ran; checked that they do differ). */
static void gpu_layernorm_auto(Ctx *g)
{
    const size_t D = 1024, rows[2] = {4096, 16384};
    const DType dt = DT_BF16;
    for (int k = 0; k < 2; k++) {
        const size_t R = rows[k], n = R * D;
        LnFix f = ln_fix(dt, R, D);
        void *d_dx = gpu_alloc_poison(n, dt);
        float *d_dg = (float *)gpu_alloc_poison(D, DT_F32);
        uint16_t *dx[3];
        float *dg[3];
        for (int mode = 0; mode < 3; mode++) {   /* row, vec, auto */
            layernorm_cuda_set_kernels(mode);
            layernorm_forward_cuda(f.d_y, f.d_m, f.d_i, f.d_x, f.d_g, f.d_b, dt, 1e-5f, R, D,
                                   g->stream);
            layernorm_backward_cuda(d_dx, d_dg, NULL, f.d_dy, f.d_x, f.d_m, f.d_i, f.d_g, dt, R,
                                    D, 0, 0, 0, g->stream);
            sync_all();
            dx[mode] = malloc(n * 2);
            dg[mode] = malloc(D * sizeof(float));
            CUDA_CHECK(cudaMemcpy(dx[mode], d_dx, n * 2, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(dg[mode], d_dg, D * sizeof(float), cudaMemcpyDeviceToHost));
        }
        layernorm_cuda_set_kernels(0);
        const int want = R >= 16384 ? 1 : 0;
        char name[128];
        snprintf(name, sizeof name, "gpu.layernorm.auto R %zu: the %s kernels' bits", R,
                 want ? "vector" : "row");
        check_true(name, !memcmp(dx[2], dx[want], n * 2) && !memcmp(dg[2], dg[want], D * 4),
                   "auto's dx or dgamma differs from the %s kernels'", want ? "vector" : "row");
        snprintf(name, sizeof name, "gpu.layernorm.auto R %zu: row and vector dgamma differ", R);
        check_true(name, memcmp(dg[0], dg[1], D * 4) != 0,
                   "equal bits: the check above cannot tell the kernels apart");
        for (int mode = 0; mode < 3; mode++) { free(dx[mode]); free(dg[mode]); }
        dfree(d_dx);
        dfree(d_dg);
        ln_fix_free(&f);
    }
}

static void gpu_layernorm_case(Ctx *g, DType dt, size_t R, size_t D, int check_determinism)
{
    char name[192], tag[96];
    snprintf(tag, sizeof tag, "%s (%zu,%zu)", dtype_name(dt), R, D);
    const size_t n = R * D;
    const float eps = 1e-12f;
    float *x = falloc(n), *gm = falloc(D), *bt = falloc(D), *y = falloc(n), *yref = falloc(n);
    float *mean = falloc(R), *invstd = falloc(R), *mref = falloc(R), *iref = falloc(R);
    for (size_t r = 0; r < R; r++) {
        float shift = check_uniform(-5.0f, 5.0f); /* rows far from zero mean */
        for (size_t d = 0; d < D; d++) x[r * D + d] = shift + check_uniform(-3.0f, 3.0f);
    }
    quantize(x, n, dt);
    check_fill(gm, D, 0.5f, 1.5f);
    check_fill(bt, D, -0.5f, 0.5f);
    layernorm_forward_cpu(yref, mref, iref, x, gm, bt, eps, R, D);

    void *d_x = gpu_upload(x, n, dt), *d_y = gpu_alloc_poison(n, dt);
    float *d_g = (float *)gpu_upload(gm, D, DT_F32), *d_b = (float *)gpu_upload(bt, D, DT_F32);
    float *d_m = (float *)gpu_alloc_poison(R, DT_F32), *d_i = (float *)gpu_alloc_poison(R, DT_F32);
    sync_all();
    layernorm_forward_cuda(d_y, d_m, d_i, d_x, d_g, d_b, dt, eps, R, D, g->stream);
    gpu_download(y, d_y, n, dt);
    gpu_download(mean, d_m, R, DT_F32);
    gpu_download(invstd, d_i, R, DT_F32);
    snprintf(name, sizeof name, "gpu.layernorm.y %s", tag);
    check_close(name, y, yref, n, tol_atol(dt), tol_rtol(dt));
    snprintf(name, sizeof name, "gpu.layernorm.mean,invstd %s", tag);
    check_close(name, mean, mref, R, 1e-5, 1e-5);
    check_close(name, invstd, iref, R, 1e-6, 1e-5);

    /* backward, on the GPU's statistics (both sides differentiate the same ones) */
    float *dy = falloc(n), *dx0 = falloc(n), *dg0 = falloc(D), *db0 = falloc(D);
    float *dx = falloc(n), *dg = falloc(D), *db = falloc(D);
    float *dxref = falloc(n), *dgref = falloc(D), *dbref = falloc(D);
    check_fill(dy, n, -1.0f, 1.0f);
    quantize(dy, n, dt);
    check_fill(dx0, n, -0.5f, 0.5f);
    quantize(dx0, n, dt);
    check_fill(dg0, D, -1.0f, 1.0f);
    check_fill(db0, D, -1.0f, 1.0f);
    void *d_dy = gpu_upload(dy, n, dt);
    for (int accum = 0; accum <= 1; accum++) {
        memcpy(dxref, dx0, n * sizeof(float));
        memcpy(dgref, dg0, D * sizeof(float));
        memcpy(dbref, db0, D * sizeof(float));
        layernorm_backward_cpu(dxref, dgref, dbref, dy, x, mean, invstd, gm, R, D, accum, accum,
                               accum);
        void *d_dx = accum ? gpu_upload(dx0, n, dt) : gpu_alloc_poison(n, dt);
        float *d_dg = (float *)(accum ? gpu_upload(dg0, D, DT_F32) : gpu_alloc_poison(D, DT_F32));
        float *d_db = (float *)(accum ? gpu_upload(db0, D, DT_F32) : gpu_alloc_poison(D, DT_F32));
        sync_all();
        layernorm_backward_cuda(d_dx, d_dg, d_db, d_dy, d_x, d_m, d_i, d_g, dt, R, D, accum,
                                accum, accum, g->stream);
        gpu_download(dx, d_dx, n, dt);
        gpu_download(dg, d_dg, D, DT_F32);
        gpu_download(db, d_db, D, DT_F32);
        snprintf(name, sizeof name, "gpu.layernorm.dx %s accum %d", tag, accum);
        check_close(name, dx, dxref, n, atol_for(dt, dxref, n), tol_rtol(dt));
        snprintf(name, sizeof name, "gpu.layernorm.dgamma %s accum %d", tag, accum);
        check_close(name, dg, dgref, D, 1e-4 * sqrt((double)R / 256.0 + 1.0), 1e-4);
        snprintf(name, sizeof name, "gpu.layernorm.dbeta %s accum %d", tag, accum);
        check_close(name, db, dbref, D, 1e-4 * sqrt((double)R / 256.0 + 1.0), 1e-4);
        CUDA_CHECK(cudaFree(d_dx)); CUDA_CHECK(cudaFree(d_dg)); CUDA_CHECK(cudaFree(d_db));
    }
    /* dx only (no parameter gradients wanted), and parameters only */
    {
        void *d_dx = gpu_alloc_poison(n, dt);
        float *d_dg = (float *)gpu_alloc_poison(D, DT_F32);
        memcpy(dxref, dx0, n * sizeof(float));
        layernorm_backward_cpu(dxref, NULL, NULL, dy, x, mean, invstd, gm, R, D, 0, 0, 0);
        sync_all();
        layernorm_backward_cuda(d_dx, NULL, NULL, d_dy, d_x, d_m, d_i, d_g, dt, R, D, 0, 0, 0,
                                g->stream);
        layernorm_backward_cuda(NULL, d_dg, NULL, d_dy, d_x, d_m, d_i, d_g, dt, R, D, 0, 0, 0,
                                g->stream);
        gpu_download(dx, d_dx, n, dt);
        gpu_download(dg, d_dg, D, DT_F32);
        layernorm_backward_cpu(NULL, dgref, NULL, dy, x, mean, invstd, gm, R, D, 0, 0, 0);
        snprintf(name, sizeof name, "gpu.layernorm.dx alone, dgamma alone %s", tag);
        check_close(name, dx, dxref, n, atol_for(dt, dxref, n), tol_rtol(dt));
        check_close(name, dg, dgref, D, 1e-4 * sqrt((double)R / 256.0 + 1.0), 1e-4);
        CUDA_CHECK(cudaFree(d_dx)); CUDA_CHECK(cudaFree(d_dg));
    }
    if (check_determinism) {
        void *bits[2][3];
        for (int run = 0; run < 2; run++) {
            void *d_dx = gpu_alloc_poison(n, dt);
            float *d_dg = (float *)gpu_alloc_poison(D, DT_F32), *d_db = (float *)gpu_alloc_poison(D, DT_F32);
            sync_all();
            layernorm_backward_cuda(d_dx, d_dg, d_db, d_dy, d_x, d_m, d_i, d_g, dt, R, D, 0, 0, 0,
                                    g->stream);
            bits[run][0] = download_raw(d_dx, n * dtype_size(dt));
            bits[run][1] = download_raw(d_dg, D * sizeof(float));
            bits[run][2] = download_raw(d_db, D * sizeof(float));
            CUDA_CHECK(cudaFree(d_dx)); CUDA_CHECK(cudaFree(d_dg)); CUDA_CHECK(cudaFree(d_db));
        }
        snprintf(name, sizeof name, "gpu.layernorm.backward deterministic (two runs, same bits) %s", tag);
        check_true(name, same_bits(bits[0][0], bits[1][0], n, dt) &&
                   same_bits(bits[0][1], bits[1][1], D, DT_F32) &&
                   same_bits(bits[0][2], bits[1][2], D, DT_F32), "the runs differ");
        for (int run = 0; run < 2; run++)
            for (int k = 0; k < 3; k++) free(bits[run][k]);
    }
    CUDA_CHECK(cudaFree(d_x)); CUDA_CHECK(cudaFree(d_y)); CUDA_CHECK(cudaFree(d_g));
    CUDA_CHECK(cudaFree(d_b)); CUDA_CHECK(cudaFree(d_m)); CUDA_CHECK(cudaFree(d_i));
    CUDA_CHECK(cudaFree(d_dy));
    free(x); free(gm); free(bt); free(y); free(yref); free(mean); free(invstd); free(mref);
    free(iref); free(dy); free(dx0); free(dg0); free(db0); free(dx); free(dg); free(db);
    free(dxref); free(dgref); free(dbref);
}

/* ---- embedding ---- */

enum { IDS_TEXT = 0, IDS_POSITIONS, IDS_TOKEN_TYPES };

/* BERT-like ids for B sequences of T tokens. TEXT: [CLS] words [SEP] then
 * padding (id 0), sequence b shorter by 37 b tokens, words drawn from a
 * small range so they repeat; POSITIONS: t; TOKEN_TYPES: 0 then 1. Bad ids
 * (-1, V, V + 5) at three positions when nbad > 0. */
static void make_ids(int32_t *ids, size_t B, size_t T, size_t V, int kind, int nbad)
{
    for (size_t b = 0; b < B; b++) {
        size_t len = T > 37 * b + 2 ? T - 37 * b : 2;
        for (size_t t = 0; t < T; t++) {
            int32_t id;
            if (kind == IDS_POSITIONS) id = (int32_t)t;
            else if (kind == IDS_TOKEN_TYPES) id = t < T / 2 ? 0 : 1;
            else if (t == 0) id = 101;
            else if (t == len - 1) id = 102;
            else if (t >= len) id = 0;
            else id = 1000 + (int32_t)(check_uniform(0.0f, 1.0f) * 300.0f) % 300;
            ids[b * T + t] = id % (int32_t)V;
        }
    }
    if (nbad) {
        size_t N = B * T;
        ids[5 % N] = -1;
        ids[17 % N] = (int32_t)V;
        ids[33 % N] = (int32_t)V + 5;
    }
}

static void gpu_embedding_case(Ctx *g, DType dt, size_t V, size_t D, size_t B, size_t T,
                               int kind, int with_bad, int check_determinism)
{
    char name[192], tag[128];
    static const char *kinds[] = {"text", "positions", "token types"};
    snprintf(tag, sizeof tag, "%s V %zu D %zu N %zu (%s%s)", dtype_name(dt), V, D, B * T,
             kinds[kind], with_bad ? ", 3 bad ids" : "");
    const size_t N = B * T, VD = V * D, ND = N * D;
    int32_t *ids = (int32_t *)malloc(N * sizeof(int32_t)), *ids_ok = (int32_t *)malloc(N * sizeof(int32_t));
    make_ids(ids, B, T, V, kind, with_bad);
    float *table = falloc(VD), *out = falloc(ND), *ref = falloc(ND);
    check_fill(table, VD, -1.0f, 1.0f);
    size_t nbad_ref = 0;
    for (size_t n = 0; n < N; n++) {
        int ok = ids[n] >= 0 && (size_t)ids[n] < V;
        ids_ok[n] = ok ? ids[n] : 0;
        nbad_ref += !ok;
    }
    embedding_forward_cpu(ref, table, ids_ok, N, V, D);
    for (size_t n = 0; n < N; n++)
        if (ids[n] != ids_ok[n] || ids[n] < 0) memset(ref + n * D, 0, D * sizeof(float));
    quantize(ref, ND, dt);

    float *d_table = (float *)gpu_upload(table, VD, DT_F32);
    int32_t *d_ids = (int32_t *)gpu_upload_raw(ids, N * sizeof(int32_t));
    int32_t *d_nbad = (int32_t *)gpu_upload_raw((int32_t[]){0}, sizeof(int32_t));
    void *d_out = gpu_alloc_poison(ND, dt);
    sync_all();
    embedding_forward_cuda(d_out, dt, d_table, d_ids, d_nbad, N, V, D, g->stream);
    gpu_download(out, d_out, ND, dt);
    int32_t nbad = -1;
    CUDA_CHECK(cudaMemcpy(&nbad, d_nbad, sizeof nbad, cudaMemcpyDeviceToHost));
    snprintf(name, sizeof name, "gpu.embedding.out = table[ids] exactly %s", tag);
    check_close(name, out, ref, ND, 0.0, 0.0);
    snprintf(name, sizeof name, "gpu.embedding.nbad %s", tag);
    check_true(name, nbad == (int32_t)nbad_ref, "counted %d, expected %zu", nbad, nbad_ref);

    /* backward: bad positions contribute nothing (the reference zeroes their dout rows) */
    float *dout = falloc(ND), *dout_ok = falloc(ND), *dt0 = falloc(VD), *dtab = falloc(VD), *dref = falloc(VD);
    check_fill(dout, ND, -1.0f, 1.0f);
    quantize(dout, ND, dt);
    memcpy(dout_ok, dout, ND * sizeof(float));
    for (size_t n = 0; n < N; n++)
        if (ids[n] != ids_ok[n] || ids[n] < 0) memset(dout_ok + n * D, 0, D * sizeof(float));
    check_fill(dt0, VD, -1.0f, 1.0f);
    void *d_dout = gpu_upload(dout, ND, dt);
    void *first = NULL;
    for (int accum = 1; accum >= 0; accum--) {
        memcpy(dref, dt0, VD * sizeof(float));
        embedding_backward_cpu(dref, dout_ok, ids_ok, N, V, D, accum);
        float *d_dt = (float *)(accum ? gpu_upload(dt0, VD, DT_F32) : gpu_alloc_poison(VD, DT_F32));
        sync_all();
        embedding_backward_cuda(d_dt, d_dout, dt, d_ids, N, V, D, accum, g->stream);
        gpu_download(dtab, d_dt, VD, DT_F32);
        snprintf(name, sizeof name, "gpu.embedding.dtable %s accum %d", tag, accum);
        check_close(name, dtab, dref, VD, 2e-5 * sqrt((double)N / 256.0 + 1.0), 1e-5);
        if (!accum && check_determinism) first = download_raw(d_dt, VD * sizeof(float));
        CUDA_CHECK(cudaFree(d_dt));
    }
    if (check_determinism) {
        float *d_dt = (float *)gpu_alloc_poison(VD, DT_F32);
        sync_all();
        embedding_backward_cuda(d_dt, d_dout, dt, d_ids, N, V, D, 0, g->stream);
        void *second = download_raw(d_dt, VD * sizeof(float));
        snprintf(name, sizeof name, "gpu.embedding.backward deterministic (two runs, same bits) %s", tag);
        check_true(name, same_bits(first, second, VD, DT_F32), "the runs differ");
        free(second);
        CUDA_CHECK(cudaFree(d_dt));
    }
    /* compact form (data parallel's deferred lookup, train/parallel/dist.c): the k-th
     * used id and bit for bit the row the dense backward adds for it; then
     * the rows added back into a table */
    if (check_determinism && V > 16 && !with_bad) {
        float *d_rows = (float *)gpu_alloc_poison(ND, DT_F32);
        int32_t *d_ido = (int32_t *)gpu_upload_raw(ids, N * sizeof(int32_t));   /* overwritten */
        sync_all();
        embedding_backward_compact_cuda(d_rows, d_ido, d_dout, dt, d_ids, N, V, D, g->stream);
        float *rows = falloc(ND), *rref = falloc(ND), *tab2 = falloc(VD), *tref = falloc(VD);
        int32_t *ido = (int32_t *)malloc(N * sizeof(int32_t));
        int32_t *idref = (int32_t *)malloc(N * sizeof(int32_t));
        gpu_download(rows, d_rows, ND, DT_F32);
        CUDA_CHECK(cudaMemcpy(ido, d_ido, N * sizeof(int32_t), cudaMemcpyDeviceToHost));
        embedding_backward_compact_cpu(rref, idref, dout_ok, ids_ok, N, V, D);
        int same_ids = !memcmp(ido, idref, N * sizeof(int32_t)), same_rows = 1;
        const float *dense = (const float *)first;
        for (size_t k = 0; k < N && ido[k] >= 0; k++)
            same_rows &= !memcmp(rows + k * D, dense + (size_t)ido[k] * D, D * sizeof(float));
        snprintf(name, sizeof name, "gpu.embedding.compact ids as the CPU's %s", tag);
        check_true(name, same_ids, "the used-id lists differ");
        snprintf(name, sizeof name, "gpu.embedding.compact rows = the dense backward's, bitwise %s",
                 tag);
        check_true(name, same_rows, "a row differs");
        float *d_t2 = (float *)gpu_upload(dt0, VD, DT_F32);
        sync_all();
        embedding_rows_add_cuda(d_t2, d_rows, d_ido, N, V, D, 0.5f, g->stream);
        gpu_download(tab2, d_t2, VD, DT_F32);
        memcpy(tref, dt0, VD * sizeof(float));
        embedding_rows_add_cpu(tref, rows, ido, N, V, D, 0.5f);
        snprintf(name, sizeof name, "gpu.embedding.rows_add %s", tag);
        check_close(name, tab2, tref, VD, 1e-6, 1e-6);
        CUDA_CHECK(cudaFree(d_rows)); CUDA_CHECK(cudaFree(d_ido)); CUDA_CHECK(cudaFree(d_t2));
        free(rows); free(rref); free(tab2); free(tref); free(ido); free(idref);
    }
    free(first);
    CUDA_CHECK(cudaFree(d_table)); CUDA_CHECK(cudaFree(d_ids)); CUDA_CHECK(cudaFree(d_nbad));
    CUDA_CHECK(cudaFree(d_out)); CUDA_CHECK(cudaFree(d_dout));
    free(ids); free(ids_ok); free(table); free(out); free(ref); free(dout); free(dout_ok);
    free(dt0); free(dtab); free(dref);
}

/* ---- dropout ---- */

/* shift: x, y, dx and dy start that many elements into their buffers (1: not
 * aligned to a 4-element vector, so whole groups take the kernel's scalar
 * path) */
static void gpu_dropout_case(Ctx *g, DType dt, size_t n, float p, uint64_t seed, uint64_t offset,
                             size_t shift)
{
    char name[192], tag[128];
    snprintf(tag, sizeof tag, "%s n %zu p %g offset %llu shift %zu", dtype_name(dt), n,
             (double)p, (unsigned long long)offset, shift);
    const size_t es = dtype_size(dt), m = n + shift;
    float *xs = falloc(m), *y = falloc(n), *ref = falloc(n);
    float *x = xs + shift;
    for (size_t i = 0; i < n; i++) x[i] = check_uniform(0.5f, 1.5f) * (i & 1 ? -1.0f : 1.0f);
    quantize(x, n, dt);
    dropout_forward_cpu(ref, x, p, seed, offset, n);
    quantize(ref, n, dt);
    char *d_xs = gpu_upload(xs, m, dt), *d_ys = gpu_alloc_poison(m, dt);
    void *d_x = d_xs + shift * es, *d_y = d_ys + shift * es;
    sync_all();
    dropout_forward_cuda(d_y, d_x, dt, p, seed, offset, NULL, n, g->stream);
    gpu_download(y, d_y, n, dt);
    size_t mism = 0;
    for (size_t i = 0; i < n; i++) mism += (y[i] == 0.0f) != (ref[i] == 0.0f);
    snprintf(name, sizeof name, "gpu.dropout.mask identical to the CPU's %s", tag);
    check_true(name, mism == 0, "%zu of %zu mask bits differ", mism, n);
    snprintf(name, sizeof name, "gpu.dropout.y identical to the CPU's %s", tag);
    check_close(name, y, ref, n, 0.0, 0.0);

    float *dys = falloc(m), *dx0s = falloc(m), *dx = falloc(n);
    float *dy = dys + shift, *dx0 = dx0s + shift;
    check_fill(dy, n, -1.0f, 1.0f);
    quantize(dy, n, dt);
    check_fill(dx0, n, -1.0f, 1.0f);
    quantize(dx0, n, dt);
    char *d_dys = gpu_upload(dys, m, dt);
    for (int accum = 0; accum <= 1; accum++) {
        memcpy(ref, dx0, n * sizeof(float));
        dropout_backward_cpu(ref, dy, p, seed, offset, n, accum);
        quantize(ref, n, dt);
        char *d_dxs = accum ? gpu_upload(dx0s, m, dt) : gpu_alloc_poison(m, dt);
        sync_all();
        dropout_backward_cuda(d_dxs + shift * es, d_dys + shift * es, dt, p, seed, offset, NULL,
                              n, accum, g->stream);
        gpu_download(dx, d_dxs + shift * es, n, dt);
        snprintf(name, sizeof name, "gpu.dropout.dx identical to the CPU's %s accum %d", tag,
                 accum);
        check_close(name, dx, ref, n, 0.0, 0.0);
        CUDA_CHECK(cudaFree(d_dxs));
    }
    CUDA_CHECK(cudaFree(d_xs)); CUDA_CHECK(cudaFree(d_ys)); CUDA_CHECK(cudaFree(d_dys));
    free(xs); free(y); free(ref); free(dys); free(dx0s); free(dx);
}

/* ---- attention ---- */

/* The fused softmax kernel's dropout: Pd's mask is attention's mask at the
 * flat index (ops/dropout_mask.h), Pd = round(P s) where kept, and the
 * backward's rebuild (attention_dropout_cuda on P) gives Pd bit for bit. T
 * odd on purpose: rows do not start on an eight-element counter group. */
static void gpu_attn_softmax_case(Ctx *g, DType dt, size_t B, size_t H, size_t T, float p,
                                  uint64_t seed, uint64_t offset)
{
    char name[192], tag[128];
    snprintf(tag, sizeof tag, "%s (%zu,%zu,%zu) p %g", dtype_name(dt), B, H, T, (double)p);
    const size_t R = B * H * T, n = R * T;
    const float scale = 0.125f, s = drop_scale(p);
    float *S = falloc(n), *mask = falloc(B * T), *P = falloc(n), *Pd = falloc(n);
    check_fill(S, n, -20.0f, 20.0f);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) mask[b * T + t] = t + 9 * b >= T ? -10000.0f : 0.0f;
    float *d_S = (float *)gpu_upload(S, n, DT_F32), *d_mask = (float *)gpu_upload(mask, B * T, DT_F32);
    void *d_P = gpu_alloc_poison(n, dt), *d_Pd = gpu_alloc_poison(n, dt), *d_Pd2 = gpu_alloc_poison(n, dt);
    sync_all();
    attention_softmax_forward_cuda(d_P, d_Pd, d_S, d_mask, dt, scale, p, seed, offset, NULL, B,
                                   H, T, g->stream);
    attention_dropout_cuda(d_Pd2, d_P, dt, p, seed, offset, NULL, n, g->stream);
    gpu_download(P, d_P, n, dt);
    gpu_download(Pd, d_Pd, n, dt);
    size_t bad_mask = 0, bad_val = 0;
    float one[1];
    for (size_t i = 0; i < n; i++) {
        int keep = p == 0.0f || drop_keep_bit(seed, offset, i, drop_threshold(p));
        if (P[i] != 0.0f && (Pd[i] != 0.0f) != keep) bad_mask++;
        one[0] = keep ? P[i] * s : 0.0f;
        quantize(one, 1, dt);
        bad_val += one[0] != Pd[i];
    }
    snprintf(name, sizeof name, "gpu.attention.fused dropout mask = Philox mask %s", tag);
    check_true(name, bad_mask == 0 && bad_val == 0, "%zu mask bits and %zu values differ",
               bad_mask, bad_val);
    void *a = download_raw(d_Pd, n * dtype_size(dt)), *b = download_raw(d_Pd2, n * dtype_size(dt));
    snprintf(name, sizeof name, "gpu.attention.backward's Pd rebuild = forward's Pd, same bits %s", tag);
    check_true(name, same_bits(a, b, n, dt), "the rebuilt Pd differs");
    free(a); free(b);
    CUDA_CHECK(cudaFree(d_S)); CUDA_CHECK(cudaFree(d_mask)); CUDA_CHECK(cudaFree(d_P));
    CUDA_CHECK(cudaFree(d_Pd)); CUDA_CHECK(cudaFree(d_Pd2));
    free(S); free(mask); free(P); free(Pd);
}

static void gpu_attention_case(Ctx *g, DType dt, size_t B, size_t H, size_t T, size_t Dh,
                               float p, int with_mask)
{
    char name[192], tag[128];
    snprintf(tag, sizeof tag, "%s (%zu,%zu,%zu,%zu) p %g%s", dtype_name(dt), B, H, T, Dh,
             (double)p, with_mask ? " padded" : "");
    const size_t n = B * H * T * Dh, np = B * H * T * T;
    const uint64_t seed = g->seed, offset = 123457;
    float *q = falloc(n), *k = falloc(n), *v = falloc(n), *mask = falloc(B * T);
    float *out = falloc(n), *oref = falloc(n), *P = falloc(np), *Pref = falloc(np);
    check_fill(q, n, -2.0f, 2.0f);
    check_fill(k, n, -2.0f, 2.0f);
    check_fill(v, n, -1.0f, 1.0f);
    quantize(q, n, dt); quantize(k, n, dt); quantize(v, n, dt);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) mask[b * T + t] = t + 28 * b >= T ? -10000.0f : 0.0f;
    const float *m = with_mask ? mask : NULL;
    attention_forward_cpu(oref, Pref, q, k, v, m, p, seed, offset, B, H, T, Dh);

    void *d_q = gpu_upload(q, n, dt), *d_k = gpu_upload(k, n, dt), *d_v = gpu_upload(v, n, dt);
    float *d_mask = (float *)gpu_upload(mask, B * T, DT_F32);
    void *d_out = gpu_alloc_poison(n, dt), *d_P = gpu_alloc_poison(np, dt);
    sync_all();
    attention_forward_cuda(g, d_out, d_P, d_q, d_k, d_v, with_mask ? d_mask : NULL, dt, p, seed,
                           offset, B, H, T, Dh);
    gpu_download(out, d_out, n, dt);
    gpu_download(P, d_P, np, dt);
    snprintf(name, sizeof name, "gpu.attention.P %s", tag);
    check_close(name, P, Pref, np, atol_for(dt, Pref, np), tol_rtol(dt));
    snprintf(name, sizeof name, "gpu.attention.out (norm) %s", tag);
    check_rel_norm(name, out, oref, n, tol_norm(dt));
    snprintf(name, sizeof name, "gpu.attention.out %s", tag);
    check_close(name, out, oref, n, 8.0 * tol_rtol(dt) * maxabs(oref, n), 8.0 * tol_rtol(dt));

    /* backward on the GPU's P (both sides differentiate the same probabilities) */
    float *dout = falloc(n), *g0 = falloc(n), *got = falloc(n);
    float *ref[3] = {falloc(n), falloc(n), falloc(n)};
    check_fill(dout, n, -1.0f, 1.0f);
    quantize(dout, n, dt);
    check_fill(g0, n, -0.5f, 0.5f);
    quantize(g0, n, dt);
    attention_backward_cpu(ref[0], ref[1], ref[2], dout, q, k, v, P, p, seed, offset, B, H, T,
                           Dh, 0, 0, 0);
    void *d_dout = gpu_upload(dout, n, dt);
    const char *gn[3] = {"dq", "dk", "dv"};
    for (int accum = 0; accum <= 1; accum++) {
        void *d_g[3];
        for (int i = 0; i < 3; i++) d_g[i] = accum ? gpu_upload(g0, n, dt) : gpu_alloc_poison(n, dt);
        sync_all();
        attention_backward_cuda(g, d_g[0], d_g[1], d_g[2], d_dout, d_q, d_k, d_v, d_P, dt, p, seed,
                                offset, B, H, T, Dh, accum, accum, accum);
        for (int i = 0; i < 3; i++) {
            float *r = ref_accum(ref[i], g0, n, accum);
            gpu_download(got, d_g[i], n, dt);
            snprintf(name, sizeof name, "gpu.attention.%s (norm) %s accum %d", gn[i], tag, accum);
            check_rel_norm(name, got, r, n, tol_norm(dt));
            snprintf(name, sizeof name, "gpu.attention.%s %s accum %d", gn[i], tag, accum);
            check_close(name, got, r, n, 8.0 * tol_rtol(dt) * maxabs(r, n), 8.0 * tol_rtol(dt));
            ref_accum_free(r, ref[i]);
            CUDA_CHECK(cudaFree(d_g[i]));
        }
    }
    CUDA_CHECK(cudaFree(d_q)); CUDA_CHECK(cudaFree(d_k)); CUDA_CHECK(cudaFree(d_v));
    CUDA_CHECK(cudaFree(d_mask)); CUDA_CHECK(cudaFree(d_out)); CUDA_CHECK(cudaFree(d_P));
    CUDA_CHECK(cudaFree(d_dout));
    free(q); free(k); free(v); free(mask); free(out); free(oref); free(P); free(Pref);
    free(dout); free(g0); free(got);
    for (int i = 0; i < 3; i++) free(ref[i]);
}

/* ---- the tensor ops through autograd: CUDA context vs CPU context ---- */

typedef struct Pair {
    Tensor *c, *g; /* the same values on the CPU and the GPU context */
} Pair;

static Pair pair_f32(Ctx *cpu, Ctx *gpu, const float *h, int ndim, const int64_t *shape,
                     int requires_grad)
{
    Pair p = {tensor_from_f32(cpu, h, DT_F32, ndim, shape), tensor_from_f32(gpu, h, DT_F32, ndim, shape)};
    p.c->requires_grad = p.g->requires_grad = requires_grad;
    return p;
}

static void pair_release(Pair p) { tensor_release(p.c); tensor_release(p.g); }

static void test_ops_autograd(Ctx *cpu, Ctx *gpu)
{
    size_t base = gpu->mem.current;
    float w[4096], a[4096], b2[4096], c3[4096], gm[96], bt[96];
    /* layernorm [4, 8, 96] */
    {
        int64_t xs[3] = {4, 8, 96}, ds = 96;
        check_fill(a, 3072, -2, 2);
        check_fill(gm, 96, 0.5f, 1.5f);
        check_fill(bt, 96, -0.5f, 0.5f);
        check_fill(w, 3072, -1, 1);
        Pair x = pair_f32(cpu, gpu, a, 3, xs, 1), g = pair_f32(cpu, gpu, gm, 1, &ds, 1);
        Pair be = pair_f32(cpu, gpu, bt, 1, &ds, 1);
        Tensor *yc = op_layernorm(cpu, x.c, g.c, be.c, 1e-12f), *yg = op_layernorm(gpu, x.g, g.g, be.g, 1e-12f);
        cmp_tensors("gpu.op.layernorm.y", yg, yc, 1e-5, 1e-4, 0);
        backward_weighted(cpu, yc, w);
        backward_weighted(gpu, yg, w);
        cmp_tensors("gpu.op.layernorm.dx", x.g->grad, x.c->grad, 1e-5, 1e-4, 0);
        cmp_tensors("gpu.op.layernorm.dgamma", g.g->grad, g.c->grad, 1e-4, 1e-4, 0);
        cmp_tensors("gpu.op.layernorm.dbeta", be.g->grad, be.c->grad, 1e-4, 1e-4, 0);
        tensor_release(yc); tensor_release(yg);
        pair_release(x); pair_release(g); pair_release(be);
    }
    /* embedding [50, 24] with ids [3, 16], f32 and under f16 autocast */
    for (int ac = 0; ac <= 1; ac++) {
        int64_t ts[2] = {50, 24}, is[2] = {3, 16};
        int32_t ids[48];
        for (int i = 0; i < 48; i++) ids[i] = (int32_t)(check_uniform(0, 1) * 12.0f) % 12 * 4;
        check_fill(a, 1200, -1, 1);
        check_fill(w, 48 * 24, -1, 1);
        Pair t = pair_f32(cpu, gpu, a, 2, ts, 1);
        Tensor *ic = tensor_from_host(cpu, ids, DT_I32, 2, is), *ig = tensor_from_host(gpu, ids, DT_I32, 2, is);
        cpu->autocast = gpu->autocast = ac ? DT_F16 : DT_F32;
        Tensor *yc = op_embedding(cpu, t.c, ic), *yg = op_embedding(gpu, t.g, ig);
        cpu->autocast = gpu->autocast = DT_F32;
        check_true("gpu.op.embedding.out type", yg->dtype == (ac ? DT_F16 : DT_F32) &&
                   yc->dtype == yg->dtype, "got %s", dtype_name(yg->dtype));
        cmp_tensors(ac ? "gpu.op.embedding.out f16 autocast" : "gpu.op.embedding.out", yg, yc, 0, 0, 0);
        backward_weighted(cpu, yc, w);
        backward_weighted(gpu, yg, w);
        cmp_tensors(ac ? "gpu.op.embedding.dtable f16 autocast" : "gpu.op.embedding.dtable",
                    t.g->grad, t.c->grad, 1e-5, 1e-5, 0);
        tensor_release(yc); tensor_release(yg); tensor_release(ic); tensor_release(ig);
        pair_release(t);
    }
    /* a bad id on the GPU: counted in dev_flags[1], zero row, no crash */
    {
        int64_t ts[2] = {10, 8}, is = 4;
        int32_t ids[4] = {1, 10, 3, -2}, flag = -1;
        check_fill(a, 80, -1, 1);
        Tensor *t = tensor_from_f32(gpu, a, DT_F32, 2, ts), *i = tensor_from_host(gpu, ids, DT_I32, 1, &is);
        mem_zero(gpu, gpu->dev_flags, 16 * sizeof(int32_t));
        Tensor *y = op_embedding(gpu, t, i);
        float yh[32];
        tensor_to_f32(yh, y);
        mem_to_host(gpu, &flag, gpu->dev_flags + 1, sizeof flag);
        int zero = 1;
        for (int d = 0; d < 8; d++) zero &= yh[8 + d] == 0.0f && yh[24 + d] == 0.0f;
        check_true("gpu.op.embedding.bad ids counted in dev_flags[1]", flag == 2 && zero,
                   "flag %d, bad rows zero %d", flag, zero);
        mem_zero(gpu, gpu->dev_flags, 16 * sizeof(int32_t));
        tensor_release(y); tensor_release(t); tensor_release(i);
    }
    /* dropout: same seed and offset on both contexts -> same mask, same bits */
    {
        int64_t xs[2] = {33, 61};
        check_fill(a, 2013, -1, 1);
        check_fill(w, 2013, -1, 1);
        Pair x = pair_f32(cpu, gpu, a, 2, xs, 1);
        cpu->rng_offset = gpu->rng_offset = 777;
        Tensor *yc = op_dropout(cpu, x.c, 0.25f), *yg = op_dropout(gpu, x.g, 0.25f);
        check_true("gpu.op.dropout.offsets advance alike", cpu->rng_offset == gpu->rng_offset,
                   "cpu %llu gpu %llu", (unsigned long long)cpu->rng_offset,
                   (unsigned long long)gpu->rng_offset);
        cmp_tensors("gpu.op.dropout.y same bits as the CPU", yg, yc, 0, 0, 0);
        backward_weighted(cpu, yc, w);
        backward_weighted(gpu, yg, w);
        cmp_tensors("gpu.op.dropout.dx same bits as the CPU", x.g->grad, x.c->grad, 0, 0, 0);
        tensor_release(yc); tensor_release(yg);
        pair_release(x);
    }
    /* attention [2, 3, 20, 16], padded, p 0.1: f32, then bf16 autocast (vs the CPU's bf16),
     * on the fused kernels, whose dropout mask is the CPU reference's (cuDNN's path, the
     * default, draws its own: tests/gpu_attention_cudnn) */
    setenv("CTRAIN_ATTN", "flash", 1);
    for (int ac = 0; ac <= 1; ac++) {
        int64_t qs[4] = {2, 3, 20, 16}, ms[2] = {2, 20};
        const size_t n = 1920;
        float mask[40];
        check_fill(a, n, -2, 2);
        check_fill(b2, n, -2, 2);
        check_fill(c3, n, -1, 1);
        check_fill(w, n, -1, 1);
        for (int i = 0; i < 40; i++) mask[i] = i >= 20 && i % 20 >= 13 ? -10000.0f : 0.0f;
        Pair q = pair_f32(cpu, gpu, a, 4, qs, 1), k = pair_f32(cpu, gpu, b2, 4, qs, 1);
        Pair v = pair_f32(cpu, gpu, c3, 4, qs, 1), m = pair_f32(cpu, gpu, mask, 2, ms, 0);
        cpu->autocast = gpu->autocast = ac ? DT_BF16 : DT_F32;
        cpu->rng_offset = gpu->rng_offset = 4242;
        Tensor *yc = op_attention(cpu, q.c, k.c, v.c, m.c, 0.1f);
        Tensor *yg = op_attention(gpu, q.g, k.g, v.g, m.g, 0.1f);
        cpu->autocast = gpu->autocast = DT_F32;
        double nt = ac ? 2e-2 : 0.0;
        cmp_tensors(ac ? "gpu.op.attention.out bf16 autocast" : "gpu.op.attention.out", yg, yc,
                    1e-5, 1e-4, nt);
        backward_weighted(cpu, yc, w);
        backward_weighted(gpu, yg, w);
        cmp_tensors(ac ? "gpu.op.attention.dq bf16 autocast" : "gpu.op.attention.dq",
                    q.g->grad, q.c->grad, 1e-5, 1e-4, nt);
        cmp_tensors(ac ? "gpu.op.attention.dk bf16 autocast" : "gpu.op.attention.dk",
                    k.g->grad, k.c->grad, 1e-5, 1e-4, nt);
        cmp_tensors(ac ? "gpu.op.attention.dv bf16 autocast" : "gpu.op.attention.dv",
                    v.g->grad, v.c->grad, 1e-5, 1e-4, nt);
        tensor_release(yc); tensor_release(yg);
        pair_release(q); pair_release(k); pair_release(v); pair_release(m);
    }
    unsetenv("CTRAIN_ATTN");
    ctx_sync(gpu);
    check_true("gpu.op.all memory returned after backward", gpu->mem.current == base,
               "%zu bytes held (base %zu)", gpu->mem.current, base);
}

int main(void)
{
    gpu_require();
    check_seed(5);
    Ctx gpu, cpu;
    ctx_init(&gpu, DEV_CUDA, 0, 0x5eedULL);
    ctx_init(&cpu, DEV_CPU, 0, 0x5eedULL);
    for (int t = 0; t < 3; t++) {
        DType dt = gpu_float_types[t];
        /* BERT-base: B 2, T 128 -> R 256 rows of D 768 */
        gpu_layernorm_case(&gpu, dt, 256, 768, 1);
        gpu_layernorm_case(&gpu, dt, 37, 100, 0);
        gpu_embedding_case(&gpu, dt, 30522, 768, 2, 128, IDS_TEXT, 0, 1);
        gpu_dropout_case(&gpu, dt, 2 * 12 * 128 * 128 + 3, 0.1f, gpu.seed, (1ull << 33) + 5, 0);
        gpu_dropout_case(&gpu, dt, 4099, 0.1f, gpu.seed, 77, 1);   /* the scalar path */
        gpu_dropout_case(&gpu, dt, 1000, 0.999f, 5, 3, 0);         /* thr 256: none kept */
        gpu_attn_softmax_case(&gpu, dt, 2, 3, 127, 0.1f, gpu.seed, 99);
        gpu_attention_case(&gpu, dt, 2, 12, 128, 64, 0.0f, 1);
        gpu_attention_case(&gpu, dt, 2, 12, 128, 64, 0.1f, 1);
    }
    /* wide rows (partials in global memory), long batches, odd shapes */
    gpu_layernorm_case(&gpu, DT_F32, 64, 8192, 1);
    gpu_layernorm_case(&gpu, DT_F16, 4096, 1024, 1);
    /* LayerNorm's vector kernels (layernorm_cuda_set_kernels(1)). Vectors a
     * lane holds, NV = ceil(D / V / 32) rounded up to 1, 2, 4 (8 forward);
     * V = 8 in f16/bf16, 4 in f32. Every type at BERT-base and BERT-large
     * widths (16-bit: NV 4 both ways; f32: forward NV 8, backward on the row
     * kernels, past its budget of 4) and a row count no chunk divides; f32
     * D 256 (NV 2) and D 512 (NV 4) backward; a lane group past the row's
     * end (f32 D 100: 25 vectors; f32 D 132 and bf16 D 264: 33 vectors,
     * NV 2); one vector a row; bf16 D 2048 (forward NV 8, backward row
     * kernels); widths that are no multiple of V (row kernels); and rows
     * that are not 16-byte aligned (row kernels). */
    for (int mode = 1; mode <= 3; mode += 2) {
        /* mode 3, the split backward: the same cases (split takes what the
         * vector backward takes, D / V <= 128; wider rows and misaligned
         * ones run the row kernels), then its dx against the vector
         * kernel's bits */
        layernorm_cuda_set_kernels(mode);
        for (int t = 0; t < 3; t++) {
            gpu_layernorm_case(&gpu, gpu_float_types[t], 256, 768, 1);
            gpu_layernorm_case(&gpu, gpu_float_types[t], 301, 1024, 1);
            gpu_layernorm_case(&gpu, gpu_float_types[t], 37, 100, 0);
        }
        gpu_layernorm_case(&gpu, DT_F32, 300, 256, 1);
        gpu_layernorm_case(&gpu, DT_F32, 77, 512, 1);
        gpu_layernorm_case(&gpu, DT_F32, 45, 132, 0);
        gpu_layernorm_case(&gpu, DT_BF16, 45, 264, 0);
        gpu_layernorm_case(&gpu, DT_BF16, 4096, 1024, 1);
        gpu_layernorm_case(&gpu, DT_BF16, 9, 8, 0);
        gpu_layernorm_case(&gpu, DT_F32, 5, 4, 0);
        gpu_layernorm_case(&gpu, DT_BF16, 130, 2048, 1);
        gpu_layernorm_case(&gpu, DT_BF16, 33, 100, 0);
        gpu_layernorm_case(&gpu, DT_F32, 64, 8192, 0);
        gpu_layernorm_misaligned(&gpu, DT_BF16, 64, 1024);
        gpu_layernorm_misaligned(&gpu, DT_F32, 64, 512);
    }
    gpu_layernorm_split_vs_vec(&gpu, DT_BF16, 4096, 1024);
    gpu_layernorm_split_vs_vec(&gpu, DT_F16, 301, 768);
    gpu_layernorm_split_vs_vec(&gpu, DT_F32, 300, 256);
    gpu_layernorm_split_vs_vec(&gpu, DT_F32, 640, 128);   /* one vector a lane */
    layernorm_cuda_set_kernels(0);
    gpu_layernorm_auto(&gpu);
    gpu_embedding_case(&gpu, DT_F16, 30522, 768, 32, 512, IDS_TEXT, 1, 1);
    gpu_embedding_case(&gpu, DT_BF16, 512, 768, 32, 512, IDS_POSITIONS, 0, 1);
    gpu_embedding_case(&gpu, DT_F32, 2, 768, 32, 512, IDS_TOKEN_TYPES, 0, 1);
    /* the few-rows path (V <= 16): bad ids, a last chunk of 7 positions, its edge */
    gpu_embedding_case(&gpu, DT_BF16, 2, 1024, 3, 45, IDS_TOKEN_TYPES, 1, 1);
    gpu_embedding_case(&gpu, DT_F16, 16, 100, 4, 77, IDS_TEXT, 0, 1);
    gpu_embedding_case(&gpu, DT_F32, 17, 64, 4, 77, IDS_TEXT, 1, 1);
    gpu_dropout_case(&gpu, DT_F32, 1001, 0.5f, 7, 0, 0);
    gpu_attention_case(&gpu, DT_F32, 3, 2, 77, 32, 0.2f, 1);
    gpu_attention_case(&gpu, DT_BF16, 3, 2, 77, 32, 0.2f, 1);
    gpu_attention_case(&gpu, DT_F16, 2, 4, 128, 64, 0.1f, 0);
    test_ops_autograd(&cpu, &gpu);
    ctx_free(&gpu);
    ctx_free(&cpu);
    return check_summary();
}
