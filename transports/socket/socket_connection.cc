// SocketConnection (see socket_connection.h).
#include "transports/socket/socket_connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/config.h"
#include "core/log.h"

namespace ferry::socket {
namespace {

constexpr size_t kHeaderBytes = sizeof(uint64_t);
// Sanity bound on a piece announced by the peer (its slots may be larger
// than ours if its environment differs, but not absurdly so).
constexpr uint64_t kMaxPieceBytes = uint64_t(1) << 30;

}  // namespace

SocketConnection::SocketConnection(Socket sock, int peerRank, const SockAddr& peerAddr, int slots,
                                   size_t slotBytes)
    : sock_(std::move(sock)), peer_(peerRank), peerAddr_(peerAddr), nslots_(slots),
      slotBytes_(slotBytes), sendBuf_(slots), sendQ_(slots), recvBuf_(slots),
      recvSize_(slots, 0) {
  for (auto& b : sendBuf_) b.resize(slotBytes_);
}

SocketConnection::~SocketConnection() { flush(); }

void SocketConnection::flush() {
  if (!error_.isOk() || sendCount_ == 0) return;
  int64_t timeoutMs = config::getInt(config::Param::kTimeoutMs);
  Until u = Until::after(timeoutMs);
  std::vector<char> sink(64 << 10);
  while (sendCount_ > 0 && !u.expired()) {
    int before = sendCount_;
    size_t partial = sendQ_[sendHead_].done;
    if (!pushSends().isOk()) return;
    // Incoming bytes are dropped (nobody will consume them now), so a peer
    // that is itself flushing to us is never blocked by our full slots.
    bool eof = false;
    auto n = recvSome(sock_, sink.data(), sink.size(), &eof);
    if (sendCount_ != before || (sendCount_ > 0 && sendQ_[sendHead_].done != partial)) {
      u = Until::after(timeoutMs);
    }
    if (sendCount_ == 0 || !n.isOk()) return;
    pollfd p{sock_.fd(), static_cast<short>(POLLOUT | (eof ? 0 : POLLIN)), 0};
    ::poll(&p, 1, u.sliceMs());
  }
  if (sendCount_ > 0) {
    FERRY_WARN("socket: dropped %d unsent pieces to rank %d (%s) at close: no progress for %ld ms",
               sendCount_, peer_, peerAddr_.toString().c_str(), static_cast<long>(timeoutMs));
  }
}

Status SocketConnection::fail(const Status& st) {
  if (!error_.isOk()) return error_;
  std::string where = "socket: connection to rank " + std::to_string(peer_) + " (" +
                      peerAddr_.toString() + ")";
  if (st.code() == Code::kRemote) {
    error_ = remoteError(where + " closed (" + st.message() + ")");
  } else {
    error_ = Status(st.code(), where + ": " + st.message());
  }
  return error_;
}

Status SocketConnection::trySend(SendSlot* out) {
  out->data = nullptr;
  out->capacity = 0;
  FERRY_TRY(progress());
  if (slotOut_ || sendCount_ < nslots_) {
    int idx = (sendHead_ + sendCount_) % nslots_;
    slotOut_ = true;
    out->data = sendBuf_[idx].data();
    out->capacity = slotBytes_;
  }
  return Status::ok();
}

Status SocketConnection::commitSend(size_t bytes) {
  if (!error_.isOk()) return error_;
  if (!slotOut_) return internalError("socket: commitSend without a slot from trySend");
  if (bytes > slotBytes_) {
    return internalError("socket: commitSend of " + std::to_string(bytes) +
                         " bytes exceeds the slot size " + std::to_string(slotBytes_));
  }
  int idx = (sendHead_ + sendCount_) % nslots_;
  sendQ_[idx] = OutPiece{bytes, 0};
  sendCount_++;
  slotOut_ = false;
  return progress();
}

Status SocketConnection::sendRef(const void*, size_t, bool* accepted) {
  *accepted = false;
  return internalError("sendRef on a socket connection (no reference support): " + describe());
}

Status SocketConnection::readRef(const RecvPiece&, size_t, void*, size_t) {
  return internalError("readRef on a socket connection (no reference support): " + describe());
}

Status SocketConnection::pushSends() {
  while (sendCount_ > 0) {
    OutPiece& p = sendQ_[sendHead_];
    const char* payload = sendBuf_[sendHead_].data();
    iovec iov[2];
    int n = 0;
    if (p.done < kHeaderBytes) {
      iov[n++] = {reinterpret_cast<char*>(&p.size) + p.done, kHeaderBytes - p.done};
      if (p.size > 0) iov[n++] = {const_cast<char*>(payload), p.size};
    } else {
      size_t off = p.done - kHeaderBytes;
      iov[n++] = {const_cast<char*>(payload) + off, p.size - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t w = ::sendmsg(sock_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
      int err = errno;
      if (err == EPIPE || err == ECONNRESET) return remoteError(std::strerror(err));
      return systemError(std::string("sendmsg failed: ") + std::strerror(err));
    }
    p.done += static_cast<size_t>(w);
    if (p.done < kHeaderBytes + p.size) return Status::ok();  // socket buffer full
    sendHead_ = (sendHead_ + 1) % nslots_;
    sendCount_--;
  }
  return Status::ok();
}

Status SocketConnection::pullRecvs() {
  bool eof = false;
  while (recvCount_ < nslots_ && !peerClosed_) {
    int idx = (recvHead_ + recvCount_) % nslots_;
    if (in_.headerGot < kHeaderBytes) {
      FERRY_ASSIGN(size_t n, recvSome(sock_, reinterpret_cast<char*>(&in_.header) + in_.headerGot,
                                      kHeaderBytes - in_.headerGot, &eof));
      if (eof && in_.headerGot == 0) {
        peerClosed_ = true;
        return Status::ok();
      }
      if (eof) return remoteError("peer closed the connection inside a piece header");
      if (n == 0) return Status::ok();
      in_.headerGot += n;
      if (in_.headerGot < kHeaderBytes) continue;
      if (in_.header > kMaxPieceBytes) {
        return remoteError("peer announced a piece of " + std::to_string(in_.header) + " bytes");
      }
      auto& buf = recvBuf_[idx];
      if (buf.size() < std::max<size_t>(in_.header, slotBytes_)) {
        buf.resize(std::max<size_t>(in_.header, slotBytes_));
      }
    }
    if (in_.got < in_.header) {
      FERRY_ASSIGN(size_t n,
                   recvSome(sock_, recvBuf_[idx].data() + in_.got, in_.header - in_.got, &eof));
      if (eof) {
        return remoteError("peer closed the connection after " + std::to_string(in_.got) +
                           " of " + std::to_string(in_.header) + " bytes of a piece");
      }
      if (n == 0) return Status::ok();
      in_.got += n;
      if (in_.got < in_.header) continue;
    }
    recvSize_[idx] = in_.header;
    recvCount_++;
    in_ = InState{};
  }
  return Status::ok();
}

Status SocketConnection::progress() {
  if (!error_.isOk()) return error_;
  Status st = pushSends();
  if (st.isOk()) st = pullRecvs();
  if (!st.isOk()) return fail(st);
  return Status::ok();
}

Status SocketConnection::tryRecv(RecvPiece* out) {
  *out = RecvPiece{};
  Status st = progress();
  // Pieces that fully arrived before the peer went away are still delivered.
  if (recvCount_ == 0) {
    if (!st.isOk()) return st;
    if (peerClosed_) return fail(remoteError("the peer closed the connection"));
    return Status::ok();
  }
  out->ready = true;
  out->isRef = false;
  out->data = recvBuf_[recvHead_].data();
  out->size = recvSize_[recvHead_];
  return Status::ok();
}

Status SocketConnection::releaseRecv() {
  if (recvCount_ == 0) return internalError("socket: releaseRecv without a received piece");
  recvHead_ = (recvHead_ + 1) % nslots_;
  recvCount_--;
  return Status::ok();
}

bool SocketConnection::sendsDrained() {
  if (!progress().isOk()) return false;
  return sendCount_ == 0;
}

void SocketConnection::markFailed() {
  // The peer sees EOF at once instead of waiting for its timeout.
  sock_.shutdown();
  if (error_.isOk()) error_ = remoteError("socket: connection to rank " + std::to_string(peer_) +
                                          " (" + peerAddr_.toString() + ") marked failed");
}

std::string SocketConnection::describe() const { return "socket " + peerAddr_.toString(); }

}  // namespace ferry::socket
