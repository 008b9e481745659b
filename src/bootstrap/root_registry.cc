// Roots running in this process (see root_registry.h and root.h).
#include "bootstrap/root_registry.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "bootstrap/root.h"
#include "core/wait.h"

namespace ferry::bootstrap {
namespace {
struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<Expectation>> roots;
};
// Never destroyed: a detached root thread may unregister during exit.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}
}  // namespace

std::shared_ptr<Expectation> registerRoot(uint64_t secret, const SockAddr& addr, int nranks) {
  auto e = std::make_shared<Expectation>();
  e->secret = secret;
  e->addr = addr;
  e->nranks.store(nranks);
  std::lock_guard<std::mutex> lk(registry().mu);
  registry().roots.push_back(e);
  return e;
}

void unregisterRoot(const Expectation* e) {
  std::lock_guard<std::mutex> lk(registry().mu);
  std::erase_if(registry().roots, [e](const std::shared_ptr<Expectation>& p) { return p.get() == e; });
}

void expectRanks(uint64_t secret, const SockAddr& rootAddr, int nranks) {
  std::lock_guard<std::mutex> lk(registry().mu);
  for (auto& e : registry().roots) {
    if (e->secret != secret || !(e->addr == rootAddr)) continue;
    int unknown = 0;
    e->nranks.compare_exchange_strong(unknown, nranks);  // the first rank 0 wins
  }
}

void waitForRootReplies(uint64_t secret, const SockAddr& rootAddr, int64_t timeoutMs) {
  int64_t deadline = nowMs() + timeoutMs;
  while (true) {
    {
      std::lock_guard<std::mutex> lk(registry().mu);
      bool busy = false;
      for (auto& e : registry().roots) {
        busy |= e->secret == secret && e->addr == rootAddr && e->replying.load();
      }
      if (!busy) return;
    }
    if (nowMs() >= deadline) return;
    usleep(1000);
  }
}

}  // namespace ferry::bootstrap
