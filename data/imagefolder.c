/* imagefolder.c — scan an ImageFolder tree (layout and order in
 * imagefolder.h), and what its statuses tell the user.
 *
 * Scanning a class: every folder under it is listed (breadth first, symlinks
 * followed, hidden names skipped), each image file becomes a record {folder,
 * name}, and the records are sorted by (folder path, name): torchvision's
 * `for root, _, fnames in sorted(os.walk(dir)): for f in sorted(fnames)`.
 * Strings live in one growing arena addressed by offsets, so a class of
 * 1300 ImageNet files costs a handful of allocations, not 1300.
 */
#include "imagefolder.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "engine/error.h"
#include "engine/log.h"
#include "image_decode.h"

/* Folders deeper than this under a class are not entered (guards against a
 * symlink loop, which os.walk(followlinks=True) would also loop on). */
#define IMGF_MAX_DEPTH 16

static const char *const listed[] = {".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm",
                                     ".pnm", ".tga", ".tif", ".tiff", ".webp"};
#define EXT_LIST ".jpg .jpeg .png .bmp .ppm .pgm .pnm .tga .tif .tiff .webp"

static int ends_with_any(const char *name, const char *const *ext, size_t n)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(ext[i]);
        if (len > k && strcasecmp(name + len - k, ext[i]) == 0) return 1;
    }
    return 0;
}

int imagefolder_is_image(const char *name)
{
    return ends_with_any(name, listed, sizeof listed / sizeof *listed);
}

int imagefolder_image_status(int img_status)
{
    switch (img_status) {
    case IMG_OK: return IMGF_OK;
    case IMG_ERR_ACCESS: return IMGF_ERR_PERM;
    case IMG_ERR_OPEN: return IMGF_ERR_FILE;
    case IMG_ERR_EMPTY: return IMGF_ERR_EMPTY_FILE;
    case IMG_ERR_FORMAT: return IMGF_ERR_FORMAT;
    case IMG_ERR_SIZE: return IMGF_ERR_SIZE;
    case IMG_ERR_NOMEM: return IMGF_ERR_NOMEM;
    default: return IMGF_ERR_DECODE;
    }
}

const char *imagefolder_hint(int status)
{
    switch (status) {
    case IMGF_OK: return NULL;
    case IMGF_ERR_OPEN:
        return "check the path; or pass --data synthetic to measure throughput without a "
               "dataset";
    case IMGF_ERR_EMPTY:
        return "an ImageFolder holds one subfolder per class with that class's images "
               "(ROOT/CLASS/IMAGE.jpg, torchvision layout); or pass --data synthetic to "
               "measure throughput without a dataset";
    case IMGF_ERR_DECODE: return img_hint(IMG_ERR_DAMAGED);
    case IMGF_ERR_FILE: return img_hint(IMG_ERR_OPEN);
    case IMGF_ERR_EMPTY_FILE: return img_hint(IMG_ERR_EMPTY);
    case IMGF_ERR_FORMAT: return img_hint(IMG_ERR_FORMAT);
    case IMGF_ERR_SIZE: return img_hint(IMG_ERR_SIZE);
    case IMGF_ERR_NOMEM: return "free some memory and retry";
    case IMGF_ERR_PERM: return "permission denied: check the file's permissions (ls -l; "
                               "chmod a+r for files, a+rx for folders)";
    case IMGF_ERR_CLASSES:
        return "name the class folders of val/ as in train/ (val/ may lack some of train's "
               "classes, not add others)";
    default: return "split the data set; ctrain indexes images with 31-bit numbers";
    }
}

/* A failed open(2)/opendir(3): permission, or anything else (missing). */
static int open_status(int e) { return e == EACCES || e == EPERM ? IMGF_ERR_PERM : IMGF_ERR_OPEN; }

/* ------------------------------------------------------------ string arena */

typedef struct {
    char *p;
    size_t n, cap;
} Arena;

