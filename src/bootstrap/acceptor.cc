// The bootstrap listeners' accept path (see acceptor.h).
#include "bootstrap/acceptor.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>

#include "bootstrap/wire.h"
#include "core/wait.h"

namespace ferry::bootstrap {
namespace {
// Pause between accept attempts once the process is out of descriptors (the
// connection stays in the backlog, so poll() would report it at once again).
constexpr int64_t kAcceptPauseMs = 20;
// A longer pause between two steps is not counted against the connections.
constexpr int64_t kStepGapMs = 100;

size_t fdBudget() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  return std::max<size_t>(rl.rlim_cur / 4, 64);
}
}  // namespace

struct Acceptor::Conn {
  enum State { kHeader, kBody, kParked };
  Socket sock;
  std::string source;  // peer host without port: the per-source bound's key
  State state = kHeader;
  int64_t deadlineMs = 0;
  uint8_t buf[sizeof(ConnHeader)] = {};
  std::vector<uint8_t> head;
  size_t got = 0;  // bytes of buf + head, then of body
  uint32_t type = 0;
  std::vector<char> body;
  bool done = false;  // dropped or handed over
};

Acceptor::Acceptor(std::string where, uint64_t secret, AcceptorLimits limits)
    : where_(std::move(where)), secret_(secret), limits_(limits), log_(where_) {
  limits_.maxHeader = std::min(limits_.maxHeader, fdBudget());
  limits_.perSource = std::min(limits_.perSource, limits_.maxHeader);
}

Acceptor::~Acceptor() = default;

Status Acceptor::step(const Socket& listener, Protocol& proto, int waitMs,
                      std::vector<pollfd>* extra, std::vector<Incoming>* done) {
  int64_t gap = lastStepMs_ ? nowMs() - lastStepMs_ : 0;
  if (gap > kStepGapMs) {
    for (auto& c : conns_) c->deadlineMs += gap;
  }
  if (revisit_) {
    revisit_ = false;
    for (auto& c : conns_) {
      if (c->state == Conn::kParked) decide(*c, proto, done);
    }
  }
  std::vector<pollfd> pfds;
  std::vector<Conn*> polled;
  bool pollListener = nowMs() >= acceptPauseUntilMs_;
  if (pollListener) pfds.push_back(pollfd{listener.fd(), POLLIN, 0});
  for (auto& c : conns_) {
    if (c->done || c->state == Conn::kParked) continue;
    pfds.push_back(pollfd{c->sock.fd(), POLLIN, 0});
    polled.push_back(c.get());
  }
  size_t extraAt = pfds.size();
  if (extra) pfds.insert(pfds.end(), extra->begin(), extra->end());
  if (!done->empty()) waitMs = 0;  // hand over what is ready first
  int rc = ::poll(pfds.data(), pfds.size(), std::max(waitMs, 0));
  if (rc < 0 && errno != EINTR) {
    return systemError(std::string("bootstrap: poll failed: ") + std::strerror(errno));
  }
  if (extra) {
    for (size_t i = 0; i < extra->size(); i++) (*extra)[i].revents = pfds[extraAt + i].revents;
  }
  size_t first = pollListener ? 1 : 0;
  for (size_t i = 0; i < polled.size(); i++) {
    if (pfds[first + i].revents && !polled[i]->done) progress(*polled[i], proto, done);
  }
  if (pollListener && pfds[0].revents) acceptAll(listener, proto, done);
  int64_t now = nowMs();
  for (auto& c : conns_) {
    if (c->done || c->state == Conn::kParked || now < c->deadlineMs) continue;
    if (c->state == Conn::kHeader) {
      drop(*c, "sent no complete header within " + std::to_string(limits_.headerMs) + " ms");
    } else {
      drop(*c,
           "sent nothing for " + std::to_string(limits_.bodyMs) + " ms after " +
               std::to_string(c->got) + " of " + std::to_string(c->body.size()) + " body bytes",
           &proto);
    }
  }
  std::erase_if(conns_, [](const std::unique_ptr<Conn>& c) { return c->done; });
  log_.tick();
  lastStepMs_ = nowMs();
  return Status::ok();
}

void Acceptor::acceptAll(const Socket& listener, Protocol& proto, std::vector<Incoming>* done) {
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&ss), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        log_.note("bootstrap: cannot accept on " + where_ + ": " + std::strerror(errno));
        acceptPauseUntilMs_ = nowMs() + kAcceptPauseMs;
      }
      return;  // EAGAIN: drained; a shut-down listener: the owner sees its abort
    }
    auto c = std::make_unique<Conn>();
    c->sock = Socket(fd, SockAddr::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len));
    c->source = c->sock.peer().host();
    c->deadlineMs = nowMs() + limits_.headerMs;
    makeRoom(c->source);
    conns_.push_back(std::move(c));
    // A genuine peer sends its header right after connecting: usually it is here already.
    progress(*conns_.back(), proto, done);
  }
}

