// The executor's flat path (executor.h, "Small schedules"): a schedule whose
// steps are all small runs each step as one piece, without the general
// path's piece loop, references, cache-bypass choice and send-only pass.
// Small operations are latency-bound and spread over many layers (perf/
// README.md, "Where a Send/Recv's instructions go"); this removes the
// executor's share of them. Both paths keep the same lane state, so a piece
// the flat path does not expect (a reference, a step split over several
// pieces, a slot smaller than the step) hands the run to the general path
// where it stands.
#include <cstring>

#include "exec/executor.h"

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

Status Executor::progressFlat(bool* progressed) {
  // Sends first, as on the general path: a peer waiting for our piece
  // should not wait through our receives.
  for (int sendsOnly = lanes_.size() > 1; sendsOnly >= 0 && flatRun_; --sendsOnly) {
    for (size_t i = 0; i < lanes_.size() && flatRun_; ++i) {
      LaneState& st = lanes_[i];
      const std::vector<Step>& steps = schedule_.lanes[i].steps;
      while (st.step < steps.size() && (!sendsOnly || steps[st.step].kind == StepKind::kSend)) {
        bool stepDone = false;
        FERRY_TRY(flatStep(st, steps[st.step], &stepDone));
        if (!stepDone) break;
        st.step++;
        *progressed = true;
        if (st.step == steps.size()) lanesDone_++;
      }
    }
  }
  if (!flatRun_) return progress(progressed);  // the general path takes over
  for (Connection* c : pushConns_) FERRY_TRY(c->progress());
  if (lanesDone_ < lanes_.size()) return Status::ok();
  for (Connection* c : pushConns_)
    if (!c->sendsFlushed()) return Status::ok();
  done_ = true;
  slotWrites_.endRun();
  *progressed = true;
  return Status::ok();
}

// A slot for the whole step, *out at the payload (after our descriptor when
// it is due); *out null when the connection has no room yet, *fits false
// when the slot cannot take the step in one piece.
Status Executor::flatSlot(int peer, size_t bytes, char** out, bool* fits) {
  SendSlot slot;
  slot.hint = bytes + (check_[peer].sendPending ? sizeof(OpDescriptor) : 0);
  *out = nullptr;
  *fits = true;
  FERRY_TRY(conns_[peer]->trySend(&slot));
  if (!slot.data) return Status::ok();
  size_t cap = 0;
  *out = payload(peer, slot, &cap);
  *fits = cap >= bytes;
  return Status::ok();
}

Status Executor::flatStep(LaneState& st, const Step& s, bool* stepDone) {
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
      return flatSend(s, stepDone);
    default:
      return flatRecv(st, s, stepDone);
  }
}

Status Executor::flatSend(const Step& s, bool* stepDone) {
  char* out = nullptr;
  bool fits = true;
  FERRY_TRY(flatSlot(s.sendPeer, s.bytes, &out, &fits));
  if (!out) return Status::ok();  // no room yet
  if (!fits) {
    flatRun_ = false;
    return Status::ok();
  }
  const char* src = ptr(s.src);
  std::memcpy(out, src, s.bytes);
  FERRY_TRY(commitSlot(s.sendPeer, conns_[s.sendPeer], s.bytes));
  if (s.alsoCopy && ptr(s.dst) != src) std::memcpy(ptr(s.dst), src, s.bytes);
  *stepDone = true;
  return Status::ok();
}

// Every receiving kind: the whole step's bytes from one piece, then the
// step's copy, reduction and forward.
Status Executor::flatRecv(LaneState& st, const Step& s, bool* stepDone) {
  Connection* rc = conns_[s.recvPeer];
  FERRY_ASSIGN(bool have, havePiece(st, s.recvPeer, s.bytes));
  if (!have) return Status::ok();
  if (st.piece.isRef || st.piece.size - st.consumed != s.bytes) {
    flatRun_ = false;
    return Status::ok();
  }
  const char* in = static_cast<const char*>(st.piece.data) + st.consumed;
  char* sdata = nullptr;
  if (s.sendPeer >= 0) {
    bool fits = true;
    FERRY_TRY(flatSlot(s.sendPeer, s.bytes, &sdata, &fits));
    if (!sdata) return Status::ok();  // no room yet; the piece waits in st
    if (!fits) {
      flatRun_ = false;
      return Status::ok();
    }
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
  FERRY_TRY(consume(st, rc, s.bytes));
  if (sdata) FERRY_TRY(commitSlot(s.sendPeer, conns_[s.sendPeer], s.bytes));
  *stepDone = true;
  return Status::ok();
}

}  // namespace ferry
