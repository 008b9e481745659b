// Hierarchical (two-level) AllReduce, AllGather and ReduceScatter for
// communicators over H >= 2 hosts with the same number L >= 2 of ranks each.
//
// AllReduce, per round of L x H chunks (chunk (s, j) = block s*H + j, so
// slice s = chunks (s, 0..H-1) is contiguous):
//   (a) intra-host reduce-scatter: for each j, a ring over the host's local
//       ranks leaves local rank i with the host's sum of chunk (i, j);
//   (b) inter-host AllReduce of slice i: a ring over the local-rank-i ranks
//       of all hosts (rail i: local rank i only ever talks to local rank i of
//       other hosts), whose reduce phase produces each final value once;
//   (c) intra-host all-gather: for each j, a ring copies chunk (i, j) to the
//       host's other ranks.
// Each element's final value comes out of one reduction chain on one rank
// (the last step of (b)) and is only copied afterwards, so every rank holds
// the same bits. PreMulSum scales each rank's input once, where (a) reads it;
// Avg divides once, on (b)'s last reduction. (a) writes the host partial into
// the output over the rank's own chunk (i, j), whose input it reads in the
// same step, so in-place works.
//
// AllGather moves the fewest bytes over the network inter-host first: a ring
// over rail i gathers the blocks of every host's local rank i, then for each
// host g an intra-host ring gathers the blocks of g's ranks. ReduceScatter is
// the mirror: intra-host rings reduce the blocks destined to each host g
// (local rank i keeps the partial for g's local rank i in scratch), then a
// ring over rail i reduces those partials into each rank's own block.
//
// Why chunks and sub-rings: every ring starts with a Send that must fit in
// the FIFO (all ranks send before receiving), so each step carries at most
// one chunk; the intra phases therefore run H rings of one chunk each instead
// of one ring of H-chunk slices.
//
// No deadlock: one lane per rank, and every rank runs the same sequence of
// sub-collectives (rings), round by round: (a) for j = 0..H-1, (b), (c) for
// j = 0..H-1. Order all sub-collectives globally by (round, phase, j); each
// rank's lane follows that order. Induction: when every earlier one has
// finished, every participant of the next one has reached it, and the FIFOs
// between them hold no earlier data (a connection has a single sender, which
// sent its earlier data before, and the receiver consumed it finishing the
// earlier sub-collective); later data a faster rank pushes queues behind.
// A ring alone with FIFOs of two chunks finishes (ring.cc), so this one does.
#include <algorithm>
#include <functional>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"

