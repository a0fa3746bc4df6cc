/* bench_conditions.c — the conditions of a bench run and the warnings they
 * give (bench_conditions.h: what is read where, and each warning's rule).
 */
#include "bench_conditions.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "train/io/jsonlog.h"
#include "bench_child.h"
#include "nvml.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#define GiB (1024.0 * 1024 * 1024)
#define LOAD_SHARE 0.5         /* load average over the CPUs that counts as busy */
#define POWER_SLACK_W 1.0      /* limits that differ by less are the same */

static void read_load(double v[3])
{
    double l[3];   /* to 0.01, as /proc/loadavg (the kernel keeps 11 bits of fraction) */
    if (getloadavg(l, 3) == 3)
        for (int i = 0; i < 3; i++) v[i] = round(l[i] * 100) / 100;
    else
        v[0] = v[1] = v[2] = NAN;
}

void bench_conditions_init(BenchMachine *m)
{
    m->conditions = 1;
    nvml_device_state(NULL, &m->gpu);   /* no device: every field unknown */
    m->pcie_gen_under_load = m->pcie_width_under_load = -1;
    m->n_gpu_processes = -1;
    m->n_warnings = m->n_notes = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    m->cpu_count = cpus > 0 ? (int)cpus : -1;
    read_load(m->load_avg_start);
    m->load_avg_end[0] = m->load_avg_end[1] = m->load_avg_end[2] = NAN;
}

/* ---- The probe child: NVML. */

#ifdef CTRAIN_CUDA
/* In a container the PIDs NVML reports are the host's: /proc here would name
 * the wrong process (or none). NSpid lists a PID per namespace level. */
static int pid_namespace_nested(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 1;
    char line[256];
    int nested = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "NSpid:", 6)) {
            int n = 0;
            for (char *t = strtok(line + 6, " \t\n"); t; t = strtok(NULL, " \t\n")) n++;
            nested = n > 1;
            break;
        }
    fclose(f);
    return nested;
}

static void read_comm(unsigned int pid, char *out, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    FILE *f = fopen(path, "r");
    out[0] = 0;
    if (!f) return;
    if (!fgets(out, (int)len, f)) out[0] = 0;
    out[strcspn(out, "\n")] = 0;
    fclose(f);
}

static void add_processes(BenchMachine *m, const NvmlDevice *d, int dev, int nested)
{
    NvmlProcess p[BENCH_MAX_GPU_PROCESSES];
    int k = nvml_device_processes(d, p, BENCH_MAX_GPU_PROCESSES);
    if (k < 0) return;
    if (m->n_gpu_processes < 0) m->n_gpu_processes = 0;
    for (int i = 0; i < k; i++) {
        /* none is the bench's (no CUDA context yet); this process and its
         * parent are left out all the same, where PIDs can be compared */
        if (i < BENCH_MAX_GPU_PROCESSES && !nested &&
            (p[i].pid == (unsigned)getpid() || p[i].pid == (unsigned)getppid()))
            continue;
        if (m->n_gpu_processes < BENCH_MAX_GPU_PROCESSES && i < BENCH_MAX_GPU_PROCESSES) {
            BenchGpuProcess *g = &m->gpu_processes[m->n_gpu_processes];
            g->gpu = dev;
            g->pid = p[i].pid;
            g->used_bytes = p[i].used_bytes;
            g->name[0] = 0;
            if (!nested) read_comm(p[i].pid, g->name, sizeof g->name);
        }
        m->n_gpu_processes++;
    }
}
#endif

void bench_conditions_read_gpu(BenchMachine *m, int device, int gpus)
{
#ifdef CTRAIN_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {   /* neither creates a context */
        cudaGetLastError();
        return;
    }
    if (n <= 0 || !nvml_init()) return;
    int nested = pid_namespace_nested();
    int last = device + (gpus > 1 ? gpus : 1);
    for (int dev = device < 0 ? 0 : device; dev < last && dev < n; dev++) {
        char bus[32];
        const char *b = cudaDeviceGetPCIBusId(bus, sizeof bus, dev) == cudaSuccess ? bus : NULL;
        NvmlDevice d;
        if (!nvml_device_open(&d, dev, b)) continue;
        if (dev == device) nvml_device_state(&d, &m->gpu);
        add_processes(m, &d, dev, nested);
    }
#else
    (void)m;
    (void)device;
    (void)gpus;
#endif
}

