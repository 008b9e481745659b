#include "tools/perf_tools/perf_mem.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ferry::perf {

// The few CUDA runtime entry points used, resolved from libcudart at run
// time. cudaError_t is an int enum; 0 is success.
struct PerfMem::Api {
  int (*getDeviceCount)(int*);
  int (*setDevice)(int);
  int (*malloc)(void**, size_t);
  int (*free)(void*);
  int (*memset)(void*, int, size_t);
  int (*memcpy)(void*, const void*, size_t, int);
  int (*streamCreate)(cudaStream_t*);
  int (*streamSynchronize)(cudaStream_t);
  int (*streamDestroy)(cudaStream_t);
  const char* (*getErrorString)(int);
};

namespace {

constexpr int kHostToDevice = 1, kDeviceToHost = 2;  // cudaMemcpyKind

template <typename F>
bool resolve(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  return *fn != nullptr;
}

// Ferry's device (ferry/device.h, FERRY_DEVICE), found in the process by
// name: the tools also run on NVIDIA's NCCL, which has no such calls.
// Adapted to the CUDA runtime's signatures so one code path serves both;
// copies are synchronous on the device's default stream, as cudaMemcpy is.
struct FerryDevice {
  int (*name)(const char**);
  int (*alloc)(void**, size_t);
  int (*free)(void*);
  int (*memcpyAsync)(void*, const void*, size_t, void*);
  int (*streamCreate)(void**);
  int (*streamSync)(void*);
  int (*streamDestroy)(void*);
  int (*staged)(ncclComm_t, unsigned long long*);
};
FerryDevice gFerry;

bool resolveFerry() {
  return resolve(RTLD_DEFAULT, "ferryDeviceName", &gFerry.name) &&
         resolve(RTLD_DEFAULT, "ferryDeviceAlloc", &gFerry.alloc) &&
         resolve(RTLD_DEFAULT, "ferryDeviceFree", &gFerry.free) &&
         resolve(RTLD_DEFAULT, "ferryDeviceMemcpyAsync", &gFerry.memcpyAsync) &&
         resolve(RTLD_DEFAULT, "ferryDeviceStreamCreate", &gFerry.streamCreate) &&
         resolve(RTLD_DEFAULT, "ferryDeviceStreamSynchronize", &gFerry.streamSync) &&
         resolve(RTLD_DEFAULT, "ferryDeviceStreamDestroy", &gFerry.streamDestroy) &&
         resolve(RTLD_DEFAULT, "ferryCommStagedBytes", &gFerry.staged);
}

int ferryCount(int* n) {
  *n = 1;
  return 0;
}
int ferrySetDevice(int) { return 0; }
int ferryMemcpy(void* dst, const void* src, size_t bytes, int) {
  int r = gFerry.memcpyAsync(dst, src, bytes, nullptr);
  return r != 0 ? r : gFerry.streamSync(nullptr);
}
int ferryMemset(void* dst, int v, size_t bytes) {
  void* zeros = std::malloc(bytes ? bytes : 1);
  if (zeros == nullptr) return 1;
  std::memset(zeros, v, bytes);
  int r = ferryMemcpy(dst, zeros, bytes, 0);
  std::free(zeros);
  return r;
}
int ferryStreamCreate(cudaStream_t* s) {
  return gFerry.streamCreate(reinterpret_cast<void**>(s));
}
int ferryStreamSync(cudaStream_t s) { return gFerry.streamSync(s); }
int ferryStreamDestroy(cudaStream_t s) { return gFerry.streamDestroy(s); }
// (The perf core does not link the library: no ncclGetErrorString here.)
const char* ferryError(int r) { return r == 0 ? "no error" : "Ferry device call failed (see the WARN above)"; }

unsigned char* hostAlloc(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64 + 64;
  void* p = std::aligned_alloc(64, bytes);
  if (p != nullptr) std::memset(p, 0, bytes);  // page faults stay out of the timed loop
  return static_cast<unsigned char*>(p);
}

}  // namespace

