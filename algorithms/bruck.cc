// Bruck AllGather and its mirror, a Bruck reduce-scatter: ceil(log2 n)
// steps for any n, each rank sending to one partner per step.
//
// AllGather: step k (d = 2^k) sends the blocks a rank has, r .. r+cnt-1
// (mod n, cnt = min(d, n-d)), to rank r-d and receives r+d .. r+d+cnt-1
// from rank r+d. Textbook Bruck keeps them in a rotated buffer (block r+i
// at position i) and rotates it at the end; here each block is received
// straight into its final place in the output, which is the same data
// movement minus the final rotation copy. A range of blocks is contiguous
// except where it wraps past block n-1; sender and receiver name the same
// absolute blocks, so both cut a message at the same wrap point.
//
// ReduceScatter: the transpose, steps in reverse order (k from the top
// down). Rank r holds partial sums W[i] of block r+i for i < D (D = the top
// step's distance) in scratch; step k sends W[d .. d+cnt) to rank r+d, which
// reduces them into its W[0 .. cnt) (the same absolute blocks). The top step
// sends input blocks r+D .. n-1+r straight from the input, scaled into the
// FIFO; W starts as a scaled copy of input blocks r .. r+D-1 (PreMulSum:
// scaled once, never inside a reduction). The last step (d = 1) reduces
// block r's partial into the output: finalValue (Avg) there. Every block's
// final value is computed once, by its owner.
//
// In place: AllGather's input is block r of the output (nothing to copy);
// ReduceScatter's output is block r of the input, read into W at the start
// of each round and written only by the round's last step.
//
// No deadlock: one lane; a step's blocks are cut into groups of at most
// chunkBytes (whole blocks when a block fits in a chunk, else one slice of
// one block per group, in rounds of slices). A group is sent (at most two
// steps, cut at the wrap) and then received. Every rank runs the same
// sequence of groups and the receiver of a rank's group t receives it as
// its own group t, so the rank with the least progress can always move: the
// peer it sends to has consumed everything older (the FIFO is empty and one
// group fits), the peer it receives from has already sent group t.
#include <algorithm>
#include <cmath>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/exchange_cost.h"

