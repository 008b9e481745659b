// The CUDA reduction kernels (issue 14): one per datatype, the op an
// argument, a grid-stride loop over reduce_math.h's arithmetic (the same
// code the host tests check bit for bit against kernels::reduce), and
// Avg's division likewise. Built by nvcc into a fatbin (sm_80,
// sm_90, sm_100 and PTX) that libferry.so embeds and the CUDA backend
// loads with cuModuleLoadData (cuda_accel.cc).
#include "accel/cuda/reduce_math.h"

using namespace ferry::cudamath;

#define FERRY_KERNEL(name, A)                                                                  \
  extern "C" __global__ void ferry_reduce_##name(void* dst, const void* a, const void* b,     \
                                                 unsigned long long count, int op) {          \
    const uint64_t step = uint64_t(gridDim.x) * blockDim.x;                                     \
    reduceRange<A>(dst, a, b, uint64_t(blockIdx.x) * blockDim.x + threadIdx.x, count, step, op); \
  }
FERRY_CUDA_REDUCE_TYPES(FERRY_KERNEL)

#define FERRY_DIVIDE_KERNEL(name, A)                                                                     \
  extern "C" __global__ void ferry_divide_##name(void* dst, const void* src, unsigned long long count,  \
                                                 unsigned long long n) {                                  \
    const uint64_t step = uint64_t(gridDim.x) * blockDim.x;                                               \
    divideRange<A>(dst, src, uint64_t(blockIdx.x) * blockDim.x + threadIdx.x, count, step, n);           \
  }
FERRY_CUDA_REDUCE_TYPES(FERRY_DIVIDE_KERNEL)
