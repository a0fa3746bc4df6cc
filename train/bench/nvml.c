/* nvml.c — NVML through dlopen, and the background sampler thread.
 *
 * The library handle and its function pointers are process-wide state (NVML
 * itself is: nvmlInit is reference counted per process). Everything a caller
 * holds (NvmlDevice, NvmlSampler) is its own struct.
 */
#include "nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
enum { NVML_SUCCESS = 0 };
enum { NVML_TEMPERATURE_GPU = 0 };                 /* nvmlTemperatureSensors_t */
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 }; /* nvmlClockType_t */
#define NVML_DEVICE_NAME_BUFFER 96                 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define NVML_DRIVER_VERSION_BUFFER 80              /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */

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

/* ---- The sampler thread. */

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int read_device(void *ctx, NvmlSample *s) { return nvml_device_sample(ctx, s); }

/* Fold one reading into the ring and the running aggregates (mu held). */
static void sampler_record(NvmlSampler *s, const NvmlSample *x)
{
    if (!s->count) s->first_t = x->t_s;
    s->ring[s->count % s->capacity] = *x;
    s->count++;
    if (isfinite(x->power_w)) {
        if (s->n_power > 0 && x->t_s > s->last_power_t)
            s->energy += 0.5 * (x->power_w + s->last_power) * (x->t_s - s->last_power_t);
        s->sum_power += x->power_w;
        s->max_power = s->n_power ? fmax(s->max_power, x->power_w) : x->power_w;
        s->last_power = x->power_w;
        s->last_power_t = x->t_s;
        s->n_power++;
    }
    if (isfinite(x->temp_c)) {
        s->sum_temp += x->temp_c;
        s->max_temp = s->n_temp ? fmax(s->max_temp, x->temp_c) : x->temp_c;
        s->n_temp++;
    }
    if (isfinite(x->sm_clock_mhz)) {
        s->sum_clock += x->sm_clock_mhz;
        s->min_clock = s->n_clock ? fmin(s->min_clock, x->sm_clock_mhz) : x->sm_clock_mhz;
        s->max_clock = s->n_clock ? fmax(s->max_clock, x->sm_clock_mhz) : x->sm_clock_mhz;
        s->n_clock++;
    }
    if (isfinite(x->mem_used_bytes))
        s->max_mem = isfinite(s->max_mem) ? fmax(s->max_mem, x->mem_used_bytes) : x->mem_used_bytes;
    if (x->throttle >= 0) {
        s->throttle_or = (s->throttle_or < 0 ? 0 : s->throttle_or) | x->throttle;
        if ((uint64_t)x->throttle & NVML_THROTTLE_SLOWDOWN_MASK) s->throttled++;
    }
}

static void take_reading(NvmlSampler *s)
{
    NvmlSample x;
    s->read(s->ctx, &x);
    x.t_s = mono_now() - s->t0;
    pthread_mutex_lock(&s->mu);
    sampler_record(s, &x);
    pthread_mutex_unlock(&s->mu);
}

static void *sampler_main(void *arg)
{
    NvmlSampler *s = arg;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    for (;;) {
        take_reading(s);
        deadline.tv_nsec += (long)s->period_ms * 1000000L;
        deadline.tv_sec += deadline.tv_nsec / 1000000000L;
        deadline.tv_nsec %= 1000000000L;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > deadline.tv_sec ||
            (now.tv_sec == deadline.tv_sec && now.tv_nsec > deadline.tv_nsec))
            deadline = now;     /* a slow read: do not try to catch up */
        pthread_mutex_lock(&s->mu);
        int rc = 0;
        while (!s->stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&s->cv, &s->mu, &deadline);
        int stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
    }
    take_reading(s);            /* the end of the region, however short it was */
    return NULL;
}

