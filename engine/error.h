/* error.h — the one error header: fatal errors, library checks, asserts.
 *
 * Every failure a user can hit ends in ct_fatal(): one line naming what went
 * wrong, optionally a "hint:" line saying what to do, then exit(1). The same
 * two lines without the exit: ct_error(); the message as text for a caller
 * to report: ct_fail(). Library checks (CUDA_CHECK, CUBLAS_CHECK,
 * CUDNN_CHECK, NCCL_CHECK) are built on one macro that prints file:line,
 * the call, and the library's own message.
 * Shape and dtype asserts (CT_ASSERT) stay on in release builds.
 *
 * Usable from C11 and from CUDA C++ (.cu) files.
 */
#ifndef CTRAIN_ERROR_H
#define CTRAIN_ERROR_H

#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A prefix for every error and log message of this process ("rank 1: " in
 * a multi-GPU run, so interleaved output says who spoke); "" by default. */
void ct_set_msg_prefix(const char *prefix);
const char *ct_msg_prefix(void);

/* Print "ctrain: <msg>" (and "hint: <hint>" when hint is non-NULL), exit(1). */
void ct_fatal_hint(const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
#define ct_fatal(...) ct_fatal_hint(NULL, __VA_ARGS__)

/* The same two lines as ct_fatal_hint ("ctrain: <prefix><msg>", then
 * "hint: <hint>" when hint is non-NULL), without exiting: for an error the
 * process survives (a result file it could not write) or must act on
 * before it stops (a watchdog that aborts its communicators, then _exit). */
void ct_error_hint(const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define ct_error(...) ct_error_hint(NULL, __VA_ARGS__)

/* An error as text, for an API that returns it instead of exiting (the
 * data loaders, file readers and parsers: tests read the message, callers
 * add the hint and report it with ct_fatal_hint(hint, "%s", err)): the
 * message into err (when err is non-NULL and errlen > 0, truncated to
 * fit); returns status, so `return ct_fail(err, errlen, -1, ...)` is one
 * line. */
int ct_fail(char *err, size_t errlen, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* While set (NULL clears), a library-check failure adds this as its hint:
 * what the program was doing, e.g. capturing a CUDA graph. */
void ct_error_note(const char *hint);

/* Report a failed library call: "ctrain: file:line: call failed: lib: msg". */
void ct_check_failed(const char *file, int line, const char *call,
                     const char *lib, const char *msg) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

/* Asserts that stay on in release builds; the message says which shapes or
 * dtypes disagreed so the caller can be found. */
#define CT_ASSERT(cond, ...)                                                   \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "ctrain: %s:%d: check failed: %s\n", __FILE__,     \
                    __LINE__, #cond);                                          \
            ct_fatal(__VA_ARGS__);                                             \
        }                                                                      \
    } while (0)

/* All four libraries report success as status 0; the message function turns
 * the status into the library's own words (engine/error.c, engine/cuda_errors.c). */
#define CT_LIB_CHECK(lib, call, msgfn)                                         \
    do {                                                                       \
        int ct_status_ = (int)(call);                                          \
        if (ct_status_ != 0)                                                   \
            ct_check_failed(__FILE__, __LINE__, #call, lib, msgfn(ct_status_)); \
    } while (0)

#ifdef CTRAIN_CUDA
#ifdef __cplusplus
extern "C" {
#endif
const char *ct_cuda_status_string(int status);
const char *ct_cublas_status_string(int status);
const char *ct_cudnn_status_string(int status);
const char *ct_nccl_status_string(int status);
#ifdef __cplusplus
}
#endif
#define CUDA_CHECK(call)   CT_LIB_CHECK("CUDA", call, ct_cuda_status_string)
#define CUBLAS_CHECK(call) CT_LIB_CHECK("cuBLAS", call, ct_cublas_status_string)
#define CUDNN_CHECK(call)  CT_LIB_CHECK("cuDNN", call, ct_cudnn_status_string)
#define NCCL_CHECK(call)   CT_LIB_CHECK("NCCL", call, ct_nccl_status_string)
/* After a kernel launch: catches a bad launch configuration at its site. */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
#endif

#endif
