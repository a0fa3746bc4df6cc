/* nvml_sampler.c — the background thread that reads an NVML device (or a
 * test's read function) every period over a timed region, and what it saw:
 * the ring of the last readings and the running aggregates (nvml.h).
 * Energy is the trapezoid integral of power over the readings' times.
 */
#include "nvml.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
