// Decoding bootstrap messages (see wire.h). No sockets here: the Acceptor,
// the root, the inbox and Bootstrap::checkIn read the bytes and call these.
#include "bootstrap/wire.h"

#include <cstring>

namespace ferry::bootstrap {
namespace {

template <class T>
Status copyExact(const uint8_t* data, size_t size, T* out, const char* what) {
  *out = T{};
  if (data == nullptr || size != sizeof(T)) {
    return invalidArgument(std::string("bootstrap: ") + what + " of " + std::to_string(size) +
                           " bytes, expected " + std::to_string(sizeof(T)));
  }
  std::memcpy(out, data, sizeof(T));
  return Status::ok();
}

}  // namespace

Status decodeConnHeader(const uint8_t* data, size_t size, ConnHeader* out) {
  return copyExact(data, size, out, "connection header");
}

Status decodeCheckIn(const uint8_t* data, size_t size, CheckIn* out) {
  FERRY_TRY(copyExact(data, size, out, "check-in"));
  if (out->nranks <= 0 || out->nranks > kMaxRanks || out->rank < 0 || out->rank >= out->nranks) {
    return invalidArgument("invalid check-in: rank " + std::to_string(out->rank) + " of " +
                           std::to_string(out->nranks));
  }
  return Status::ok();
}

Status decodeP2pHeader(const uint8_t* data, size_t size, int nranks, P2pHeader* out) {
  FERRY_TRY(copyExact(data, size, out, "message header"));
  const P2pHeader& p = *out;
  if (p.rank < 0 || p.rank >= nranks) {
    return invalidArgument("message header names rank " + std::to_string(p.rank) + " of " +
                           std::to_string(nranks));
  }
  if (p.size > kMaxP2pBytes) {
    return invalidArgument("message from rank " + std::to_string(p.rank) + " tag " +
                           std::to_string(p.tag) + " announces " + std::to_string(p.size) +
                           " bytes, more than the " + std::to_string(kMaxP2pBytes) +
                           " a bootstrap message may carry");
  }
  return Status::ok();
}

Status decodeRingHello(const uint8_t* data, size_t size, RingHello* out) {
  return copyExact(data, size, out, "ring hello");
}

Status decodeRootReply(const uint8_t* data, size_t size, RootReply* out) {
  return copyExact(data, size, out, "root reply");
}

Status replyStatus(int32_t status, const std::string& msg) {
  switch (status) {
    case kReplyOk: return Status::ok();
    case kReplyMismatch:
    case kReplyDuplicate: return invalidUsage(msg);
    case kReplyInvalid: return invalidArgument(msg);
    default: return remoteError(msg);
  }
}

Status checkTableBytes(uint64_t bytes, int nranks) {
  uint64_t want = nranks > 0 ? uint64_t(nranks) * SockAddr::kPackedBytes : 0;
  if (nranks <= 0 || bytes != want) {
    return remoteError("bootstrap: root sent a table of " + std::to_string(bytes) +
                       " bytes, expected " + std::to_string(want));
  }
  return Status::ok();
}

Result<std::vector<SockAddr>> decodeAddressTable(const uint8_t* data, size_t size, int nranks) {
  FERRY_TRY(checkTableBytes(size, nranks));
  std::vector<SockAddr> peers(static_cast<size_t>(nranks));
  for (size_t r = 0; r < peers.size(); r++) {
    peers[r] = SockAddr::unpack(data + r * SockAddr::kPackedBytes, SockAddr::kPackedBytes);
  }
  return peers;
}

}  // namespace ferry::bootstrap
