#include "comm/registry.h"

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
}

bool isLiveComm(const void* c) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  return r.live.count(c) != 0;
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