int nvml_sampler_start_fn(NvmlSampler *s, NvmlReadFn read, void *ctx, int period_ms,
                          size_t capacity)
{
    memset(s, 0, sizeof *s);
    s->read = read;
    s->ctx = ctx;
    s->period_ms = period_ms > 0 ? period_ms : 100;
    s->capacity = capacity ? capacity : 4096;
    s->max_mem = NAN;
    s->throttle_or = -1;
    s->ring = calloc(s->capacity, sizeof *s->ring);
    if (!s->ring) return 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->mu, NULL);
    s->inited = 1;
    if (!read) return 0;
    s->t0 = mono_now();
    if (pthread_create(&s->thread, NULL, sampler_main, s) != 0) return 0;
    s->running = 1;
    return 1;
}

int nvml_sampler_start(NvmlSampler *s, const NvmlDevice *d, int period_ms)
{
    int ok = d && d->handle && nvml_available();
    /* Unavailable: set up an idle sampler so stop/summary/free still work. */
    return nvml_sampler_start_fn(s, ok ? read_device : NULL, (void *)d, period_ms, ok ? 0 : 1);
}

void nvml_sampler_stop(NvmlSampler *s)
{
    if (!s->inited || !s->running) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->running = 0;
}

int nvml_sampler_latest(NvmlSampler *s, NvmlSample *out)
{
    if (!s->inited) return 0;
    pthread_mutex_lock(&s->mu);
    int have = s->count > 0;
    if (have) *out = s->ring[(s->count - 1) % s->capacity];
    pthread_mutex_unlock(&s->mu);
    return have;
}

size_t nvml_sampler_copy(NvmlSampler *s, NvmlSample *out, size_t max)
{
    if (!s->inited) return 0;
    pthread_mutex_lock(&s->mu);
    size_t held = s->count < s->capacity ? s->count : s->capacity;
    size_t n = held < max ? held : max;
    size_t first = s->count - n;    /* the newest n, oldest first */
    for (size_t i = 0; i < n; i++) out[i] = s->ring[(first + i) % s->capacity];
    pthread_mutex_unlock(&s->mu);
    return n;
}

void nvml_sampler_summary(NvmlSampler *s, NvmlSummary *sum)
{
    memset(sum, 0, sizeof *sum);
    sum->duration_s = sum->power_avg_w = sum->power_peak_w = sum->energy_j = NAN;
    sum->temp_avg_c = sum->temp_max_c = NAN;
    sum->sm_clock_avg_mhz = sum->sm_clock_min_mhz = sum->sm_clock_max_mhz = NAN;
    sum->mem_used_max_bytes = NAN;
    sum->throttle_seen = -1;
    if (!s->inited) return;
    pthread_mutex_lock(&s->mu);
    sum->samples = (int)s->count;
    if (s->count) sum->duration_s = s->ring[(s->count - 1) % s->capacity].t_s - s->first_t;
    if (s->n_power) {
        sum->power_avg_w = s->sum_power / s->n_power;
        sum->power_peak_w = s->max_power;
        if (s->n_power > 1) sum->energy_j = s->energy;
    }
    if (s->n_temp) {
        sum->temp_avg_c = s->sum_temp / s->n_temp;
        sum->temp_max_c = s->max_temp;
    }
    if (s->n_clock) {
        sum->sm_clock_avg_mhz = s->sum_clock / s->n_clock;
        sum->sm_clock_min_mhz = s->min_clock;
        sum->sm_clock_max_mhz = s->max_clock;
    }
    sum->mem_used_max_bytes = s->max_mem;
    sum->throttle_seen = s->throttle_or;
    sum->throttled_samples = s->throttled;
    pthread_mutex_unlock(&s->mu);
    if (sum->throttle_seen >= 0)
        nvml_throttle_names((int64_t)((uint64_t)sum->throttle_seen & NVML_THROTTLE_SLOWDOWN_MASK),
                            sum->throttle_names, sizeof sum->throttle_names);
}

void nvml_sampler_free(NvmlSampler *s)
{
    if (!s->inited) return;
    nvml_sampler_stop(s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->ring);
    memset(s, 0, sizeof *s);
}
