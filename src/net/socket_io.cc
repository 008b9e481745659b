// Moving bytes over the non-blocking sockets of socket.h.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "net/socket.h"

namespace ferry {
namespace {

Status peerGone(const Socket& s, int err) {
  if (err == 0) return remoteError("socket: connection closed by peer " + s.peer().toString());
  return remoteError("socket: connection to " + s.peer().toString() + " failed: " +
                     std::strerror(err));
}

// The peer or the path to it failed (not this process): a reset, a broken
// pipe, a connection aborted here (e.g. `ss -K`), a timeout, no route.
bool peerError(int err) {
  return err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == ECONNABORTED ||
         err == EHOSTUNREACH || err == ENETUNREACH;
}

// An abort shuts sockets down, which surfaces as EOF/EPIPE: report the abort.
Status failure(const Status& st, const Until& until) {
  if (until.aborted()) return until.check("transferring data (" + st.message() + ")");
  return st;
}

// Shared loop for sendAll/recvAll/sendRecvAll: `out`/`in` may be null.
Status transfer(const Socket* out, const char* sdata, size_t sbytes, const Socket* in, char* rdata,
                size_t rbytes, const Until& until) {
  size_t sent = 0, got = 0;
  while (sent < sbytes || got < rbytes) {
    bool moved = false;
    if (sent < sbytes) {
      auto n = sendSome(*out, sdata + sent, sbytes - sent);
      if (!n.isOk()) return failure(n.status(), until);
      sent += n.value();
      moved = moved || n.value() > 0;
    }
    if (got < rbytes) {
      auto n = recvSome(*in, rdata + got, rbytes - got);
      if (!n.isOk()) return failure(n.status(), until);
      got += n.value();
      moved = moved || n.value() > 0;
    }
    if (moved) continue;
    const Socket* who = got < rbytes ? in : out;
    if (until.expired()) {
      return until.check(got < rbytes ? "receiving from " + who->peer().toString()
                                      : "sending to " + who->peer().toString());
    }
    pollfd p[2];
    int np = 0;
    if (sent < sbytes) p[np++] = {out->fd(), POLLOUT, 0};
    if (got < rbytes) p[np++] = {in->fd(), POLLIN, 0};
    if (::poll(p, np, until.sliceMs()) < 0 && errno != EINTR) {
      return systemError(std::string("poll failed: ") + std::strerror(errno));
    }
  }
  return Status::ok();
}

}  // namespace

Result<size_t> sendSomeV(const Socket& s, const iovec* iov, int n) {
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<size_t>(n);
  while (true) {
    ssize_t got = ::sendmsg(s.fd(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t(0);
    if (peerError(errno)) return peerGone(s, errno);
    return systemError("send to " + s.peer().toString() + " failed: " + std::strerror(errno));
  }
}

namespace {

Result<size_t> receive(const Socket& s, const iovec* iov, int n, bool* eof, int flags) {
  size_t want = 0;
  for (int i = 0; i < n; ++i) want += iov[i].iov_len;
  if (want == 0) return size_t(0);
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<size_t>(n);
  while (true) {
    ssize_t got = ::recvmsg(s.fd(), &m, MSG_DONTWAIT | flags);
    if (got > 0) return static_cast<size_t>(got);
    if (got == 0) {
      if (!eof) return peerGone(s, 0);
      *eof = true;
      return size_t(0);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t(0);
    // A reset after the peer closed is an end of stream like a FIN for a
    // caller that handles EOF: it only matters if that caller still needs data.
    if (errno == ECONNRESET && eof) {
      *eof = true;
      return size_t(0);
    }
    if (peerError(errno)) return peerGone(s, errno);
    return systemError("recv from " + s.peer().toString() + " failed: " + std::strerror(errno));
  }
}

}  // namespace

Result<size_t> sendSome(const Socket& s, const void* data, size_t bytes) {
  iovec v{const_cast<void*>(data), bytes};
  return sendSomeV(s, &v, 1);
}

Result<size_t> recvSomeV(const Socket& s, const iovec* iov, int n, bool* eof) {
  return receive(s, iov, n, eof, 0);
}

Result<size_t> recvSome(const Socket& s, void* data, size_t bytes, bool* eof) {
  iovec v{data, bytes};
  return receive(s, &v, 1, eof, 0);
}

bool setPeekOffset(const Socket& s) {
  int zero = 0;
  return s.valid() && ::setsockopt(s.fd(), SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) == 0;
}

Result<size_t> peekSome(const Socket& s, void* data, size_t bytes, bool* eof) {
  iovec v{data, bytes};
  return receive(s, &v, 1, eof, MSG_PEEK);
}

Status sendAll(const Socket& s, const void* data, size_t bytes, const Until& until) {
  return transfer(&s, static_cast<const char*>(data), bytes, nullptr, nullptr, 0, until);
}

Status recvAll(const Socket& s, void* data, size_t bytes, const Until& until) {
  return transfer(nullptr, nullptr, 0, &s, static_cast<char*>(data), bytes, until);
}

Status sendRecvAll(const Socket& out, const void* sdata, size_t sbytes, const Socket& in,
                   void* rdata, size_t rbytes, const Until& until) {
  return transfer(&out, static_cast<const char*>(sdata), sbytes, &in, static_cast<char*>(rdata),
                  rbytes, until);
}

}  // namespace ferry
