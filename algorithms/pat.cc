// "pat": AllGather and ReduceScatter in ceil(log2 n) aggregated steps, meant
// for one rank per host at scale (the latency-bound case NCCL 2.23+ serves
// with PAT, "Parallel Aggregated Trees").
//
// What this is: Bruck's dissemination AllGather and its time-reversed mirror
// for ReduceScatter, which is the pattern NCCL's PAT is built on (every
// rank's block spreads along a binomial tree rooted at that rank; the n trees
// are run in parallel and each step's traffic is aggregated). At step k rank
// r sends ONE message, to r - 2^k (AllGather; ReduceScatter: r + 2^k), with
// every block it must forward at that step, and receives one from the other
// side. Blocks are kept in Bruck's rotated order in scratch (slot d = block
// r + d) so each step's blocks are one contiguous region, then copied out.
//
// Where it differs from NCCL's PAT: NCCL walks the trees in an order that
// lets it pipeline pieces of a step into the next step with a fixed number
// of small buffers, and writes straight into user buffers. Here the bound on
// buffering comes from rounds instead: a round handles `len` elements of
// every block, with len chosen so the largest step (m_max blocks, m_max =
// max_k min(2^k, n - 2^k), between n/3 and n/2) carries at most chunkBytes;
// scratch is n x len elements (two to three chunks), and the rotated layout costs one
// extra local copy of the data. Steps whose message still exceeds chunkBytes
// (one element per block already too big) are split into parts, each a
// Send then a Receive.
//
// Exact contributions: AllGather only copies. ReduceScatter starts each
// round by copying the rank's input blocks (PreMulSum scaled there, once)
// into the rotated slots, reduces incoming partials into them, and block r's
// value is final on the last step (Avg divided there, once), on rank r only.
//
// No deadlock: one lane; every rank runs the same sequence of positions
// (round, step, part), each "Send <= chunkBytes to one peer, then Receive the
// same position's message from another". Suppose every unfinished rank is
// stuck and take one at the smallest position X. Stuck receiving: its
// sender has not sent X's message, so it is at X stuck sending. Stuck
// sending: the FIFO is full, and since one message needs at most half of it
// (chunkBytes), it holds part of an earlier message whose receiver has not
// finished that earlier position, a smaller one than X. Either way a rank
// sits below the smallest: contradiction.
#include <algorithm>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"

