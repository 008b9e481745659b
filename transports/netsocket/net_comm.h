// Internals of the Socket network: wire formats, the per-connection Comm
// (control socket + data streams + helper threads) and setup state.
// With FERRY_NET_RETRY_MS > 0 a comm also survives a broken connection
// (net_retry.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <nccl_net.h>

#include "core/status.h"
#include "net/sock_addr.h"
#include "net/socket.h"

namespace ferry::netsocket {

constexpr uint32_t kMagic = 0x464e534bu;  // "FNSK": a stray connection is not a hello
constexpr int kMaxThreads = 16;
constexpr int kMaxStreams = 64;
// Streamed requests are cut into chunks no smaller than this, so a mid-size
// request does not pay a syscall per stream for a few bytes each. With the
// caller moving the data (no helper threads to run chunks in parallel) a
// request below 1 MiB goes whole on one stream, streams taking turns:
// 256-512 KiB messages then move at 5.0-6.2 GB/s on loopback instead of
// 3.3-4.9 split in two (perf/README.md, perf/fabric).
constexpr size_t kMinChunkBytes = 64 * 1024;
constexpr size_t kMinChunkBytesCaller = 1024 * 1024;
// Most polls of the sockets one progress call makes (Comm::pump).
constexpr int kPumpRounds = 4;
// Longest retry window a handle may ask for (a larger FERRY_NET_RETRY_MS is capped).
constexpr uint32_t kMaxRetryMs = 3600 * 1000;

// Thread/stream layout of a connection; the listener picks it and ships it in
// the handle so both ends agree whatever their environments say.
struct Config {
  int nThreads = 1;      // 0: the caller's test() moves the data streams
  int nSocks = 1;        // data sockets per thread
  uint32_t inlineBytes = 131072;
  uint32_t retryMs = 0;  // 0: a broken connection fails at once (no acks, no resume)
  int nStreams() const { return (nThreads > 0 ? nThreads : 1) * nSocks; }
};
Config readConfig();

// The listen handle as it lives in the caller's 128-byte buffer. `pending`
// is connect()'s progress (NCCL's socket net keeps it in the handle too).
constexpr int kMaxAltAddrs = 7;

struct Handle {
  uint32_t magic;
  uint16_t nThreads;
  uint16_t nSocks;
  uint64_t nonce;
  uint32_t inlineBytes;
  uint32_t retryMs;
  uint8_t addr[SockAddr::kPackedBytes];
  // Retry on: the listener also listens on the host's other devices (IPv4
  // only), so a sender whose rail failed reconnects over another one
  // (net_retry.h, "Rail failover").
  uint8_t nAlt;
  uint8_t altPad[3];
  uint32_t altIp[kMaxAltAddrs];    // network byte order
  uint16_t altPort[kMaxAltAddrs];  // host byte order
  void* pending;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE);

// First bytes on every socket of a connection; index 0 is the control socket.
struct Hello {
  uint32_t magic;
  uint32_t index;
  uint32_t nStreams;
  uint32_t epoch;   // 0: a new connection; n > 0: the n-th attempt to resume connId
  uint64_t nonce;
  uint64_t connId;  // groups the sockets of one connector
  // The sender process's sentinel port on this socket's source address
  // (net_alive.h): a receiver whose connection broke probes it, and a
  // refused probe means the process is gone. 0: none.
  uint32_t alivePort;
  uint32_t reserved;
};

// The receiver's first bytes on the control socket of a resumed connection.
struct ResumeReply {
  uint32_t magic;     // kResumeMagic
  uint32_t status;    // kResumed, or kUnknown: no comm owns that connId (it was closed)
  uint64_t received;  // kResumed: messages the receiver holds completely
};
constexpr uint32_t kResumeMagic = 0x52534b46u;  // "FKSR"
constexpr uint32_t kResumed = 0;
constexpr uint32_t kUnknown = 1;
// A control-socket word that is never a size or a count: the peer closed its
// comm on purpose (a header from the sender, an ack from the receiver).
constexpr uint64_t kBye = ~uint64_t{0};

class Comm;

enum class Phase { kFree, kHeader, kInline, kStreams, kDone };

struct Request {
  Comm* comm = nullptr;
  char* data = nullptr;
  size_t cap = 0;        // posted buffer size
  uint64_t size = 0;     // sender's size (the wire header)
  Phase phase = Phase::kFree;
  uint64_t seq = 0;      // posting order (retry on)
  size_t hdrDone = 0;
  size_t inlineDone = 0;
  std::atomic<int> chunksLeft{0};

