// Ring schedules: AllReduce, ReduceScatter, AllGather, Broadcast, Reduce.
//
// Ranks sit on a ring in CommView::ringOrder (rank order when empty). Every
// rank sends only to the next position and receives only from the previous
// one, so each link carries the bandwidth-optimal 2(n-1)/n (or (n-1)/n) of
// the data, and one lane per ring keeps the connection order. AllReduce,
// ReduceScatter and AllGather split the elements over all of the view's
// rings (one per rail between hosts); Broadcast and Reduce run on ring 0. Chunk
// arithmetic runs on ring positions; blockOf() maps a position-indexed chunk
// back to the rank whose block it is (ReduceScatter/AllGather).
#include <algorithm>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"

namespace ferry {
namespace {

struct Ring {
  int pos, n, next, prev;  // pos: this rank's ring position
  const std::vector<int>* order;
  Ring(const CollArgs& a, const std::vector<int>& ringOrder)
      : pos(posOf(ringOrderOrNull(ringOrder), a.nranks, a.rank)), n(a.nranks),
        order(ringOrderOrNull(ringOrder)) {
    next = blockOf(mod(pos + 1));
    prev = blockOf(mod(pos - 1));
  }
  static int posOf(const std::vector<int>* order, int n, int r) {
    if (!order) return r;
    for (int p = 0; p < n; ++p)
      if ((*order)[p] == r) return p;
    return r;
  }
  static const std::vector<int>* ringOrderOrNull(const std::vector<int>& o) {
    return o.empty() ? nullptr : &o;
  }
  int posOfRank(int r) const { return posOf(order, n, r); }
  int mod(int c) const { return ((c % n) + n) % n; }
  // The rank at ring position p (= whose block chunk p is).
  int blockOf(int p) const { return order ? (*order)[p] : p; }
};

// forEachRound (schedule.h): a round of AllReduce spans n chunks of the
// buffer; one of ReduceScatter/AllGather moves the same slice of every
// rank's block.

constexpr auto step = makeStep;

Region in(size_t off) { return Region{kInputBuf, off}; }
Region out(size_t off) { return Region{kOutputBuf, off}; }

// Reduce-scatter phase shared by AllReduce and ReduceScatter. `shift` picks
// which chunk a rank ends up owning: rank r finishes chunk r + shift - (n-1).
// inAt(c)/outAt(c) give chunk c's input and output offsets.
template <typename In, typename Out, typename Bytes>
void reducePhase(const Ring& r, int shift, bool alsoSend, In inAt, Out outAt, Bytes bytes,
                 std::vector<Step>* steps) {
  int c0 = r.mod(r.pos + shift);
  Step first = step(StepKind::kSend, r.next, -1, in(inAt(c0)), {}, bytes(c0));
  first.scaleSrc = true;
  first.sendByValue = true;
  steps->push_back(first);
  for (int k = 1; k < r.n - 1; ++k) {
    int c = r.mod(r.pos + shift - k);
    Step s = step(StepKind::kRecvReduceSend, r.next, r.prev, in(inAt(c)), {}, bytes(c));
    s.scaleSrc = true;
    steps->push_back(s);
  }
  int c = r.mod(r.pos + shift - (r.n - 1));
  StepKind k = alsoSend ? StepKind::kRecvReduceCopySend : StepKind::kRecvReduceCopy;
  Step last = step(k, alsoSend ? r.next : -1, r.prev, in(inAt(c)), out(outAt(c)), bytes(c));
  last.scaleSrc = true;
  last.finalValue = true;
  steps->push_back(last);
}

// The elements [begin, begin + len) of each block, carried by one ring.
struct Range {
  size_t begin = 0, len = 0;
};

// The rings a call runs on: the view's rings, or only ringOrder when
// someone replaced it (tests; the other rings were built around rings[0]),
// at most one per element so that no ring idles.
std::vector<const std::vector<int>*> ringsFor(const CollArgs& a, const CommView& v) {
  if (v.rings.empty() || v.rings[0] != v.ringOrder) return {&v.ringOrder};
  size_t n = std::clamp<size_t>(a.count, 1, v.rings.size());
  std::vector<const std::vector<int>*> rings;
  for (size_t c = 0; c < n; ++c) rings.push_back(&v.rings[c]);
  return rings;
}

// The elements are split evenly over the rings (CommView::rings), each on
// its own lane: the rings leave every host from different local ranks,
// hence over different rails, and never share a connection direction.
template <typename LaneFn>
Schedule onRings(const CollArgs& a, const CommView& v, LaneFn laneFor) {
  std::vector<const std::vector<int>*> rings = ringsFor(a, v);
  int n = static_cast<int>(rings.size());
  Schedule s{"ring", {}};
  for (int c = 0; c < n; ++c) {
    size_t begin = blockStart(a.count, n, c, 1), end = blockStart(a.count, n, c + 1, 1);
    s.lanes.push_back(laneFor(Ring(a, *rings[c]), Range{begin, end - begin}, c == 0));
  }
  return s;
}

Lane allReduceLane(const CollArgs& a, size_t chunkBytes, const Ring& r, Range rg) {
  std::vector<Step> s;
  forEachRound(rg.len, a.elemSize, r.n, chunkBytes, [&](size_t base, size_t len) {
    size_t off = (rg.begin + base) * a.elemSize;
    auto at = [&](int c) { return off + blockStart(len, r.n, c, a.elemSize); };
    auto bytes = [&](int c) { return at(c + 1) - at(c); };
    reducePhase(r, 0, true, at, at, bytes, &s);
    // Gather phase: rank r owns chunk r+1 now and receives chunk r, r-1, ...
    for (int j = 1; j < r.n; ++j) {
      int c = r.mod(r.pos - j + 1);
      bool last = j == r.n - 1;
      s.push_back(step(last ? StepKind::kRecv : StepKind::kRecvCopySend, last ? -1 : r.next,
                       r.prev, {}, out(at(c)), bytes(c)));
    }
  });
  return Lane{std::move(s)};
}

Schedule allReduce(const CollArgs& a, const CommView& v) {
  return onRings(a, v, [&](const Ring& r, Range rg, bool) { return allReduceLane(a, v.chunkBytes, r, rg); });
}

Schedule reduceScatter(const CollArgs& a, const CommView& v) {
  size_t block = a.count * a.elemSize;
  return onRings(a, v, [&](const Ring& r, Range rg, bool) {
    std::vector<Step> s;
    forEachRound(rg.len, a.elemSize, 1, v.chunkBytes, [&](size_t base, size_t len) {
      size_t off = (rg.begin + base) * a.elemSize, bytes = len * a.elemSize;
      reducePhase(r, -1, false, [&](int c) { return r.blockOf(c) * block + off; },
                  [&](int) { return off; }, [&](int) { return bytes; }, &s);
    });
    return Lane{std::move(s)};
  });
}

Schedule allGather(const CollArgs& a, const CommView& v) {
  size_t block = a.count * a.elemSize;
  return onRings(a, v, [&](const Ring& r, Range rg, bool first) {
    std::vector<Step> s;
    // Our own block, whole, by the first lane (the other never writes it),
    // after the first send: the next rank reads while we copy.
    bool copyDue = first && !a.inPlace;
    forEachRound(rg.len, a.elemSize, 1, v.chunkBytes, [&](size_t base, size_t len) {
      size_t off = (rg.begin + base) * a.elemSize, bytes = len * a.elemSize;
      // By value at any size, as Broadcast (Step::mappedRefOnly): 4 ranks on
      // 2 cores, 64 KiB-16 MiB took 0.26-0.95 of the time by value instead
      // of by cross-memory attach (perf/README.md).
      Step send = step(StepKind::kSend, r.next, -1, in(off), {}, bytes);
      send.mappedRefOnly = true;
      s.push_back(send);
      if (copyDue) s.push_back(step(StepKind::kCopy, -1, -1, in(0), out(block * a.rank), block));
      copyDue = false;
      for (int j = 1; j < r.n; ++j) {
        int c = r.mod(r.pos - j);
        bool last = j == r.n - 1;
        s.push_back(step(last ? StepKind::kRecv : StepKind::kRecvCopySend, last ? -1 : r.next,
                         r.prev, {}, out(block * r.blockOf(c) + off), bytes));
      }
    });
    if (copyDue) s.push_back(step(StepKind::kCopy, -1, -1, in(0), out(block * a.rank), block));
    return Lane{std::move(s)};
  });
}

Schedule broadcast(const CollArgs& a, const CommView& v) {
  Ring r(a, v.ringOrder);
  size_t bytes = a.count * a.elemSize;
  int pos = r.mod(r.pos - r.posOfRank(a.root));
  std::vector<Step> s;
  if (pos == 0) {
    // Out of place, the send writes our output too (Step::alsoCopy), each
    // piece right after it is sent, while the next rank reads it (a separate
    // copy after the whole send kept a 2-rank 16-64 MiB Broadcast by value
    // at half the in-place speed).
    Step send = step(StepKind::kSend, r.next, -1, in(0), out(0), bytes);
    send.alsoCopy = !a.inPlace;
    send.mappedRefOnly = true;
    s.push_back(send);
  } else if (pos < r.n - 1) {
    s.push_back(step(StepKind::kRecvCopySend, r.next, r.prev, {}, out(0), bytes));
  } else {
    s.push_back(step(StepKind::kRecv, -1, r.prev, {}, out(0), bytes));
  }
  return Schedule{"ring", {Lane{std::move(s)}}};
}

Schedule reduce(const CollArgs& a, const CommView& v) {
  Ring r(a, v.ringOrder);
  size_t bytes = a.count * a.elemSize;
  int pos = r.mod(r.pos - r.posOfRank(a.root) - 1);  // the chain starts after the root, ends at it
  Step s;
  if (pos == 0) {
    s = step(StepKind::kSend, r.next, -1, in(0), {}, bytes);
    s.sendByValue = true;
  } else if (pos < r.n - 1) {
    s = step(StepKind::kRecvReduceSend, r.next, r.prev, in(0), {}, bytes);
  } else {
    s = step(StepKind::kRecvReduceCopy, -1, r.prev, in(0), out(0), bytes);
    s.finalValue = true;
  }
  s.scaleSrc = true;
  return Schedule{"ring", {Lane{{s}}}};
}

}  // namespace

Schedule ringSchedule(const CollArgs& a, const CommView& v) {
  if (a.nranks == 1) {
    size_t bytes = a.count * a.elemSize;
    bool reducing = a.kind == CollKind::kAllReduce || a.kind == CollKind::kReduce ||
                    a.kind == CollKind::kReduceScatter;
    if (reducing) return Schedule{"ring", {singleCopy(bytes)}};
    if (a.inPlace) return Schedule{"ring", {}};
    return Schedule{"ring", {Lane{{step(StepKind::kCopy, -1, -1, in(0), out(0), bytes)}}}};
  }
  switch (a.kind) {
    case CollKind::kAllReduce: return allReduce(a, v);
    case CollKind::kReduceScatter: return reduceScatter(a, v);
    case CollKind::kAllGather: return allGather(a, v);
    case CollKind::kBroadcast: return broadcast(a, v);
    case CollKind::kReduce: return reduce(a, v);
    default: return Schedule{};
  }
}

}  // namespace ferry

