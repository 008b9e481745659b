// A stand-in CUDA driver (libcuda's entry points Ferry uses, same names and
// ABI) for machines without a GPU: tests point FERRY_CUDA_LIBRARY at it, so
// the CUDA backend's host-side logic runs for real here (loading and
// resolving the driver, context binding, pointer queries, streams, host
// functions, stream waits on registered host memory, queries, errors,
// loading the reduction kernels and launching them).
//
// A GPU's kernels cannot run here: cuModuleLoadData accepts the fatbin,
// cuModuleGetFunction knows the reduction kernels by name, and
// cuLaunchKernel runs their host instantiation (src/accel/cuda/
// reduce_math.h, the code nvcc compiled) on the stream, over the launch's
// own arguments.
//
// "Device" memory is a memfd mapped PROT_NONE at the addresses handed out
// (any host load or store faults, as on a discrete GPU) and read-write at a
// second address the stand-in's own copies use. Each stream is a worker
// thread running its work in order. Host functions run one at a time
// across all streams, as CUDA may run them, and driver calls from one fail
// with CUDA_ERROR_NOT_PERMITTED, as CUDA allows. Calls other than cuInit,
// cuDeviceGet*, cuGetErrorString and context calls need cuInit and a
// current context, as the real driver does.
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "accel/cuda/reduce_math.h"
#include "fake_cuda_state.h"

using namespace fakecuda;

namespace {

// The kernels by name, as reduce_kernels.cu defines them: `pointers`
// leading pointer parameters (operands), then the element count, then the
// family's own; bind() reads those and returns the work over the operands'
// views (captured by value: params and v are the launch's own).
using Work = std::function<void()>;
struct Kernel {
  const char* name;
  size_t elem;
  int pointers;
  Work (*bind)(char** v, uint64_t n, void** params);
};
template <class T>
T arg(void** params, int i) {
  return *static_cast<T*>(params[i]);
}
#define FERRY_FAKE_KERNELS(n, A)                                                                         \
  {"ferry_reduce_" #n, sizeof(A::S), 3,                                                                  \
   [](char** v, uint64_t c, void** p) -> Work {                                                          \
     char *d = v[0], *x = v[1], *y = v[2];                                                               \
     const int op = arg<int>(p, 4);                                                                      \
     return [=] { reduceRange<A>(d, x, y, 0, c, 1, op); };                                               \
   }},                                                                                                   \
  {"ferry_divide_" #n, sizeof(A::S), 2,                                                                  \
   [](char** v, uint64_t c, void** p) -> Work {                                                          \
     char *d = v[0], *x = v[1];                                                                          \
     const uint64_t by = arg<unsigned long long>(p, 3);                                                  \
     return [=] { divideRange<A>(d, x, 0, c, 1, by); };                                                  \
   }},
using namespace ferry::cudamath;
const Kernel kKernels[] = {FERRY_CUDA_REDUCE_TYPES(FERRY_FAKE_KERNELS)};
char gModule;  // the one module's identity

}  // namespace

