// Buffer registrations: see registrations.h.
#include "mem/registrations.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <set>

#include "core/log.h"

namespace ferry::mem {
namespace {

struct Reg {
  const void* comm;
  uintptr_t begin, end;
};

// Handles are numbers with a tag in the high bits, so a stray pointer is
// never mistaken for one; they are never reused within a process.
constexpr uintptr_t kTag = uintptr_t{0xfe77} << 48;
constexpr uintptr_t kTagMask = uintptr_t{0xffff} << 48;

struct Table {
  std::mutex mu;
  uintptr_t next = 1;
  std::map<uintptr_t, Reg> live;  // by handle
  std::set<uintptr_t> released;   // released by a free or a destroy, not yet deregistered
};

Table& table() {
  static Table* t = new Table;  // outlives static destructors (atexit users)
  return *t;
}

uintptr_t number(void* handle) { return reinterpret_cast<uintptr_t>(handle); }

}  // namespace

Result<void*> addRegistration(const void* comm, void* buff, size_t bytes) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  uintptr_t h = kTag | t.next++;
  uintptr_t b = reinterpret_cast<uintptr_t>(buff);
  t.live.emplace(h, Reg{comm, b, b + bytes});
  return reinterpret_cast<void*>(h);
}

Status removeRegistration(const void* comm, void* handle) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  uintptr_t h = number(handle);
  auto it = t.live.find(h);
  if (it == t.live.end()) {
    if (t.released.erase(h)) {
      FERRY_INFO(log::kInit, "ncclCommDeregister: handle %p was already released (its buffer was freed "
                 "or its communicator destroyed)", handle);
      return Status::ok();
    }
    return invalidArgument((h & kTagMask) == kTag
                               ? "handle was deregistered already"
                               : "handle is not one ncclCommRegister returned");
  }
  if (it->second.comm != comm) return invalidArgument("handle was registered with another communicator");
  t.live.erase(it);
  return Status::ok();
}

namespace {
// Moves every live registration matching `match` to the released set.
template <typename Match>
int releaseWhere(Match match) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  int n = 0;
  for (auto it = t.live.begin(); it != t.live.end();) {
    if (!match(it->second)) {
      ++it;
      continue;
    }
    t.released.insert(it->first);
    it = t.live.erase(it);
    ++n;
  }
  return n;
}
}  // namespace

int releaseRegistrationsIn(const void* base, size_t bytes) {
  uintptr_t b = reinterpret_cast<uintptr_t>(base), e = b + bytes;
  return releaseWhere([&](const Reg& r) { return r.begin < e && b < r.end; });
}

int releaseRegistrationsOf(const void* comm) {
  return releaseWhere([&](const Reg& r) { return r.comm == comm; });
}

}  // namespace ferry::mem
