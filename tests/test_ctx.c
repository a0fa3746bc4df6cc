/* test_ctx.c — the context's cache registry (engine/ctx.h): an op family's
 * cache is found again under its kind, a cache its owner released early is
 * skipped, and ctx_free releases the rest the last registered first, each
 * exactly once. On a CPU context, so CI runs it; the CUDA caches (matmul,
 * convolution, batch-norm plans) use the same two calls. */
#include <string.h>
#include "check.h"
#include "engine/ctx.h"

/* What the releases saw, in order. */
static char released[8];
static int n_released;

static void release_a(Ctx *c, void *obj) { (void)c; released[n_released++] = *(char *)obj; }
static void release_b(Ctx *c, void *obj) { (void)c; released[n_released++] = *(char *)obj; }
static void release_c(Ctx *c, void *obj) { (void)c; released[n_released++] = *(char *)obj; }

static const CtxCacheKind kind_a = {"test cache a", release_a};
static const CtxCacheKind kind_b = {"test cache b", release_b};
static const CtxCacheKind kind_c = {"test cache c", release_c};

static void test_registry(void)
{
    static char a = 'a', b = 'b', b2 = 'B', c3 = 'c';
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    check_true("ctx.cache.none_yet", ctx_cache_get(&c, &kind_a) == NULL, "a cache before any set");
    ctx_cache_set(&c, &kind_a, &a);
    ctx_cache_set(&c, &kind_b, &b);
    ctx_cache_set(&c, &kind_c, &c3);
    check_true("ctx.cache.get", ctx_cache_get(&c, &kind_a) == &a &&
                                    ctx_cache_get(&c, &kind_b) == &b &&
                                    ctx_cache_get(&c, &kind_c) == &c3,
               "a cache not found under its kind");
    /* released early by its owner (conv2d_cuda_release), then made again:
     * it keeps its first place in the release order */
    ctx_cache_set(&c, &kind_b, NULL);
    check_true("ctx.cache.cleared", ctx_cache_get(&c, &kind_b) == NULL, "b still registered");
    ctx_cache_set(&c, &kind_b, &b2);
    /* released early and left so: ctx_free must skip it */
    ctx_cache_set(&c, &kind_a, NULL);
    check_true("ctx.cache.count", c.n_caches == 3, "%d kinds registered, want 3", c.n_caches);
    n_released = 0;
    ctx_free(&c);
    released[n_released] = 0;
    check_true("ctx.cache.release_order", n_released == 2 && strcmp(released, "cB") == 0,
               "released \"%s\", want \"cB\" (last registered first, a skipped)", released);
    check_true("ctx.cache.emptied", c.n_caches == 0, "%d kinds left after ctx_free", c.n_caches);
}

int main(void)
{
    test_registry();
    return check_summary();
}
