/* test_sync_bn.c — synchronized batch norm (--sync-bn) on the CPU backend:
 * two "ranks" (threads, each with its own context) each normalise half of a
 * batch, with an all-reduce that averages over the two through shared
 * memory. Their outputs, input gradients, running statistics and the sum of
 * their gamma / beta gradients must equal one context normalising the whole
 * batch (forward: global statistics; backward: the global means of g and
 * g xhat). With and without the fused ReLU and residual; and a one-rank
 * "group" takes the sync path and still equals plain batch norm.
 * Shape letters: M rows per rank, C channels.
 */
#include <pthread.h>
#include <string.h>
#include "check.h"
#include "engine/autograd.h"
#include "engine/error.h"
#include "ops/batchnorm.h"
#include "ops/ops.h"

enum { M = 24, C = 6, RANKS = 2 };

/* The all-reduce of the test group: average over RANKS threads. */
typedef struct Group {
    pthread_barrier_t bar;
    float *slot[RANKS];
    int ranks;
} Group;

static void group_allreduce(Ctx *c, float *buf, size_t n, void *user)
{
    Group *g = (Group *)user;
    if (g->ranks == 1) return;
    float tmp[4 * C];
    CT_ASSERT(n <= 4 * C, "test all-reduce: %zu floats", n);
    g->slot[c->dp_rank] = buf;
    pthread_barrier_wait(&g->bar);
    for (size_t i = 0; i < n; i++) {
        float s = 0;
        for (int r = 0; r < g->ranks; r++) s += g->slot[r][i];
        tmp[i] = s / (float)g->ranks;
    }
    pthread_barrier_wait(&g->bar);   /* everyone has read before anyone writes */
    memcpy(buf, tmp, n * sizeof(float));
    pthread_barrier_wait(&g->bar);
}

typedef struct Case {
    int relu, residual;
    const float *x, *z, *dy, *gamma, *beta;   /* full batch: [RANKS M, C] and [C] */
} Case;

typedef struct Out {
    float y[RANKS * M * C], dx[RANKS * M * C], dz[RANKS * M * C];
    float dgamma[C], dbeta[C], rmean[C], rvar[C];
} Out;

/* Batch norm of rows [row0, row0 + rows) on context c; results into o at
 * those rows (gamma / beta gradients added into o). */
static void run(Ctx *c, const Case *k, int row0, int rows, Out *o, float *rmean, float *rvar)
{
    size_t off = (size_t)row0 * C, n = (size_t)rows * C;
    Tensor *x = tensor_from_f32(c, k->x + off, DT_F32, 2, (int64_t[]){rows, C});
    Tensor *z = k->residual ? tensor_from_f32(c, k->z + off, DT_F32, 2, (int64_t[]){rows, C})
                            : NULL;
    Tensor *g = tensor_from_f32(c, k->gamma, DT_F32, 1, (int64_t[]){C});
    Tensor *b = tensor_from_f32(c, k->beta, DT_F32, 1, (int64_t[]){C});
    Tensor *rm = tensor_from_f32(c, rmean, DT_F32, 1, (int64_t[]){C});
    Tensor *rv = tensor_from_f32(c, rvar, DT_F32, 1, (int64_t[]){C});
    x->requires_grad = g->requires_grad = b->requires_grad = 1;
    if (z) z->requires_grad = 1;
    Tensor *y = op_batchnorm(c, x, g, b, rm, rv, NULL, 1, 0.1f, 1e-5f, z, k->relu);
    memcpy(o->y + off, y->data, n * sizeof(float));
    y->grad = tensor_from_f32(c, k->dy + off, DT_F32, 2, (int64_t[]){rows, C});
    ad_backward_from(c, y);
    memcpy(o->dx + off, x->grad->data, n * sizeof(float));
    if (z) memcpy(o->dz + off, z->grad->data, n * sizeof(float));
    for (int i = 0; i < C; i++) {
        o->dgamma[i] += ((float *)g->grad->data)[i];
        o->dbeta[i] += ((float *)b->grad->data)[i];
    }
    memcpy(rmean, rm->data, C * sizeof(float));
    memcpy(rvar, rv->data, C * sizeof(float));
    Tensor *all[] = {y, x, z, g, b, rm, rv};
    for (int i = 0; i < 7; i++) tensor_release(all[i]);
}

typedef struct Rank {
    int rank;
    Group *group;
    const Case *k;
    Out *o;
    float rmean[C], rvar[C];
    pthread_mutex_t *mu;
} Rank;

