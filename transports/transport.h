// Transport and Connection: the seam between the executor and the wires.
//
// A Transport is created once per communicator. It may publish a small blob of
// connection info (e.g. a listening address) that every rank learns through
// the bootstrap allgather, and it creates Connections to single peers.
//
// A Connection carries "pieces" in order in both directions between this rank
// and one peer. Sending: trySend() hands out a free slot, the caller fills it
// and commitSend()s the byte count. Receiving: tryRecv() shows the next
// arrived piece, the caller consumes it and releaseRecv()s it. All calls are
// non-blocking: "nothing yet" is an ok Status with an empty result, and the
// caller (the executor) decides how to wait. A Connection never learns which
// collective is running; it only moves bytes.
//
// Zero-copy: a connection that supportsRef() lets the sender publish a
// reference to stable memory of its own instead of bytes (sendRef); the
// receiver pulls the bytes with readRef() (cross-memory attach). The sender
// must keep that memory unchanged until sendsDrained() is true.
//
// Thread-safety: a Connection is used by one thread at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace ferry {

// What every rank publishes about itself at communicator creation.
struct PeerInfo {
  int32_t rank = -1;
  int32_t pid = 0;
  uint64_t hostHash = 0;     // node identity: equal => same machine (shared memory possible)
  char hostname[64] = {};
  uint8_t sockAddr[32] = {}; // socket transport listening address (sockaddr_in / sockaddr_in6)
  uint64_t nonce = 0;        // random per process: makes commHash unique per job
  uint8_t reserved[24] = {};
};

// A collective exchange among the communicator's ranks (the bootstrap
// network), e.g. to publish a network plugin's listen handle. Every rank must
// call it, in the same order; bounded by the communicator's deadline.
class PeerExchange {
 public:
  virtual ~PeerExchange() = default;
  // My block is at all + rank*bytesPerRank; on return all blocks are filled.
  virtual Status allGather(void* all, size_t bytesPerRank) = 0;
};

// Everything a transport needs to know about the communicator it serves.
struct CommContext {
  int rank = 0;
  int nranks = 0;
  uint64_t commHash = 0;            // unique per communicator (names shm segments, checks hellos)
  uint64_t secret = 0;              // presented on every socket connection
  const std::vector<PeerInfo>* peers = nullptr;  // filled after the init allgather
  const std::atomic<bool>* abortFlag = nullptr;  // set by ncclCommAbort / fatal errors
  int64_t timeoutMs = 30000;        // deadline for connection setup (init's, then FERRY_TIMEOUT_MS)
  PeerExchange* exchange = nullptr; // set by the communicator before prepare()
  // Called over and over while connect() waits for `peer` (cheap: the
  // communicator rate-limits the real checks): an error when the peer has
  // died or another connection of this communicator has failed, so a wait
  // for a peer that will never come ends at once.
  std::function<Status(int peer)> connectCheck;
  // This host's rail table (topology/rails.h): entry i is the NIC name of
  // GPU i, so local rank i's network device; empty without GPUs in the
  // topology (then local rank i uses device i % devices).
  std::vector<std::string> railNics;
};

struct SendSlot {
  void* data = nullptr;    // nullptr: no free slot right now, try again later
  size_t capacity = 0;
  // In: the bytes the caller means to write, when it knows (0: unknown). A
  // transport may place a small piece better (shared memory: in the line
  // the receiver reads first) and then offer no more than that.
  size_t hint = 0;
  // Out: copies of at least this many bytes into the slot should bypass the
  // cache (kernels::copyPastCache): another core reads the slot and held its
  // lines before, so ordinary stores pay to take each line back (0: never).
  size_t streamFrom = 0;
};

struct RecvPiece {
  bool ready = false;      // false: nothing has arrived yet
  bool isRef = false;      // true: bytes live in the sender's memory; use readRef()
  const void* data = nullptr;  // inline bytes (when !isRef)
  size_t size = 0;
};

class Connection {
 public:
  virtual ~Connection() = default;

  virtual Status trySend(SendSlot* out) = 0;
  virtual Status commitSend(size_t bytes) = 0;

  virtual bool supportsRef() const { return false; }
  // Publish a reference to `bytes` at `src` (stable sender memory). *accepted
  // is false when no slot is free right now.
  virtual Status sendRef(const void* src, size_t bytes, bool* accepted);

  virtual Status tryRecv(RecvPiece* out) = 0;
  // Copy `bytes` from offset `offset` of a ref piece into dst.
  virtual Status readRef(const RecvPiece& piece, size_t offset, void* dst, size_t bytes);
  virtual Status releaseRecv() = 0;

