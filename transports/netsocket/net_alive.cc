#include "transports/netsocket/net_alive.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <string>

#include "core/log.h"

namespace ferry::netsocket {
namespace {

constexpr int64_t kProbeEveryMs = 200;
constexpr int64_t kProbeTimeoutMs = 1000;
// Probes are never accepted; a completed one waits in the backlog until the
// next sentinelPort() drops it. A full backlog makes probes time out (no
// verdict), never refused.
constexpr int kBacklog = 4096;

std::mutex gMu;
std::map<std::string, Socket>& sentinels() {
  static auto* m = new std::map<std::string, Socket>();  // lives as long as the process
  return *m;
}

void dropQueued(const Socket& l) {
  for (;;) {
    int fd = ::accept4(l.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ::close(fd);
  }
}

}  // namespace

uint32_t sentinelPort(const Socket& connected) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(connected.fd(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  SockAddr local = SockAddr::fromSockaddr(reinterpret_cast<const sockaddr*>(&ss), len);
  local.setPort(0);
  std::lock_guard<std::mutex> lock(gMu);
  auto& m = sentinels();
  auto it = m.find(local.host());
  if (it == m.end()) {
    Result<Socket> l = listenSocket(local, kBacklog);
    if (!l.isOk()) {
      FERRY_INFO(log::kNet, "NET/Socket: no sentinel on %s (%s); a receiver of ours that loses its "
                 "connection waits the whole retry window", local.host().c_str(),
                 l.status().message().c_str());
      return 0;
    }
    if (Status st = setNonBlocking(l.value().fd()); !st.isOk()) return 0;
    it = m.emplace(local.host(), std::move(l.value())).first;
  }
  dropQueued(it->second);
  return it->second.peer().port();
}

bool senderGone(const SockAddr& sentinel, AliveProbe* p, int64_t nowMs) {
  if (!sentinel.valid()) return false;
  if (!p->sock.valid()) {
    if (nowMs < p->nextMs) return false;
    p->nextMs = nowMs + kProbeEveryMs;
    int fd = ::socket(sentinel.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int rc = ::connect(fd, sentinel.sa(), sentinel.length());
    int err = rc == 0 ? 0 : errno;
    if (err != EINPROGRESS) {
      ::close(fd);
      return err == ECONNREFUSED;
    }
    p->sock = Socket(fd, sentinel);
    p->startedMs = nowMs;
  }
  pollfd q{p->sock.fd(), POLLOUT, 0};
  if (::poll(&q, 1, 0) <= 0) {
    if (nowMs - p->startedMs > kProbeTimeoutMs) p->sock.close();
    return false;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(p->sock.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = 0;
  p->sock.close();
  return err == ECONNREFUSED;
}

}  // namespace ferry::netsocket
