/* test_adamw_fp8.c — the CPU reference of AdamW with the FP8 weight codes
 * (ops/adamw_fp8.h), which gpu_fp8_codes holds the CUDA kernel to:
 *   - the table's blocks: a 64 x 64 tile an fp8 job (partial tiles
 *     counted), ADAMW_JOB_CHUNK elements a plain job, none for an empty one;
 *   - the fit test: rows % 16, cols % 4, offset % 4, 16-byte aligned codes;
 *   - a table that covers the buffer updates it exactly as the whole-buffer
 *     AdamW of the two weight-decay groups does (the jobs carry the decay);
 *   - an fp8 job's codes are the scaled cast of the new weights (E4M3), its
 *     q^T the transpose, its amax the larger of the old one and max |w|;
 *   - a skipped step writes the codes (at the new scale) and nothing else.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops/adamw_fp8.h"
#include "ops/fp8.h"

enum { N = 9000, R1 = 48, C1 = 100, O1 = 1000, R2 = 80, C2 = 20, O2 = 6004 };

static void fill(float *x, size_t n, float lo, float hi, unsigned seed)
{
    srand(seed);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
}

static void test_layout_and_fit(void)
{
    static uint8_t q[64] __attribute__((aligned(16)));
    AdamwJob j[4] = {
        {0, 5000, 0, 0, 0.0, NULL, NULL, NULL, NULL, 0},
        {5000, 64 * 130, 64, 130, 0.0, q, q, NULL, NULL, 0},
        {13320, 0, 0, 0, 0.0, NULL, NULL, NULL, NULL, 0},
        {13320, 65 * 64, 65, 64, 0.0, q, q, NULL, NULL, 0},
    };
    const int64_t b = adamw_jobs_layout(j, 4);
    check_true("layout: blocks a job (2 chunks, 1 x 3 tiles, none, 2 x 1 tiles)",
               j[0].block0 == 0 && j[1].block0 == 2 && j[2].block0 == 5 && j[3].block0 == 5 &&
                   b == 7,
               "block0 %lld %lld %lld %lld, total %lld", (long long)j[0].block0,
               (long long)j[1].block0, (long long)j[2].block0, (long long)j[3].block0,
               (long long)b);
    check_true("fit: the kernel's shape and place",
               adamw_job_fp8_fits(8, 16, 4, q, q) && !adamw_job_fp8_fits(8, 17, 4, q, q) &&
                   !adamw_job_fp8_fits(8, 16, 6, q, q) && !adamw_job_fp8_fits(6, 16, 4, q, q) &&
                   !adamw_job_fp8_fits(8, 16, 4, q + 1, q) && !adamw_job_fp8_fits(8, 16, 4, q, q + 4),
               "the fit test disagrees");
}

/* How many of w's codes (q, and q^T) are not e4m3(w * scale); *amax raised
 * to max |w|. */
static int codes_wrong(const float *w, int rows, int cols, const uint8_t *q, const uint8_t *qt,
                       float scale, float *amax)
{
    int bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const float x = w[r * cols + c];
            *amax = fmaxf(*amax, fabsf(x));
            bad += q[r * cols + c] != fp8_from_f32(x * scale, FP8_E4M3) ||
                   qt[c * rows + r] != q[r * cols + c];
        }
    return bad;
}

static void test_table_step(int skip)
{
    float *p = malloc(N * sizeof(float)), *m = malloc(N * sizeof(float));
    float *v = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
    fill(p, N, -1.5f, 1.5f, 1);
    fill(m, N, -0.1f, 0.1f, 2);
    fill(v, N, 0.0f, 0.01f, 3);
    fill(g, N, -1.0f, 1.0f, 4);
    float *p2 = malloc(N * sizeof(float)), *m2 = malloc(N * sizeof(float));
    float *v2 = malloc(N * sizeof(float));
    memcpy(p2, p, N * sizeof(float));
    memcpy(m2, m, N * sizeof(float));
    memcpy(v2, v, N * sizeof(float));
    const AdamStepState st = adam_step_state(4, 0.9, 0.999, 1);
    const float lr = 3e-3f;
    uint8_t q1[R1 * C1], qt1[R1 * C1], q2[R2 * C2], qt2[R2 * C2];
    float scale[2] = {200.0f, 30.0f}, amax[2] = {0.0f, 50.0f};
    const double wd = 0.05;
    /* with decay: plain [0, 1000), W1 [1000, 5800); without: plain [5800, 6004),
     * W2 [6004, 7604) (its amax already above max |w|), plain [7604, 9000),
     * an empty job */
    AdamwJob j[6] = {
        {0, O1, 0, 0, wd, NULL, NULL, NULL, NULL, 0},
        {O1, R1 * C1, R1, C1, wd, q1, qt1, &scale[0], &amax[0], 0},
        {O1 + R1 * C1, O2 - (O1 + R1 * C1), 0, 0, 0.0, NULL, NULL, NULL, NULL, 0},
        {O2, R2 * C2, R2, C2, 0.0, q2, qt2, &scale[1], &amax[1], 0},
        {O2 + R2 * C2, N - (O2 + R2 * C2), 0, 0, 0.0, NULL, NULL, NULL, NULL, 0},
        {N, 0, 0, 0, 0.0, NULL, NULL, NULL, NULL, 0},
    };
    adamw_jobs_layout(j, 6);
    const int sk = skip;
    adamw_jobs_step_cpu(p, m, v, g, j, 6, lr, &st, 0.9, 0.999, 1e-6, &sk);
    /* the whole-buffer optimizer: decay on [0, O1 + R1 C1), none after */
    const size_t cut = O1 + R1 * C1;
    adamw_step_cpu(p2, m2, v2, g, cut, lr, &st, 0.9, 0.999, 1e-6, wd, &sk);
    adamw_step_cpu(p2 + cut, m2 + cut, v2 + cut, g + cut, N - cut, lr, &st, 0.9, 0.999, 1e-6, 0.0,
                   &sk);
    char name[128];
    snprintf(name, sizeof name, "%s: the table's update is the whole buffer's",
             skip ? "skipped" : "step");
    check_true(name, !memcmp(p, p2, N * sizeof(float)) && !memcmp(m, m2, N * sizeof(float)) &&
                         !memcmp(v, v2, N * sizeof(float)),
               "p, m or v differ");
    float a1 = 0.0f, a2 = 50.0f;
    const int bad = codes_wrong(p + O1, R1, C1, q1, qt1, scale[0], &a1) +
                    codes_wrong(p + O2, R2, C2, q2, qt2, scale[1], &a2);
    snprintf(name, sizeof name, "%s: codes of the new weights both ways, amaxes %.4g %.4g",
             skip ? "skipped" : "step", (double)amax[0], (double)amax[1]);
    check_true(name, bad == 0 && amax[0] == a1 && amax[1] == a2 && amax[1] == 50.0f,
               "%d codes wrong; amax %.9g (want %.9g), %.9g (want %.9g)", bad, (double)amax[0],
               (double)a1, (double)amax[1], (double)a2);
    free(p); free(m); free(v); free(g); free(p2); free(m2); free(v2);
}

int main(void)
{
    test_layout_and_fit();
    test_table_step(0);
    test_table_step(1);
    return check_summary();
}
