#include "exec/executor.h"

#include <algorithm>
#include <cstring>

#include "core/log.h"
#include "core/readiness.h"
#include "kernels/stream_copy.h"
#include "mem/shared_alloc.h"

namespace ferry {

Executor::Executor(Schedule schedule, std::vector<void*> buffers, size_t elemSize,
                   ReduceSpec reduce, ExecOptions options)
    : schedule_(std::move(schedule)), buffers_(std::move(buffers)), elemSize_(elemSize),
      reduce_(reduce), opt_(options), lanes_(schedule_.lanes.size()) {
  slotWrites_.setMode(opt_.slotWrites);
  if (schedule_.scratchBytes > 0) {
    scratch_.resize(schedule_.scratchBytes);
    buffers_.resize(kScratchBuf + 1, nullptr);
    buffers_[kScratchBuf] = scratch_.data();
  }
  // What a run sends and receives, and what of it may go by reference at
  // the threshold (ref_choice.h), in one walk over the steps.
  size_t candidates = 0, received = 0;
  for (const Lane& l : schedule_.lanes)
    for (const Step& s : l.steps) {
      if (s.sendPeer >= 0) sendBytes_ += s.bytes;
      if (s.recvPeer >= 0) received += s.bytes;
      if (s.kind == StepKind::kSend && s.sendPeer >= 0 && !s.sendByValue && !s.mappedRefOnly &&
          s.bytes >= opt_.refThreshold)
        candidates += s.bytes;
    }
  auto peerStep = [](const Step& s) {
    return s.kind == StepKind::kBarrier || s.src.peer >= 0 || s.dst.peer >= 0;
  };
  for (const Lane& l : schedule_.lanes)
    needsPeers_ = needsPeers_ || std::any_of(l.steps.begin(), l.steps.end(), peerStep);
  flat_ = flatSchedule();
  refChoice_.configure(candidates, received, opt_.refAdaptive && opt_.allowRefs,
                       schedule_.algorithm.c_str());
}

void Executor::rebind(void* input, void* output, const ReduceSpec& reduce) {
  buffers_[kInputBuf] = input;
  buffers_[kOutputBuf] = output;
  reduce_ = reduce;
  ++binds_;
}

void Executor::rebindBuffers(const std::vector<void*>& buffers) {
  std::copy(buffers.begin(), buffers.begin() + std::min(buffers.size(), buffers_.size()), buffers_.begin());
  ++binds_;
}

Status Executor::start(ConnectionSource& source, const OpInfo* info) {
  if (needsPeers_ && !peerMem_)
    return internalError(schedule_.algorithm + " schedule needs peer memory and none is bound");
  if (!resolved_) FERRY_TRY(resolve(source));
  for (LaneState& l : lanes_) l = LaneState{};
  // armChecks sets every flag a run uses (a direction without bytes never
  // has one set); unchecked, an aborted run's flags must go.
  if (info) {
    armChecks(source, *info);
  } else {
    for (int peer : checkPeers_) check_[peer].sendPending = check_[peer].recvPending = false;
  }
  lanesDone_ = 0;
  if (!refConns_.empty()) refConns_.clear();
  // The adaptive choices learn from run times; a gated run's time is the
  // stream's, not theirs. Its prologue waits for its input like any step
  // (progressGeneral).
  if (gate_) {
    refChoice_.beginUntimedRun();
    slotWrites_.beginRun(sendBytes_, /*quiet=*/true);
    gate_->plan(schedule_);
  } else {
    slotWrites_.beginRun(sendBytes_, /*quiet=*/refChoice_.beginRun());
  }
  waitPeers_ = refChoice_.waitsForPeers();
  prologuePending_ = gate_ && !gate_->prologueReady();
  if (!prologuePending_) FERRY_TRY(runPrologue());
  done_ = schedule_.lanes.empty() && !prologuePending_;
  flatRun_ = flat_ && !reduce_.premul && !gate_;
  return Status::ok();
}

Status Executor::runPrologue() {
  for (const Step& s : schedule_.prologue) {
    if (s.kind == StepKind::kLocalReduce) {
      doLocalReduce(s);
    } else {
      FERRY_TRY(doCopy(s));
    }
  }
  prologuePending_ = false;
  if (gate_) gate_->prologueDone();
  return Status::ok();
}

Status Executor::resolve(ConnectionSource& source) {
  int maxPeer = -1;
  for (const Lane& l : schedule_.lanes)
    for (const Step& s : l.steps) maxPeer = std::max({maxPeer, s.sendPeer, s.recvPeer});
  conns_.assign(maxPeer + 1, nullptr);
  check_.assign(maxPeer + 1, PeerCheck{});
  for (const Lane& l : schedule_.lanes) {
    for (const Step& s : l.steps) {
      if (s.sendPeer >= 0) check_[s.sendPeer].sendBytes += s.bytes;
      if (s.recvPeer >= 0) check_[s.recvPeer].recvBytes += s.bytes;
      for (int peer : {s.sendPeer, s.recvPeer}) {
        if (peer < 0 || conns_[peer]) continue;
        FERRY_ASSIGN(conns_[peer], source.connection(peer));
      }
    }
  }
  pushConns_.clear();
  bool anyConn = false, allFds = true;
  for (Connection* c : conns_) {
    if (!c) continue;
    anyConn = true;
    allFds = allFds && c->waitsOnFds();
    if (c->needsPush() && std::find(pushConns_.begin(), pushConns_.end(), c) == pushConns_.end())
      pushConns_.push_back(c);
  }
  waitsOnFds_ = anyConn && allFds;
  checkPeers_.clear();
  for (size_t p = 0; p < check_.size(); ++p)
    if (check_[p].sendBytes > 0 || check_[p].recvBytes > 0) checkPeers_.push_back(static_cast<int>(p));
  armed_ = false;
  resolved_ = true;
  if (flat_) prepareFlat();
  return Status::ok();
}

// Send side of the operation check (executor_checks.cc has the rest).
char* Executor::payload(int peer, const SendSlot& slot, size_t* capacity) {
  char* data = static_cast<char*>(slot.data);
  if (!check_[peer].sendPending) {
    *capacity = slot.capacity;
    return data;
  }
  std::memcpy(data, &check_[peer].out, sizeof(OpDescriptor));
  *capacity = slot.capacity - sizeof(OpDescriptor);
  return data + sizeof(OpDescriptor);
}

Status Executor::commitSlot(int peer, Connection* c, size_t payloadBytes) {
  size_t extra = check_[peer].sendPending ? sizeof(OpDescriptor) : 0;
  check_[peer].sendPending = false;
  return c->commitSend(payloadBytes + extra);
}

const std::vector<int>& Executor::activePeers() const {
  std::vector<int>& peers = active_;
  peers.clear();
  for (size_t i = 0; i < lanes_.size(); ++i) {
    const Lane& l = schedule_.lanes[i];
    if (lanes_[i].step >= l.steps.size()) continue;
    const Step& s = l.steps[lanes_[i].step];
    if (s.sendPeer >= 0) peers.push_back(s.sendPeer);
    if (s.recvPeer >= 0) peers.push_back(s.recvPeer);
  }
  for (size_t i = 0; i < lanes_.size(); ++i) {
    const Lane& l = schedule_.lanes[i];
    if (lanes_[i].step < l.steps.size() && l.steps[lanes_[i].step].kind == StepKind::kBarrier)
      peerMem_->waitingOn(&peers);
  }
  for (Connection* c : refConns_) {
    for (size_t p = 0; p < conns_.size(); ++p)
      if (conns_[p] == c) peers.push_back(static_cast<int>(p));
  }
  if (waitPeers_ && lanesDone_ == lanes_.size())
    for (int p : checkPeers_)
      if (!tookAll(p)) peers.push_back(p);
  return peers;
}

bool Executor::tookAll(int peer) const {
  return check_[peer].sendBytes == 0 || conns_[peer]->sendsConsumed();
}

Status Executor::progressGeneral(bool* progressed) {
  if (prologuePending_) {
    if (!gate_->prologueReady()) {
      readiness::noteOther();
      return Status::ok();
    }
    FERRY_TRY(runPrologue());
    *progressed = true;
  }
  // Sends first: posting a piece or a reference is quick, while a receive
  // may copy a whole block (a 1 MiB cross-memory read takes ~80 us), and a
  // peer waiting for our reference idles through it. Lane by lane, two
  // ranks' SendRecv took turns copying: 165 us per 1 MiB op instead of ~90.
  for (size_t i = 0; i < lanes_.size(); ++i) FERRY_TRY(advanceLane(i, progressed, /*sendsOnly=*/true));
  for (size_t i = 0; i < lanes_.size(); ++i) FERRY_TRY(advanceLane(i, progressed));
  for (Connection* c : pushConns_) FERRY_TRY(c->progress());
  // Referenced memory must stay untouched until the peers have read it.
  // Forget drained peers at once: a peer that has read everything may exit,
  // and activePeers() must not report it as one we still wait on.
  for (auto it = refConns_.begin(); it != refConns_.end();)
    it = (*it)->sendsDrained() ? refConns_.erase(it) : std::next(it);
  if (lanesDone_ < lanes_.size() || !refConns_.empty()) return Status::ok();
  if (waitPeers_ && !std::all_of(checkPeers_.begin(), checkPeers_.end(), [this](int p) { return tookAll(p); }))
    return Status::ok();
  for (Connection* c : pushConns_)
    if (!c->sendsFlushed()) return Status::ok();
  done_ = true;
  endRun();
  *progressed = true;
  return Status::ok();
}

Status Executor::advanceLane(size_t lane, bool* progressed, bool sendsOnly) {
  LaneState& st = lanes_[lane];
  const std::vector<Step>& steps = schedule_.lanes[lane].steps;
  while (st.step < steps.size() && (!sendsOnly || steps[st.step].kind == StepKind::kSend)) {
    if (gate_ && !gate_->stepReady(lane, st.step)) {
      readiness::noteOther();  // the stream raises no socket: the wait must not block in poll()
      return Status::ok();
    }
    bool stepDone = false;
    FERRY_TRY(runStep(st, steps[st.step], progressed, &stepDone));
    if (!stepDone) return Status::ok();
    if (gate_) gate_->stepDone(lane, st.step);
    st.step++;
    st.sendOff = st.recvOff = 0;
    st.arrived = false;
    *progressed = true;
    if (st.step == steps.size()) lanesDone_++;
  }
  return Status::ok();
}

Status Executor::runStep(LaneState& st, const Step& s, bool* progressed, bool* stepDone) {
  switch (s.kind) {
    case StepKind::kCopy:
      FERRY_TRY(doCopy(s));
      st.sendOff = s.bytes;
      break;
    case StepKind::kSend:
      FERRY_TRY(doSend(st, s, progressed));
      break;
    case StepKind::kRecv:
      FERRY_TRY(doRecv(st, s, progressed));
      st.sendOff = st.recvOff;
      break;
    case StepKind::kRecvReduceSend:
    case StepKind::kRecvReduceCopy:
    case StepKind::kRecvReduceCopySend:
      FERRY_TRY(doReduceStep(st, s, progressed));
      break;
    case StepKind::kRecvCopySend:
      FERRY_TRY(doCopySend(st, s, progressed));
      break;
    case StepKind::kLocalReduce:
      doLocalReduce(s);
      st.sendOff = s.bytes;
      break;
    case StepKind::kBarrier: {
      FERRY_ASSIGN(*stepDone, doBarrier(st));
      return Status::ok();
    }
  }
  *stepDone = st.sendOff >= s.bytes;
  return Status::ok();
}

Status Executor::doCopy(const Step& s) {
  const char* src = ptr(s.src);
  char* dst = ptr(s.dst);
  size_t n = elems(s.bytes);
  if (scales(s)) {
    kernels::scale(dst, src, n, reduce_.dtype, reduce_.scalar);
    src = dst;
  }
  if (divides(s)) {
    kernels::divide(dst, src, n, reduce_.dtype, reduce_.divisor);
  } else if (src != dst) {
    // A copy larger than its share of the cache goes past it: in the cache
    // it would only evict, and non-temporal stores skip reading the
    // destination first (2-rank windows, 16-64 MiB: AllGather 0.59-0.72 of
    // the time, AlltoAll 0.80-0.85, Gather 0.88-0.92; perf/README.md).
    kernels::copyOut(s.bytes >= opt_.streamCopyBytes, dst, src, s.bytes);
  }
  return Status::ok();
}

// dst = src OP dst, operands in the same positions as a received piece's
// (incoming value first), so folds give identical bits on every rank.
void Executor::doLocalReduce(const Step& s) {
  char* dst = ptr(s.dst);
  const char* src = ptr(s.src);
  size_t n = elems(s.bytes);
  if (scales(s)) {
    kernels::reduceScaled(dst, nullptr, dst, src, n, reduce_.dtype, reduce_.scalar);
  } else {
    kernels::reduce(dst, src, dst, n, reduce_.dtype, reduce_.op);
  }
  if (divides(s)) kernels::divide(dst, dst, n, reduce_.dtype, reduce_.divisor);
}

// A barrier among the ranks sharing peer memory: arrive once, then poll.
Result<bool> Executor::doBarrier(LaneState& st) {
  if (!st.arrived) {
    peerMem_->arrive();
    st.arrived = true;
  }
  return peerMem_->passed();
}

Status Executor::doSend(LaneState& st, const Step& s, bool* progressed) {
  Connection* c = conns_[s.sendPeer];
  while (st.sendOff < s.bytes) {
    size_t rem = s.bytes - st.sendOff;
    const char* src = ptr(s.src) + st.sendOff;
    // refSized last: it may look the address up under a lock.
    bool refable = !scales(s) && !s.sendByValue && opt_.allowRefs && c->supportsRef() &&
                   refSized(src, rem, s.mappedRefOnly);
    if (refable && !mayRef(s.sendPeer)) {
      // The operation's descriptor goes first, alone in a slot, so the data
      // still goes by reference (with the descriptor, a slot's worth of it
      // went by value: two copies instead of one; AlltoAll 1 MiB at 4 ranks
      // copied half its bytes twice).
      SendSlot slot;
      slot.hint = sizeof(OpDescriptor);
      FERRY_TRY(c->trySend(&slot));
      if (!slot.data) return Status::ok();
      size_t cap = 0;
      (void)payload(s.sendPeer, slot, &cap);
      FERRY_TRY(commitSlot(s.sendPeer, c, 0));
      *progressed = true;
    }
    if (refable) {
      bool accepted = false;
      FERRY_TRY(c->sendRef(src, rem, &accepted));
      if (!accepted) return Status::ok();
      refConns_.insert(c);
      if (s.alsoCopy) std::memcpy(ptr(s.dst) + st.sendOff, src, rem);  // while the peer reads
      st.sendOff += rem;
    } else {
      SendSlot slot;
      slot.hint = rem + (check_[s.sendPeer].sendPending ? sizeof(OpDescriptor) : 0);
      FERRY_TRY(c->trySend(&slot));
      if (!slot.data) return Status::ok();
      size_t cap = 0;
      char* dst = payload(s.sendPeer, slot, &cap);
      size_t k = std::min(rem, floorElems(cap));
      if (scales(s)) {
        kernels::scale(dst, src, elems(k), reduce_.dtype, reduce_.scalar);
      } else {
        kernels::copyOut(pastCache(slot, k), dst, src, k);
      }
      FERRY_TRY(commitSlot(s.sendPeer, c, k));
      // Our own copy while the peer reads the slot, from the cache the
      // slot write just filled.
      if (s.alsoCopy) std::memcpy(ptr(s.dst) + st.sendOff, src, k);
      st.sendOff += k;
    }
    *progressed = true;
  }
  return Status::ok();
}

Result<bool> Executor::havePiece(LaneState& st, int peer, size_t stepRemaining) {
  Connection* c = conns_[peer];
  if (!st.piece.ready) {
    FERRY_TRY(c->tryRecv(&st.piece));
    if (!st.piece.ready) return false;
    st.consumed = 0;
    if (check_[peer].recvPending) {
      FERRY_TRY(takeDescriptor(st, peer));
      if (st.consumed == st.piece.size) {
        // The descriptor alone (a reference follows): on to the next piece.
        st.piece = RecvPiece{};
        st.consumed = 0;
        FERRY_TRY(c->releaseRecv());
        FERRY_TRY(c->tryRecv(&st.piece));
        if (!st.piece.ready) return false;
      }
    }
    FERRY_TRY(pieceFits(st, c, stepRemaining));
  }
  return true;
}

// A new piece's bytes (after its descriptor) must be a whole number of
// elements that the step still expects: a peer that runs another operation
// with the same descriptor (Send/Recv sizes listed in another order) or no
// check at all must fail here, not write past the step's buffer.
Status Executor::pieceFits(const LaneState& st, const Connection* c, size_t stepRemaining) const {
  size_t size = st.piece.size - st.consumed;
  if (size > 0 && size <= stepRemaining && size % elemSize_ == 0) return Status::ok();
  return internalError("protocol error: received a piece of " + std::to_string(size) +
                       " bytes with " + std::to_string(stepRemaining) +
                       " bytes left in the step (" + c->describe() + ")");
}

Status Executor::consume(LaneState& st, Connection* c, size_t bytes) {
  st.consumed += bytes;
  if (st.consumed < st.piece.size) return Status::ok();
  st.piece = RecvPiece{};
  st.consumed = 0;
  return c->releaseRecv();
}

Result<const char*> Executor::pieceData(LaneState& st, Connection* c, size_t k, char* scratch) {
  if (!st.piece.isRef) return static_cast<const char*>(st.piece.data) + st.consumed;
  FERRY_TRY(c->readRef(st.piece, st.consumed, scratch, k));
  return static_cast<const char*>(scratch);
}

Status Executor::doRecv(LaneState& st, const Step& s, bool* progressed) {
  Connection* c = conns_[s.recvPeer];
  while (st.recvOff < s.bytes) {
    FERRY_ASSIGN(bool have, havePiece(st, s.recvPeer, s.bytes - st.recvOff));
    if (!have) return Status::ok();
    size_t k = st.piece.size - st.consumed;
    char* dst = ptr(s.dst) + st.recvOff;
    FERRY_ASSIGN(const char* in, pieceData(st, c, k, dst));
    // A step larger than its share of the cache: its output goes past it
    // too, piece by piece (doCopy says why).
    if (in != dst) kernels::copyOut(s.bytes >= opt_.streamCopyBytes, dst, in, k);
    FERRY_TRY(consume(st, c, k));
    st.recvOff += k;
    *progressed = true;
  }
  return Status::ok();
}

// Cross-memory attach reads ~12 GB/s here (a kernel copy plus pinning every
// page), while two copies through the ring run on both cores at once at
// memcpy speed: by value won up to 1-4 MiB for every collective but Gather
// (perf/README.md, "By value up to 4 MiB"). Memory the peer maps is read in
// place, one memcpy: by reference from 64 KiB.
bool Executor::refSized(const void* src, size_t k, bool mappedOnly) const {
  if (k >= opt_.refThreshold && !mappedOnly && refChoice_.atThreshold()) return true;
  mem::SharedRange range;
  return k >= opt_.mappedRefThreshold && mem::lookupShared(src, k, &range);
}

}  // namespace ferry
