// Binomial tree Broadcast and Reduce, rail-aware (tree_shape.h:
// binomialTree): across hosts between one leader per host, then inside each
// host from its leader, so the message crosses every host boundary once and
// leaves the root's host from the root itself.
//
// Pipelined in chunks of chunkBytes: a rank handles chunk k completely
// (Broadcast: receive it, then send it to each child in order, largest
// subtree first; Reduce: fold each child's chunk in, then send the sum up)
// before chunk k+1, on one lane: its parent and children are distinct peers,
// so the lane rule holds.
//
// No deadlock: data flows one way along a tree. A lane waits either for data
// from the one neighbour on the source side, or for room towards the sink
// side; by induction from the sinks (Broadcast: the leaves, which only
// receive; Reduce: the root, which only receives) every wait ends: a rank
// waiting for room waits on a neighbour nearer the sink that consumes in the
// order the data was produced, and a rank waiting for data waits on one that
// is nearer the source and itself not stuck.
//
// Reduce: the root computes the value once (Avg's division on its last
// fold); each rank's input is scaled where it enters (a leaf's Send, else
// its first fold). Non-root ranks have no output buffer to work in (NCCL
// does not require one), so a rank with several children accumulates a
// chunk in scratch.
#include <algorithm>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"
#include "algorithms/tree_shape.h"

namespace ferry {
namespace {

template <typename Body>
void forEachChunk(size_t count, size_t elem, size_t chunkBytes, Body body) {
  forEachRound(count, elem, 1, chunkBytes, [&](size_t base, size_t len) { body(base * elem, len * elem); });
}

Schedule broadcast(const CollArgs& a, const CommView& v, const RankTree& t) {
  Lane lane;
  size_t total = a.count * a.elemSize;
  bool root = a.rank == a.root;
  // The root's own copy after its first chunk's sends: the children read
  // while it copies.
  bool copyDue = root && !a.inPlace && total > 0;
  const std::vector<int>& kids = t.children[a.rank];
  forEachChunk(a.count, a.elemSize, v.chunkBytes, [&](size_t off, size_t bytes) {
    Region src{root ? kInputBuf : kOutputBuf, off};
    if (!root) lane.steps.push_back(makeStep(StepKind::kRecv, -1, t.parent[a.rank], {}, src, bytes));
    for (int c : kids) {
      Step st = sendStep(c, src, bytes);
      st.mappedRefOnly = true;
      lane.steps.push_back(st);
    }
    if (copyDue) lane.steps.push_back(makeStep(StepKind::kCopy, -1, -1, {kInputBuf, 0}, {kOutputBuf, 0}, total));
    copyDue = false;
  });
  Schedule s{"bintree", {}};
  if (!lane.steps.empty()) s.lanes.push_back(std::move(lane));
  return s;
}

Schedule reduce(const CollArgs& a, const CommView& v, const RankTree& t) {
  Lane lane;
  bool root = a.rank == a.root;
  int parent = t.parent[a.rank];
  // Reduce from the smallest subtree up: its chunk is ready first.
  std::vector<int> kids(t.children[a.rank].rbegin(), t.children[a.rank].rend());
  size_t longest = 0;
  forEachChunk(a.count, a.elemSize, v.chunkBytes, [&](size_t off, size_t bytes) {
    longest = std::max(longest, bytes);
    Region in{kInputBuf, off};
    Region acc = root ? Region{kOutputBuf, off} : Region{kScratchBuf, 0};
    if (kids.empty()) {
      Step st = sendStep(parent, in, bytes);
      st.scaleSrc = true;
      st.sendByValue = true;  // scaled, and the parent reduces it
      lane.steps.push_back(st);
      return;
    }
    for (size_t i = 0; i < kids.size(); ++i) {
      bool last = i + 1 == kids.size();
      bool up = last && !root;  // the sum goes on to the parent instead of into acc
      StepKind k = up ? StepKind::kRecvReduceSend : StepKind::kRecvReduceCopy;
      Step st = makeStep(k, up ? parent : -1, kids[i], i == 0 ? in : acc, up ? Region{} : acc, bytes);
      st.scaleSrc = i == 0;
      st.finalValue = last && root;
      lane.steps.push_back(st);
    }
  });
  Schedule s{"bintree", {}};
  if (!root && kids.size() > 1) s.scratchBytes = longest;
  if (!lane.steps.empty()) s.lanes.push_back(std::move(lane));
  return s;
}

}  // namespace

Schedule binomialTreeSchedule(const CollArgs& a, const CommView& v) {
  if (a.nranks == 1) {
    size_t bytes = a.count * a.elemSize;
    if (a.kind == CollKind::kReduce) return Schedule{"bintree", {singleCopy(bytes)}};
    if (a.inPlace || bytes == 0) return Schedule{"bintree", {}};
    return Schedule{"bintree", {Lane{{makeStep(StepKind::kCopy, -1, -1, {kInputBuf, 0}, {kOutputBuf, 0}, bytes)}}}};
  }
  RankTree t = binomialTree(v, a.root);
  return a.kind == CollKind::kBroadcast ? broadcast(a, v, t) : reduce(a, v, t);
}

bool binomialTreeSupports(const CollArgs& a, const CommView&) {
  return a.kind == CollKind::kBroadcast || a.kind == CollKind::kReduce;
}

// The root sends (Reduce: receives and folds) every chunk to each of its
// children in turn: ceil(log2 hosts) leaders across hosts, then
// ceil(log2 ranks per host) ranks inside its host, so it is busy
// hi x hop(inter) + li x hop(intra) per chunk. The first chunk reaches the
// last leaf after the same rounds, and the other chunks follow the root's
// pace: k chunks cost k times that. Reduce adds the root's folds.
double binomialTreeCost(const CollArgs& a, const CommView& v) {
  double bytes = static_cast<double>(a.count * a.elemSize);
  if (a.nranks == 1) return cost::transfer(v, v.self, bytes);
  size_t local = 1;
  for (const auto& h : v.hostRanks) local = std::max(local, h.size());
  int hi = cost::ceilLog2(v.nHosts()), li = cost::ceilLog2(static_cast<int>(local));
  double k = cost::chunks(v, bytes), piece = bytes / k;
  double perChunk = hi * cost::hop(v, v.inter, piece) + li * cost::hop(v, v.intra, piece);
  double folds = a.kind == CollKind::kReduce ? cost::reduce(v, (hi + li) * bytes) : 0.0;
  return k * perChunk + folds;
}

}  // namespace ferry