bool hostBuffersFromEnv() {
  const char* v = std::getenv("FERRY_PERF_HOST");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

PerfMem::~PerfMem() {
  for (const Block& b : blocks_) {
    if (device_) {
      if (b.owned) api_->free(b.base);
      std::free(b.mirror);
    } else {
      std::free(b.base);
    }
  }
  if (stream_ != nullptr) api_->streamDestroy(stream_);
  delete api_;
  if (lib_ != nullptr) dlclose(lib_);
}

bool PerfMem::check(int err, const char* what) {
  if (err == 0) return true;
  std::fprintf(stderr, "Test CUDA failure %s: '%s'\n", what, api_->getErrorString(err));
  return false;
}

// Ferry's own device (ferry/device.h) when the library has one configured.
bool PerfMem::initFerry(std::string* note) {
  const char* name = nullptr;
  if (!resolveFerry() || gFerry.name(&name) != 0) return false;
  api_ = new Api{ferryCount, ferrySetDevice, gFerry.alloc, gFerry.free, ferryMemset, ferryMemcpy,
                 ferryStreamCreate, ferryStreamSync, ferryStreamDestroy, ferryError};
  device_ = true;
  ferry_ = true;
  deviceIndex_ = 0;
  *note = std::string("buffers in device memory of Ferry's ") + name +
          " device (FERRY_DEVICE; staged through host memory by the library)";
  return check(api_->streamCreate(&stream_), "ferryDeviceStreamCreate");
}

unsigned long long PerfMem::stagedBytes(ncclComm_t comm) const {
  unsigned long long n = 0;
  if (ferry_ && gFerry.staged(comm, &n) != 0) n = 0;
  return n;
}

bool PerfMem::init(const char* cudartName, bool forceHost, int rank, std::string* note) {
  if (forceHost) {
    *note = "buffers in host memory (asked for with --host-buffers or FERRY_PERF_HOST=1)";
    return true;
  }
  lib_ = dlopen(cudartName, RTLD_NOW | RTLD_LOCAL);
  // GPU nodes often have only the versioned runtime (no -dev package).
  for (const char* v : {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
    if (lib_ != nullptr || std::strcmp(cudartName, "libcudart.so") != 0) break;
    lib_ = dlopen(v, RTLD_NOW | RTLD_LOCAL);
  }
  if (lib_ == nullptr) {
    if (initFerry(note)) return true;
    if (requireDevice_) {
      std::fprintf(stderr, "--device-buffers: no CUDA runtime (%s) and no Ferry device (FERRY_DEVICE)\n",
                   cudartName);
      return false;
    }
    *note = std::string("buffers in host memory (no CUDA runtime: ") + cudartName +
            " cannot be loaded)";
    return true;
  }
  api_ = new Api{};
  bool ok = resolve(lib_, "cudaGetDeviceCount", &api_->getDeviceCount) &&
            resolve(lib_, "cudaSetDevice", &api_->setDevice) &&
            resolve(lib_, "cudaMalloc", &api_->malloc) && resolve(lib_, "cudaFree", &api_->free) &&
            resolve(lib_, "cudaMemset", &api_->memset) &&
            resolve(lib_, "cudaMemcpy", &api_->memcpy) &&
            resolve(lib_, "cudaStreamCreate", &api_->streamCreate) &&
            resolve(lib_, "cudaStreamSynchronize", &api_->streamSynchronize) &&
            resolve(lib_, "cudaStreamDestroy", &api_->streamDestroy) &&
            resolve(lib_, "cudaGetErrorString", &api_->getErrorString);
  int count = 0;
  if (!ok || api_->getDeviceCount(&count) != 0 || count <= 0) {
    delete api_;
    api_ = nullptr;
    if (initFerry(note)) return true;
    if (requireDevice_) {
      std::fprintf(stderr, "--device-buffers: the CUDA runtime sees no GPU and Ferry has no device (FERRY_DEVICE)\n");
      return false;
    }
    *note = ok ? "buffers in host memory (the CUDA runtime sees no GPU)"
               : std::string("buffers in host memory (") + cudartName + " lacks CUDA entry points)";
    return true;
  }
  // One GPU per rank on a node, round robin, as nccl-tests with -g 1.
  deviceIndex_ = rank % count;
  device_ = true;
  *note = "buffers in device memory (cudaMalloc) on CUDA device " + std::to_string(deviceIndex_);
  return check(api_->setDevice(deviceIndex_), "cudaSetDevice") &&
         check(api_->streamCreate(&stream_), "cudaStreamCreate");
}

unsigned char* PerfMem::alloc(size_t bytes) {
  unsigned char* mirror = hostAlloc(bytes);
  if (mirror == nullptr) {
    std::fprintf(stderr, "cannot allocate %zu bytes of host memory\n", bytes);
    return nullptr;
  }
  if (!device_) {
    blocks_.push_back({mirror, mirror, bytes});
    return mirror;
  }
  void* dev = nullptr;
  const size_t padded = (bytes + 63) / 64 * 64 + 64;
  if (!check(api_->malloc(&dev, padded), "cudaMalloc") ||
      !check(api_->memset(dev, 0, padded), "cudaMemset")) {
    std::free(mirror);
    return nullptr;
  }
  blocks_.push_back({static_cast<unsigned char*>(dev), mirror, padded});
  return static_cast<unsigned char*>(dev);
}

bool PerfMem::adopt(unsigned char* p, size_t bytes) {
  unsigned char* mirror = hostAlloc(bytes);
  if (mirror == nullptr) {
    std::fprintf(stderr, "cannot allocate %zu bytes of host memory\n", bytes);
    return false;
  }
  blocks_.push_back({p, mirror, bytes, false});
  return check(api_->memset(p, 0, bytes), "cudaMemset");
}

const PerfMem::Block* PerfMem::find(const void* p) const {
  auto* c = static_cast<const unsigned char*>(p);
  for (const Block& b : blocks_) {
    if (c >= b.base && c < b.base + b.bytes) return &b;
  }
  return nullptr;
}

unsigned char* PerfMem::host(const void* p) const {
  const Block* b = device_ ? find(p) : nullptr;
  if (b == nullptr) return static_cast<unsigned char*>(const_cast<void*>(p));
  return b->mirror + (static_cast<const unsigned char*>(p) - b->base);
}

bool PerfMem::upload(const void* p, size_t bytes) {
  if (!device_ || bytes == 0) return true;
  return check(api_->memcpy(const_cast<void*>(p), host(p), bytes, kHostToDevice), "cudaMemcpy");
}

bool PerfMem::download(const void* p, size_t bytes) {
  if (!device_ || bytes == 0) return true;
  return sync() && check(api_->memcpy(host(p), p, bytes, kDeviceToHost), "cudaMemcpy");
}

bool PerfMem::sync() {
  return !device_ || check(api_->streamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace ferry::perf
