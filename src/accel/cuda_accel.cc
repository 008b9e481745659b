#include "accel/cuda_accel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <new>

#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"

namespace ferry::accel {

namespace {

cu::DevicePtr dptr(const void* p) { return reinterpret_cast<cu::DevicePtr>(p); }

void runHostFn(void* data) {
  auto* fn = static_cast<std::function<void()>*>(data);
  (*fn)();
  delete fn;
}

}  // namespace

Result<std::unique_ptr<CudaAccelerator>> CudaAccelerator::create() {
  std::string path = config::getString(config::Param::kCudaLibrary);
  if (path.empty()) return invalidUsage("FERRY_CUDA_LIBRARY is empty: CUDA disabled");
  FERRY_ASSIGN(std::unique_ptr<CudaDriver> d, CudaDriver::load(path));
  if (cu::Result r = d->init(0); r != cu::kSuccess) return d->error(r, "cuInit");
  int count = 0;
  if (cu::Result r = d->deviceGetCount(&count); r != cu::kSuccess) return d->error(r, "cuDeviceGetCount");
  if (count <= 0) return systemError("no CUDA device");
  cu::Context ctx = nullptr;
  if (cu::Result r = d->ctxGetCurrent(&ctx); r != cu::kSuccess) return d->error(r, "cuCtxGetCurrent");
  if (!ctx) {
    int dev = 0;
    if (cu::Result r = d->deviceGet(&dev, 0); r != cu::kSuccess) return d->error(r, "cuDeviceGet");
    unsigned flags = 0;
    int active = 0;
    if (cu::Result r = d->primaryCtxGetState(dev, &flags, &active); r != cu::kSuccess)
      return d->error(r, "cuDevicePrimaryCtxGetState");
    if (!active && config::getString(config::Param::kDevice) != "cuda")
      return invalidUsage("the process does not use CUDA yet (no current context; FERRY_DEVICE=cuda "
                          "makes Ferry use device 0)");
    if (cu::Result r = d->primaryCtxRetain(&ctx, dev); r != cu::kSuccess)
      return d->error(r, "cuDevicePrimaryCtxRetain");
  }
  std::unique_ptr<CudaAccelerator> a(new CudaAccelerator(std::move(d), ctx));
  if (Status st = a->openSlab(); !st.isOk())
    FERRY_INFO(log::kInit, "cuda: no registered flag slab (%s); streams wait in host functions",
               st.message().c_str());
  FERRY_INFO(log::kInit, "cuda: %d device(s) through %s", count, path.c_str());
  return a;
}

CudaAccelerator::CudaAccelerator(std::unique_ptr<CudaDriver> d, cu::Context ctx)
    : d_(std::move(d)), ctx_(ctx) {}

Status CudaAccelerator::bind() const {
  cu::Context cur = nullptr;
  if (d_->ctxGetCurrent(&cur) == cu::kSuccess && cur) return Status::ok();
  if (cu::Result r = d_->ctxSetCurrent(ctx_); r != cu::kSuccess) return d_->error(r, "cuCtxSetCurrent");
  return Status::ok();
}

Status CudaAccelerator::openSlab() {
  FERRY_TRY(bind());
  const size_t bytes = kFlagStride * kFlagSlots;
  void* p = std::aligned_alloc(4096, bytes);
  if (!p) return systemError("flag slab allocation failed");
  // Portable: streams of every context (a process driving several GPUs,
  // one communicator each) wait on these flags, not only the first one's.
  if (cu::Result r = d_->memHostRegister(p, bytes, cu::kHostRegisterPortable | cu::kHostRegisterDeviceMap);
      r != cu::kSuccess) {
    std::free(p);
    return d_->error(r, "cuMemHostRegister");
  }
  cu::DevicePtr dev = 0;
  if (cu::Result r = d_->memHostGetDevicePointer(&dev, p, 0); r != cu::kSuccess) {
    d_->memHostUnregister(p);
    std::free(p);
    return d_->error(r, "cuMemHostGetDevicePointer");
  }
  const int n = slabCount_.load(std::memory_order_relaxed);
  slabs_[n] = Slab{static_cast<char*>(p), dev};
  slabCount_.store(n + 1, std::memory_order_release);
  for (uint32_t i = kFlagSlots; i-- > 0;) freeSlots_.push_back(uint32_t(n * kFlagSlots) + i);
  return Status::ok();
}

bool CudaAccelerator::owns(const void* p) const {
  if (!bind().isOk()) return false;
  unsigned type = 0;
  return d_->pointerGetAttribute(&type, cu::kPointerAttributeMemoryType, dptr(p)) == cu::kSuccess &&
         type == cu::kMemoryTypeDevice;
}

Result<void*> CudaAccelerator::alloc(size_t bytes) {
  FERRY_TRY(bind());
  cu::DevicePtr p = 0;
  if (cu::Result r = d_->memAlloc(&p, bytes ? bytes : 1); r != cu::kSuccess) return d_->error(r, "cuMemAlloc");
  return reinterpret_cast<void*>(p);
}

Status CudaAccelerator::free(void* p) {
  FERRY_TRY(bind());
  if (cu::Result r = d_->memFree(dptr(p)); r != cu::kSuccess) return d_->error(r, "cuMemFree");
  return Status::ok();
}

Result<StreamHandle> CudaAccelerator::createStream() {
  FERRY_TRY(bind());
  cu::Stream s = nullptr;
  if (cu::Result r = d_->streamCreate(&s, cu::kStreamNonBlocking); r != cu::kSuccess)
    return d_->error(r, "cuStreamCreate");
  return s;
}

Status CudaAccelerator::destroyStream(StreamHandle s) {
  FERRY_TRY(synchronize(s, config::getInt(config::Param::kTimeoutMs)));
  if (cu::Result r = d_->streamDestroy(s); r != cu::kSuccess) return d_->error(r, "cuStreamDestroy");
  return Status::ok();
}

// Portable: every context of the process may copy with it (a program may
// run communicators on several devices).
Status CudaAccelerator::pinHost(void* p, size_t bytes) {
  FERRY_TRY(bind());
  if (cu::Result r = d_->memHostRegister(p, bytes, cu::kHostRegisterPortable); r != cu::kSuccess)
    return d_->error(r, "cuMemHostRegister (staging)");
  return Status::ok();
}

void CudaAccelerator::unpinHost(void* p) {
  if (!bind().isOk()) return;
  if (cu::Result r = d_->memHostUnregister(p); r != cu::kSuccess)
    FERRY_WARN("%s", d_->error(r, "cuMemHostUnregister (staging)").message().c_str());
}

Status CudaAccelerator::copyAsync(void* dst, const void* src, size_t bytes, StreamHandle s) {
  if (bytes == 0) return Status::ok();
  FERRY_TRY(bind());
  if (!owns(dst) && !owns(src))
    return hostFnAsync(s, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  if (cu::Result r = d_->memcpyAsync(dptr(dst), dptr(src), bytes, s); r != cu::kSuccess)
    return d_->error(r, "cuMemcpyAsync");
  return Status::ok();
}

Status CudaAccelerator::hostFnAsync(StreamHandle s, std::function<void()> fn) {
  FERRY_TRY(bind());
  auto* f = new std::function<void()>(std::move(fn));
  if (cu::Result r = d_->launchHostFunc(s, runHostFn, f); r != cu::kSuccess) {
    delete f;
    return d_->error(r, "cuLaunchHostFunc");
  }
  return Status::ok();
}

std::shared_ptr<HostFlag> CudaAccelerator::newFlag() {
  std::lock_guard<std::mutex> g(mu_);
  const int slabs = slabCount_.load(std::memory_order_relaxed);
  if (freeSlots_.empty() && slabs > 0 && slabs < kMaxSlabs) {
    if (Status st = openSlab(); !st.isOk() && !slabsFullLogged_) {
      slabsFullLogged_ = true;
      FERRY_WARN("cuda: no flag slab beyond %d (%s); streams wait in host functions", slabs,
                 st.message().c_str());
    }
  }
  if (freeSlots_.empty()) {
    if (slabs == kMaxSlabs && !slabsFullLogged_) {
      slabsFullLogged_ = true;
      FERRY_WARN("cuda: all %d flag slabs in use (%zu flags); streams wait in host functions", kMaxSlabs,
                 kMaxSlabs * kFlagSlots);
    }
    return std::make_shared<HostFlag>();
  }
  uint32_t i = freeSlots_.back();
  freeSlots_.pop_back();
  auto* f = new (slabs_[i / kFlagSlots].host + (i % kFlagSlots) * kFlagStride) HostFlag();
  // The backend lives until exit (registry.cc): the deleter may use it.
  return std::shared_ptr<HostFlag>(f, [this, i](HostFlag* p) {
    p->~HostFlag();
    std::lock_guard<std::mutex> g(mu_);
    freeSlots_.push_back(i);
  });
}

cu::DevicePtr CudaAccelerator::slabAddress(const HostFlag* f) const {
  auto* w = reinterpret_cast<const char*>(f->word());
  const int n = slabCount_.load(std::memory_order_acquire);
  for (int k = 0; k < n; ++k) {
    const Slab& s = slabs_[k];
    if (w >= s.host && w < s.host + kFlagStride * kFlagSlots)
      return s.dev + static_cast<cu::DevicePtr>(w - s.host);
  }
  return 0;
}

Status CudaAccelerator::waitFlagAsync(StreamHandle s, const HostFlag* flag, uint32_t value,
                                      int64_t timeoutMs) {
  FERRY_TRY(bind());
  if (cu::DevicePtr a = slabAddress(flag)) {
    if (cu::Result r = d_->streamWaitValue32(s, a, value, cu::kWaitValueGeq); r != cu::kSuccess)
      return d_->error(r, "cuStreamWaitValue32");
    return Status::ok();
  }
  return hostFnAsync(s, [flag, value, timeoutMs] {
    if (!flag->waitAtLeast(value, timeoutMs))
      FERRY_WARN("cuda stream: a wait for a host flag gave up after %lld ms; the stream goes on",
                 static_cast<long long>(timeoutMs));
  });
}

Status CudaAccelerator::signalFlagAsync(StreamHandle s, HostFlag* flag, uint32_t value) {
  FERRY_TRY(bind());
  if (cu::DevicePtr a = slabAddress(flag)) {
    if (cu::Result r = d_->streamWriteValue32(s, a, value, 0); r != cu::kSuccess)
      return d_->error(r, "cuStreamWriteValue32");
    return Status::ok();
  }
  return Accelerator::signalFlagAsync(s, flag, value);
}

Result<bool> CudaAccelerator::capturing(StreamHandle s) {
  FERRY_TRY(bind());
  int status = cu::kCaptureStatusNone;
  if (cu::Result r = d_->streamIsCapturing(s, &status); r != cu::kSuccess)
    return d_->error(r, "cuStreamIsCapturing");
  return status != cu::kCaptureStatusNone;
}

Result<bool> CudaAccelerator::idle(StreamHandle s) {
  FERRY_TRY(bind());
  cu::Result r = d_->streamQuery(s);
  if (r == cu::kSuccess) return true;
  if (r == cu::kNotReady) return false;
  return d_->error(r, "cuStreamQuery");
}

// cuStreamSynchronize has no deadline: poll the stream instead.
Status CudaAccelerator::synchronize(StreamHandle s, int64_t timeoutMs) {
  Waiter w(nullptr, timeoutMs > 0 ? timeoutMs : INT64_MAX / 2, "a CUDA stream");
  for (;;) {
    FERRY_ASSIGN(bool done, idle(s));
    if (done) return Status::ok();
    FERRY_TRY(w.idle());
  }
}

}  // namespace ferry::accel
