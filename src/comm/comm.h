// Comm: one rank's communicator (what ncclComm_t points to).
//
// It owns the bootstrap, the per-comm transports and the lazily created
// connections, the async error state and the PreMulSum operator table. It
// does not know how collectives are scheduled: the group engine (group.h)
// builds executors and drives them, asking the Comm for connections.
//
// Thread-safety: the NCCL contract is one thread per comm at a time, except
// ncclCommAbort / ncclCommGetAsyncError which may come from any thread; the
// abort flag, the error latch and the user count are atomics for that.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nccl.h>

#include "algorithms/algo_filter.h"
#include "algorithms/comm_view.h"
#include "algorithms/tuner.h"
#include "bootstrap/bootstrap.h"
#include "comm/fail_board.h"
#include "comm/op_queue.h"
#include "comm/presence.h"
#include "comm/repeat_call.h"
#include "core/status.h"
#include "core/wait.h"
#include "exec/executor.h"
#include "exec/plan_cache.h"
#include "kernels/reduce.h"
#include "mem/staging.h"
#include "mem/window.h"
#include "topology/rails.h"
#include "transports/transport.h"

namespace ferry {

struct CommConfig {
  bool blocking = true;
  std::string netName;
  std::string commName;
  int splitShare = 0;
  int device = 0;  // what ncclCommCuDevice reports (ncclCommInitAll's device list)
};

struct PremulOp {
  kernels::DType dtype;
  kernels::Scalar scalar;  // ncclScalarHostImmediate: read at creation
  // ncclScalarDevice: read as each collective runs (NCCL's semantics): at
  // the call from host memory, from device memory when the stream gets there.
  const void* at = nullptr;
};

class DeviceDirect;

class Comm final : public ConnectionSource {
 public:
  Comm(int rank, int nranks, CommConfig config);
  ~Comm() override;

  // Bootstrap, transport setup, peer info exchange. Blocking.
  Status init(const ncclUniqueId& id);
  // Run init on a background thread (nonblocking comms); asyncError() is
  // kInProgress until it ends.
  void initAsync(const ncclUniqueId& id);
  void joinInit();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const CommConfig& config() const { return config_; }
  Bootstrap& bootstrap() { return *bootstrap_; }
  bool ready() const { return ready_.load(); }

  Result<Connection*> connection(int peer) override;
  // Error if a same-node peer in `peers` has exited (rate limited) and its
  // connection cannot go on without it (Connection::outlivesPeer).
  Status checkPeers(const std::vector<int>& peers);
  // Whether checkPeers would look now (a wait builds its peer list only then).
  bool peerCheckDue() const { return nowCoarseMs() - lastPeerCheckMs_ >= peerCheckMs_; }
  // While a lazy connect waits for `peer` (CommContext::connectCheck).
  Status connectCheck(int peer);
  // Ok, or the failure another rank of this host posted (fail_board.h).
  Status boardCheck() const { return board_ ? board_->check(rank_) : Status::ok(); }
  // kParked when every one of `peers` is on this host and parked
  // (presence.h); kUnknown otherwise.
  PeerState peerState(const std::vector<int>& peers) const;
  // This rank's parked flag for its waits (null without a Presence).
  std::atomic<uint32_t>* parkFlag() { return presence_ ? presence_->flag(rank_) : nullptr; }

  // Latch the first error, tell every connected peer that we gave up.
  void fail(const Status& st);
  // Latch only (the first error wins).
  void latch(const Status& st);
  ncclResult_t asyncResult() const { return asyncResult_.load(); }
  const Status& firstError() const { return firstError_; }
  // Ok if collectives may run now. The common answer is inline: every call
  // asks, and a small collective's whole path is a few hundred instructions.
  Status usable() const {
    if (usableNow()) return Status::ok();
    return usableSlow();
  }
  bool usableNow() const {
    return ready_.load(std::memory_order_acquire) && !abort_.load(std::memory_order_acquire) &&
           !revoked_.load(std::memory_order_acquire) &&
           asyncResult_.load(std::memory_order_acquire) == ncclSuccess;
  }

  const std::atomic<bool>* abortFlag() const { return &abort_; }
  void abort();
  // ncclCommRevoke: no more collectives (usable() says so); connections
  // fail so nothing more travels on them; the bootstrap stays for
  // ncclCommSplit / ncclCommShrink. revoked() tells whether it happened.
  void revoke();
  bool revoked() const { return revoked_.load(); }
  // What ncclCommGetAsyncError may find without a call in flight: a failure
  // another rank of this host posted (fail_board.h); latched like fail()
  // (any thread: touches no connection).
  void pollBackground();
  // Users: group executions in flight. Abort waits (bounded) for them.
  void enter() { users_.fetch_add(1); }
  void exit() { users_.fetch_sub(1); }
  void waitIdle(int64_t timeoutMs);

  // Set by the live-communicator registry (registry.h): tells this comm
  // apart from a later one allocated at the same address.
  uint64_t serial() const { return serial_; }
  void setSerial(uint64_t s) { serial_ = s; }

  bool finalized() const { return finalized_; }
  void setFinalized() { finalized_ = true; }

  // PreMulSum operators: values ncclNumOps + index.
  int addPremul(PremulOp op);
  Status removePremul(int op);
  const PremulOp* premul(int op) const;

