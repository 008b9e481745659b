// The steps that receive a piece and pass it on, reduced (RecvReduceSend,
// RecvReduceCopy, RecvReduceCopySend) or as it came (RecvCopySend): the
// inner loop of rings and trees, where one pass over the incoming piece
// writes both the output and the next rank's slot.
#include <algorithm>
#include <cstring>

#include "exec/executor.h"
#include "kernels/reduce.h"
#include "kernels/stream_copy.h"

namespace ferry {
namespace {

constexpr size_t kBlock = 8192;  // a multiple of every element size

// dst = dst2 = src in one pass over src: block by block, so the second copy
// reads what the first just wrote from L1 instead of the whole piece again
// from farther away (src is a FIFO slot another core wrote). dst2 (a send
// slot) may be null.
void copyTwice(char* dst, char* dst2, bool pastCache, const char* src, size_t bytes) {
  if (!dst2) {
    if (dst != src) std::memcpy(dst, src, bytes);
    return;
  }
  for (size_t off = 0; off < bytes; off += kBlock) {
    size_t n = std::min(kBlock, bytes - off);
    std::memcpy(dst + off, src + off, n);
    kernels::copyOut(pastCache, dst2 + off, dst + off, n);
  }
}

}  // namespace

void Executor::reduceInto(void* dst, void* dst2, const void* in, const void* local, size_t bytes,
                          bool scale) {
  size_t n = elems(bytes);
  if (scale) {
    kernels::reduceScaled(dst, dst2, in, local, n, reduce_.dtype, reduce_.scalar);
  } else {
    kernels::reduce2(dst, dst2, in, local, n, reduce_.dtype, reduce_.op);
  }
}

// slot = in OP local (and dst, unless null), block by block: the reduction's
// stores go to this core's memory, and each block into the slot past the
// cache (SlotWrites chose that way for this run).
void Executor::reduceToSlot(char* slot, char* dst, const char* in, const char* local, size_t bytes,
                            bool scale) {
  alignas(64) char block[kBlock];
  for (size_t off = 0; off < bytes; off += kBlock) {
    size_t n = std::min(kBlock, bytes - off);
    char* out = dst ? dst + off : block;
    reduceInto(out, nullptr, in + off, local + off, n, scale);
    kernels::copyPastCache(slot + off, out, n);
  }
}

// Forward k bytes of the current piece as a reference to our copy of it?
// Only when the piece itself came as a reference. A piece that came through
// a FIFO slot goes on through the next one: we read the slot anyway, writing
// a second copy in the same pass is cheaper than the next rank's
// cross-memory read (a syscall plus pinning every page; 4 ranks on 2 cores:
// ring AllReduce 1-4 MiB ~10% and 8-32 MiB ~20% faster by value).
bool Executor::forwardsRef(const LaneState& st, int peer, Connection* c, size_t k) {
  return st.piece.isRef && opt_.allowRefs && k >= opt_.mappedRefThreshold && c->supportsRef() &&
         mayRef(peer);
}

// RecvReduceSend, RecvReduceCopy and RecvReduceCopySend: out = in OP local.
// RecvReduceCopySend forwards its result as a reference to dst when the
// piece came as one (forwardsRef), so the next rank copies it straight into
// its output; otherwise the reduction writes dst and the slot in one pass.
Status Executor::doReduceStep(LaneState& st, const Step& s, bool* progressed) {
  Connection* rc = conns_[s.recvPeer];
  Connection* sc = s.sendPeer >= 0 ? conns_[s.sendPeer] : nullptr;
  bool copies = s.kind != StepKind::kRecvReduceSend;
  while (st.sendOff < s.bytes) {
    FERRY_ASSIGN(bool have, havePiece(st, s.recvPeer, s.bytes - st.sendOff));
    if (!have) return Status::ok();
    SendSlot slot;
    if (sc) {
      FERRY_TRY(sc->trySend(&slot));
      if (!slot.data) return Status::ok();
    }
    size_t k = st.piece.size - st.consumed;
    if (st.piece.isRef) {
      if (temp_.empty()) temp_.resize(opt_.tempBytes);
      k = std::min(k, floorElems(temp_.size()));
    }
    // Forward by value what arrived by value (forwardsRef).
    bool byRef = sc && copies && forwardsRef(st, s.sendPeer, sc, k);
    char* sdata = nullptr;
    if (sc && !byRef) {
      size_t cap = 0;
      sdata = payload(s.sendPeer, slot, &cap);
      k = std::min(k, floorElems(cap));
    }
    FERRY_ASSIGN(const char* in, pieceData(st, rc, k, temp_.data()));
    const char* local = ptr(s.src) + st.sendOff;
    char* out = copies ? ptr(s.dst) + st.sendOff : sdata;
    bool past = sc && !byRef && pastCache(slot, k);
    if (past && !divides(s)) {
      reduceToSlot(sdata, copies ? out : nullptr, in, local, k, scales(s));
    } else {
      bool fused = sc && copies && !byRef && !divides(s);  // write dst and the slot in one pass
      reduceInto(out, fused ? sdata : nullptr, in, local, k, scales(s));
      if (divides(s)) kernels::divide(out, out, elems(k), reduce_.dtype, reduce_.divisor);
      if (copies && sc && !byRef && !fused) kernels::copyOut(past, sdata, out, k);
    }
    FERRY_TRY(consume(st, rc, k));
    if (byRef) {
      bool accepted = false;
      FERRY_TRY(sc->sendRef(out, k, &accepted));
      if (!accepted) return internalError("send slot vanished while forwarding");
      refConns_.insert(sc);
    } else if (sc) {
      FERRY_TRY(commitSlot(s.sendPeer, sc, k));
    }
    st.sendOff += k;
    *progressed = true;
  }
  return Status::ok();
}

// RecvCopySend: dst = in; forward it (as a reference to dst when the piece
// came as one, see forwardsRef).
Status Executor::doCopySend(LaneState& st, const Step& s, bool* progressed) {
  Connection* rc = conns_[s.recvPeer];
  Connection* sc = conns_[s.sendPeer];
  while (st.sendOff < s.bytes) {
    FERRY_ASSIGN(bool have, havePiece(st, s.recvPeer, s.bytes - st.sendOff));
    if (!have) return Status::ok();
    SendSlot slot;
    FERRY_TRY(sc->trySend(&slot));
    if (!slot.data) return Status::ok();
    size_t k = st.piece.size - st.consumed;
    if (st.piece.isRef) k = std::min(k, floorElems(opt_.refChunk));
    bool byRef = forwardsRef(st, s.sendPeer, sc, k);
    char* sdata = nullptr;
    if (!byRef) {
      size_t cap = 0;
      sdata = payload(s.sendPeer, slot, &cap);
      k = std::min(k, floorElems(cap));
    }
    char* dst = ptr(s.dst) + st.sendOff;
    FERRY_ASSIGN(const char* in, pieceData(st, rc, k, dst));
    if (byRef) {
      if (in != dst) std::memcpy(dst, in, k);
      bool accepted = false;
      FERRY_TRY(sc->sendRef(dst, k, &accepted));
      if (!accepted) return internalError("send slot vanished while forwarding");
      refConns_.insert(sc);
    } else {
      bool past = pastCache(slot, k);
      copyTwice(dst, in != dst ? sdata : nullptr, past, in, k);
      if (in == dst) kernels::copyOut(past, sdata, dst, k);
      FERRY_TRY(commitSlot(s.sendPeer, sc, k));
    }
    FERRY_TRY(consume(st, rc, k));
    st.sendOff += k;
    *progressed = true;
  }
  return Status::ok();
}

}  // namespace ferry
