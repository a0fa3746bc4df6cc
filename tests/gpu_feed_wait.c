/* gpu_feed_wait.c — the GPU's stall for the data (train/feed/feed_gpu_wait.h)
 * on a real stream.
 *
 *   stall of a batch = GPU time between an event at next()'s entry and one
 *                      at its return, both on the context's stream
 *
 * Cases:
 *   - an idle stream and a host 50 ms late between the two events (a batch
 *     that was not ready): the stall is the host's lateness, 40..500 ms;
 *   - a stream busy with 10 GB of memsets (a few ms) queued before next()
 *     and nothing late (the batch was ready: the host got ahead of the
 *     GPU): the stall is ~0 (< 2 ms), though the host saw the GPU busy;
 *   - 3 rings' worth of pairs, each 2 ms late, read only at the end: none
 *     is lost, the stalls add up to 24 x 2 ms;
 *   - 3 rings' worth of pairs behind the same memsets, so that none
 *     completes before the ring is full: it waits on its oldest pair, and
 *     every pair is read.
 * The rates built on it: tests/test_feed_wait.c (CPU).
 */
#include <stdio.h>
#include <time.h>

#include "check.h"
#include "gpu_util.h"
#include "train/feed/feed_gpu_wait.h"

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(void)
{
    gpu_require();
    Ctx c;
    ctx_init(&c, DEV_CUDA, 0, 1);
    FeedGpuWait w;
    feed_gpu_wait_init(&w, &c);
    check_true("feed_gpu_wait: on for a CUDA context", w.on == 1, "on %d", w.on);
    check_true("feed_gpu_wait: nothing measured yet", feed_gpu_wait_s(&w) == 0.0, "%g",
               feed_gpu_wait_s(&w));

    /* late host, idle stream */
    ctx_sync(&c);
    feed_gpu_wait_begin(&w, &c);
    sleep_ms(50);
    feed_gpu_wait_end(&w, &c);
    ctx_sync(&c);
    double late = feed_gpu_wait_s(&w);
    check_true("feed_gpu_wait: a batch 50 ms late stalls the GPU 40..500 ms",
               late >= 0.040 && late <= 0.5, "%.4f s", late);

    /* busy stream, nothing late */
    const size_t bytes = (size_t)1 << 30;
    void *buf = NULL;
    CUDA_CHECK(cudaMalloc(&buf, bytes));
    for (int i = 0; i < 10; i++) CUDA_CHECK(cudaMemsetAsync(buf, i, bytes, c.stream));
    feed_gpu_wait_begin(&w, &c);
    feed_gpu_wait_end(&w, &c);
    ctx_sync(&c);
    double busy = feed_gpu_wait_s(&w) - late;
    check_true("feed_gpu_wait: a batch ready behind a busy stream stalls it < 2 ms",
               busy >= 0 && busy < 0.002, "%.5f s", busy);
    CUDA_CHECK(cudaFree(buf));

    /* three rings of pairs, unread until the end */
    const double before = feed_gpu_wait_s(&w);
    const int pairs = 3 * FEED_GPU_WAIT_RING;
    for (int i = 0; i < pairs; i++) {
        feed_gpu_wait_begin(&w, &c);
        sleep_ms(2);
        feed_gpu_wait_end(&w, &c);
    }
    ctx_sync(&c);
    double many = feed_gpu_wait_s(&w) - before;
    check_true("feed_gpu_wait: 24 pairs 2 ms late each all counted (45..400 ms)",
               many >= 0.045 && many <= 0.4, "%.4f s over %d pairs", many, pairs);

    /* the same behind queued work: the ring fills and waits on its oldest */
    const long read0 = w.read;
    CUDA_CHECK(cudaMalloc(&buf, bytes));
    for (int i = 0; i < 10; i++) CUDA_CHECK(cudaMemsetAsync(buf, i, bytes, c.stream));
    int full = 0;
    for (int i = 0; i < pairs; i++) {
        full |= w.pending == FEED_GPU_WAIT_RING;
        feed_gpu_wait_begin(&w, &c);
        feed_gpu_wait_end(&w, &c);
    }
    ctx_sync(&c);
    feed_gpu_wait_s(&w);
    check_true("feed_gpu_wait: a full ring waits on its oldest pair, and every pair is read",
               full && w.read - read0 == pairs && w.pending == 0,
               "full %d, %ld of %d read, %d pending", full, w.read - read0, pairs, w.pending);
    CUDA_CHECK(cudaFree(buf));
    feed_gpu_wait_free(&w);

    ctx_free(&c);
    return check_summary();
}
