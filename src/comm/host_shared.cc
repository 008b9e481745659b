#include "comm/host_shared.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ferry {

Result<HostShared> openHostShared(uint64_t commHash, const char* what, size_t bytes) {
  char name[64];
  snprintf(name, sizeof(name), "/ferry-%016llx-%s", static_cast<unsigned long long>(commHash), what);
  int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
  if (fd < 0) return systemError(std::string("cannot open ") + name + ": " + strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    close(fd);
    return systemError(std::string("cannot size ") + name + ": " + strerror(e));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return systemError(std::string("cannot map ") + name + ": " + strerror(errno));
  return HostShared{p, name};
}

}  // namespace ferry
