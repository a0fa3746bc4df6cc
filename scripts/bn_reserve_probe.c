/* bn_reserve_probe.c — what cuDNN's fused NHWC batch norm (+ add) + ReLU
 * keeps in its reserve space, element by element. A measurement for
 * docs/kernels.md, not a test.
 *
 *   make build/bn_reserve_probe   (CUDA builds; `make` builds it too)
 *   build/bn_reserve_probe [DIR]  (DIR: where the maps and dumps go; default .)
 *   build/bn_reserve_probe DIR N,H,W,C [...]
 *                                 (only BN + add + ReLU at the shapes given:
 *                                 random dumps, each type, and one-hot maps
 *                                 where N H W C <= 2^16: they take n runs)
 *
 * Why: our batch-norm forward beats cuDNN's on ResNet-50's BN + add + ReLU
 * shapes (~1.2 ms a bf16 step at batch 256 on an H100, docs/kernels.md,
 * "batch norm: own kernels vs cuDNN"), but cuDNN's backward, which wins
 * every shape, reads the ReLU's mask from the reserve space its own forward
 * filled. If the reserve is the mask in a layout that can be named, our
 * forward can write it and the two can be paired (checked at run time
 * against cuDNN's own forward before it is trusted).
 *
 * For each storage type (bf16, f16, f32) and form (BN + ReLU, BN + add +
 * ReLU):
 *   - the reserve's size against N H W C bits;
 *   - one-hot runs on small shapes: x is -1 everywhere but one element, +1,
 *     with beta -1 and gamma 1, so that exactly that element survives the
 *     ReLU (every other channel is constant, normalised to 0, then -1); the
 *     reserve bit that changes from a run with every element -1 is that
 *     element's. The map (element ->
 *     bit, -1 where no single bit lit) goes to DIR/map_<type>_<form>_NxHxWxC.bin
 *     as int32, and the probe says whether it is the identity (bit e of the
 *     reserve's little-endian words is element e, NHWC order);
 *   - random data on ResNet-50's shapes at batch 4 and 256: how many
 *     elements the identity layout gets right, and the layout read from the
 *     dumps (cudnn_mask_bit below); at batch 4 the y > 0 bits
 *     (NHWC, bit e of byte e / 8) and the raw reserve go to
 *     DIR/dump_<type>_<form>_NxHxWxC.bin (a 32-byte header: magic "BNRS",
 *     the dtype id, N, H, W, C, has_z, then n / 8 mask bytes, then the
 *     reserve) for offline reading.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ctx.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "ops/batchnorm_cudnn.h"
#include "probe_util.h"

typedef struct {
    Ctx *c;
    DType dt;
    const char *dir;
} Probe;

static const char *form_name(int has_z) { return has_z ? "addrelu" : "relu"; }

/* bit e of the little-endian words at r (= bit e % 8 of byte e / 8) */
static int bit_at(const uint8_t *r, size_t e) { return (r[e / 8] >> (e % 8)) & 1; }

/* The layout read from this probe's dumps (H100, cuDNN 9.14; docs/kernels.md,
 * "cuDNN's BN + add + ReLU reserve"): channel blocks of 64, the pixels of a
 * block padded to P32 = a multiple of 32, then 1,024 bytes cuDNN leaves as
 * they were. Pixel p, channel c: block cb = c / 64, cc = c % 64; bit
 * (p % 2) 16 + cc / 4 of 32-bit word cb P32 2 + (p / 2) 4 + cc % 4; the bit
 * is 1 where the ReLU zeroed the output. */
static int cudnn_mask_bit(const uint8_t *r, size_t nhw, size_t p, size_t c)
{
    const size_t p32 = (nhw + 31) / 32 * 32, cb = c / 64, cc = c % 64;
    const size_t word = cb * p32 * 2 + (p / 2) * 4 + cc % 4, t = (p % 2) * 16 + cc / 4;
    return bit_at(r, word * 32 + t);
}

typedef struct {
    void *x, *z, *y, *reserve;
    float *gamma, *beta, *mean, *invstd;
} Bufs;

