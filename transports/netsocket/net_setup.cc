// listen / connect / accept, all non-blocking: each call does what the
// sockets allow right now and reports "not yet" with a NULL comm.
#include "transports/netsocket/net_setup.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/config.h"
#include "core/log.h"
#include "core/random.h"
#include "core/wait.h"
#include "transports/netsocket/net_alive.h"
#include "transports/netsocket/net_wire.h"

namespace ferry::netsocket {
namespace {

bool retryable(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == EAGAIN || err == EINTR;
}

Status startConnect(Connecting& c, Connecting::Conn& k) {
  int fd = ::socket(c.to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return systemError(std::string("NET/Socket: socket() failed: ") + std::strerror(errno));
  k.sock = Socket(fd, c.to);
  if (c.from.valid() && ::bind(fd, c.from.sa(), c.from.length()) != 0) {
    // The device's address went away (a rail taken down): keep the old
    // behaviour of an unbound socket rather than failing the connect.
    FERRY_INFO(log::kNet, "NET/Socket: cannot bind %s before connecting to %s (%s); connecting unbound",
               c.from.toString().c_str(), c.to.toString().c_str(), std::strerror(errno));
    c.from = SockAddr();
  }
  if (::connect(fd, c.to.sa(), c.to.length()) == 0) {
    k.stage = 2;
  } else if (errno == EINPROGRESS) {
    k.stage = 1;
  } else if (retryable(errno)) {
    c.lastErr = errno;
    k.sock.close();
  } else {
    return systemError("NET/Socket: connect to " + c.to.toString() + " failed: " + std::strerror(errno));
  }
  return Status::ok();
}

Status finishConnect(Connecting& c, Connecting::Conn& k) {
  pollfd p{k.sock.fd(), POLLOUT, 0};
  if (::poll(&p, 1, 0) <= 0) return Status::ok();
  int soErr = 0;
  socklen_t len = sizeof(soErr);
  if (getsockopt(k.sock.fd(), SOL_SOCKET, SO_ERROR, &soErr, &len) != 0) {
    return systemError(std::string("NET/Socket: getsockopt(SO_ERROR) failed: ") + std::strerror(errno));
  }
  if (soErr == 0) {
    k.stage = 2;
    return setNoDelay(k.sock.fd());
  }
  if (!retryable(soErr)) {
    return systemError("NET/Socket: connect to " + c.to.toString() + " failed: " + std::strerror(soErr));
  }
  c.lastErr = soErr;
  k.sock.close();
  k.stage = 0;
  return Status::ok();
}

}  // namespace

Status stepConnecting(Connecting& c, bool* done) {
  *done = true;
  for (auto& k : c.conns) {
    if (k.stage == 0) FERRY_TRY(startConnect(c, k));
    if (k.stage == 1) FERRY_TRY(finishConnect(c, k));
    if (k.stage == 2) {
      // Only the control socket's hello is read for it, and only a retrying
      // receiver probes it (net_alive.h).
      if (k.sent == 0 && k.hello.index == 0 && c.cfg.retryMs > 0)
        k.hello.alivePort = sentinelPort(k.sock);
      const char* p = reinterpret_cast<const char*>(&k.hello);
      FERRY_ASSIGN(size_t n, sendSome(k.sock, p + k.sent, sizeof(k.hello) - k.sent));
      k.sent += n;
      if (k.sent == sizeof(k.hello)) k.stage = 3;
    }
    if (k.stage != 3) *done = false;
  }
  if (!*done && nowMs() > c.deadlineMs) {
    return remoteError("NET/Socket: timed out connecting to " + c.to.toString() +
                       (c.lastErr ? std::string(" (last error: ") + std::strerror(c.lastErr) + ")" : ""));
  }
  return Status::ok();
}

std::unique_ptr<Connecting> newConnecting(const SockAddr& to, const SockAddr& from, const Config& cfg,
                                          uint64_t nonce, uint64_t connId, uint32_t epoch,
                                          int64_t deadlineMs) {
  auto c = std::make_unique<Connecting>();
  c->to = to;
  if (from.family() == to.family() && !from.isLoopback() && !from.isLinkLocalV6()) c->from = from;
  c->cfg = cfg;
  c->deadlineMs = deadlineMs;
  int n = cfg.nStreams() + 1;
  c->conns.resize(n);
  for (int i = 0; i < n; ++i) {
    c->conns[i].hello = Hello{kMagic, static_cast<uint32_t>(i), static_cast<uint32_t>(n - 1), epoch,
                              nonce, connId, 0, 0};
  }
  return c;
}

namespace {

// From device `dev`: its address is bound as the source (see Connecting::from).
Result<Connecting*> beginConnect(int dev, const void* handle) {
  FERRY_ASSIGN(HandleView v, decodeHandle(handle, sizeof(Handle)));
  int64_t deadline = nowMs() + config::getInt(config::Param::kInitTimeoutMs);
  SockAddr from;
  Result<SockAddr> a = deviceAddr(dev);
  if (a.isOk()) {
    from = a.value();
    from.setPort(0);
  }
  std::unique_ptr<Connecting> c = newConnecting(v.to, from, v.cfg, v.nonce, random64(), 0, deadline);
  c->alts = v.alts;
  return c.release();
}

// Retry on: listen on the host's other IPv4 devices too (Handle::altIp), so a
// sender can fail over to another rail. A device that cannot listen is left
// out (INFO): failover then has one path less.
void addAlternates(Hub& hub, int dev) {
  std::vector<SockAddr> devs = deviceAddrs();
  int added = 0;
  for (int d = 0; d < static_cast<int>(devs.size()) && added < kMaxAltAddrs; ++d) {
    SockAddr a = devs[d];
    if (d == dev || a.family() != AF_INET || a.isLoopback()) continue;
    a.setPort(0);
    Result<Socket> s = listenSocket(a);
    if (!s.isOk()) {
      FERRY_INFO(log::kNet, "NET/Socket: no failover listener on %s: %s", a.toString().c_str(),
                 s.status().message().c_str());
      continue;
    }
    hub.addListener(s.take());
    ++added;
  }
}

}  // namespace

ListenComm::~ListenComm() {
  if (hub) hub->closeListen();
}

Result<std::unique_ptr<ListenComm>> listenOn(int dev, void* handle) {
  FERRY_ASSIGN(SockAddr addr, deviceAddr(dev));
  addr.setPort(0);
  FERRY_ASSIGN(Socket listener, listenSocket(addr));
  Config cfg = readConfig();
  uint64_t nonce = random64();
  auto l = std::make_unique<ListenComm>();
  l->hub = std::make_shared<Hub>(std::move(listener), nonce, cfg);
  if (cfg.retryMs > 0) {
    addAlternates(*l->hub, dev);
    FERRY_TRY(l->hub->start());
  }
  Handle h{};
  h.magic = kMagic;
  h.nThreads = static_cast<uint16_t>(cfg.nThreads);
  h.nSocks = static_cast<uint16_t>(cfg.nSocks);
  h.nonce = nonce;
  h.inlineBytes = cfg.inlineBytes;
  h.retryMs = cfg.retryMs;
  l->hub->addr().pack(h.addr);
  for (const SockAddr& a : l->hub->altAddrs()) {
    h.altIp[h.nAlt] = reinterpret_cast<const sockaddr_in*>(a.sa())->sin_addr.s_addr;
    h.altPort[h.nAlt++] = a.port();
  }
  h.pending = nullptr;
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof(h));
  FERRY_INFO(log::kNet, "NET/Socket: listening on %s%s", l->hub->addr().toString().c_str(),
             cfg.retryMs ? (", retry window " + std::to_string(cfg.retryMs) + " ms").c_str() : "");
  return l;
}

ConnectingSet::~ConnectingSet() {
  for (Connecting* c : live_) delete c;
}

void ConnectingSet::add(Connecting* c) {
  std::lock_guard<std::mutex> lk(mu_);
  live_.insert(c);
}

bool ConnectingSet::contains(Connecting* c) {
  std::lock_guard<std::mutex> lk(mu_);
  return live_.count(c) != 0;
}

void ConnectingSet::remove(Connecting* c) {
  std::lock_guard<std::mutex> lk(mu_);
  live_.erase(c);
}

Status connectStep(int dev, void* handle, Comm** out, ConnectingSet* live) {
  *out = nullptr;
  Handle h;
  std::memcpy(&h, handle, sizeof(h));
  auto* c = static_cast<Connecting*>(h.pending);
  // Progress left in a handle by a context that has been finalized since
  // (and freed it): start over.
  if (c && live && !live->contains(c)) c = nullptr;
  if (!c) {
    FERRY_ASSIGN(c, beginConnect(dev, handle));
    h.pending = c;
    std::memcpy(handle, &h, sizeof(h));
    if (live) live->add(c);
  }
  auto finish = [&] {
    h.pending = nullptr;
    std::memcpy(handle, &h, sizeof(h));
    if (live) live->remove(c);
    delete c;
  };
  bool done = false;
  Status st = stepConnecting(*c, &done);
  if (!st.isOk() || !done) {
    if (st.isOk()) return st;
    finish();
    return st;
  }
  std::vector<Socket> socks;
  for (auto& k : c->conns) socks.push_back(std::move(k.sock));
  Config cfg = c->cfg;
  Origin origin;
  origin.to = c->to;
  origin.from = c->from;
  origin.alts = c->alts;
  origin.nonce = c->conns[0].hello.nonce;
  origin.connId = c->conns[0].hello.connId;
  finish();
  FERRY_ASSIGN(std::unique_ptr<Comm> comm, Comm::create(true, std::move(socks), cfg, origin));
  *out = comm.release();
  return Status::ok();
}

Status acceptStep(ListenComm* l, Comm** out) {
  *out = nullptr;
  FERRY_TRY(l->hub->poll());
  std::vector<Socket> socks;
  Origin origin;
  if (!l->hub->takeNew(&socks, &origin.connId, &origin.alive)) return Status::ok();
  const Config& cfg = l->hub->config();
  if (cfg.retryMs > 0) origin.hub = l->hub;
  FERRY_ASSIGN(std::unique_ptr<Comm> comm, Comm::create(false, std::move(socks), cfg, origin));
  *out = comm.release();
  return Status::ok();
}

}  // namespace ferry::netsocket
