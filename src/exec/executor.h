// Executor: runs one rank's Schedule over Connections, piece by piece.
//
// It never blocks: progress() does all the work that is possible right now
// and returns; the caller (the group engine) loops over every executor of a
// group and waits with a Backoff/Waiter when nothing moved. Lanes of a
// schedule advance independently; steps of a lane in order; each step is cut
// into pieces that fit the connection's slots, so consecutive ranks of a ring
// work on different pieces of the same step at the same time (pipelining).
//
// Small schedules: when every step moves at most kFlatStepBytes, a run takes
// the flat path (executor_flat.cc): each step is one piece, written or read
// whole, skipping the general path's per-piece machinery. A piece it does not
// expect hands the run to the general path where it stands.
//
// Zero-copy: a piece taken from stable user memory (a plain send, or data we
// just received as a reference and forward) can travel as a reference that the peer reads
// with cross-memory attach; the executor then waits, before it reports done,
// until every such peer has consumed its pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "algorithms/schedule.h"
#include "core/status.h"
#include "exec/io_gate.h"
#include "exec/op_check.h"
#include "exec/peer_memory.h"
#include "exec/ref_choice.h"
#include "exec/slot_writes.h"
#include "kernels/reduce.h"
#include "transports/transport.h"

namespace ferry {

// Where the executor gets its connections (the communicator, or a test fake).
class ConnectionSource {
 public:
  virtual ~ConnectionSource() = default;
  // Returns the connection to `peer`, connecting first if needed (blocking,
  // bounded by the communicator's deadline).
  virtual Result<Connection*> connection(int peer) = 0;

  // Operations so far that sent to / received from `peer` (op_check.h):
  // returns the next number, 1-based. Both ends of a pair count alike as
  // long as they run the same operations.
  uint32_t nextPairSeq(int peer, bool send) {
    std::vector<uint32_t>& v = send ? sendSeq_ : recvSeq_;
    if (static_cast<size_t>(peer) >= v.size()) v.resize(peer + 1, 0);
    return ++v[peer];
  }

 private:
  std::vector<uint32_t> sendSeq_, recvSeq_;
};

struct ReduceSpec {
  kernels::DType dtype = kernels::DType::kInt8;
  kernels::Op op = kernels::Op::kSum;
  bool premul = false;        // PreMulSum: scale this rank's input by `scalar`
  kernels::Scalar scalar{};
  uint64_t divisor = 0;       // Avg: divide final values by this (0/1: no division)
};

struct ExecOptions {
  bool allowRefs = true;          // cross-memory attach allowed (NCCL_P2P_DISABLE=0)
  size_t refThreshold = 4 << 20;  // pieces at least this big travel as references (CMA)
  // Each executor chooses between refThreshold and by value (ref_choice.h);
  // false: refThreshold always (FERRY_CMA_THRESHOLD set by the user).
  bool refAdaptive = true;
  // Pieces inside an ncclMemAlloc block, which the peer maps and reads in
  // place at memcpy speed, travel as references from this size on.
  size_t mappedRefThreshold = 65536;
  size_t refChunk = 1 << 20;      // forward referenced data in parts of this size
  // Local copies (doCopy) and receive steps at least this large write
  // their output past the cache (FERRY_COPY_STREAM_BYTES); SIZE_MAX: never.
  size_t streamCopyBytes = SIZE_MAX;
  size_t tempBytes = 1 << 18;     // scratch for reducing referenced data
  SlotWrites::Mode slotWrites = SlotWrites::Mode::kAuto;  // FERRY_SHM_STREAM
  bool flat = true;               // small schedules on the flat path (FERRY_EXEC_FLAT)
};

class Executor {
 public:
  Executor(Schedule schedule, std::vector<void*> buffers, size_t elemSize, ReduceSpec reduce,
           ExecOptions options);
  // Not copyable: the flat program points into this executor's schedule and
  // checks, and the scratch buffer into its own memory.
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Begin a run: resolve (the first time, establishing them if needed) the
  // connections the schedule uses, reset all progress, run the prologue.
  // An executor can run again and again (the communicator caches them).
  // With `info`, the run checks that every peer runs the same operation
  // (op_check.h); null runs unchecked.
  Status start(ConnectionSource& source, const OpInfo* info = nullptr);
  // The largest step the flat path takes (well under any transport's slot).
  static constexpr size_t kFlatStepBytes = 1024;
  // Whether runs take the flat path (tests; premultiplied ops never do).
  bool flat() const { return flat_; }
  // Whether the last run stayed on the flat path to its end (tests).
  bool ranFlat() const { return flatRun_; }
  // Point a cached collective executor at this call's buffers and operator.
  void rebind(void* input, void* output, const ReduceSpec& reduce);
  // Point a cached Send/Recv executor at this batch's buffers (one per op).
  void rebindBuffers(const std::vector<void*>& buffers);
  void rebindBuffer(size_t i, void* buffer) {
    if (i < buffers_.size()) buffers_[i] = buffer;
    ++binds_;
  }
  // Counts the rebinds: a caller that bound its buffers and sees the same
  // count later knows they are still bound (repeat_call.h).
  uint64_t binds() const { return binds_; }
  // Gate the next runs' steps on their input and report their output piece
  // by piece (io_gate.h; the bridge's pipelined staging); null: ungated.
  // Gated runs never take the flat path. Set before start().
  void setGate(IoGate* gate) { gate_ = gate; }
  // The peers' buffers and the barrier for schedules with peer regions
  // (CollArgs::symmetric); must outlive the run.
  void bindPeers(PeerMemory* peers) { peerMem_ = peers; }
  // Make all progress possible now. *progressed tells whether anything moved.
  Status progress(bool* progressed) {
    if (done_) return Status::ok();
    if (flatRun_) return progressFlat(progressed);
    return progressGeneral(progressed);
  }
  bool done() const { return done_; }
  // Peers this executor still waits on (for liveness checks). The list is
  // rebuilt in a member on each call (no allocation in the wait loop) and
  // stays valid until the next call.
  const std::vector<int>& activePeers() const;
  const Schedule& schedule() const { return schedule_; }
  // Every connection of this run notes the sockets it waits on
  // (Connection::waitsOnFds): its wait may block on them.
  bool waitsOnFds() const { return waitsOnFds_; }