namespace ferry {
namespace {

// The dissemination pattern of n ranks: step k exchanges m[k] blocks.
struct Bruck {
  int n = 1;
  std::vector<int> m;
  int mMax = 1;
  explicit Bruck(int ranks) : n(ranks) {
    for (int d = 1; d < n; d *= 2) {
      m.push_back(std::min(d, n - d));
      mMax = std::max(mMax, m.back());
    }
  }
  int mod(int r) const { return ((r % n) + n) % n; }
};

// Elements of every block a round handles.
size_t roundElems(const Bruck& br, const CollArgs& a, size_t chunkBytes) {
  if (chunkBytes == 0) return a.count;
  size_t chunkElems = std::max<size_t>(1, chunkBytes / a.elemSize);
  return std::min(a.count, std::max<size_t>(1, chunkElems / br.mMax));
}

// A step's message of `total` bytes in parts of at most chunkBytes.
template <typename F>
void forEachPart(size_t total, size_t elem, size_t chunkBytes, F f) {
  size_t part = chunkBytes ? std::max<size_t>(1, chunkBytes / elem) * elem : total;
  for (size_t p = 0; p < total; p += part) f(p, std::min(part, total - p));
}

// By value: scratch slots are rewritten by the next round.
Step sendFromScratch(int peer, size_t off, size_t bytes) {
  Step s = makeStep(StepKind::kSend, peer, -1, Region{kScratchBuf, off}, {}, bytes);
  s.sendByValue = true;
  return s;
}

Schedule allGather(const CollArgs& a, const CommView& v) {
  Bruck br(a.nranks);
  int r = a.rank;
  size_t e = a.elemSize, blk = a.count * e, lenMax = roundElems(br, a, v.chunkBytes);
  Schedule s{"pat", {}};
  s.scratchBytes = a.nranks * lenMax * e;
  std::vector<Step> st;
  if (!a.inPlace) st.push_back(copyStep({kInputBuf, 0}, {kOutputBuf, blk * r}, blk));
  forEachRound(a.count, e, 1, lenMax * e, [&](size_t base, size_t len) {
    size_t slot = len * e;  // bytes of one block in this round
    st.push_back(copyStep({kInputBuf, base * e}, {kScratchBuf, 0}, slot));
    for (size_t k = 0; k < br.m.size(); ++k) {
      int dist = 1 << k;
      forEachPart(br.m[k] * slot, e, v.chunkBytes, [&](size_t p, size_t bytes) {
        st.push_back(sendFromScratch(br.mod(r - dist), p, bytes));
        st.push_back(makeStep(StepKind::kRecv, -1, br.mod(r + dist), {},
                              {kScratchBuf, dist * slot + p}, bytes));
      });
    }
    for (int d = 1; d < a.nranks; ++d)
      st.push_back(copyStep({kScratchBuf, d * slot}, {kOutputBuf, br.mod(r + d) * blk + base * e}, slot));
  });
  s.lanes.push_back(Lane{std::move(st)});
  return s;
}

Schedule reduceScatter(const CollArgs& a, const CommView& v) {
  Bruck br(a.nranks);
  int r = a.rank;
  size_t e = a.elemSize, blk = a.count * e, lenMax = roundElems(br, a, v.chunkBytes);
  Schedule s{"pat", {}};
  s.scratchBytes = a.nranks * lenMax * e;
  std::vector<Step> st;
  forEachRound(a.count, e, 1, lenMax * e, [&](size_t base, size_t len) {
    size_t slot = len * e;
    for (int d = 0; d < a.nranks; ++d) {
      Step c = copyStep({kInputBuf, br.mod(r + d) * blk + base * e}, {kScratchBuf, d * slot}, slot);
      c.scaleSrc = true;
      st.push_back(c);
    }
    // Steps in reverse: slots [2^k, 2^k + m_k) go to r + 2^k, which folds
    // them into its slots [0, m_k); slot 0 is complete after step 0.
    for (size_t k = br.m.size(); k-- > 0;) {
      int dist = 1 << k;
      forEachPart(br.m[k] * slot, e, v.chunkBytes, [&](size_t p, size_t bytes) {
        st.push_back(sendFromScratch(br.mod(r + dist), dist * slot + p, bytes));
        Region dst = k == 0 ? Region{kOutputBuf, base * e + p} : Region{kScratchBuf, p};
        Step red = makeStep(StepKind::kRecvReduceCopy, -1, br.mod(r - dist), {kScratchBuf, p}, dst, bytes);
        red.finalValue = k == 0;
        st.push_back(red);
      });
    }
  });
  s.lanes.push_back(Lane{std::move(st)});
  return s;
}

}  // namespace

bool patSupports(const CollArgs& a, const CommView&) {
  return a.kind == CollKind::kAllGather || a.kind == CollKind::kReduceScatter;
}

Schedule patSchedule(const CollArgs& a, const CommView& v) {
  size_t blk = a.count * a.elemSize;
  if (a.nranks == 1) {
    if (a.kind == CollKind::kReduceScatter) return Schedule{"pat", {singleCopy(blk)}};
    if (a.inPlace) return Schedule{"pat", {}};
    return Schedule{"pat", {Lane{{copyStep({kInputBuf, 0}, {kOutputBuf, 0}, blk)}}}};
  }
  return a.kind == CollKind::kAllGather ? allGather(a, v) : reduceScatter(a, v);
}

// Per round, one wait per step (ceil(log2 n) steps, more when a step is
// split into parts) on the slowest level; every rank receives (n-1) blocks
// in all, the busiest host's ranks sharing its NICs; the rotated staging
// adds a local copy of n blocks; ReduceScatter reduces (n-1) blocks.
double patCost(const CollArgs& a, const CommView& v) {
  int n = a.nranks;
  double b = static_cast<double>(a.count * a.elemSize);
  if (n == 1 || a.count == 0) return cost::transfer(v, v.self, b);
  Bruck br(n);
  size_t len = roundElems(br, a, v.chunkBytes);
  double rounds = std::ceil(static_cast<double>(a.count) / static_cast<double>(len));
  double waits = 0;
  for (int m : br.m) waits += cost::chunks(v, static_cast<double>(m * len * a.elemSize));
  const LinkCost& l = v.slowest();
  // The busiest host's ranks share its NICs. Not this rank's host: every
  // rank must compute the same cost, or ranks would choose differently.
  double local = 1;
  for (const auto& h : v.hostRanks) local = std::max(local, static_cast<double>(h.size()));
  double share = &l == &v.inter ? local / cost::nics(v, static_cast<int>(local)) : 1.0;
  double t = cost::overlap(v, l, rounds * waits * cost::exchange(v, l), cost::transfer(v, l, (n - 1) * b * share)) +
             cost::transfer(v, v.self, n * b);
  if (a.kind == CollKind::kReduceScatter) t += cost::reduce(v, (n - 1) * b);
  return t;
}

}  // namespace ferry
