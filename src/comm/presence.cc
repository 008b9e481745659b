#include "comm/presence.h"

#include <sys/mman.h>

#include "comm/host_shared.h"

namespace ferry {

Result<std::unique_ptr<Presence>> Presence::open(uint64_t commHash, int nranks) {
  static_assert(sizeof(Line) == 64, "one cache line per rank");
  if (nranks <= 0) return internalError("presence segment for no ranks");
  size_t bytes = sizeof(Line) * static_cast<size_t>(nranks);
  // Zero-filled when new: nobody parked.
  FERRY_ASSIGN(HostShared m, openHostShared(commHash, "presence", bytes));
  return std::unique_ptr<Presence>(new Presence(static_cast<Line*>(m.data), bytes, m.name));
}

Presence::~Presence() { munmap(lines_, bytes_); }

void Presence::unlink() { shm_unlink(name_.c_str()); }

}  // namespace ferry
