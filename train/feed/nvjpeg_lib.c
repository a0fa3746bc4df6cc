/* nvjpeg_lib.c — nvJPEG through dlopen (contract in nvjpeg_lib.h).
 *
 * The handle and the function table are process-wide (like NVML's, in
 * train/bench/nvml.c): loaded on first use under a mutex, kept until the
 * process ends. A failed load is remembered with its reason, so a run
 * tries once and says why once.
 */
#include "nvjpeg_lib.h"

#include <stdio.h>
#include <string.h>

#ifndef CTRAIN_CUDA

int nvjpeg_available(char *reason, size_t len)
{
    if (reason && len)
        snprintf(reason, len, "this build has no CUDA (built with CUDA=0, or without nvcc, cuDNN, "
                              "cuBLAS or NCCL): nvJPEG needs the CUDA build");
    return 0;
}

#else

#include <dlfcn.h>
#include <pthread.h>
#include "engine/settings.h"

static struct {
    pthread_mutex_t mu;
    int state;                /* 0 not tried, 1 loaded, -1 unavailable */
    void *so;
    char reason[400];
    char path[512];           /* CTRAIN_NVJPEG_LIB's value, kept (the environment may change) */
    NvjpegLib lib;
} g_nj = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* dlsym into a function pointer without the object-to-function pointer cast
 * ISO C leaves undefined (POSIX guarantees the representation). */
static int sym(void *fnptr, const char *name)
{
    void *p = dlsym(g_nj.so, name);
    memcpy(fnptr, &p, sizeof p);
    return p != NULL;
}

static void nj_load(void)
{
    const char *env = setting_str(SET_NVJPEG_LIB);
    static const char *names[] = {"libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so.11",
                                  "libnvjpeg.so"};
    char first_err[200] = "";
    if (env && *env) {
        g_nj.so = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!g_nj.so) {
            const char *e = dlerror();
            snprintf(g_nj.reason, sizeof g_nj.reason, "%s (CTRAIN_NVJPEG_LIB) not found: %s", env,
                     e ? e : "unknown error");
            g_nj.state = -1;
            return;
        }
        snprintf(g_nj.path, sizeof g_nj.path, "%s", env);
        g_nj.lib.path = g_nj.path;
    }
    for (size_t i = 0; !g_nj.so && i < sizeof names / sizeof *names; i++) {
        g_nj.so = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (g_nj.so) g_nj.lib.path = names[i];
        else if (i == 0) {
            const char *e = dlerror();
            snprintf(first_err, sizeof first_err, "%s", e ? e : "unknown error");
        }
    }
    if (!g_nj.so) {
        snprintf(g_nj.reason, sizeof g_nj.reason,
                 "libnvjpeg.so.13 not found (nor .so.12, .so.11, .so): %s", first_err);
        g_nj.state = -1;
        return;
    }
    NvjpegLib *L = &g_nj.lib;
    struct { void *fn; const char *name; } req[] = {
        {&L->create_ex, "nvjpegCreateEx"},
        {&L->destroy, "nvjpegDestroy"},
        {&L->state_create, "nvjpegJpegStateCreate"},
        {&L->state_destroy, "nvjpegJpegStateDestroy"},
        {&L->get_image_info, "nvjpegGetImageInfo"},
        {&L->batched_initialize, "nvjpegDecodeBatchedInitialize"},
        {&L->batched_decode, "nvjpegDecodeBatched"},
        {&L->batched_supported, "nvjpegDecodeBatchedSupported"},
        {&L->stream_create, "nvjpegJpegStreamCreate"},
        {&L->stream_destroy, "nvjpegJpegStreamDestroy"},
        {&L->stream_parse, "nvjpegJpegStreamParse"},
    };
    for (size_t i = 0; i < sizeof req / sizeof *req; i++)
        if (!sym(req[i].fn, req[i].name)) {
            snprintf(g_nj.reason, sizeof g_nj.reason,
                     "%s has no %s: an nvJPEG older than CUDA 11, or not nvJPEG", L->path,
                     req[i].name);
            dlclose(g_nj.so);
            g_nj.so = NULL;
            memset(L, 0, sizeof *L);
            g_nj.state = -1;
            return;
        }
    sym(&L->create_ex_v2, "nvjpegCreateExV2");
    sym(&L->hw_decoder_info, "nvjpegGetHardwareDecoderInfo");
    sym(&L->batched_preallocate, "nvjpegDecodeBatchedPreAllocate");
    sym(&L->stream_parse_header, "nvjpegJpegStreamParseHeader");
    /* nvjpegGetProperty(libraryPropertyType: 0 major, 1 minor, 2 patch, int *) */
    nvjpegStatus_t (*prop)(int, int *) = NULL;
    if (sym(&prop, "nvjpegGetProperty"))
        for (int k = 0; k < 3; k++)
            if (prop(k, &L->version[k]) != NVJPEG_STATUS_SUCCESS) L->version[k] = 0;
    g_nj.state = 1;
}

const NvjpegLib *nvjpeg_lib(char *reason, size_t len)
{
    pthread_mutex_lock(&g_nj.mu);
    if (!g_nj.state) nj_load();
    int ok = g_nj.state > 0;
    if (!ok && reason && len) snprintf(reason, len, "%s", g_nj.reason);
    pthread_mutex_unlock(&g_nj.mu);
    return ok ? &g_nj.lib : NULL;
}

int nvjpeg_available(char *reason, size_t len) { return nvjpeg_lib(reason, len) != NULL; }

const char *nvjpeg_status_name(nvjpegStatus_t s)
{
    static const char *names[] = {
        "NVJPEG_STATUS_SUCCESS", "NVJPEG_STATUS_NOT_INITIALIZED", "NVJPEG_STATUS_INVALID_PARAMETER",
        "NVJPEG_STATUS_BAD_JPEG", "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
        "NVJPEG_STATUS_ALLOCATOR_FAILURE", "NVJPEG_STATUS_EXECUTION_FAILED",
        "NVJPEG_STATUS_ARCH_MISMATCH", "NVJPEG_STATUS_INTERNAL_ERROR",
        "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED", "NVJPEG_STATUS_INCOMPLETE_BITSTREAM"};
    if (s >= 0 && (size_t)s < sizeof names / sizeof *names) return names[s];
    return "nvJPEG status unknown to ctrain";
}

#endif /* CTRAIN_CUDA */