namespace ferry {

bool ringSupports(const CollArgs& a, const CommView&) {
  switch (a.kind) {
    case CollKind::kAllReduce: case CollKind::kBroadcast: case CollKind::kReduce:
    case CollKind::kAllGather: case CollKind::kReduceScatter:
      return true;
    default:
      return false;
  }
}

// Every step of a ring moves one chunk over every link at once, so a step
// lasts as long as the slowest link takes. R rings (AllReduce, ReduceScatter,
// AllGather) each carry 1/R of the bytes in their own rounds; when the
// slowest link is the network, ring c leaves every host on rail c, so the
// wire time divides by min(R, nRails) (rings beyond the rails share NICs).
// Within a host the rings gain nothing: every rank is on every ring and
// still copies all X bytes, so once the rails make the network fast enough
// the intra-host copies bound the time.
namespace {
double wireTime(const CommView& v, const LinkCost& l, double x, double parallel) {
  double t = cost::transfer(v, l, x / parallel);
  if (&l == &v.inter && v.nranks > v.nHosts()) t = std::max(t, cost::transfer(v, v.intra, x));
  return t;
}
}  // namespace

double ringCost(const CollArgs& a, const CommView& v) {
  int n = a.nranks;
  if (n == 1) return cost::transfer(v, v.self, static_cast<double>(a.count * a.elemSize));
  const LinkCost& l = v.slowest();
  bool split = a.kind == CollKind::kAllReduce || a.kind == CollKind::kReduceScatter ||
               a.kind == CollKind::kAllGather;
  double rings = split ? static_cast<double>(ringsFor(a, v).size()) : 1.0;
  double parallel = &l == &v.inter ? cost::nics(v, static_cast<int>(rings)) : 1.0;
  double bytes = static_cast<double>(a.count * a.elemSize);
  double f = (n - 1.0) / n;
  switch (a.kind) {
    case CollKind::kAllReduce: {
      double perRing = bytes / rings;
      double rounds = cost::chunks(v, perRing / n);
      // Each chunk's value travels 2(n-1) hops; a rank handles only the
      // steps whose block is not empty (fewer elements than ranks: most are).
      double elems = static_cast<double>(a.count) / rings;
      double busy = std::min(1.0, elems / n);
      return cost::overlap(v, l, 2 * (n - 1) * rounds * (cost::latency(v, l) + 2 * busy * cost::overhead(v, l)),
                           wireTime(v, l, 2 * f * bytes, parallel)) +
             cost::reduce(v, f * bytes);
    }
    case CollKind::kReduceScatter:
    case CollKind::kAllGather: {
      double rounds = cost::chunks(v, bytes / rings);
      double red = a.kind == CollKind::kReduceScatter ? cost::reduce(v, (n - 1) * bytes) : 0.0;
      return cost::overlap(v, l, (n - 1) * rounds * (cost::latency(v, l) + 2 * cost::overhead(v, l)),
                           wireTime(v, l, (n - 1) * bytes, parallel)) +
             red;
    }
    case CollKind::kBroadcast:
      return cost::chain(v, l, bytes, n - 1);
    case CollKind::kReduce:
      return cost::chain(v, l, bytes, n - 1) + cost::reduce(v, bytes);
    default:
      return 0.0;
  }
}

}  // namespace ferry
