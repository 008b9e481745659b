// The host backend: plain memory, synchronous work, no streams.
#include "accel/host_accel.h"

#include <cstring>
#include <cstdlib>

#include "core/log.h"

namespace ferry::accel {

Result<void*> HostAccelerator::alloc(size_t bytes) {
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) return systemError("host allocation of " + std::to_string(bytes) + " bytes failed");
  return p;
}

Status HostAccelerator::free(void* p) {
  std::free(p);
  return Status::ok();
}

Status HostAccelerator::copyAsync(void* dst, const void* src, size_t bytes, StreamHandle) {
  if (bytes) std::memmove(dst, src, bytes);
  return Status::ok();
}

Status HostAccelerator::reduceAsync(void* dst, const void* a, const void* b, size_t count,
                                    kernels::DType t, kernels::Op op, StreamHandle) {
  kernels::reduce(dst, a, b, count, t, op);
  return Status::ok();
}

Status HostAccelerator::hostFnAsync(StreamHandle, std::function<void()> fn) {
  fn();
  return Status::ok();
}

// No stream to hold: the caller waits.
Status HostAccelerator::waitFlagAsync(StreamHandle, const HostFlag* flag, uint32_t value,
                                      int64_t timeoutMs) {
  if (!flag->waitAtLeast(value, timeoutMs))
    FERRY_WARN("host stream: a wait for a flag gave up after %lld ms", static_cast<long long>(timeoutMs));
  return Status::ok();
}

}  // namespace ferry::accel
