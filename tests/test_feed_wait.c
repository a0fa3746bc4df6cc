/* test_feed_wait.c — the data wait a report shows (train/cli/train_report.h,
 * data_rates): the GPU's own stall for the batches where both readings have
 * one (train/feed/feed_gpu_wait.h), the host's wait otherwise; and the
 * meter on a CPU context, which measures nothing (-1). The meter on a real
 * stream: tests/gpu_feed_wait.c.
 */
#include "check.h"
#include "train/cli/train_report.h"
#include "train/feed/feed_gpu_wait.h"

int main(void)
{
    FeedStats a = {0}, b = {0};
    a.wait_s = 1.0; b.wait_s = 1.9;           /* host: 0.9 s of 2 s */
    a.gpu_wait_s = 0.5; b.gpu_wait_s = 0.7;   /* GPU: 0.2 s of 2 s */
    b.images = 1000;
    DataRates r = data_rates(&a, &b, 2.0);
    check_true("data_rates: the GPU's stall (10%) over the host's wait (45%)",
               r.wait_frac > 0.0999 && r.wait_frac < 0.1001, "%g", r.wait_frac);
    check_true("data_rates: 500 img/s", r.images_per_s == 500.0, "%g", r.images_per_s);
    a.gpu_wait_s = b.gpu_wait_s = -1.0;
    r = data_rates(&a, &b, 2.0);
    check_true("data_rates: the host's wait where the GPU's was not measured",
               r.wait_frac > 0.4499 && r.wait_frac < 0.4501, "%g", r.wait_frac);

    /* an evaluation inside the interval is skipped from both clocks */
    FeedStats last = {0}, pre = {0}, post = {0};
    last.gpu_wait_s = 0.1;
    pre.gpu_wait_s = 0.3; post.gpu_wait_s = 0.8; pre.wait_s = 1.0; post.wait_s = 1.5;
    feed_stats_skip(&last, &pre, &post);
    check_true("feed_stats_skip: the GPU's stall moves past the evaluation",
               last.gpu_wait_s > 0.5999 && last.gpu_wait_s < 0.6001, "%g", last.gpu_wait_s);
    last.gpu_wait_s = -1.0;
    feed_stats_skip(&last, &pre, &post);
    check_true("feed_stats_skip: an unmeasured GPU stall stays unmeasured",
               last.gpu_wait_s < 0, "%g", last.gpu_wait_s);

    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    FeedGpuWait w;
    feed_gpu_wait_init(&w, &c);
    feed_gpu_wait_begin(&w, &c);
    feed_gpu_wait_end(&w, &c);
    check_true("feed_gpu_wait: a CPU context measures nothing", feed_gpu_wait_s(&w) < 0, "%g",
               feed_gpu_wait_s(&w));
    feed_gpu_wait_free(&w);
    ctx_free(&c);
    return check_summary();
}
