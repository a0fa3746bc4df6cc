/* checkpoint.c — ParamSet and named host tensors <-> safetensors files.
 *
 * Save: values come to the host with one mem_to_host of the parameter block;
 * OHWI conv weights are permuted in place, parameter by parameter, to
 * PyTorch's [O, I, kH, kW] (scratch of one parameter). Buffers come over one
 * by one. The writer keeps pointers, so all host copies live until it has
 * written the file.
 *
 * Load: open and validate the file, check every name, shape and dtype, and
 * only then convert (F16 / BF16 -> F32), permute to the memory layout and
 * copy to the device: a refused file changes nothing.
 */
#include "checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/error.h"
#include "engine/log.h"
#include "engine/mem.h"

const char *ckpt_hint(int status, int saving)
{
    switch (status) {
    case CKPT_ERR_IO:
        return saving ? "check that the directory exists and is writable and that the disk has "
                        "free space; the previous file at that path, if any, is unchanged"
                      : "check the path and that the file is readable";
    case CKPT_ERR_FORMAT:
        return "the file is not a safetensors checkpoint (or is damaged); pass a .safetensors "
               "file written by ctrain or by safetensors.torch.save_file";
    case CKPT_ERR_TRUNCATED:
        return "the file is incomplete (an interrupted copy or download?); copy it again or "
               "use an earlier checkpoint";
    case CKPT_ERR_CHECKSUM:
        return "the file changed after ctrain wrote it (a disk or copy error); use another "
               "copy or an earlier checkpoint";
    case CKPT_ERR_MISMATCH:
        return "the checkpoint was saved from a different model or configuration; load it "
               "into the model it was saved from";
    case CKPT_ERR_EXTRA:
        return "the checkpoint holds tensors this model does not have: it was saved from a "
               "different (or larger) model; load it into the model it was saved from";
    default:
        return NULL;
    }
}

/* ---- save ---- */

int ckpt_save(const char *path, const ParamSet *ps, const CkptTensor *t, int n,
              const char *const *meta_kv, int n_meta, char *err, size_t errlen)
{
    StWriter w;
    st_writer_init(&w);
    float *host = NULL, *scratch = NULL;
    void **bufs = NULL;
    int code = st_writer_meta(&w, "format", "pt", err, errlen);
    if (!code) code = st_writer_meta(&w, "ctrain_version", "1", err, errlen);
    for (int i = 0; i < n_meta && !code; i++)
        code = st_writer_meta(&w, meta_kv[2 * i], meta_kv[2 * i + 1], err, errlen);
    if (code) goto done;

    if (ps) {
        CT_ASSERT(ps->ctx, "ckpt_save: parameters of %s not allocated (call params_alloc)", path);
        size_t maxn = 0;
        for (int i = 0; i < ps->n; i++)
            if (ps->p[i].layout != LAYOUT_SAME && ps->p[i].numel > maxn) maxn = ps->p[i].numel;
        host = (float *)malloc((ps->total ? ps->total : 1) * sizeof(float));
        scratch = (float *)malloc((maxn ? maxn : 1) * sizeof(float));
        bufs = (void **)calloc((size_t)ps->nb + 1, sizeof *bufs);
        if (!host || !scratch || !bufs) {
            code = ct_fail(err, errlen, CKPT_ERR_IO, "cannot save %s: out of host memory", path);
            goto done;
        }
        mem_to_host(ps->ctx, host, ps->data, ps->total * sizeof(float));
        for (int i = 0; i < ps->n && !code; i++) {
            const ParamInfo *pi = &ps->p[i];
            float *v = host + pi->offset;
            if (pi->layout != LAYOUT_SAME) {   /* memory [O, H, W, I] -> file [O, I, H, W] */
                memcpy(scratch, v, pi->numel * sizeof(float));
                params_layout_to_torch(pi, v, scratch);
            }
            code = st_writer_add(&w, pi->name, DT_F32, pi->ndim, pi->shape, v, err, errlen);
        }
        for (int i = 0; i < ps->nb && !code; i++) {
            const BufferInfo *bi = &ps->b[i];
            size_t bytes = bi->numel * dtype_size(bi->dtype);
            bufs[i] = malloc(bytes ? bytes : 1);
            if (!bufs[i]) {
                code = ct_fail(err, errlen, CKPT_ERR_IO, "cannot save %s: out of host memory", path);
                break;
            }
            mem_to_host(ps->ctx, bufs[i], bi->t->data, bytes);
            code = st_writer_add(&w, bi->name, bi->dtype, bi->ndim, bi->shape, bufs[i], err, errlen);
        }
    }
    for (int i = 0; i < n && !code; i++)
        code = st_writer_add(&w, t[i].name, t[i].dtype, t[i].ndim, t[i].shape, t[i].data, err, errlen);
    if (!code) code = st_writer_write(&w, path, err, errlen);
done:
    if (bufs)
        for (int i = 0; i < ps->nb; i++) free(bufs[i]);
    free(bufs);
    free(host);
    free(scratch);
    st_writer_free(&w);
    return code;
}

