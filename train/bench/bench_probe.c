/* bench_probe.c — the probe child (bench_probe.h) and the parent's reading
 * of what it reports: the machine record, the GPU's conditions
 * (bench_conditions.h) and the ceilings. */
#include "bench_probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "ops/matmul.h"
#include "train/io/jsonlog.h"
#include "train/loop/precision.h"
#include "train/loop/progress.h"
#include "bench_child.h"
#include "bench_conditions.h"
#include "bench_run.h"
#include "nvml.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

/* ---- The child. */

static void fill_random(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
    }
}

static void emit_ceiling(FILE *out, Precision prec, int n, double ms, int reps)
{
    char name[40];
    snprintf(name, sizeof name, "matmul %s %d^3", precision_name(prec), n);
    JsonLine j;
    json_begin(&j, "ceiling");
    json_str(&j, "name", name);
    json_str(&j, "precision", precision_name(prec));
    json_num(&j, "tflops", 2.0 * n * n * (double)n / (ms * 1e-3) / 1e12);
    json_num(&j, "ms", ms);
    json_int(&j, "reps", reps);
    json_end(&j, out);
}

#ifdef CTRAIN_CUDA
static void gpu_ceilings(FILE *out, int dev)
{
    enum { BIG = 8192, SMALL = 4096, WARM = 3, REPS = 10 };
    Ctx c;
    ctx_init(&c, DEV_CUDA, dev, 1);
    c.grad_enabled = 0;
    size_t n = (size_t)BIG * BIG;
    float *h = (float *)malloc(n * sizeof(float));
    if (!h) ct_fatal("out of host memory for the matmul inputs");
    int64_t shape[2] = {BIG, BIG};
    Tensor *in[2][3];   /* [a|b][f32, f16, bf16] */
    for (int k = 0; k < 2; k++) {
        fill_random(h, n, (uint64_t)k + 1);
        in[k][0] = tensor_from_f32(&c, h, DT_F32, 2, shape);
        in[k][1] = tensor_from_f32(&c, h, DT_F16, 2, shape);
        in[k][2] = tensor_from_f32(&c, h, DT_BF16, 2, shape);
    }
    free(h);
    Tensor *out_t = tensor_new(&c, DT_F32, 2, shape);
    /* C in the input type, as torch.mm; the 4096 cases use the first
     * 4096 x 4096 elements of the 8192 x 8192 buffers */
    static const struct { Precision prec; int size; } CASES[] = {
        {PREC_FP16, BIG}, {PREC_BF16, BIG}, {PREC_FP32, SMALL}, {PREC_TF32, SMALL},
    };
    cudaEvent_t ev[REPS + 1];
    for (int i = 0; i <= REPS; i++) CUDA_CHECK(cudaEventCreate(&ev[i]));
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        int N = CASES[k].size;
        DType dt = precision_autocast(CASES[k].prec);   /* f32 for fp32 and tf32 */
        int which = dt == DT_F16 ? 1 : dt == DT_BF16 ? 2 : 0;
        const void *A = in[0][which]->data, *B = in[1][which]->data;
        for (int r = -WARM; r < REPS; r++) {
            if (r == 0) CUDA_CHECK(cudaEventRecord(ev[0], c.stream));
            matmul_cuda(c.lt, matmul_plan_cache_get(&c), c.workspace, c.workspace_bytes, c.stream, out_t->data,
                        dt, A, B, dt, N, N, N, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0,
                        CASES[k].prec == PREC_TF32, NULL);
            if (r >= 0) CUDA_CHECK(cudaEventRecord(ev[r + 1], c.stream));
        }
        CUDA_CHECK(cudaEventSynchronize(ev[REPS]));
        double t[REPS];
        for (int r = 0; r < REPS; r++) {
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, ev[r], ev[r + 1]));
            t[r] = ms;
        }
        emit_ceiling(out, CASES[k].prec, N, bench_median(t, REPS), REPS);
    }
    for (int i = 0; i <= REPS; i++) CUDA_CHECK(cudaEventDestroy(ev[i]));
    for (int k = 0; k < 2; k++)
        for (int d = 0; d < 3; d++) tensor_release(in[k][d]);
    tensor_release(out_t);
    ctx_free(&c);
}
#endif

static void cpu_ceiling(FILE *out)
{
    enum { N = 1024, REPS = 3 };
    float *a = (float *)malloc((size_t)N * N * sizeof(float));
    float *b = (float *)malloc((size_t)N * N * sizeof(float));
    float *cm = (float *)malloc((size_t)N * N * sizeof(float));
    if (!a || !b || !cm) ct_fatal("out of host memory for the matmul inputs");
    fill_random(a, (size_t)N * N, 1);
    fill_random(b, (size_t)N * N, 2);
    double t[REPS];
    for (int r = -1; r < REPS; r++) {
        double s = progress_now();
        matmul_cpu(cm, a, b, N, N, N, 0, 0, 1.0f, 0.0f, 1, 0, 0, 0);
        if (r >= 0) t[r] = (progress_now() - s) * 1e3;
    }
    emit_ceiling(out, PREC_FP32, N, bench_median(t, REPS), REPS);
    free(a);
    free(b);
    free(cm);
}

