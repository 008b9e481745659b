#include "comm/registry.h"

#include <atomic>
#include <map>
#include <mutex>

namespace ferry {
namespace {

struct Registry {
  std::mutex mu;
  std::map<const void*, uint64_t> live;  // comm -> serial
  uint64_t nextSerial = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: comms may outlive static teardown
  return *r;
}

}  // namespace

void registerComm(Comm* c) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  c->setSerial(r.nextSerial++);
  r.live[c] = c->serial();
}

void unregisterComm(Comm* c) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  r.live.erase(c);
  gCommRemovals.fetch_add(1);  // sequentially consistent: acquireComm
}

thread_local LiveCache tLiveComm;
std::atomic<uint64_t> gCommRemovals{0};

bool isLiveCommSlow(const void* c) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  if (r.live.count(c) == 0) return false;
  tLiveComm.comm = c;
  tLiveComm.removals = gCommRemovals.load(std::memory_order_relaxed);
  return true;
}

bool acquireComm(Comm* c, uint64_t serial) {
  if (c == tLiveComm.comm && gCommRemovals.load(std::memory_order_acquire) == tLiveComm.removals) {
    // Enter, then make sure no unregister came first: release() unregisters
    // (counting the removal) before it waits for the users to leave, so
    // either it sees our enter or we see its removal (both sequentially
    // consistent: enter's increment, the removal's increment and the two
    // loads). The registry lock per group end was ~110 instructions of a
    // 2-rank 8 B Send/Recv's ~2600.
    c->enter();
    if (gCommRemovals.load() == tLiveComm.removals && c->serial() == serial) return true;
    c->exit();
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.live.find(c);
  if (it == r.live.end() || it->second != serial) return false;
  c->enter();  // under the lock: unregister + waitIdle cannot slip in between
  return true;
}

}  // namespace ferry