int ckpt_save_params(const ParamSet *ps, const char *path, const char *const *meta_kv,
                     int n_meta, char *err, size_t errlen)
{
    return ckpt_save(path, ps, NULL, 0, meta_kv, n_meta, err, errlen);
}

int ckpt_save_tensors(const char *path, const CkptTensor *t, int n, const char *const *meta_kv,
                      int n_meta, char *err, size_t errlen)
{
    return ckpt_save(path, NULL, t, n, meta_kv, n_meta, err, errlen);
}

void ckpt_save_params_or_die(const ParamSet *ps, const char *path, const char *const *meta_kv,
                             int n_meta)
{
    char err[1024];
    int code = ckpt_save_params(ps, path, meta_kv, n_meta, err, sizeof err);
    if (code) ct_fatal_hint(ckpt_hint(code, 1), "%s", err);
}

/* ---- load ---- */

/* A file dtype can fill a destination dtype: the same, or half -> f32. */
static int dtype_fits(DType dst, int src)
{
    return src == (int)dst || (dst == DT_F32 && (src == DT_F16 || src == DT_BF16));
}

/* One wanted tensor: the name, dtype and PyTorch shape the model needs. */
typedef struct Want {
    const char *name;
    DType dtype;
    int ndim;
    const int64_t *shape;
    const StEntry *e;
} Want;

static int check_one(const StFile *f, Want *w, const char *who, char *err, size_t errlen)
{
    char a[160], b[160];
    w->e = st_find(f, w->name);
    if (!w->e)
        return ct_fail(err, errlen, CKPT_ERR_MISMATCH, "checkpoint %s has no tensor '%s' that %s "
                       "needs", f->path, w->name, who);
    int same = w->e->ndim == w->ndim;
    for (int d = 0; d < w->ndim && same; d++) same = w->e->shape[d] == w->shape[d];
    if (!same)
        return ct_fail(err, errlen, CKPT_ERR_MISMATCH, "checkpoint %s: tensor '%s' has shape %s in "
                       "the file but %s needs %s", f->path, w->name,
                       st_shape_str(a, sizeof a, w->e->ndim, w->e->shape), who,
                       st_shape_str(b, sizeof b, w->ndim, w->shape));
    if (!dtype_fits(w->dtype, w->e->dtype))
        return ct_fail(err, errlen, CKPT_ERR_MISMATCH, "checkpoint %s: tensor '%s' is %s in the "
                       "file but %s needs %s", f->path, w->name, w->e->dtype_name, who,
                       w->dtype == DT_F32 ? "F32 (or F16 / BF16)" : st_dtype_name(w->dtype));
    return CKPT_OK;
}

/* Bytes of e into dst as dtype dt. The file's bytes may be unaligned (a
 * foreign writer), so conversions read from an aligned scratch copy. */
