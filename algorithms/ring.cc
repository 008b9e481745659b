// Ring schedules: AllReduce, ReduceScatter, AllGather, Broadcast, Reduce.
//
// Every rank sends only to next = rank+1 and receives only from
// prev = rank-1, so each link carries the bandwidth-optimal 2(n-1)/n (or
// (n-1)/n) of the data, and one lane per rank keeps the connection order.
#include "algorithms/schedule.h"

namespace ferry {
namespace {

struct Ring {
  int rank, n, next, prev;
  explicit Ring(const CollArgs& a)
      : rank(a.rank), n(a.nranks), next((a.rank + 1) % a.nranks),
        prev((a.rank - 1 + a.nranks) % a.nranks) {}
  int mod(int c) const { return ((c % n) + n) % n; }
};

// Chunk c of a buffer of `total` elements split into n chunks.
struct Chunks {
  size_t total, elem;
  int n;
  size_t start(int c) const { return blockStart(total, n, c, elem); }
  size_t bytes(int c) const { return start(c + 1) - start(c); }
};

Step step(StepKind k, int sendPeer, int recvPeer, Region src, Region dst, size_t bytes) {
  Step s;
  s.kind = k;
  s.sendPeer = sendPeer;
  s.recvPeer = recvPeer;
  s.src = src;
  s.dst = dst;
  s.bytes = bytes;
  return s;
}

Region in(size_t off) { return Region{kInputBuf, off}; }
Region out(size_t off) { return Region{kOutputBuf, off}; }

// The single-rank case of every reducing collective: out = in (scaled, divided).
Lane singleCopy(size_t bytes) {
  Step s = step(StepKind::kCopy, -1, -1, in(0), out(0), bytes);
  s.scaleSrc = true;
  s.finalValue = true;
  return Lane{{s}};
}

// Reduce-scatter phase shared by AllReduce and ReduceScatter. `shift` picks
// which chunk a rank ends up owning: rank r finishes chunk r + 1 + shift.
// `outBase(c)` is where a finished chunk c goes in the output.
template <typename OutOffset>
void reducePhase(const Ring& r, const Chunks& ch, int shift, bool alsoSend, OutOffset outBase,
                 std::vector<Step>* steps) {
  int c0 = r.mod(r.rank + shift);
  Step first = step(StepKind::kSend, r.next, -1, in(ch.start(c0)), {}, ch.bytes(c0));
  first.scaleSrc = true;
  steps->push_back(first);
  for (int k = 1; k < r.n - 1; ++k) {
    int c = r.mod(r.rank + shift - k);
    Step s = step(StepKind::kRecvReduceSend, r.next, r.prev, in(ch.start(c)), {}, ch.bytes(c));
    s.scaleSrc = true;
    steps->push_back(s);
  }
  int c = r.mod(r.rank + shift - (r.n - 1));
  StepKind k = alsoSend ? StepKind::kRecvReduceCopySend : StepKind::kRecvReduceCopy;
  Step last = step(k, alsoSend ? r.next : -1, r.prev, in(ch.start(c)), out(outBase(c)), ch.bytes(c));
  last.scaleSrc = true;
  last.finalValue = true;
  steps->push_back(last);
}

Schedule allReduce(const CollArgs& a) {
  Ring r(a);
  Chunks ch{a.count, a.elemSize, a.nranks};
  std::vector<Step> s;
  reducePhase(r, ch, 0, true, [&](int c) { return ch.start(c); }, &s);
  // Gather phase: rank r owns chunk r+1 now and receives chunk r, r-1, ...
  for (int j = 1; j < r.n; ++j) {
    int c = r.mod(r.rank - j + 1);
    bool last = j == r.n - 1;
    s.push_back(step(last ? StepKind::kRecv : StepKind::kRecvCopySend, last ? -1 : r.next, r.prev,
                     {}, out(ch.start(c)), ch.bytes(c)));
  }
  return Schedule{"ring", {Lane{std::move(s)}}};
}

Schedule reduceScatter(const CollArgs& a) {
  Ring r(a);
  Chunks ch{a.count * a.nranks, a.elemSize, a.nranks};
  std::vector<Step> s;
  reducePhase(r, ch, -1, false, [](int) { return size_t{0}; }, &s);
  return Schedule{"ring", {Lane{std::move(s)}}};
}

Schedule allGather(const CollArgs& a) {
  Ring r(a);
  size_t block = a.count * a.elemSize;
  std::vector<Step> s;
  if (!a.inPlace) s.push_back(step(StepKind::kCopy, -1, -1, in(0), out(block * r.rank), block));
  s.push_back(step(StepKind::kSend, r.next, -1, in(0), {}, block));
  for (int j = 1; j < r.n; ++j) {
    int c = r.mod(r.rank - j);
    bool last = j == r.n - 1;
    s.push_back(step(last ? StepKind::kRecv : StepKind::kRecvCopySend, last ? -1 : r.next, r.prev,
                     {}, out(block * c), block));
  }
  return Schedule{"ring", {Lane{std::move(s)}}};
}

Schedule broadcast(const CollArgs& a) {
  Ring r(a);
  size_t bytes = a.count * a.elemSize;
  int pos = r.mod(r.rank - a.root);
  std::vector<Step> s;
  if (pos == 0) {
    if (!a.inPlace) s.push_back(step(StepKind::kCopy, -1, -1, in(0), out(0), bytes));
    s.push_back(step(StepKind::kSend, r.next, -1, in(0), {}, bytes));
  } else if (pos < r.n - 1) {
    s.push_back(step(StepKind::kRecvCopySend, r.next, r.prev, {}, out(0), bytes));
  } else {
    s.push_back(step(StepKind::kRecv, -1, r.prev, {}, out(0), bytes));
  }
  return Schedule{"ring", {Lane{std::move(s)}}};
}

Schedule reduce(const CollArgs& a) {
  Ring r(a);
  size_t bytes = a.count * a.elemSize;
  int pos = r.mod(r.rank - a.root - 1);  // the chain starts after the root, ends at it
  Step s;
  if (pos == 0) {
    s = step(StepKind::kSend, r.next, -1, in(0), {}, bytes);
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

Schedule ringSchedule(const CollArgs& a) {
  if (a.nranks == 1) {
    size_t bytes = a.count * a.elemSize;
    bool reducing = a.kind == CollKind::kAllReduce || a.kind == CollKind::kReduce ||
                    a.kind == CollKind::kReduceScatter;
    if (reducing) return Schedule{"ring", {singleCopy(bytes)}};
    if (a.inPlace) return Schedule{"ring", {}};
    return Schedule{"ring", {Lane{{step(StepKind::kCopy, -1, -1, in(0), out(0), bytes)}}}};
  }
  switch (a.kind) {
    case CollKind::kAllReduce: return allReduce(a);
    case CollKind::kReduceScatter: return reduceScatter(a);
    case CollKind::kAllGather: return allGather(a);
    case CollKind::kBroadcast: return broadcast(a);
    case CollKind::kReduce: return reduce(a);
    default: return Schedule{};
  }
}

}  // namespace ferry