  // Every byte moved: inline done, or every streamed chunk out/in (the
  // acquire orders the helper threads' last send()/recv() before the caller
  // reuses the buffer).
  bool transferred() const {
    return phase == Phase::kDone ||
           (phase == Phase::kStreams && chunksLeft.load(std::memory_order_acquire) == 0);
  }
};

struct Chunk {
  char* ptr = nullptr;
  size_t len = 0;
  Request* req = nullptr;
};

struct Stream {
  Socket sock;
  std::deque<Chunk> queue;  // guarded by the owning Worker's mu
  Chunk cur;                // touched by the owner only
  size_t curDone = 0;
  bool hasCur = false;
  // Caller-driven (0 threads): the last attempt would have blocked; poll()
  // says when to try again (net_comm.cc, refreshReadiness).
  bool blocked = false;
  std::atomic<bool> injectReset{false};  // test hook: the owner resets the socket
};

// Owner of some streams: a helper thread, or (nThreads == 0) the caller.
struct Worker {
  Comm* comm = nullptr;
  std::vector<Stream*> streams;
  std::mutex mu;
  int wakeFd = -1;  // eventfd; -1 when the caller drives this worker
  std::atomic<bool> stop{false};
  std::thread thread;

  void wake();
  // Move whatever the sockets take now; *moved reports progress.
  Status step(bool send, bool* moved);
  // Wait (bounded) until a stream is ready or wake() is called.
  Status waitReady(bool send, int timeoutMs);
};
void workerMain(Worker* w, bool send);

class Hub;
struct RetryLink;

// Where a comm came from: what a sender needs to reconnect, and where a
// receiver finds its sender's resume connections (both used with retry on).
struct Origin {
  uint64_t connId = 0;
  SockAddr to;                // send: the listener's address
  SockAddr from;              // send: the address bound before connect (net_setup.h)
  std::vector<SockAddr> alts; // send: the listener's other addresses (failover)
  uint64_t nonce = 0;         // send: the listener's nonce
  std::shared_ptr<Hub> hub;   // recv: the listener it was accepted from
  SockAddr alive;             // recv: the sender process's sentinel (net_alive.h); invalid: none
};

class Comm {
 public:
  // socks[0] is the control socket, then cfg.nStreams() data sockets.
  static Result<std::unique_ptr<Comm>> create(bool send, std::vector<Socket> socks,
                                              const Config& cfg, Origin origin = {});
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // *out = nullptr: too many requests outstanding, retry later.
  Status post(void* data, size_t size, Request** out);
  Status test(Request* r, bool* done, size_t* size);
  // Record the first error; every later call on this comm reports it.
  void fail(const Status& st);
  // A helper thread's stream failed: a break to ride out (retry on) or fail().
  void streamFailed(const Status& st);
  const SockAddr& peer() const { return peer_; }
  // True the first time only: a dead comm is WARNed about once, not per test().
  bool firstReport() { return !reported_.exchange(true); }

  // For the hub's thread (retry on): lock the comm if no call is inside it,
  // then have it adopt the resume that arrived for it (and unlock).
  bool tryPin() { return callMu_.try_lock(); }
  void resumeFromHub();
  // For the Driver's thread (send comms holding copies; net_driver.h): the
  // control socket to watch (-1: none now), whether to come back soon, and
  // one progress step on a pinned comm (which unpins).
  int driverFd() const { return driverFd_.load(std::memory_order_acquire); }
  bool driveSoon() const { return driveSoon_.load(std::memory_order_acquire); }
  void driveFromDriver();

