// The CUDA backend (accelerator.h): device memory of the current CUDA
// device through the driver API, loaded at run time (cuda_driver.h).
//
// Streams are the caller's CUstream/cudaStream_t values (nullptr: the
// legacy default stream). A stream waits for a HostFlag with
// cuStreamWaitValue32 on a slab of flags registered with the device (no
// host thread is held while it waits); a flag from elsewhere falls back to
// a host function that blocks. Reductions run the kernels nvcc built into
// libferry.so (cuda/reduce_kernels.cu), loaded at the first one; where the
// build had no nvcc, reduceAsync says so.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accel/accelerator.h"
#include "accel/cuda_driver.h"

namespace ferry::accel {

class CudaAccelerator final : public Accelerator {
 public:
  // The driver from FERRY_CUDA_LIBRARY, initialised, with at least one
  // device; the caller's current context, else device 0's primary one. Only
  // when the process uses CUDA already (a current context, or device 0's
  // primary context active) unless FERRY_DEVICE=cuda asks for it: a
  // host-memory program on a GPU machine must not get a context (and its
  // memory) on device 0 from Ferry.
  static Result<std::unique_ptr<CudaAccelerator>> create();
  ~CudaAccelerator() override = default;

  const char* name() const override { return "cuda"; }
  bool owns(const void* p) const override;
  Result<void*> alloc(size_t bytes) override;
  Status free(void* p) override;
  Result<StreamHandle> createStream() override;
  Status destroyStream(StreamHandle s) override;
  // Every stream is taken for a CUDA stream: there is no cheap check.
  bool ownsStream(StreamHandle) override { return true; }
  Status pinHost(void* p, size_t bytes) override;
  void unpinHost(void* p) override;
  // Host-to-host copies run as host functions: cuMemcpyAsync makes them
  // synchronous with respect to the host.
  Status copyAsync(void* dst, const void* src, size_t bytes, StreamHandle s) override;
  Status reduceAsync(void* dst, const void* a, const void* b, size_t count, kernels::DType t,
                     kernels::Op op, StreamHandle s) override;
  Status hostFnAsync(StreamHandle s, std::function<void()> fn) override;
  std::shared_ptr<HostFlag> newFlag() override;
  Status signalFlagAsync(StreamHandle s, HostFlag* flag, uint32_t value) override;
  bool copyEngines() const override { return true; }
  Status checkKernelOperand(const void* p, size_t bytes) const override;
  bool reduces() const override;
  bool divides() const override { return reduces(); }
  Status divideAsync(void* dst, const void* src, size_t count, kernels::DType t, uint64_t n,
                     StreamHandle h) override;
  Status waitFlagAsync(StreamHandle s, const HostFlag* flag, uint32_t value,
                       int64_t timeoutMs) override;
  // CUDA IPC (cuda_accel_ipc.cc): the allocation's cuIpcGetMemHandle and
  // the range's offset in it; an allocation opened twice in this process
  // (two windows in one peer buffer) is opened once and counted, as CUDA
  // maps a handle once per process.
  Status exportMemory(const void* p, size_t bytes, IpcHandle* out) override;
  Result<void*> importMemory(const IpcHandle& h, size_t bytes) override;
  Status closeImported(void* p) override;
  Result<bool> capturing(StreamHandle s) override;
  Result<bool> idle(StreamHandle s) override;
  Status synchronize(StreamHandle s, int64_t timeoutMs) override;

 private:
  static constexpr size_t kFlagStride = 64;  // one cache line per flag
  static constexpr size_t kFlagSlots = 1024;  // per slab
  // Slabs are added as flags run out (each communicator with device
  // windows holds two, each stream bridge at least one): a plain HostFlag
  // would make a gate wait a blocking host function again.
  static constexpr int kMaxSlabs = 64;
  CudaAccelerator(std::unique_ptr<CudaDriver> d, cu::Context ctx);
  // This thread has a current context (the caller's own is left alone).
  Status bind() const;
  // One more slab of kFlagSlots flags (mu_ held, or at create).
  Status openSlab();
  // The device address of a flag in a slab, or 0.
  cu::DevicePtr slabAddress(const HostFlag* f) const;

  // The kernels of reduce_kernels.cu (cuda_accel_kernels.cc).
  enum Family { kReduceKernel, kDivideKernel, kFamilies };
  // Family f's kernel for t, the module loaded at the first call.
  Result<cu::Function> kernel(Family f, kernels::DType t);
  // f over count elements: one thread per element up to 1024 blocks of
  // 256, then grid-stride.
  Status launch(Family f, kernels::DType t, size_t count, void** args, StreamHandle s);

  std::unique_ptr<CudaDriver> d_;
  cu::Context ctx_;
  cu::Module module_ = nullptr;
  cu::Function kernels_[kFamilies][kernels::kNumDTypes] = {};
  std::mutex mu_;
  struct Slab {
    char* host = nullptr;  // kFlagSlots flags, registered with the device
    cu::DevicePtr dev = 0;
  };
  // Written under mu_ before slabCount_ publishes it; read without mu_.
  Slab slabs_[kMaxSlabs];
  std::atomic<int> slabCount_{0};
  std::vector<uint32_t> freeSlots_;  // slab * kFlagSlots + slot
  bool slabsFullLogged_ = false;
  struct Opened {
    cu::DevicePtr base;
    int refs;
  };
  std::map<std::string, Opened> opened_;      // by handle bytes
  // importMemory's pointers -> their handle's key, times returned
  std::map<const void*, std::pair<std::string, int>> imports_;
};

}  // namespace ferry::accel
