// Bootstrap point-to-point messages.
//
// Each send opens a fresh connection to the peer's listener (like NCCL):
// small control messages complete into the kernel's buffers without the
// receiver's help, so two ranks sending to each other cannot deadlock. The
// receiving side (accepting, bounding and queueing messages) is inbox.cc.
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/inbox.h"
#include "bootstrap/wire.h"
#include "core/log.h"

namespace ferry {

using namespace bootstrap;

namespace {
Status checkPeerAndSize(const char* op, int peer, int nranks, size_t size) {
  if (peer < 0 || peer >= nranks) {
    return invalidArgument(std::string("bootstrap ") + op + ": invalid peer " +
                           std::to_string(peer));
  }
  if (size > kMaxP2pBytes) {
    return invalidArgument(std::string("bootstrap ") + op + ": " + std::to_string(size) +
                           " bytes is more than the " + std::to_string(kMaxP2pBytes) +
                           " a bootstrap message may carry");
  }
  return Status::ok();
}
}  // namespace

Status Bootstrap::send(int peer, int tag, const void* data, size_t size) {
  FERRY_TRY(checkPeerAndSize("send", peer, nranks_, size));
  Until u = until();
  std::string what = "bootstrap send to rank " + std::to_string(peer) + " tag " +
                     std::to_string(tag) + ": ";
  auto s = connectSocket(peers_[peer], u);
  if (!s.isOk()) return Status(s.status().code(), what + s.status().message());
  uint8_t head[sizeof(ConnHeader) + sizeof(P2pHeader)];
  ConnHeader h{secret_, kP2p};
  P2pHeader p{rank_, tag, size};
  std::memcpy(head, &h, sizeof(h));
  std::memcpy(head + sizeof(h), &p, sizeof(p));
  Status st = sendAll(s.value(), head, sizeof(head), u);
  if (st.isOk() && size > 0) st = sendAll(s.value(), data, size, u);
  if (!st.isOk()) return Status(st.code(), what + st.message());
  return Status::ok();
}

Status Bootstrap::recv(int peer, int tag, void* data, size_t size) {
  FERRY_TRY(checkPeerAndSize("recv", peer, nranks_, size));
  std::lock_guard<std::mutex> lk(p2pMu_);
  Status st = inbox_->recv(peer, tag, data, size, until());
  if (!st.isOk()) {
    return Status(st.code(), "bootstrap recv from rank " + std::to_string(peer) + " tag " +
                                 std::to_string(tag) + ": " + st.message());
  }
  return Status::ok();
}

}  // namespace ferry
