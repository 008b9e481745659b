// Symmetric: collectives as loads and stores on every rank's buffers.
//
// When a call's buffers lie in symmetric windows that every rank of one host
// maps (CollArgs::symmetric, src/mem/window.h), no byte has to pass through
// a FIFO: each rank reads its peers' inputs where they are. AllReduce is the
// roofline's own schedule (perf/roofline): rank r sums block r of all inputs
// into its output, then copies every other block from the rank that owns
// it. Three barriers order it: inputs ready, reduced blocks ready, and
// nobody reads my buffers any more (the caller may reuse them on return).
//
// Small AllReduces skip the middle barrier (one-shot): every rank reduces
// the whole vector from all inputs itself, which costs more reduction work
// than a barrier only while the vector is small (the cost decides, below).
// Reduce is the root's one-shot alone.
//
// AlltoAll pushes blocks into peers' outputs: only outputs need be windows,
// so a rank in place (whose input is then its output) or sending from a
// private copy needs nothing of its peers. Gather and Scatter have no
// symmetric form: their in-place buffers sit at each rank's own block
// (nccl-tests, and NCCL's definition of in place), so ranks pass windows
// at different offsets, which no rank can resolve for a peer before the
// call runs.
//
// A block is reduced in pieces of kPiece bytes, pairwise: the piece of the
// output stays in L1 while each peer's piece is folded into it, which costs
// no more than an N-input kernel (measured: 4 processes, 1-4 MiB).
#include <algorithm>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"