static void bufs_alloc(Bufs *b, const BnCudnn *p, size_t n, int C)
{
    const size_t es = dtype_size(p->dt);
    memset(b, 0, sizeof *b);
    CUDA_CHECK(cudaMalloc(&b->x, n * es));
    CUDA_CHECK(cudaMalloc(&b->y, n * es));
    if (p->has_z) {
        CUDA_CHECK(cudaMalloc(&b->z, n * es));
        CUDA_CHECK(cudaMemset(b->z, 0, n * es));
    }
    CUDA_CHECK(cudaMalloc(&b->reserve, p->reserve_bytes ? p->reserve_bytes : 1));
    CUDA_CHECK(cudaMalloc((void **)&b->gamma, C * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&b->beta, C * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&b->mean, C * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&b->invstd, C * sizeof(float)));
}

static void bufs_free(Bufs *b)
{
    cudaFree(b->x); cudaFree(b->y); cudaFree(b->z); cudaFree(b->reserve);
    cudaFree(b->gamma); cudaFree(b->beta); cudaFree(b->mean); cudaFree(b->invstd);
}

static void fill_const(float *d, float v, int C)
{
    float *h = malloc(C * sizeof(float));
    for (int i = 0; i < C; i++) h[i] = v;
    CUDA_CHECK(cudaMemcpy(d, h, C * sizeof(float), cudaMemcpyHostToDevice));
    free(h);
}

/* one value of type dt at element e of d */
static void put_one(void *d, DType dt, size_t e, float v)
{
    uint8_t tmp[8];
    dtype_convert(tmp, dt, &v, DT_F32, 1);
    CUDA_CHECK(cudaMemcpy((char *)d + e * dtype_size(dt), tmp, dtype_size(dt),
                          cudaMemcpyHostToDevice));
}

static int forward(Probe *pr, BnCudnn *p, Bufs *b)
{
    CUDA_CHECK(cudaMemset(b->reserve, 0, p->reserve_bytes ? p->reserve_bytes : 1));
    int ran = batchnorm_cudnn_forward_train(pr->c, p, b->y, b->mean, b->invstd, NULL, NULL, b->x,
                                            b->z, b->gamma, b->beta, 0.1f, 1e-5f, b->reserve);
    CUDA_CHECK(cudaDeviceSynchronize());
    return ran;
}

/* cuDNN's BN (+ add) + ReLU form for the shape, its line's head printed;
 * 0 (the form freed, the refusal printed) when cuDNN does not take it. */
static int form_open(Probe *pr, BnCudnn *p, const char *what, int N, int H, int W, int C,
                     int has_z)
{
    batchnorm_cudnn_init(p, pr->c, pr->dt, N, H, W, C, has_z, 1);
    printf("%s %s %s %dx%dx%dx%d: ", what, dtype_name(pr->dt), form_name(has_z), N, H, W, C);
    if (p->usable) return 1;
    printf("refused (%s)\n", p->why);
    batchnorm_cudnn_free(p);
    return 0;
}

