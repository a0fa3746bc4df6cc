/* nvml.h — GPU power, temperature, clocks and throttling through NVML, loaded
 * at run time with dlopen("libnvidia-ml.so.1"), so the build needs no NVML
 * header and a machine without the NVIDIA driver still runs everything else.
 *
 * Never fatal: when the library is missing, a symbol is missing, nvmlInit
 * fails or the device cannot be found, nvml_available() is 0 and
 * nvml_reason() says why; every reading is then NaN ("not measured", never 0)
 * and the sampler start/stop pair does nothing.
 *
 *   nvml_init();                                   once, from the main thread
 *   NvmlDevice d; nvml_device_open(&d, cuda_index, pci_bus_id);
 *   NvmlSampler s; nvml_sampler_start(&s, &d, 100);  a thread reads every 100 ms
 *   ... timed region ...
 *   nvml_sampler_stop(&s);
 *   NvmlSummary sum; nvml_sampler_summary(&s, &sum);  avg/peak power, temp, clocks
 *   nvml_sampler_free(&s); nvml_shutdown();
 *
 * Beside the readings, what the card stands in (read once, nvml.c): ECC,
 * persistence mode, the enforced and default power limits, the PCIe link
 * (now and its maximum), the NVLinks up (NvmlState, nvml_device_state), and
 * the processes with a compute context on it (nvml_device_processes). The
 * sampler thread is nvml_sampler.c.
 *
 * CUDA device -> NVML device: NVML numbers devices in PCI bus order, CUDA in
 * "fastest first" order unless CUDA_DEVICE_ORDER=PCI_BUS_ID, and
 * CUDA_VISIBLE_DEVICES renumbers CUDA's devices but not NVML's. The reliable
 * key is the PCI bus id (cudaDeviceGetPCIBusId): pass it and it is used;
 * pass NULL and the CUDA index is taken as the NVML index, which is right on
 * one-GPU machines and when both orders agree.
 *
 * Threads: NVML is thread-safe; the sampler reads from its own thread. Stop
 * every sampler before nvml_shutdown, and do not copy or move an NvmlSampler
 * while it runs (its thread holds its address).
 *
 * Units: power W (NVML reports mW; on Ampere and later nvmlDeviceGetPowerUsage
 * is NVML's own ~1 s running average, so "peak" is the peak of that average),
 * temperature C, clocks MHz, memory bytes (device-wide, all processes).
 */
#ifndef CTRAIN_TRAIN_NVML_H
#define CTRAIN_TRAIN_NVML_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Throttle ("clocks event") reason bits, mirroring NVML's
 * nvmlClocksThrottleReason* / nvmlClocksEventReason* constants. */
#define NVML_THROTTLE_GPU_IDLE            0x0000000000000001ull
#define NVML_THROTTLE_APP_CLOCKS          0x0000000000000002ull
#define NVML_THROTTLE_SW_POWER_CAP        0x0000000000000004ull
#define NVML_THROTTLE_HW_SLOWDOWN         0x0000000000000008ull
#define NVML_THROTTLE_SYNC_BOOST          0x0000000000000010ull
#define NVML_THROTTLE_SW_THERMAL          0x0000000000000020ull
#define NVML_THROTTLE_HW_THERMAL          0x0000000000000040ull
#define NVML_THROTTLE_HW_POWER_BRAKE      0x0000000000000080ull
#define NVML_THROTTLE_DISPLAY_CLOCKS      0x0000000000000100ull
/* Reasons that mean "the clocks were held below what the load asked for".
 * Idle is not throttling, and application-clock settings are a user choice. */
#define NVML_THROTTLE_SLOWDOWN_MASK                                            \
    (NVML_THROTTLE_SW_POWER_CAP | NVML_THROTTLE_HW_SLOWDOWN |                  \
     NVML_THROTTLE_SYNC_BOOST | NVML_THROTTLE_SW_THERMAL |                     \
     NVML_THROTTLE_HW_THERMAL | NVML_THROTTLE_HW_POWER_BRAKE)

/* One reading. Fields NaN (or throttle -1) when that call failed. */
typedef struct NvmlSample {
    double t_s;              /* seconds since the sampler started */
    double power_w;
    double temp_c;
    double sm_clock_mhz;
    double mem_clock_mhz;
    double mem_used_bytes;
    int64_t throttle;        /* reason bits; -1 when unknown */
} NvmlSample;

typedef struct NvmlDevice {
    void *handle;            /* nvmlDevice_t; NULL when not opened */
    int index;               /* NVML index used (or -1 when found by bus id) */
    char name[96];           /* NVML's name, "" when unknown */
    double power_limit_w;    /* NaN when unknown */
    double mem_total_bytes;  /* NaN when unknown */
} NvmlDevice;

/* Load the library and call nvmlInit_v2. Returns 1 when NVML is usable.
 * Idempotent. Not thread-safe: call it from the main thread before starting
 * samplers. CTRAIN_NVML_LIB overrides the library path (for tests). */
int nvml_init(void);
int nvml_available(void);
/* Why NVML is unavailable ("" when it is available, "not initialized" before
 * nvml_init). */
const char *nvml_reason(void);
/* nvmlShutdown + dlclose; nvml_init may be called again afterwards. */
void nvml_shutdown(void);

