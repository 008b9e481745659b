// Rabenseifner AllReduce: a reduce-scatter by recursive halving, then an
// all-gather by recursive doubling.
//
// The m = 2^floor(log2 n) lowest ranks ("core") split each round's elements
// into m blocks. Halving step j pairs rank r with r ^ d_j: each keeps one
// half of their common segment, sends the other half and reduces what the
// partner sent into its half. After log2(m) steps a rank holds one block,
// fully reduced; the doubling steps run the pairs in reverse order, each
// rank sending its segment and receiving the partner's. A rank moves
// 2(m-1)/m of the message in 2 log2(m) steps (the ring: 2(n-1) steps).
// With n not a power of two, rank m+i first sends its input to rank i,
// which folds it in before the halving and sends it the result at the end
// (as recursive_doubling.cc does).
//
// Identical bits on every rank without caring about operand order: each
// block's final value is computed by exactly one rank (its owner after the
// halving) and everyone else receives a copy of it.
// PreMulSum: a rank's input is scaled exactly once, never inside a reduction
// (reduceScaled's unrounded product would differ from the ring's rounding):
// by a Send with scaleSrc for the half it gives away in its first step and a
// scaled Copy of the half it keeps (fold ranks copy the whole round before
// folding). Avg: finalValue on the last halving step, which produces the
// block's final value.
//
// Step order (which bit first): the first halving step moves half the
// message, the last only 1/m of it, and the doubling steps mirror that. With
// hosts holding contiguous blocks of ranks, pairing near ranks first
// (d = 1, 2, 4, ...) keeps the big early transfers inside hosts (shared
// memory) and sends only the small late ones over the network: with L ranks
// per host each rank puts about 1/L of the message on the wire per phase
// instead of about all of it (far-first, d = m/2 first, would push half the
// message across hosts in the first step, from every rank of a host at once
// through its NICs). In general the bits are ordered by how many pairs cross
// hosts, fewest first (ties: smaller distance first), which is near-first for
// contiguous placements and adapts to others (e.g. round-robin).
//
// No deadlock: one lane. Every exchange is Send then receive with the same
// partner, at most chunkBytes each (a round spans two chunks and the biggest
// step carries half of it) and sent by value where the receiver reduces, so
// a Send lands in the partner's FIFO without waiting for it. On a connection
// at most two messages wait (a halving and the matching doubling message of
// one round, or a doubling message and the next round's halving one): the
// partner sends each of ours only after consuming our previous one, as in
// recursive_doubling.cc. The fold's messages go one way at a time and are
// cut in pieces of at most chunkBytes as well.
#include <algorithm>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/exchange_cost.h"

