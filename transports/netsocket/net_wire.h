// Checking what a Socket-network peer sends before any of it is used: the
// listen handle (it travels through the communicator's allgather), the
// hello on each accepted socket and the reply to a resume (retry on). Pure functions over bytes; the fuzz target
// tests/fuzz/fuzz_net_hello.cc calls them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transports/netsocket/net_comm.h"

namespace ferry::netsocket {

// What connect() takes from a peer's handle.
struct HandleView {
  SockAddr to;
  Config cfg;
  uint64_t nonce = 0;
  std::vector<SockAddr> alts;  // the listener's other addresses (Handle::nAlt)
};

// The handle (`size` bytes, at most NCCL_NET_HANDLE_MAXSIZE) as a listener
// wrote it: magic, an address, and a layout within kMaxThreads/kMaxStreams.
// Its `pending` field (connect()'s own progress) is not read.
Result<HandleView> decodeHandle(const void* handle, size_t size);

// A complete hello from `who` on a listener with `nonce` whose connections
// have `wantStreams` data streams: an error says why the socket is refused.
// A resume (epoch > 0) is refused unless `resumeOk` (retry on).
Status checkHello(const Hello& h, uint64_t nonce, uint32_t wantStreams, const std::string& who,
                  bool resumeOk);

// The receiver's reply to a resume, from a sender that has `acked` of its
// `posted` messages acknowledged: the count to resend from (acked <= n <=
// posted), or why the connection cannot go on (kUnknown: the receiver closed
// it; anything else is not a Socket-network peer).
Result<uint64_t> checkResumeReply(const ResumeReply& r, uint64_t acked, uint64_t posted,
                                  const std::string& who);

}  // namespace ferry::netsocket
