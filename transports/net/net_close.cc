// NetConnection's close exchange (see net_connection.h, "Closing").
#include <array>
#include <cstring>
#include <thread>

#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"
#include "transports/net/net_connection.h"

namespace ferry::net {
namespace {

// The only messages a closing connection sends after its data pieces.
struct CloseMsg {
  uint64_t magic;
  uint32_t kind;
  uint32_t count;  // header: receives the sender posts after our header arrives
  uint64_t check;
};
constexpr uint64_t kCloseMagic = 0x534c435952524546ull;  // "FERRYCLS" in memory
constexpr uint32_t kHeader = 1;
constexpr uint32_t kFiller = 2;
constexpr uint32_t kFailed = 3;  // count: the Code this side failed with
// A peer announcing more fillers than this is not a Ferry peer.
constexpr uint32_t kMaxFillers = 1u << 16;

uint64_t checksum(const CloseMsg& m) {
  return (m.magic ^ (uint64_t{m.kind} << 32 | m.count)) * 0x9e3779b97f4a7c15ull;
}

bool parse(const void* data, size_t size, CloseMsg* m) {
  if (size != sizeof(CloseMsg)) return false;
  std::memcpy(m, data, sizeof(CloseMsg));
  return m->magic == kCloseMagic && m->check == checksum(*m);
}

}  // namespace

bool NetConnection::isFailureNotice(const void* data, size_t size, Code* code) {
  CloseMsg m{};
  if (!parse(data, size, &m) || m.kind != kFailed) return false;
  *code = static_cast<Code>(m.count);
  return true;
}

// A close message arriving while no close is under way: the peer failed
// (its notice says why) or destroyed its communicator while we still expect
// data. Data pieces are never 24 bytes with the magic and checksum.
Status NetConnection::controlMessage(const void* data, size_t size) {
  CloseMsg m{};
  if (closing_ || !parse(data, size, &m)) return Status::ok();
  if (m.kind == kFailed) {
    error_ = noticeStatus(static_cast<Code>(m.count));
  } else if (m.kind == kHeader) {
    error_ = remoteError("rank " + std::to_string(peer_) +
                         " closed the connection (its communicator was destroyed) on " + describe_);
    FERRY_WARN("%s", error_.message().c_str());
  }
  return error_;
}

Status NetConnection::noticeStatus(Code code) const {
  std::string who = "rank " + std::to_string(peer_);
  if (code == Code::kInvalidUsage)
    return invalidUsage(who + " failed with a usage error (see its WARN; e.g. ranks running "
                              "different operations)");
  return remoteError(who + " failed (see its WARN) on " + describe_);
}

// Completes, in order, the receives posted ahead (without consuming them) and
// tells whether one of them is the peer's failure notice.
bool NetConnection::noticeArrived(Code* code) {
  for (int i = 0; i < recvPosted_; ++i) {
    Slot& s = recv_[(recvHead_ + i) % nslots_];
    if (!s.done) {
      int done = 0, size = 0;
      if (!s.req || net_->test(s.req, &done, &size) != ncclSuccess || !done) return false;
      s.req = nullptr;
      s.done = true;
      s.size = static_cast<size_t>(size);
    }
    if (isFailureNotice(s.buf.data(), s.size, code)) return true;
  }
  return false;
}

// Before closing, tell the peer why this side failed when that is more than
// "it went away" (a usage error: ranks running different operations), so the
// peer fails with the same code. The notice gets 100 ms to leave.
void NetConnection::reportFailure(Code reason) {
  if (reason != Code::kRemote && reason != Code::kTimeout && error_.isOk() && sendComm_ &&
      !closing_ && queueCloseMsg(kFailed, static_cast<uint32_t>(reason))) {
    int64_t end = nowMs() + 100;
    while (sendCount_ > 0 && nowMs() < end && progress().isOk()) std::this_thread::yield();
  }
  markFailed();
}

// Queues one close message behind whatever is queued; false when no send
// slot is free right now.
bool NetConnection::queueCloseMsg(uint32_t kind, uint32_t count) {
  SendSlot slot;
  if (!trySend(&slot).isOk() || !slot.data) return false;
  CloseMsg m{kCloseMagic, kind, count, 0};
  m.check = checksum(m);
  std::memcpy(slot.data, &m, sizeof(m));
  return commitSend(sizeof(m)).isOk();
}

// Takes every piece that has arrived: data pieces before the peer's header
// are dropped, its header sets how many fillers we owe, and after it only
// fillers arrive, for the receives we posted after the header.
Status NetConnection::takeCloseMsgs(bool* moved) {
  for (;;) {
    RecvPiece p;
    FERRY_TRY(tryRecv(&p));
    if (!p.ready) return Status::ok();
    *moved = true;
    CloseMsg m{};
    bool isClose = !p.isRef && parse(p.data, p.size, &m);
    if (peerFillers_ < 0) {
      if (isClose && m.kind == kHeader && m.count >= 1 && m.count <= kMaxFillers) {
        peerFillers_ = static_cast<int>(m.count);
        // Receives posted after the header (recvPosted_ - 1 now) plus the
        // budget make exactly the K our own header announced.
        recvBudget_ = nslots_ - (recvPosted_ - 1);
      } else {
        strayPieces_++;
      }
    } else {
      if (!isClose || m.kind != kFiller) {
        FERRY_WARN("net: %s: unexpected message after the peer's close header", describe_.c_str());
      }
      fillersGot_++;
    }
    FERRY_TRY(releaseRecv());
  }
}

bool NetConnection::closeStep(bool* moved, bool* ok) {
  *ok = false;
  if (closeOver_ || !error_.isOk() || (!sendComm_ && !recvComm_)) {
    closeOver_ = true;
    *ok = error_.isOk() && requestsInFlight() == 0;
    return true;
  }
  if (!closing_) {
    closing_ = true;
    slotOut_ = false;  // a slot handed out and never committed is not sent
  }
  auto snapshot = [this] {
    return std::array<int, 5>{sendCount_, sendPosted_, recvHead_, recvPosted_, fillersQueued_};
  };
  std::array<int, 5> before = snapshot();
  if (!headerQueued_ && queueCloseMsg(kHeader, static_cast<uint32_t>(nslots_))) headerQueued_ = true;
  while (headerQueued_ && fillersQueued_ < peerFillers_ && queueCloseMsg(kFiller, 0)) fillersQueued_++;
  Status st = progress();
  if (st.isOk()) st = takeCloseMsgs(moved);
  if (!st.isOk()) {
    closeOver_ = true;
    return true;
  }
  if (before != snapshot()) *moved = true;
  bool done = headerQueued_ && peerFillers_ >= 0 && fillersQueued_ == peerFillers_ &&
              sendCount_ == 0 && fillersGot_ == nslots_ && recvPosted_ == 0;
  if (!done) return false;
  closeOver_ = true;
  *ok = requestsInFlight() == 0;
  if (strayPieces_ > 0) {
    FERRY_WARN("net: %s: dropped %d data pieces that arrived after the last operation",
               describe_.c_str(), strayPieces_);
  }
  return true;
}

bool NetConnection::stepClose(bool* moved) {
  if (!error_.isOk() || !closeExchange_ || closeOver_) return true;
  bool ok = false;
  if (!closeStep(moved, &ok)) return false;
  if (!ok && error_.isOk())
    FERRY_WARN("net: %s: the close exchange ended early (%d requests in flight)", describe_.c_str(),
               requestsInFlight());
  return true;
}

// The destructor's blocking form (when the communicator did not step it):
// steps until done, a plugin error (a dead peer), the abort flag, or
// FERRY_CLOSE_TIMEOUT_MS without progress.
void NetConnection::drainAtClose() {
  int64_t timeoutMs = config::getInt(config::Param::kCloseTimeoutMs);
  Waiter w(abortFlag_, timeoutMs, "closing a network connection");
  for (;;) {
    bool moved = false;
    if (stepClose(&moved)) return;
    if (moved) {
      w.progressed();
      continue;
    }
    Status st = w.idle();
    if (!st.isOk()) {
      FERRY_WARN("net: %s: close exchange: %s (header %s, %d of %d fillers in, %d pieces unsent)",
                 describe_.c_str(), st.message().c_str(),
                 peerFillers_ < 0 ? "not in" : "in", fillersGot_, nslots_, sendCount_);
      return;
    }
  }
}

}  // namespace ferry::net