namespace ferry {
namespace {

Region in(size_t off) { return Region{kInputBuf, off}; }
Region out(size_t off) { return Region{kOutputBuf, off}; }

int largestPow2(int n) {
  int m = 1;
  while (m * 2 <= n) m *= 2;
  return m;
}

// The halving steps' distances, fewest host-crossing pairs first.
std::vector<int> halvingOrder(const CommView& v, int m) {
  std::vector<std::pair<int, int>> byCrossings;  // (crossing pairs, distance)
  for (int d = 1; d < m; d *= 2) {
    int crossings = 0;
    for (int r = 0; r < m; ++r) crossings += !v.sameHost(r, r ^ d);
    byCrossings.push_back({crossings, d});
  }
  std::sort(byCrossings.begin(), byCrossings.end());
  std::vector<int> order;
  for (auto& [c, d] : byCrossings) order.push_back(d);
  return order;
}

Step sendStep(int peer, Region src, size_t bytes, bool byValue, bool scale) {
  Step s = makeStep(StepKind::kSend, peer, -1, src, {}, bytes);
  s.sendByValue = byValue;
  s.scaleSrc = scale;
  return s;
}

// Calls fn(off, bytes) for pieces of [off, off + bytes) of at most `piece`.
template <typename Fn>
void inPieces(size_t off, size_t bytes, size_t piece, Fn fn) {
  for (size_t done = 0; done < bytes; done += piece) fn(off + done, std::min(piece, bytes - done));
}

struct Round {
  size_t off;    // byte offset of the round's elements
  size_t len;    // elements
  size_t piece;  // bytes a fold message may carry
};

// Halving then doubling over the round's m blocks, for core rank r.
void exchanges(const CollArgs& a, int m, const std::vector<int>& order, const Round& rd, bool scaled,
               std::vector<Step>* s) {
  int r = a.rank;
  auto at = [&](int c) { return rd.off + blockStart(rd.len, m, c, a.elemSize); };
  int lo = 0, hi = m;
  for (size_t j = 0; j < order.size(); ++j) {
    int d = order[j], mid = (lo + hi) / 2;
    bool lower = (r & d) == 0;
    int keepLo = lower ? lo : mid, keepHi = lower ? mid : hi;
    int giveLo = lower ? mid : lo, giveHi = lower ? hi : mid;
    size_t give = at(giveHi) - at(giveLo), keep = at(keepHi) - at(keepLo);
    // By value: the partner reduces it, and our doubling step overwrites it.
    if (give) s->push_back(sendStep(r ^ d, scaled ? out(at(giveLo)) : in(at(giveLo)), give, true, !scaled));
    if (keep && !scaled) {
      Step c = makeStep(StepKind::kCopy, -1, -1, in(at(keepLo)), out(at(keepLo)), keep);
      c.scaleSrc = true;
      s->push_back(c);
    }
    if (keep) {
      Step red = makeStep(StepKind::kRecvReduceCopy, -1, r ^ d, out(at(keepLo)), out(at(keepLo)), keep);
      red.finalValue = j + 1 == order.size();
      s->push_back(red);
    }
    scaled = true;
    lo = keepLo;
    hi = keepHi;
  }
  for (size_t j = order.size(); j-- > 0;) {
    int d = order[j], size = hi - lo;
    int sibLo = (r & d) == 0 ? hi : lo - size;
    // Final values, never written again: a reference may go.
    if (at(hi) > at(lo)) s->push_back(sendStep(r ^ d, out(at(lo)), at(hi) - at(lo), false, false));
    if (at(sibLo + size) > at(sibLo))
      s->push_back(makeStep(StepKind::kRecv, -1, r ^ d, {}, out(at(sibLo)), at(sibLo + size) - at(sibLo)));
    lo = std::min(lo, sibLo);
    hi = lo + 2 * size;
  }
}

void coreRound(const CollArgs& a, int m, const std::vector<int>& order, const Round& rd,
               std::vector<Step>* s) {
  size_t bytes = rd.len * a.elemSize;
  bool folds = a.rank < a.nranks - m;
  int extra = a.rank + m;
  if (folds) {
    Step c = makeStep(StepKind::kCopy, -1, -1, in(rd.off), out(rd.off), bytes);
    c.scaleSrc = true;
    s->push_back(c);
    inPieces(rd.off, bytes, rd.piece, [&](size_t off, size_t b) {
      s->push_back(makeStep(StepKind::kRecvReduceCopy, -1, extra, out(off), out(off), b));
    });
  }
  exchanges(a, m, order, rd, folds, s);
  if (folds)
    inPieces(rd.off, bytes, rd.piece, [&](size_t off, size_t b) {
      s->push_back(sendStep(extra, out(off), b, false, false));
    });
}

void extraRound(const CollArgs& a, int m, const Round& rd, std::vector<Step>* s) {
  size_t bytes = rd.len * a.elemSize;
  int partner = a.rank - m;
  // Scaled into the FIFO, hence by value (an in-place output may then be
  // received into at once).
  inPieces(rd.off, bytes, rd.piece, [&](size_t off, size_t b) {
    s->push_back(sendStep(partner, in(off), b, true, true));
  });
  inPieces(rd.off, bytes, rd.piece, [&](size_t off, size_t b) {
    s->push_back(makeStep(StepKind::kRecv, -1, partner, {}, out(off), b));
  });
}

}  // namespace

Schedule rabenseifnerSchedule(const CollArgs& a, const CommView& v) {
  Schedule sched{"rabenseifner", {}};
  size_t e = a.elemSize;
  if (a.nranks == 1) {
    sched.lanes.push_back(singleCopy(a.count * e));
    return sched;
  }
  if (a.count == 0) return sched;
  int m = largestPow2(a.nranks);
  std::vector<int> order = halvingOrder(v, m);
  size_t chunkElems = v.chunkBytes ? std::max<size_t>(1, v.chunkBytes / e) : a.count;
  Lane lane;
  // Two chunks per round: the first halving step carries half of it.
  forEachRound(a.count, e, 2, v.chunkBytes, [&](size_t base, size_t len) {
    Round rd{base * e, len, chunkElems * e};
    if (a.rank < m) {
      coreRound(a, m, order, rd, &lane.steps);
    } else {
      extraRound(a, m, rd, &lane.steps);
    }
  });
  sched.lanes.push_back(std::move(lane));
  return sched;
}

bool rabenseifnerSupports(const CollArgs& a, const CommView&) { return a.kind == CollKind::kAllReduce; }

// Per round (two chunks of the message): 2 log2(m) dependent messages, each
// step's latency on the level its pairs cross. Wire time over all rounds:
// step j of the halving moves B/2^(j+1) per rank, the doubling the same
// again, i.e. 2(m-1)/m B in total split over the levels the steps cross
// (with the host's NIC shared by its ranks that cross at once). Reductions:
// (m-1)/m B; the scaled copy of the half kept in the first step. The fold
// for n not a power of two: the whole message in and back, one reduction
// and a copy of the other half, with a latency each way per round.
double rabenseifnerCost(const CollArgs& a, const CommView& v) {
  int n = a.nranks;
  double bytes = static_cast<double>(a.count * a.elemSize);
  if (n == 1) return cost::transfer(v, v.self, bytes);
  int m = largestPow2(n);
  double rounds = cost::chunks(v, bytes / 2);
  // Each distance is used twice (halving, then doubling back); its pieces
  // pipeline, so their waits add up and their wire time once.
  double total = 0, part = bytes;
  for (int d : halvingOrder(v, m)) {
    part /= 2;
    cost::StepLoad s = cost::stepLoad(v, m, [d](int r) { return r ^ d; });
    total += 2 * cost::stepTime(v, s, part, rounds);
  }
  total += cost::reduce(v, bytes * (m - 1) / m) + cost::transfer(v, v.self, bytes / 2);
  if (m < n) {
    cost::StepLoad s = cost::stepLoad(v, n, [m](int r) { return r >= m ? r - m : -1; });
    total += 2 * cost::stepTime(v, s, bytes, rounds) + cost::reduce(v, bytes) + cost::transfer(v, v.self, bytes / 2);
  }
  return total;
}

}  // namespace ferry