namespace ferry {
namespace {

Region in(size_t off) { return Region{kInputBuf, off}; }
Region out(size_t off) { return Region{kOutputBuf, off}; }

struct BruckStep {
  int d, cnt;
};

std::vector<BruckStep> bruckSteps(int n) {
  std::vector<BruckStep> steps;
  for (int d = 1; d < n; d *= 2) steps.push_back({d, std::min(d, n - d)});
  return steps;
}

// Items [i0, i1) of a list whose item i is block (first + i) mod n, cut
// where the blocks wrap: fn(first block, blocks, first item).
template <typename Fn>
void wrapPieces(int n, int first, int i0, int i1, Fn fn) {
  int b = (first + i0) % n, len = i1 - i0, head = std::min(len, n - b);
  fn(b, head, i0);
  if (head < len) fn(0, len - head, i0 + head);
}

// How the elements move: rounds of `len` elements of every block, and
// blocks per group (only whole blocks are contiguous with the next one).
struct Plan {
  size_t chunkElems;
  int group(size_t len, size_t count, int n) const {
    if (len == 0 || len < count) return 1;
    return static_cast<int>(std::min<size_t>(n, std::max<size_t>(1, chunkElems / len)));
  }
};

Plan planOf(const CollArgs& a, const CommView& v) {
  return Plan{v.chunkBytes ? std::max<size_t>(1, v.chunkBytes / a.elemSize) : a.count};
}

Schedule allGather(const CollArgs& a, const CommView& v) {
  int n = a.nranks, r = a.rank;
  size_t e = a.elemSize, block = a.count * e;
  Lane lane;
  if (!a.inPlace) lane.steps.push_back(makeStep(StepKind::kCopy, -1, -1, in(0), out(block * r), block));
  Plan plan = planOf(a, v);
  forEachRound(a.count, e, 1, v.chunkBytes, [&](size_t base, size_t len) {
    int g = plan.group(len, a.count, n);
    auto at = [&](int b) { return out(block * b + base * e); };
    for (const BruckStep& st : bruckSteps(n)) {
      int to = (r - st.d + n) % n, from = (r + st.d) % n;
      for (int i0 = 0; i0 < st.cnt; i0 += g) {
        int i1 = std::min(st.cnt, i0 + g);
        // Final values, never written again: references may go.
        wrapPieces(n, r, i0, i1, [&](int b, int nb, int) {
          lane.steps.push_back(sendStep(to, at(b), nb * len * e));
        });
        wrapPieces(n, from, i0, i1, [&](int b, int nb, int) {
          lane.steps.push_back(makeStep(StepKind::kRecv, -1, from, {}, at(b), nb * len * e));
        });
      }
    }
  });
  return Schedule{"bruck", {std::move(lane)}};
}

Schedule reduceScatter(const CollArgs& a, const CommView& v) {
  int n = a.nranks, r = a.rank;
  size_t e = a.elemSize, block = a.count * e;
  std::vector<BruckStep> steps = bruckSteps(n);
  int top = steps.back().d;
  Plan plan = planOf(a, v);
  Schedule sched{"bruck", {}};
  Lane lane;
  forEachRound(a.count, e, 1, v.chunkBytes, [&](size_t base, size_t len) {
    size_t lb = len * e;
    sched.scratchBytes = std::max(sched.scratchBytes, top * lb);
    auto w = [&](int i) { return Region{kScratchBuf, i * lb}; };
    auto input = [&](int b) { return in(block * b + base * e); };
    for (int i = 0; i < top; ++i) {
      Step c = makeStep(StepKind::kCopy, -1, -1, input((r + i) % n), w(i), lb);
      c.scaleSrc = true;
      lane.steps.push_back(c);
    }
    int g = plan.group(len, a.count, n);
    for (size_t k = steps.size(); k-- > 0;) {
      const BruckStep& st = steps[k];
      bool first = k + 1 == steps.size(), last = k == 0;
      int to = (r + st.d) % n, from = (r - st.d + n) % n;
      for (int i0 = 0; i0 < st.cnt; i0 += g) {
        int i1 = std::min(st.cnt, i0 + g);
        // By value: the receiver reduces it and the scratch is reused.
        wrapPieces(n, to, i0, i1, [&](int b, int nb, int i) {
          Step s = sendStep(to, first ? input(b) : w(st.d + i), nb * lb);
          s.scaleSrc = first;
          s.sendByValue = true;
          lane.steps.push_back(s);
        });
        wrapPieces(n, r, i0, i1, [&](int, int nb, int i) {
          // The last step receives block r only (cnt = 1).
          Step s = makeStep(StepKind::kRecvReduceCopy, -1, from, w(i), last ? out(base * e) : w(i), nb * lb);
          s.finalValue = last;
          lane.steps.push_back(s);
        });
      }
    }
  });
  sched.lanes.push_back(std::move(lane));
  return sched;
}

}  // namespace

bool bruckSupports(const CollArgs& a, const CommView&) {
  return a.kind == CollKind::kAllGather || a.kind == CollKind::kReduceScatter;
}

Schedule bruckSchedule(const CollArgs& a, const CommView& v) {
  size_t bytes = a.count * a.elemSize;
  bool gather = a.kind == CollKind::kAllGather;
  if (a.nranks == 1) {
    if (!gather) return Schedule{"bruck", {singleCopy(bytes)}};
    if (a.inPlace) return Schedule{"bruck", {}};
    return Schedule{"bruck", {Lane{{makeStep(StepKind::kCopy, -1, -1, in(0), out(0), bytes)}}}};
  }
  if (a.count == 0) return Schedule{"bruck", {}};
  return gather ? allGather(a, v) : reduceScatter(a, v);
}

// ceil(log2 n) steps; step k moves cnt_k = min(2^k, n-2^k) blocks per rank
// (sum: n-1 blocks, i.e. (n-1)/n of the total), on the level its pairs
// cross with the NICs shared by a host's crossing ranks. Latency: one per
// group of at most a chunk, per step and round (one per step when the
// message is small). ReduceScatter also reduces n-1 blocks and copies the
// top step's D blocks into scratch, scaled.
double bruckCost(const CollArgs& a, const CommView& v) {
  int n = a.nranks;
  double block = static_cast<double>(a.count * a.elemSize);
  if (n == 1) return cost::transfer(v, v.self, block);
  Plan plan = planOf(a, v);
  size_t len = std::min<size_t>(a.count, std::max<size_t>(1, plan.chunkElems));
  double rounds = a.count ? std::ceil(static_cast<double>(a.count) / len) : 1.0;
  int g = plan.group(len, a.count, n);
  bool gather = a.kind == CollKind::kAllGather;
  double total = 0;
  for (const BruckStep& st : bruckSteps(n)) {
    int d = st.d;
    cost::StepLoad s = cost::stepLoad(v, n, [&](int r) { return gather ? (r - d + n) % n : (r + d) % n; });
    total += cost::stepTime(v, s, st.cnt * block, rounds * std::ceil(static_cast<double>(st.cnt) / g));
  }
  if (!gather) total += cost::reduce(v, (n - 1) * block) + cost::transfer(v, v.self, bruckSteps(n).back().d * block);
  return total;
}

}  // namespace ferry