void bench_child_probe(FILE *out, const void *arg)
{
    const BenchProbeArgs *a = (const BenchProbeArgs *)arg;
    /* the card first, before anything makes a CUDA context (bench_conditions.h) */
    BenchMachine cond;
    bench_conditions_init(&cond);
    bench_conditions_read_gpu(&cond, a->device_id, a->gpus);
    BenchMachine m;
    bench_machine_collect(&m, a->device_id);
    int ndev = -1;
    char why[160] = "";
#ifdef CTRAIN_CUDA
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess) {
        snprintf(why, sizeof why, "%s", cudaGetErrorString(e));
        cudaGetLastError();
        ndev = 0;
    } else if (ndev == 0) {
        snprintf(why, sizeof why, "0 CUDA devices");
    }
#else
    snprintf(why, sizeof why, "this ctrain was built without the CUDA backend");
#endif
    int nvml = nvml_init();
    JsonLine j;
    json_begin(&j, "machine");
    json_str(&j, "gpu_name", m.gpu_name);
    json_int(&j, "gpu_memory_bytes", m.gpu_memory_bytes);
    json_int(&j, "gpu_count", m.gpu_count);
    json_int(&j, "compute_capability", m.compute_capability);
    json_str(&j, "driver", m.driver);
    json_str(&j, "cuda_runtime", m.cuda_runtime);
    json_str(&j, "cudnn", m.cudnn);
    json_str(&j, "cublas", m.cublas);
    json_str(&j, "cpu", m.cpu);
    json_str(&j, "host", m.host);
    json_str(&j, "ctrain_revision", m.ctrain_revision);
    json_str(&j, "date", m.date);
    json_int(&j, "cuda_devices", ndev);
    json_str(&j, "no_gpu_reason", why);
    json_int(&j, "nvml", nvml);
    json_str(&j, "nvml_reason", nvml ? "" : nvml_reason());
    json_end(&j, out);
    bench_conditions_write(out, &cond);
    if (!a->ceilings) return;
    int gpu = a->auto_device ? ndev > 0 : a->device == DEV_CUDA;
#ifdef CTRAIN_CUDA
    if (gpu && ndev > a->device_id) { gpu_ceilings(out, a->device_id); return; }
#endif
    if (!gpu) cpu_ceiling(out);
}

/* ---- The parent: the probe's lines. */

void bench_probe_read(BenchProbe *p, const char *line)
{
    double v;
    if (bench_line_is(line, "machine")) {
        BenchMachine *m = &p->machine;
        bench_line_str(line, "gpu_name", m->gpu_name, sizeof m->gpu_name);
        if (bench_line_num(line, "gpu_memory_bytes", &v)) m->gpu_memory_bytes = (int64_t)v;
        if (bench_line_num(line, "gpu_count", &v)) m->gpu_count = (int)v;
        if (bench_line_num(line, "compute_capability", &v)) m->compute_capability = (int)v;
        bench_line_str(line, "driver", m->driver, sizeof m->driver);
        bench_line_str(line, "cuda_runtime", m->cuda_runtime, sizeof m->cuda_runtime);
        bench_line_str(line, "cudnn", m->cudnn, sizeof m->cudnn);
        bench_line_str(line, "cublas", m->cublas, sizeof m->cublas);
        bench_line_str(line, "cpu", m->cpu, sizeof m->cpu);
        bench_line_str(line, "host", m->host, sizeof m->host);
        bench_line_str(line, "ctrain_revision", m->ctrain_revision, sizeof m->ctrain_revision);
        bench_line_str(line, "date", m->date, sizeof m->date);
        if (bench_line_num(line, "cuda_devices", &v)) p->cuda_devices = (int)v;
        bench_line_str(line, "no_gpu_reason", p->no_gpu_reason, sizeof p->no_gpu_reason);
        if (bench_line_num(line, "nvml", &v)) p->nvml = v != 0;
        bench_line_str(line, "nvml_reason", p->nvml_reason, sizeof p->nvml_reason);
    } else if (bench_line_is(line, "conditions") || bench_line_is(line, "gpu_process")) {
        bench_conditions_read(&p->machine, line);
    } else if (bench_line_is(line, "ceiling") && p->n_ceilings < BENCH_MAX_CEILINGS) {
        int i = p->n_ceilings;
        if (!bench_line_num(line, "tflops", &v)) return;
        p->ceilings[i].tflops = v;
        bench_line_str(line, "name", p->ceiling_names[i], sizeof p->ceiling_names[i]);
        bench_line_str(line, "precision", p->ceiling_precs[i], sizeof p->ceiling_precs[i]);
        p->ceilings[i].name = p->ceiling_names[i];
        p->ceilings[i].precision = p->ceiling_precs[i];
        p->ceiling_ms[i] = bench_line_num(line, "ms", &v) ? v : NAN;
        if (bench_line_num(line, "reps", &v)) p->ceiling_reps = (int)v;
        p->n_ceilings++;
    }
}
