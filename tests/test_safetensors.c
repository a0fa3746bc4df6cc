/* test_safetensors.c — the safetensors header parser on large and repeated
 * names (the round trip and the other refusals: test_checkpoint.c):
 *   - a tensor name listed twice is refused as such, also when both copies
 *     have the same offsets (which once read as "two tensors overlap");
 *   - a __metadata__ key listed twice is refused by name;
 *   - a header of 80,000 metadata keys and one of 80,000 tensors load, every
 *     key and tensor reads back, and a duplicate among them is found (the
 *     check once compared every pair: 50 s for 80k keys). The time is
 *     printed, not asserted;
 *   - more than ST_MAX_META keys are refused with the count.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "train/io/safetensors.h"

static char g_dir[64];
static char g_err[1024];

static const char *path_in(const char *name)
{
    static char buf[400];
    snprintf(buf, sizeof buf, "%s/%s", g_dir, name);
    return buf;
}

/* A growable string for building headers. */
typedef struct { char *p; size_t len, cap; } Str;

static void str_add(Str *s, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? s->cap - s->len : 0, fmt, ap);
        va_end(ap);
        if (s->p && s->len + (size_t)k < s->cap) { s->len += (size_t)k; return; }
        s->cap = s->cap ? 2 * s->cap + (size_t)k : 4096 + (size_t)k;
        s->p = realloc(s->p, s->cap);
    }
}

/* A file from a header (padded to 8 with spaces) and a data section. */
static void write_st(const char *path, const char *header, const void *data, size_t dlen)
{
    size_t h = strlen(header), pad = (8 - h % 8) % 8;
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 8; i++) fputc((int)(((uint64_t)(h + pad) >> (8 * i)) & 0xff), f);
    fwrite(header, 1, h, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    if (dlen) fwrite(data, 1, dlen, f);
    fclose(f);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* st_open's status is ST_ERR_FORMAT and its message holds want. */
static void check_refused(const char *name, const char *path, const char *want)
{
    StFile f;
    int code = st_open(path, &f, g_err, sizeof g_err);
    check_true(name, code == ST_ERR_FORMAT && strstr(g_err, want), "status %d, message \"%s\" "
               "(want \"%s\")", code, code ? g_err : "", want);
    st_close(&f);
}

static void test_duplicates(void)
{
    float d[4] = {1, 2, 3, 4};
    const char *p = path_in("dup.safetensors");
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8);
    check_refused("dup.tensor_same_offsets", p, "tensor name 'a' appears twice in the header");
    write_st(p, "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", d, 16);
    check_refused("dup.tensor_packed", p, "tensor name 'b' appears twice in the header");
    write_st(p, "{\"__metadata__\":{\"k\":\"1\",\"j\":\"2\",\"k\":\"3\"},"
                "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8);
    check_refused("dup.metadata_key", p, "__metadata__ key 'k' appears twice in the header");
}

/* n metadata keys "key<i>" = "v<i>" (with dup: key<n/2> once more, last). */
static void build_meta_header(Str *s, int n, int dup)
{
    s->len = 0;
    str_add(s, "{\"__metadata__\":{");
    for (int i = 0; i < n; i++) str_add(s, "%s\"key%d\":\"v%d\"", i ? "," : "", i, i);
    if (dup) str_add(s, ",\"key%d\":\"again\"", n / 2);
    str_add(s, "},\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}");
}

static void test_many_meta(Str *s)
{
    enum { N = 80000 };
    const unsigned char byte = 7;
    const char *p = path_in("meta.safetensors");
    build_meta_header(s, N, 0);
    write_st(p, s->p, &byte, 1);
    StFile f;
    double t0 = now_s();
    int code = st_open(p, &f, g_err, sizeof g_err);
    double t1 = now_s();
    int bad = -1;
    char want[32];
    for (int i = 0; i < N && !code && bad < 0; i++) {
        char key[32];
        snprintf(key, sizeof key, "key%d", i);
        snprintf(want, sizeof want, "v%d", i);
        const char *v = st_meta(&f, key);
        if (!v || strcmp(v, want)) bad = i;
    }
    check_true("many.meta_80k_all_read", code == ST_OK && f.nmeta == N && bad < 0 &&
               !st_meta(&f, "key80000"), "status %d (%s), %d keys, first wrong key%d", code,
               code ? g_err : "", f.nmeta, bad);
    st_close(&f);
    printf("  80000 metadata keys: st_open %.3f s\n", t1 - t0);

    build_meta_header(s, N, 1);
    write_st(p, s->p, &byte, 1);
    t0 = now_s();
    check_refused("many.meta_80k_duplicate_found", p, "__metadata__ key 'key40000' appears twice");
    printf("  80000 metadata keys with a duplicate: refused in %.3f s\n", now_s() - t0);
}

/* n one-byte tensors "w<i>", packed in order; dup: w<n/3> again at the end. */
static void build_tensor_header(Str *s, int n, int dup)
{
    s->len = 0;
    str_add(s, "{");
    for (int i = 0; i < n; i++)
        str_add(s, "%s\"w%d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}", i ? "," : "",
                i, i, i + 1);
    if (dup) str_add(s, ",\"w%d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}", n / 3, n,
                     n + 1);
    str_add(s, "}");
}

static void test_many_tensors(Str *s)
{
    enum { N = 80000 };
    unsigned char *data = malloc(N + 1);
    for (int i = 0; i <= N; i++) data[i] = (unsigned char)(i * 31);
    const char *p = path_in("tensors.safetensors");
    build_tensor_header(s, N, 0);
    write_st(p, s->p, data, N);
    StFile f;
    double t0 = now_s();
    int code = st_open(p, &f, g_err, sizeof g_err);
    double t1 = now_s();
    int bad = -1;
    for (int i = 0; i < N && !code && bad < 0; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%d", i);
        const StEntry *e = st_find(&f, name);
        if (!e || e->numel != 1 || *(const unsigned char *)e->data != data[i]) bad = i;
    }
    check_true("many.tensors_80k_all_read", code == ST_OK && f.n == N && bad < 0,
               "status %d (%s), %d tensors, first wrong w%d", code, code ? g_err : "", f.n, bad);
    st_close(&f);
    printf("  80000 tensors: st_open %.3f s\n", t1 - t0);

    build_tensor_header(s, N, 1);
    write_st(p, s->p, data, N + 1);
    check_refused("many.tensors_80k_duplicate_found", p, "tensor name 'w26666' appears twice");
    free(data);
}

/* One key over the cap: refused with the count, before anything else. */
static void test_meta_cap(Str *s)
{
    const unsigned char byte = 7;
    const char *p = path_in("cap.safetensors");
    s->len = 0;
    str_add(s, "{\"__metadata__\":{");
    for (int i = 0; i <= ST_MAX_META; i++) str_add(s, "%s\"%d\":\"\"", i ? "," : "", i);
    str_add(s, "},\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}");
    write_st(p, s->p, &byte, 1);
    double t0 = now_s();
    check_refused("cap.meta_count", p, "__metadata__ has more than 1000000 keys");
    printf("  %d metadata keys: refused in %.3f s\n", ST_MAX_META + 1, now_s() - t0);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/ctrain_st_XXXXXX");
    if (!mkdtemp(g_dir)) { perror("mkdtemp"); return 1; }
    Str s = {NULL, 0, 0};
    test_duplicates();
    test_many_meta(&s);
    test_many_tensors(&s);
    test_meta_cap(&s);
    free(s.p);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", g_dir);
    if (system(rm) != 0) printf("  (could not remove %s)\n", g_dir);
    return check_summary();
}
