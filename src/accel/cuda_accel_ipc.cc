// CUDA IPC for the CUDA backend: another process of this host opens our
// allocation with cuIpcOpenMemHandle and addresses our range at its offset.
#include <cstring>
#include <string>

#include "accel/cuda_accel.h"

namespace ferry::accel {
namespace {

struct CudaHandle {
  cu::IpcMemHandle mem;  // the allocation's
  uint64_t offset;       // of the range in it
  uint64_t bytes;
};
static_assert(sizeof(CudaHandle) <= sizeof(IpcHandle::data));

constexpr char kName[] = "cuda";

}  // namespace

Status CudaAccelerator::exportMemory(const void* p, size_t bytes, IpcHandle* out) {
  FERRY_TRY(bind());
  cu::DevicePtr base = 0;
  size_t size = 0;
  const cu::DevicePtr at = reinterpret_cast<cu::DevicePtr>(p);
  if (cu::Result r = d_->memGetAddressRange(&base, &size, at); r != cu::kSuccess)
    return d_->error(r, "cuMemGetAddressRange");
  if (at + bytes > base + size)
    return invalidArgument("cuda: " + std::to_string(bytes) + " bytes at offset " + std::to_string(at - base) +
                           " leave an allocation of " + std::to_string(size));
  CudaHandle h{};
  if (cu::Result r = d_->ipcGetMemHandle(&h.mem, base); r != cu::kSuccess) return d_->error(r, "cuIpcGetMemHandle");
  h.offset = at - base;
  h.bytes = bytes;
  *out = IpcHandle{};
  std::memcpy(out->backend, kName, sizeof(kName));
  std::memcpy(out->data, &h, sizeof(h));
  return Status::ok();
}

Result<void*> CudaAccelerator::importMemory(const IpcHandle& handle, size_t bytes) {
  if (std::strncmp(handle.backend, kName, sizeof(handle.backend)) != 0)
    return invalidArgument("cuda: importMemory of a handle from backend '" +
                           std::string(handle.backend, strnlen(handle.backend, sizeof(handle.backend))) + "'");
  CudaHandle h;
  std::memcpy(&h, handle.data, sizeof(h));
  if (bytes == 0 || bytes > h.bytes)
    return invalidArgument("cuda: importMemory of " + std::to_string(bytes) + " bytes from a handle of " +
                           std::to_string(h.bytes));
  FERRY_TRY(bind());
  std::string key(h.mem.reserved, sizeof(h.mem.reserved));
  std::lock_guard<std::mutex> g(mu_);
  auto it = opened_.find(key);
  if (it == opened_.end()) {
    cu::DevicePtr base = 0;
    if (cu::Result r = d_->ipcOpenMemHandle(&base, h.mem, cu::kIpcLazyPeerAccess); r != cu::kSuccess)
      return d_->error(r, "cuIpcOpenMemHandle");
    it = opened_.emplace(key, Opened{base, 0}).first;
  }
  it->second.refs++;
  auto* p = reinterpret_cast<void*>(it->second.base + h.offset);
  auto& [k, n] = imports_[p];  // two windows at one address: counted twice
  k = key;
  n++;
  return p;
}

Status CudaAccelerator::closeImported(void* p) {
  std::lock_guard<std::mutex> g(mu_);
  auto im = imports_.find(p);
  if (im == imports_.end()) return invalidArgument("cuda: closeImported of a pointer importMemory did not return");
  auto it = opened_.find(im->second.first);
  if (--im->second.second == 0) imports_.erase(im);
  if (--it->second.refs > 0) return Status::ok();
  cu::DevicePtr base = it->second.base;
  opened_.erase(it);
  FERRY_TRY(bind());
  if (cu::Result r = d_->ipcCloseMemHandle(base); r != cu::kSuccess) return d_->error(r, "cuIpcCloseMemHandle");
  return Status::ok();
}

}  // namespace ferry::accel
