// The registry of live communicators.
//
// Every ncclComm_t handed to the user is registered until it is destroyed or
// aborted, so a destroyed or foreign pointer is rejected instead of used.
// Work queued in a group keeps the comm's pointer and serial number; when the
// group ends, acquire() admits the work only if that very communicator is
// still alive (a later comm at the same address has another serial), and
// counts it as a user so that destroy waits for it instead of freeing memory
// the group is reading.
#pragma once

#include <atomic>
#include <cstdint>

#include "comm/comm.h"

namespace ferry {

// Registers c and gives it a new serial number.
void registerComm(Comm* c);
// After this, acquire() refuses c; call before waiting for users and freeing.
void unregisterComm(Comm* c);
// If c with this serial is alive: c->enter() and true (call c->exit() later).
bool acquireComm(Comm* c, uint64_t serial);

// The communicator this thread last found live and the removal count then:
// while no communicator has been unregistered since, it is still live
// without the registry's lock (isLiveComm, acquireComm). Inline: every API
// call checks its communicator.
struct LiveCache {
  const void* comm = nullptr;
  uint64_t removals = 0;
};
// constinit: no dynamic initialisation, so no TLS wrapper call per access.
extern thread_local constinit LiveCache tLiveComm;
extern std::atomic<uint64_t> gCommRemovals;  // bumped by every unregisterComm
bool isLiveCommSlow(const void* c);
inline bool isLiveComm(const void* c) {
  const LiveCache& t = tLiveComm;  // one TLS address computation
  if (c == t.comm && gCommRemovals.load(std::memory_order_acquire) == t.removals)
    [[likely]] return true;
  return isLiveCommSlow(c);
}

}  // namespace ferry
