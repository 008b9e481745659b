// Driver (see net_driver.h): a leaked per-process singleton and its thread.
#include "transports/netsocket/net_driver.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/log.h"
#include "transports/netsocket/net_comm.h"

namespace ferry::netsocket {
namespace {

// Poll timeouts: a comm in the middle of a resume is stepped this often;
// otherwise the list of sockets (new comms, a resumed comm's new control
// socket) is refreshed this often.
constexpr int kSoonMs = 2;
constexpr int kIdleMs = 100;

struct State {
  std::mutex mu;
  std::set<Comm*> comms;
  bool running = false;
  int wakeFd = -1;  // a new comm: poll its socket now
};

// Per process: a child forked from a process that had the thread gets its own.
State& state() {
  static std::mutex forkMu;
  static State* s = nullptr;
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(forkMu);
  if (!s || owner != getpid()) {
    s = new State;  // leaked: the thread may run until the process exits
    owner = getpid();
  }
  return *s;
}

void run(State* s) {
  for (;;) {
    std::vector<pollfd> fds{{s->wakeFd, POLLIN, 0}};
    std::vector<Comm*> who{nullptr};
    bool soon = false;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      for (Comm* c : s->comms) {
        soon = soon || c->driveSoon();
        if (c->driverFd() < 0) continue;
        fds.push_back({c->driverFd(), POLLRDHUP, 0});
        who.push_back(c);
      }
    }
    // A descriptor closed and reused meanwhile only wakes us for nothing.
    (void)::poll(fds.data(), fds.size(), soon ? kSoonMs : kIdleMs);
    if (fds[0].revents & POLLIN) {
      uint64_t n;
      ssize_t rc = ::read(s->wakeFd, &n, sizeof(n));
      (void)rc;
    }
    std::set<Comm*> woke;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents) woke.insert(who[i]);
    }
    std::vector<Comm*> pinned;
    {
      // Pinned under mu: a comm's destructor unwatches under mu, so it waits for us.
      std::lock_guard<std::mutex> lock(s->mu);
      for (Comm* c : s->comms) {
        if ((woke.count(c) || c->driveSoon()) && c->tryPin()) pinned.push_back(c);
      }
    }
    for (Comm* c : pinned) c->driveFromDriver();  // unpins
  }
}

}  // namespace

void Driver::watch(Comm* c) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.comms.insert(c);
  if (s.running) {
    uint64_t one = 1;
    ssize_t rc = ::write(s.wakeFd, &one, sizeof(one));
    (void)rc;
    return;
  }
  // Without the thread, a break while the caller is idle fails after the window.
  if (s.wakeFd < 0) s.wakeFd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.wakeFd < 0) {
    FERRY_WARN("NET/Socket: cannot start the resend thread: eventfd: %s", std::strerror(errno));
    return;
  }
  try {
    std::thread(run, &s).detach();
    s.running = true;
  } catch (const std::system_error& e) {
    FERRY_WARN("NET/Socket: cannot start the resend thread: %s", e.what());
  }
}

void Driver::unwatch(Comm* c) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.comms.erase(c);
}

}  // namespace ferry::netsocket