 private:
  // Descriptor state of one peer for the current run.
  struct PeerCheck {
    uint64_t sendBytes = 0, recvBytes = 0;  // what the schedule moves (fixed)
    bool sendPending = false;               // our descriptor still has to go out
    bool recvPending = false;               // the peer's descriptor has not arrived yet
    OpDescriptor out, expect;
  };

  struct LaneState {
    size_t step = 0;
    size_t sendOff = 0;  // bytes of the current step sent / processed
    size_t recvOff = 0;  // bytes of the current step received (send+recv steps)
    RecvPiece piece;     // current incoming piece, if any
    size_t consumed = 0; // bytes of `piece` already used
    bool arrived = false; // kBarrier: this rank has arrived
  };

  Status progressGeneral(bool* progressed);
  Status runPrologue();
  Status resolve(ConnectionSource& source);
  void armChecks(ConnectionSource& source, const OpInfo& info);
  // Send side: where payload goes in `slot` (after our descriptor when it
  // is still due) and how much fits; commitSlot sends payload + descriptor.
  char* payload(int peer, const SendSlot& slot, size_t* capacity);
  Status commitSlot(int peer, Connection* c, size_t payloadBytes);
  bool mayRef(int peer) const { return !check_[peer].sendPending; }
  bool forwardsRef(const LaneState& st, int peer, Connection* c, size_t k);
  // Whether k bytes at src are large enough to go by reference; with
  // mappedOnly (Step::mappedRefOnly) only if the peer maps them.
  bool refSized(const void* src, size_t k, bool mappedOnly) const;
  void endRun() { refChoice_.endRun(slotWrites_.endRun()); }
  // The peer has taken every piece we sent it (RefChoice::waitsForPeers).
  bool tookAll(int peer) const;
  // Receive side: verify and skip the peer's descriptor in a new piece.
  Status takeDescriptor(LaneState& st, int peer);
  Status advanceLane(size_t lane, bool* progressed, bool sendsOnly = false);
  Status runStep(LaneState& st, const Step& s, bool* progressed, bool* stepDone);
  Status doCopy(const Step& s);
  void doLocalReduce(const Step& s);
  Status doSend(LaneState& st, const Step& s, bool* progressed);
  Status doRecv(LaneState& st, const Step& s, bool* progressed);
  Status doReduceStep(LaneState& st, const Step& s, bool* progressed);
  Status doCopySend(LaneState& st, const Step& s, bool* progressed);
  Result<bool> doBarrier(LaneState& st);
  // The flat path (executor_flat.cc). Its program: every step with its
  // connections and operation-check entries looked up once (resolve), lane
  // after lane; lane i's steps are flatOps_[flatLane_[i], flatLane_[i+1]).
  struct FlatOp {
    const Step* step;
    Connection* send;      // null: the step sends nothing
    Connection* recv;      // null: the step receives nothing
    PeerCheck* sendCheck;  // check_ entries of the two peers
    PeerCheck* recvCheck;
  };
  bool flatSchedule() const;
  void prepareFlat();
  Status progressFlat(bool* progressed);
  // Defined (and only used) in executor_flat.cc, inlined into one pass.
  inline Status flatPass(bool sendsOnly, bool* progressed);
  inline Status flatStep(LaneState& st, const FlatOp& op, bool* stepDone);
  inline Status flatSend(const FlatOp& op, bool* stepDone);
  inline Status flatRecv(LaneState& st, const FlatOp& op, bool* stepDone);
  inline Status flatTake(LaneState& st, const FlatOp& op);
  inline Status flatSlot(const FlatOp& op, char** out);

