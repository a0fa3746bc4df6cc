/* parity_util.h — shared by the PyTorch parity tests (gpu_resnet_parity,
 * gpu_bert_parity): fetching a reference tensor, and the per-tensor error
 * measure max |got - ref| / max |ref|. Include after check.h. */
#ifndef CTRAIN_TESTS_PARITY_UTIL_H
#define CTRAIN_TESTS_PARITY_UTIL_H

#include <math.h>
#include "train/io/safetensors.h"

/* The entry, or a failing summary and exit when the reference lacks it. */
static inline const StEntry *parity_need(const StFile *f, const char *name)
{
    const StEntry *e = st_find(f, name);
    if (!e) {
        printf("  FAIL reference file lacks '%s'\n0 passed, 1 failed\n", name);
        exit(1);
    }
    return e;
}

/* DIR/weights.safetensors into wpath and the opened DIR/ref.safetensors
 * into ref (written by scripts/torch_parity.py); a failing summary and exit
 * when the reference does not open. */
static inline void parity_open(const char *dir, char *wpath, size_t wlen, StFile *ref)
{
    char rpath[1024], err[512];
    snprintf(wpath, wlen, "%s/weights.safetensors", dir);
    snprintf(rpath, sizeof rpath, "%s/ref.safetensors", dir);
    if (st_open(rpath, ref, err, sizeof err) != 0) {
        printf("  FAIL %s\n0 passed, 1 failed\n", err);
        exit(1);
    }
}

/* max |a - b| / max |b| */
static inline double parity_rel_inf(const float *a, const float *b, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

#endif