static void one_hot(Probe *pr, int N, int H, int W, int C, int has_z)
{
    BnCudnn p;
    if (!form_open(pr, &p, "onehot", N, H, W, C, has_z)) return;
    const size_t n = (size_t)N * H * W * C, rb = p.reserve_bytes;
    Bufs b;
    bufs_alloc(&b, &p, n, C);
    fill_const(b.gamma, 1.0f, C);
    fill_const(b.beta, -1.0f, C);
    float *minus = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) minus[i] = -1.0f;
    void *xm = upload(minus, n, pr->dt);
    CUDA_CHECK(cudaMemcpy(b.x, xm, n * dtype_size(pr->dt), cudaMemcpyDeviceToDevice));
    uint8_t *r = malloc(rb ? rb : 1), *base = malloc(rb ? rb : 1);
    int32_t *map = malloc(n * sizeof(int32_t));
    size_t identity = 0, none = 0, many = 0;
    /* every element rectified: the bits that change from this are the one element's */
    forward(pr, &p, &b);
    CUDA_CHECK(cudaMemcpy(base, b.reserve, rb, cudaMemcpyDeviceToHost));
    for (size_t e = 0; e < n; e++) {
        put_one(b.x, pr->dt, e, 1.0f);
        forward(pr, &p, &b);
        put_one(b.x, pr->dt, e, -1.0f);
        CUDA_CHECK(cudaMemcpy(r, b.reserve, rb, cudaMemcpyDeviceToHost));
        long at = -1;
        int lit = 0;
        for (size_t i = 0; i < rb * 8; i++)
            if (bit_at(r, i) != bit_at(base, i)) {
                lit++;
                at = (long)i;
            }
        map[e] = lit == 1 ? (int32_t)at : -1;
        none += lit == 0;
        many += lit > 1;
        identity += lit == 1 && (size_t)at == e;
    }
    size_t named = 0;
    for (size_t e = 0; e < n && C % 64 == 0; e++) {
        const size_t nhw = n / (size_t)C, p32 = (nhw + 31) / 32 * 32, cc = e % (size_t)C % 64;
        const size_t word = (e % (size_t)C / 64) * p32 * 2 + (e / (size_t)C / 2) * 4 + cc % 4;
        named += map[e] == (int32_t)(word * 32 + (e / (size_t)C % 2) * 16 + cc / 4);
    }
    printf("reserve %zu bytes (n / 8 = %zu); one bit changed for %zu of %zu elements (none "
           "%zu, several %zu); at the identity's place %zu, at the named layout's %zu\n",
           rb, n / 8, n - none - many, n, none, many, identity, named);
    printf("  first elements -> bits:");
    for (size_t e = 0; e < n && e < 24; e++) printf(" %d", map[e]);
    printf("\n");
    char path[512];
    snprintf(path, sizeof path, "%s/map_%s_%s_%dx%dx%dx%d.bin", pr->dir, dtype_name(pr->dt),
             form_name(has_z), N, H, W, C);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(map, sizeof(int32_t), n, f);
        fclose(f);
    }
    free(minus); free(r); free(base); free(map);
    cudaFree(xm);
    bufs_free(&b);
    batchnorm_cudnn_free(&p);
}

static void random_run(Probe *pr, int N, int H, int W, int C, int has_z, int dump)
{
    BnCudnn p;
    if (!form_open(pr, &p, "random", N, H, W, C, has_z)) return;
    const size_t n = (size_t)N * H * W * C, rb = p.reserve_bytes;
    unsigned seed = 12345u + (unsigned)C;
    Bufs b;
    bufs_alloc(&b, &p, n, C);
    float *hx = host_rand(n, -2.0f, 2.0f, &seed);
    void *dx = upload(hx, n, pr->dt);
    CUDA_CHECK(cudaMemcpy(b.x, dx, n * dtype_size(pr->dt), cudaMemcpyDeviceToDevice));
    if (has_z) {
        float *hz = host_rand(n, -1.0f, 1.0f, &seed);
        void *dz = upload(hz, n, pr->dt);
        CUDA_CHECK(cudaMemcpy(b.z, dz, n * dtype_size(pr->dt), cudaMemcpyDeviceToDevice));
        cudaFree(dz);
        free(hz);
    }
    fill_const(b.gamma, 1.0f, C);
    fill_const(b.beta, 0.0f, C);
    forward(pr, &p, &b);
    float *y = download(b.y, n, pr->dt);
    uint8_t *r = malloc(rb ? rb : 1), *mask = calloc(n / 8 + 1, 1);
    CUDA_CHECK(cudaMemcpy(r, b.reserve, rb, cudaMemcpyDeviceToHost));
    size_t pos = 0, lit = 0, same = 0, named = 0;
    const size_t nhw = n / (size_t)C, p32 = (nhw + 31) / 32 * 32;
    const int fits = rb >= p32 * (size_t)C / 8 && C % 64 == 0;
    for (size_t e = 0; e < n; e++) {
        const int m = y[e] > 0.0f;
        pos += m;
        if (m) mask[e / 8] |= (uint8_t)(1u << (e % 8));
        if (e < rb * 8) same += bit_at(r, e) == m;
        if (fits) named += cudnn_mask_bit(r, nhw, e / (size_t)C, e % (size_t)C) == !m;
    }
    for (size_t i = 0; i < rb * 8; i++) lit += bit_at(r, i);
    printf("reserve %zu bytes (n / 8 = %zu); y > 0 for %zu of %zu, reserve bits lit %zu; "
           "identity layout right for %.4f of the elements; the named layout for %.6f\n",
           rb, n / 8, pos, n, lit, (double)same / (double)n,
           fits ? (double)named / (double)n : 0.0);
    if (dump) {
        char path[512];
        snprintf(path, sizeof path, "%s/dump_%s_%s_%dx%dx%dx%d.bin", pr->dir, dtype_name(pr->dt),
                 form_name(has_z), N, H, W, C);
        FILE *f = fopen(path, "wb");
        if (f) {
            int32_t head[8] = {0x53524e42, (int32_t)pr->dt, N, H, W, C, has_z, 0};
            fwrite(head, sizeof head, 1, f);
            fwrite(mask, 1, (n + 7) / 8, f);
            fwrite(r, 1, rb, f);
            fclose(f);
        }
    }
    free(hx); free(y); free(r); free(mask);
    cudaFree(dx);
    bufs_free(&b);
    batchnorm_cudnn_free(&p);
}

