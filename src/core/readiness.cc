// Per-thread readiness notes (see readiness.h).
#include "core/readiness.h"

#include <poll.h>
#include <time.h>

namespace ferry::readiness {
namespace {

struct Pass {
  pollfd fds[kMaxFds];
  int n = 0;
  bool other = false;
  bool moved = false;
  bool mid = false;
};
thread_local Pass tPass;

}  // namespace

void note(int fd, short events) {
  Pass& p = tPass;
  if (fd < 0) return noteOther();
  for (int i = 0; i < p.n; ++i) {
    if (p.fds[i].fd == fd) {
      p.fds[i].events |= events;
      return;
    }
  }
  if (p.n == kMaxFds) return noteOther();
  p.fds[p.n++] = {fd, events, 0};
}

void noteOther() { tPass.other = true; }

void noteMoved() { tPass.moved = true; }

void noteMidMessage() { tPass.mid = true; }

bool midMessage() { return tPass.mid; }

bool takeMoved() {
  bool m = tPass.moved;
  tPass.moved = false;
  return m;
}

void clear() {
  tPass.n = 0;
  tPass.other = false;
  tPass.moved = false;
  tPass.mid = false;
}

bool wait(int timeoutUs) {
  Pass& p = tPass;
  if (p.other || p.n == 0) return false;
  timespec ts{timeoutUs / 1000000, static_cast<long>(timeoutUs % 1000000) * 1000};
  // An error (EINTR, or a socket closed under us: POLLNVAL) ends the wait
  // early; the caller's next pass finds out what happened.
  ::ppoll(p.fds, static_cast<nfds_t>(p.n), &ts, nullptr);
  return true;
}

}  // namespace ferry::readiness