// The library is built with hidden visibility like the rest of the tree:
// these are its exports.
#pragma GCC visibility push(default)
extern "C" {

CUresult cuInit(unsigned) {
  Device& d = D();
  std::lock_guard<std::mutex> g(d.mu);
  if (d.init) return kOk;
  int fd = memfd_create("ferry-fakecuda", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, off_t(kRegion)) != 0) return kInvalidValue;
  void* a = mmap(nullptr, kRegion, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  void* b = mmap(nullptr, kRegion, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (a == MAP_FAILED || b == MAP_FAILED) return kInvalidValue;
  d.fd = fd;  // kept open: cuIpcGetMemHandle names it
  d.dev = static_cast<char*>(a);
  d.shadow = static_cast<char*>(b);
  d.freeList[0] = kRegion;
  d.init = true;
  return kOk;
}

CUresult cuDeviceGetCount(int* n) {
  if (!D().init) return kNotInitialized;
  *n = 1;
  return kOk;
}

CUresult cuDeviceGet(int* dev, int ordinal) {
  if (!D().init) return kNotInitialized;
  if (ordinal != 0) return kInvalidValue;
  *dev = 0;
  return kOk;
}

CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  if (!D().init) return kNotInitialized;
  if (dev != 0) return kInvalidValue;
  count("cuDevicePrimaryCtxRetain");
  *ctx = &gPrimary;
  gPrimaryActive = true;
  return kOk;
}

CUresult cuDevicePrimaryCtxGetState(int dev, unsigned* flags, int* active) {
  if (!D().init) return kNotInitialized;
  if (dev != 0) return kInvalidValue;
  *flags = 0;
  *active = gPrimaryActive.load() ? 1 : 0;
  return kOk;
}

CUresult cuCtxGetCurrent(void** ctx) {
  *ctx = tCtx;
  return kOk;
}

CUresult cuCtxSetCurrent(void* ctx) {
  if (ctx && ctx != &gPrimary) return kInvalidContext;
  tCtx = ctx;
  if (ctx) gPrimaryActive = true;
  return kOk;
}

CUresult cuGetErrorString(CUresult r, const char** s) {
  switch (r) {
    case kOk: *s = "no error"; return kOk;
    case kInvalidValue: *s = "invalid argument"; return kOk;
    case kNotInitialized: *s = "initialization error"; return kOk;
    case kInvalidContext: *s = "invalid device context"; return kOk;
    case kInvalidHandle: *s = "invalid resource handle"; return kOk;
    case kNotReady: *s = "device not ready"; return kOk;
    case 500: *s = "named symbol not found"; return kOk;
    case 700: *s = "an illegal memory access was encountered"; return kOk;
    case kNotPermitted: *s = "operation not permitted"; return kOk;
    default: *s = nullptr; return kInvalidValue;
  }
}

CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr p) {
  if (CUresult r = ready()) return r;
  count("cuPointerGetAttribute");
  if (attribute != 2) return kInvalidValue;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE only
  auto* c = reinterpret_cast<char*>(p);
  if (!isHost(p)) {
    if (!view(p, 1)) return kInvalidValue;
    *static_cast<unsigned*>(data) = 2;  // CU_MEMORYTYPE_DEVICE
    return kOk;
  }
  if (!registeredHost(c)) return kInvalidValue;  // plain host memory: not CUDA's
  *static_cast<unsigned*>(data) = 1;  // CU_MEMORYTYPE_HOST
  return kOk;
}

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  if (CUresult r = ready()) return r;
  Device& d = D();
  size_t want = (bytes + kAlign - 1) / kAlign * kAlign;
  std::lock_guard<std::mutex> g(d.mu);
  for (auto it = d.freeList.begin(); it != d.freeList.end(); ++it) {
    if (it->second < want) continue;
    size_t off = it->first, left = it->second - want;
    d.freeList.erase(it);
    if (left) d.freeList[off + want] = left;
    d.live[off] = want;
    *p = reinterpret_cast<CUdeviceptr>(d.dev + off);
    return kOk;
  }
  return 2;  // CUDA_ERROR_OUT_OF_MEMORY
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  if (CUresult r = ready()) return r;
  Device& d = D();
  std::lock_guard<std::mutex> g(d.mu);
  auto* c = reinterpret_cast<char*>(p);
  auto it = d.live.find(size_t(c - d.dev));
  if (c < d.dev || c >= d.dev + kRegion || it == d.live.end()) return kInvalidValue;
  size_t off = it->first, n = it->second;
  d.live.erase(it);
  auto next = d.freeList.find(off + n);
  if (next != d.freeList.end()) {
    n += next->second;
    d.freeList.erase(next);
  }
  auto prev = d.freeList.lower_bound(off);
  if (prev != d.freeList.begin() && (--prev)->first + prev->second == off) {
    prev->second += n;
  } else {
    d.freeList[off] = n;
  }
  return kOk;
}

CUresult cuStreamCreate(void** s, unsigned) {
  if (CUresult r = ready()) return r;
  auto* st = new Stream;
  std::lock_guard<std::mutex> g(D().mu);
  D().streams.insert(st);
  *s = st;
  return kOk;
}