/* Append s (len bytes) and a NUL; returns its offset, or SIZE_MAX on OOM. */
static size_t arena_put(Arena *a, const char *s, size_t len)
{
    if (a->n + len + 1 > a->cap) {
        size_t cap = a->cap ? a->cap : 4096;
        while (cap < a->n + len + 1) cap *= 2;
        char *q = realloc(a->p, cap);
        if (!q) return SIZE_MAX;
        a->p = q;
        a->cap = cap;
    }
    size_t off = a->n;
    memcpy(a->p + off, s, len);
    a->p[off + len] = 0;
    a->n += len + 1;
    return off;
}

typedef struct {
    size_t dir, name;  /* arena offsets */
} Rec;

typedef struct {
    void *p;
    size_t n, cap, elem;
} Vec;

static void *vec_push(Vec *v)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        void *q = realloc(v->p, cap * v->elem);
        if (!q) return NULL;
        v->p = q;
        v->cap = cap;
    }
    return (char *)v->p + v->elem * v->n++;
}

static int rec_cmp(const void *a, const void *b, void *arena)
{
    const Rec *x = a, *y = b;
    const char *base = arena;
    int c = x->dir == y->dir ? 0 : strcmp(base + x->dir, base + y->dir);
    return c ? c : strcmp(base + x->name, base + y->name);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Directory or regular file? Follows symlinks (stat) where d_type cannot say.
 * Returns 'd', 'f', or 0 (anything else, or a dangling link). */
static int entry_kind(const char *dir, const struct dirent *e)
{
#ifdef DT_DIR
    if (e->d_type == DT_DIR) return 'd';
    if (e->d_type == DT_REG) return 'f';
#endif
    char p[4096];
    struct stat sb;
    if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) return 0;
    if (stat(p, &sb) != 0) return 0;
    return S_ISDIR(sb.st_mode) ? 'd' : S_ISREG(sb.st_mode) ? 'f' : 0;
}

/* All image records under the class folder cdir, appended to recs. */
static int scan_class(Vec *recs, Arena *ar, const char *cdir, char *err, size_t errlen)
{
    Vec dirs = {.elem = sizeof(size_t)}, depth = {.elem = sizeof(int)};
    size_t *d0 = vec_push(&dirs);
    int *z0 = vec_push(&depth);
    size_t off = arena_put(ar, cdir, strlen(cdir));
    int st = IMGF_OK;
    if (!d0 || !z0 || off == SIZE_MAX) {
        st = ct_fail(err, errlen, IMGF_ERR_NOMEM, "out of memory scanning %s", cdir);
        goto done;
    }
    *d0 = off;
    *z0 = 0;
    for (size_t k = 0; k < dirs.n; k++) {
        size_t doff = ((size_t *)dirs.p)[k];
        int dz = ((int *)depth.p)[k];
        char dpath[4096];
        snprintf(dpath, sizeof dpath, "%s", ar->p + doff);  /* arena may move below */
        DIR *d = opendir(dpath);
        if (!d) {
            st = ct_fail(err, errlen, open_status(errno), "cannot open folder %s: %s", dpath,
                         strerror(errno));
            goto done;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;  /* ".", "..", hidden */
            int kind = entry_kind(dpath, e);
            if (kind == 'd') {
                if (dz + 1 > IMGF_MAX_DEPTH) {
                    LOG_W("ImageFolder: not entering %s/%s: deeper than %d folders "
                          "(a symlink loop?)", dpath, e->d_name, IMGF_MAX_DEPTH);
                    continue;
                }
                char sub[4096];
                int len = snprintf(sub, sizeof sub, "%s/%s", dpath, e->d_name);
                size_t *dp = vec_push(&dirs);
                int *zp = vec_push(&depth);
                size_t so = len < (int)sizeof sub ? arena_put(ar, sub, (size_t)len) : SIZE_MAX;
                if (!dp || !zp || so == SIZE_MAX) {
                    closedir(d);
                    st = ct_fail(err, errlen, IMGF_ERR_NOMEM, "out of memory (or path "
                                 "too long) at %s", sub);
                    goto done;
                }
                *dp = so;
                *zp = dz + 1;
            } else if (kind == 'f') {
                if (!imagefolder_is_image(e->d_name)) continue;
                Rec *r = vec_push(recs);
                size_t no = arena_put(ar, e->d_name, strlen(e->d_name));
                if (!r || no == SIZE_MAX) {
                    closedir(d);
                    st = ct_fail(err, errlen, IMGF_ERR_NOMEM, "out of memory scanning %s",
                                 dpath);
                    goto done;
                }
                r->dir = doff;
                r->name = no;
            }
        }
        closedir(d);
    }
done:
    free(dirs.p);
    free(depth.p);
    return st;
}