static int fill(void *dst, DType dt, const StEntry *e, void **scratch, size_t *cap)
{
    size_t bytes = e->numel * e->elem_size;
    if (e->dtype == (int)dt) { if (bytes) memcpy(dst, e->data, bytes); return 0; }
    if (bytes > *cap) {
        void *s = realloc(*scratch, bytes);
        if (!s) return -1;
        *scratch = s;
        *cap = bytes;
    }
    memcpy(*scratch, e->data, bytes);
    dtype_convert(dst, dt, *scratch, (DType)e->dtype, e->numel);
    return 0;
}

static int skipped(const char *name, const char *const *skip, int nskip)
{
    for (int i = 0; i < nskip; i++)
        if (!strcmp(name, skip[i])) return 1;
    return 0;
}

static int load_impl(const char *path, ParamSet *ps, const char *model, CkptTensor *t, int n,
                     unsigned flags, const char *const *skip, int nskip, StFile *keep, char *err,
                     size_t errlen)
{
    char who[128];
    if (model) snprintf(who, sizeof who, "model %s", model);
    else snprintf(who, sizeof who, "ctrain");
    if (ps) CT_ASSERT(ps->ctx, "ckpt_load: parameters not allocated (call params_alloc first)");
    StFile f;
    int code = st_open(path, &f, err, errlen);
    if (code) return code;

    int nw = (ps ? ps->n + ps->nb : 0) + n, k = 0;
    Want *w = (Want *)calloc((size_t)nw + 1, sizeof *w);
    float *host = NULL, *tmp = NULL;
    void *scratch = NULL;
    size_t scap = 0;
    if (!w) { code = ct_fail(err, errlen, CKPT_ERR_IO, "cannot load %s: out of host memory", path); goto done; }
    if (ps) {   /* skipped names keep their values: they are not wanted */
        for (int i = 0; i < ps->n; i++)
            if (!skipped(ps->p[i].name, skip, nskip))
                w[k++] = (Want){ps->p[i].name, DT_F32, ps->p[i].ndim, ps->p[i].shape, NULL};
        for (int i = 0; i < ps->nb; i++)
            if (!skipped(ps->b[i].name, skip, nskip))
                w[k++] = (Want){ps->b[i].name, ps->b[i].dtype, ps->b[i].ndim, ps->b[i].shape, NULL};
    }
    nw = k + n;
    for (int i = 0; i < n; i++) w[k++] = (Want){t[i].name, t[i].dtype, t[i].ndim, t[i].shape, NULL};
    int missing = 0, present;
    for (int i = 0; i < nw && !code; i++) {
        code = check_one(&f, &w[i], who, err, errlen);
        /* absent (not different) tensors keep their values when allowed */
        if (code && !w[i].e && (flags & CKPT_ALLOW_MISSING)) { code = CKPT_OK; missing++; }
    }
    if (code) goto done;
    present = nw - missing;
    if (missing && !present) {
        code = ct_fail(err, errlen, CKPT_ERR_MISMATCH, "checkpoint %s holds none of the %d tensors "
                       "%s has (first: '%s')", path, nw, who, nw ? w[0].name : "");
        goto done;
    }
    if (flags & CKPT_ALLOW_MISSING)
        LOG_I("loaded %d of %d tensors of %s from %s: %d missing (kept at their init), %d in the "
              "file unused", present, nw, who, path, missing, f.n - present);
    if (!(flags & CKPT_ALLOW_EXTRA) && f.n != present) {
        /* names are unique on both sides, so a count difference means extras */
        for (int i = 0; i < f.n && !code; i++) {
            int found = 0;
            for (int q = 0; q < nw && !found; q++) found = strcmp(w[q].name, f.e[i].name) == 0;
            if (!found)
                code = ct_fail(err, errlen, CKPT_ERR_EXTRA, "checkpoint %s holds tensor '%s' that "
                               "%s does not have (%d tensors in the file, %d expected)", path,
                               f.e[i].name, who, f.n, nw);
        }
        if (code) goto done;
    }

    /* everything checked: now convert, permute and copy */
    k = 0;
    if (ps) {
        size_t maxn = 1;
        for (int i = 0; i < ps->n; i++)
            if (ps->p[i].numel > maxn) maxn = ps->p[i].numel;
        host = (float *)malloc((ps->total ? ps->total : 1) * sizeof(float));
        tmp = (float *)malloc(maxn * sizeof(float));
        if (!host || !tmp) {
            code = ct_fail(err, errlen, CKPT_ERR_IO, "cannot load %s: out of host memory", path);
            goto done;
        }
        /* the block goes back whole: parameters the file lacks keep their values */
        if (missing || nskip) mem_to_host(ps->ctx, host, ps->data, ps->total * sizeof(float));
        for (int i = 0; i < ps->n; i++) {
            const ParamInfo *pi = &ps->p[i];
            if (skipped(pi->name, skip, nskip) || !w[k++].e) continue;
            if (pi->layout == LAYOUT_SAME) {
                if (fill(host + pi->offset, DT_F32, w[k - 1].e, &scratch, &scap)) goto oom;
            } else {                          /* file [O, I, H, W] -> memory [O, H, W, I] */
                if (fill(tmp, DT_F32, w[k - 1].e, &scratch, &scap)) goto oom;
                params_layout_from_torch(pi, host + pi->offset, tmp);
            }
        }
        mem_to_device(ps->ctx, ps->data, host, ps->total * sizeof(float));
        ps->lowp_stale = 1;   /* AMP's working copy follows at the next refresh */
        for (int i = 0; i < ps->nb; i++) {
            const BufferInfo *bi = &ps->b[i];
            size_t bytes = bi->numel * dtype_size(bi->dtype);
            if (skipped(bi->name, skip, nskip) || !w[k++].e) continue;
            void *h = malloc(bytes ? bytes : 1);
            if (!h || fill(h, bi->dtype, w[k - 1].e, &scratch, &scap)) { free(h); goto oom; }
            mem_to_device(ps->ctx, bi->t->data, h, bytes);
            free(h);
        }
    }
    for (int i = 0; i < n; i++, k++)
        if (w[k].e && fill(t[i].data, t[i].dtype, w[k].e, &scratch, &scap)) goto oom;
    goto done;
oom:
    code = ct_fail(err, errlen, CKPT_ERR_IO, "cannot load %s: out of host memory", path);
done:
    free(w);
    free(host);
    free(tmp);
    free(scratch);
    if (!code && keep) *keep = f;
    else st_close(&f);
    return code;
}

