// testdev's IPC: another process of this host maps a range of our memfd
// (the part CUDA IPC handles play). The importer opens the memfd through
// /proc/<pid>/fd, which needs only the right to read the exporter's
// descriptors (same user), not ptrace attach.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "accel/test_device.h"

namespace ferry::accel {
namespace {

struct TestHandle {
  int32_t pid;
  int32_t fd;
  uint64_t offset;  // into the memfd
  uint64_t bytes;
};
static_assert(sizeof(TestHandle) <= sizeof(IpcHandle::data));

constexpr char kName[] = "testdev";

}  // namespace

const TestDevice::Import* TestDevice::importOf(const char* c) const {
  auto it = imports_.upper_bound(c);
  if (it == imports_.begin()) return nullptr;
  --it;
  const Import& im = it->second;
  return c < it->first + im.bytes ? &im : nullptr;
}

Status TestDevice::exportMemory(const void* p, size_t bytes, IpcHandle* out) {
  auto c = static_cast<const char*>(p);
  if (!inRegion(c)) return invalidArgument("testdev: exportMemory of memory this process did not allocate");
  FERRY_TRY(view(p, bytes).status());
  TestHandle h{static_cast<int32_t>(getpid()), fd_, static_cast<uint64_t>(c - device_), bytes};
  *out = IpcHandle{};
  std::memcpy(out->backend, kName, sizeof(kName));
  std::memcpy(out->data, &h, sizeof(h));
  return Status::ok();
}

Result<void*> TestDevice::importMemory(const IpcHandle& handle, size_t bytes) {
  if (std::strncmp(handle.backend, kName, sizeof(handle.backend)) != 0)
    return invalidArgument("testdev: importMemory of a handle from backend '" +
                           std::string(handle.backend, strnlen(handle.backend, sizeof(handle.backend))) + "'");
  TestHandle h;
  std::memcpy(&h, handle.data, sizeof(h));
  if (bytes == 0 || bytes > h.bytes)
    return invalidArgument("testdev: importMemory of " + std::to_string(bytes) + " bytes from a handle of " +
                           std::to_string(h.bytes));
  std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return systemError("testdev: opening " + path + ": " + strerror(errno));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  Import im{};
  const uint64_t base = h.offset / page * page;
  im.lead = static_cast<size_t>(h.offset - base);
  im.mapBytes = (im.lead + bytes + page - 1) / page * page;
  im.bytes = bytes;
  void* dev = mmap(nullptr, im.mapBytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, static_cast<off_t>(base));
  void* sh = mmap(nullptr, im.mapBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd,
                  static_cast<off_t>(base));
  int e = errno;
  close(fd);
  if (dev == MAP_FAILED || sh == MAP_FAILED) {
    if (dev != MAP_FAILED) munmap(dev, im.mapBytes);
    if (sh != MAP_FAILED) munmap(sh, im.mapBytes);
    return systemError("testdev: mapping " + path + ": " + strerror(e));
  }
  im.device = static_cast<char*>(dev);
  im.shadow = static_cast<char*>(sh);
  char* handed = im.device + im.lead;
  std::lock_guard<std::mutex> g(mu_);
  imports_[handed] = im;
  return static_cast<void*>(handed);
}

Status TestDevice::closeImported(void* p) {
  Import im;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = imports_.find(static_cast<const char*>(p));
    if (it == imports_.end()) return invalidArgument("testdev: closeImported of a pointer importMemory did not return");
    im = it->second;
    imports_.erase(it);
  }
  munmap(im.device, im.mapBytes);
  munmap(im.shadow, im.mapBytes);
  return Status::ok();
}

}  // namespace ferry::accel
