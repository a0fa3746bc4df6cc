/* test_resnet.c — the ResNet family on the CPU backend:
 *   - torchvision's state_dict names and counts (resnet18: 122 tensors,
 *     resnet50: 320), conv weights OHWI in memory / OIHW in the registry;
 *   - forward FLOPs at 224 (resnet50: 4.09 G multiply-adds);
 *   - recompute per block gives bit-identical gradients and running
 *     statistics (batch norm does not count the re-run), with a lower peak;
 *   - a narrow resnet18 at 32x32 trains on real Fashion-MNIST for 300 steps
 *     and its loss falls well below its start.
 */
#include <string.h>
#include "check.h"
#include "data/fashion_mnist.h"
#include "data/image_source.h"
#include "engine/autograd.h"
#include "engine/mem.h"
#include "models/resnet.h"
#include "ops/ops.h"
#include "train/optim/sgd.h"

static void test_names(Ctx *c)
{
    struct { int depth, tensors; } cases[2] = {{18, 122}, {50, 320}};
    for (int k = 0; k < 2; k++) {
        ResNetConfig cfg;
        resnet_config_default(&cfg, cases[k].depth);
        cfg.width = 8;   /* names and counts do not depend on the width */
        Model m;
        resnet_create(&m, c, &cfg, 1);
        char name[64];
        snprintf(name, sizeof name, "resnet%d.state_dict_count", cases[k].depth);
        check_true(name, m.params.n + m.params.nb == cases[k].tensors, "%d params + %d buffers",
                   m.params.n, m.params.nb);
        Tensor *w = params_get(&m.params, "layer1.0.conv1.weight");
        snprintf(name, sizeof name, "resnet%d.names", cases[k].depth);
        check_true(name, w && params_get(&m.params, "fc.bias") &&
                   params_get_buffer(&m.params, "layer1.0.bn1.running_var") &&
                   params_get_buffer(&m.params, "bn1.num_batches_tracked") &&
                   (cases[k].depth == 18 || params_get(&m.params, "layer1.0.downsample.0.weight")),
                   "a torchvision name is missing");
        model_free(&m);
    }
    ResNetConfig cfg;
    resnet_config_default(&cfg, 50);
    double f = resnet_flops_per_image(&cfg, 224);
    check_true("resnet50.flops_224", fabs(f / 2 - 4.09e9) < 0.03e9, "%.4g multiply-adds", f / 2);
}

static Tensor *batch_from(Ctx *c, const ImageSource *s, uint32_t first, int B, int32_t *y)
{
    float *x = malloc((size_t)B * 32 * 32 * 3 * sizeof(float));
    char err[128];
    for (int i = 0; i < B; i++)
        src_get(s, first + (uint32_t)i, 0, 1, 0, x + (size_t)i * 32 * 32 * 3, &y[i], err, sizeof err);
    Tensor *t = tensor_from_f32(c, x, DT_F32, 4, (int64_t[]){B, 32, 32, 3});
    free(x);
    return t;
}

