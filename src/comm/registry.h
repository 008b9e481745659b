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

#include <cstdint>

#include "comm/comm.h"

namespace ferry {

// Registers c and gives it a new serial number.
void registerComm(Comm* c);
// After this, acquire() refuses c; call before waiting for users and freeing.
void unregisterComm(Comm* c);
bool isLiveComm(const void* c);
// If c with this serial is alive: c->enter() and true (call c->exit() later).
bool acquireComm(Comm* c, uint64_t serial);

}  // namespace ferry
