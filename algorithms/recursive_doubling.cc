// Recursive doubling AllReduce: log2(n) rounds of pairwise exchange.
//
// For latency-bound messages: a rank sends its whole current value to one
// partner per round, so it waits on log2(n) hops instead of the ring's
// 2(n-1), at the price of moving the full message every round. With n not a
// power of two, the m = 2^floor(log2 n) lowest ranks run the rounds; rank
// m+i first sends its input to rank i, which folds it in before the rounds
// and sends it the result after them.
//
// Identical bits on every rank: both partners of a round compute
// (lower half's value) OP (upper half's value), operands in the same
// positions, because max/min on floats (-0 vs +0) and NaN payloads are not
// commutative bit for bit. RecvReduceCopy takes the incoming value first,
// which suits the upper rank; the lower rank receives into its other working
// region and runs LocalReduce (dst = src OP dst) with its own value as src.
// PreMulSum scales each rank's input once, by a Copy into the working region
// (or by the extra rank's Send), never inside a reduction: reduceScaled keeps
// the product unrounded for low-precision types, so partners would disagree.
//
// No deadlock: one lane per rank; a round is Send then receive, both at most
// chunkBytes and sent by value, so the Send lands in the partner's FIFO
// without waiting for the partner (and the value it copied stays valid while
// we overwrite our region). Longer messages run the whole algorithm once per
// chunk of chunkBytes. A connection never holds more than two chunks: a rank
// cannot send chunk c+2 to a partner before receiving the partner's chunk
// c+1, which the partner sends only after consuming our chunk c; chunkBytes
// is at most half a FIFO (Comm's constructor).
#include <algorithm>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"
#include "algorithms/exchange_cost.h"