CUresult cuStreamDestroy_v2(void* s) {
  if (CUresult r = ready()) return r;
  {
    std::lock_guard<std::mutex> g(D().mu);
    if (!D().streams.erase(static_cast<Stream*>(s))) return kInvalidHandle;
  }
  delete static_cast<Stream*>(s);  // runs what is queued first
  return kOk;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void* s) {
  if (CUresult r = ready()) return r;
  Stream* st = stream(s);
  if (!st) return kInvalidHandle;
  char* d = view(dst, bytes);
  char* f = view(src, bytes);
  if (!d || !f) return kInvalidValue;
  count("cuMemcpyAsync");
  // CUDA's documented worst case for pageable memory ("API synchronization
  // behavior"): a copy between host memory that is not page-locked and the
  // device, and any host-to-host copy, is synchronous with respect to the
  // host: the driver first waits for the stream, then copies. A library
  // that hands cuMemcpyAsync pageable staging stalls its caller here (and
  // hangs, if the stream waits for the caller's own later work).
  if ((isHost(dst) && !registeredHost(d)) || (isHost(src) && !registeredHost(f)) ||
      (isHost(dst) && isHost(src))) {
    count("cuMemcpyAsync (synchronous: pageable or host-to-host)");
    drain(st);
    std::memmove(d, f, bytes);
    return kOk;
  }
  st->push([d, f, bytes] { std::memmove(d, f, bytes); });
  return kOk;
}

CUresult cuLaunchHostFunc(void* s, void (*fn)(void*), void* data) {
  if (CUresult r = ready()) return r;
  Stream* st = stream(s);
  if (!st) return kInvalidHandle;
  count("cuLaunchHostFunc");
  st->push([fn, data] {
    std::lock_guard<std::mutex> g(gHostFnMu);
    fn(data);
  });
  return kOk;
}

CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned) {
  if (CUresult r = ready()) return r;
  std::lock_guard<std::mutex> g(D().mu);
  D().registered[reinterpret_cast<uintptr_t>(p)] = bytes;
  return kOk;
}

CUresult cuMemHostUnregister(void* p) {
  if (CUresult r = ready()) return r;
  std::lock_guard<std::mutex> g(D().mu);
  return D().registered.erase(reinterpret_cast<uintptr_t>(p)) ? kOk : kInvalidValue;
}

// Unified addressing: a registered host page's device address is its own.
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned) {
  if (CUresult r = ready()) return r;
  if (!registeredHost(p)) return kInvalidValue;
  *d = reinterpret_cast<CUdeviceptr>(p);
  return kOk;
}

// The stream waits until (int32_t)(*addr - value) >= 0; addr must be
// registered host memory (what the device can read).
CUresult cuStreamWaitValue32_v2(void* s, CUdeviceptr addr, uint32_t value, unsigned flags) {
  if (CUresult r = ready()) return r;
  Stream* st = stream(s);
  if (!st) return kInvalidHandle;
  auto* w = reinterpret_cast<uint32_t*>(addr);
  if (flags != 0 || !registeredHost(w)) return kInvalidValue;
  count("cuStreamWaitValue32");
  st->push([w, value] {
    for (;;) {
      uint32_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
      if (static_cast<int32_t>(v - value) >= 0) return;
      timespec ts{0, 1000000};
      syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, &ts, nullptr, 0);
    }
  });
  return kOk;
}

// The stream stores value at addr (registered host memory), as the device
// does: a plain store that wakes no futex sleeper.
CUresult cuStreamWriteValue32_v2(void* s, CUdeviceptr addr, uint32_t value, unsigned flags) {
  if (CUresult r = ready()) return r;
  Stream* st = stream(s);
  if (!st) return kInvalidHandle;
  auto* w = reinterpret_cast<uint32_t*>(addr);
  if (flags != 0 || !registeredHost(w)) return kInvalidValue;
  count("cuStreamWriteValue32");
  st->push([w, value] { __atomic_store_n(w, value, __ATOMIC_RELEASE); });
  return kOk;
}

