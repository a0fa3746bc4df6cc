/* feed_stage.c — double-buffered pinned staging and the feeds' shared bits
 * (see feed_stage.h). */
#include "feed_stage.h"

#include <string.h>
#include "engine/error.h"
#include "engine/mem.h"

void feed_stage_init(FeedStage *s, Ctx *c, int n, const size_t *bytes)
{
    CT_ASSERT(n >= 0 && n <= FEED_STAGE_MAX, "feed_stage_init: %d buffers a set (at most %d)", n,
              FEED_STAGE_MAX);
    memset(s, 0, sizeof *s);
    s->n = n;
    s->cuda = c->device == DEV_CUDA;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < n; i++) s->buf[k][i] = mem_host_pinned(c, bytes[i]);
#ifdef CTRAIN_CUDA
        if (s->cuda) CUDA_CHECK(cudaEventCreateWithFlags(&s->done[k], cudaEventDisableTiming));
#endif
    }
}

int feed_stage_flip(FeedStage *s) { return s->k ^= 1; }

/* An event not yet recorded counts as complete: the first use of a set
 * does not wait. */
void feed_stage_wait(FeedStage *s, int k)
{
#ifdef CTRAIN_CUDA
    if (s->cuda) CUDA_CHECK(cudaEventSynchronize(s->done[k]));
#else
    (void)s; (void)k;
#endif
}

int feed_stage_next(FeedStage *s)
{
    int k = feed_stage_flip(s);
    feed_stage_wait(s, k);
    return k;
}

void feed_stage_copy(Ctx *c, Tensor *const *dst, const void *const *src, const size_t *bytes,
                     int n)
{
    for (int i = 0; i < n; i++)
        mem_to_device_async(c, dst[i]->data, src[i],
                            bytes ? bytes[i] : dst[i]->numel * dtype_size(dst[i]->dtype));
}

void feed_stage_send_from(FeedStage *s, Ctx *c, int k, Tensor *const *dst,
                          const void *const *src, const size_t *bytes, int n)
{
    feed_stage_copy(c, dst, src, bytes, n);
#ifdef CTRAIN_CUDA
    if (s->cuda) CUDA_CHECK(cudaEventRecord(s->done[k], c->stream));
#else
    (void)s; (void)k;
#endif
}

void feed_stage_send(FeedStage *s, Ctx *c, int k, Tensor *const *dst, const size_t *bytes,
                     int n)
{
    CT_ASSERT(n <= s->n, "feed_stage_send: %d copies from a set of %d buffers", n, s->n);
    feed_stage_send_from(s, c, k, dst, (const void *const *)s->buf[k], bytes, n);
}

void feed_stage_free(FeedStage *s, Ctx *c)
{
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < s->n; i++) mem_host_pinned_free(c, s->buf[k][i]);
#ifdef CTRAIN_CUDA
        if (s->cuda) CUDA_CHECK(cudaEventDestroy(s->done[k]));
#endif
    }
    memset(s, 0, sizeof *s);
}

int feed_world(const Ctx *c) { return c->dp_world > 1 ? c->dp_world : 1; }
