/* adamw_fp8.h — AdamW over a table of jobs, writing the FP8 codes of the
 * weights that FP8 Linear layers read in the same pass (the CPU reference
 * in ops/adamw_fp8.c, CUDA in ops/adamw_fp8.cu).
 *
 * Why: under --precision fp8 a Linear's forward reads its weight as E4M3
 * codes, w^T's too for the data gradient (ops/linear_fp8.h). Cast in the
 * forward, that is a read of the f32 weight (4 bytes an element) and a
 * write of both codes (2) at every micro-batch. The optimizer reads and
 * writes the f32 weight anyway: written there, the codes cost their 2
 * bytes once a step and the forward reads them as they are (Transformer
 * Engine's FP8 weight copy, here beside the bf16 one).
 *
 * A job is a range of the parameter buffers:
 *   plain  [offset, offset + numel): AdamW (ops/adam.h), the bf16 / f16
 *          working copy refreshed where there is one;
 *   fp8    the weight w [rows, cols] (row-major) at offset: AdamW as above,
 *          then, from the new w,
 *            q[r, c]  = e4m3(w[r, c] * *scale)       [rows, cols]
 *            qt[c, r] = q[r, c]                       [cols, rows]
 *            *amax    = max(*amax, max |w|)
 *          scale: the weight's slot of the FP8 recipe, already updated for
 *          the next step; amax: the slot that step's scale update reads
 *          (ops/fp8_recipe.h). The codes and amax are exactly those the next
 *          forward's cast would make (ops/fp8.h's rounding; NaN -> 0x7F and
 *          left out of the amax).
 * Weight decay per job. With *skip != 0 (the grad scaler's found_inf) the
 * parameters, moments and working copy stay as they are, and the fp8 jobs
 * still write codes and amax of the unchanged weights (the scale may have
 * moved).
 *
 * CUDA: one launch for the whole table, a block a unit of work: a chunk of
 * ADAMW_JOB_CHUNK elements of a plain job, a 64 x 64 tile of an fp8 job
 * (read by rows, its codes written to q by rows and to qt through shared
 * memory by columns; one atomicMax a tile on the amax's bits). An fp8 job
 * needs cols % 4 == 0, rows % 16 == 0, offset % 4 == 0 and q, qt 16-byte
 * aligned (adamw_job_fp8_fits); the buffers themselves 16-byte aligned.
 */
#ifndef CTRAIN_OPS_ADAMW_FP8_H
#define CTRAIN_OPS_ADAMW_FP8_H

#include <stddef.h>
#include <stdint.h>
#include "adam.h"
#include "engine/dtype.h"
#ifdef CTRAIN_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define ADAMW_JOB_CHUNK 4096   /* elements of a plain job a CUDA block */
#define ADAMW_JOB_TILE 64      /* an fp8 job's tiles: ADAMW_JOB_TILE x ADAMW_JOB_TILE a block */

typedef struct AdamwJob {
    int64_t offset;      /* the range's first element in p, m, v, g (and the working copy) */
    int64_t numel;       /* its length (rows * cols for an fp8 job) */
    int32_t rows, cols;  /* fp8 job: the weight's shape; plain: 0, 0 */
    double wd;           /* weight decay */
    uint8_t *q, *qt;     /* fp8 job: its codes [rows, cols] and [cols, rows]; plain: NULL */
    const float *scale;  /* fp8 job: the scale of the cast (E4M3) */
    float *amax;         /* fp8 job: raised to max |w| */
    int64_t block0;      /* set by adamw_jobs_layout: the job's first CUDA block */
} AdamwJob;

/* Whether w [rows, cols] at element offset `offset`, with codes at q and qt,
 * can be an fp8 job (the kernel's vector loads and stores). */
int adamw_job_fp8_fits(int64_t offset, int rows, int cols, const void *q, const void *qt);

/* Sets each job's block0; returns the blocks of the whole table. */
int64_t adamw_jobs_layout(AdamwJob *jobs, int n);

/* The CPU reference (every pointer host memory, the codes' too): the jobs
 * one after another, adamw_step_cpu then ops/fp8.c's cast and a transpose. */
void adamw_jobs_step_cpu(float *p, float *m, float *v, const float *g, const AdamwJob *jobs,
                         int njobs, float lr, const AdamStepState *st, double beta1,
                         double beta2, double eps, const int *skip);

#ifdef CTRAIN_CUDA
/* jobs: the device copy of a table laid out by adamw_jobs_layout, nblocks
 * its return; p_lowp NULL or the working copy (f16 / bf16) laid out like p.
 * Every pointer device memory; nothing syncs or allocates. */
void adamw_jobs_step_cuda(float *p, float *m, float *v, void *p_lowp, DType lowp_t,
                          const float *g, const AdamwJob *jobs, int njobs, int64_t nblocks,
                          const float *lr, const AdamStepState *st, double beta1, double beta2,
                          double eps, const int *skip, cudaStream_t s);
#endif

#ifdef __cplusplus
}
#endif
#endif
