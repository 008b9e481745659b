// The bootstrap root thread (see root.h).
//
// One poll() loop over the listener and every open connection, so a silent
// or hostile connection can never stall the rendezvous: each connection is
// read only as far as it has sent, and one that shows a wrong secret is
// closed on the spot.
#include "bootstrap/root.h"

#include <poll.h>
#include <pthread.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "bootstrap/wire.h"
#include "core/log.h"

namespace ferry::bootstrap {
namespace {

// Set by an atexit handler: a root still running while the process exits
// must not touch the logger's statics as they are being destroyed.
std::atomic<bool> gExiting{false};
void markExiting() { gExiting.store(true); }

#define ROOT_WARN(...) \
  do {                 \
    if (!gExiting.load()) FERRY_WARN(__VA_ARGS__); \
  } while (0)
#define ROOT_INFO(...) \
  do {                 \
    if (!gExiting.load()) FERRY_INFO(log::kBootstrap, __VA_ARGS__); \
  } while (0)

constexpr size_t kMaxConns = 4096;
constexpr size_t kCheckInBytes = sizeof(ConnHeader) + sizeof(CheckIn);

struct Conn {
  Socket sock;
  uint8_t buf[kCheckInBytes] = {};
  size_t got = 0;
  int rank = -1;  // >= 0 once checked in
  bool dead = false;
};

class Root {
 public:
  Root(Socket listener, uint64_t secret, int64_t timeoutMs)
      : listener_(std::move(listener)), secret_(secret), timeoutMs_(timeoutMs) {}
  void run();

 private:
  bool complete() const { return nranks_ > 0 && arrived_ == nranks_; }
  void acceptAll();
  void onReadable(Conn& c);
  void onCheckIn(Conn& c, const CheckIn& ci);
  void drop(Conn& c);
  void reply(Conn& c, int32_t status, const void* data, uint32_t bytes, const Until& u);
  void refuse(Conn& c, const std::string& why);
  void finish();
  void fail(const std::string& why);

