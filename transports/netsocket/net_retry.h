// Riding out a broken connection (FERRY_NET_RETRY_MS > 0, the listener's
// value, carried in the handle so both ends agree).
//
// Acknowledgements: the receiver writes on the control socket, back to the
// sender, the count of messages it holds completely (8 bytes, cumulative).
// Receives complete in posting order, so the count always covers exactly
// what test() reported. The sender keeps every message until acknowledged:
//  - a small inline message (< 128 KiB, Comm::copied) is copied aside once
//    written and its send completes then, as without retry; so the
//    receiver acks lazily (every kLazyAcks messages or kLazyAckMs): an ack
//    per small message cost 50-150% of a small AllReduce's time on the
//    2-core test machine (perf/net_retry_cost), the ack, not its wait, being
//    the cost. A copy lost in a break while the caller makes no calls (its
//    sends completed) is resent by the Driver (net_driver.h);
//  - a larger message (streamed, or inline under a raised inline size) is
//    not copied (a memcpy of the whole message costs more than the wait):
//    its send completes once acknowledged, and its ack is sent at once.
// A break: a socket of the connection fails with a peer/network error
// (reset, broken pipe, abort, timeout, unreachable, or an end of stream
// that no "bye" announced). Both ends WARN once, stop their helper threads
// and close every socket of the connection (so the other end notices too).
//  - The sender reconnects to the listener's address with the same connId
//    and a growing epoch (Hello::epoch > 0), pacing attempts, until the
//    window (from the break) expires. A refused connect means nobody listens
//    there any more (the receiving process is gone): it gives up at once.
//  - The receiver's sockets arrive through the Hub it was accepted from
//    (the listening socket outlives the ListenComm). A receiver that saw no
//    break itself also takes a resume it finds there (it looks every 20 ms).
//  - A receiver in a break probes the sending process's sentinel port (from
//    the hello, net_alive.h): refused means the process is gone, and the
//    receiver fails at once instead of at the end of the window.
//  - The receiver answers with ResumeReply{received}; both ends drop what
//    they had of later messages, restart the stream round robin, and the
//    sender sends again every message from `received` on, header first.
// A comm closed on purpose says "bye" (kBye in place of a header or an ack)
// when its control socket is between messages, so the other end fails at
// once instead of waiting for a resume; a resume for a connection the
// receiver has closed gets kUnknown.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/netsocket/net_alive.h"
#include "transports/netsocket/net_comm.h"

namespace ferry::netsocket {

struct Connecting;

struct RetryLink {
  explicit RetryLink(int64_t window, Origin o);
  ~RetryLink();

  int64_t windowMs;
  Origin origin;

  static constexpr int kLazyAcks = NCCL_NET_MAX_REQUESTS / 2;
  // On the coarse clock (nowCoarseMs): 1 ms or the kernel's next tick.
  static constexpr int64_t kLazyAckMs = 1;

  // Messages by posting order: [confirmed, posted) are live requests or
  // (send) shadows, the copies of inline messages already reported done.
  static constexpr int kRing = 2 * NCCL_NET_MAX_REQUESTS;
  uint64_t posted = 0;
  uint64_t confirmed = 0;  // send: acknowledged; recv: completely received
  Request* bySeq[kRing] = {};
  Request shadows[NCCL_NET_MAX_REQUESTS];
  std::vector<char> shadowBytes[NCCL_NET_MAX_REQUESTS];
  int shadowsInUse = 0;
  int ackWaiters = 0;  // send: live unacknowledged messages without a copy
  bool isShadow(const Request* r) const { return r >= shadows && r < shadows + NCCL_NET_MAX_REQUESTS; }

  // Receiver -> sender bytes on the control socket: a reply, then acks.
  char out[sizeof(ResumeReply)] = {};
  size_t outLen = 0;
  size_t outDone = 0;
  uint64_t ackSent = 0;
  int64_t firstUnackedMs = 0;  // when the oldest unacknowledged message completed
  bool ackNow = false;         // a message without a copy completed: its sender waits
  // Sender: ack bytes read and not yet taken.
  char in[64] = {};
  size_t inLen = 0;
  // Sender: acks are peeked (net_ack.cc); `peeked` bytes of them are still queued.
  static constexpr size_t kDequeueBytes = 4096;
  bool peekAcks = false;
  size_t peeked = 0;
  // No resume any more: the peer said bye or refused one, or the window passed.
  bool gone = false;
  bool readAnyway = false;  // the Driver's step: read acks even if none is due

  // Break and resume.
  std::atomic<bool> workerBroke{false};  // a helper thread's stream failed
  Status workerCause;                    // guarded by Comm::errMu_
  bool broken = false;
  Status cause;
  int64_t brokeAtMs = 0;
  uint32_t epoch = 0;  // the connection's current (receiver: adopted) epoch
  int attempts = 0;
  std::string lastError;
  std::unique_ptr<Connecting> dial;  // send: the reconnect in progress
  int64_t dialStartMs = 0;
  bool dialed = false;  // every socket of `dial` connected and sent its hello
  ResumeReply reply{};
  size_t replyGot = 0;
  int64_t nextTryMs = 0;
  int64_t backoffMs = 0;
  int64_t nextHubPollMs = 0;  // recv: a healthy comm looks for resumes now and then
  // Send: where reconnects go. Route 0 is the listener's address from the
  // bound device (the connection's rail); route k > 0 is origin.alts[k-1]
  // from whatever device the host routes it by (another rail). A failed
  // attempt moves on to the next route; the comm stays on the route that
  // worked and, while away from route 0, probes it (net_failover.cc).
  int route = 0;
  int shownRoute = 0;  // the route the last WARN named
  int64_t nextProbeMs = 0;
  int64_t nextErrorCheckMs = 0;  // send: socketErrors() rate limit
  std::vector<int64_t> queuedSinceMs;  // send: per socket (control first), bytes queued since; 0: none
  std::unique_ptr<Connecting> probe;
  AliveProbe alive;  // recv: is the sender's process still there? (net_alive.h)
};

}  // namespace ferry::netsocket
