/* grad_scaler.h — dynamic loss scaling for f16 training (torch.amp.GradScaler
 * semantics) and gradient clipping by global norm, all on the device.
 *
 * One optimizer step under f16 autocast:
 *   backward seeded with the loss times scale      (scaler_scale(): device f32)
 *   scaler_unscale(sc, grad, n)     clear found_inf; g *= 1/scale; found_inf if any inf/nan
 *   scaler_clip(sc, grad, n, 1.0)   optional: global norm, g *= min(1, max/(norm+1e-6))
 *   optimizer step with skip = scaler_found_inf(sc)   (a no-op when set)
 *   scaler_update(sc)               scale x0.5 on overflow, x2 after 2000 clean steps
 * Nothing here synchronizes the host or allocates after init, and every
 * value that changes per step lives in device memory, so the sequence can be
 * captured once into a CUDA graph and replayed. The host reads the state
 * (scaler_read) only when it syncs anyway, e.g. for the progress line.
 *
 * found_inf is cleared at the START of each step, by scaler_unscale (a
 * memset, which graphs capture as a node), not by the update: after the
 * step it still tells whether the step was skipped, and a replay starts
 * from a clean flag whatever the previous replay left.
 *
 * Disabled (bf16, tf32 and f32 modes need no scaling): scale stays 1,
 * found_inf stays 0, unscale and update queue nothing, scaler_found_inf()
 * returns NULL (the optimizers then read no flag); clipping still works.
 */
#ifndef CTRAIN_TRAIN_GRAD_SCALER_H
#define CTRAIN_TRAIN_GRAD_SCALER_H

#include <stddef.h>
#include <stdint.h>
#include "engine/ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The device-side state, one allocation (host memory on CPU contexts). */
typedef struct ScalerState {
    float scale;             /* multiply the loss by this before backward */
    int growth_tracker;      /* clean steps since the last change of scale */
    int found_inf;           /* this step's gradients had inf/nan: skip it */
    int pad_;
    int64_t skipped;         /* steps skipped so far */
} ScalerState;

typedef struct GradScaler {
    int enabled;
    float init_scale;        /* 65536 */
    double growth_factor;    /* 2 */
    double backoff_factor;   /* 0.5 */
    int growth_interval;     /* 2000 */
    ScalerState *st;         /* on the context's device */
    float *norm;             /* device: the last global gradient norm (scaler_clip) */
    double *partial;         /* device scratch of AMP_NORM_PARTIALS doubles */
    Ctx *ctx;
} GradScaler;

/* torch's defaults: init_scale 2^16, growth 2, backoff 0.5, interval 2000. */
void scaler_init(GradScaler *sc, Ctx *c, int enabled);
void scaler_init_ex(GradScaler *sc, Ctx *c, int enabled, float init_scale, double growth_factor,
                    double backoff_factor, int growth_interval);
/* Enabled exactly when the autocast type is f16. */
void scaler_init_for(GradScaler *sc, Ctx *c, DType autocast);
void scaler_free(GradScaler *sc);

/* Device pointer to the current scale (1 when disabled). */
const float *scaler_scale(const GradScaler *sc);
/* Device flag for the optimizers' skip argument; NULL when disabled. */
const int *scaler_found_inf(const GradScaler *sc);

/* Queue: clear found_inf, then unscale n gradients in place and check them.
 * Once per step, over the whole gradient buffer (a second call would clear
 * the first one's verdict). */
void scaler_unscale(GradScaler *sc, float *grad, size_t n);
/* Queue: global norm of the n gradients into scaler_norm(), and, when
 * max_norm > 0, scale them so the norm is at most max_norm. Skipped (norm
 * +inf) when found_inf is set. Works when the scaler is disabled. */
void scaler_clip(GradScaler *sc, float *grad, size_t n, float max_norm);
const float *scaler_norm(const GradScaler *sc);
/* Queue the scale update; call after the optimizer step. */
void scaler_update(GradScaler *sc);

/* Copy the state (and, when norm is non-NULL, the last norm) to the host.
 * Synchronizes the stream: call where the host waits anyway. */
void scaler_read(const GradScaler *sc, ScalerState *out, float *norm);
/* Restore scale, growth tracker and skipped count (a resumed run); clears
 * found_inf. Synchronizes. */
void scaler_write(GradScaler *sc, float scale, int growth_tracker, int64_t skipped);

#ifdef __cplusplus
}
#endif
#endif
