/* info.c — `ctrain info`: the device and library versions this build sees. */
#include "commands.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "engine/error.h"
#include "train/bench/bench_json.h"
#ifdef CTRAIN_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>
#endif

static void print_cpu(void)
{
    char model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10)) {
                char *p = strchr(line, ':');
                if (p) {
                    snprintf(model, sizeof model, "%s", p + 2);
                    model[strcspn(model, "\n")] = 0;
                }
                break;
            }
        fclose(f);
    }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("cpu: %s, %ld cores online, %d OpenMP threads\n", model, sysconf(_SC_NPROCESSORS_ONLN),
           threads);
}

int cmd_version(void)
{
    char rev[64] = "";
    bench_revision(rev, sizeof rev);
    printf("ctrain %s (%s build)\n", rev[0] ? rev : "(revision unknown)",
#ifdef CTRAIN_CUDA
           "CUDA"
#else
           "CPU-only"
#endif
    );
#ifdef CTRAIN_CUDA
    printf("built with CUDA %d.%d, cuDNN %d.%d.%d, cuBLAS %d.%d.%d, NCCL %d.%d.%d\n",
           CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10, CUDNN_MAJOR, CUDNN_MINOR,
           CUDNN_PATCHLEVEL, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH, NCCL_MAJOR,
           NCCL_MINOR, NCCL_PATCH);
    printf("loaded at run time when present: NVML, CUPTI, nvJPEG; `ctrain info` shows the "
           "versions on this machine\n");
#endif
    return 0;
}

int cmd_info(int argc, char **argv)
{
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        printf("usage: ctrain info\n\n"
               "What this build and machine have: CPU-only or CUDA build, the CPU, the CUDA\n"
               "runtime and driver, cuDNN and cuBLASLt (loaded and built against), each GPU\n"
               "with its compute capability, SMs, memory and clocks.\n");
        return 0;
    }
    if (argc > 0) ct_fatal_hint("run 'ctrain info' with no arguments", "info takes no options");
    printf("ctrain %s build\n",
#ifdef CTRAIN_CUDA
           "CUDA"
#else
           "CPU-only"
#endif
    );
    print_cpu();
#ifdef CTRAIN_CUDA
    int rt = 0, drv = 0, n = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    printf("CUDA runtime %d.%d, driver supports %d.%d; cuDNN %zu (built with %d.%d.%d); cuBLASLt %zu\n",
           rt / 1000, (rt % 1000) / 10, drv / 1000, (drv % 1000) / 10, cudnnGetVersion(),
           CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL, cublasLtGetVersion());
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("no CUDA device (%s): the CPU backend will be used\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        cudaGetLastError();
        return 0;
    }
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp p;
        int clk = 0, mclk = 0, bus = 0;
        CUDA_CHECK(cudaGetDeviceProperties(&p, d));
        cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, d);
        cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, d);
        cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, d);
        printf("cuda:%d  %s  compute capability %d.%d  %d SMs  %.1f GiB  SM clock %.0f MHz  "
               "memory clock %.0f MHz, %d-bit bus  L2 %.0f MiB\n",
               d, p.name, p.major, p.minor, p.multiProcessorCount,
               (double)p.totalGlobalMem / (1024.0 * 1024 * 1024), clk / 1000.0, mclk / 1000.0, bus,
               p.l2CacheSize / (1024.0 * 1024));
    }
#else
    printf("no CUDA backend in this build: the CPU backend will be used\n");
#endif
    return 0;
}
