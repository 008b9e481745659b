// Comm's retry (see net_retry.h): breaks and resumes; acks are in net_ack.cc.
#include "transports/netsocket/net_retry.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "core/wait.h"
#include "transports/netsocket/net_driver.h"
#include "transports/netsocket/net_hub.h"
#include "transports/netsocket/net_setup.h"
#include "transports/netsocket/net_wire.h"

namespace ferry::netsocket {
namespace {

// A receiver that saw no break itself looks for a resume this often.
constexpr int64_t kHubPollMs = 20;

}  // namespace

RetryLink::RetryLink(int64_t window, Origin o) : windowMs(window), origin(std::move(o)) {}

RetryLink::~RetryLink() = default;  // here: Connecting is complete in this file

// A new comm becomes findable: a receiver by its hub's thread, a sender by the Driver.
void Comm::enrollRetry() {
  RetryLink& k = *retry_;
  if (k.origin.hub) k.origin.hub->enroll(k.origin.connId, this);
  if (!send_) return;
  driverFd_.store(ctrl_.fd(), std::memory_order_release);
  Driver::watch(this);
}

Status resetForTest(Socket& s) {
  linger lg{1, 0};
  (void)setsockopt(s.fd(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  // Put an unconnected socket in the fd's place: the connected one closes
  // with an RST, and the fd number stays valid for its owner.
  int spare = ::socket(s.peer().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (spare < 0 || ::dup2(spare, s.fd()) < 0) s.shutdown();
  if (spare >= 0) ::close(spare);
  return remoteError("NET/Socket: connection to " + s.peer().toString() +
                     " failed: reset (injected by a test)");
}

void Comm::streamFailed(const Status& st) {
  if (!retry_) return fail(st);
  {
    std::lock_guard<std::mutex> lock(errMu_);
    if (retry_->workerCause.isOk()) retry_->workerCause = st;
  }
  retry_->workerBroke.store(true, std::memory_order_release);
}

bool Comm::transient(const Status& st) const {
  return st.code() == Code::kRemote && !peerClosed_ && !retry_->gone;
}

Status Comm::progressRetry() {
  RetryLink& k = *retry_;
  Status st = k.broken ? (send_ ? redial() : awaitResume()) : Status::ok();
  if (st.isOk() && !k.broken) st = healthyStep();
  if (!st.isOk() && transient(st)) {
    beginBreak(st);
    st = Status::ok();
  }
  // The Driver steps a comm often only while it resumes or resends copies
  // (after a resume they lead the queue); otherwise on socket events.
  if (send_) {
    bool soon = k.broken || (!ctrlQueue_.empty() && k.isShadow(ctrlQueue_.front()));
    driveSoon_.store(soon, std::memory_order_release);
  }
  return st;
}

// The Driver's step (net_driver.h): read acks even if none is due, so a
// hang-up or a bye is seen; a dead comm is no longer watched.
void Comm::driveFromDriver() {
  std::lock_guard<std::mutex> call(callMu_, std::adopt_lock);
  if (failed_.load(std::memory_order_acquire)) return Driver::unwatch(this);
  retry_->readAnyway = true;
  Status st = progress();
  retry_->readAnyway = false;
  if (!st.isOk()) fail(st);
  if (!st.isOk() || peerClosed_) Driver::unwatch(this);
}

Status Comm::healthyStep() {
  RetryLink& k = *retry_;
  auto workerBreak = [&] {
    if (!k.workerBroke.load(std::memory_order_acquire)) return Status::ok();
    std::lock_guard<std::mutex> lock(errMu_);
    return k.workerCause;
  };
  FERRY_TRY(workerBreak());
  if (send_ && k.route != 0 && primaryBack()) {
    beginBreak(Status(Code::kRemote, "rail " + deviceNameOf(k.origin.from) + " is back (a probe from " +
                                         k.origin.from.host() + " got through)"),
               /*planned=*/true);
    return Status::ok();
  }
  Status st = pump();
  if (st.isOk()) st = workerBreak();
  if (st.isOk() && send_) st = socketErrors();
  if (send_) {
    // Acks even after an error: a "bye" read before the reset it caused
    // makes the failure final (transient() then says no).
    Status acks = ackDue() || !st.isOk() ? readAcks() : Status::ok();
    return st.isOk() ? acks : st;
  }
  FERRY_TRY(st);
  advanceReceived();
  FERRY_TRY(writeAcks());
  int64_t now = nowCoarseMs();
  if (now < k.nextHubPollMs) return Status::ok();
  k.nextHubPollMs = now + kHubPollMs;
  return pollResume();
}

void Comm::beginBreak(const Status& cause, bool planned) {
  RetryLink& k = *retry_;
  detachSockets();
  k.broken = true;
  k.cause = cause;
  k.brokeAtMs = nowMs();
  k.attempts = 0;
  k.lastError.clear();
  k.backoffMs = 0;
  k.nextTryMs = 0;
  if (planned) {
    FERRY_WARN("NET/Socket: send connection to %s: %s; reconnecting there",
               routeAddr(0).toString().c_str(), cause.message().c_str());
    return;
  }
  FERRY_WARN("NET/Socket: %s connection %s %s broke (%s); %s within %lld ms (FERRY_NET_RETRY_MS)",
             send_ ? "send" : "recv", send_ ? "to" : "from", peer().toString().c_str(),
             cause.message().c_str(), send_ ? "reconnecting" : "waiting for the sender to reconnect",
             static_cast<long long>(k.windowMs));
}

// Stop the helper threads and close every socket (the peer then notices the
// break too); queued chunks and half-moved control bytes are dropped.
void Comm::detachSockets() {
  RetryLink& k = *retry_;
  stopWorkers();
  driverFd_.store(-1, std::memory_order_release);
  ctrl_.close();
  ctrlInject_.store(false);
  ctrlBlocked_ = false;
  for (auto& s : streams_) {
    s->sock.close();
    s->blocked = false;
    s->queue.clear();
    s->hasCur = false;
    s->curDone = 0;
    s->injectReset.store(false);
  }
  k.workerBroke.store(false);
  {
    std::lock_guard<std::mutex> lock(errMu_);
    k.workerCause = Status::ok();
  }
  k.inLen = k.outLen = k.outDone = 0;
  k.peeked = 0;
  k.dial.reset();
}

Status Comm::attachSockets(std::vector<Socket> socks) {
  ctrl_ = std::move(socks[0]);
  if (send_) driverFd_.store(ctrl_.fd(), std::memory_order_release);
  for (size_t i = 1; i < socks.size(); ++i) streams_[i - 1]->sock = std::move(socks[i]);
  retry_->queuedSinceMs.assign(socks.size(), 0);
  armRetrySockets();
  return startWorkers();
}

// A connection's sockets, new or resumed: a sender peeks at its acks
// (net_ack.cc) and gives up on data nobody acknowledges (net_failover.cc).
void Comm::armRetrySockets() {
  if (send_) retry_->peekAcks = setPeekOffset(ctrl_);
  armStallTimeout();
}

// Messages from `from` on start over from their header, on both ends.
void Comm::restartFrom(uint64_t from) {
  RetryLink& k = *retry_;
  confirm(from);
  ctrlQueue_.clear();
  for (uint64_t s = k.confirmed; s < k.posted; ++s) {
    Request* r = k.bySeq[s % RetryLink::kRing];
    r->phase = Phase::kHeader;
    r->hdrDone = r->inlineDone = 0;
    r->chunksLeft.store(0, std::memory_order_relaxed);
    if (!send_) r->size = 0;
    ctrlQueue_.push_back(r);
  }
  nextStream_ = 0;
}

Status Comm::giveUp() {
  RetryLink& k = *retry_;
  k.gone = true;
  k.dial.reset();
  if (k.origin.hub) k.origin.hub->leave(k.origin.connId);
  std::string what = send_ ? "was not re-established" : "was not resumed by the sender";
  std::string tries = send_ ? std::to_string(k.attempts) + " attempts" : "";
  if (!k.lastError.empty()) tries += (tries.empty() ? "" : ", ") + ("last error: " + k.lastError);
  return remoteError("NET/Socket: " + std::string(send_ ? "connection to " : "connection from ") +
                     peer().toString() + " broke (" + k.cause.message() + ") and " + what +
                     " within " + std::to_string(k.windowMs) + " ms (FERRY_NET_RETRY_MS" +
                     (tries.empty() ? "" : "; " + tries) + "); giving up");
}

// A comm closed on purpose tells the peer, if its control socket is between
// messages, so the peer fails now rather than wait for a resume.
void Comm::sayBye() {
  RetryLink& k = *retry_;
  if (k.broken || k.gone || !ctrl_.valid()) return;
  if (send_) {
    if (!ctrlQueue_.empty() && ctrlQueue_.front()->hdrDone != 0) return;
    // Unread bytes would turn the close into a reset.
    (void)readAcks();
    (void)dequeuePeeked(0);
  } else if (k.outDone != k.outLen) {
    return;
  }
  // A receiver acknowledges what it received before the bye: the sender's
  // last sends may be written but not yet reported done (an inline send is
  // copied aside at its next test()), and a sender that reads the bye first
  // (its Driver, woken by this close) would fail them.
  uint64_t msg[2] = {k.confirmed, kBye};
  size_t skip = !send_ && k.ackSent < k.confirmed ? 0 : 1;  // no ack owed: the bye alone
  (void)sendSome(ctrl_, msg + skip, (2 - skip) * sizeof(uint64_t));
}

}  // namespace ferry::netsocket