/* The sorted class folder names of root into f->classes. */
static int scan_root(ImageFolder *f, const char *root, char *err, size_t errlen)
{
    DIR *d = opendir(root);
    if (!d)
        return ct_fail(err, errlen, open_status(errno), "cannot open ImageFolder root %s: %s",
                       root, strerror(errno));
    Vec names = {.elem = sizeof(char *)};
    struct dirent *e;
    int st = IMGF_OK;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || entry_kind(root, e) != 'd') continue;
        char **slot = vec_push(&names);
        char *s = strdup(e->d_name);
        if (!slot || !s) {
            free(s);
            if (slot) names.n--;
            st = ct_fail(err, errlen, IMGF_ERR_NOMEM, "out of memory listing %s", root);
            break;
        }
        *slot = s;
    }
    closedir(d);
    f->classes = names.p;
    f->nclasses = (int)names.n;
    if (st) return st;
    if (names.n == 0)
        return ct_fail(err, errlen, IMGF_ERR_EMPTY, "ImageFolder root %s has no class "
                       "folders (expected %s/CLASS/IMAGE.jpg)", root, root);
    qsort(f->classes, names.n, sizeof(char *), str_cmp);
    return IMGF_OK;
}

int imagefolder_open(ImageFolder *f, const char *root, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    if (err && errlen) err[0] = 0;
    size_t rlen = strlen(root);
    while (rlen > 1 && root[rlen - 1] == '/') rlen--;  /* "data/train/" -> "data/train" */
    f->root = strndup(root, rlen);
    if (!f->root) return ct_fail(err, errlen, IMGF_ERR_NOMEM, "out of memory");
    int st = scan_root(f, f->root, err, errlen);
    if (st) goto fail;
    f->class_count = calloc((size_t)f->nclasses, sizeof(uint32_t));
    if (!f->class_count) {
        st = ct_fail(err, errlen, IMGF_ERR_NOMEM, "out of memory");
        goto fail;
    }

    Vec labels = {.elem = sizeof(int32_t)}, offs = {.elem = sizeof(uint64_t)};
    Arena paths = {0};
    for (int c = 0; c < f->nclasses && !st; c++) {
        char cdir[4096];
        if (snprintf(cdir, sizeof cdir, "%s/%s", f->root, f->classes[c]) >= (int)sizeof cdir) {
            st = ct_fail(err, errlen, IMGF_ERR_OPEN, "path too long: %s/%s", f->root,
                         f->classes[c]);
            break;
        }
        Vec recs = {.elem = sizeof(Rec)};
        Arena ar = {0};
        st = scan_class(&recs, &ar, cdir, err, errlen);
        if (!st && recs.n == 0)
            st = ct_fail(err, errlen, IMGF_ERR_EMPTY, "class folder %s has no images "
                         "(extensions " EXT_LIST ")", cdir);
        if (!st && (uint64_t)f->n + recs.n > INT32_MAX)
            st = ct_fail(err, errlen, IMGF_ERR_LIMIT, "%s holds more than %d images",
                         f->root, INT32_MAX);
        if (!st) {
            qsort_r(recs.p, recs.n, sizeof(Rec), rec_cmp, ar.p);
            for (size_t i = 0; i < recs.n && !st; i++) {
                const Rec *r = (const Rec *)recs.p + i;
                char full[8192];
                int len = snprintf(full, sizeof full, "%s/%s", ar.p + r->dir, ar.p + r->name);
                int32_t *lp = vec_push(&labels);
                uint64_t *op = vec_push(&offs);
                size_t po = len < (int)sizeof full ? arena_put(&paths, full, (size_t)len)
                                                   : SIZE_MAX;
                if (!lp || !op || po == SIZE_MAX) {
                    st = ct_fail(err, errlen, IMGF_ERR_NOMEM, "out of memory indexing %s",
                                 cdir);
                    break;
                }
                *lp = c;
                *op = po;
            }
            f->class_count[c] = (uint32_t)recs.n;
            f->n += (uint32_t)recs.n;
        }
        free(recs.p);
        free(ar.p);
    }
    f->labels = labels.p;
    f->path_off = offs.p;
    f->paths = paths.p;
    if (st) goto fail;
    LOG_D("ImageFolder %s: %u images in %d classes", f->root, f->n, f->nclasses);
    return IMGF_OK;
fail:
    imagefolder_free(f);
    return st;
}

