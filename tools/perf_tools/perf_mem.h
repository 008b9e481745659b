// Where the perf tools put their buffers. With a GPU (libcudart.so loads and
// cudaGetDeviceCount > 0) and no request for host memory, buffers are
// cudaMalloc'ed, inputs are written to a host mirror and copied over, and
// results are copied back for checking; ops run on a real cudaStream. This
// matters when the tools run against NVIDIA's NCCL on a GPU machine. Without
// CUDA, a Ferry library with a device configured (FERRY_DEVICE, e.g. the
// test device) gives device buffers through ferry/device.h, found by name at
// run time. CUDA is loaded with dlopen, so the tools build and run without it.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>
#include <vector>

namespace ferry::perf {

class PerfMem {
 public:
  PerfMem() = default;
  PerfMem(const PerfMem&) = delete;
  PerfMem& operator=(const PerfMem&) = delete;
  ~PerfMem();

  // Chooses host or device buffers. cudartName is the library to try
  // ("libcudart.so", then its versioned names; tests pass a missing name). forceHost: --host-buffers
  // or FERRY_PERF_HOST=1. *note says why host memory was chosen, or which
  // device is used. False only when CUDA loaded but failed.
  bool init(const char* cudartName, bool forceHost, int rank, std::string* note);
  // --device-buffers: init fails when there is no device at all.
  void requireDevice(bool on) { requireDevice_ = on; }
  // Ferry's own device (ferry/device.h, FERRY_DEVICE) rather than CUDA.
  bool ferryDevice() const { return ferry_; }
  // Bytes Ferry staged through host memory for comm (0 unless ferryDevice()).
  unsigned long long stagedBytes(ncclComm_t comm) const;

  bool device() const { return device_; }
  int deviceIndex() const { return deviceIndex_; }
  cudaStream_t stream() const { return stream_; }

  // Zeroed, 64-byte aligned, pages touched; null on failure (with a message).
  unsigned char* alloc(size_t bytes);
  // Device memory allocated elsewhere (ncclMemAlloc for -R): zeroed, given
  // a mirror; its owner frees it. False on failure (with a message).
  bool adopt(unsigned char* p, size_t bytes);
  // The host bytes standing for p (p itself on host memory).
  unsigned char* host(const void* p) const;
  // Mirror -> device and back for bytes at p; no-ops on host memory.
  bool upload(const void* p, size_t bytes);
  bool download(const void* p, size_t bytes);
  // Waits for the stream (no-op on host memory).
  bool sync();

 private:
  struct Block {
    unsigned char* base;
    unsigned char* mirror;  // == base on host memory
    size_t bytes;
    bool owned = true;  // false: adopt()ed, its owner frees it
  };
  struct Api;
  const Block* find(const void* p) const;
  bool check(int err, const char* what);
  bool initFerry(std::string* note);

  Api* api_ = nullptr;
  void* lib_ = nullptr;
  bool device_ = false;
  bool ferry_ = false;
  bool requireDevice_ = false;
  int deviceIndex_ = -1;
  cudaStream_t stream_ = nullptr;
  std::vector<Block> blocks_;
};

// FERRY_PERF_HOST=1 in the environment (the tool's own switch, read here
// and not through libferry's registry: the tools also run on NVIDIA's NCCL).
bool hostBuffersFromEnv();

}  // namespace ferry::perf
