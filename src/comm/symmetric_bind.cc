#include "comm/symmetric_bind.h"

namespace ferry {
namespace {

// Bytes of the input and output buffers a collective touches on this rank.
void extents(const CollArgs& a, size_t* in, size_t* out) {
  size_t block = a.count * a.elemSize;
  size_t all = block * static_cast<size_t>(a.nranks);
  *in = *out = block;
  if (a.kind == CollKind::kReduceScatter || a.kind == CollKind::kAllToAll) *in = all;
  if (a.kind == CollKind::kAllGather || a.kind == CollKind::kAllToAll) *out = all;
}

bool symmetricKind(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: case CollKind::kReduceScatter: case CollKind::kAllGather:
    case CollKind::kBroadcast: case CollKind::kReduce: case CollKind::kAllToAll:
      return true;
    default:
      return false;
  }
}

}  // namespace

Result<mem::Window*> Comm::registerWindow(void* buff, size_t bytes, int flags) {
  FERRY_TRY(usable());
  return windows_.add(exchange_, rank_, peers_, buff, bytes, flags);
}

// Which buffers peers touch: AllReduce reads inputs and outputs,
// ReduceScatter, AllGather and Reduce inputs, Broadcast the root's output,
// AlltoAll writes outputs; the rest stays local and need not be in a window. In place, AllGather's input is
// block `rank` of the output, so rank p's input sits p blocks further into
// the window: the binding gets that stride and the descriptor the offset
// of block 0, which is equal on every rank.
std::unique_ptr<mem::WindowBinding> bindWindows(Comm* c, const CollTask& t, const OpInfo& info) {
  const CollArgs& a = t.args;
  mem::NodeSync* sync = c->windows().sync();
  if (!sync || t.reduce.premul || !symmetricKind(a.kind) || a.count == 0 || a.nranks < 2)
    return nullptr;
  size_t inBytes = 0, outBytes = 0, inOff = 0, outOff = 0;
  extents(a, &inBytes, &outBytes);
  bool needIn = a.kind != CollKind::kBroadcast && a.kind != CollKind::kAllToAll;
  bool needOut = a.kind == CollKind::kAllReduce || a.kind == CollKind::kBroadcast || a.kind == CollKind::kAllToAll;
  const mem::Window* in = nullptr;
  const mem::Window* out = nullptr;
  if (needIn && (!(in = c->windows().find(t.sendbuff, inBytes, &inOff)) || !in->shared)) return nullptr;
  if (needOut && (!(out = c->windows().find(t.recvbuff, outBytes, &outOff)) || !out->shared)) return nullptr;
  size_t inStride = a.kind == CollKind::kAllGather && a.inPlace ? a.count * a.elemSize : 0;
  inOff -= static_cast<size_t>(a.rank) * inStride;
  mem::SymDescriptor d;
  d.collSeq = info.collSeq;
  d.count = a.count;
  d.kind = static_cast<uint8_t>(a.kind);
  d.dtype = info.dtype;
  d.op = info.op;
  d.root = info.root;
  d.inPlace = inStride > 0;  // elsewhere in place changes nothing peers see
  if (in) {
    d.inWindow = in->id;
    d.inOffset = inOff;
  }
  if (out) {
    d.outWindow = out->id;
    d.outOffset = outOff;
  }
  return std::make_unique<mem::WindowBinding>(sync, mem::PeerArea{in, inOff, inStride},
                                              mem::PeerArea{out, outOff, 0}, d, c->rank());
}

}  // namespace ferry
