/* nvml.c — NVML through dlopen: the device readings, the standing state
 * (ECC, power limits, PCIe, NVLink) and the process list. The background
 * sampler thread is nvml_sampler.c.
 *
 * The library handle and its function pointers are process-wide state (NVML
 * itself is: nvmlInit is reference counted per process). Everything a caller
 * holds (NvmlDevice, NvmlSampler) is its own struct.
 */
#include "nvml.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/settings.h"

/* ---- The few NVML types used, declared here to mirror NVML's ABI
 * (nvml.h, stable since NVML 5): return codes are a C enum (int), a device
 * is an opaque pointer, enum arguments are ints, nvmlMemory_t is three
 * unsigned long longs in this order. */
typedef int nvmlReturn_t;                    /* NVML_SUCCESS = 0 */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlMemory_st {
    unsigned long long total, free, used;    /* bytes */
} nvmlMemory_t;
enum { NVML_SUCCESS = 0, NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_INSUFFICIENT_SIZE = 7 };
enum { NVML_TEMPERATURE_GPU = 0 };                 /* nvmlTemperatureSensors_t */
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 }; /* nvmlClockType_t */
enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };          /* nvmlEnableState_t */
#define NVML_DEVICE_NAME_BUFFER 96                 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define NVML_DRIVER_VERSION_BUFFER 80              /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */
#define NVML_NVLINK_MAX_LINKS 18                   /* links 0..17 (fewer on older drivers) */
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ull)       /* a process's memory, not reported */
/* The running-process lists. Every version starts {unsigned pid; unsigned
 * long long usedGpuMemory}; what follows, and so the stride, differs:
 * nvmlDeviceGetComputeRunningProcesses (v1) 16 bytes; _v2 and _v3 add
 * gpuInstanceId and computeInstanceId, 24 bytes; but the drivers whose
 * header was CUDA 12.0's / 12.1's (they have nvmlDeviceGetConfComputeMemSizeInfo
 * and not yet nvmlDeviceGetRunningProcessDetailList) write one more unsigned
 * long long (usedGpuCcProtectedMemory) in _v3, 32 bytes. The buffer is
 * always sized for the largest, so a wrong guess misreads, never overruns. */
typedef struct nvmlProcessInfo_v1 {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1;
#define NVML_PROCESS_INFO_MAX_BYTES 32

static struct {
    int state;                /* 0 not tried, 1 usable, -1 unavailable */
    void *lib;
    char reason[320];
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*by_pci)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);              /* mW */
    nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int *);   /* C */
    nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);         /* MHz */
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*driver)(char *, unsigned int);
    nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned int *);        /* mW */
    /* the standing state (nvml_device_state) */
    nvmlReturn_t (*enforced_limit)(nvmlDevice_t, unsigned int *);     /* mW */
    nvmlReturn_t (*default_limit)(nvmlDevice_t, unsigned int *);      /* mW */
    nvmlReturn_t (*ecc_mode)(nvmlDevice_t, int *, int *);             /* current, pending */
    nvmlReturn_t (*persistence)(nvmlDevice_t, int *);
    nvmlReturn_t (*pcie_gen)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*pcie_width)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*pcie_gen_max)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*pcie_width_max)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned int, int *);  /* link, is active */
    nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int *, void *);  /* count in/out, infos */
    size_t process_stride;    /* bytes per entry of what `processes` writes */
} g_nvml;

static const char *nvml_err(nvmlReturn_t r)
{
    static char buf[32];
    if (g_nvml.error_string) return g_nvml.error_string(r);
    snprintf(buf, sizeof buf, "NVML error %d", r);
    return buf;
}

/* dlsym into a function pointer without the object/function pointer cast
 * that ISO C leaves undefined (POSIX guarantees the representation). */
static int sym(void *fnptr, const char *name)
{
    void *p = dlsym(g_nvml.lib, name);
    memcpy(fnptr, &p, sizeof p);
    return p != NULL;
}

static int nvml_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int nvml_fail(const char *fmt, ...)
{
    char reason[sizeof g_nvml.reason];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (g_nvml.lib) dlclose(g_nvml.lib);
    memset(&g_nvml, 0, sizeof g_nvml);
    memcpy(g_nvml.reason, reason, sizeof reason);
    g_nvml.state = -1;
    return 0;
}

