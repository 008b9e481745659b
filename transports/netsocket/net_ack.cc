// Comm's acknowledgements (see net_retry.h): the receiver's counts, lazily;
// the sender's copies of completed inline messages until acknowledged.
#include <algorithm>
#include <cstring>

#include "core/wait.h"
#include "transports/netsocket/net_retry.h"

namespace ferry::netsocket {

// The sender reads acks only when it needs them: a send without a copy waits for
// one, or the copies pile up (a syscall per call otherwise, for nothing).
bool Comm::ackDue() const {
  const RetryLink& k = *retry_;
  return k.readAnyway || k.ackWaiters > 0 || k.shadowsInUse >= RetryLink::kLazyAcks;
}

// Acks are peeked and dequeued 4 KiB at a time (SO_PEEK_OFF: each peek sees
// only new bytes). Dequeuing each 8-byte ack as it came cost a one-way 16 MiB
// stream 10-15% of its speed on loopback although the reads themselves took
// microseconds; peeking did not (perf/README.md, perf/fabric). Kernels
// without SO_PEEK_OFF for TCP read them as they come.
Status Comm::readAcks() {
  RetryLink& k = *retry_;
  while (!peerClosed_) {
    bool eof = false;
    char* at = k.in + k.inLen;
    size_t room = sizeof(k.in) - k.inLen;
    FERRY_ASSIGN(size_t n, k.peekAcks ? peekSome(ctrl_, at, room, &eof) : recvSome(ctrl_, at, room, &eof));
    if (eof) return remoteError("NET/Socket: " + peer().toString() + " closed the connection");
    if (n == 0) return Status::ok();
    if (k.peekAcks) k.peeked += n;
    FERRY_TRY(dequeuePeeked(RetryLink::kDequeueBytes));
    k.inLen += n;
    size_t whole = k.inLen / sizeof(uint64_t) * sizeof(uint64_t);
    for (size_t i = 0; i < whole && !peerClosed_; i += sizeof(uint64_t)) {
      uint64_t v;
      std::memcpy(&v, k.in + i, sizeof(v));
      FERRY_TRY(takeAck(v));
    }
    std::memmove(k.in, k.in + whole, k.inLen - whole);
    k.inLen -= whole;
  }
  return Status::ok();
}

// Dequeue what was peeked once at least `atLeast` bytes are (0: all of it,
// before a close: unread bytes would turn the close into a reset).
Status Comm::dequeuePeeked(size_t atLeast) {
  RetryLink& k = *retry_;
  if (k.peeked == 0 || k.peeked < atLeast) return Status::ok();
  char sink[RetryLink::kDequeueBytes];
  while (k.peeked > 0) {
    FERRY_ASSIGN(size_t n, recvSome(ctrl_, sink, std::min(k.peeked, sizeof(sink))));
    if (n == 0) break;
    k.peeked -= n;
  }
  return Status::ok();
}

Status Comm::takeAck(uint64_t v) {
  RetryLink& k = *retry_;
  if (v == kBye) {
    // Not an error for what it acknowledged before; test() fails what is left.
    peerClosed_ = true;
    return Status::ok();
  }
  if (v < k.confirmed || v > k.posted) {
    k.gone = true;  // a peer that miscounts cannot be resumed either
    return remoteError("NET/Socket: " + peer().toString() + " acknowledged " + std::to_string(v) +
                       " messages; " + std::to_string(k.confirmed) + " were acknowledged before, " +
                       std::to_string(k.posted) + " sent");
  }
  confirm(v);
  return Status::ok();
}

// Acknowledged up to `count`: the copies below it are free again.
void Comm::confirm(uint64_t count) {
  RetryLink& k = *retry_;
  for (; k.confirmed < count; ++k.confirmed) {
    Request* r = k.bySeq[k.confirmed % RetryLink::kRing];
    if (!k.isShadow(r)) {
      if (!copied(r->size)) k.ackWaiters--;
      continue;
    }
    r->phase = Phase::kFree;
    k.shadowsInUse--;
  }
}

// A send is done once acknowledged, or once an inline message is written
// and copied aside: small sends then complete as without retry. The copy
// is what a resend reads; the Driver resends it if a break comes while the
// caller makes no calls (it has nothing left to test).
bool Comm::sendDone(Request* r) {
  RetryLink& k = *retry_;
  // Acknowledged implies every chunk went out; reading chunksLeft as well
  // orders the helper threads' last send() before the caller reuses the buffer.
  if (r->seq < k.confirmed) return r->transferred();
  if (r->phase != Phase::kDone || !copied(r->size) || peerClosed_) return false;
  Request* s = nullptr;
  for (size_t i = 0; i < NCCL_NET_MAX_REQUESTS && !s; ++i) {
    if (k.shadows[i].phase == Phase::kFree) s = &k.shadows[i];
  }
  if (!s) return false;  // all in use: this one waits for its ack
  std::vector<char>& bytes = k.shadowBytes[s - k.shadows];
  bytes.assign(r->data, r->data + r->size);
  s->comm = this;
  s->data = bytes.data();
  s->cap = s->size = r->size;
  s->seq = r->seq;
  s->phase = Phase::kDone;
  k.bySeq[r->seq % RetryLink::kRing] = s;
  k.shadowsInUse++;
  return true;
}

void Comm::advanceReceived() {
  RetryLink& k = *retry_;
  while (k.confirmed < k.posted) {
    Request* r = k.bySeq[k.confirmed % RetryLink::kRing];
    if (!r->transferred()) break;
    if (k.confirmed == k.ackSent) k.firstUnackedMs = nowCoarseMs();
    // The sender waits for the ack of a large message (it has no copy).
    if (!copied(r->size)) k.ackNow = true;
    k.confirmed++;
  }
}

// Acks are lazy: one per kLazyAcks messages, at once for a message without a copy
// (its send waits for it), or after kLazyAckMs; each the newest count.
Status Comm::writeAcks() {
  RetryLink& k = *retry_;
  if (k.outDone == k.outLen && k.ackSent < k.confirmed &&
      (k.ackNow || k.confirmed - k.ackSent >= RetryLink::kLazyAcks ||
       nowCoarseMs() - k.firstUnackedMs >= RetryLink::kLazyAckMs)) {
    std::memcpy(k.out, &k.confirmed, sizeof(k.confirmed));
    k.outLen = sizeof(k.confirmed);
    k.outDone = 0;
    k.ackSent = k.confirmed;
    k.ackNow = false;
  }
  while (k.outDone < k.outLen) {
    FERRY_ASSIGN(size_t n, sendSome(ctrl_, k.out + k.outDone, k.outLen - k.outDone));
    if (n == 0) break;
    k.outDone += n;
  }
  return Status::ok();
}

}  // namespace ferry::netsocket
