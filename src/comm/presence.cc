#include "comm/presence.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ferry {

Result<std::unique_ptr<Presence>> Presence::open(uint64_t commHash, int nranks) {
  static_assert(sizeof(Line) == 64, "one cache line per rank");
  if (nranks <= 0) return internalError("presence segment for no ranks");
  char name[64];
  snprintf(name, sizeof(name), "/ferry-%016llx-presence", static_cast<unsigned long long>(commHash));
  size_t bytes = sizeof(Line) * static_cast<size_t>(nranks);
  int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
  if (fd < 0) return systemError(std::string("cannot open ") + name + ": " + strerror(errno));
  // A new object is zero-filled (nobody parked); the first rank to size it
  // does it for all, later ones change nothing.
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    close(fd);
    return systemError(std::string("cannot size ") + name + ": " + strerror(e));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return systemError(std::string("cannot map ") + name + ": " + strerror(errno));
  return std::unique_ptr<Presence>(new Presence(static_cast<Line*>(p), bytes, nranks, name));
}

Presence::~Presence() { munmap(lines_, bytes_); }

void Presence::unlink() { shm_unlink(name_.c_str()); }

}  // namespace ferry
