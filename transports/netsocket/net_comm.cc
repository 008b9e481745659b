// Comm: requests of one connection. The control socket carries each request's
// size (and the data of small requests) in posting order; larger requests are
// cut into chunks dealt round robin over the data streams. Both ends deal
// chunks from the same sequence of sizes, so every stream sees the same chunk
// order on both ends without any per-chunk header.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/config.h"
#include "core/log.h"
#include "core/readiness.h"
#include "transports/netsocket/net_comm.h"
#include "transports/netsocket/net_driver.h"
#include "transports/netsocket/net_hub.h"
#include "transports/netsocket/net_retry.h"

namespace ferry::netsocket {

Config readConfig() {
  using config::Param;
  Config c;
  int64_t threads = config::getInt(Param::kSocketNthreads);
  int64_t socks = config::getInt(Param::kNsocksPerthread);
  int64_t inl = config::getInt(Param::kNetSocketInlineBytes);
  if (threads == -1) {
    // Auto: on a few cores the ranks already compete for CPU, and a helper
    // thread per comm adds a context switch per message (measured 1.5-3x
    // slower AllReduce across 2 namespace hosts on 2 cores); the caller's
    // own calls then move the data. More cores: one helper thread.
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    threads = cores > 0 && cores <= 4 ? 0 : 1;
  }
  if (threads < 0 || threads > kMaxThreads) {
    FERRY_WARN("NET/Socket: NCCL_SOCKET_NTHREADS=%ld out of range 0..%d, using %d", (long)threads,
               kMaxThreads, threads < 0 ? 0 : kMaxThreads);
    threads = std::clamp<int64_t>(threads, 0, kMaxThreads);
  }
  int64_t t = threads > 0 ? threads : 1;
  // Auto: with the caller moving the data, a second socket carries large
  // messages at 1.0-1.15x the speed of one (perf/README.md, perf/fabric);
  // helper threads bring their own parallelism.
  if (socks == -1) socks = threads == 0 ? 2 : 1;
  if (socks < 1 || t * socks > kMaxStreams) {
    int64_t fixed = std::clamp<int64_t>(socks, 1, kMaxStreams / t);
    FERRY_WARN("NET/Socket: NCCL_NSOCKS_PERTHREAD=%ld invalid with %ld threads (at most %d "
               "sockets in all), using %ld", (long)socks, (long)threads, kMaxStreams, (long)fixed);
    socks = fixed;
  }
  c.nThreads = static_cast<int>(threads);
  c.nSocks = static_cast<int>(socks);
  c.inlineBytes = static_cast<uint32_t>(std::clamp<int64_t>(inl, 0, 1 << 30));
  c.retryMs = static_cast<uint32_t>(
      std::clamp<int64_t>(config::getInt(Param::kNetRetryMs), 0, kMaxRetryMs));
  return c;
}

Comm::Comm(bool send, const Config& cfg) : send_(send), cfg_(cfg) {}

Result<std::unique_ptr<Comm>> Comm::create(bool send, std::vector<Socket> socks,
                                           const Config& cfg, Origin origin) {
  if (socks.size() != static_cast<size_t>(cfg.nStreams()) + 1) {
    return internalError("NET/Socket: comm needs " + std::to_string(cfg.nStreams() + 1) +
                         " sockets, got " + std::to_string(socks.size()));
  }
  std::unique_ptr<Comm> c(new Comm(send, cfg));
  // First: ~Comm then has a recv comm leave its hub even if creation fails below.
  if (cfg.retryMs > 0) c->retry_ = std::make_unique<RetryLink>(cfg.retryMs, std::move(origin));
  for (auto& r : c->reqs_) r.comm = c.get();
  c->peer_ = socks[0].peer();
  c->ctrl_ = std::move(socks[0]);
  for (size_t i = 1; i < socks.size(); ++i) {
    c->streams_.push_back(std::make_unique<Stream>());
    c->streams_.back()->sock = std::move(socks[i]);
  }
  int nWorkers = cfg.nThreads > 0 ? cfg.nThreads : 1;
  for (int t = 0; t < nWorkers; ++t) {
    auto w = std::make_unique<Worker>();
    w->comm = c.get();
    for (int k = 0; k < cfg.nSocks; ++k) w->streams.push_back(c->streams_[t * cfg.nSocks + k].get());
    if (cfg.nThreads > 0) {
      w->wakeFd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (w->wakeFd < 0) return systemError(std::string("NET/Socket: eventfd failed: ") + std::strerror(errno));
    }
    c->workers_.push_back(std::move(w));
  }
  // Threads start last: ~Comm joins whatever was started if this fails half way.
  FERRY_TRY(c->startWorkers());
  if (c->retry_) {
    c->armRetrySockets();
    c->enrollRetry();
  }
  FERRY_INFO(log::kNet, "NET/Socket: %s comm with %s: %d threads x %d sockets, inline < %u bytes%s",
             send ? "send" : "recv", c->peer().toString().c_str(), cfg.nThreads, cfg.nSocks,
             cfg.inlineBytes, cfg.retryMs ? (", retry window " + std::to_string(cfg.retryMs) + " ms").c_str() : "");
  return c;
}

Status Comm::startWorkers() {
  for (auto& w : workers_) {
    w->stop.store(false, std::memory_order_relaxed);  // also the caller-driven one (0 threads)
    if (w->wakeFd < 0) continue;
    try {
      w->thread = std::thread(workerMain, w.get(), send_);
    } catch (const std::system_error& e) {
      return systemError(std::string("NET/Socket: cannot start a helper thread: ") + e.what());
    }
  }
  return Status::ok();
}

void Comm::stopWorkers() {
  for (auto& w : workers_) {
    w->stop.store(true, std::memory_order_release);
    w->wake();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

Comm::~Comm() {
  std::unique_lock<std::mutex> call(callMu_, std::defer_lock);
  if (retry_) {
    // The hub's and the Driver's threads are not inside, and do not come in after this.
    call.lock();
    if (retry_->origin.hub) retry_->origin.hub->leave(retry_->origin.connId);
    Driver::unwatch(this);
  }
  stopWorkers();
  if (retry_) sayBye();
  for (auto& w : workers_) {
    if (w->wakeFd >= 0) ::close(w->wakeFd);
  }
}

void Comm::fail(const Status& st) {
  std::lock_guard<std::mutex> lock(errMu_);
  if (!failed_.load(std::memory_order_relaxed)) {
    err_ = st;
    failed_.store(true, std::memory_order_release);
  }
}

Status Comm::failure() {
  std::lock_guard<std::mutex> lock(errMu_);
  return err_;
}

void Comm::TEST_injectReset(int index) {
  if (index == 0) ctrlInject_.store(true);
  if (index > 0 && index <= static_cast<int>(streams_.size())) streams_[index - 1]->injectReset.store(true);
}

Status Comm::post(void* data, size_t size, Request** out) {
  *out = nullptr;
  std::unique_lock<std::mutex> call(callMu_, std::defer_lock);
  if (retry_) call.lock();
  if (failed_.load(std::memory_order_acquire)) return failure();
  Request* r = nullptr;
  for (auto& q : reqs_) {
    if (q.phase == Phase::kFree) {
      r = &q;
      break;
    }
  }
  if (!r) return Status::ok();
  r->data = static_cast<char*>(data);
  r->cap = size;
  r->size = send_ ? size : 0;
  r->phase = Phase::kHeader;
  r->hdrDone = r->inlineDone = 0;
  r->chunksLeft.store(0, std::memory_order_relaxed);
  if (retry_) {
    r->seq = retry_->posted++;
    retry_->bySeq[r->seq % RetryLink::kRing] = r;
    if (send_ && !copied(size)) retry_->ackWaiters++;
  }
  ctrlQueue_.push_back(r);
  *out = r;
  // Start moving now; the caller's test() calls continue from here.
  Status st = progress();
  if (!st.isOk()) fail(st);
  return Status::ok();
}

void Comm::startStreams(Request* r) {
  size_t n = streams_.size();
  size_t least = cfg_.nThreads == 0 ? kMinChunkBytesCaller : kMinChunkBytes;
  size_t chunk = std::max<size_t>(least, (r->size + n - 1) / n);
  size_t nChunks = (r->size + chunk - 1) / chunk;
  r->chunksLeft.store(static_cast<int>(nChunks), std::memory_order_release);
  r->phase = Phase::kStreams;
  for (size_t k = 0; k < nChunks; ++k) {
    size_t idx = nextStream_++ % n;
    Worker& w = *workers_[idx / cfg_.nSocks];
    Chunk c{r->data + k * chunk, std::min(chunk, r->size - k * chunk), r};
    {
      std::lock_guard<std::mutex> lock(w.mu);
      streams_[idx]->queue.push_back(c);
    }
    w.wake();
  }
}

// Sender: one sendmsg writes whatever the queue holds for the control socket,
// in posting order: each request's header, then an inline request's payload,
// as many requests as fit in kMaxIov pieces (a syscall per message, not two;
// a window of small messages in one). A streamed request's payload goes to
// the data streams once its header is out.
Status Comm::sendCtrl(bool* moved) {
  constexpr int kMaxIov = 16;
  while (!ctrlQueue_.empty() && !peerClosed_ && !ctrlBlocked_) {
    iovec iov[kMaxIov];
    int n = 0;
    size_t want = 0;
    for (Request* r : ctrlQueue_) {
      if (n + 2 > kMaxIov) break;
      if (r->hdrDone < sizeof(r->size)) {
        iov[n++] = {reinterpret_cast<char*>(&r->size) + r->hdrDone, sizeof(r->size) - r->hdrDone};
        want += iov[n - 1].iov_len;
      }
      if (!streamed(r->size) && r->inlineDone < r->size) {
        iov[n++] = {r->data + r->inlineDone, r->size - r->inlineDone};
        want += iov[n - 1].iov_len;
      }
    }
    FERRY_ASSIGN(size_t sent, sendSomeV(ctrl_, iov, n));
    ctrlBlocked_ = sent < want;  // the socket is full
    if (sent == 0) return Status::ok();
    *moved = true;
    size_t left = sent;
    for (Request* r : ctrlQueue_) {
      size_t h = std::min(left, sizeof(r->size) - r->hdrDone);
      r->hdrDone += h;
      left -= h;
      if (r->hdrDone < sizeof(r->size)) break;
      if (streamed(r->size)) {
        if (r->phase == Phase::kHeader) startStreams(r);
        continue;
      }
      size_t d = std::min<size_t>(left, r->size - r->inlineDone);
      r->inlineDone += d;
      left -= d;
      r->phase = r->inlineDone == r->size ? Phase::kDone : Phase::kInline;
      if (left == 0 && r->phase != Phase::kDone) break;
    }
    while (!ctrlQueue_.empty() &&
           (ctrlQueue_.front()->phase == Phase::kDone || ctrlQueue_.front()->phase == Phase::kStreams)) {
      ctrlQueue_.pop_front();
    }
  }
  return Status::ok();
}

// Receiver: a whole header tells what follows (the checks run once, however
// the header's bytes arrived).
Status Comm::headerArrived(Request* r) {
  if (retry_ && r->size == kBye) {
    peerClosed_ = true;
    r->hdrDone = 0;
    r->size = 0;
    return Status::ok();
  }
  if (r->size > r->cap) {
    return invalidUsage("NET/Socket: message truncated: " + peer().toString() + " sent " +
                        std::to_string(r->size) + " bytes, the receive buffer holds " +
                        std::to_string(r->cap));
  }
  if (streamed(r->size)) {
    startStreams(r);
  } else {
    r->phase = r->size == 0 ? Phase::kDone : Phase::kInline;
  }
  return Status::ok();
}

// Receiver: the oldest request's header, then its inline payload, read
// together with the next request's header when one is posted (one readv per
// message in a steady stream of small ones).
Status Comm::recvCtrl(bool* moved) {
  while (!ctrlQueue_.empty() && !ctrlBlocked_) {
    Request* r = ctrlQueue_.front();
    if (r->phase == Phase::kHeader) {
      if (r->hdrDone < sizeof(r->size)) {
        if (peerClosed_) return Status::ok();
        // An orderly close is only acceptable between messages (no header byte yet).
        bool eof = false;
        FERRY_ASSIGN(size_t n, recvSome(ctrl_, reinterpret_cast<char*>(&r->size) + r->hdrDone,
                                        sizeof(r->size) - r->hdrDone, r->hdrDone == 0 ? &eof : nullptr));
        if (eof) {
          // With retry on, only a "bye" ends the stream on purpose.
          if (retry_) return remoteError("NET/Socket: " + peer().toString() + " closed the connection");
          peerClosed_ = true;
          return Status::ok();
        }
        ctrlBlocked_ = n < sizeof(r->size) - r->hdrDone;  // drained
        if (n == 0) return Status::ok();
        r->hdrDone += n;
        *moved = true;
        if (r->hdrDone < sizeof(r->size)) continue;
      }
      FERRY_TRY(headerArrived(r));
      if (r->phase == Phase::kHeader) return Status::ok();  // the sender said bye
    }
    while (r->phase == Phase::kInline) {
      iovec iov[2];
      iov[0] = {r->data + r->inlineDone, r->size - r->inlineDone};
      int n = 1;
      size_t want = iov[0].iov_len;
      Request* next = ctrlQueue_.size() > 1 ? ctrlQueue_[1] : nullptr;
      if (next && next->phase == Phase::kHeader && next->hdrDone < sizeof(next->size)) {
        iov[n++] = {reinterpret_cast<char*>(&next->size) + next->hdrDone, sizeof(next->size) - next->hdrDone};
        want += iov[1].iov_len;
      }
      FERRY_ASSIGN(size_t got, recvSomeV(ctrl_, iov, n));
      ctrlBlocked_ = got < want;  // drained
      if (got == 0) return Status::ok();
      *moved = true;
      size_t d = std::min<size_t>(got, r->size - r->inlineDone);
      r->inlineDone += d;
      if (got > d) next->hdrDone += got - d;
      if (r->inlineDone == r->size) r->phase = Phase::kDone;
      if (ctrlBlocked_ && r->phase != Phase::kDone) return Status::ok();
    }
    ctrlQueue_.pop_front();
  }
  return Status::ok();
}

Status Comm::progress() { return retry_ ? progressRetry() : pump(); }

// A socket whose last attempt would have blocked is tried again only once
// poll() says it is ready. Polling takes no socket lock, where a send() or
// recv() that finds nothing to do does, and a caller spinning on test()
// would otherwise contend with the kernel filling or draining that socket
// (bidirectional 64 MiB streams: ~16k such calls per GB).
Status Comm::refreshReadiness() {
  pollfd fds[kMaxStreams + 1];
  Stream* who[kMaxStreams + 1];
  int n = 0;
  short ev = send_ ? POLLOUT : POLLIN;
  if (ctrlBlocked_ && !ctrlQueue_.empty()) {
    who[n] = nullptr;
    fds[n++] = {ctrl_.fd(), ev, 0};
  }
  // `blocked` is the caller's own; the queue lock only for a blocked stream.
  bool anyBlocked = false;
  if (cfg_.nThreads == 0) {
    for (auto& s : streams_) anyBlocked = anyBlocked || s->blocked;
  }
  if (anyBlocked) {
    Worker& w = *workers_[0];
    std::lock_guard<std::mutex> lock(w.mu);
    for (auto& s : streams_) {
      if (!s->blocked || (!s->hasCur && s->queue.empty())) continue;
      who[n] = s.get();
      fds[n++] = {s->sock.fd(), ev, 0};
    }
  }
  if (n == 0) return Status::ok();
  if (::poll(fds, n, 0) < 0 && errno != EINTR) {
    return systemError(std::string("NET/Socket: poll failed: ") + std::strerror(errno));
  }
  for (int i = 0; i < n; ++i) {
    if (fds[i].revents == 0) continue;
    if (who[i]) {
      who[i]->blocked = false;
    } else {
      ctrlBlocked_ = false;
    }
  }
  return Status::ok();
}

// After pump() every socket with work left has its last attempt blocked, so
// those are what the caller may sleep on. Helper threads and a broken
// connection (reconnects and resumes run on timers) are waits without a
// socket of the caller's. With retry on, a sender also waits for acks on the
// control socket (when one is due); a receiver's acks are written on a timer
// of ~1 ms, which the caller's bounded poll (Waiter::kFdWaitUs) covers.
void Comm::noteIdle() const {
  if (cfg_.nThreads > 0 || (retry_ && retry_->broken)) return readiness::noteOther();
  short ev = send_ ? POLLOUT : POLLIN;
  bool any = false;
  if (ctrlBlocked_ && !ctrlQueue_.empty()) {
    readiness::note(ctrl_.fd(), ev);
    any = true;
  }
  for (const auto& s : streams_) {
    if (!s->blocked) continue;
    readiness::note(s->sock.fd(), ev);
    // Part of this chunk has moved: the rest streams in (out) now, and the
    // caller's wait polls without spacing (Waiter::spacesPolls).
    if (s->hasCur && s->curDone > 0) readiness::noteMidMessage();
    any = true;
  }
  // Peeked acks stay in the socket (net_ack.cc), which then reads as ready
  // until they are dequeued: with some peeked, an ack has no readiness to
  // wait for. A sender whose streams are full waits for those anyway (an
  // ack that comes meanwhile frees a request, but no room to send more);
  // one that waits for acks alone has nothing to block on.
  if (retry_ && send_ && ackDue() && retry_->peeked == 0) {
    readiness::note(ctrl_.fd(), POLLIN);
    any = true;
  }
  if (!any) readiness::noteOther();
}

// Move what the sockets take now: control parts in order, then (without
// helper threads) the data streams. Sockets found full or empty are polled
// again (refreshReadiness) while a round still moved bytes, up to
// kPumpRounds rounds: a both-ways 16 MiB stream tested as NCCL's proxy does
// (the oldest request of each direction) ran at 0.80x libfabric's tcp
// provider with one round per call and 0.95x with 4 or 16 rounds, about as
// fast as testing every request on every pass (0.99x; perf/README.md).
Status Comm::pump() {
  if (ctrlInject_.load(std::memory_order_relaxed) && ctrlInject_.exchange(false)) {
    return resetForTest(ctrl_);
  }
  for (int round = 0; round < kPumpRounds; ++round) {
    FERRY_TRY(refreshReadiness());
    bool moved = false;
    FERRY_TRY(moveReady(&moved));
    if (!moved) break;
    // The caller's wait must not pause after a pass that moved bytes.
    readiness::noteMoved();
  }
  return Status::ok();
}

// Control parts in order, then the streams, until no socket not found
// blocked takes or gives anything more.
Status Comm::moveReady(bool* movedAny) {
  for (bool moved = true; moved;) {
    moved = false;
    FERRY_TRY(send_ ? sendCtrl(&moved) : recvCtrl(&moved));
    // Without helper threads the caller's calls move the streams too.
    if (cfg_.nThreads == 0) FERRY_TRY(workers_[0]->step(send_, &moved));
    *movedAny = *movedAny || moved;
  }
  return Status::ok();
}

Status Comm::test(Request* r, bool* done, size_t* size) {
  *done = false;
  std::unique_lock<std::mutex> call(callMu_, std::defer_lock);
  if (retry_) call.lock();
  if (failed_.load(std::memory_order_acquire)) return failure();
  Status st = progress();
  if (!st.isOk()) {
    fail(st);
    return failure();
  }
  // With retry on: sends once acknowledged or copied, receives in posting order.
  bool finished = retry_ ? (send_ ? sendDone(r) : r->seq < retry_->confirmed) : r->transferred();
  if (!finished) {
    // A helper thread may have failed while this request waits on it.
    if (failed_.load(std::memory_order_acquire)) return failure();
    if (peerClosed_ && (send_ || r->phase == Phase::kHeader)) {
      fail(remoteError("NET/Socket: " + peer().toString() + " closed the connection while a " +
                       (send_ ? "send waited for its acknowledgement" : "receive waited for its message")));
      return failure();
    }
    noteIdle();
    return Status::ok();
  }
  *done = true;
  if (size) *size = static_cast<size_t>(r->size);
  r->phase = Phase::kFree;
  return Status::ok();
}

}  // namespace ferry::netsocket