namespace ferry {
namespace {

constexpr size_t kPiece = 32 * 1024;
constexpr double kNeverChosen = 1e30;  // us: a cost no other algorithm reaches
constexpr size_t kPushMinBlock = 256 * 1024;  // AlltoAll on host windows, below

Step barrier() {
  Step s;
  s.kind = StepKind::kBarrier;
  return s;
}

Region at(uint32_t buf, size_t offset, int peer = -1) { return Region{buf, offset, peer}; }

// dst[dstOff, +bytes) = OP over every rank k of input k at [inOff, +bytes),
// starting from `first`'s input (whose buffer dst may be, in place).
void reduceBlock(Lane* l, int n, int first, size_t inOff, Region dst, size_t bytes, size_t elem,
                 size_t pieceBytes) {
  size_t piece = std::max(elem, (pieceBytes ? pieceBytes : kPiece) / elem * elem);
  for (size_t off = 0; off < bytes; off += piece) {
    size_t len = std::min(piece, bytes - off);
    Region d{dst.buf, dst.offset + off, dst.peer};
    l->steps.push_back(copyStep(at(kInputBuf, inOff + off, first), d, len));
    for (int i = 1; i < n; ++i) {
      Step s = makeStep(StepKind::kLocalReduce, -1, -1, at(kInputBuf, inOff + off, (first + i) % n), d, len);
      s.finalValue = i == n - 1;
      l->steps.push_back(s);
    }
  }
}

// A peer region of this rank is its own buffer: keep own accesses local.
void localize(Lane* l, int rank) {
  for (Step& s : l->steps) {
    if (s.src.peer == rank) s.src.peer = -1;
    if (s.dst.peer == rank) s.dst.peer = -1;
  }
}

// Every rank sums all inputs into its own output; no block exchange.
Lane allReduceOneShot(const CollArgs& a) {
  Lane l;
  l.steps.push_back(barrier());
  reduceBlock(&l, a.nranks, a.rank, 0, at(kOutputBuf, 0), a.count * a.elemSize, a.elemSize, a.streamPieceBytes);
  return l;
}

Lane allReduce(const CollArgs& a) {
  int n = a.nranks, r = a.rank;
  size_t e = a.elemSize;
  Lane l;
  l.steps.push_back(barrier());
  size_t b0 = blockStart(a.count, n, r, e), b1 = blockStart(a.count, n, r + 1, e);
  reduceBlock(&l, n, r, b0, at(kOutputBuf, b0), b1 - b0, e, a.streamPieceBytes);
  l.steps.push_back(barrier());
  for (int i = 1; i < n; ++i) {
    int p = (r + i) % n;
    size_t p0 = blockStart(a.count, n, p, e), p1 = blockStart(a.count, n, p + 1, e);
    if (p1 > p0) l.steps.push_back(copyStep(at(kOutputBuf, p0, p), at(kOutputBuf, p0), p1 - p0));
  }
  return l;
}

Lane reduceScatter(const CollArgs& a) {
  size_t bytes = a.count * a.elemSize;
  Lane l;
  l.steps.push_back(barrier());
  reduceBlock(&l, a.nranks, a.rank, a.rank * bytes, at(kOutputBuf, 0), bytes, a.elemSize, a.streamPieceBytes);
  return l;
}

// Only inputs are windows (the root's output is significant there alone,
// so no other rank could tell whether it is one): the root reduces every
// input into its output, one-shot; the others meet it at the barriers.
Lane reduce(const CollArgs& a) {
  Lane l;
  l.steps.push_back(barrier());
  if (a.rank == a.root)
    reduceBlock(&l, a.nranks, a.rank, 0, at(kOutputBuf, 0), a.count * a.elemSize, a.elemSize, a.streamPieceBytes);
  return l;
}

Lane allGather(const CollArgs& a) {
  size_t bytes = a.count * a.elemSize;
  Lane l;
  l.steps.push_back(barrier());
  for (int i = 0; i < a.nranks; ++i) {
    int p = (a.rank + i) % a.nranks;
    l.steps.push_back(copyStep(at(kInputBuf, 0, p), at(kOutputBuf, p * bytes), bytes));
  }
  return l;
}

// Broadcast pieces: at least kBcastPiece bytes, at most kBcastPieces of them.
// Small enough that a peer copies a piece while it is still in the shared
// L3 where the root just wrote it: with -R 2, 2 ranks 16-64 MiB ran at
// 7.3-7.6 GB/s with 8 pieces of up to 8 MiB and 8.8-10.9 with 128 of
// 256-512 KiB (4 ranks: 4.2-4.5 and 4.5-5.1); the barriers cost little.
constexpr size_t kBcastPiece = 256 * 1024;
constexpr size_t kBcastPieces = 128;

size_t broadcastPieces(size_t bytes) {
  return std::clamp<size_t>(bytes / kBcastPiece, 1, kBcastPieces);
}

// Only outputs are windows (a non-root's input may be any pointer), so the
// root's input reaches its own output before anyone else can read it. In
// pieces one barrier apart: while the root copies piece i, everyone else
// copies piece i - 1 from the root's output, so all cores copy at once (the
// whole copy, a barrier, then the peers' copies ran them one after the
// other: 2 ranks, 16-64 MiB at half memcpy speed). In place the root only
// waits: whether it is in place is the root's alone to know (a non-root's
// input is ignored), so a non-root's steps cannot depend on it.
Lane broadcast(const CollArgs& a) {
  size_t bytes = a.count * a.elemSize;
  bool root = a.rank == a.root;
  Lane l;
  int k = static_cast<int>(broadcastPieces(bytes));
  auto piece = [&](int i) {
    size_t b0 = blockStart(a.count, k, i, a.elemSize), b1 = blockStart(a.count, k, i + 1, a.elemSize);
    return std::pair{b0, b1 - b0};
  };
  if (!root) l.steps.push_back(barrier());
  for (int i = 0; i < k; ++i) {
    auto [off, len] = piece(i);
    if (root && !a.inPlace) {
      l.steps.push_back(copyStep(at(kInputBuf, off), at(kOutputBuf, off), len));
    } else if (!root) {
      l.steps.push_back(copyStep(at(kOutputBuf, off, a.root), at(kOutputBuf, off), len));
    }
    if (root || i + 1 < k) l.steps.push_back(barrier());
  }
  return l;
}

// Every rank pushes block p of its input into block `rank` of rank p's
// output. In place, peers write into the very blocks this rank still has to
// send: it sends from a copy made before the first barrier (before any
// peer may write). Its own block stays where it is.
Lane allToAll(const CollArgs& a, Schedule* s) {
  size_t block = a.count * a.elemSize;
  int n = a.nranks, r = a.rank;
  Lane l;
  uint32_t src = kInputBuf;
  if (a.inPlace) {
    s->scratchBytes = block * n;
    src = kScratchBuf;
    l.steps.push_back(copyStep(at(kInputBuf, 0), at(kScratchBuf, 0), block * n));
  }
  l.steps.push_back(barrier());
  for (int i = 0; i < n; ++i) {
    int p = (r + i) % n;
    if (p == r && a.inPlace) continue;
    l.steps.push_back(copyStep(at(src, p * block), at(kOutputBuf, r * block, p), block));
  }
  return l;
}

}  // namespace

bool symmetricSupports(const CollArgs& a, const CommView& v) {
  if (!a.symmetric || a.nranks < 2 || v.nHosts() != 1) return false;
  switch (a.kind) {
    case CollKind::kAllReduce:
    case CollKind::kReduceScatter:
    case CollKind::kAllGather:
    case CollKind::kBroadcast:
    case CollKind::kReduce:
    case CollKind::kAllToAll:
      return true;
    default:
      return false;
  }
}

namespace {

// A barrier waits for every peer: one latency, plus each peer's flag
// handled like a message (ranks that share cores must all run once).
// Measured with perf/tuner_check --register 2 (4 ranks on 2 cores, quiet):
// symmetric 8.8 us against recursive doubling's 10.4 us at 8 KiB, and
// slower than it at 2 KiB; the model (0.5 + 3 x 0.6 per barrier) puts the
// crossover between the two.
double sync(const CollArgs& a, const CommView& v) {
  return cost::latency(v, v.intra) + (a.nranks - 1) * cost::overhead(v, v.intra);
}

double symOneShotCost(const CollArgs& a, const CommView& v) {
  double bytes = static_cast<double>(a.count * a.elemSize);
  return 2 * sync(a, v) + cost::reduce(v, (a.nranks - 1) * bytes);
}

double symTwoShotCost(const CollArgs& a, const CommView& v) {
  double bytes = static_cast<double>(a.count * a.elemSize);
  double f = (a.nranks - 1.0) / a.nranks;
  return 3 * sync(a, v) + cost::reduce(v, f * bytes) + cost::transfer(v, v.self, f * bytes);
}

// In place, one-shot would overwrite a rank's input while the others still
// read all of it.
bool oneShot(const CollArgs& a, const CommView& v) {
  return !a.inPlace && symOneShotCost(a, v) <= symTwoShotCost(a, v);
}

}  // namespace

Schedule symmetricSchedule(const CollArgs& a, const CommView& v) {
  Schedule s;
  s.algorithm = "symmetric";
  Lane l;
  switch (a.kind) {
    case CollKind::kAllReduce: l = oneShot(a, v) ? allReduceOneShot(a) : allReduce(a); break;
    case CollKind::kReduceScatter: l = reduceScatter(a); break;
    case CollKind::kAllGather: l = allGather(a); break;
    case CollKind::kBroadcast: l = broadcast(a); break;
    case CollKind::kReduce: l = reduce(a); break;
    case CollKind::kAllToAll: l = allToAll(a, &s); break;
    default: return s;
  }
  l.steps.push_back(barrier());  // nobody touches my buffers after I return
  localize(&l, a.rank);
  s.lanes.push_back(std::move(l));
  return s;
}

// The data moves once, at the host's copy and reduction speeds, plus the
// barriers (sync above).
double symmetricCost(const CollArgs& a, const CommView& v) {
  int n = a.nranks;
  double block = static_cast<double>(a.count * a.elemSize);
  switch (a.kind) {
    case CollKind::kAllReduce:
      return oneShot(a, v) ? symOneShotCost(a, v) : symTwoShotCost(a, v);
    case CollKind::kReduceScatter:
      return 2 * sync(a, v) + cost::reduce(v, (n - 1) * block);
    case CollKind::kReduce:
      // Never the model's choice on host memory: the root reduces alone
      // while the others wait, and measured against the FIFO algorithms
      // (perf/phase_ab 6, reduce_perf -R 2) it took 1.2-1.4x their time
      // from 32 KiB at 2 ranks and 6-21x at 512 B-256 KiB at 4 ranks on 2
      // cores. Device windows take it all the same (comm/device_direct.h:
      // the alternative is staging), and NCCL_ALGO=symmetric forces it.
      return kNeverChosen;
    case CollKind::kAllGather:
      return 2 * sync(a, v) + cost::transfer(v, v.self, n * block);
    case CollKind::kAllToAll:
      // Every rank stores its n - 1 blocks into its peers' outputs at once.
      // On host memory stores into lines another core holds pay for their
      // ownership, and the barriers cost more than the data in small
      // blocks: against the direct schedule (alltoall_perf -R 2, -n
      // 100-500, same minutes) it took at 4 ranks 7-12x its time at 1-4 KiB
      // blocks, 2.2-2.7x at 16 KiB, 0.82-1.42x at 64 KiB, 0.69-0.91x at
      // 256 KiB-1 MiB, 0.84x at 4 MiB; at 2 ranks 1.03-1.95x at 128 KiB,
      // 0.74-0.81x at 256-512 KiB, 0.71-0.85x at 2-8 MiB.
      if (a.count * a.elemSize < kPushMinBlock) return kNeverChosen;
      return 2 * sync(a, v) + cost::transfer(v, v.self, (n - 1) * block);
    default: {  // Broadcast: one copy's time, pipelined over k + 1 barriers
      // Out of place whatever the root does: whether it is in place is the
      // root's alone to know, and every rank must arrive at the same cost
      // (a root in place once chose symmetric where the others did not,
      // and all hung: 3 ranks, 2-8 KiB).
      double k = static_cast<double>(broadcastPieces(a.count * a.elemSize));
      return (k + 2) * sync(a, v) + cost::transfer(v, v.self, (k + 1) / k * block);
    }
  }
}

}  // namespace ferry
