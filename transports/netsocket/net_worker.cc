// Data streams: helper threads (or the caller, with 0 threads) move the
// chunks queued on their streams, blocking in poll() when nothing moves.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transports/netsocket/net_comm.h"

namespace ferry::netsocket {
namespace {

// Idle helper threads still wake now and then so a lost wake-up cannot
// strand queued work; a wake-up or socket event ends the wait earlier.
constexpr int kIdleWaitMs = 500;

bool takeNext(Worker& w, Stream& s) {
  std::lock_guard<std::mutex> lock(w.mu);
  if (s.queue.empty()) return false;
  s.cur = s.queue.front();
  s.queue.pop_front();
  s.curDone = 0;
  s.hasCur = true;
  return true;
}

// Drive one stream until its socket would block or its queue is empty.
Status pump(Worker& w, Stream& s, bool send, bool* moved) {
  if (s.injectReset.load(std::memory_order_relaxed) && s.injectReset.exchange(false)) {
    return resetForTest(s.sock);
  }
  // The caller drives (no thread): a socket that would block waits for
  // poll() to call it ready (Comm::refreshReadiness).
  bool caller = w.wakeFd < 0;
  // Checking stop here bounds closeSend/closeRecv even while a peer keeps draining.
  while (!w.stop.load(std::memory_order_relaxed) && !(caller && s.blocked) && (s.hasCur || takeNext(w, s))) {
    size_t left = s.cur.len - s.curDone;
    if (left > 0) {
      char* p = s.cur.ptr + s.curDone;
      Result<size_t> n = send ? sendSome(s.sock, p, left) : recvSome(s.sock, p, left);
      if (!n.isOk()) return n.status();
      s.blocked = caller && n.value() < left;
      if (n.value() == 0) return Status::ok();
      s.curDone += n.value();
      *moved = true;
      if (s.curDone < s.cur.len) continue;
    }
    s.hasCur = false;
    s.cur.req->chunksLeft.fetch_sub(1, std::memory_order_acq_rel);
  }
  return Status::ok();
}

bool hasWork(Worker& w, Stream& s) {
  if (s.hasCur) return true;
  std::lock_guard<std::mutex> lock(w.mu);
  return !s.queue.empty();
}

}  // namespace

void Worker::wake() {
  if (wakeFd < 0) return;
  uint64_t one = 1;
  // A full counter already means "wake up"; nothing else can fail here.
  ssize_t rc = ::write(wakeFd, &one, sizeof(one));
  (void)rc;
}

Status Worker::step(bool send, bool* moved) {
  for (Stream* s : streams) FERRY_TRY(pump(*this, *s, send, moved));
  return Status::ok();
}

Status Worker::waitReady(bool send, int timeoutMs) {
  pollfd fds[kMaxStreams + 1];
  int n = 0;
  if (wakeFd >= 0) fds[n++] = {wakeFd, POLLIN, 0};
  for (Stream* s : streams) {
    if (hasWork(*this, *s)) fds[n++] = {s->sock.fd(), static_cast<short>(send ? POLLOUT : POLLIN), 0};
  }
  if (::poll(fds, n, timeoutMs) < 0 && errno != EINTR) {
    return systemError(std::string("NET/Socket: poll failed: ") + std::strerror(errno));
  }
  if (wakeFd >= 0 && (fds[0].revents & POLLIN)) {
    uint64_t count;
    ssize_t rc = ::read(wakeFd, &count, sizeof(count));
    (void)rc;
  }
  return Status::ok();
}

void workerMain(Worker* w, bool send) {
  bool broken = false;
  while (!w->stop.load(std::memory_order_acquire)) {
    bool moved = false;
    if (!broken) {
      Status st = w->step(send, &moved);
      if (!st.isOk()) {
        w->comm->streamFailed(st);
        broken = true;  // only wait to be stopped now (close, or a resume)
      }
    }
    if (moved) continue;
    Status st = broken ? Status::ok() : w->waitReady(send, kIdleWaitMs);
    if (broken || !st.isOk()) {
      if (!st.isOk()) w->comm->fail(st);
      broken = true;
      pollfd p{w->wakeFd, POLLIN, 0};
      ::poll(&p, 1, kIdleWaitMs);
      uint64_t count;
      if (p.revents & POLLIN) {
        ssize_t rc = ::read(w->wakeFd, &count, sizeof(count));
        (void)rc;
      }
    }
  }
}

}  // namespace ferry::netsocket