CUresult cuStreamBeginCapture_v2(void* s, int) {
  if (CUresult r = ready()) return r;
  Stream* st = s ? stream(s) : nullptr;  // the legacy stream cannot capture
  if (!st) return kInvalidValue;
  std::lock_guard<std::mutex> g(st->mu);
  st->capturing = true;
  return kOk;
}

CUresult cuStreamEndCapture(void* s, void** graph) {
  if (CUresult r = ready()) return r;
  Stream* st = s ? stream(s) : nullptr;
  if (!st) return kInvalidValue;
  size_t n = 0;
  {
    std::lock_guard<std::mutex> g(st->mu);
    if (!st->capturing) return kInvalidValue;
    st->capturing = false;
    n = st->graph.size();
    st->graph.clear();
  }
  std::lock_guard<std::mutex> g(D().mu);
  D().counters["captured"] += long(n);
  *graph = nullptr;
  return kOk;
}

CUresult cuStreamIsCapturing(void* s, int* status) {
  if (CUresult r = ready()) return r;
  Stream* st = stream(s);
  if (!st) return kInvalidHandle;
  std::lock_guard<std::mutex> g(st->mu);
  *status = st->capturing ? 1 : 0;
  return kOk;
}

CUresult cuStreamQuery(void* s) {
  if (CUresult r = ready()) return r;
  Stream* st = stream(s);
  if (!st) return kInvalidHandle;
  std::lock_guard<std::mutex> g(st->mu);
  return st->done == st->enqueued ? kOk : kNotReady;
}

CUresult cuStreamSynchronize(void* s) {
  if (CUresult r = ready()) return r;
  Stream* st = stream(s);
  if (!st) return kInvalidHandle;
  drain(st);
  return kOk;
}

CUresult cuModuleLoadData(void** module, const void* image) {
  if (CUresult r = ready()) return r;
  if (!image) return kInvalidValue;
  count("cuModuleLoadData");
  *module = &gModule;
  return kOk;
}

CUresult cuModuleGetFunction(void** fn, void* module, const char* name) {
  if (CUresult r = ready()) return r;
  if (module != &gModule) return kInvalidHandle;
  for (const Kernel& k : kKernels)
    if (std::strcmp(k.name, name) == 0) {
      *fn = const_cast<Kernel*>(&k);
      return kOk;
    }
  return 500;  // CUDA_ERROR_NOT_FOUND
}

// The kernels' parameters: their operands (dst first), the count, then
// the family's own (see kKernels).
CUresult cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned, void* s, void** params, void** extra) {
  if (CUresult r = ready()) return r;
  Stream* st = stream(s);
  if (!st) return kInvalidHandle;
  const auto* k = static_cast<const Kernel*>(fn);
  if (!params || extra || gx * gy * gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024) return kInvalidValue;
  const auto n = arg<unsigned long long>(params, k->pointers);
  // A kernel reads and writes device memory or registered host memory;
  // pageable host memory is out of its reach.
  char* v[3] = {};
  for (int i = 0; i < k->pointers; ++i) {
    const auto p = arg<CUdeviceptr>(params, i);
    v[i] = !isHost(p) || registeredHost(reinterpret_cast<char*>(p)) ? view(p, n * k->elem) : nullptr;
    if (!v[i]) return 700;  // CUDA_ERROR_ILLEGAL_ADDRESS
  }
  count("cuLaunchKernel");
  st->push(k->bind(v, n, params));
  return kOk;
}

// For tests: delay every stream task by us microseconds from now on.
void fakeCudaSetTaskDelayUs(unsigned us) { gTaskDelayUs = us; }

// For tests: how often an entry point was called (0 for unknown names).
long fakeCudaCount(const char* name) {
  std::lock_guard<std::mutex> g(D().mu);
  auto it = D().counters.find(name);
  return it == D().counters.end() ? 0 : it->second;
}

}  // extern "C"
#pragma GCC visibility pop
