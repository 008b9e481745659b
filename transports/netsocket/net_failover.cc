// Rail failover of a send comm (retry on; see net_retry.h, RetryLink::route).
//
// A connection starts on its rail: from the device the caller named (its
// address bound) to the listener's address. When that path fails, the break
// and resume machinery reconnects; every failed attempt moves to the next
// route, the listener's other addresses (Handle::altIp, one per device of its
// host) without a bound source, so the host sends from its own NIC on that
// rail: the traffic of a dead rail moves to the others, the receiver resumes
// it through the same hub and nothing is lost. A stalled rail (a NIC or
// cable down: no reset, the packets just vanish) is noticed by
// TCP_USER_TIMEOUT on the sender's sockets (only there: a receiver that
// timed out would close sockets the sender may never hear of, and wait for a
// resume that never comes; the sender breaks, the receiver takes the
// resume). While away from its rail the comm probes it; once a probe
// connects, it moves back with a planned break (resend of what is not
// acknowledged, as after any break).
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "core/log.h"
#include "core/wait.h"
#include "transports/netsocket/net_retry.h"
#include "transports/netsocket/net_setup.h"

namespace ferry::netsocket {
namespace {

constexpr int64_t kProbeEveryMs = 1000;  // away from the rail: try it this often
constexpr int64_t kProbeMs = 1000;       // a probe that has not connected by then failed
constexpr int64_t kErrorCheckMs = 20;    // socketErrors() at most this often

// Unacknowledged data older than this breaks the connection: a quarter of
// the retry window, within [2 s, 10 s]. TCP mostly rides out a 1 s flap
// itself (its retransmissions come 0.6 s, 1.4 s and 3 s after the first
// loss); when it does not, the retry reconnects.
unsigned stallMs(int64_t retryMs) { return static_cast<unsigned>(std::clamp<int64_t>(retryMs / 4, 2000, 10000)); }

std::string localDevice(const Socket& s) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (!s.valid() || getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  SockAddr a = SockAddr::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
  std::string name = deviceNameOf(a);
  return name.empty() ? a.host() : name + " (" + a.host() + ")";
}

}  // namespace

SockAddr Comm::routeAddr(int route) const {
  const Origin& o = retry_->origin;
  return route == 0 || route > static_cast<int>(o.alts.size()) ? o.to : o.alts[route - 1];
}

SockAddr Comm::routeFrom(int route) const { return route == 0 ? retry_->origin.from : SockAddr(); }

void Comm::abandonAttempt() {
  RetryLink& k = *retry_;
  k.dial.reset();
  k.route = (k.route + 1) % (1 + static_cast<int>(k.origin.alts.size()));
}

// After a resume: say where the connection runs now, once per change.
void Comm::noteRoute() {
  RetryLink& k = *retry_;
  if (k.route == k.shownRoute) return;
  std::string rail = deviceNameOf(k.origin.from);
  if (k.route != 0) {
    FERRY_WARN("NET/Socket: rail %s (%s -> %s) failed; the connection now runs from %s to %s",
               rail.empty() ? "?" : rail.c_str(), k.origin.from.host().c_str(), k.origin.to.toString().c_str(),
               localDevice(ctrl_).c_str(), routeAddr(k.route).toString().c_str());
    k.nextProbeMs = nowMs() + kProbeEveryMs;
  } else {
    FERRY_WARN("NET/Socket: the connection to %s is back on rail %s", k.origin.to.toString().c_str(),
               rail.empty() ? "?" : rail.c_str());
  }
  k.shownRoute = k.route;
}

// Away from the rail: one probe at a time, a connect from the rail's own
// address to the listener's (the hub refuses it quietly: connId 0 is
// nobody's). True once one got through: the caller moves back.
bool Comm::primaryBack() {
  RetryLink& k = *retry_;
  int64_t now = nowMs();
  if (!k.probe) {
    if (now < k.nextProbeMs) return false;
    k.probe = newConnecting(k.origin.to, k.origin.from, cfg_, k.origin.nonce, 0, 1, now + kProbeMs);
    k.probe->conns.resize(1);
  }
  bool done = false;
  Status st = stepConnecting(*k.probe, &done);
  if (st.isOk() && done) {
    k.probe.reset();
    k.route = 0;
    return true;
  }
  if (!st.isOk() || k.probe->lastErr != 0 || now > k.probe->deadlineMs) {
    k.probe.reset();
    k.nextProbeMs = now + kProbeEveryMs;
  }
  return false;
}

// A socket that TCP_USER_TIMEOUT closed reports it only to the next call on
// it, and a sender waiting for acks may never make one on a data socket it
// has finished writing; and bytes queued after the route went away may never
// be sent at all, so no kernel timer runs for them. So while messages are
// unacknowledged, look at every socket now and then: a pending error, or
// bytes queued with no TCP ACK from the peer for the stall time (a live
// receiver's kernel ACKs, even when its buffer is full), is a break.
Status Comm::socketErrors() {
  RetryLink& k = *retry_;
  int64_t now = nowCoarseMs();
  k.queuedSinceMs.resize(streams_.size() + 1);
  if (k.confirmed == k.posted) std::fill(k.queuedSinceMs.begin(), k.queuedSinceMs.end(), 0);
  if (k.confirmed == k.posted || now < k.nextErrorCheckMs) return Status::ok();
  k.nextErrorCheckMs = now + kErrorCheckMs;
  unsigned stall = stallMs(k.windowMs);
  auto check = [&](const Socket& s, int64_t& since) -> Status {
    if (!s.valid()) return Status::ok();
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0)
      return remoteError("NET/Socket: connection to " + s.peer().toString() + " failed: " + std::strerror(err));
    int queued = 0;
    tcp_info ti{};
    len = sizeof(ti);
    if (ioctl(s.fd(), SIOCOUTQ, &queued) != 0 || queued <= 0) {
      since = 0;
      return Status::ok();
    }
    if (since == 0) since = now;  // bytes waiting since (about) now
    if (now - since <= stall || getsockopt(s.fd(), IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        ti.tcpi_last_ack_recv <= stall)
      return Status::ok();
    return remoteError("NET/Socket: connection to " + s.peer().toString() + " stalled: no acknowledgement for " +
                       std::to_string(ti.tcpi_last_ack_recv) + " ms with " + std::to_string(queued) +
                       " bytes queued");
  };
  FERRY_TRY(check(ctrl_, k.queuedSinceMs[0]));
  for (size_t i = 0; i < streams_.size(); ++i) FERRY_TRY(check(streams_[i]->sock, k.queuedSinceMs[i + 1]));
  return Status::ok();
}

void Comm::armStallTimeout() {
  if (!send_) return;
  unsigned ms = stallMs(retry_->windowMs);
  auto arm = [&](const Socket& s) {
    if (s.valid()) (void)setsockopt(s.fd(), IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
  };
  arm(ctrl_);
  for (auto& s : streams_) arm(s->sock);
}

}  // namespace ferry::netsocket
