/* safetensors_write.c — the safetensors writer (safetensors.h): tensors
 * and metadata collected in a StWriter, then one atomic write (PATH.tmp.PID,
 * fsync, rename, fsync of the folder) with the CRC32 of the data section in
 * the metadata; the removal of temporaries that killed saves left; the
 * probe a run makes of its --save path before it trains.
 */
#include "safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "engine/error.h"
#include "engine/log.h"
#include "jsonw.h"
/* ---- writer ---- */

void st_writer_init(StWriter *w) { memset(w, 0, sizeof *w); }

int st_writer_add(StWriter *w, const char *name, DType dt, int ndim, const int64_t *shape,
                  const void *data, char *err, size_t errlen)
{
    if (!name[0] || strcmp(name, "__metadata__") == 0)
        return ct_fail(err, errlen, ST_ERR_ARG, "safetensors: invalid tensor name '%s'", name);
    if (ndim < 0 || ndim > ST_MAX_DIMS)
        return ct_fail(err, errlen, ST_ERR_ARG, "safetensors: tensor '%s' has %d dims (at most %d)",
                       name, ndim, ST_MAX_DIMS);
    if (!st_dtype_name(dt))
        return ct_fail(err, errlen, ST_ERR_ARG, "safetensors: tensor '%s': dtype %s has no name "
                       "in the format", name, dtype_name(dt));
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->e[i].name, name) == 0)
            return ct_fail(err, errlen, ST_ERR_ARG, "safetensors: tensor '%s' added twice", name);
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || __builtin_mul_overflow(numel, (size_t)shape[i], &numel))
            return ct_fail(err, errlen, ST_ERR_ARG, "safetensors: tensor '%s' has a bad shape", name);
    }
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        StWriteEntry *e = (StWriteEntry *)realloc(w->e, (size_t)cap * sizeof *e);
        if (!e) return ct_fail(err, errlen, ST_ERR_IO, "safetensors: out of host memory");
        w->e = e;
        w->cap = cap;
    }
    StWriteEntry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) return ct_fail(err, errlen, ST_ERR_IO, "safetensors: out of host memory");
    e->dtype = dt;
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->nbytes = numel * dtype_size(dt);
    e->data = data;
    w->n++;
    return ST_OK;
}

int st_writer_meta(StWriter *w, const char *key, const char *value, char *err, size_t errlen)
{
    if (strcmp(key, ST_CRC_KEY) == 0)
        return ct_fail(err, errlen, ST_ERR_ARG, "safetensors: metadata key '%s' is reserved", key);
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->meta[2 * i], key) == 0)
            return ct_fail(err, errlen, ST_ERR_ARG, "safetensors: metadata key '%s' set twice", key);
    if (w->nmeta == w->metacap) {
        int cap = w->metacap ? 2 * w->metacap : 8;
        char **m = (char **)realloc(w->meta, (size_t)cap * 2 * sizeof *m);
        if (!m) return ct_fail(err, errlen, ST_ERR_IO, "safetensors: out of host memory");
        w->meta = m;
        w->metacap = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k); free(v);
        return ct_fail(err, errlen, ST_ERR_IO, "safetensors: out of host memory");
    }
    w->meta[2 * w->nmeta] = k;
    w->meta[2 * w->nmeta + 1] = v;
    w->nmeta++;
    return ST_OK;
}

void st_writer_free(StWriter *w)
{
    for (int i = 0; i < w->n; i++) free(w->e[i].name);
    for (int i = 0; i < 2 * w->nmeta; i++) free(w->meta[i]);
    free(w->e);
    free(w->meta);
    memset(w, 0, sizeof *w);
}

/* Output with a byte budget: the st_test_fail_writes_after hook. */
typedef struct { FILE *f; uint64_t written; int64_t fail_after; } Out;

static int out_write(Out *o, const void *p, size_t n)
{
    if (o->fail_after >= 0 && o->written + n > (uint64_t)o->fail_after) {
        size_t part = (size_t)((uint64_t)o->fail_after - o->written);
        o->written += fwrite(p, 1, part, o->f);
        errno = ENOSPC;
        return -1;
    }
    size_t got = fwrite(p, 1, n, o->f);
    o->written += got;
    if (got != n) {
        if (!errno) errno = EIO;
        return -1;
    }
    return 0;
}

static int64_t fail_writes_after = -1;   /* bytes; -1: writes do not fail on purpose */

void st_test_fail_writes_after(int64_t bytes) { fail_writes_after = bytes < 0 ? -1 : bytes; }

/* fsync the directory holding path, so the rename itself is durable. */
static int sync_dir_of(const char *path)
{
    char *dir = strdup(path);
    if (!dir) { errno = ENOMEM; return -1; }
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;
    if (fd < 0) rc = -1;
    else {
        /* some filesystems cannot sync a directory; that is not a failure */
        if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) rc = -1;
        int e = errno;
        close(fd);
        errno = e;
    }
    free(dir);
    return rc;
}

/* The temporary a save writes before it renames it over path. */
static void tmp_name(char *tmp, size_t tlen, const char *path)
{
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
}

/* A save killed between writing its temporary and the rename (SIGKILL, a
 * power cut) leaves PATH.tmp.PID behind. The next save of PATH removes
 * those of processes that are gone, and says so; a live process's
 * temporary (another run saving the same file right now) is left alone. */
int st_remove_stale_temps(const char *path)
{
    char dir[1024];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s.tmp.", base);
    size_t np = strlen(prefix);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, np) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + np, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* alive, or not ours to know */
        char full[1600];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (unlink(full) == 0) {
            LOG_W("removed %s: the temporary of an interrupted save (process %ld is gone)", full,
                  pid);
            removed++;
        }
    }
    closedir(d);
    return removed;
}