int ckpt_load(const char *path, ParamSet *ps, const char *model, CkptTensor *t, int n,
              unsigned flags, StFile *keep, char *err, size_t errlen)
{
    return load_impl(path, ps, model, t, n, flags, NULL, 0, keep, err, errlen);
}

int ckpt_load_params_except(ParamSet *ps, const char *path, const char *model,
                            const char *const *skip, int nskip, char *err, size_t errlen)
{
    return load_impl(path, ps, model, NULL, 0, CKPT_ALLOW_EXTRA, skip, nskip, NULL, err, errlen);
}

int ckpt_load_params(ParamSet *ps, const char *path, const char *model, unsigned flags,
                     char *err, size_t errlen)
{
    return ckpt_load(path, ps, model, NULL, 0, flags, NULL, err, errlen);
}

int ckpt_load_tensors(const char *path, CkptTensor *t, int n, unsigned flags, char *err,
                      size_t errlen)
{
    return ckpt_load(path, NULL, NULL, t, n, flags, NULL, err, errlen);
}

void ckpt_load_params_or_die(ParamSet *ps, const char *path, const char *model, unsigned flags)
{
    char err[1024];
    int code = ckpt_load_params(ps, path, model, flags, err, sizeof err);
    if (code) ct_fatal_hint(ckpt_hint(code, 0), "%s", err);
}
