// touchPages / PeerMapping::map: a mapped peer range has every page in this
// process' page tables as soon as it is mapped (FERRY_PREFAULT_BYTES), and
// none when the parameter is 0 or below the range's size (counted before the
// test reads the mapping itself).
// /proc/self/pagemap's bit 63 says whether a virtual page is present.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "mem/shared_alloc.h"

namespace ferry::mem {
namespace {

constexpr size_t kPages = 64;

size_t presentPages(const char* p, size_t pages) {
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return SIZE_MAX;
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), n = 0;
  for (size_t i = 0; i < pages; ++i) {
    uint64_t e = 0;
    off_t at = static_cast<off_t>((reinterpret_cast<uintptr_t>(p) / page + i) * sizeof e);
    if (pread(fd, &e, sizeof e, at) != static_cast<ssize_t>(sizeof e)) {
      close(fd);
      return SIZE_MAX;
    }
    n += (e >> 63) & 1;
  }
  close(fd);
  return n;
}

// Maps this process' own allocation the way a peer maps it (through
// /proc/<pid>/fd), with FERRY_PREFAULT_BYTES set to `limit`.
size_t presentAfterMapping(const char* limit) {
  setenv("FERRY_PREFAULT_BYTES", limit, 1);
  config::reload();
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  Result<void*> a = allocShared(kPages * page);
  EXPECT_TRUE(a.isOk());
  if (!a.isOk()) return SIZE_MAX;
  std::memset(a.value(), 1, kPages * page);  // the owner's pages exist
  SharedRange r;
  EXPECT_TRUE(lookupShared(a.value(), kPages * page, &r));
  Result<PeerMapping> m = PeerMapping::map(getpid(), r.fd, 0, kPages * page);
  EXPECT_TRUE(m.isOk()) << m.status().message();
  size_t n = m.isOk() ? presentPages(m.value().data(), kPages) : SIZE_MAX;
  if (m.isOk()) {
    EXPECT_EQ(m.value().data()[kPages * page - 1], 1);
  }
  EXPECT_TRUE(freeShared(a.value()).isOk());
  unsetenv("FERRY_PREFAULT_BYTES");
  config::reload();
  return n;
}

TEST(TouchPages, APeerMappingHasEveryPagePresentOnceMapped) {
  EXPECT_EQ(presentAfterMapping("268435456"), kPages);
}

TEST(TouchPages, NoPageWhenOff) { EXPECT_EQ(presentAfterMapping("0"), 0u); }

TEST(TouchPages, NoPageForARangeLargerThanTheLimit) {
  EXPECT_EQ(presentAfterMapping("4096"), 0u);
}

}  // namespace
}  // namespace ferry::mem