  // Make st.piece hold an arrived piece; false if none yet.
  Result<bool> havePiece(LaneState& st, int peer, size_t stepRemaining);
  Status pieceFits(const LaneState& st, const Connection* c, size_t stepRemaining) const;
  Status consume(LaneState& st, Connection* c, size_t bytes);
  // Incoming bytes [consumed, consumed+k) of the current piece, as a pointer
  // (reading a referenced piece into `scratch` when needed).
  Result<const char*> pieceData(LaneState& st, Connection* c, size_t k, char* scratch);
  size_t floorElems(size_t bytes) const { return bytes - bytes % elemSize_; }
  size_t elems(size_t bytes) const { return bytes / elemSize_; }
  char* ptr(const Region& r) const {
    char* b = r.peer >= 0 ? peerMem_->base(r.peer, r.buf) : static_cast<char*>(buffers_[r.buf]);
    return b + r.offset;
  }
  bool scales(const Step& s) const { return s.scaleSrc && reduce_.premul; }
  bool divides(const Step& s) const { return s.finalValue && reduce_.divisor > 1; }
  void reduceInto(void* dst, void* dst2, const void* in, const void* local, size_t bytes, bool scale);
  // Large pieces into `slot` go past the cache this run (slot_writes.h)?
  bool pastCache(const SendSlot& slot, size_t k) {
    return slot.streamFrom > 0 && k >= slot.streamFrom && slotWrites_.pastCache();
  }
  void reduceToSlot(char* slot, char* dst, const char* in, const char* local, size_t bytes,
                    bool scale);

  Schedule schedule_;
  std::vector<void*> buffers_;
  size_t elemSize_;
  ReduceSpec reduce_;
  ExecOptions opt_;
  std::vector<LaneState> lanes_;
  std::vector<Connection*> conns_;   // indexed by peer rank (nullptr: unused)
  std::vector<Connection*> pushConns_;  // the distinct ones to poll (Connection::needsPush)
  bool waitsOnFds_ = false;
  std::vector<PeerCheck> check_;     // indexed by peer rank
  std::vector<int> checkPeers_;      // peers this schedule moves bytes with
  OpInfo lastInfo_;                  // the call the descriptors were built for
  bool armed_ = false;
  std::set<Connection*> refConns_;   // connections we sent references on
  mutable std::vector<int> active_;  // activePeers()' result
  std::vector<char> temp_;
  std::vector<char> scratch_;        // Schedule::scratchBytes
  PeerMemory* peerMem_ = nullptr;    // bindPeers()
  bool needsPeers_ = false;          // the schedule has peer regions or barriers
  int self_ = -1;                    // this rank (for messages)
  size_t lanesDone_ = 0;
  SlotWrites slotWrites_;  // how large pieces go into shared slots
  RefChoice refChoice_;    // whether large pieces go by reference at all
  bool waitPeers_ = false;  // this run ends once the peers took every piece
  size_t sendBytes_ = 0;   // what a run sends (all lanes)
  bool done_ = false;
  bool resolved_ = false;
  uint64_t binds_ = 0;    // binds()
  bool flat_ = false;     // every step is small (flatSchedule)
  std::vector<FlatOp> flatOps_;      // prepareFlat
  std::vector<uint32_t> flatLane_;
  // The lanes in the order a pass visits them; with flatOnePass_ (every lane
  // only sends or only receives, as a Send/Recv batch's) the sending lanes
  // first, and one pass does what a pass of sends and a pass of all do.
  std::vector<uint32_t> flatOrder_;
  bool flatOnePass_ = false;
  bool flatRun_ = false;  // this run is on the flat path
  IoGate* gate_ = nullptr;        // setGate
  bool prologuePending_ = false;  // a gated prologue waits for its input
};

}  // namespace ferry