int st_probe_writable(const char *path, char *err, size_t errlen)
{
    char tmp[1100];
    tmp_name(tmp, sizeof tmp, path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return ct_fail(err, errlen, ST_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    close(fd);
    unlink(tmp);
    return ST_OK;
}

int st_writer_write(const StWriter *w, const char *path, char *err, size_t errlen)
{
    /* place tensors by descending element size (stable): every tensor
     * starts at a multiple of its element size in an 8-aligned section */
    int *order = (int *)malloc(((size_t)w->n + 1) * sizeof *order);
    uint64_t *begin = (uint64_t *)malloc(((size_t)w->n + 1) * sizeof *begin);
    if (!order || !begin) {
        free(order); free(begin);
        return ct_fail(err, errlen, ST_ERR_IO, "cannot write %s: out of host memory", path);
    }
    int k = 0;
    uint64_t off = 0;
    for (size_t sz = 8; sz >= 1; sz /= 2)
        for (int i = 0; i < w->n; i++)
            if (dtype_size(w->e[i].dtype) == sz) {
                order[k++] = i;
                begin[i] = off;
                off += w->e[i].nbytes;
            }
    uLong crc = crc32_z(0L, Z_NULL, 0);
    for (int j = 0; j < k; j++) {
        const StWriteEntry *e = &w->e[order[j]];
        if (e->nbytes) crc = crc32_z(crc, (const Bytef *)e->data, e->nbytes);
    }

    /* the header, compact: {"__metadata__":{...,"ctrain_crc32":"..."},
     * "name":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},...} */
    char crc_hex[16];
    snprintf(crc_hex, sizeof crc_hex, "%08lx", (unsigned long)crc & 0xffffffffUL);
    JsonW h;
    jsonw_init(&h, 0);
    jsonw_obj_begin(&h, NULL);
    jsonw_obj_begin(&h, "__metadata__");
    for (int i = 0; i < w->nmeta; i++) jsonw_str(&h, w->meta[2 * i], w->meta[2 * i + 1]);
    jsonw_str(&h, ST_CRC_KEY, crc_hex);
    jsonw_obj_end(&h);
    for (int j = 0; j < k; j++) {
        const StWriteEntry *e = &w->e[order[j]];
        jsonw_obj_begin(&h, e->name);
        jsonw_str(&h, "dtype", st_dtype_name(e->dtype));
        jsonw_arr_begin(&h, "shape");
        for (int d = 0; d < e->ndim; d++) jsonw_int(&h, NULL, e->shape[d]);
        jsonw_arr_end(&h);
        jsonw_arr_begin(&h, "data_offsets");
        jsonw_uint(&h, NULL, begin[order[j]]);
        jsonw_uint(&h, NULL, begin[order[j]] + e->nbytes);
        jsonw_arr_end(&h);
        jsonw_obj_end(&h);
    }
    jsonw_obj_end(&h);
    while (h.len % 8) jsonw_raw(&h, " ");    /* data section 8-byte aligned */
    free(begin);
    if (h.oom) {
        free(order); jsonw_free(&h);
        return ct_fail(err, errlen, ST_ERR_IO, "cannot write %s: out of host memory", path);
    }

    size_t tlen = strlen(path) + 32;
    char *tmp = (char *)malloc(tlen);
    if (!tmp) {
        free(order); jsonw_free(&h);
        return ct_fail(err, errlen, ST_ERR_IO, "cannot write %s: out of host memory", path);
    }
    tmp_name(tmp, tlen, path);
    st_remove_stale_temps(path);
    uint64_t total = 8 + h.len + off;
    int code = ST_OK;
    Out o = {NULL, 0, fail_writes_after};
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        code = ct_fail(err, errlen, ST_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto done;
    }
    o.f = fdopen(fd, "wb");
    if (!o.f) {
        code = ct_fail(err, errlen, ST_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
        goto fail;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    int bad = out_write(&o, len8, 8) || out_write(&o, h.buf, h.len);
    for (int j = 0; j < k && !bad; j++) {
        const StWriteEntry *e = &w->e[order[j]];
        if (e->nbytes) bad = out_write(&o, e->data, e->nbytes);
    }
    if (!bad && fflush(o.f) != 0) bad = 1;
    if (bad) {
        code = ct_fail(err, errlen, ST_ERR_IO, "cannot write %s: %s (after %llu of %llu bytes); "
                       "%s was left as it was", tmp, strerror(errno),
                       (unsigned long long)o.written, (unsigned long long)total, path);
        fclose(o.f);
        goto fail;
    }
    if (fsync(fileno(o.f)) != 0) {
        code = ct_fail(err, errlen, ST_ERR_IO, "cannot sync %s to disk: %s; %s was left as it was",
                       tmp, strerror(errno), path);
        fclose(o.f);
        goto fail;
    }
    if (fclose(o.f) != 0) {
        code = ct_fail(err, errlen, ST_ERR_IO, "cannot close %s: %s; %s was left as it was", tmp,
                       strerror(errno), path);
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        code = ct_fail(err, errlen, ST_ERR_IO, "cannot rename %s to %s: %s; %s was left as it was",
                       tmp, path, strerror(errno), path);
        goto fail;
    }
    if (sync_dir_of(path) != 0)
        code = ct_fail(err, errlen, ST_ERR_IO, "wrote %s but could not sync its directory: %s "
                       "(the new file may not survive a crash)", path, strerror(errno));
    goto done;
fail:
    unlink(tmp);
done:
    free(tmp);
    free(order);
    jsonw_free(&h);
    return code;
}