  // Test hook (tests/unit/netsocket): whoever drives socket `index` (0: the
  // control socket, i: data stream i-1) resets it (RST to the peer) on its
  // next turn, as a network fault would.
  void TEST_injectReset(int index);

 private:
  Comm(bool send, const Config& cfg);
  Status progress();
  Status pump();
  Status moveReady(bool* movedAny);
  Status sendCtrl(bool* moved);
  Status recvCtrl(bool* moved);
  Status headerArrived(Request* r);
  Status refreshReadiness();
  // A request is not done after a full pump: note what it waits on for the
  // caller's idle wait (core/readiness.h).
  void noteIdle() const;
  // A message this size goes over the data streams (else inline, on the control socket).
  bool streamed(uint64_t size) const { return size > 0 && size >= cfg_.inlineBytes; }
  // Retry on: a send of this size completes once written and copied aside,
  // a larger one once acknowledged. A copy of a large message costs more
  // than waiting for its ack (AllReduce 512 KiB-8 MiB +16-44% copied, within
  // noise acknowledged: perf/README.md, net_retry_cost); at 64 KiB the copy
  // wins (one-way stream 0.94x libfabric's tcp copied, 0.86x acknowledged one
  // by one: perf/README.md, perf/fabric).
  static constexpr uint64_t kCopyBelow = 128 * 1024;
  bool copied(uint64_t size) const { return !streamed(size) && size < kCopyBelow; }
  void startStreams(Request* r);
  Status failure();
  Status startWorkers();
  void stopWorkers();

  // Retry (net_retry.cc, net_ack.cc, net_resume.cc).
  void enrollRetry();
  Status progressRetry();
  Status healthyStep();
  Status readAcks();
  Status dequeuePeeked(size_t atLeast);
  Status takeAck(uint64_t v);
  void advanceReceived();
  bool ackDue() const;
  void confirm(uint64_t count);
  bool sendDone(Request* r);
  Status writeAcks();
  bool transient(const Status& st) const;
  void beginBreak(const Status& cause, bool planned = false);
  void detachSockets();
  Status attachSockets(std::vector<Socket> socks);
  void restartFrom(uint64_t seq);
  Status redial();
  Status finishRedial();
  void backOff();
  Status awaitResume();
  Status pollResume();
  Status adoptResume(std::vector<Socket> socks, uint32_t epoch);
  Status giveUp();
  void sayBye();
  // Rail failover (net_failover.cc).
  SockAddr routeAddr(int route) const;
  SockAddr routeFrom(int route) const;
  void abandonAttempt();
  void noteRoute();
  bool primaryBack();
  void armStallTimeout();
  void armRetrySockets();
  Status socketErrors();

  bool send_;
  Config cfg_;
  SockAddr peer_;
  Socket ctrl_;
  std::atomic<bool> ctrlInject_{false};  // TEST_injectReset(0)
  // The control socket would block in the comm's direction; see refreshReadiness.
  bool ctrlBlocked_ = false;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<Worker>> workers_;
  Request reqs_[NCCL_NET_MAX_REQUESTS];
  std::deque<Request*> ctrlQueue_;  // posted, control part not finished, posting order
  // Receive side (and send side with retry on: the receiver said bye): the
  // peer closed between messages. Not an error by itself
  // (a peer that sent everything may close first while earlier messages are
  // still arriving on the data streams); it fails only requests that still
  // wait for a header.
  bool peerClosed_ = false;
  uint64_t nextStream_ = 0;         // round robin over streams, same on both ends
  std::unique_ptr<RetryLink> retry_;  // null when retry is off
  // Retry on: held by every call, so the hub's thread can act when none is in.
  std::mutex callMu_;
  std::atomic<int> driverFd_{-1};
  std::atomic<bool> driveSoon_{false};
  std::mutex errMu_;
  Status err_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> reported_{false};
};

// The test hook's reset, by the socket's owner: the peer gets an RST, and
// the returned error is what a reset connection reports here.
Status resetForTest(Socket& s);

}  // namespace ferry::netsocket