void imagefolder_open_or_die(ImageFolder *f, const char *root)
{
    char err[1024];
    int st = imagefolder_open(f, root, err, sizeof err);
    if (st) ct_fatal_hint(imagefolder_hint(st), "%s", err);
}

/* The class names of f joined by ", " into buf, the first ones when they do
 * not all fit ("..., and 990 more"). */
static void class_list(char *buf, size_t len, const ImageFolder *f)
{
    size_t k = 0;
    buf[0] = 0;
    for (int c = 0; c < f->nclasses; c++) {
        size_t l = strlen(f->classes[c]);
        if (k + l + 40 > len || c == 8) { /* room for the tail */
            snprintf(buf + k, len - k, ", and %d more", f->nclasses - c);
            return;
        }
        k += (size_t)snprintf(buf + k, len - k, "%s%s", c ? ", " : "", f->classes[c]);
    }
}

static int name_cmp(const void *key, const void *elem)
{
    return strcmp((const char *)key, *(char *const *)elem);
}

int imagefolder_match_classes(ImageFolder *val, const ImageFolder *train, char *err,
                              size_t errlen)
{
    int32_t *map = malloc(((size_t)val->nclasses + 1) * sizeof *map);
    if (!map) return ct_fail(err, errlen, IMGF_ERR_NOMEM, "out of memory");
    for (int c = 0; c < val->nclasses; c++) {
        char *const *hit = bsearch(val->classes[c], train->classes, (size_t)train->nclasses,
                                   sizeof(char *), name_cmp);
        if (!hit) {
            char names[400];
            class_list(names, sizeof names, train);
            free(map);
            return ct_fail(err, errlen, IMGF_ERR_CLASSES, "%s has the class folder \"%s\", "
                           "which %s lacks (its %d classes: %s)", val->root, val->classes[c],
                           train->root, train->nclasses, names);
        }
        map[c] = (int32_t)(hit - train->classes);
    }
    char **names = calloc((size_t)train->nclasses, sizeof *names);
    uint32_t *count = calloc((size_t)train->nclasses, sizeof *count);
    int ok = names && count;
    for (int c = 0; ok && c < train->nclasses; c++) ok = (names[c] = strdup(train->classes[c])) != NULL;
    if (!ok) {
        for (int c = 0; names && c < train->nclasses; c++) free(names[c]);
        free(names);
        free(count);
        free(map);
        return ct_fail(err, errlen, IMGF_ERR_NOMEM, "out of memory");
    }
    for (int c = 0; c < val->nclasses; c++) count[map[c]] = val->class_count[c];
    for (uint32_t i = 0; i < val->n; i++) val->labels[i] = map[val->labels[i]];
    if (val->nclasses < train->nclasses)
        LOG_I("ImageFolder %s: %d of the %d classes of %s (labels matched by name)", val->root,
              val->nclasses, train->nclasses, train->root);
    for (int c = 0; c < val->nclasses; c++) free(val->classes[c]);
    free(val->classes);
    free(val->class_count);
    val->classes = names;
    val->class_count = count;
    val->nclasses = train->nclasses;
    free(map);
    return IMGF_OK;
}

void imagefolder_free(ImageFolder *f)
{
    if (!f) return;
    for (int c = 0; c < f->nclasses; c++) free(f->classes[c]);
    free(f->classes);
    free(f->class_count);
    free(f->labels);
    free(f->path_off);
    free(f->paths);
    free(f->root);
    memset(f, 0, sizeof *f);
}
