/* cuda_errors.c — library status codes in the libraries' own words, for the
 * CUDA_CHECK / CUBLAS_CHECK / CUDNN_CHECK / NCCL_CHECK macros of error.h. */
#ifdef CTRAIN_CUDA
#include "error.h"

#include <cublas_api.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

const char *ct_cuda_status_string(int status)
{
    return cudaGetErrorString((cudaError_t)status);
}

const char *ct_cublas_status_string(int status)
{
    return cublasGetStatusString((cublasStatus_t)status);
}

const char *ct_cudnn_status_string(int status)
{
    return cudnnGetErrorString((cudnnStatus_t)status);
}

const char *ct_nccl_status_string(int status)
{
    return ncclGetErrorString((ncclResult_t)status);
}
#else
typedef int ct_cuda_errors_unused_; /* ISO C forbids an empty translation unit */
#endif
