// Tree shapes (tree_shape.h) and what is specific to the tree schedules:
// NCCL's binary and double binary trees, the rank-level double tree with
// host chains, the rail-aware binomial tree, the lane rule on every rank,
// and that only a tree's root computes final values. Data flow, deadlock
// freedom and exactness are the data-flow checker's (dataflow_test.cc).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"
#include "algorithms/tree_shape.h"

namespace ferry {
namespace {

std::vector<uint64_t> blocks(int n, int perHost) {
  std::vector<uint64_t> h(n);
  for (int r = 0; r < n; ++r) h[r] = r / perHost;
  return h;
}

// Every node reached from the root, parents and children agree.
void expectSpanning(const RankTree& t, const char* what, int n) {
  ASSERT_EQ(static_cast<int>(t.parent.size()), n) << what;
  int roots = 0;
  for (int r = 0; r < n; ++r) {
    EXPECT_GE(t.depth[r], 0) << what << " n=" << n << " rank " << r << " unreachable";
    if (t.parent[r] < 0) roots++;
    for (int c : t.children[r]) EXPECT_EQ(t.parent[c], r) << what;
  }
  EXPECT_EQ(roots, 1) << what << " n=" << n;
}

std::set<std::pair<int, int>> edges(const RankTree& t) {
  std::set<std::pair<int, int>> e;
  for (int r = 0; r < static_cast<int>(t.parent.size()); ++r)
    if (t.parent[r] >= 0) e.insert({std::min(r, t.parent[r]), std::max(r, t.parent[r])});
  return e;
}

TEST(TreeShape, BinaryTreeIsNcclsBtree) {
  // NCCL's illustration for 14 nodes: 0-8, 8-4, 8-12, 4-2, 4-6, 12-10, 12-13, ...
  std::vector<int> p = btreeParents(14);
  std::vector<int> want = {-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12};
  EXPECT_EQ(p, want);
  for (int n = 1; n <= 1024; n += (n < 64 ? 1 : 37)) {
    RankTree t = treeFromParents(btreeParents(n));
    expectSpanning(t, "btree", n);
    EXPECT_LE(t.children[0].size(), 1u);
    for (int r = 0; r < n; ++r) EXPECT_LE(t.children[r].size(), 2u) << "n=" << n << " r=" << r;
    EXPECT_LE(t.height, cost::ceilLog2(n)) << "n=" << n;
  }
}

TEST(TreeShape, DoubleTreeComplementary) {
  for (int n = 2; n <= 1024; n += (n < 64 ? 1 : 37)) {
    RankTree t0 = treeFromParents(dtreeParents(n, 0)), t1 = treeFromParents(dtreeParents(n, 1));
    expectSpanning(t1, "dtree 1", n);
    EXPECT_NE(t0.parent, t1.parent) << "n=" << n;
    EXPECT_NE(t0.root, t1.root) << "n=" << n;
    EXPECT_LE(t1.height, cost::ceilLog2(n) + 1) << "n=" << n;
    for (int r = 0; r < n; ++r) EXPECT_LE(t1.children[r].size(), 2u);
    if ((n & (n - 1)) != 0) continue;
    // Power of two: no rank forwards in both trees.
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(t0.children[r].empty() || t1.children[r].empty()) << "n=" << n << " rank " << r;
  }
}

TEST(TreeShape, HostDoubleTreeChainsHangFromPorts) {
  for (int perHost : {1, 2, 3, 4, 8})
    for (int hosts : {1, 2, 3, 4, 5, 8}) {
      int n = perHost * hosts;
      CommView v = makeView(blocks(n, perHost));
      RankTree t0 = hostDoubleTree(v, 0), t1 = hostDoubleTree(v, 1);
      expectSpanning(t0, "host tree 0", n);
      expectSpanning(t1, "host tree 1", n);
      if (n > 1) {
        EXPECT_NE(t0.parent, t1.parent) << perHost << "x" << hosts;
      }
      // Inter-host edges only between ports: local 0 in tree 0, local 1 in tree 1.
      for (int t = 0; t < 2; ++t) {
        const RankTree& tr = t == 0 ? t0 : t1;
        int port = t == 0 || perHost < 2 ? 0 : 1;
        for (int r = 0; r < n; ++r) {
          int p = tr.parent[r];
          if (p >= 0 && !v.sameHost(r, p)) {
            EXPECT_EQ(v.localRankOf[r], port);
            EXPECT_EQ(v.localRankOf[p], port);
          }
        }
        // Chain below the port, hosts at depth ~log2: height <= host levels + chain.
        EXPECT_LE(tr.height, cost::ceilLog2(hosts) + 1 + perHost - 1) << perHost << "x" << hosts;
      }
      // From 4 ranks per host the two trees share no edge (separate lanes).
      if (perHost >= 4) {
        std::set<std::pair<int, int>> e0 = edges(t0), e1 = edges(t1);
        for (const auto& e : e1) EXPECT_EQ(e0.count(e), 0u) << perHost << "x" << hosts;
      }
    }
}

TEST(TreeShape, BinomialTreeCrossesEachHostOnce) {
  for (int perHost : {1, 2, 3, 4})
    for (int hosts : {1, 2, 3, 5, 8})
      for (int root : {0, perHost * hosts - 1, (perHost * hosts) / 2}) {
        int n = perHost * hosts;
        CommView v = makeView(blocks(n, perHost));
        RankTree t = binomialTree(v, root);
        expectSpanning(t, "binomial", n);
        EXPECT_EQ(t.root, root);
        int inter = 0;
        for (int r = 0; r < n; ++r)
          if (t.parent[r] >= 0 && !v.sameHost(r, t.parent[r])) {
            inter++;
            EXPECT_EQ(v.railOf[r], v.railOf[root]) << "leader off the root's rail";
          }
        EXPECT_EQ(inter, hosts - 1);
        // Binomial rounds: the root serves ceil(log2) children on each level.
        EXPECT_LE(t.height, cost::ceilLog2(hosts) + cost::ceilLog2(perHost)) << perHost << "x" << hosts;
        EXPECT_EQ(t.children[root].size(), static_cast<size_t>(cost::ceilLog2(hosts) + cost::ceilLog2(perHost)));
      }
}

// The lane rule on every rank, and final values (finalValue) produced only
// by the roots: every other rank receives them.
TEST(TreeSchedule, LaneRuleAndSingleFinalValue) {
  for (int perHost : {1, 2, 3, 4})
    for (int hosts : {1, 2, 3, 4, 5}) {
      int n = perHost * hosts;
      if (n < 2) continue;
      CommView v = makeView(blocks(n, perHost), 1024);
      std::set<int> roots{hostDoubleTree(v, 0).root, hostDoubleTree(v, 1).root};
      size_t maxLanes = 0;
      for (int r = 0; r < n; ++r) {
        CollArgs a{CollKind::kAllReduce, r, n, 0, 1000, 4, false};
        Schedule s = treeSchedule(a, v);
        maxLanes = std::max(maxLanes, s.lanes.size());
        std::map<std::pair<int, bool>, size_t> owner;
        bool finals = false;
        for (size_t i = 0; i < s.lanes.size(); ++i)
          for (const Step& st : s.lanes[i].steps) {
            finals |= st.finalValue;
            for (auto key : {std::make_pair(st.sendPeer, true), std::make_pair(st.recvPeer, false)}) {
              if (key.first < 0) continue;
              auto [it, fresh] = owner.emplace(key, i);
              EXPECT_EQ(it->second, i) << "rank " << r << " peer " << key.first << " in two lanes";
            }
          }
        EXPECT_EQ(finals, roots.count(r) == 1) << perHost << "x" << hosts << " rank " << r;
      }
      // Edge-disjoint trees run up and down lanes of both trees at once.
      if (perHost >= 4 && hosts >= 3) {
        EXPECT_EQ(maxLanes, 4u);
      }
      EXPECT_GE(maxLanes, 1u);
    }
}

TEST(TreeCost, GrowsWithSizeAndPrefersBintreeForSmallBroadcasts) {
  CommView v = makeView(blocks(16, 1), 1 << 19);
  CollArgs small{CollKind::kAllReduce, 0, 16, 0, 16, 4, false};
  CollArgs large = small;
  large.count = 1 << 24;
  EXPECT_LT(treeCost(small, v), treeCost(large, v));
  // 16 hosts: 4 binomial rounds against the ring's 15 hops.
  CollArgs b{CollKind::kBroadcast, 0, 16, 0, 16, 4, false};
  EXPECT_LT(binomialTreeCost(b, v), ringCost(b, v));
  // Tree AllReduce: ~2 log2(16) latencies against the ring's 30.
  EXPECT_LT(treeCost(small, v), ringCost(small, v));
}

}  // namespace
}  // namespace ferry
