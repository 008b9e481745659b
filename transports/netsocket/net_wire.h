// Checking what a Socket-network peer sends before any of it is used: the
// listen handle (it travels through the communicator's allgather) and the
// hello on each accepted socket. Pure functions over bytes; the fuzz target
// tests/fuzz/fuzz_net_hello.cc calls them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transports/netsocket/net_comm.h"

namespace ferry::netsocket {

// What connect() takes from a peer's handle.
struct HandleView {
  SockAddr to;
  Config cfg;
  uint64_t nonce = 0;
};

// The handle (`size` bytes, at most NCCL_NET_HANDLE_MAXSIZE) as a listener
// wrote it: magic, an address, and a layout within kMaxThreads/kMaxStreams.
// Its `pending` field (connect()'s own progress) is not read.
Result<HandleView> decodeHandle(const void* handle, size_t size);

// A complete hello from `who` on a listener with `nonce` whose connections
// have `wantStreams` data streams: an error says why the socket is refused.
Status checkHello(const Hello& h, uint64_t nonce, uint32_t wantStreams, const std::string& who);

}  // namespace ferry::netsocket
