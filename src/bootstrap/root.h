// The bootstrap root: a detached thread that serves one rendezvous.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "net/socket.h"

namespace ferry::bootstrap {

// Take over `listener` and serve the rendezvous of `secret` on a detached
// thread until every rank checked in or `timeoutMs` passed. The thread owns
// all of its state, so it may outlive the caller.
Status startRoot(Socket listener, uint64_t secret, int64_t timeoutMs);

}  // namespace ferry::bootstrap