namespace ferry {
namespace {

Region in(size_t off) { return Region{kInputBuf, off}; }
Region out(size_t off) { return Region{kOutputBuf, off}; }
Region scratch(size_t off) { return Region{kScratchBuf, off}; }

// A ring among n ranks as one rank sees it.
struct SubRing {
  int pos, n, next, prev;
  int mod(int c) const { return ((c % n) + n) % n; }
};

// This rank's place: host h of H, local rank i of L.
struct Grid {
  const CommView& v;
  int h, i, H, L;
  Grid(const CollArgs& a, const CommView& view)
      : v(view), h(view.hostOf[a.rank]), i(view.localRankOf[a.rank]), H(view.nHosts()),
        L(static_cast<int>(view.hostRanks[0].size())) {}
  int rankAt(int host, int local) const { return v.hostRanks[host][local]; }
  SubRing intra() const { return {i, L, rankAt(h, (i + 1) % L), rankAt(h, (i + L - 1) % L)}; }
  SubRing inter() const { return {h, H, rankAt((h + 1) % H, i), rankAt((h + H - 1) % H, i)}; }
};

// Chunk c of a sub-collective: where this rank reads it, writes it, its size.
struct Chunks {
  std::function<Region(int)> src, dst;
  std::function<size_t(int)> bytes;
};

// Ring reduce of n chunks; position p ends owning chunk `own` (consistent:
// the next position owns own + 1). Only the last step writes dst.
void reduceRing(const SubRing& r, int own, const Chunks& c, bool scale, bool final, bool alsoSend,
                std::vector<Step>* s) {
  for (int k = 0; k < r.n; ++k) {
    int ch = r.mod(own + r.n - 1 - k);
    Step st;
    if (k == 0) {
      st = makeStep(StepKind::kSend, r.next, -1, c.src(ch), {}, c.bytes(ch));
      st.sendByValue = true;  // the receiver reduces it
    } else if (k < r.n - 1) {
      st = makeStep(StepKind::kRecvReduceSend, r.next, r.prev, c.src(ch), {}, c.bytes(ch));
    } else {
      StepKind kind = alsoSend ? StepKind::kRecvReduceCopySend : StepKind::kRecvReduceCopy;
      st = makeStep(kind, alsoSend ? r.next : -1, r.prev, c.src(ch), c.dst(ch), c.bytes(ch));
      st.finalValue = final;
    }
    st.scaleSrc = scale;
    s->push_back(st);
  }
}

// Ring all-gather: position p starts with chunk `own` (sent first unless a
// reduce already sent it) and receives own - 1, own - 2, ... into dst.
void gatherRing(const SubRing& r, int own, const Chunks& c, bool sendOwn, std::vector<Step>* s) {
  if (sendOwn) s->push_back(makeStep(StepKind::kSend, r.next, -1, c.src(own), {}, c.bytes(own)));
  for (int j = 1; j < r.n; ++j) {
    int ch = r.mod(own - j);
    bool last = j == r.n - 1;
    s->push_back(makeStep(last ? StepKind::kRecv : StepKind::kRecvCopySend, last ? -1 : r.next,
                          r.prev, {}, c.dst(ch), c.bytes(ch)));
  }
}

Lane allReduceLane(const CollArgs& a, const CommView& v) {
  Grid g(a, v);
  size_t e = a.elemSize;
  int parts = g.L * g.H;
  std::vector<Step> s;
  forEachRound(a.count, e, parts, v.chunkBytes, [&](size_t base, size_t len) {
    auto at = [&](int slice, int j) { return base * e + blockStart(len, parts, slice * g.H + j, e); };
    auto size = [&](int slice, int j) {
      int c = slice * g.H + j;
      return blockStart(len, parts, c + 1, e) - blockStart(len, parts, c, e);
    };
    for (int j = 0; j < g.H; ++j) {  // (a)
      Chunks c{[&](int x) { return in(at(x, j)); }, [&](int x) { return out(at(x, j)); },
               [&](int x) { return size(x, j); }};
      reduceRing(g.intra(), g.i, c, true, false, false, &s);
    }
    Chunks rail{[&](int j) { return out(at(g.i, j)); }, [&](int j) { return out(at(g.i, j)); },
                [&](int j) { return size(g.i, j); }};
    reduceRing(g.inter(), g.h, rail, false, true, true, &s);  // (b)
    gatherRing(g.inter(), g.h, rail, false, &s);
    for (int j = 0; j < g.H; ++j) {  // (c)
      Chunks c{[&](int x) { return out(at(x, j)); }, [&](int x) { return out(at(x, j)); },
               [&](int x) { return size(x, j); }};
      gatherRing(g.intra(), g.i, c, true, &s);
    }
  });
  return Lane{std::move(s)};
}

Lane allGatherLane(const CollArgs& a, const CommView& v) {
  Grid g(a, v);
  size_t e = a.elemSize, blk = a.count * e;
  std::vector<Step> s;
  if (!a.inPlace) s.push_back(makeStep(StepKind::kCopy, -1, -1, in(0), out(blk * a.rank), blk));
  forEachRound(a.count, e, 1, v.chunkBytes, [&](size_t base, size_t len) {
    size_t off = base * e, bytes = len * e;
    auto size = [&](int) { return bytes; };
    Chunks rail{[&](int) { return in(off); },
                [&](int host) { return out(g.rankAt(host, g.i) * blk + off); }, size};
    gatherRing(g.inter(), g.h, rail, true, &s);
    for (int host = 0; host < g.H; ++host) {
      Region mine = host == g.h ? in(off) : out(g.rankAt(host, g.i) * blk + off);
      Chunks c{[&](int) { return mine; }, [&](int x) { return out(g.rankAt(host, x) * blk + off); },
               size};
      gatherRing(g.intra(), g.i, c, true, &s);
    }
  });
  return Lane{std::move(s)};
}

// The longest round of AllGather/ReduceScatter (the first), in elements.
size_t firstRound(const CollArgs& a, const CommView& v) {
  if (v.chunkBytes == 0) return a.count;
  return std::min(a.count, std::max<size_t>(1, v.chunkBytes / a.elemSize));
}

Schedule reduceScatter(const CollArgs& a, const CommView& v) {
  Grid g(a, v);
  size_t e = a.elemSize, blk = a.count * e, slot = firstRound(a, v) * e;
  std::vector<Step> s;
  forEachRound(a.count, e, 1, v.chunkBytes, [&](size_t base, size_t len) {
    size_t off = base * e, bytes = len * e;
    auto size = [&](int) { return bytes; };
    for (int host = 0; host < g.H; ++host) {
      Chunks c{[&](int x) { return in(g.rankAt(host, x) * blk + off); },
               [&](int) { return scratch(host * slot); }, size};
      reduceRing(g.intra(), g.i, c, true, false, false, &s);
    }
    Chunks rail{[&](int host) { return scratch(host * slot); }, [&](int) { return out(off); }, size};
    reduceRing(g.inter(), g.h, rail, false, true, false, &s);
  });
  Schedule sched{"hier", {Lane{std::move(s)}}};
  sched.scratchBytes = g.H * slot;
  return sched;
}

}  // namespace

bool hierSupports(const CollArgs& a, const CommView& v) {
  bool kind = a.kind == CollKind::kAllReduce || a.kind == CollKind::kAllGather ||
              a.kind == CollKind::kReduceScatter;
  return kind && v.nHosts() >= 2 && v.uniformHosts() && v.hostRanks[0].size() >= 2;
}

Schedule hierSchedule(const CollArgs& a, const CommView& v) {
  switch (a.kind) {
    case CollKind::kAllReduce: return Schedule{"hier", {allReduceLane(a, v)}};
    case CollKind::kAllGather: return Schedule{"hier", {allGatherLane(a, v)}};
    case CollKind::kReduceScatter: return reduceScatter(a, v);
    default: return Schedule{};
  }
}

// Phases run one after the other on one lane, so their times add up. L ranks
// of a host cross the network at once through cost::nics(L) NICs; the
// intra-host rings pay one intra-host wait per step, H rings per phase. A
// wait here is a whole exchange start (cost::exchange: the wait and one
// message each way).
// AllReduce (B bytes, R rounds of L x H chunks):
//   2 R H (L-1) intra waits + 2 R (H-1) inter waits
//   + 2 (L-1)/L B over intra + 2 (H-1)/H B / nics(L) over the network
//   + reduction of (L-1)/L B + (H-1)/H B / L.
// AllGather / ReduceScatter (b bytes per rank, R rounds of one chunk):
//   R (H-1) inter waits + R H (L-1) intra waits + (H-1) b L / NICs over the
//   network + (L-1) H b over intra (+ the same reductions for ReduceScatter).
double hierCost(const CollArgs& a, const CommView& v) {
  double L = static_cast<double>(v.hostRanks[0].size()), H = v.nHosts();
  double nics = cost::nics(v, static_cast<int>(L));
  double b = static_cast<double>(a.count * a.elemSize);
  double li = cost::exchange(v, v.intra), ln = cost::exchange(v, v.inter);
  if (a.kind == CollKind::kAllReduce) {
    double rounds = cost::chunks(v, b / (L * H));
    return 2 * rounds * H * (L - 1) * li + cost::transfer(v, v.intra, 2 * (L - 1) / L * b) +
           cost::overlap(v, v.inter, 2 * rounds * (H - 1) * ln, cost::transfer(v, v.inter, 2 * (H - 1) / H * b / nics)) +
           cost::reduce(v, (L - 1) / L * b + (H - 1) / H * b / L);
  }
  double rounds = cost::chunks(v, b);
  double t = cost::overlap(v, v.inter, rounds * (H - 1) * ln, cost::transfer(v, v.inter, (H - 1) * b * L / nics)) +
             rounds * H * (L - 1) * li + cost::transfer(v, v.intra, (L - 1) * H * b);
  if (a.kind == CollKind::kReduceScatter) t += cost::reduce(v, (L - 1) * H * b + (H - 1) * b);
  return t;
}

}  // namespace ferry
