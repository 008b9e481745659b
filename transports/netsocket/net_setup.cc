// listen / connect / accept, all non-blocking: each call does what the
// sockets allow right now and reports "not yet" with a NULL comm.
#include "transports/netsocket/net_setup.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"
#include "transports/netsocket/net_wire.h"

namespace ferry::netsocket {
namespace {

uint64_t random64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
    // No entropy syscall: fall back to something unlikely to repeat.
    v = static_cast<uint64_t>(nowMs()) * 0x9e3779b97f4a7c15ull ^ reinterpret_cast<uintptr_t>(&v);
  }
  return v;
}

bool retryable(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == EAGAIN || err == EINTR;
}

}  // namespace

// connect()'s progress: Handle::pending points at it, and the network
// context's ConnectingSet owns it until it completes or fails.
struct Connecting {
  struct Conn {
    Socket sock;
    int stage = 0;  // 0 start, 1 connecting, 2 writing hello, 3 done
    size_t sent = 0;
    Hello hello{};
  };
  SockAddr to;
  Config cfg;
  int64_t deadlineMs = 0;
  int lastErr = 0;
  std::vector<Conn> conns;
};

namespace {

Status startConnect(Connecting& c, Connecting::Conn& k) {
  int fd = ::socket(c.to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return systemError(std::string("NET/Socket: socket() failed: ") + std::strerror(errno));
  k.sock = Socket(fd, c.to);
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

// One pass over every socket; *done when all hellos are written.
Status stepConnecting(Connecting& c, bool* done) {
  *done = true;
  for (auto& k : c.conns) {
    if (k.stage == 0) FERRY_TRY(startConnect(c, k));
    if (k.stage == 1) FERRY_TRY(finishConnect(c, k));
    if (k.stage == 2) {
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

Result<Connecting*> beginConnect(const void* handle) {
  FERRY_ASSIGN(HandleView v, decodeHandle(handle, sizeof(Handle)));
  auto c = std::make_unique<Connecting>();
  c->to = v.to;
  c->cfg = v.cfg;
  c->deadlineMs = nowMs() + config::getInt(config::Param::kInitTimeoutMs);
  uint64_t connId = random64();
  int n = c->cfg.nStreams() + 1;
  c->conns.resize(n);
  for (int i = 0; i < n; ++i) {
    c->conns[i].hello = Hello{kMagic, static_cast<uint32_t>(i), static_cast<uint32_t>(n - 1), 0,
                              v.nonce, connId};
  }
  return c.release();
}

}  // namespace

Result<std::unique_ptr<ListenComm>> listenOn(int dev, void* handle) {
  FERRY_ASSIGN(SockAddr addr, deviceAddr(dev));
  addr.setPort(0);
  auto l = std::make_unique<ListenComm>();
  FERRY_ASSIGN(l->listener, listenSocket(addr));
  l->nonce = random64();
  l->cfg = readConfig();
  Handle h{};
  h.magic = kMagic;
  h.nThreads = static_cast<uint16_t>(l->cfg.nThreads);
  h.nSocks = static_cast<uint16_t>(l->cfg.nSocks);
  h.nonce = l->nonce;
  h.inlineBytes = l->cfg.inlineBytes;
  l->listener.peer().pack(h.addr);
  h.pending = nullptr;
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof(h));
  FERRY_INFO(log::kNet, "NET/Socket: listening on %s", l->listener.peer().toString().c_str());
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

Status connectStep(void* handle, Comm** out, ConnectingSet* live) {
  *out = nullptr;
  Handle h;
  std::memcpy(&h, handle, sizeof(h));
  auto* c = static_cast<Connecting*>(h.pending);
  // Progress left in a handle by a context that has been finalized since
  // (and freed it): start over.
  if (c && live && !live->contains(c)) c = nullptr;
  if (!c) {
    FERRY_ASSIGN(c, beginConnect(handle));
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
  finish();
  FERRY_ASSIGN(std::unique_ptr<Comm> comm, Comm::create(true, std::move(socks), cfg));
  *out = comm.release();
  return Status::ok();
}

namespace {

// Read (more of) a hello; Ok + false: keep waiting. Error: drop the socket.
Result<bool> readHello(ListenComm::Pending& p) {
  bool eof = false;
  char* dst = reinterpret_cast<char*>(&p.hello);
  FERRY_ASSIGN(size_t n, recvSome(p.sock, dst + p.got, sizeof(p.hello) - p.got, &eof));
  if (eof) return remoteError("connection from " + p.sock.peer().toString() + " closed before its hello");
  p.got += n;
  return p.got == sizeof(p.hello);
}

// Place a complete hello's socket in its group; refuse strangers.
Status admit(ListenComm* l, ListenComm::Pending& p) {
  const Hello& h = p.hello;
  std::string who = p.sock.peer().toString();
  uint32_t want = static_cast<uint32_t>(l->cfg.nStreams());
  FERRY_TRY(checkHello(h, l->nonce, want, who));
  ListenComm::Group& g = l->groups[h.connId];
  if (g.socks.empty()) g.socks.resize(want + 1);
  if (g.socks[h.index].valid()) {
    return invalidUsage("refusing connection from " + who + ": duplicate stream " + std::to_string(h.index));
  }
  g.socks[h.index] = std::move(p.sock);
  g.have++;
  return Status::ok();
}

}  // namespace

Status acceptStep(ListenComm* l, Comm** out) {
  *out = nullptr;
  // Take every connection the kernel has queued.
  for (int i = 0; i < 2 * kMaxStreams; ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(l->listener.fd(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) break;
      return systemError("NET/Socket: accept on " + l->listener.peer().toString() + " failed: " +
                         std::strerror(errno));
    }
    ListenComm::Pending p;
    p.sock = Socket(fd, SockAddr::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len));
    FERRY_TRY(setNoDelay(fd));
    l->pending.push_back(std::move(p));
  }
  for (size_t i = 0; i < l->pending.size();) {
    Result<bool> got = readHello(l->pending[i]);
    Status st = got.status();
    bool finished = !got.isOk() || got.value();
    if (st.isOk() && finished) st = admit(l, l->pending[i]);
    if (!st.isOk()) FERRY_WARN("NET/Socket: %s; still listening on %s", st.message().c_str(),
                               l->listener.peer().toString().c_str());
    if (finished) {
      l->pending.erase(l->pending.begin() + i);  // closes a refused socket
    } else {
      ++i;
    }
  }
  for (auto it = l->groups.begin(); it != l->groups.end(); ++it) {
    if (it->second.have != static_cast<int>(it->second.socks.size())) continue;
    std::vector<Socket> socks = std::move(it->second.socks);
    l->groups.erase(it);
    FERRY_ASSIGN(std::unique_ptr<Comm> comm, Comm::create(false, std::move(socks), l->cfg));
    *out = comm.release();
    return Status::ok();
  }
  return Status::ok();
}

}  // namespace ferry::netsocket
