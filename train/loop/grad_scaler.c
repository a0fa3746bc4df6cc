/* grad_scaler.c — the grad scaler's host side: state allocation and the
 * launches of one step (ops/amp.h holds the kernels and their math). */
#include "grad_scaler.h"

#include <math.h>
#include <string.h>

#include "engine/error.h"
#include "engine/mem.h"
#include "ops/amp.h"

void scaler_init_ex(GradScaler *sc, Ctx *c, int enabled, float init_scale, double growth_factor,
                    double backoff_factor, int growth_interval)
{
    memset(sc, 0, sizeof *sc);
    if (enabled && !(init_scale > 0.0f && isfinite(init_scale)))
        ct_fatal("grad scaler: init_scale must be positive and finite, got %g", init_scale);
    if (enabled && !(growth_factor > 1.0 && backoff_factor > 0.0 && backoff_factor < 1.0))
        ct_fatal("grad scaler: need growth_factor > 1 and 0 < backoff_factor < 1, got %g and %g",
                 growth_factor, backoff_factor);
    if (enabled && growth_interval < 1)
        ct_fatal("grad scaler: growth_interval must be at least 1, got %d", growth_interval);
    sc->enabled = enabled;
    sc->init_scale = enabled ? init_scale : 1.0f;
    sc->growth_factor = growth_factor;
    sc->backoff_factor = backoff_factor;
    sc->growth_interval = growth_interval;
    sc->ctx = c;
    sc->st = (ScalerState *)mem_alloc(c, sizeof(ScalerState));
    sc->norm = (float *)mem_alloc(c, sizeof(float));
    sc->partial = (double *)mem_alloc(c, AMP_NORM_PARTIALS * sizeof(double));
    ScalerState s0;
    memset(&s0, 0, sizeof s0);
    s0.scale = sc->init_scale;
    mem_to_device(c, sc->st, &s0, sizeof s0);
    mem_zero(c, sc->norm, sizeof(float));
}

void scaler_init(GradScaler *sc, Ctx *c, int enabled)
{
    scaler_init_ex(sc, c, enabled, 65536.0f, 2.0, 0.5, 2000);
}

void scaler_init_for(GradScaler *sc, Ctx *c, DType autocast)
{
    scaler_init(sc, c, autocast == DT_F16);
}

void scaler_free(GradScaler *sc)
{
    if (!sc->ctx) return;
    mem_free(sc->ctx, sc->st, sizeof(ScalerState));
    mem_free(sc->ctx, sc->norm, sizeof(float));
    mem_free(sc->ctx, sc->partial, AMP_NORM_PARTIALS * sizeof(double));
    memset(sc, 0, sizeof *sc);
}

const float *scaler_scale(const GradScaler *sc) { return &sc->st->scale; }

const int *scaler_found_inf(const GradScaler *sc)
{
    return sc->enabled ? &sc->st->found_inf : NULL;
}

const float *scaler_norm(const GradScaler *sc) { return sc->norm; }

void scaler_unscale(GradScaler *sc, float *grad, size_t n)
{
    if (!sc->enabled) return;
    Ctx *c = sc->ctx;
    /* the start of the step: a clean flag whatever the last step left */
    mem_zero(c, &sc->st->found_inf, sizeof(int));
    if (c->device == DEV_CPU) {
        amp_unscale_check_cpu(grad, &sc->st->found_inf, n, &sc->st->scale);
        return;
    }
#ifdef CTRAIN_CUDA
    amp_unscale_check_cuda(grad, &sc->st->found_inf, n, &sc->st->scale, c->stream);
#endif
}

void scaler_clip(GradScaler *sc, float *grad, size_t n, float max_norm)
{
    Ctx *c = sc->ctx;
    const int *found_inf = scaler_found_inf(sc);
    if (c->device == DEV_CPU) {
        amp_clip_grad_norm_cpu(grad, sc->norm, n, max_norm, found_inf);
        return;
    }
#ifdef CTRAIN_CUDA
    amp_clip_grad_norm_cuda(grad, sc->norm, sc->partial, n, max_norm, found_inf, c->stream);
#endif
}

void scaler_update(GradScaler *sc)
{
    if (!sc->enabled) return;
    Ctx *c = sc->ctx;
    ScalerState *s = sc->st;
    if (c->device == DEV_CPU) {
        amp_scaler_update_cpu(&s->scale, &s->growth_tracker, &s->skipped, &s->found_inf,
                              sc->growth_factor, sc->backoff_factor, sc->growth_interval);
        return;
    }
#ifdef CTRAIN_CUDA
    amp_scaler_update_cuda(&s->scale, &s->growth_tracker, &s->skipped, &s->found_inf,
                           sc->growth_factor, sc->backoff_factor, sc->growth_interval,
                           c->stream);
#endif
}

void scaler_read(const GradScaler *sc, ScalerState *out, float *norm)
{
    mem_to_host(sc->ctx, out, sc->st, sizeof *out);
    if (norm) mem_to_host(sc->ctx, norm, sc->norm, sizeof(float));
}

void scaler_write(GradScaler *sc, float scale, int growth_tracker, int64_t skipped)
{
    ScalerState s;
    memset(&s, 0, sizeof s);
    s.scale = scale;
    s.growth_tracker = growth_tracker;
    s.skipped = skipped;
    mem_to_device(sc->ctx, sc->st, &s, sizeof s);
}