  ExecOptions execOptions() const { return execOptions_; }
  // Executors of earlier collectives with the same shape (plan_cache.h).
  PlanCache& plans() { return plans_; }
  RepeatCalls& repeats() { return repeats_; }
  // The copies in-place AlltoAll and Send/Recv send from (staging.h).
  mem::StagingPool& staging() { return staging_; }
  const CollFilter& algoFilter() const { return algoFilter_; }
  // What the machine looks like to this communicator; identical on every
  // rank (built once at creation from an allgather).
  const CommView& view() const { return view_; }
  // The NCCL tuner plugin's say in the choice (null: no plugin).
  ExternalTuner* externalTuner() const { return tuner_.get(); }
  int64_t timeoutMs() const { return timeoutMs_; }
  // Operation checks (exec/op_check.h) on; the next collective's number.
  bool checkOps() const { return checkOps_; }
  // FERRY_P2P_RAIL, read once (a config read takes a lock: too dear per call).
  bool p2pRail() const { return p2pRail_; }
  uint64_t nextCollSeq() { return ++collSeq_; }
  uint64_t commHash() const { return ctx_.commHash; }
  int nextSplitSeq() { return splitSeq_++; }
  int nextShrinkSeq() { return shrinkSeq_++; }
  std::string describe() const;

  // Operations ordered on streams (op_queue.h, stream_bridge.h): the queue
  // exists from the first. While it is busy, host calls drain it first
  // (quiesce; a no-op on the queue's own thread).
  OpQueue& ensureOpQueue();
  bool queueBusy() const { return queue_ && queue_->busy(); }
  Status quiesce();
  // Staging for device memory; what the bridge held in flight at most.
  static constexpr size_t kBridgeMaxHeldBytes = size_t(64) << 20;
  mem::StagingPool& bridgePool() { return bridgePool_; }
  // Counts bytes copied through staging for a device call; pieceBytes > 0:
  // staged in pieces of that size. The first time of each, one INFO line.
  void noteStaged(const char* device, size_t bytes, size_t pieceBytes);
  uint64_t stagedBytes() const { return stagedBytes_.load(); }

  // ncclCommWindowRegister (collective over the bootstrap; window.h) and the
  // table collectives look their buffers up in (symmetric_bind.h).
  Result<mem::Window*> registerWindow(void* buff, size_t bytes, int flags);
  mem::WindowTable& windows() { return windows_; }
  // Collectives on device windows as stream work (device_direct.h), made
  // at the first ask; null until then (directIfAny).
  DeviceDirect& direct();
  DeviceDirect* directIfAny() const { return direct_.get(); }

 private:
  Status setupPeers();
  Status openBoard();
  void closeConnections();
  void logTopology() const;
  Status loadTopology();
  Status buildView();
  void logView() const;
  void openTuner();

  int rank_, nranks_;
  CommConfig config_;
  std::unique_ptr<Bootstrap> bootstrap_;
  // Transports trade connection handles through the bootstrap network.
  class BootstrapExchange final : public PeerExchange {
   public:
    explicit BootstrapExchange(Comm* comm) : comm_(comm) {}
    Status allGather(void* all, size_t bytesPerRank) override;

   private:
    Comm* comm_;
  } exchange_{this};
  std::vector<PeerInfo> peers_;
  CommContext ctx_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<Connection>> conns_;
  // Guards conns_'s slots against ncclCommAbort/Revoke from another thread
  // (and failure reports) while a collective connects lazily; a connection
  // is made outside the lock and published under it.
  mutable std::mutex connsMu_;
  bool outlives(int peer) const;  // conns_[peer] still moves without the peer
  std::unique_ptr<FailureBoard> board_;  // null when no other rank shares this host
  std::unique_ptr<Presence> presence_;   // likewise
  std::atomic<bool> abort_{false};
  std::atomic<bool> revoked_{false};
  std::atomic<bool> ready_{false};
  std::atomic<ncclResult_t> asyncResult_{ncclSuccess};
  std::mutex errorMu_;
  Status firstError_;
  std::atomic<int> users_{0};
  std::thread initThread_;
  bool finalized_ = false;
  Status usableSlow() const;
  uint64_t serial_ = 0;
  std::vector<std::unique_ptr<PremulOp>> premulOps_;
  ExecOptions execOptions_;
  CollFilter algoFilter_;  // NCCL_ALGO, parsed in init()
  std::vector<topo::Rail> rails_;  // the machine's GPU -> NIC rail table (topo_init.cc)
  CommView view_;
  std::unique_ptr<ExternalTuner> tuner_;
  int64_t timeoutMs_ = 30000;
  int64_t peerCheckMs_ = 100;
  int64_t lastPeerCheckMs_ = 0;
  int splitSeq_ = 0;
  int shrinkSeq_ = 0;
  bool checkOps_ = true;
  bool p2pRail_ = false;
  uint64_t collSeq_ = 0;
  PlanCache plans_;
  RepeatCalls repeats_;
  mem::StagingPool staging_;
  mem::WindowTable windows_;
  std::unique_ptr<DeviceDirect> direct_;  // after windows_: goes first, waiting for its streams
  mem::StagingPool bridgePool_;  // 32 blocks, FERRY_BRIDGE_POOL_BYTES
  std::atomic<uint64_t> stagedBytes_{0};
  std::atomic<bool> stagedLogged_{false};
  std::atomic<bool> piecesLogged_{false};
  std::unique_ptr<OpQueue> queue_;  // last: stopped first (~Comm)
};


// Status -> ncclResult_t, the single mapping used at the C ABI edge.
ncclResult_t toNcclResult(const Status& st);


}  // namespace ferry