/* Driver version string ("580.65.06") into buf; 0 on success, -1 if unknown
 * (buf is then ""). */
int nvml_driver_version(char *buf, size_t len);

/* Find the NVML device for a CUDA device: by PCI bus id ("0000:3B:00.0", as
 * cudaDeviceGetPCIBusId writes it) when bus_id is non-NULL, else by index.
 * Returns 1 on success; 0 otherwise (d->handle NULL, and nvml_reason() holds
 * the message). */
int nvml_device_open(NvmlDevice *d, int cuda_index, const char *pci_bus_id);

/* Read every field once (t_s = 0). Returns the number of fields read
 * (0 when the device is not open). Safe to call from any thread. */
int nvml_device_sample(const NvmlDevice *d, NvmlSample *s);

/* ---- The card's standing state (the bench's machine record, bench_conditions.h).
 * Read once; a field the card or driver does not report is -1 (ints) or NaN. */
typedef struct NvmlState {
    int ecc_enabled;         /* current ECC mode: 1 on, 0 off */
    int persistence_mode;    /* 1 on, 0 off */
    double power_limit_w;    /* the enforced power limit */
    double power_default_w;  /* the card's default power limit */
    int pcie_gen, pcie_width;          /* the link now (an idle card lowers its generation) */
    int pcie_gen_max, pcie_width_max;  /* the most this card in this slot can run */
    int nvlink_active;       /* NVLinks up; -1 when the card has none (or NVML cannot say) */
} NvmlState;

/* Fill st for an open device (d NULL or not open: every field unknown);
 * returns the number of fields read. */
int nvml_device_state(const NvmlDevice *d, NvmlState *st);
/* The PCIe link now: generation and width, -1 each when unknown. */
void nvml_device_pcie(const NvmlDevice *d, int *gen, int *width);

/* A process with a compute context on the device. */
typedef struct NvmlProcess {
    unsigned int pid;        /* as NVML reports it (the host's PID namespace) */
    double used_bytes;       /* its device memory; NaN when not reported */
} NvmlProcess;
/* The compute processes on the device, at most max into out. Returns how
 * many there are (may be more than max), or -1 when NVML cannot list them. */
int nvml_device_processes(const NvmlDevice *d, NvmlProcess *out, int max);

/* Names of the reason bits set in `reasons`, joined by ",", e.g.
 * "sw_power_cap,hw_thermal"; "none" when no bit is set; "" for -1. */
const char *nvml_throttle_names(int64_t reasons, char *buf, size_t len);

/* Read function the sampler calls; the default reads an NvmlDevice. Tests
 * pass their own to drive the thread without a GPU. Returns fields read. */
typedef int (*NvmlReadFn)(void *ctx, NvmlSample *s);

/* What the sampler saw between start and stop. NaN when nothing was read. */
typedef struct NvmlSummary {
    int samples;             /* readings taken */
    double duration_s;       /* first reading to last */
    double power_avg_w, power_peak_w;
    double energy_j;         /* trapezoid integral of power over time */
    double temp_avg_c, temp_max_c;
    double sm_clock_avg_mhz, sm_clock_min_mhz, sm_clock_max_mhz;
    double mem_used_max_bytes;
    int64_t throttle_seen;   /* OR of every reading's reasons; -1 unknown */
    int throttled_samples;   /* readings with a slowdown reason set */
    char throttle_names[160];/* names of throttle_seen & SLOWDOWN_MASK, "none" */
} NvmlSummary;

/* Running aggregates plus a ring of the last `capacity` readings (the
 * summary covers every reading, not just those still in the ring). */
typedef struct NvmlSampler {
    NvmlReadFn read;
    void *ctx;
    int period_ms;
    int inited;              /* mu, cv and ring are set up */
    int running;             /* a thread is alive */
    int stop;                /* guarded by mu */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double t0;               /* monotonic start time */
    NvmlSample *ring;
    size_t capacity, count;  /* count: readings taken in total */
    /* aggregates (guarded by mu) */
    int n_power, n_temp, n_clock;
    double sum_power, max_power, energy, sum_temp, max_temp;
    double sum_clock, min_clock, max_clock, max_mem;
    double first_t, last_power_t, last_power;
    int64_t throttle_or;
    int throttled;
} NvmlSampler;

/* Start sampling `d` every period_ms (<= 0: 100 ms). Returns 1 when a thread
 * runs; 0 when NVML or the device is unavailable (then stop/summary/free are
 * harmless no-ops and the summary is all NaN). */
int nvml_sampler_start(NvmlSampler *s, const NvmlDevice *d, int period_ms);
/* Same with any read function (tests); capacity 0 means 4096 readings. */
int nvml_sampler_start_fn(NvmlSampler *s, NvmlReadFn read, void *ctx, int period_ms,
                          size_t capacity);
/* Stop and join the thread (returns at once, not after a period). */
void nvml_sampler_stop(NvmlSampler *s);
/* The latest reading; 0 when none yet. Safe while running. */
int nvml_sampler_latest(NvmlSampler *s, NvmlSample *out);
/* Readings still in the ring, oldest first, into out[max]; returns how many. */
size_t nvml_sampler_copy(NvmlSampler *s, NvmlSample *out, size_t max);
void nvml_sampler_summary(NvmlSampler *s, NvmlSummary *sum);
void nvml_sampler_free(NvmlSampler *s);

#endif
