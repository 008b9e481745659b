// The CUDA backend's kernels: the reductions and Avg's division that nvcc
// compiled into the embedded fatbin
// (cuda/reduce_kernels.cu), looked up by name at first use.
#include <algorithm>
#include <string>

#include "accel/cuda_accel.h"

namespace ferry::accel {

// The fatbin nvcc built (cmake/embed_file.cmake), or an empty one.
extern const unsigned char kReduceFatbin[];
extern const size_t kReduceFatbinSize;

bool CudaAccelerator::reduces() const { return kReduceFatbinSize != 0; }

// Device memory (this process's or a peer's, imported) or host memory
// registered with CUDA: what cuPointerGetAttribute knows.
Status CudaAccelerator::checkKernelOperand(const void* p, size_t) const {
  FERRY_TRY(bind());
  unsigned type = 0;
  if (d_->pointerGetAttribute(&type, cu::kPointerAttributeMemoryType, reinterpret_cast<cu::DevicePtr>(p)) ==
      cu::kSuccess)
    return Status::ok();
  return invalidUsage("cuda: a kernel operand at " + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                      " is pageable host memory (neither device memory nor registered with CUDA)");
}

Result<cu::Function> CudaAccelerator::kernel(Family f, kernels::DType t) {
  static const char* const kPrefix[kFamilies] = {"ferry_reduce_", "ferry_divide_"};
  const int i = static_cast<int>(t);
  if (i < 0 || i >= kernels::kNumDTypes) return invalidArgument("cuda: invalid datatype");
  std::lock_guard<std::mutex> g(mu_);
  if (kernels_[f][i]) return kernels_[f][i];
  if (kReduceFatbinSize == 0)
    return invalidUsage("cuda: this libferry.so was built without nvcc: no reduction kernels");
  if (!module_) {
    if (cu::Result r = d_->moduleLoadData(&module_, kReduceFatbin); r != cu::kSuccess)
      return d_->error(r, "cuModuleLoadData (the reduction kernels)");
  }
  std::string name = std::string(kPrefix[f]) + kernels::name(t);
  if (cu::Result r = d_->moduleGetFunction(&kernels_[f][i], module_, name.c_str()); r != cu::kSuccess)
    return d_->error(r, ("cuModuleGetFunction " + name).c_str());
  return kernels_[f][i];
}

// Operands must be addressable by the device (its memory, or registered
// host memory).
Status CudaAccelerator::launch(Family f, kernels::DType t, size_t count, void** args, StreamHandle s) {
  if (count == 0) return Status::ok();
  FERRY_TRY(bind());
  FERRY_ASSIGN(cu::Function fn, kernel(f, t));
  const unsigned block = 256;
  const unsigned grid = static_cast<unsigned>(std::min<size_t>((count + block - 1) / block, 1024));
  if (cu::Result r = d_->launchKernel(fn, grid, 1, 1, block, 1, 1, 0, s, args, nullptr); r != cu::kSuccess)
    return d_->error(r, "cuLaunchKernel");
  return Status::ok();
}

Status CudaAccelerator::reduceAsync(void* dst, const void* a, const void* b, size_t count,
                                    kernels::DType t, kernels::Op op, StreamHandle s) {
  unsigned long long n = count;
  int o = static_cast<int>(op);
  void* args[] = {&dst, &a, &b, &n, &o};
  return launch(kReduceKernel, t, count, args, s);
}

Status CudaAccelerator::divideAsync(void* dst, const void* src, size_t count, kernels::DType t, uint64_t by,
                                    StreamHandle s) {
  unsigned long long n = count, d = by;
  void* args[] = {&dst, &src, &n, &d};
  return launch(kDivideKernel, t, count, args, s);
}

}  // namespace ferry::accel
