#include "mem/shared_alloc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/config.h"

namespace ferry::mem {
namespace {

struct Block {
  size_t bytes;
  int fd;  // -1: private memory
  uint64_t id;
};

uint64_t gNextId = 1;  // under gMu

std::mutex gMu;
// Leaked on purpose: frees may come from static destructors of the program.
std::map<uintptr_t, Block>& blocks() {
  static auto* m = new std::map<uintptr_t, Block>;
  return *m;
}

size_t pageSize() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// A memfd of `bytes` mapped shared, or -1 in *fd with private memory.
void* mapNew(size_t bytes, int* fd) {
  *fd = memfd_create("ferry-mem", MFD_CLOEXEC);
  if (*fd >= 0 && ftruncate(*fd, static_cast<off_t>(bytes)) == 0) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    if (p != MAP_FAILED) return p;
  }
  if (*fd >= 0) close(*fd);
  *fd = -1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

Result<void*> allocShared(size_t bytes) {
  if (bytes == 0) return invalidArgument("size is 0");
  size_t total = roundUp(bytes, pageSize());
  int fd = -1;
  void* p = mapNew(total, &fd);
  if (!p) return systemError("ncclMemAlloc: mapping " + std::to_string(total) + " bytes failed");
  std::lock_guard<std::mutex> lk(gMu);
  blocks()[reinterpret_cast<uintptr_t>(p)] = Block{total, fd, gNextId++};
  return p;
}

Status freeShared(void* p) {
  std::lock_guard<std::mutex> lk(gMu);
  auto it = blocks().find(reinterpret_cast<uintptr_t>(p));
  if (it == blocks().end()) return invalidArgument("ptr was not allocated by ncclMemAlloc");
  munmap(p, it->second.bytes);
  if (it->second.fd >= 0) close(it->second.fd);
  blocks().erase(it);
  return Status::ok();
}

bool lookupShared(const void* p, size_t bytes, SharedRange* out) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lk(gMu);
  auto it = blocks().upper_bound(a);
  if (it == blocks().begin()) return false;
  --it;
  const Block& b = it->second;
  if (b.fd < 0 || a - it->first > b.bytes || bytes > b.bytes - (a - it->first)) return false;
  *out = SharedRange{b.fd, b.id, a - it->first, b.bytes};
  return true;
}

PeerMapping& PeerMapping::operator=(PeerMapping&& o) noexcept {
  std::swap(base_, o.base_);
  std::swap(mapped_, o.mapped_);
  std::swap(data_, o.data_);
  return *this;
}

void touchPages(const void* p, size_t bytes) {
  int64_t most = config::getInt(config::Param::kPrefaultBytes);
  if (most <= 0 || bytes > static_cast<uint64_t>(most)) return;
  const auto* c = static_cast<const volatile char*>(p);
  char sum = 0;
  for (size_t o = 0; o < bytes; o += pageSize()) sum = static_cast<char>(sum + c[o]);
  asm volatile("" ::"r"(sum));  // the reads are volatile; this only quiets "unused"
}

PeerMapping::~PeerMapping() {
  if (base_) munmap(base_, mapped_);
}

Result<PeerMapping> PeerMapping::map(pid_t pid, int fd, size_t fileOffset, size_t bytes) {
  std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  int local = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (local < 0)
    return systemError("cannot open " + path + " (a local peer's shared buffer): " + std::strerror(errno));
  size_t start = fileOffset / pageSize() * pageSize();
  size_t len = roundUp(fileOffset - start + bytes, pageSize());
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, local, static_cast<off_t>(start));
  int err = errno;
  close(local);
  if (p == MAP_FAILED) return systemError("cannot map " + path + ": " + std::strerror(err));
  PeerMapping m;
  m.base_ = p;
  m.mapped_ = len;
  m.data_ = static_cast<char*>(p) + (fileOffset - start);
  touchPages(p, len);
  return m;
}

}  // namespace ferry::mem
