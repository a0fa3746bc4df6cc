/* fuzz_safetensors.c — libFuzzer harness: the input as a safetensors file
 * (train/io/safetensors.h), the path every --load, --resume and eval file
 * takes. st_open parses and checks the header, the offsets and the CRC;
 * on success every tensor's bytes are read (ASan sees a view past the
 * file), every name and metadata key is looked up again, and the reader's
 * promises are checked: tensors inside the data section, bytes = numel x
 * element size, st_find finds each tensor. A refusal must say why.
 */
#include "fuzz_util.h"
#include "train/io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char path[64], err[1024] = "";
    int fd = fuzz_file_open(path, data, size);
    StFile f;
    int st = st_open(path, &f, err, sizeof err);
    if (st == ST_OK) {
        uint64_t sum = 0;
        char shape[256];
        for (int i = 0; i < f.n; i++) {
            const StEntry *e = &f.e[i];
            fuzz_check(e->begin <= e->end && e->end <= f.data_size, "%s [%llu, %llu) of %zu",
                       e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                       f.data_size);
            fuzz_check(e->end - e->begin == e->numel * e->elem_size, "%s: %llu bytes, numel %zu",
                       e->name, (unsigned long long)(e->end - e->begin), e->numel);
            const uint8_t *p = e->data;
            for (uint64_t k = 0; k < e->end - e->begin; k++) sum += p[k];
            fuzz_check(st_find(&f, e->name) == e, "st_find(%s)", e->name);
            st_shape_str(shape, sizeof shape, e->ndim, e->shape);
            sum += strlen(shape) + strlen(e->dtype_name);
        }
        for (int k = 0; k < f.nmeta; k++)
            fuzz_check(st_meta(&f, f.meta[2 * k]) == f.meta[2 * k + 1], "st_meta(%s)",
                       f.meta[2 * k]);
        if (sum == 1) fputc(0, stderr);   /* keep the reads */
    } else {
        fuzz_check(err[0], "status %d without a message", st);
    }
    st_close(&f);
    close(fd);
    return 0;
}
