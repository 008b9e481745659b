// Telling a sender process that is gone from one that is slow to reconnect
// (FERRY_NET_RETRY_MS on).
//
// A receiver whose connection broke cannot tell from its sockets whether
// the sending process died or the path failed: both look like an end of
// stream or a reset. Waiting out the whole retry window for a dead process
// made every survivor of a killed rank on another host fail only after the
// window (5 s), where an unretried connection fails at once.
//
// So a sending process keeps, for its lifetime, one listening socket per
// source address it connects from, from which nothing is ever read: its
// sentinel. The port goes in the hello. A receiver in a break connects to
// it now and then. A live process's kernel completes that handshake; the
// host of a process that is gone answers with a reset, i.e. the connect is
// refused, and only that ends the wait at once. Anything else (a timeout,
// no route: the broken path may be the cause) says nothing, and the
// receiver waits for the resume until the window ends, as before.
#pragma once

#include <cstdint>

#include "net/socket.h"

namespace ferry::netsocket {

// The sentinel port for the source address of `connected` (created on first
// use; connections queued on it from earlier probes are dropped). 0 if it
// cannot be had: the receiver then just waits.
uint32_t sentinelPort(const Socket& connected);

// A receiver's probing of its sender's sentinel.
struct AliveProbe {
  Socket sock;           // a connect in flight
  int64_t startedMs = 0;
  int64_t nextMs = 0;    // when to start the next one
};

// One step: true once a probe of `sentinel` was refused (the process is gone).
bool senderGone(const SockAddr& sentinel, AliveProbe* p, int64_t nowMs);

}  // namespace ferry::netsocket
