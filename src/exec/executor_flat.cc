// The executor's flat path (executor.h, "Small schedules"): a schedule whose
// steps are all small runs each step as one piece, without the general
// path's piece loop, references, cache-bypass choice and send-only pass.
// Small operations are latency-bound and spread over many layers (perf/
// README.md, "Where a Send/Recv's instructions go"); this removes the
// executor's share of them. Both paths keep the same lane state, so a piece
// the flat path does not expect (a reference, a step split over several
// pieces, a slot smaller than the step) hands the run to the general path
// where it stands.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "exec/executor.h"

// The per-step functions inline into flatPass: a Status returned by a call
// goes through memory (it has a destructor), and a flat step's work is
// small enough that those round trips showed in its instruction count.
#define FERRY_FLAT_INLINE [[gnu::always_inline]] inline

namespace ferry {

bool Executor::flatSchedule() const {
  if (!opt_.flat) return false;
  // A transport or setting that would send small pieces by reference keeps
  // the general path, so both paths put the same pieces on the wire.
  if (opt_.refThreshold <= kFlatStepBytes || opt_.mappedRefThreshold <= kFlatStepBytes) return false;
  auto fits = [](const Step& s) {
    return s.kind != StepKind::kBarrier && s.bytes <= kFlatStepBytes &&
           s.src.peer < 0 && s.dst.peer < 0;
  };
  for (const Step& s : schedule_.prologue)
    if (!fits(s)) return false;
  for (const Lane& l : schedule_.lanes)
    for (const Step& s : l.steps)
      if (!fits(s)) return false;
  return true;
}

void Executor::prepareFlat() {
  flatOps_.clear();
  flatLane_.assign(1, 0);
  for (const Lane& l : schedule_.lanes) {
    for (const Step& s : l.steps) {
      FlatOp op{&s, nullptr, nullptr, nullptr, nullptr};
      if (s.sendPeer >= 0) op.send = conns_[s.sendPeer], op.sendCheck = &check_[s.sendPeer];
      if (s.recvPeer >= 0) op.recv = conns_[s.recvPeer], op.recvCheck = &check_[s.recvPeer];
      flatOps_.push_back(op);
    }
    flatLane_.push_back(static_cast<uint32_t>(flatOps_.size()));
  }
  // One pass when every lane only sends or only receives (a Send/Recv
  // batch), the sending lanes first; otherwise a pass of sends, then one of
  // everything, in lane order (a single lane needs one pass either way).
  auto count = [&](uint32_t i) {
    const std::vector<Step>& steps = schedule_.lanes[i].steps;
    size_t n = std::count_if(steps.begin(), steps.end(),
                             [](const Step& s) { return s.kind == StepKind::kSend; });
    return std::pair<size_t, size_t>{n, steps.size()};
  };
  auto pure = [&](uint32_t i) { auto [n, all] = count(i); return n == 0 || n == all; };
  auto sending = [&](uint32_t i) { auto [n, all] = count(i); return n > 0 && n == all; };
  flatOrder_.resize(schedule_.lanes.size());
  std::iota(flatOrder_.begin(), flatOrder_.end(), 0u);
  bool allPure = std::all_of(flatOrder_.begin(), flatOrder_.end(), pure);
  flatOnePass_ = allPure || flatOrder_.size() <= 1;
  if (allPure) std::stable_partition(flatOrder_.begin(), flatOrder_.end(), sending);
}

// A slot for the whole step, *out at the payload (after our descriptor when
// it is due); *out null when the connection has no room yet. A slot that
// cannot take the step in one piece hands the run to the general path.
FERRY_FLAT_INLINE Status Executor::flatSlot(const FlatOp& op, char** out) {
  const size_t desc = op.sendCheck->sendPending ? sizeof(OpDescriptor) : 0;
  SendSlot slot;
  slot.hint = op.step->bytes + desc;
  *out = nullptr;
  FERRY_TRY(op.send->trySend(&slot));
  if (!slot.data) return Status::ok();
  if (slot.capacity < slot.hint) {
    flatRun_ = false;
    return Status::ok();
  }
  char* data = static_cast<char*>(slot.data);
  if (desc) std::memcpy(data, &op.sendCheck->out, sizeof(OpDescriptor));
  *out = data + desc;
  return Status::ok();
}

FERRY_FLAT_INLINE Status Executor::flatStep(LaneState& st, const FlatOp& op, bool* stepDone) {
  const Step& s = *op.step;
  if (s.bytes == 0) {  // as on the general path: nothing moves, not even a descriptor
    *stepDone = true;
    return Status::ok();
  }
  switch (s.kind) {
    case StepKind::kCopy:
      FERRY_TRY(doCopy(s));
      *stepDone = true;
      return Status::ok();
    case StepKind::kLocalReduce:
      doLocalReduce(s);
      *stepDone = true;
      return Status::ok();
    case StepKind::kSend:
      return flatSend(op, stepDone);
    default:
      return flatRecv(st, op, stepDone);
  }
}

FERRY_FLAT_INLINE Status Executor::flatSend(const FlatOp& op, bool* stepDone) {
  const Step& s = *op.step;
  char* out = nullptr;
  FERRY_TRY(flatSlot(op, &out));
  if (!out) return Status::ok();  // no room yet, or the general path takes over
  const char* src = ptr(s.src);
  std::memcpy(out, src, s.bytes);
  FERRY_TRY(commitSlot(s.sendPeer, op.send, s.bytes));
  if (s.alsoCopy && ptr(s.dst) != src) std::memcpy(ptr(s.dst), src, s.bytes);
  *stepDone = true;
  return Status::ok();
}

// Takes the next piece from the step's peer into st, with the peer's
// descriptor checked and skipped when it is due (havePiece's work for the
// one piece a flat step expects). A piece that is not the whole step (a
// reference, a split step, the descriptor alone) hands the run to the
// general path, which goes on from st.
FERRY_FLAT_INLINE Status Executor::flatTake(LaneState& st, const FlatOp& op) {
  FERRY_TRY(op.recv->tryRecv(&st.piece));
  if (!st.piece.ready) return Status::ok();
  st.consumed = 0;
  PeerCheck& pc = *op.recvCheck;
  if (pc.recvPending) {
    // The descriptor has no padding: equal bytes mean the same operation.
    if (!st.piece.isRef && st.piece.size >= sizeof(OpDescriptor) &&
        std::memcmp(st.piece.data, &pc.expect, sizeof(OpDescriptor)) == 0) {
      pc.recvPending = false;
      st.consumed = sizeof(OpDescriptor);
    } else {
      FERRY_TRY(takeDescriptor(st, op.step->recvPeer));  // fails, naming both sides
    }
  }
  if (!st.piece.isRef && st.piece.size - st.consumed == op.step->bytes) return Status::ok();
  if (st.consumed == st.piece.size) {  // the descriptor alone: the next piece is the general path's
    st.piece = RecvPiece{};
    st.consumed = 0;
    FERRY_TRY(op.recv->releaseRecv());
  } else {
    FERRY_TRY(pieceFits(st, op.recv, op.step->bytes));  // as havePiece checks a new piece
  }
  flatRun_ = false;
  return Status::ok();
}

// Every receiving kind: the whole step's bytes from one piece, then the
// step's copy, reduction and forward.
FERRY_FLAT_INLINE Status Executor::flatRecv(LaneState& st, const FlatOp& op, bool* stepDone) {
  if (!st.piece.ready) {
    FERRY_TRY(flatTake(st, op));
    if (!st.piece.ready || !flatRun_) return Status::ok();
  }
  const Step& s = *op.step;
  const char* in = static_cast<const char*>(st.piece.data) + st.consumed;
  char* sdata = nullptr;
  if (op.send) {
    FERRY_TRY(flatSlot(op, &sdata));
    if (!sdata) return Status::ok();  // no room yet (the piece waits in st), or handed over
  }
  char* dst = s.kind == StepKind::kRecvReduceSend ? sdata : ptr(s.dst);
  if (s.kind == StepKind::kRecv || s.kind == StepKind::kRecvCopySend) {
    std::memcpy(dst, in, s.bytes);
    if (sdata) std::memcpy(sdata, in, s.bytes);
  } else {  // the three reductions: dst (and the slot) = in OP src
    bool both = s.kind == StepKind::kRecvReduceCopySend;
    reduceInto(dst, both && !divides(s) ? sdata : nullptr, in, ptr(s.src), s.bytes, false);
    if (divides(s)) {
      kernels::divide(dst, dst, elems(s.bytes), reduce_.dtype, reduce_.divisor);
      if (both) std::memcpy(sdata, dst, s.bytes);
    }
  }
  st.piece = RecvPiece{};
  st.consumed = 0;
  FERRY_TRY(op.recv->releaseRecv());
  if (sdata) FERRY_TRY(commitSlot(s.sendPeer, op.send, s.bytes));
  *stepDone = true;
  return Status::ok();
}

FERRY_FLAT_INLINE Status Executor::flatPass(bool sendsOnly, bool* progressed) {
  const FlatOp* ops = flatOps_.data();
  for (uint32_t i : flatOrder_) {
    LaneState& st = lanes_[i];
    const size_t end = flatLane_[i + 1];
    for (size_t k = flatLane_[i] + st.step; k < end; ++k) {
      if (sendsOnly && ops[k].step->kind != StepKind::kSend) break;
      bool stepDone = false;
      FERRY_TRY(flatStep(st, ops[k], &stepDone));
      if (!flatRun_) return Status::ok();
      if (!stepDone) break;
      st.step++;
      *progressed = true;
      if (k + 1 == end) lanesDone_++;
    }
  }
  return Status::ok();
}

Status Executor::progressFlat(bool* progressed) {
  // Sends first, as on the general path: a peer waiting for our piece
  // should not wait through our receives.
  if (!flatOnePass_) FERRY_TRY(flatPass(true, progressed));
  if (flatRun_) FERRY_TRY(flatPass(false, progressed));
  if (!flatRun_) return progressGeneral(progressed);  // the general path takes over
  for (Connection* c : pushConns_) FERRY_TRY(c->progress());
  if (lanesDone_ < lanes_.size()) return Status::ok();
  for (Connection* c : pushConns_)
    if (!c->sendsFlushed()) return Status::ok();
  done_ = true;
  endRun();
  *progressed = true;
  return Status::ok();
}

}  // namespace ferry