static void test_recompute(Ctx *c, const ImageSource *s)
{
    int32_t yh[4];
    Tensor *x = batch_from(c, s, 0, 4, yh);
    Tensor *y = tensor_from_host(c, yh, DT_I32, 1, (int64_t[]){4});
    float *g[2], *rs[2];
    size_t peak[2], n = 0, nrs = 0;
    for (int k = 0; k < 2; k++) {
        ResNetConfig cfg;
        resnet_config_default(&cfg, 18);
        cfg.width = 8;
        cfg.classes = 10;
        cfg.recompute.every = k;   /* 0: none, 1: every block */
        Model m;
        resnet_create(&m, c, &cfg, 5);
        size_t base = c->mem.current;
        mem_reset_peak(c);
        Tensor *in[2] = {x, y};
        Tensor *loss = model_loss(c, &m, in, 0.0f, NULL);
        ad_backward(c, loss, 1.0f);
        tensor_release(loss);
        peak[k] = c->mem.peak - base;
        n = m.params.total;
        g[k] = malloc(n * sizeof(float));
        memcpy(g[k], m.params.grad, n * sizeof(float));
        Tensor *rv = params_get_buffer(&m.params, "layer2.0.bn1.running_var");
        nrs = rv->numel;
        rs[k] = malloc(nrs * sizeof(float));
        memcpy(rs[k], rv->data, nrs * sizeof(float));
        int64_t nbt = *(int64_t *)params_get_buffer(&m.params, "layer2.0.bn1.num_batches_tracked")->data;
        if (k) check_true("recompute.bn_counted_once", nbt == 1, "num_batches_tracked %lld", (long long)nbt);
        model_free(&m);
    }
    check_true("recompute.resnet18.same_grads", memcmp(g[0], g[1], n * sizeof(float)) == 0,
               "gradients differ with recompute");
    check_true("recompute.resnet18.same_running_stats", memcmp(rs[0], rs[1], nrs * sizeof(float)) == 0,
               "running statistics differ with recompute");
    printf("  resnet18 (width 8, 4x32x32) activation peak: %zu bytes without recompute, %zu with\n",
           peak[0], peak[1]);
    check_true("recompute.resnet18.less_memory", peak[1] < peak[0], "peak %zu vs %zu", peak[1], peak[0]);
    for (int k = 0; k < 2; k++) { free(g[k]); free(rs[k]); }
    tensor_release(x);
    tensor_release(y);
}

static void test_training(Ctx *c, const ImageSource *s)
{
    ResNetConfig cfg;
    resnet_config_default(&cfg, 18);
    cfg.width = 16;
    cfg.classes = 10;
    Model m;
    resnet_create(&m, c, &cfg, 7);
    Sgd opt;
    sgd_init(&opt, &m.params, 0.9f, 5e-4f, 1);
    enum { B = 32, STEPS = 300 };
    int32_t yh[B];
    double first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        Tensor *x = batch_from(c, s, (uint32_t)(step * B) % (s->n - B), B, yh);
        Tensor *y = tensor_from_host(c, yh, DT_I32, 1, (int64_t[]){B});
        Tensor *in[2] = {x, y};
        Tensor *loss = model_loss(c, &m, in, 0.0f, NULL);
        float lv = *(float *)loss->data;
        if (step < 20) first += lv / 20;
        if (step >= STEPS - 50) last += lv / 50;
        ad_backward(c, loss, 1.0f);
        sgd_step(&opt, &m.params, step < 30 ? 0.05f * (step + 1) / 30 : 0.05f, NULL);
        params_zero_grad(&m.params);
        tensor_release(loss);
        tensor_release(x);
        tensor_release(y);
    }
    printf("  resnet18 (width 16) on Fashion-MNIST 32x32: mean loss %.3f over the first 20 steps, "
           "%.3f over the last 50\n", first, last);
    check_true("resnet18.fashion_mnist.loss_falls", last < 0.5 * first, "%.3f -> %.3f", first, last);
    sgd_free(&opt, &m.params);
    model_free(&m);
}

int main(void)
{
    Ctx c;
    ctx_init(&c, DEV_CPU, 0, 1);
    test_names(&c);
    FashionMnist ds;
    char err[512];
    if (fmnist_load(&ds, NULL, err, sizeof err) != 0) {
        printf("  FAIL Fashion-MNIST is needed (apt-get install dataset-fashion-mnist): %s\n", err);
        check_true("fashion_mnist.present", 0, "missing");
        return check_summary();
    }
    ImageSource s;
    src_fmnist_init(&s, &ds, FMNIST_TRAIN, 32, NULL);
    test_recompute(&c, &s);
    test_training(&c, &s);
    src_free(&s);
    fmnist_free(&ds);
    ctx_free(&c);
    return check_summary();
}