/* ---- Over the line protocol. */

#define INT(f) {#f, offsetof(BenchMachine, gpu.f)}
static const struct { const char *key; size_t off; } COND_INTS[] = {
    INT(ecc_enabled), INT(persistence_mode), INT(pcie_gen), INT(pcie_width), INT(pcie_gen_max),
    INT(pcie_width_max), INT(nvlink_active), {"n_gpu_processes", offsetof(BenchMachine, n_gpu_processes)},
};
#undef INT

void bench_conditions_write(FILE *out, const BenchMachine *m)
{
    JsonLine j;
    json_begin(&j, "conditions");
    for (size_t i = 0; i < sizeof COND_INTS / sizeof COND_INTS[0]; i++)
        json_int(&j, COND_INTS[i].key, *(const int *)((const char *)m + COND_INTS[i].off));
    json_num(&j, "power_limit_w", m->gpu.power_limit_w);
    json_num(&j, "power_default_w", m->gpu.power_default_w);
    json_end(&j, out);
    for (int i = 0; i < m->n_gpu_processes && i < BENCH_MAX_GPU_PROCESSES; i++) {
        const BenchGpuProcess *g = &m->gpu_processes[i];
        json_begin(&j, "gpu_process");
        json_int(&j, "index", i);
        json_int(&j, "gpu", g->gpu);
        json_int(&j, "pid", g->pid);
        json_str(&j, "name", g->name);
        json_num(&j, "used_bytes", g->used_bytes);
        json_end(&j, out);
    }
}

void bench_conditions_read(BenchMachine *m, const char *line)
{
    double v;
    if (bench_line_is(line, "conditions")) {
        for (size_t i = 0; i < sizeof COND_INTS / sizeof COND_INTS[0]; i++)
            if (bench_line_num(line, COND_INTS[i].key, &v))
                *(int *)((char *)m + COND_INTS[i].off) = (int)v;
        if (bench_line_num(line, "power_limit_w", &v)) m->gpu.power_limit_w = v;
        if (bench_line_num(line, "power_default_w", &v)) m->gpu.power_default_w = v;
    } else if (bench_line_is(line, "gpu_process")) {
        if (!bench_line_num(line, "index", &v) || v < 0 || v >= BENCH_MAX_GPU_PROCESSES) return;
        BenchGpuProcess *g = &m->gpu_processes[(int)v];
        g->gpu = bench_line_num(line, "gpu", &v) ? (int)v : -1;
        g->pid = bench_line_num(line, "pid", &v) ? (int64_t)v : -1;
        if (!bench_line_str(line, "name", g->name, sizeof g->name)) g->name[0] = 0;
        g->used_bytes = bench_line_num(line, "used_bytes", &v) ? v : NAN;
    }
}

void bench_conditions_busy_pcie(BenchMachine *m, int gen, int width)
{
    if (gen > m->pcie_gen_under_load) m->pcie_gen_under_load = gen;
    if (width > m->pcie_width_under_load) m->pcie_width_under_load = width;
}

/* ---- Warnings and notes. */

