// Resuming a broken connection (see net_retry.h): the sender reconnects and
// reads the receiver's reply; the receiver adopts the sockets its hub filed.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "core/wait.h"
#include "transports/netsocket/net_hub.h"
#include "transports/netsocket/net_retry.h"
#include "transports/netsocket/net_setup.h"
#include "transports/netsocket/net_wire.h"

namespace ferry::netsocket {
namespace {

// A reconnect whose sockets have not all connected by then starts over: a
// SYN lost while a link was down is otherwise retried only after seconds.
constexpr int64_t kAttemptMs = 1000;
constexpr int64_t kMaxBackoffMs = 100;  // pauses between failed attempts grow to this

}  // namespace

void Comm::backOff() {
  RetryLink& k = *retry_;
  k.backoffMs = std::min<int64_t>(std::max<int64_t>(k.backoffMs * 2, 5), kMaxBackoffMs);
  k.nextTryMs = nowMs() + k.backoffMs;
}

Status Comm::redial() {
  RetryLink& k = *retry_;
  int64_t now = nowMs();
  if (now - k.brokeAtMs > k.windowMs) return giveUp();
  if (now < k.nextTryMs) return Status::ok();
  if (k.dial && !k.dialed && now - k.dialStartMs > kAttemptMs) {
    k.lastError = "no connection within " + std::to_string(kAttemptMs) + " ms";
    abandonAttempt();
  }
  if (!k.dial) {
    k.dial = newConnecting(routeAddr(k.route), routeFrom(k.route), cfg_, k.origin.nonce, k.origin.connId,
                           ++k.epoch, k.brokeAtMs + k.windowMs);
    k.dialStartMs = now;
    k.dialed = false;
    k.replyGot = 0;
    k.attempts++;
  }
  if (!k.dialed) {
    Status st = stepConnecting(*k.dial, &k.dialed);
    int err = k.dial->lastErr;
    if (err == ECONNREFUSED) {
      // The hub keeps the listening socket while the receiving comm lives.
      k.gone = true;
      return remoteError("NET/Socket: reconnecting to " + peer().toString() +
                         " was refused: nobody listens there any more (the receiving process or "
                         "its comm is gone)");
    }
    if (err != 0) {
      k.lastError = std::strerror(err);
      abandonAttempt();
      backOff();
      return Status::ok();
    }
    if (!st.isOk()) {
      if (st.code() != Code::kRemote) return st;
      k.lastError = st.message();
      abandonAttempt();
      backOff();
      return Status::ok();
    }
    if (!k.dialed) return Status::ok();
  }
  return finishRedial();
}

// Every socket is connected: read the receiver's reply, then resend.
Status Comm::finishRedial() {
  RetryLink& k = *retry_;
  char* dst = reinterpret_cast<char*>(&k.reply);
  while (k.replyGot < sizeof(k.reply)) {
    bool eof = false;
    Result<size_t> n = recvSome(k.dial->conns[0].sock, dst + k.replyGot,
                                sizeof(k.reply) - k.replyGot, &eof);
    if (!n.isOk() || eof) {
      k.lastError = n.isOk() ? "the listener closed the new connection" : n.status().message();
      abandonAttempt();
      backOff();
      return Status::ok();
    }
    if (n.value() == 0) return Status::ok();
    k.replyGot += n.value();
  }
  Result<uint64_t> from = checkResumeReply(k.reply, k.confirmed, k.posted, peer().toString());
  if (!from.isOk()) {
    k.gone = true;
    return from.status();
  }
  std::vector<Socket> socks;
  for (auto& c : k.dial->conns) socks.push_back(std::move(c.sock));
  k.dial.reset();
  uint64_t again = k.posted - from.value();
  restartFrom(from.value());
  FERRY_TRY(attachSockets(std::move(socks)));
  k.broken = false;
  noteRoute();
  FERRY_INFO(log::kNet, "NET/Socket: send connection to %s resumed after %lld ms (%d attempts); "
             "sending %llu messages again", peer().toString().c_str(),
             static_cast<long long>(nowMs() - k.brokeAtMs), k.attempts,
             static_cast<unsigned long long>(again));
  return Status::ok();
}

Status Comm::awaitResume() {
  RetryLink& k = *retry_;
  int64_t now = nowMs();
  if (now - k.brokeAtMs > k.windowMs) return giveUp();
  FERRY_TRY(pollResume());
  if (!k.broken || !senderGone(k.origin.alive, &k.alive, now)) return Status::ok();
  k.gone = true;
  if (k.origin.hub) k.origin.hub->leave(k.origin.connId);
  return remoteError("NET/Socket: connection from " + peer().toString() + " broke (" +
                     k.cause.message() + ") and the sending process is gone (its host refused a "
                     "connection to the process's port " + k.origin.alive.toString() +
                     "); not waiting for a resume");
}

Status Comm::pollResume() {
  RetryLink& k = *retry_;
  Hub& hub = *k.origin.hub;
  // An accept error (e.g. out of descriptors) may pass; the window bounds it.
  Status st = hub.poll();
  if (!st.isOk()) k.lastError = st.message();
  std::vector<Socket> socks;
  uint32_t epoch = 0;
  if (!hub.takeResume(k.origin.connId, k.epoch, &socks, &epoch)) return Status::ok();
  return adoptResume(std::move(socks), epoch);
}

void Comm::resumeFromHub() {
  std::lock_guard<std::mutex> call(callMu_, std::adopt_lock);
  RetryLink& k = *retry_;
  if (failed_.load(std::memory_order_acquire) || k.gone) return;
  std::vector<Socket> socks;
  uint32_t epoch = 0;
  if (!k.origin.hub->takeResume(k.origin.connId, k.epoch, &socks, &epoch)) return;
  Status st = adoptResume(std::move(socks), epoch);
  if (st.isOk()) return;
  if (transient(st)) {
    beginBreak(st);
  } else {
    fail(st);
  }
}

Status Comm::adoptResume(std::vector<Socket> socks, uint32_t epoch) {
  RetryLink& k = *retry_;
  if (!k.broken) {
    FERRY_WARN("NET/Socket: %s reconnected (the connection broke on its side); resuming",
               peer().toString().c_str());
    detachSockets();
    k.brokeAtMs = nowMs();
  }
  k.epoch = epoch;
  restartFrom(k.confirmed);
  ResumeReply r{kResumeMagic, kResumed, k.confirmed};
  std::memcpy(k.out, &r, sizeof(r));
  k.outLen = sizeof(r);
  k.outDone = 0;
  k.ackSent = k.confirmed;
  FERRY_TRY(attachSockets(std::move(socks)));
  k.broken = false;
  FERRY_INFO(log::kNet, "NET/Socket: recv connection from %s resumed after %lld ms (epoch %u); "
             "%llu messages held, %llu to receive again", peer().toString().c_str(),
             static_cast<long long>(nowMs() - k.brokeAtMs), epoch,
             static_cast<unsigned long long>(k.confirmed),
             static_cast<unsigned long long>(k.posted - k.confirmed));
  return writeAcks();  // the reply leaves now
}

}  // namespace ferry::netsocket