int nvml_init(void)
{
    if (g_nvml.state) return g_nvml.state > 0;
    const char *path = setting_str(SET_NVML_LIB);   /* default libnvidia-ml.so.1 */
    g_nvml.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g_nvml.lib) {
        const char *e = dlerror();
        return nvml_fail("cannot load %s (%s): no NVIDIA driver here? power, temperature "
                         "and clocks are not reported", path, e ? e : "unknown error");
    }
    static const char *required[] = {"nvmlInit_v2", "nvmlShutdown",
                                     "nvmlDeviceGetHandleByIndex_v2"};
    void *fns[] = {&g_nvml.init, &g_nvml.shutdown, &g_nvml.by_index};
    for (int i = 0; i < 3; i++)
        if (!sym(fns[i], required[i]))
            return nvml_fail("%s has no %s: not NVIDIA's NVML, or one too old", path, required[i]);
    /* Optional: a missing one only leaves its field unmeasured. */
    sym(&g_nvml.error_string, "nvmlErrorString");
    sym(&g_nvml.by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    sym(&g_nvml.power, "nvmlDeviceGetPowerUsage");
    sym(&g_nvml.temperature, "nvmlDeviceGetTemperature");
    sym(&g_nvml.clock, "nvmlDeviceGetClockInfo");
    sym(&g_nvml.memory, "nvmlDeviceGetMemoryInfo");
    /* Renamed in driver 535 (CUDA 12.2); the old name is kept as an alias. */
    if (!sym(&g_nvml.reasons, "nvmlDeviceGetCurrentClocksEventReasons"))
        sym(&g_nvml.reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    sym(&g_nvml.name, "nvmlDeviceGetName");
    sym(&g_nvml.driver, "nvmlSystemGetDriverVersion");
    sym(&g_nvml.power_limit, "nvmlDeviceGetPowerManagementLimit");
    sym(&g_nvml.enforced_limit, "nvmlDeviceGetEnforcedPowerLimit");
    sym(&g_nvml.default_limit, "nvmlDeviceGetPowerManagementDefaultLimit");
    sym(&g_nvml.ecc_mode, "nvmlDeviceGetEccMode");
    sym(&g_nvml.persistence, "nvmlDeviceGetPersistenceMode");
    sym(&g_nvml.pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
    sym(&g_nvml.pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
    sym(&g_nvml.pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration");
    sym(&g_nvml.pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth");
    sym(&g_nvml.nvlink_state, "nvmlDeviceGetNvLinkState");
    if (sym(&g_nvml.processes, "nvmlDeviceGetComputeRunningProcesses_v3")) {
        void *cc = dlsym(g_nvml.lib, "nvmlDeviceGetConfComputeMemSizeInfo");
        void *detail = dlsym(g_nvml.lib, "nvmlDeviceGetRunningProcessDetailList");
        g_nvml.process_stride = cc && !detail ? 32 : 24;
    } else if (sym(&g_nvml.processes, "nvmlDeviceGetComputeRunningProcesses_v2")) {
        g_nvml.process_stride = 24;
    } else if (sym(&g_nvml.processes, "nvmlDeviceGetComputeRunningProcesses")) {
        g_nvml.process_stride = sizeof(nvmlProcessInfo_v1);
    }
    nvmlReturn_t r = g_nvml.init();
    if (r != NVML_SUCCESS) {
        char code[160];
        snprintf(code, sizeof code, "%s", nvml_err(r));
        return nvml_fail("nvmlInit failed: %s (is the NVIDIA driver loaded?)", code);
    }
    g_nvml.state = 1;
    g_nvml.reason[0] = 0;
    return 1;
}

int nvml_available(void) { return g_nvml.state > 0; }

const char *nvml_reason(void)
{
    if (g_nvml.state == 0) return "not initialized (nvml_init was not called)";
    return g_nvml.reason;
}

void nvml_shutdown(void)
{
    if (g_nvml.state > 0) g_nvml.shutdown();
    if (g_nvml.lib) dlclose(g_nvml.lib);
    memset(&g_nvml, 0, sizeof g_nvml);
}

int nvml_driver_version(char *buf, size_t len)
{
    char v[NVML_DRIVER_VERSION_BUFFER] = "";
    if (len) buf[0] = 0;
    if (!nvml_available() || !g_nvml.driver || g_nvml.driver(v, sizeof v) != NVML_SUCCESS)
        return -1;
    snprintf(buf, len, "%s", v);
    return 0;
}

int nvml_device_open(NvmlDevice *d, int cuda_index, const char *pci_bus_id)
{
    memset(d, 0, sizeof *d);
    d->index = -1;
    d->power_limit_w = NAN;
    d->mem_total_bytes = NAN;
    if (!nvml_init()) return 0;
    nvmlDevice_t h = NULL;
    nvmlReturn_t r;
    if (pci_bus_id && *pci_bus_id && g_nvml.by_pci) {
        r = g_nvml.by_pci(pci_bus_id, &h);
        if (r != NVML_SUCCESS) {
            snprintf(g_nvml.reason, sizeof g_nvml.reason, "no NVML device at PCI bus id %s: %s",
                     pci_bus_id, nvml_err(r));
            return 0;
        }
    } else {
        r = g_nvml.by_index((unsigned)(cuda_index < 0 ? 0 : cuda_index), &h);
        if (r != NVML_SUCCESS) {
            snprintf(g_nvml.reason, sizeof g_nvml.reason, "no NVML device %d: %s", cuda_index,
                     nvml_err(r));
            return 0;
        }
        d->index = cuda_index < 0 ? 0 : cuda_index;
    }
    d->handle = h;
    char name[NVML_DEVICE_NAME_BUFFER] = "";
    if (g_nvml.name && g_nvml.name(h, name, sizeof name) == NVML_SUCCESS)
        snprintf(d->name, sizeof d->name, "%s", name);
    unsigned int mw = 0;
    if (g_nvml.power_limit && g_nvml.power_limit(h, &mw) == NVML_SUCCESS)
        d->power_limit_w = mw / 1000.0;
    nvmlMemory_t m;
    if (g_nvml.memory && g_nvml.memory(h, &m) == NVML_SUCCESS) d->mem_total_bytes = (double)m.total;
    return 1;
}

int nvml_device_sample(const NvmlDevice *d, NvmlSample *s)
{
    s->t_s = 0;
    s->power_w = s->temp_c = s->sm_clock_mhz = s->mem_clock_mhz = s->mem_used_bytes = NAN;
    s->throttle = -1;
    if (!d || !d->handle || !nvml_available()) return 0;
    nvmlDevice_t h = (nvmlDevice_t)d->handle;
    int n = 0;
    unsigned int u = 0;
    if (g_nvml.power && g_nvml.power(h, &u) == NVML_SUCCESS) { s->power_w = u / 1000.0; n++; }
    if (g_nvml.temperature && g_nvml.temperature(h, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS) {
        s->temp_c = u;
        n++;
    }
    if (g_nvml.clock && g_nvml.clock(h, NVML_CLOCK_SM, &u) == NVML_SUCCESS) {
        s->sm_clock_mhz = u;
        n++;
    }
    if (g_nvml.clock && g_nvml.clock(h, NVML_CLOCK_MEM, &u) == NVML_SUCCESS) {
        s->mem_clock_mhz = u;
        n++;
    }
    nvmlMemory_t m;
    if (g_nvml.memory && g_nvml.memory(h, &m) == NVML_SUCCESS) {
        s->mem_used_bytes = (double)m.used;
        n++;
    }
    unsigned long long rs = 0;
    if (g_nvml.reasons && g_nvml.reasons(h, &rs) == NVML_SUCCESS) {
        s->throttle = (int64_t)rs;
        n++;
    }
    return n;
}

/* ---- The standing state and the process list. */

/* An unsigned reading through fn into *out (-1 when unknown); 1 when read. */
static int read_uint(nvmlReturn_t (*fn)(nvmlDevice_t, unsigned int *), nvmlDevice_t h, int *out)
{
    unsigned int u = 0;
    *out = -1;
    if (!fn || fn(h, &u) != NVML_SUCCESS) return 0;
    *out = (int)u;
    return 1;
}

void nvml_device_pcie(const NvmlDevice *d, int *gen, int *width)
{
    *gen = *width = -1;
    if (!d || !d->handle || !nvml_available()) return;
    read_uint(g_nvml.pcie_gen, (nvmlDevice_t)d->handle, gen);
    read_uint(g_nvml.pcie_width, (nvmlDevice_t)d->handle, width);
}

int nvml_device_state(const NvmlDevice *d, NvmlState *st)
{
    st->ecc_enabled = st->persistence_mode = st->nvlink_active = -1;
    st->pcie_gen = st->pcie_width = st->pcie_gen_max = st->pcie_width_max = -1;
    st->power_limit_w = st->power_default_w = NAN;
    if (!d || !d->handle || !nvml_available()) return 0;
    nvmlDevice_t h = (nvmlDevice_t)d->handle;
    int n = 0, on = 0, pending = 0, mw = -1;
    if (g_nvml.ecc_mode && g_nvml.ecc_mode(h, &on, &pending) == NVML_SUCCESS) {
        st->ecc_enabled = on == NVML_FEATURE_ENABLED;
        n++;
    }
    if (g_nvml.persistence && g_nvml.persistence(h, &on) == NVML_SUCCESS) {
        st->persistence_mode = on == NVML_FEATURE_ENABLED;
        n++;
    }
    /* the enforced limit is the lowest of the set limits; older drivers lack it */
    if (read_uint(g_nvml.enforced_limit, h, &mw) || read_uint(g_nvml.power_limit, h, &mw)) {
        st->power_limit_w = mw / 1000.0;
        n++;
    }
    if (read_uint(g_nvml.default_limit, h, &mw)) { st->power_default_w = mw / 1000.0; n++; }
    n += read_uint(g_nvml.pcie_gen, h, &st->pcie_gen);
    n += read_uint(g_nvml.pcie_width, h, &st->pcie_width);
    n += read_uint(g_nvml.pcie_gen_max, h, &st->pcie_gen_max);
    n += read_uint(g_nvml.pcie_width_max, h, &st->pcie_width_max);
    /* A PCIe card answers NOT_SUPPORTED; links past the card's last answer an
     * error too. Any link that answers means the card has NVLink. */
    int answered = 0, active = 0;
    for (unsigned int link = 0; g_nvml.nvlink_state && link < NVML_NVLINK_MAX_LINKS; link++) {
        nvmlReturn_t r = g_nvml.nvlink_state(h, link, &on);
        if (r == NVML_ERROR_NOT_SUPPORTED && !answered) break;
        if (r != NVML_SUCCESS) continue;
        answered = 1;
        active += on == NVML_FEATURE_ENABLED;
    }
    if (answered) { st->nvlink_active = active; n++; }
    return n;
}

int nvml_device_processes(const NvmlDevice *d, NvmlProcess *out, int max)
{
    if (!d || !d->handle || !nvml_available() || !g_nvml.processes) return -1;
    unsigned int cap = 64;
    for (int attempt = 0; attempt < 3; attempt++) {
        unsigned char *buf = (unsigned char *)calloc(cap, NVML_PROCESS_INFO_MAX_BYTES);
        if (!buf) return -1;
        unsigned int n = cap;
        nvmlReturn_t r = g_nvml.processes((nvmlDevice_t)d->handle, &n, buf);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE) {   /* n: how many there are now */
            free(buf);
            cap = n + 16;
            continue;
        }
        if (r != NVML_SUCCESS || n > cap) { free(buf); return -1; }
        for (unsigned int i = 0; i < n && (int)i < max; i++) {
            nvmlProcessInfo_v1 p;   /* the common head of every version */
            memcpy(&p, buf + i * g_nvml.process_stride, sizeof p);
            out[i].pid = p.pid;
            out[i].used_bytes = p.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE_ULL ? NAN
                                                                             : (double)p.usedGpuMemory;
        }
        free(buf);
        return (int)n;
    }
    return -1;
}

const char *nvml_throttle_names(int64_t reasons, char *buf, size_t len)
{
    static const struct { uint64_t bit; const char *name; } names[] = {
        {NVML_THROTTLE_GPU_IDLE, "gpu_idle"},
        {NVML_THROTTLE_APP_CLOCKS, "app_clocks_setting"},
        {NVML_THROTTLE_SW_POWER_CAP, "sw_power_cap"},
        {NVML_THROTTLE_HW_SLOWDOWN, "hw_slowdown"},
        {NVML_THROTTLE_SYNC_BOOST, "sync_boost"},
        {NVML_THROTTLE_SW_THERMAL, "sw_thermal"},
        {NVML_THROTTLE_HW_THERMAL, "hw_thermal"},
        {NVML_THROTTLE_HW_POWER_BRAKE, "hw_power_brake"},
        {NVML_THROTTLE_DISPLAY_CLOCKS, "display_clocks_setting"},
    };
    if (!len) return buf;
    buf[0] = 0;
    if (reasons < 0) return buf;
    uint64_t r = (uint64_t)reasons, known = 0;
    size_t used = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        known |= names[i].bit;
        if (!(r & names[i].bit)) continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? "," : "", names[i].name);
        if (n < 0 || (size_t)n >= len - used) return buf;
        used += (size_t)n;
    }
    if (r & ~known) {
        int n = snprintf(buf + used, len - used, "%sother_0x%llx", used ? "," : "",
                         (unsigned long long)(r & ~known));
        if (n > 0 && (size_t)n < len - used) used += (size_t)n;
    }
    if (!used) snprintf(buf, len, "none");
    return buf;
}
