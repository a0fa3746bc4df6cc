/* checkpoint.h — model parameters and named host tensors <-> safetensors files.
 *
 * A parameter file is what PyTorch's safetensors.torch.save_file(model.state_dict())
 * writes, so it loads in PyTorch and back:
 *   - every parameter as F32 under its registry name (torchvision / Hugging
 *     Face names) in PyTorch's shape and layout: conv weights kept in memory
 *     as [O, kH, kW, I] (LAYOUT_OHWI) are written as [O, I, kH, kW];
 *   - every buffer (running_mean, running_var: F32; num_batches_tracked: I64)
 *     in its own dtype;
 *   - __metadata__: "format": "pt" (what safetensors.torch writes and
 *     transformers checks), "ctrain_version": "1", "ctrain_crc32" (the
 *     writer's checksum of the data section), and the caller's pairs.
 * Saves are atomic (safetensors.h): a failed save leaves the old file.
 *
 * Loading is strict, and checks everything before changing anything, so a
 * refused file leaves the model as it was. Each registry name must be in the
 * file with the same PyTorch shape; parameters and f32 buffers accept F32,
 * F16 or BF16 (files saved from half models; converted to f32), other
 * dtypes must match exactly. The message names the first tensor (in
 * registry order) that is missing or differs. Tensors in the file that the
 * model does not have are refused too (the file is from another model),
 * unless CKPT_ALLOW_EXTRA. With CKPT_ALLOW_MISSING, registry tensors the
 * file lacks keep their current values (fine-tuning: a pre-trained encoder
 * into a model with new heads); a tensor present with another shape or
 * dtype is still refused, and so is a file holding none of them. The
 * counts of missing and unused tensors are reported with LOG_I.
 *
 * Errors come back as a status and one line of text; the _or_die wrappers
 * end the program with that line and a hint (ckpt_hint) saying what to do.
 *
 * ckpt_save / ckpt_load are the general form: a ParamSet (or NULL) plus any
 * number of named host tensors (optimizer state, step, RNG state) in ONE
 * file; `keep` hands the opened file back for reading metadata.
 */
#ifndef CTRAIN_TRAIN_CHECKPOINT_H
#define CTRAIN_TRAIN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "engine/params.h"
#include "safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    CKPT_OK = ST_OK,
    CKPT_ERR_IO = ST_ERR_IO,
    CKPT_ERR_FORMAT = ST_ERR_FORMAT,
    CKPT_ERR_TRUNCATED = ST_ERR_TRUNCATED,
    CKPT_ERR_CHECKSUM = ST_ERR_CHECKSUM,
    CKPT_ERR_ARG = ST_ERR_ARG,
    CKPT_ERR_MISMATCH = 16,  /* a tensor the model needs is missing, or its shape / dtype differ */
    CKPT_ERR_EXTRA,          /* the file holds a tensor the model does not have */
};

/* ckpt_load flags */
enum { CKPT_ALLOW_EXTRA = 1, CKPT_ALLOW_MISSING = 2 };

/* A named host tensor. Save reads data; load writes numel * dtype_size
 * bytes to data (converted from F16 / BF16 when dtype is DT_F32). */
typedef struct CkptTensor {
    const char *name;
    DType dtype;
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    void *data;
} CkptTensor;

/* Metadata pairs are flat: meta_kv = {key0, value0, key1, value1, ...},
 * n_meta pairs. "format", "ctrain_version" and "ctrain_crc32" are set here. */
int ckpt_save(const char *path, const ParamSet *ps, const CkptTensor *t, int n,
              const char *const *meta_kv, int n_meta, char *err, size_t errlen);
/* model names the model in messages ("resnet50"); NULL reads "ctrain".
 * keep: when non-NULL, receives the opened file (st_meta, st_find) on
 * success; the caller closes it with st_close. */
int ckpt_load(const char *path, ParamSet *ps, const char *model, CkptTensor *t, int n,
              unsigned flags, StFile *keep, char *err, size_t errlen);

int ckpt_save_params(const ParamSet *ps, const char *path, const char *const *meta_kv,
                     int n_meta, char *err, size_t errlen);
int ckpt_load_params(ParamSet *ps, const char *path, const char *model, unsigned flags,
                     char *err, size_t errlen);
int ckpt_save_tensors(const char *path, const CkptTensor *t, int n, const char *const *meta_kv,
                      int n_meta, char *err, size_t errlen);
int ckpt_load_tensors(const char *path, CkptTensor *t, int n, unsigned flags, char *err,
                      size_t errlen);

/* Fatal on failure: "ctrain: <message>" and "hint: <what to do>". */
void ckpt_save_params_or_die(const ParamSet *ps, const char *path, const char *const *meta_kv,
                             int n_meta);
void ckpt_load_params_or_die(ParamSet *ps, const char *path, const char *model, unsigned flags);
/* Every parameter and buffer but the `skip` names, which keep their values
 * (a new head: fine-tuning on another number of classes); the file's own
 * tensors of those names are not read (CKPT_ALLOW_EXTRA). */
int ckpt_load_params_except(ParamSet *ps, const char *path, const char *model,
                            const char *const *skip, int nskip, char *err, size_t errlen);

/* What a user can do about a failed save (saving = 1) or load. */
const char *ckpt_hint(int status, int saving);

#ifdef __cplusplus
}
#endif
#endif
