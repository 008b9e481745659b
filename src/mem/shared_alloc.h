// Shared allocations: what ncclMemAlloc hands out on host memory.
//
// Each allocation is its own memfd, mapped MAP_SHARED, so another process of
// the same user on this machine can map the very same pages (mapPeerRange)
// and read or write them with plain loads and stores: the memory behind
// symmetric windows (window.h). The fd stays open until the allocation is
// freed; peers open it through /proc/<pid>/fd/<fd>, which needs no helper
// socket and leaves nothing behind in /dev/shm when a process dies.
// Where memfd is unavailable the allocation is private anonymous memory
// (still valid for every collective; windows on it are not shared).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "core/status.h"

namespace ferry::mem {

// A shared allocation as a peer must name it to map it.
struct SharedRange {
  int fd = -1;             // the memfd, valid in the owning process only
  uint64_t id = 0;         // the allocation's serial number in its process
  size_t fileOffset = 0;   // where the asked range starts in that file
  size_t allocBytes = 0;   // the allocation's size (the file's size)
};

// Page-aligned, zero-filled memory of at least `bytes`; shared when possible.
Result<void*> allocShared(size_t bytes);
// Releases an allocShared block; an error for any other pointer.
Status freeShared(void* p);
// Whether [p, p + bytes) lies inside one shared allocation, and where.
bool lookupShared(const void* p, size_t bytes, SharedRange* out);

// Reads one byte of every page of [p, p + bytes) when the range is at most
// FERRY_PREFAULT_BYTES, so this process' first access to each page of memory
// a local peer shares is paid at one chosen moment (PeerMapping::map, a shm
// ring direction's first use) rather than piece by piece in the operations
// that follow. Filling the page tables is not enough
// (MAP_POPULATE): on a VM the first access of each process to each page can
// still cost microseconds (perf/README.md, "First access to shared pages").
void touchPages(const void* p, size_t bytes);

// A peer's range mapped into this process (unmapped by the destructor).
class PeerMapping {
 public:
  PeerMapping() = default;
  PeerMapping(const PeerMapping&) = delete;
  PeerMapping& operator=(const PeerMapping&) = delete;
  PeerMapping(PeerMapping&& o) noexcept { *this = std::move(o); }
  PeerMapping& operator=(PeerMapping&& o) noexcept;
  ~PeerMapping();

  // Maps `bytes` at `fileOffset` of process `pid`'s file descriptor `fd`
  // (touchPages'd).
  static Result<PeerMapping> map(pid_t pid, int fd, size_t fileOffset, size_t bytes);
  char* data() const { return data_; }

 private:
  void* base_ = nullptr;   // page-aligned start of the mapping
  size_t mapped_ = 0;
  char* data_ = nullptr;   // the asked offset inside it
};

}  // namespace ferry::mem
