// The executor's side of the operation check (op_check.h): descriptors
// armed per operation, written ahead of the first piece sent to each peer
// and verified on the first piece received from each peer.
#include <cstring>

#include "exec/executor.h"

namespace ferry {

// Runs once per operation, so it only stamps the sequence numbers into
// descriptors built when the call's arguments last changed (a cached
// executor usually runs the same call again).
void Executor::armChecks(ConnectionSource& source, const OpInfo& info) {
  self_ = info.self;
  if (!armed_ || info.kind != lastInfo_.kind || info.count != lastInfo_.count ||
      info.root != lastInfo_.root || info.dtype != lastInfo_.dtype || info.op != lastInfo_.op) {
    for (int peer : checkPeers_) {
      PeerCheck& pc = check_[peer];
      if (pc.sendBytes > 0) pc.out = makeDescriptor(info, 0, pc.sendBytes);
      if (pc.recvBytes > 0) pc.expect = makeDescriptor(info, 0, pc.recvBytes);
    }
    lastInfo_ = info;
    armed_ = true;
  }
  for (int peer : checkPeers_) {
    PeerCheck& pc = check_[peer];
    if (pc.sendBytes > 0) {
      pc.out.pairSeq = source.nextPairSeq(peer, true);
      pc.out.collSeq = static_cast<uint32_t>(info.collSeq);
      pc.sendPending = true;
    }
    if (pc.recvBytes > 0) {
      pc.expect.pairSeq = source.nextPairSeq(peer, false);
      pc.expect.collSeq = static_cast<uint32_t>(info.collSeq);
      pc.recvPending = true;
    }
  }
}

Status Executor::takeDescriptor(LaneState& st, int peer) {
  PeerCheck& pc = check_[peer];
  const RecvPiece& p = st.piece;
  // The descriptor has no padding: equal bytes mean the same operation.
  bool match = !p.isRef && p.size >= sizeof(OpDescriptor) &&
               std::memcmp(p.data, &pc.expect, sizeof(OpDescriptor)) == 0;
  if (!match)
    FERRY_TRY(checkDescriptor(p.isRef ? nullptr : p.data, p.isRef ? 0 : p.size, pc.expect, self_,
                              peer));
  pc.recvPending = false;
  st.consumed = sizeof(OpDescriptor);
  return Status::ok();
}

}  // namespace ferry
