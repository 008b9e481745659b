#include "comm/host_id.h"

#include <unistd.h>

#include <fstream>

#include "core/config.h"
#include "core/random.h"

namespace ferry {

uint64_t hash64(const void* data, size_t bytes, uint64_t seed) {
  // FNV-1a: stable across processes and builds, enough to tell hosts apart.
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string hostIdString() {
  std::string id = config::getString(config::Param::kHostId);
  if (!id.empty()) return id;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + ":" + boot;
}

uint64_t hostHash() {
  std::string id = hostIdString();
  return hash64(id.data(), id.size());
}

uint64_t machineHash() {
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return hash64(boot.data(), boot.size());
}

uint64_t randomNonce() { return random64() ^ static_cast<uint64_t>(getpid()); }

}  // namespace ferry
