// A rank's bootstrap listener (see inbox.h).
#include "bootstrap/inbox.h"

#include <cstring>

#include "bootstrap/wire.h"

namespace ferry::bootstrap {

Inbox::Inbox(int rank, int nranks, uint64_t secret, const Socket& listener)
    : rank_(rank), nranks_(nranks), listener_(listener),
      acceptor_("rank " + std::to_string(rank) + " listener " + listener.peer().toString(),
                secret) {}

size_t Inbox::headBytes(uint32_t type) const {
  if (type == kRing) return sizeof(RingHello);
  if (type == kP2p) return sizeof(P2pHeader);
  return 0;
}

BodyPlan Inbox::body(uint32_t type, const uint8_t* head) {
  if (type != kP2p) return BodyPlan::read(0);
  P2pHeader p;
  Status valid = decodeP2pHeader(head, sizeof(p), nranks_, &p);
  if (!valid.isOk()) return BodyPlan::refuse(valid.message());
  if (awaiting_ && p.rank == awaitPeer_ && p.tag == awaitTag_) {
    // The one recv() waits for: its size is known; another size is recv's error.
    size_t n = p.size == awaitSize_ ? p.size : 0;
    queuedBytes_ += n;
    return BodyPlan::read(n);
  }
  if (p.size <= kMaxEagerBytes && queuedBytes_ + p.size <= kMaxQueuedBytes) {
    queuedBytes_ += p.size;
    return BodyPlan::read(p.size);
  }
  return BodyPlan::park();
}

void Inbox::abandoned(uint32_t type, const uint8_t* head, size_t bytes) { queuedBytes_ -= bytes; }

void Inbox::file(Incoming in) {
  if (in.type == kRing) {
    RingHello hello;
    (void)decodeRingHello(in.head.data(), in.head.size(), &hello);  // size fixed by headBytes()
    int prev = (rank_ - 1 + nranks_) % nranks_;
    if (!ringIn_ || ringIn_->valid() || hello.rank != prev) {
      acceptor_.refused("bootstrap: rank " + std::to_string(rank_) +
                        " refused ring connection from rank " + std::to_string(hello.rank) +
                        " (" + in.sock.peer().toString() + "): expected rank " +
                        std::to_string(prev) + (ringIn_ && !ringIn_->valid() ? "" : " once"));
      return;
    }
    *ringIn_ = std::move(in.sock);
    return;
  }
  P2pHeader p;
  (void)decodeP2pHeader(in.head.data(), in.head.size(), nranks_, &p);  // checked in body()
  queue_.push_back(Message{p.rank, p.tag, p.size, std::move(in.body)});
}

bool Inbox::takeQueued(int peer, int tag, void* data, size_t size, Status* st) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->rank != peer || it->tag != tag) continue;
    if (it->size != size) {
      *st = internalError("bootstrap recv: message from rank " + std::to_string(peer) + " tag " +
                          std::to_string(tag) + " has " + std::to_string(it->size) +
                          " bytes, expected " + std::to_string(size));
    } else {
      if (size) std::memcpy(data, it->data.data(), size);
      *st = Status::ok();
    }
    queuedBytes_ -= it->data.size();
    queue_.erase(it);
    return true;
  }
  return false;
}

Status Inbox::pump(const Until& u, const std::string& what) {
  if (u.expired()) return u.check(what);
  std::vector<Incoming> done;
  FERRY_TRY(acceptor_.step(listener_, *this, u.sliceMs(), nullptr, &done));
  for (Incoming& in : done) file(std::move(in));
  return Status::ok();
}

Status Inbox::acceptRing(Socket* ringIn, const Until& u) {
  ringIn_ = ringIn;
  Status st;
  const std::string what =
      "waiting for the ring connection from rank " + std::to_string((rank_ - 1 + nranks_) % nranks_);
  while (st.isOk() && !ringIn->valid()) st = pump(u, what);
  ringIn_ = nullptr;
  return st;
}

Status Inbox::recv(int peer, int tag, void* data, size_t size, const Until& u) {
  awaiting_ = true;
  awaitPeer_ = peer;
  awaitTag_ = tag;
  awaitSize_ = size;
  acceptor_.revisit();  // a parked message may be this one
  Status st;
  while (true) {
    if (takeQueued(peer, tag, data, size, &st)) break;
    st = pump(u, "waiting for the message");
    if (!st.isOk()) break;
  }
  awaiting_ = false;
  return st;
}

}  // namespace ferry::bootstrap