int main(int argc, char **argv)
{
    Probe pr = {NULL, DT_BF16, argc > 1 ? argv[1] : "."};
    Ctx c;
    struct cudaDeviceProp prop;
    probe_start(&c, &prop);
    pr.c = &c;
    printf("bn_reserve_probe: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    static const DType dts[3] = {DT_BF16, DT_F16, DT_F32};
    int n4[4];
    if (argc == 2 && sscanf(argv[1], "%d,%d,%d,%d", &n4[0], &n4[1], &n4[2], &n4[3]) == 4) {
        fprintf(stderr, "bn_reserve_probe: the folder comes first: bn_reserve_probe DIR %s\n",
                argv[1]);
        return 2;
    }
    if (argc > 2) {   /* shapes named: BN + add + ReLU at each, every type */
        for (int a = 2; a < argc; a++) {
            int N, H, W, C;
            if (sscanf(argv[a], "%d,%d,%d,%d", &N, &H, &W, &C) != 4 || N < 1 || H < 1 ||
                W < 1 || C < 1 || N > 4096 || H > 4096 || W > 4096 || C > 4096 ||
                (long long)N * H * W * C > (1LL << 24)) {
                fprintf(stderr, "bn_reserve_probe: want N,H,W,C (each 1 .. 4096, N H W C <= "
                        "2^24), not '%s'\n", argv[a]);
                return 2;
            }
            for (int d = 0; d < 3; d++) {
                pr.dt = dts[d];
                if ((long long)N * H * W * C <= (1LL << 16)) one_hot(&pr, N, H, W, C, 1);
                random_run(&pr, N, H, W, C, 1, 1);
            }
        }
        ctx_free(&c);
        return 0;
    }
    /* ResNet-50's forms: BN + ReLU after a block's first two convolutions, BN + add + ReLU
     * after its third */
    static const int relu_shapes[][3] = {{56, 56, 64}, {28, 28, 128}, {14, 14, 256}, {7, 7, 512}};
    static const int add_shapes[][3] = {{56, 56, 256}, {28, 28, 512}, {14, 14, 1024}, {7, 7, 2048}};
    for (int d = 0; d < 3; d++) {
        pr.dt = dts[d];
        for (int z = 0; z <= 1; z++) {
            one_hot(&pr, 2, 4, 4, 64, z);
            one_hot(&pr, 1, 3, 5, 32, z);
            one_hot(&pr, 2, 7, 7, 16, z);
        }
        for (int i = 0; i < 4; i++) {
            const int *s = relu_shapes[i], *t = add_shapes[i];
            random_run(&pr, 4, s[0], s[1], s[2], 0, d != 1);
            random_run(&pr, 4, t[0], t[1], t[2], 1, d != 1);
            if (d == 1) continue;   /* batch 256: bf16 and f32 (tf32) alone */
            random_run(&pr, 256, s[0], s[1], s[2], 0, 0);
            random_run(&pr, 256, t[0], t[1], t[2], 1, 0);
        }
    }
    ctx_free(&c);
    return 0;
}
