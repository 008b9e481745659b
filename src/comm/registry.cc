#include "comm/registry.h"

#include <atomic>
#include <map>
#include <mutex>

#include "core/wait.h"

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

thread_local constinit LiveCache tLiveComm;
std::atomic<uint64_t> gCommRemovals{0};

namespace {
// Threads inside acquireComm's lock-free path (see there).
std::atomic<uint64_t> gAcquiring{0};
}  // namespace

void unregisterComm(Comm* c) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lk(r.mu);
    r.live.erase(c);
    gCommRemovals.fetch_add(1);  // sequentially consistent: acquireComm
  }
  // A thread that read the old removal count may be about to enter c: wait
  // until it has entered (then the caller's waitIdle waits for it) or seen
  // this removal and left c alone. The window is a few instructions long.
  Backoff b;
  while (gAcquiring.load() != 0) b.pause();
}

bool isLiveCommSlow(const void* c) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  if (r.live.count(c) == 0) return false;
  tLiveComm.comm = c;
  tLiveComm.removals = gCommRemovals.load(std::memory_order_relaxed);
  return true;
}

// Without the registry's lock when c is the thread's last live
// communicator and nothing was unregistered since (the lock per group end
// was ~110 instructions of a 2-rank 8 B Send/Recv's ~2600). All four
// operations are sequentially consistent. Announced in gAcquiring before
// the removal count is read, so an unregisterComm that counted its removal
// first is seen here (c is then not touched), and one that counted it later
// waits until we have entered (its caller's waitIdle then waits for our
// exit) or backed out.
bool acquireComm(Comm* c, uint64_t serial) {
  if (c == tLiveComm.comm) {
    gAcquiring.fetch_add(1);
    bool entered = false;
    if (gCommRemovals.load() == tLiveComm.removals) {
      c->enter();
      entered = c->serial() == serial;
      if (!entered) c->exit();
    }
    gAcquiring.fetch_sub(1);
    if (entered) return true;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.live.find(c);
  if (it == r.live.end() || it->second != serial) return false;
  c->enter();  // under the lock: unregister + waitIdle cannot slip in between
  return true;
}

}  // namespace ferry