  Socket listener_;
  uint64_t secret_;
  int64_t timeoutMs_;
  std::vector<std::unique_ptr<Conn>> conns_;
  int nranks_ = -1;
  int arrived_ = 0;
  std::vector<Conn*> byRank_;
  std::vector<uint8_t> table_;  // nranks * kPackedBytes listen addresses
};

void Root::run() {
  Until until = Until::after(timeoutMs_);
  std::vector<pollfd> pfds;
  while (!complete()) {
    if (until.expired()) {
      fail("bootstrap root " + listener_.peer().toString() + ": timed out after " +
           std::to_string(timeoutMs_) + " ms with " + std::to_string(arrived_) + " of " +
           (nranks_ > 0 ? std::to_string(nranks_) : std::string("?")) + " ranks checked in");
      return;
    }
    pfds.assign(1, pollfd{listener_.fd(), POLLIN, 0});
    for (auto& c : conns_) pfds.push_back(pollfd{c->sock.fd(), POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), until.sliceMs()) < 0 && errno != EINTR) {
      fail(std::string("bootstrap root: poll failed: ") + std::strerror(errno));
      return;
    }
    for (size_t i = 1; i < pfds.size(); i++) {
      if (pfds[i].revents) onReadable(*conns_[i - 1]);
    }
    std::erase_if(conns_, [](const std::unique_ptr<Conn>& c) { return c->dead; });
    if (pfds[0].revents) acceptAll();
  }
  finish();
}

void Root::acceptAll() {
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(listener_.fd(), reinterpret_cast<sockaddr*>(&ss), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: drained; other errors: retried on the next poll
    Socket s(fd, SockAddr::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len));
    if (conns_.size() >= kMaxConns) {
      ROOT_WARN("bootstrap root: refused connection from %s: too many open connections",
                s.peer().toString().c_str());
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->sock = std::move(s);
    conns_.push_back(std::move(c));
  }
}

void Root::drop(Conn& c) {
  if (c.rank >= 0 && byRank_[c.rank] == &c) {
    byRank_[c.rank] = nullptr;
    arrived_--;
  }
  c.sock.close();
  c.dead = true;
}

void Root::onReadable(Conn& c) {
  if (c.rank >= 0) {
    // A checked-in rank has nothing more to say: readable means it left.
    char b;
    auto r = recvSome(c.sock, &b, 1);
    if (r.isOk() && r.value() == 0) return;
    ROOT_INFO("bootstrap root: rank %d (%s) left before the rendezvous completed", c.rank,
              c.sock.peer().toString().c_str());
    drop(c);
    return;
  }
  auto r = recvSome(c.sock, c.buf + c.got, kCheckInBytes - c.got);
  if (!r.isOk()) return drop(c);
  size_t before = c.got;
  c.got += r.value();
  if (before < sizeof(ConnHeader) && c.got >= sizeof(ConnHeader)) {
    ConnHeader h;
    std::memcpy(&h, c.buf, sizeof(h));
    if (h.secret != secret_) {
      ROOT_WARN("bootstrap: refused connection from %s: wrong secret",
                c.sock.peer().toString().c_str());
      return drop(c);
    }
    if (h.type != kCheckIn) {
      ROOT_WARN("bootstrap: refused connection from %s: wrong type %u",
                c.sock.peer().toString().c_str(), h.type);
      return drop(c);
    }
  }
  if (c.got == kCheckInBytes) {
    CheckIn ci;
    std::memcpy(&ci, c.buf + sizeof(ConnHeader), sizeof(ci));
    onCheckIn(c, ci);
  }
}

void Root::onCheckIn(Conn& c, const CheckIn& ci) {
  int rank = ci.rank, nranks = ci.nranks;
  if (nranks <= 0 || rank < 0 || rank >= nranks) {
    return refuse(c, "bootstrap root: invalid check-in rank " + std::to_string(rank) +
                         " of " + std::to_string(nranks));
  }
  if (nranks_ < 0) {
    nranks_ = nranks;
    byRank_.assign(nranks, nullptr);
    table_.assign(size_t(nranks) * SockAddr::kPackedBytes, 0);
  }
  if (nranks != nranks_) {
    return refuse(c, "bootstrap root: mismatch: rank " + std::to_string(rank) + " says nranks " +
                         std::to_string(nranks) + ", others said " + std::to_string(nranks_));
  }
  if (byRank_[rank]) {
    return refuse(c, "bootstrap root: duplicate check-in of rank " + std::to_string(rank) +
                         " from " + c.sock.peer().toString() + " (first from " +
                         byRank_[rank]->sock.peer().toString() + ")");
  }
  c.rank = rank;
  byRank_[rank] = &c;
  arrived_++;
  std::memcpy(&table_[size_t(rank) * SockAddr::kPackedBytes], ci.addr, SockAddr::kPackedBytes);
}

void Root::reply(Conn& c, int32_t status, const void* data, uint32_t bytes, const Until& u) {
  std::vector<uint8_t> msg(sizeof(RootReply) + bytes);
  RootReply h{status, bytes};
  std::memcpy(msg.data(), &h, sizeof(h));
  if (bytes) std::memcpy(msg.data() + sizeof(h), data, bytes);
  Status st = sendAll(c.sock, msg.data(), msg.size(), u);
  if (!st.isOk() && status == 0) {
    ROOT_WARN("bootstrap root: could not send the address table to rank %d: %s", c.rank,
              st.message().c_str());
  }
}

void Root::refuse(Conn& c, const std::string& why) {
  ROOT_WARN("%s", why.c_str());
  std::string text = why.substr(0, kMaxReplyText);
  // Best effort: the message is small enough to sit in the socket buffer.
  reply(c, 1, text.data(), static_cast<uint32_t>(text.size()), Until::after(100));
  drop(c);
}

void Root::finish() {
  Until u = Until::after(timeoutMs_);
  for (Conn* c : byRank_) {
    reply(*c, 0, table_.data(), static_cast<uint32_t>(table_.size()), u);
  }
  ROOT_INFO("bootstrap root %s: all %d ranks checked in", listener_.peer().toString().c_str(),
            nranks_);
}

void Root::fail(const std::string& why) {
  ROOT_WARN("%s", why.c_str());
  for (Conn* c : byRank_) {
    if (c) reply(*c, 1, why.data(), static_cast<uint32_t>(why.size()), Until::after(100));
  }
}

void* rootMain(void* arg) {
  std::unique_ptr<Root> root(static_cast<Root*>(arg));
  root->run();
  return nullptr;
}

}  // namespace

Status startRoot(Socket listener, uint64_t secret, int64_t timeoutMs) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(markExiting); });
  auto root = std::make_unique<Root>(std::move(listener), secret, timeoutMs);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t tid;
  int rc = pthread_create(&tid, &attr, rootMain, root.get());
  pthread_attr_destroy(&attr);
  if (rc != 0) return systemError(std::string("bootstrap: cannot start root thread: ") +
                                  std::strerror(rc));
  root.release();  // owned by the thread now
  return Status::ok();
}

}  // namespace ferry::bootstrap
