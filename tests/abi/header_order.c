/* Compiled (not run) by the abi.header_*_first tests: Ferry's nccl.h and
 * CUDA's runtime header may be included in either order, and agree on
 * cudaStream_t. */
#if defined(ORDER_nccl_first)
#include <nccl.h>
#include <cuda_runtime.h>
#else
#include <cuda_runtime.h>
#include <nccl.h>
#endif

ncclResult_t launch(ncclComm_t comm, cudaStream_t stream);

ncclResult_t launch(ncclComm_t comm, cudaStream_t stream) {
  static float x;
  cudaStream_t s = stream;
  return ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, s);
}
