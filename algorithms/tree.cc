// Double binary tree AllReduce (NCCL's "tree" algorithm).
//
// Two trees (tree_shape.h: hostDoubleTree) each carry half of the elements:
// tree 0 the first half, tree 1 the second. In a tree every chunk of
// chunkBytes is reduced up to the root (children -> parent), the root
// computes the final value once (Avg's division there, PreMulSum scaling
// where each rank's own input first enters a reduction), then broadcasts it
// down. Every rank therefore holds the root's bits: identical everywhere.
// Non-root ranks accumulate a chunk in their output's slot for it; the final
// value overwrites it only after it came back down, which needs our
// contribution to have reached the root first.
//
// Timing. Give every step a time unit: with H the tree's height and d a
// rank's depth, the rank reduces and sends chunk k up at k + H - d and
// receives and forwards it down at k + H + d (the root does both at k + H).
// A chunk sent at time t is received at exactly t + 1, every stream (a
// tree's up or down traffic on one connection direction) moves one chunk per
// time unit, and a connection direction carries at most two streams (one per
// tree). Within a unit a rank first receives (RecvReduceCopy, Recv), then
// sends (Send): no step both waits for data and for room.
//
// Lanes and deadlock freedom. Per tree a rank has an up lane (receive from
// children, send to the parent) and a down lane (receive from the parent,
// send to the children); the root has one lane for both, as its sends
// depend on its reductions. When two of a rank's lanes share a (peer,
// direction) pair - the trees share an edge, as with 2 or 3 ranks per host
// or ranks alone on their hosts - they are merged into one lane. Every lane
// lists its steps sorted by (time, receives before sends, tree), so a merged
// connection carries the trees' chunks in the same order at both ends.
// Then this run exists: in unit t, every rank first does all its receives of
// unit t (the data, sent in unit t-1, is at the head of each FIFO in the
// order the receiver expects), which empties every FIFO; then all sends of
// unit t, at most two steps of at most chunkBytes per connection direction,
// which fit in a FIFO (chunkBytes is at most half of one). Each lane is a
// sequential process on its own FIFO ends (the lane rule), so the system is
// a Kahn network whose completion does not depend on the order lanes run
// in: since one order completes, every order does.
#include <algorithm>
#include <array>
#include <numeric>
#include <tuple>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"
#include "algorithms/tree_shape.h"

namespace ferry {
namespace {

// A step with its place in the timed order and the lane class it came from.
struct Timed {
  long time;
  int phase;  // 0 receive, 1 send
  int tree;
  int seq;    // generation order, keeps the order among equal keys
  int cls;    // lane class: 2 * tree + (0 up or root, 1 down)
  Step step;
};

struct Range {
  size_t begin = 0, len = 0;  // elements
};

class TreeBuilder {
 public:
  TreeBuilder(const CollArgs& a, const CommView& v) : a_(a), v_(v) {}

  void addTree(int t, const RankTree& tree, Range rg) {
    size_t e = a_.elemSize;
    size_t chunk = v_.chunkBytes ? std::max<size_t>(1, v_.chunkBytes / e) : std::max<size_t>(rg.len, 1);
    long k = 0;
    for (size_t base = 0; base < rg.len; base += chunk, ++k) {
      size_t off = (rg.begin + base) * e, bytes = std::min(chunk, rg.len - base) * e;
      chunkSteps(t, tree, k, off, bytes);
    }
  }