  // True when the peer has consumed every reference sent so far (and, for
  // a transport that says no more, every piece: pieces copied into a ring
  // need not be waited for).
  virtual bool sendsDrained() = 0;
  // True when the peer has taken every piece sent so far, by value too,
  // but for what it may hold back in batched acknowledgements (a few KiB):
  // a run that times itself against its peers' pace, exec/ref_choice.h.
  virtual bool sendsConsumed() { return sendsDrained(); }

  // True when every committed piece will reach the peer without further
  // calls on this side (shared memory: at once; sockets: once written to
  // the kernel). An operation is complete only when this holds.
  virtual bool sendsFlushed() { return true; }

  // Move bytes that need a push (sockets); cheap no-op for shared memory.
  // Reports a dead or misbehaving peer as an error.
  virtual Status progress() { return Status::ok(); }
  // False only where progress() and sendsFlushed() are the no-op defaults
  // above: the executor then skips both calls on every poll (a small
  // collective polls its connections several times). True by default, so a
  // connection that overrides them is never left unpolled by omission.
  virtual bool needsPush() const { return true; }
  // True when every wait on this connection is a wait for one of its
  // sockets and its network notes them (core/readiness.h): a caller whose
  // connections all say so may block in poll() when nothing moves.
  virtual bool waitsOnFds() const { return false; }

  // This side gave up (error or abort): make the peer's waits fail promptly
  // instead of running into their timeout.
  virtual void markFailed() {}
  // An error if the peer has reported a failure (without consuming anything).
  virtual Status health() { return Status::ok(); }
  // True while this connection can still move without the peer's process:
  // pieces the peer sent wait unread here, and nothing we sent waits on it
  // (no unread reference, room in the ring). A local peer that finished its
  // part and exited is not a failure while this holds (Comm::checkPeers).
  virtual bool outlivesPeer() { return false; }

  // Teardown in steps, so a communicator closes all its connections together
  // under one deadline (a peer may destroy its communicators in another
  // order): true once this connection can be destroyed without waiting;
  // *moved when something progressed. After a false, markFailed() makes the
  // destructor close at once.
  virtual bool stepClose(bool* moved) { return true; }
  // markFailed, telling the peer why when the transport must (the network: a
  // rank that caught a usage error makes its peers on other hosts fail with
  // that code too; on one host the failure board says why).
  virtual void reportFailure(Code reason) {
    (void)reason;
    markFailed();
  }

  virtual std::string describe() const = 0;
};

// What a transport tells the communicator's view (algorithms/comm_view.h)
// after prepare(): whether it serves this communicator and how fast.
struct TransportReport {
  bool active = false;     // set up for this communicator
  int devices = 0;         // network devices listened on (rails)
  int sendDevice = -1;     // the device this rank sends on
  std::string deviceName;  // that device's name (e.g. the interface)
  double mbps = 0;         // that device's speed in Mbit/s (0: unknown)
  double latencyUs = 0;    // its latency in microseconds (0: unknown)
  bool software = false;   // no hardware behind it (no PCI path: veth, bridge, lo)
  // Bytes one direction of its connections buffers (slots x slot size); a
  // collective step must fit in half of the smallest (0: no connections).
  size_t fifoBytes = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;

  // Called once before the init allgather: prepare listeners, fill our part
  // of *self.
  virtual Status setup(const CommContext& ctx, PeerInfo* self) = 0;

  // Called once by every rank after the allgather (peers and commHash are
  // known), in the same order on all ranks: may use ctx.exchange.
  virtual Status prepare(const CommContext& ctx) { return Status::ok(); }

  // After prepare(): what the cost model should know (transportReport above).
  virtual TransportReport report() const { return {}; }

  // Can this transport reach `peer` (after the allgather)?
  virtual bool canConnect(const CommContext& ctx, const PeerInfo& self,
                          const PeerInfo& peer) const = 0;

  // Both ranks of the pair call connect() for each other, in any order and
  // interleaved with connects to other peers; it blocks (bounded by
  // ctx.timeoutMs and the abort flag) until the link is up. A connect must
  // never wait for the peer's connect() to *this* rank: ranks reach their
  // peers in different orders, and waiting would deadlock a ring.
  virtual Result<std::unique_ptr<Connection>> connect(const CommContext& ctx, int peer) = 0;
};

// The built-in transports in priority order (first that canConnect wins),
// honouring NCCL_SHM_DISABLE and friends. Defined in transports/registry.cc.
std::vector<std::unique_ptr<Transport>> createTransports();

}  // namespace ferry
