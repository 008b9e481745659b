// Handle and hello checks of the Socket network (see net_wire.h).
#include "transports/netsocket/net_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace ferry::netsocket {

Result<HandleView> decodeHandle(const void* handle, size_t size) {
  if (handle == nullptr || size < sizeof(Handle)) {
    return invalidArgument("NET/Socket: connect: handle of " + std::to_string(size) +
                           " bytes, expected " + std::to_string(sizeof(Handle)));
  }
  Handle h;
  std::memcpy(&h, handle, sizeof(h));
  HandleView v;
  v.to = SockAddr::unpack(h.addr, sizeof(h.addr));
  if (h.magic != kMagic || !v.to.valid()) return invalidArgument("NET/Socket: connect: not a Socket net handle");
  v.cfg.nThreads = h.nThreads;
  v.cfg.nSocks = h.nSocks;
  v.cfg.inlineBytes = h.inlineBytes;
  v.cfg.retryMs = h.retryMs;
  v.nonce = h.nonce;
  if (v.cfg.nThreads > kMaxThreads || v.cfg.nSocks < 1 || v.cfg.nStreams() > kMaxStreams) {
    return invalidArgument("NET/Socket: connect: handle asks for " + std::to_string(h.nThreads) +
                           " threads x " + std::to_string(h.nSocks) + " sockets");
  }
  if (h.nAlt > kMaxAltAddrs) {
    return invalidArgument("NET/Socket: connect: handle lists " + std::to_string(h.nAlt) +
                           " alternate addresses (at most " + std::to_string(kMaxAltAddrs) + ")");
  }
  for (int i = 0; i < h.nAlt; ++i) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = h.altIp[i];
    a.sin_port = htons(h.altPort[i]);
    v.alts.push_back(SockAddr::fromSockaddr(reinterpret_cast<const sockaddr*>(&a), sizeof(a)));
  }
  if (v.cfg.retryMs > kMaxRetryMs) {
    return invalidArgument("NET/Socket: connect: handle asks for a retry window of " +
                           std::to_string(h.retryMs) + " ms");
  }
  return v;
}

Status checkHello(const Hello& h, uint64_t nonce, uint32_t want, const std::string& who,
                  bool resumeOk) {
  if (h.magic != kMagic || h.nonce != nonce) {
    return invalidUsage("refusing connection from " + who + ": wrong " +
                        (h.magic != kMagic ? "magic" : "nonce") + " (not this listener's peer)");
  }
  if (h.nStreams != want || h.index > want) {
    return invalidUsage("refusing connection from " + who + ": stream " + std::to_string(h.index) +
                        " of " + std::to_string(h.nStreams) + ", expected " + std::to_string(want) +
                        " streams");
  }
  if (h.epoch != 0 && !resumeOk) {
    return invalidUsage("refusing connection from " + who +
                        ": it resumes a connection, but retry is off here (FERRY_NET_RETRY_MS=0)");
  }
  return Status::ok();
}

Result<uint64_t> checkResumeReply(const ResumeReply& r, uint64_t acked, uint64_t posted,
                                  const std::string& who) {
  if (r.magic != kResumeMagic || (r.status != kResumed && r.status != kUnknown)) {
    return remoteError("NET/Socket: " + who + " answered a resume with garbage");
  }
  if (r.status == kUnknown) {
    return remoteError("NET/Socket: " + who + " refused to resume the connection (it has no such connection: closed, or never accepted)");
  }
  if (r.received < acked || r.received > posted) {
    return remoteError("NET/Socket: " + who + " holds " + std::to_string(r.received) +
                       " messages, but " + std::to_string(acked) + " were acknowledged and " +
                       std::to_string(posted) + " sent");
  }
  return r.received;
}

}  // namespace ferry::netsocket