static void add(char list[][BENCH_WARNING_LEN], int *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add(char list[][BENCH_WARNING_LEN], int *n, const char *fmt, ...)
{
    if (*n >= BENCH_MAX_WARNINGS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(list[*n], BENCH_WARNING_LEN, fmt, ap);
    va_end(ap);
    (*n)++;
}

static int load_busy_at_start(const BenchMachine *m)
{
    return m->cpu_count > 0 && isfinite(m->load_avg_start[0]) &&
           m->load_avg_start[0] > LOAD_SHARE * m->cpu_count;
}

/* "python3 (pid 4242, 10.5 GiB), pid 77 (2.0 GiB) and 3 more" */
static void process_list(const BenchMachine *m, char *buf, size_t len)
{
    size_t used = 0;
    int shown = m->n_gpu_processes < 4 ? m->n_gpu_processes : 3;
    buf[0] = 0;
    for (int i = 0; i < shown && i < BENCH_MAX_GPU_PROCESSES && used < len; i++) {
        const BenchGpuProcess *g = &m->gpu_processes[i];
        char mem[32] = "";
        if (isfinite(g->used_bytes)) snprintf(mem, sizeof mem, ", %.1f GiB", g->used_bytes / GiB);
        int k = g->name[0] ? snprintf(buf + used, len - used, "%s%s (pid %lld%s)", i ? ", " : "",
                                      g->name, (long long)g->pid, mem)
                           : snprintf(buf + used, len - used, "%spid %lld%s%s%s", i ? ", " : "",
                                      (long long)g->pid, mem[0] ? " (" : "", mem[0] ? mem + 2 : "",
                                      mem[0] ? ")" : "");
        if (k < 0) break;
        used += (size_t)k;
    }
    if (shown < m->n_gpu_processes && used < len)
        snprintf(buf + used, len - used, " and %d more", m->n_gpu_processes - shown);
}

void bench_conditions_start(BenchMachine *m, int gpu)
{
    if (gpu && m->n_gpu_processes > 0) {
        char who[200];
        process_list(m, who, sizeof who);
        add(m->warnings, &m->n_warnings,
            "%d other process%s on the GPU: %s; %s its SMs, memory and power, so the figures may be low",
            m->n_gpu_processes, m->n_gpu_processes == 1 ? "" : "es", who,
            m->n_gpu_processes == 1 ? "it shares" : "they share");
    }
    if (load_busy_at_start(m))
        add(m->warnings, &m->n_warnings,
            "host load average %.1f at the start, on %d CPUs: other work may slow the host's side "
            "of each step (kernel launches, the data feed)", m->load_avg_start[0], m->cpu_count);
    if (gpu && isfinite(m->gpu.power_limit_w) && isfinite(m->gpu.power_default_w) &&
        m->gpu.power_limit_w < m->gpu.power_default_w - POWER_SLACK_W)
        add(m->warnings, &m->n_warnings,
            "power limit %.0f W, below the card's default %.0f W: the figures are for the lower limit",
            m->gpu.power_limit_w, m->gpu.power_default_w);
    if (gpu && m->gpu.ecc_enabled == 1)
        add(m->notes, &m->n_notes,
            "ECC is on: the figures are with ECC (usual on data-centre cards; on cards with GDDR "
            "memory it can cost a few percent of memory bandwidth)");
    if (gpu && m->gpu.persistence_mode == 0)
        add(m->notes, &m->n_notes,
            "persistence mode is off: the driver may set the card up afresh for each benchmark "
            "process (slower start-up, not slower timed steps)");
}

void bench_conditions_end(BenchMachine *m, int gpu, double own_threads)
{
    read_load(m->load_avg_end);
    bench_conditions_judge_end(m, gpu, own_threads);
}

void bench_conditions_judge_end(BenchMachine *m, int gpu, double own_threads)
{
    if (!load_busy_at_start(m) && m->cpu_count > 0 && isfinite(m->load_avg_end[0]) &&
        m->load_avg_end[0] - own_threads > LOAD_SHARE * m->cpu_count)
        add(m->warnings, &m->n_warnings,
            "host load average %.1f at the end, on %d CPUs, of which this bench accounts for "
            "about %.0f: other work ran during the bench and may have slowed it",
            m->load_avg_end[0], m->cpu_count, own_threads);
    if (!gpu || m->gpu.pcie_gen_max <= 0 || m->gpu.pcie_width_max <= 0) return;
    int g = m->pcie_gen_under_load, w = m->pcie_width_under_load;
    if (g > 0 && w > 0) {
        if (g < m->gpu.pcie_gen_max || w < m->gpu.pcie_width_max)
            add(m->warnings, &m->n_warnings,
                "PCIe link at gen %d x%d under load, below the gen %d x%d this card and slot allow: "
                "host-device copies (the data feed, multi-GPU traffic through the host) are slower",
                g, w, m->gpu.pcie_gen_max, m->gpu.pcie_width_max);
    } else if (m->gpu.pcie_width > 0 && m->gpu.pcie_width < m->gpu.pcie_width_max) {
        add(m->warnings, &m->n_warnings,
            "PCIe link x%d at the start, below the x%d this card and slot allow (not read under "
            "load): host-device copies (the data feed, multi-GPU traffic through the host) are slower",
            m->gpu.pcie_width, m->gpu.pcie_width_max);
    }
}

void bench_conditions_print(const BenchMachine *m, int w0, int n0, FILE *out)
{
    for (int i = w0; i < m->n_warnings; i++) fprintf(out, "bench: warning: %s\n", m->warnings[i]);
    for (int i = n0; i < m->n_notes; i++) fprintf(out, "bench: note: %s\n", m->notes[i]);
    fflush(out);
}