namespace ferry {
namespace {

// The two places a core rank keeps its running value: its output, or scratch.
enum class Where : uint8_t { kOut, kScratch };
Where other(Where w) { return w == Where::kOut ? Where::kScratch : Where::kOut; }

// One combining round of a core rank.
struct Round {
  int peer;
  bool lower;  // our value is the left operand (we hold the lower half)
  bool sends;  // false for the fold-in: the extra rank does not need ours
};

std::vector<Round> roundsOf(int rank, int n, int m) {
  std::vector<Round> rounds;
  if (rank < n - m) rounds.push_back(Round{rank + m, true, false});
  for (int bit = 1; bit < m; bit <<= 1) rounds.push_back(Round{rank ^ bit, (rank & bit) == 0, true});
  return rounds;
}

Step sendStep(int peer, Region src, size_t bytes, bool byValue) {
  Step s = makeStep(StepKind::kSend, peer, -1, src, {}, bytes);
  s.sendByValue = byValue;
  return s;
}

// Steps for elements [off, off + bytes) of a core rank (rank < m).
void coreChunk(const CollArgs& a, int m, size_t off, size_t bytes, std::vector<Step>* out) {
  std::vector<Round> rounds = roundsOf(a.rank, a.nranks, m);
  auto region = [&](Where w) {
    return w == Where::kOut ? Region{kOutputBuf, off} : Region{kScratchBuf, 0};
  };
  // Where each round leaves its result, chosen backwards so the last one
  // lands in the output: a lower rank must write the region it does not
  // read, an upper rank reduces in place. where[j + 1] is round j's result;
  // where[0] holds our scaled input.
  std::vector<Where> where(rounds.size() + 1, Where::kOut);
  for (size_t j = rounds.size(); j-- > 0;)
    where[j] = rounds[j].lower ? other(where[j + 1]) : where[j + 1];

  Step init = makeStep(StepKind::kCopy, -1, -1, Region{kInputBuf, off}, region(where[0]), bytes);
  init.scaleSrc = true;
  out->push_back(init);
  for (size_t j = 0; j < rounds.size(); ++j) {
    const Round& rd = rounds[j];
    Region cur = region(where[j]), res = region(where[j + 1]);
    bool last = j + 1 == rounds.size();
    // By value: the region is overwritten while the partner may still be reading.
    if (rd.sends) out->push_back(sendStep(rd.peer, cur, bytes, true));
    Step st;
    if (rd.lower) {
      out->push_back(makeStep(StepKind::kRecv, -1, rd.peer, {}, res, bytes));
      st = makeStep(StepKind::kLocalReduce, -1, -1, cur, res, bytes);
    } else {
      st = makeStep(StepKind::kRecvReduceCopy, -1, rd.peer, cur, res, bytes);
    }
    st.finalValue = last;
    out->push_back(st);
  }
  // The output is final and no later step writes it: a reference may go.
  if (a.rank < a.nranks - m) out->push_back(sendStep(a.rank + m, region(Where::kOut), bytes, false));
}

// Steps for elements [off, off + bytes) of an extra rank (rank >= m).
void extraChunk(const CollArgs& a, int m, size_t off, size_t bytes, std::vector<Step>* out) {
  int partner = a.rank - m;
  // Scaled while copied into the FIFO (the same rounding as Copy's); by
  // value, as scaling needs, so an in-place output can be received into next.
  Step send = sendStep(partner, Region{kInputBuf, off}, bytes, true);
  send.scaleSrc = true;
  out->push_back(send);
  out->push_back(makeStep(StepKind::kRecv, -1, partner, {}, Region{kOutputBuf, off}, bytes));
}

}  // namespace

Schedule recursiveDoublingSchedule(const CollArgs& a, const CommView& v) {
  Schedule s{"recdbl", {}};
  size_t e = a.elemSize;
  if (a.nranks == 1) {
    s.lanes.push_back(singleCopy(a.count * e));
    return s;
  }
  if (a.count == 0) return s;  // no lanes: nothing to exchange
  int m = 1;
  while (m * 2 <= a.nranks) m *= 2;
  Lane lane;
  size_t longest = 0;  // the first chunk; the scratch holds one
  forEachRound(a.count, e, 1, v.chunkBytes, [&](size_t base, size_t len) {
    longest = std::max(longest, len);
    if (a.rank < m) {
      coreChunk(a, m, base * e, len * e, &lane.steps);
    } else {
      extraChunk(a, m, base * e, len * e, &lane.steps);
    }
  });
  if (a.rank < m) s.scratchBytes = longest * e;
  s.lanes.push_back(std::move(lane));
  return s;
}

}  // namespace ferry

namespace ferry {

bool recursiveDoublingSupports(const CollArgs& a, const CommView&) {
  return a.kind == CollKind::kAllReduce;
}

// log2(m) exchanges of the whole (chunk of the) message, plus one exchange
// before and after with the ranks beyond the largest power of two m. A round
// crosses hosts when any rank's partner is on another host, and then a
// host's ranks whose partners are elsewhere share its NICs (exchange_cost.h).
double recursiveDoublingCost(const CollArgs& a, const CommView& v) {
  int n = a.nranks;
  double bytes = static_cast<double>(a.count * a.elemSize);
  if (n == 1) return cost::transfer(v, v.self, bytes);
  int m = 1;
  while (m * 2 <= n) m *= 2;
  double k = cost::chunks(v, bytes);
  double piece = bytes / k, perChunk = 0;
  for (int d = 1; d < m; d *= 2) {
    cost::StepLoad s = cost::stepLoad(v, m, [d](int r) { return r ^ d; });
    perChunk += cost::stepTime(v, s, piece) + cost::reduce(v, piece);
  }
  if (m < n) {
    // Fold in (reduced) and fold out: one message each way.
    cost::StepLoad s = cost::stepLoad(v, n, [m](int r) { return r >= m ? r - m : -1; });
    perChunk += 2 * cost::stepTime(v, s, piece) + cost::reduce(v, piece);
  }
  return k * perChunk;
}

}  // namespace ferry
