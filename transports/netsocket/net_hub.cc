// Hub (see net_hub.h): accept, read hellos, file sockets by connId.
#include "transports/netsocket/net_hub.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "transports/netsocket/net_wire.h"

namespace ferry::netsocket {

Status Hub::poll() {
  std::lock_guard<std::mutex> lock(mu_);
  FERRY_TRY(acceptQueued());
  for (size_t i = 0; i < pending_.size();) {
    Result<bool> got = readHello(pending_[i]);
    Status st = got.status();
    bool finished = !got.isOk() || got.value();
    if (st.isOk() && finished) st = admit(pending_[i]);
    if (!st.isOk()) FERRY_WARN("NET/Socket: %s; still listening on %s", st.message().c_str(),
                               listener_.peer().toString().c_str());
    if (finished) {
      pending_.erase(pending_.begin() + i);  // closes a refused socket
    } else {
      ++i;
    }
  }
  return Status::ok();
}

std::vector<SockAddr> Hub::altAddrs() const {
  std::vector<SockAddr> v;
  for (const Socket& s : alts_) v.push_back(s.peer());
  return v;
}

// Take every connection the kernel has queued (bounded per call), on every
// listening socket. A failing alternate (its device went away) is not fatal.
Status Hub::acceptQueued() {
  FERRY_TRY(acceptFrom(listener_));
  for (const Socket& l : alts_) {
    Status st = acceptFrom(l);
    if (!st.isOk()) FERRY_INFO(log::kNet, "%s", st.message().c_str());
  }
  return Status::ok();
}

Status Hub::acceptFrom(const Socket& listener) {
  for (int i = 0; i < 2 * kMaxStreams; ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&ss), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) break;
      return systemError("NET/Socket: accept on " + listener.peer().toString() + " failed: " +
                         std::strerror(errno));
    }
    Pending p;
    p.sock = Socket(fd, SockAddr::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len));
    FERRY_TRY(setNoDelay(fd));
    pending_.push_back(std::move(p));
  }
  return Status::ok();
}

// Read (more of) a hello; Ok + false: keep waiting. Error: drop the socket.
Result<bool> Hub::readHello(Pending& p) {
  bool eof = false;
  char* dst = reinterpret_cast<char*>(&p.hello);
  FERRY_ASSIGN(size_t n, recvSome(p.sock, dst + p.got, sizeof(p.hello) - p.got, &eof));
  if (eof) return remoteError("connection from " + p.sock.peer().toString() + " closed before its hello");
  p.got += n;
  return p.got == sizeof(p.hello);
}

Status Hub::place(Group& g, Pending& p) {
  const Hello& h = p.hello;
  if (g.socks.empty()) g.socks.resize(static_cast<size_t>(cfg_.nStreams()) + 1);
  if (g.socks[h.index].valid()) {
    return invalidUsage("refusing connection from " + p.sock.peer().toString() +
                        ": duplicate stream " + std::to_string(h.index));
  }
  if (h.index == 0) g.alivePort = h.alivePort;
  g.socks[h.index] = std::move(p.sock);
  g.have++;
  return Status::ok();
}

// Nobody owns that connection (any more): say so on its control socket (a
// fresh socket takes 16 bytes at once; if not, the sender's attempt just
// fails later) so the sender gives up now instead of at the end of its window.
void Hub::refuseResume(Pending& p) {
  FERRY_INFO(log::kNet, "NET/Socket: resume from %s refused (no such connection here)",
             p.sock.peer().toString().c_str());
  if (p.hello.index != 0) return;
  ResumeReply r{kResumeMagic, kUnknown, 0};
  (void)sendSome(p.sock, &r, sizeof(r));
}

// Place a complete hello's socket in its group; refuse strangers.
Status Hub::admit(Pending& p) {
  const Hello& h = p.hello;
  std::string who = p.sock.peer().toString();
  Status valid = checkHello(h, nonce_, static_cast<uint32_t>(cfg_.nStreams()), who, cfg_.retryMs > 0);
  if (!valid.isOk()) {
    if (h.epoch != 0) refuseResume(p);  // a final answer: the sender stops retrying
    return valid;
  }
  if (h.epoch == 0) {
    if (!listenOpen_) return invalidUsage("refusing connection from " + who + ": the listen comm is closed");
    return place(fresh_[h.connId], p);
  }
  // A sender may resume before its first connection was even accepted.
  if (!owners_.count(h.connId) && !fresh_.count(h.connId)) {
    refuseResume(p);
    return Status::ok();
  }
  Group& g = resumes_[h.connId];
  if (h.epoch < g.epoch) return Status::ok();  // an attempt the sender gave up
  if (h.epoch > g.epoch) g = Group{{}, 0, h.epoch};
  return place(g, p);
}

bool Hub::takeNew(std::vector<Socket>* socks, uint64_t* connId, SockAddr* alive) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = fresh_.begin(); it != fresh_.end(); ++it) {
    if (it->second.have != static_cast<int>(it->second.socks.size())) continue;
    *alive = SockAddr();
    if (it->second.alivePort != 0 && it->second.alivePort <= 65535) {
      *alive = it->second.socks[0].peer();
      alive->setPort(static_cast<uint16_t>(it->second.alivePort));
    }
    *socks = std::move(it->second.socks);
    *connId = it->first;
    fresh_.erase(it);
    if (cfg_.retryMs > 0) owners_[*connId] = nullptr;
    return true;
  }
  return false;
}

bool Hub::takeResume(uint64_t connId, uint32_t epoch, std::vector<Socket>* socks, uint32_t* got) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = resumes_.find(connId);
  if (it == resumes_.end() || it->second.epoch <= epoch) return false;
  if (it->second.have != static_cast<int>(it->second.socks.size())) return false;
  *socks = std::move(it->second.socks);
  *got = it->second.epoch;
  resumes_.erase(it);
  return true;
}

void Hub::enroll(uint64_t connId, Comm* owner) {
  std::lock_guard<std::mutex> lock(mu_);
  owners_[connId] = owner;
}

void Hub::leave(uint64_t connId) {
  std::lock_guard<std::mutex> lock(mu_);
  owners_.erase(connId);
  resumes_.erase(connId);
}

void Hub::closeListen() {
  std::lock_guard<std::mutex> lock(mu_);
  listenOpen_ = false;
  fresh_.clear();
}

}  // namespace ferry::netsocket
