// The stand-in CUDA driver's IPC entry points (fake_cuda.cc has the rest):
// a handle names the exporting process's memfd and an allocation in it; the
// importer maps that range twice, as its own memory is (PROT_NONE + shadow),
// and maps a handle once per process, the strictest reading of CUDA.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "fake_cuda_state.h"

using namespace fakecuda;

#pragma GCC visibility push(default)
extern "C" {

// IPC: a handle names this process's memfd and an allocation in it; the
// importer maps that range twice, as its own memory is (PROT_NONE + shadow).
struct IpcHandle {
  int32_t pid, fd;
  uint64_t offset, bytes;
  char pad[40];
};
static_assert(sizeof(IpcHandle) == 64);  // CUipcMemHandle

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  if (CUresult r = ready()) return r;
  Device& d = D();
  auto* c = reinterpret_cast<char*>(p);
  std::lock_guard<std::mutex> g(d.mu);
  if (c < d.dev || c >= d.dev + kRegion) return kInvalidValue;
  auto it = d.live.upper_bound(size_t(c - d.dev));
  if (it == d.live.begin() || size_t(c - d.dev) >= (--it)->first + it->second) return kInvalidValue;
  *base = reinterpret_cast<CUdeviceptr>(d.dev + it->first);
  *size = it->second;
  return kOk;
}

CUresult cuIpcGetMemHandle(IpcHandle* h, CUdeviceptr p) {
  CUdeviceptr base = 0;
  size_t size = 0;
  if (CUresult r = cuMemGetAddressRange_v2(&base, &size, p)) return r;
  if (base != p) return kInvalidValue;  // CUDA: the allocation's base
  count("cuIpcGetMemHandle");
  *h = IpcHandle{getpid(), D().fd, uint64_t(reinterpret_cast<char*>(p) - D().dev), size, {}};
  return kOk;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* p, IpcHandle h, unsigned) {
  if (CUresult r = ready()) return r;
  if (h.pid == getpid()) return kInvalidValue;  // CUDA: not in the exporting process
  // Strictest reading of CUDA: a handle is mapped once per process.
  const std::string key(reinterpret_cast<const char*>(&h), offsetof(IpcHandle, pad));
  {
    std::lock_guard<std::mutex> g(D().mu);
    if (D().opened.count(key)) return 208;  // CUDA_ERROR_ALREADY_MAPPED
  }
  std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return kInvalidValue;
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), lead = h.offset % page;
  const size_t len = (lead + h.bytes + page - 1) / page * page;
  void* a = mmap(nullptr, len, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, off_t(h.offset - lead));
  void* b = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, off_t(h.offset - lead));
  close(fd);
  if (a == MAP_FAILED || b == MAP_FAILED) return kInvalidValue;
  count("cuIpcOpenMemHandle");
  std::lock_guard<std::mutex> g(D().mu);
  D().opened.insert(key);
  D().imports[static_cast<char*>(a) + lead] = {static_cast<char*>(b) + lead, h.bytes, key};
  *p = reinterpret_cast<CUdeviceptr>(static_cast<char*>(a) + lead);
  return kOk;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
  if (CUresult r = ready()) return r;
  std::lock_guard<std::mutex> g(D().mu);
  auto it = D().imports.find(reinterpret_cast<char*>(p));
  if (it == D().imports.end()) return kInvalidValue;
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), lead = uintptr_t(p) % page;
  const size_t len = (lead + it->second.bytes + page - 1) / page * page;
  munmap(it->first - lead, len);
  munmap(it->second.shadow - lead, len);
  D().opened.erase(it->second.key);
  D().imports.erase(it);
  return kOk;
}

}  // extern "C"
#pragma GCC visibility pop