  Schedule build() {
    // Union lane classes that share a (peer, direction) pair.
    std::array<int, 4> rep;
    std::iota(rep.begin(), rep.end(), 0);
    auto find = [&](int c) { while (rep[c] != c) c = rep[c]; return c; };
    std::vector<std::tuple<int, bool, int>> uses;  // peer, sends, class
    for (const Timed& s : steps_) {
      if (s.step.sendPeer >= 0) uses.emplace_back(s.step.sendPeer, true, s.cls);
      if (s.step.recvPeer >= 0) uses.emplace_back(s.step.recvPeer, false, s.cls);
    }
    std::sort(uses.begin(), uses.end());
    for (size_t i = 1; i < uses.size(); ++i)
      if (std::get<0>(uses[i]) == std::get<0>(uses[i - 1]) && std::get<1>(uses[i]) == std::get<1>(uses[i - 1]))
        rep[find(std::get<2>(uses[i]))] = find(std::get<2>(uses[i - 1]));
    std::stable_sort(steps_.begin(), steps_.end(), [](const Timed& x, const Timed& y) {
      return std::tie(x.time, x.phase, x.tree, x.seq) < std::tie(y.time, y.phase, y.tree, y.seq);
    });
    Schedule s{"tree", {}};
    std::array<int, 4> laneOf{-1, -1, -1, -1};
    for (const Timed& t : steps_) {
      int c = find(t.cls);
      if (laneOf[c] < 0) {
        laneOf[c] = static_cast<int>(s.lanes.size());
        s.lanes.emplace_back();
      }
      s.lanes[laneOf[c]].steps.push_back(t.step);
    }
    return s;
  }

 private:
  void add(int t, long time, int phase, int down, Step st) {
    steps_.push_back(Timed{time, phase, t, static_cast<int>(steps_.size()), 2 * t + down, st});
  }

  // Chunk k of tree t, elements at byte `off`, for this rank.
  void chunkSteps(int t, const RankTree& tree, long k, size_t off, size_t bytes) {
    int r = a_.rank, d = tree.depth[r], parent = tree.parent[r];
    const std::vector<int>& kids = tree.children[r];
    bool root = parent < 0;
    long up = k + tree.height - d, down = k + tree.height + d;
    Region in{kInputBuf, off}, out{kOutputBuf, off};
    // Up: fold the children into our output slot, our input entering first.
    for (size_t i = 0; i < kids.size(); ++i) {
      Step st = makeStep(StepKind::kRecvReduceCopy, -1, kids[i], i == 0 ? in : out, out, bytes);
      st.scaleSrc = i == 0;
      st.finalValue = root && i + 1 == kids.size();
      add(t, up, 0, 0, st);
    }
    if (!root) {
      Step st = makeStep(StepKind::kSend, parent, -1, kids.empty() ? in : out, {}, bytes);
      st.scaleSrc = kids.empty();
      st.sendByValue = true;  // the parent reduces it; our slot is rewritten later
      add(t, up, 1, 0, st);
      add(t, down, 0, 1, makeStep(StepKind::kRecv, -1, parent, {}, out, bytes));
    }
    // Down: the final value, from our output (stable from now on).
    for (int c : kids) add(t, down, 1, root ? 0 : 1, makeStep(StepKind::kSend, c, -1, out, {}, bytes));
  }