static void *rank_main(void *arg)
{
    Rank *r = (Rank *)arg;
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    c.dp_rank = r->rank;
    c.dp_world = r->group->ranks;
    c.bn_allreduce = group_allreduce;
    c.bn_allreduce_user = r->group;
    Out mine;
    memset(&mine, 0, sizeof mine);
    int rows = RANKS * M / r->group->ranks;
    run(&c, r->k, r->rank * rows, rows, &mine, r->rmean, r->rvar);
    pthread_mutex_lock(r->mu);   /* gather this rank's rows and its parameter gradients */
    size_t off = (size_t)r->rank * rows * C, n = (size_t)rows * C;
    memcpy(r->o->y + off, mine.y + off, n * sizeof(float));
    memcpy(r->o->dx + off, mine.dx + off, n * sizeof(float));
    memcpy(r->o->dz + off, mine.dz + off, n * sizeof(float));
    for (int i = 0; i < C; i++) {
        r->o->dgamma[i] += mine.dgamma[i];
        r->o->dbeta[i] += mine.dbeta[i];
    }
    pthread_mutex_unlock(r->mu);
    ctx_free(&c);
    return NULL;
}

static void compare(const char *what, const Case *k, int ranks)
{
    float rm0[C], rv0[C];
    for (int i = 0; i < C; i++) { rm0[i] = 0.1f * (float)i; rv0[i] = 1.0f + 0.2f * (float)i; }
    /* the reference: one context, the whole batch, no all-reduce */
    Out ref;
    memset(&ref, 0, sizeof ref);
    float rmean[C], rvar[C];
    memcpy(rmean, rm0, sizeof rm0);
    memcpy(rvar, rv0, sizeof rv0);
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    run(&c, k, 0, RANKS * M, &ref, rmean, rvar);
    ctx_free(&c);
    memcpy(ref.rmean, rmean, sizeof rmean);
    memcpy(ref.rvar, rvar, sizeof rvar);

    Group g;
    g.ranks = ranks;
    pthread_barrier_init(&g.bar, NULL, (unsigned)ranks);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    Out got;
    memset(&got, 0, sizeof got);
    Rank r[RANKS];
    pthread_t th[RANKS];
    for (int i = 0; i < ranks; i++) {
        r[i] = (Rank){i, &g, k, &got, {0}, {0}, &mu};
        memcpy(r[i].rmean, rm0, sizeof rm0);
        memcpy(r[i].rvar, rv0, sizeof rv0);
        pthread_create(&th[i], NULL, rank_main, &r[i]);
    }
    for (int i = 0; i < ranks; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&g.bar);

    char name[128];
    size_t n = (size_t)RANKS * M * C;
#define CMP(field, len, atol, rtol)                                                  \
    snprintf(name, sizeof name, "%s (%d rank%s): " #field, what, ranks, ranks == 1 ? "" : "s"); \
    check_close(name, got.field, ref.field, len, atol, rtol)
    CMP(y, n, 1e-5, 1e-4);
    CMP(dx, n, 1e-5, 1e-4);
    if (k->residual) { CMP(dz, n, 1e-6, 1e-5); }
    CMP(dgamma, C, 1e-4, 1e-4);
    CMP(dbeta, C, 1e-4, 1e-4);
    for (int i = 0; i < ranks; i++) {   /* every rank holds the same running statistics */
        memcpy(got.rmean, r[i].rmean, sizeof got.rmean);
        memcpy(got.rvar, r[i].rvar, sizeof got.rvar);
        CMP(rmean, C, 1e-6, 1e-5);
        CMP(rvar, C, 1e-6, 1e-5);
    }
#undef CMP
}

int main(void)
{
    check_seed(31);
    static float x[RANKS * M * C], z[RANKS * M * C], dy[RANKS * M * C], gamma[C], beta[C];
    /* channels with a mean far from 0: where E[x^2] - mean^2 would lose digits */
    for (int i = 0; i < RANKS * M * C; i++) x[i] = check_uniform(-1, 1) * 0.5f + (float)(i % C) * 3.0f;
    for (int i = 0; i < RANKS * M; i++)   /* the two halves differ: rank statistics differ */
        for (int j = 0; j < C; j++) x[i * C + j] += i < M ? 0.7f : -0.4f;
    check_fill(z, RANKS * M * C, -1, 1);
    check_fill(dy, RANKS * M * C, -1, 1);
    check_fill(gamma, C, 0.5f, 1.5f);
    check_fill(beta, C, -0.5f, 0.5f);
    Case plain = {0, 0, x, z, dy, gamma, beta};
    Case fused = {1, 1, x, z, dy, gamma, beta};
    compare("sync bn", &plain, RANKS);
    compare("sync bn + residual + relu", &fused, RANKS);
    compare("sync bn", &plain, 1);
    compare("sync bn + residual + relu", &fused, 1);
    return check_summary();
}
