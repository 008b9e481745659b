// The host backend (accelerator.h): every call completes before it returns.
#pragma once

#include "accel/accelerator.h"

namespace ferry::accel {

class HostAccelerator final : public Accelerator {
 public:
  const char* name() const override { return "host"; }
  bool owns(const void*) const override { return false; }
  Result<void*> alloc(size_t bytes) override;
  Status free(void* p) override;
  Result<StreamHandle> createStream() override { return StreamHandle{nullptr}; }
  Status destroyStream(StreamHandle) override { return Status::ok(); }
  bool ownsStream(StreamHandle) override { return false; }
  Status copyAsync(void* dst, const void* src, size_t bytes, StreamHandle s) override;
  Status reduceAsync(void* dst, const void* a, const void* b, size_t count, kernels::DType t,
                     kernels::Op op, StreamHandle s) override;
  Status hostFnAsync(StreamHandle s, std::function<void()> fn) override;
  Status waitFlagAsync(StreamHandle s, const HostFlag* flag, uint32_t value,
                       int64_t timeoutMs) override;
  Result<bool> idle(StreamHandle) override { return true; }
  Status synchronize(StreamHandle, int64_t) override { return Status::ok(); }
};

}  // namespace ferry::accel
