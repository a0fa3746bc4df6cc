/* fuzz_idx.c — libFuzzer harness: the input as an IDX file, plain or gzip
 * (data/idx.h), as the Fashion-MNIST loader reads its four files. On
 * success every element is read and the header's promises are checked
 * (u8, n = prod(dims), at most IDX_MAX_ELEMS); a refusal must say why.
 */
#include "fuzz_util.h"
#include "data/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char path[64], err[512] = "";
    int fd = fuzz_file_open(path, data, size);
    IdxArray a;
    int st = idx_load(&a, path, err, sizeof err);
    if (st == IDX_OK) {
        fuzz_check(a.type == 0x08, "type %s accepted", idx_type_name(a.type));
        fuzz_check(a.ndim >= 0 && a.ndim <= IDX_MAX_DIMS, "ndim %d", a.ndim);
        size_t n = 1;
        for (int d = 0; d < a.ndim; d++) n *= a.dims[d];
        fuzz_check(n == a.n && a.n <= IDX_MAX_ELEMS, "n %zu, prod(dims) %zu", a.n, n);
        unsigned sum = 0;
        for (size_t i = 0; i < a.n; i++) sum += a.data[i];
        if (sum == 1) fputc(0, stderr);   /* keep the reads */
    } else {
        fuzz_check(err[0], "status %d without a message", st);
    }
    idx_free(&a);
    close(fd);
    return 0;
}
