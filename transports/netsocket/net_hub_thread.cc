// Hub's helper thread (retry on; see net_hub.h): accept and read hellos as
// they arrive, and have idle receivers adopt their senders' resumes.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/log.h"
#include "transports/netsocket/net_hub.h"

namespace ferry::netsocket {
namespace {

constexpr int kIdleWaitMs = 500;  // nothing pending: a safety wake-up now and then
constexpr int kBusyWaitMs = 1;    // a resume waits for its comm to leave a call

}  // namespace

Status Hub::start() {
  wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) return systemError(std::string("NET/Socket: eventfd failed: ") + std::strerror(errno));
  try {
    thread_ = std::thread(&Hub::run, this);
  } catch (const std::system_error& e) {
    return systemError(std::string("NET/Socket: cannot start the listener thread: ") + e.what());
  }
  return Status::ok();
}

Hub::~Hub() {
  stop_.store(true);
  if (wakeFd_ >= 0) {
    uint64_t one = 1;
    ssize_t rc = ::write(wakeFd_, &one, sizeof(one));
    (void)rc;
  }
  if (thread_.joinable()) thread_.join();
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

// Short while a complete resume waits for its comm, long otherwise.
int Hub::waitMs() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [connId, g] : resumes_) {
    auto it = owners_.find(connId);
    bool owned = it != owners_.end() && it->second;
    if (owned && g.have == static_cast<int>(g.socks.size())) return kBusyWaitMs;
  }
  return kIdleWaitMs;
}

void Hub::run() {
  while (!stop_.load()) {
    std::vector<pollfd> fds{{wakeFd_, POLLIN, 0}, {listener_.fd(), POLLIN, 0}};
    for (const Socket& l : alts_) fds.push_back({l.fd(), POLLIN, 0});
    {
      // A socket closed meanwhile by another caller of poll() only wakes us.
      std::lock_guard<std::mutex> lock(mu_);
      for (Pending& p : pending_) fds.push_back({p.sock.fd(), POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), waitMs()) < 0 && errno != EINTR) {
      FERRY_WARN("NET/Socket: listener thread: poll failed: %s", std::strerror(errno));
      return;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t n;
      ssize_t rc = ::read(wakeFd_, &n, sizeof(n));
      (void)rc;
    }
    if (stop_.load()) return;
    Status st = poll();
    if (!st.isOk()) FERRY_INFO(log::kNet, "NET/Socket: listener thread: %s", st.message().c_str());
    deliverResumes();
  }
}

// Comms that own a complete resume and are not inside a call adopt it here.
void Hub::deliverResumes() {
  std::vector<Comm*> pinned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [connId, g] : resumes_) {
      if (g.have != static_cast<int>(g.socks.size())) continue;
      auto it = owners_.find(connId);
      // Pinned under mu_: its destructor (which leaves under mu_) waits for us.
      if (it != owners_.end() && it->second && it->second->tryPin()) pinned.push_back(it->second);
    }
  }
  for (Comm* c : pinned) c->resumeFromHub();  // unpins
}

}  // namespace ferry::netsocket
