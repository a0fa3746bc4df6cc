/* adamw_fp8.c — the job table of AdamW with the FP8 weight codes
 * (ops/adamw_fp8.h): its layout, the fit test of an fp8 job, and the CPU
 * reference, which is AdamW (ops/adam.c) and the scaled cast (ops/fp8.c)
 * one after the other:
 *   p, m, v = adamw(p, m, v, g)                 every job
 *   q = e4m3(p * scale), qt = q^T, amax max= |p| fp8 jobs, from the new p
 */
#include "adamw_fp8.h"

#include <math.h>
#include <stdlib.h>

#include "engine/error.h"
#include "fp8.h"

int adamw_job_fp8_fits(int64_t offset, int rows, int cols, const void *q, const void *qt)
{
    return rows > 0 && cols > 0 && rows % 16 == 0 && cols % 4 == 0 && offset % 4 == 0 &&
           (uintptr_t)q % 16 == 0 && (uintptr_t)qt % 16 == 0;
}

int64_t adamw_jobs_layout(AdamwJob *jobs, int n)
{
    int64_t b = 0;
    for (int i = 0; i < n; i++) {
        AdamwJob *j = &jobs[i];
        CT_ASSERT(j->numel >= 0 && (!j->q || (int64_t)j->rows * j->cols == j->numel),
                  "adamw job %d: %lld elements, %d x %d", i, (long long)j->numel, j->rows,
                  j->cols);
        j->block0 = b;
        const int T = ADAMW_JOB_TILE;
        if (j->q)
            b += (int64_t)((j->rows + T - 1) / T) * ((j->cols + T - 1) / T);
        else
            b += (j->numel + ADAMW_JOB_CHUNK - 1) / ADAMW_JOB_CHUNK;
    }
    return b;
}

void adamw_jobs_step_cpu(float *p, float *m, float *v, const float *g, const AdamwJob *jobs,
                         int njobs, float lr, const AdamStepState *st, double beta1,
                         double beta2, double eps, const int *skip)
{
    for (int i = 0; i < njobs; i++) {
        const AdamwJob *j = &jobs[i];
        float *pj = p + j->offset;
        adamw_step_cpu(pj, m + j->offset, v + j->offset, g + j->offset, (size_t)j->numel, lr, st,
                       beta1, beta2, eps, j->wd, skip);
        if (!j->q) continue;
        float a;
        fp8_cast_cpu(j->q, &a, pj, (size_t)j->numel, *j->scale, FP8_E4M3);
        *j->amax = fmaxf(*j->amax, a);
        for (int r = 0; r < j->rows; r++)
            for (int c = 0; c < j->cols; c++)
                j->qt[(size_t)c * j->rows + r] = j->q[(size_t)r * j->cols + c];
    }
}
