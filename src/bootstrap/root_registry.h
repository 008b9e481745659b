// The roots running in this process and what rank 0 told them (internal to
// root.cc): the trusted communicator size, see root.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "net/sock_addr.h"

namespace ferry::bootstrap {

struct Expectation {
  uint64_t secret = 0;
  SockAddr addr;
  std::atomic<int> nranks{0};  // 0: not known (yet)
  std::atomic<bool> replying{false};  // sending the final answers (table or failure)
};

// Register a root; it reads ->nranks as it runs and unregisters when done.
std::shared_ptr<Expectation> registerRoot(uint64_t secret, const SockAddr& addr, int nranks);
void unregisterRoot(const Expectation* e);

}  // namespace ferry::bootstrap
