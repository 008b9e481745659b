// Handle and hello checks of the Socket network (see net_wire.h).
#include "transports/netsocket/net_wire.h"

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
  v.nonce = h.nonce;
  if (v.cfg.nThreads > kMaxThreads || v.cfg.nSocks < 1 || v.cfg.nStreams() > kMaxStreams) {
    return invalidArgument("NET/Socket: connect: handle asks for " + std::to_string(h.nThreads) +
                           " threads x " + std::to_string(h.nSocks) + " sockets");
  }
  return v;
}

Status checkHello(const Hello& h, uint64_t nonce, uint32_t want, const std::string& who) {
  if (h.magic != kMagic || h.nonce != nonce) {
    return invalidUsage("refusing connection from " + who + ": wrong " +
                        (h.magic != kMagic ? "magic" : "nonce") + " (not this listener's peer)");
  }
  if (h.nStreams != want || h.index > want) {
    return invalidUsage("refusing connection from " + who + ": stream " + std::to_string(h.index) +
                        " of " + std::to_string(h.nStreams) + ", expected " + std::to_string(want) +
                        " streams");
  }
  return Status::ok();
}

}  // namespace ferry::netsocket