void Acceptor::makeRoom(const std::string& source) {
  // Victim: the oldest connection that has sent nothing at all (else the
  // oldest), from this source if it is over its bound, else from anywhere.
  size_t fromSource = 0, waiting = 0;
  Conn *mine = nullptr, *mineSilent = nullptr, *any = nullptr, *anySilent = nullptr;
  for (auto& c : conns_) {
    if (c->done || c->state != Conn::kHeader) continue;
    waiting++;
    bool silent = c->got == 0;
    if (!any) any = c.get();
    if (silent && !anySilent) anySilent = c.get();
    if (c->source != source) continue;
    fromSource++;
    if (!mine) mine = c.get();
    if (silent && !mineSilent) mineSilent = c.get();
  }
  if (fromSource >= limits_.perSource) {
    drop(mineSilent ? *mineSilent : *mine,
         "more than " + std::to_string(limits_.perSource) + " connections from " + source +
             " waiting for their header");
  } else if (waiting >= limits_.maxHeader) {
    drop(anySilent ? *anySilent : *any,
         "more than " + std::to_string(limits_.maxHeader) + " connections waiting for their header");
  }
}

void Acceptor::progress(Conn& c, Protocol& proto, std::vector<Incoming>* done) {
  while (!c.done && c.state != Conn::kParked) {
    if (c.state == Conn::kBody) {
      if (c.got == c.body.size()) return complete(c, done);
      auto n = recvSome(c.sock, c.body.data() + c.got, c.body.size() - c.got);
      if (!n.isOk()) return drop(c, "closed in the middle of its message", &proto);
      if (n.value() == 0) return;
      c.got += n.value();
      c.deadlineMs = nowMs() + limits_.bodyMs;
      continue;
    }
    // kHeader: the ConnHeader, then the type's fixed head; never read past it.
    size_t want = sizeof(ConnHeader) + c.head.size();
    uint8_t* dst = c.got < sizeof(ConnHeader) ? c.buf + c.got
                                              : c.head.data() + (c.got - sizeof(ConnHeader));
    size_t room = c.got < sizeof(ConnHeader) ? sizeof(ConnHeader) - c.got : want - c.got;
    auto n = recvSome(c.sock, dst, room);
    if (!n.isOk()) return drop(c, "closed before sending its header");
    if (n.value() == 0) return;
    c.got += n.value();
    if (c.got == sizeof(ConnHeader) && c.head.empty()) {
      ConnHeader h;
      (void)decodeConnHeader(c.buf, sizeof(c.buf), &h);  // c.buf holds exactly one
      if (h.secret != secret_) return drop(c, "wrong secret");
      size_t headBytes = proto.headBytes(h.type);
      if (headBytes == 0) return drop(c, "wrong type " + std::to_string(h.type));
      c.type = h.type;
      c.head.resize(headBytes);
      continue;
    }
    if (!c.head.empty() && c.got == sizeof(ConnHeader) + c.head.size()) {
      size_t authenticated = 0;
      for (auto& o : conns_) authenticated += !o->done && o->state != Conn::kHeader;
      if (authenticated >= limits_.maxAuthenticated) {
        return drop(c, "more than " + std::to_string(limits_.maxAuthenticated) +
                           " messages in progress");
      }
      decide(c, proto, done);
    }
  }
}

void Acceptor::decide(Conn& c, Protocol& proto, std::vector<Incoming>* done) {
  BodyPlan plan = proto.body(c.type, c.head.data());
  switch (plan.action) {
    case BodyPlan::kRefuse:
      return drop(c, plan.why);
    case BodyPlan::kPark:
      c.state = Conn::kParked;
      return;
    case BodyPlan::kRead:
      c.state = Conn::kBody;
      c.got = 0;
      c.deadlineMs = nowMs() + limits_.bodyMs;
      try {
        c.body.assign(plan.bytes, 0);  // bounded by the Protocol before we get here
      } catch (const std::bad_alloc&) {
        proto.abandoned(c.type, c.head.data(), plan.bytes);
        return drop(c, "cannot allocate " + std::to_string(plan.bytes) + " bytes");
      }
      if (plan.bytes == 0) complete(c, done);
      return;
  }
}

void Acceptor::complete(Conn& c, std::vector<Incoming>* done) {
  (void)setNoDelay(c.sock.fd());
  done->push_back(Incoming{std::move(c.sock), c.type, std::move(c.head), std::move(c.body)});
  c.done = true;
}

void Acceptor::drop(Conn& c, const std::string& why, Protocol* proto) {
  if (proto && c.state == Conn::kBody) proto->abandoned(c.type, c.head.data(), c.body.size());
  const char* verb = c.state == Conn::kHeader && c.got < sizeof(ConnHeader) ? "dropped" : "refused";
  log_.note(std::string("bootstrap: ") + verb + " connection from " + c.sock.peer().toString() + ": " + why +
            " (" + where_ + ")");
  c.sock.close();
  c.done = true;
}

}  // namespace ferry::bootstrap
