// Socket lifetime, listen/connect/accept (see socket.h). Data transfer is in
// socket_io.cc.
#include "net/socket.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "core/wait.h"

namespace ferry {
namespace {

std::string errnoText(int err) { return std::strerror(err); }

// Errors after which a connect is worth retrying: the listener is not up
// yet, its backlog overflowed, or the route is still settling.
bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == EAGAIN || err == EINTR;
}

void sleepMs(int64_t ms) {
  if (ms <= 0) return;
  struct timespec ts = {static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

Result<Socket> newSocket(int family, const SockAddr& peer) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return systemError("socket() failed: " + errnoText(errno));
  return Socket(fd, peer);
}

// Retrying a connect to a local port nobody listens on can hit TCP's
// simultaneous open with itself (source port == destination port).
bool isSelfConnect(int fd, const SockAddr& to) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  return SockAddr::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len) == to;
}

// One connect attempt. Ok + valid socket: connected. Ok + invalid socket:
// retryable failure (errno in *err). Error: give up.
Result<Socket> connectOnce(const SockAddr& to, const Until& until, int* err) {
  FERRY_ASSIGN(Socket s, newSocket(to.family(), to));
  *err = 0;
  if (::connect(s.fd(), to.sa(), to.length()) != 0) {
    if (errno != EINPROGRESS) {
      *err = errno;
      if (retryableConnectError(*err)) return Socket();
      return systemError("connect to " + to.toString() + " failed: " + errnoText(*err));
    }
    pollfd p{s.fd(), POLLOUT, 0};
    while (true) {
      if (until.expired()) return Socket();  // caller reports the deadline
      int rc = ::poll(&p, 1, until.sliceMs());
      if (rc > 0) break;
      if (rc < 0 && errno != EINTR) return systemError("poll failed: " + errnoText(errno));
    }
    int soErr = 0;
    socklen_t len = sizeof(soErr);
    if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &soErr, &len) != 0) {
      return systemError("getsockopt(SO_ERROR) failed: " + errnoText(errno));
    }
    if (soErr != 0) {
      *err = soErr;
      if (retryableConnectError(soErr)) return Socket();
      return systemError("connect to " + to.toString() + " failed: " + errnoText(soErr));
    }
  }
  if (isSelfConnect(s.fd(), to)) {
    *err = ECONNREFUSED;
    return Socket();
  }
  FERRY_TRY(setNoDelay(s.fd()));
  return s;
}

}  // namespace

Until Until::after(int64_t timeoutMs, const std::atomic<bool>* abortFlag,
                   const std::atomic<bool>* abortFlag2) {
  Until u;
  u.startMs = nowMs();
  u.deadlineMs = u.startMs + std::max<int64_t>(timeoutMs, 0);
  u.abort = abortFlag;
  u.abort2 = abortFlag2;
  return u;
}

bool Until::aborted() const {
  return (abort && abort->load(std::memory_order_acquire)) ||
         (abort2 && abort2->load(std::memory_order_acquire));
}

bool Until::expired() const { return aborted() || nowMs() >= deadlineMs; }

int64_t Until::remainingMs() const { return std::max<int64_t>(deadlineMs - nowMs(), 0); }

int Until::sliceMs() const { return static_cast<int>(std::min<int64_t>(remainingMs(), kSliceMs)); }

Status Until::check(const std::string& what) const {
  if (aborted()) return remoteError("aborted while " + what);
  if (nowMs() >= deadlineMs) {
    return timeoutError("timed out after " + std::to_string(nowMs() - startMs) + " ms while " +
                        what);
  }
  return Status::ok();
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    peer_ = o.peer_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Status setNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return systemError("fcntl(O_NONBLOCK) failed: " + errnoText(errno));
  }
  return Status::ok();
}

Status setNoDelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return systemError("setsockopt(TCP_NODELAY) failed: " + errnoText(errno));
  }
  return Status::ok();
}

Result<Socket> listenSocket(const SockAddr& bindAddr, int backlog) {
  if (!bindAddr.valid()) return invalidArgument("listen: invalid address");
  FERRY_ASSIGN(Socket s, newSocket(bindAddr.family(), bindAddr));
  int one = 1;
  // A fixed port (NCCL_COMM_ID) must be reusable right after the previous run.
  if (setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return systemError("setsockopt(SO_REUSEADDR) failed: " + errnoText(errno));
  }
  if (::bind(s.fd(), bindAddr.sa(), bindAddr.length()) != 0) {
    return systemError("bind to " + bindAddr.toString() + " failed: " + errnoText(errno));
  }
  if (::listen(s.fd(), backlog) != 0) {
    return systemError("listen on " + bindAddr.toString() + " failed: " + errnoText(errno));
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return systemError("getsockname failed: " + errnoText(errno));
  }
  SockAddr bound = SockAddr::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
  return Socket(s.release(), bound);
}

Result<Socket> connectSocket(const SockAddr& to, const Until& until) {
  if (!to.valid()) return invalidArgument("connect: invalid address");
  int64_t pauseMs = 5;
  int attempts = 0;
  int lastErr = 0;
  while (true) {
    int err = 0;
    FERRY_ASSIGN(Socket s, connectOnce(to, until, &err));
    attempts++;
    if (s.valid()) return s;
    if (err != 0) lastErr = err;
    if (!until.expired()) {
      FERRY_TRACE(log::kNet, "connect to %s: %s, retrying in %ld ms", to.toString().c_str(),
                  errnoText(err).c_str(), static_cast<long>(pauseMs));
      // Sleep in slices so an abort is seen promptly.
      int64_t wakeMs = nowMs() + pauseMs;
      while (nowMs() < wakeMs && !until.expired()) {
        sleepMs(std::min<int64_t>({wakeMs - nowMs(), until.remainingMs(), Until::kSliceMs}));
      }
      pauseMs = std::min<int64_t>(pauseMs * 2, 200);
    }
    if (until.expired()) {
      return until.check("connecting to " + to.toString() + " (" + std::to_string(attempts) +
                         " attempts, last error: " +
                         (lastErr ? errnoText(lastErr) : std::string("none")) + ")");
    }
  }
}

Result<Socket> acceptSocket(const Socket& listener, const Until& until) {
  pollfd p{listener.fd(), POLLIN, 0};
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&ss), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd, SockAddr::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len));
      FERRY_TRY(setNoDelay(s.fd()));
      return s;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      // abort() shuts the listener down, which makes accept fail: report the abort.
      if (until.aborted()) return until.check("waiting for a connection");
      return systemError("accept on " + listener.peer().toString() + " failed: " +
                         errnoText(errno));
    }
    if (until.expired()) {
      return until.check("waiting for a connection on " + listener.peer().toString());
    }
    if (::poll(&p, 1, until.sliceMs()) < 0 && errno != EINTR) {
      return systemError("poll failed: " + errnoText(errno));
    }
  }
}

}  // namespace ferry
