// Bootstrap point-to-point messages and the listener's accept path.
//
// Each send opens a fresh connection to the peer's listener (like NCCL):
// small control messages complete into the kernel's buffers without the
// receiver's help, so two ranks sending to each other cannot deadlock.
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "core/log.h"

namespace ferry {

using namespace bootstrap;

namespace {
// A legitimate peer sends its header right after connecting; an intruder that
// sends nothing is dropped after this long instead of blocking us.
constexpr int64_t kHeaderTimeoutMs = 2000;
}  // namespace

Status Bootstrap::send(int peer, int tag, const void* data, size_t size) {
  if (peer < 0 || peer >= nranks_) {
    return invalidArgument("bootstrap send: invalid peer " + std::to_string(peer));
  }
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

bool Bootstrap::takeQueued(int peer, int tag, void* data, size_t size, Status* st) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->rank != peer || it->tag != tag) continue;
    if (it->data.size() != size) {
      *st = internalError("bootstrap recv: message from rank " + std::to_string(peer) + " tag " +
                          std::to_string(tag) + " has " + std::to_string(it->data.size()) +
                          " bytes, expected " + std::to_string(size));
    } else {
      if (size) std::memcpy(data, it->data.data(), size);
      *st = Status::ok();
    }
    queue_.erase(it);
    return true;
  }
  return false;
}

Status Bootstrap::recv(int peer, int tag, void* data, size_t size) {
  if (peer < 0 || peer >= nranks_) {
    return invalidArgument("bootstrap recv: invalid peer " + std::to_string(peer));
  }
  std::lock_guard<std::mutex> lk(p2pMu_);
  Until u = until();
  while (true) {
    Status st;
    if (takeQueued(peer, tag, data, size, &st)) return st;
    st = acceptOne(u);
    if (!st.isOk()) {
      return Status(st.code(), "bootstrap recv from rank " + std::to_string(peer) + " tag " +
                                   std::to_string(tag) + ": " + st.message());
    }
  }
}

Status Bootstrap::acceptOne(const Until& u) {
  FERRY_ASSIGN(Socket s, acceptSocket(listener_, u));
  Until hu = Until::after(std::min(u.remainingMs(), kHeaderTimeoutMs), abortFlag_, &aborted_);
  ConnHeader h{};
  Status st = recvAll(s, &h, sizeof(h), hu);
  if (!st.isOk()) {
    if (u.expired()) return u.check("reading a connection header");
    FERRY_WARN("bootstrap: dropped connection from %s: %s", s.peer().toString().c_str(),
               st.message().c_str());
    return Status::ok();
  }
  if (h.secret != secret_) {
    FERRY_WARN("bootstrap: refused connection from %s: wrong secret",
               s.peer().toString().c_str());
    return Status::ok();
  }
  if (h.type == kP2p) return acceptP2p(std::move(s), u);
  if (h.type != kRing) {
    FERRY_WARN("bootstrap: refused connection from %s: wrong type %u",
               s.peer().toString().c_str(), h.type);
    return Status::ok();
  }
  RingHello hello{};
  FERRY_TRY(recvAll(s, &hello, sizeof(hello), u));
  int prev = (rank_ - 1 + nranks_) % nranks_;
  if (hello.rank != prev || ringIn_.valid()) {
    FERRY_WARN("bootstrap: rank %d refused ring connection from rank %d (%s): expected rank %d",
               rank_, hello.rank, s.peer().toString().c_str(), prev);
    return Status::ok();
  }
  ringIn_ = std::move(s);
  return Status::ok();
}

Status Bootstrap::acceptP2p(Socket sock, const Until& u) {
  P2pHeader p{};
  Status st = recvAll(sock, &p, sizeof(p), u);
  if (st.isOk() && (p.rank < 0 || p.rank >= nranks_ || p.size > kMaxP2pBytes)) {
    st = remoteError("bad message header (rank " + std::to_string(p.rank) + ", " +
                     std::to_string(p.size) + " bytes)");
  }
  Message m{p.rank, p.tag, {}};
  if (st.isOk()) {
    m.data.resize(p.size);
    st = recvAll(sock, m.data.data(), m.data.size(), u);
  }
  if (!st.isOk()) {
    if (u.expired()) return u.check("receiving a message");
    // A sender that died mid-message is not necessarily the peer we wait for.
    FERRY_WARN("bootstrap: rank %d dropped a message from %s: %s", rank_,
               sock.peer().toString().c_str(), st.message().c_str());
    return Status::ok();
  }
  queue_.push_back(std::move(m));
  return Status::ok();
}

}  // namespace ferry