  const CollArgs& a_;
  const CommView& v_;
  std::vector<Timed> steps_;
};

// The element ranges of the two trees: the first half (rounded up) on
// tree 0, the rest on tree 1.
std::array<Range, 2> halves(size_t count) {
  size_t first = (count + 1) / 2;
  return {Range{0, first}, Range{first, count - first}};
}

}  // namespace

Schedule treeSchedule(const CollArgs& a, const CommView& v) {
  if (a.nranks == 1) return Schedule{"tree", {singleCopy(a.count * a.elemSize)}};
  TreeBuilder b(a, v);
  std::array<Range, 2> rg = halves(a.count);
  for (int t = 0; t < 2; ++t)
    if (rg[t].len > 0) b.addTree(t, hostDoubleTree(v, t), rg[t]);
  return b.build();
}

bool treeSupports(const CollArgs& a, const CommView&) { return a.kind == CollKind::kAllReduce; }

// The first piece of a tree climbs its longest path to the root, being
// reduced at every level, and comes back down: each hop costs its own level
// (a host's chain hops are shared memory, only the edges between hosts are
// network). The other K-1 pieces follow one stage apart, a stage being the
// work on one piece of both trees of the busiest host's NICs (every tree
// edge leaving a host carries a piece out of it, up or down) and of the
// busiest rank's CPU (handling its messages, copying the intra-host ones,
// reducing what its children sent).
namespace {

// What both trees put on each rank's CPU and each host's NICs per piece.
struct TreeLoad {
  std::vector<double> cpu;       // per rank: handling, intra-host copies, reductions
  std::vector<int> outOfHost;    // per host: pieces leaving it (one per crossing edge end)
  std::vector<int> crossers;     // per host: ranks with an edge to another host
  std::vector<int> treesLeaving; // per host: trees with an edge leaving it
};

TreeLoad treeLoad(const std::array<RankTree, 2>& trees, const CommView& v, double piece) {
  int n = v.nranks;
  TreeLoad L{std::vector<double>(n, 0.0), std::vector<int>(v.nHosts(), 0), std::vector<int>(v.nHosts(), 0),
             std::vector<int>(v.nHosts(), 0)};
  std::vector<bool> crosses(n, false);
  for (const RankTree& t : trees) {
    std::vector<bool> leaves(v.nHosts(), false);
    for (int r = 0; r < n; ++r) {
      std::vector<int> peers = t.children[r];
      if (t.parent[r] >= 0) peers.push_back(t.parent[r]);
      for (int p : peers) {
        const LinkCost& l = v.sameHost(r, p) ? v.intra : v.inter;
        L.cpu[r] += 2 * cost::overhead(v, l);  // a piece each way
        if (&l == &v.intra) L.cpu[r] += cost::transfer(v, l, piece);
        else L.outOfHost[v.hostOf[r]]++, crosses[r] = true, leaves[v.hostOf[r]] = true;
      }
      L.cpu[r] += cost::reduce(v, t.children[r].size() * piece);
    }
    for (int h = 0; h < v.nHosts(); ++h) L.treesLeaving[h] += leaves[h] ? 1 : 0;
  }
  for (int r = 0; r < n; ++r) L.crossers[v.hostOf[r]] += crosses[r] ? 1 : 0;
  return L;
}

double nicsOf(const TreeLoad& L, const CommView& v, int h) {
  return cost::nics(v, L.crossers[h]);
}

// The first piece's trip up to the root and back down, the longest over
// ranks and trees; both trees travel at once, sharing a host's NICs.
double firstPiece(const std::array<RankTree, 2>& trees, const CommView& v, const TreeLoad& L, double piece) {
  double nicShare = 1, path = 0;
  for (int h = 0; h < v.nHosts(); ++h) nicShare = std::max(nicShare, L.treesLeaving[h] / nicsOf(L, v, h));
  for (const RankTree& t : trees)
    for (int r = 0; r < v.nranks; ++r) {
      double up = 0, down = 0;
      for (int x = r; t.parent[x] >= 0; x = t.parent[x]) {
        bool local = v.sameHost(x, t.parent[x]);
        const LinkCost& l = local ? v.intra : v.inter;
        // Handled at both ends.
        double hop = cost::overlap(v, l, cost::exchange(v, l), cost::transfer(v, l, local ? piece : piece * nicShare));
        up += hop + cost::reduce(v, piece);
        down += hop;
      }
      path = std::max(path, up + down);
    }
  return path;
}

}  // namespace

double treeCost(const CollArgs& a, const CommView& v) {
  double bytes = static_cast<double>(a.count * a.elemSize);
  if (a.nranks == 1) return cost::transfer(v, v.self, bytes);
  std::array<RankTree, 2> trees{hostDoubleTree(v, 0), hostDoubleTree(v, 1)};
  double half = std::ceil(static_cast<double>(a.count) / 2) * a.elemSize;
  double k = cost::chunks(v, half), piece = half / k;
  TreeLoad L = treeLoad(trees, v, piece);
  double nic = 0;
  for (int h = 0; h < v.nHosts(); ++h)
    nic = std::max(nic, cost::transfer(v, v.inter, L.outOfHost[h] * piece / nicsOf(L, v, h)));
  // Added, as everywhere in the model (a socket network's copies are CPU
  // work too); only a token bucket's saved time overlaps them (cost::overlap).
  double cpu = *std::max_element(L.cpu.begin(), L.cpu.end());
  return firstPiece(trees, v, L, piece) + (k - 1) * cost::overlap(v, v.inter, cpu, nic);
}

}  // namespace ferry
