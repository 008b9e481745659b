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
  std::atomic<uint64_t> removals{0};  // bumped by every unregisterComm
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
  r.removals.fetch_add(1, std::memory_order_release);
}

// Every call checks its communicator: the thread's last live one is known
// live without the lock until any communicator is unregistered.
bool isLiveComm(const void* c) {
  thread_local const void* lastLive = nullptr;
  thread_local uint64_t lastRemovals = 0;
  Registry& r = registry();
  uint64_t removals = r.removals.load(std::memory_order_acquire);
  if (c == lastLive && removals == lastRemovals) return true;
  std::lock_guard<std::mutex> lk(r.mu);
  if (r.live.count(c) == 0) return false;
  lastLive = c;
  lastRemovals = r.removals.load(std::memory_order_relaxed);
  return true;
}

bool acquireComm(Comm* c, uint64_t serial) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.live.find(c);
  if (it == r.live.end() || it->second != serial) return false;
  c->enter();  // under the lock: unregister + waitIdle cannot slip in between
  return true;
}

}  // namespace ferry
