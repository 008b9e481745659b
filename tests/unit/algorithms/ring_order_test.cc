// Ring orders (ring_order.h): the per-rail rings of multi-host views never
// share a connection direction, ring c leaves every host from local rank c,
// and the ring count follows rails, host sizes and the 8-ring cap.
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "algorithms/comm_view.h"
#include "algorithms/ring_order.h"

namespace ferry {
namespace {

// Directed edges of a ring (rank -> next rank).
std::set<std::pair<int, int>> edges(const std::vector<int>& ring) {
  std::set<std::pair<int, int>> e;
  for (size_t p = 0; p < ring.size(); ++p) e.insert({ring[p], ring[(p + 1) % ring.size()]});
  return e;
}

// Every ring is a permutation of all ranks visiting each host as one block,
// hosts in order, leaving host h from its local rank c; no directed edge is
// in two rings.
void checkRings(const std::vector<std::vector<int>>& hostRanks, const std::vector<std::vector<int>>& rings) {
  int n = 0;
  for (const auto& h : hostRanks) n += static_cast<int>(h.size());
  std::set<std::pair<int, int>> seen;
  for (size_t c = 0; c < rings.size(); ++c) {
    const std::vector<int>& ring = rings[c];
    ASSERT_EQ(ring.size(), size_t(n));
    EXPECT_EQ(std::set<int>(ring.begin(), ring.end()).size(), size_t(n)) << "ring " << c;
    size_t pos = 0;
    for (const auto& h : hostRanks) {
      std::set<int> block(ring.begin() + pos, ring.begin() + pos + h.size());
      EXPECT_EQ(block, std::set<int>(h.begin(), h.end())) << "ring " << c << " splits a host";
      pos += h.size();
      EXPECT_EQ(ring[pos - 1], h[c]) << "ring " << c << " leaves a host from another local rank";
    }
    for (auto e : edges(ring)) EXPECT_TRUE(seen.insert(e).second) << "rings share " << e.first << "->" << e.second;
  }
  for (size_t a = 0; a < rings.size(); ++a)
    for (size_t b = a + 1; b < rings.size(); ++b) EXPECT_FALSE(ringsShareDirection(rings[a], rings[b]));
}

// Host h holds sizes[h] ranks; ranks are dealt round-robin over the hosts
// that still have room, so hosts interleave in rank order.
std::vector<std::vector<int>> interleavedHosts(const std::vector<int>& sizes) {
  std::vector<std::vector<int>> hosts(sizes.size());
  for (int r = 0, left = 1; left;) {
    left = 0;
    for (size_t h = 0; h < sizes.size(); ++h)
      if (int(hosts[h].size()) < sizes[h]) hosts[h].push_back(r++), left = 1;
  }
  return hosts;
}

TEST(RingOrder, HostPathsAreArcDisjointAndEndAtTheirRing) {
  for (int p = 1; p <= 17; ++p) {
    int cap = hostPathCapacity(p);
    EXPECT_EQ(cap, p == 1 ? 1 : p % 2 ? p - 1 : p);
    std::set<std::pair<int, int>> arcs;
    for (int c = 0; c < cap; ++c) {
      std::vector<int> path = hostPath(p, c);
      ASSERT_EQ(path.size(), size_t(p));
      EXPECT_EQ(std::set<int>(path.begin(), path.end()).size(), size_t(p));
      EXPECT_EQ(path.back(), c);
      for (size_t i = 0; i + 1 < path.size(); ++i)
        EXPECT_TRUE(arcs.insert({path[i], path[i + 1]}).second) << "p " << p << " c " << c;
    }
  }
}

// 2..8 rails x 2..8 ranks per host x 2..5 hosts.
TEST(RingOrder, OneRingPerRail) {
  for (int rails = 2; rails <= 8; ++rails)
    for (int perHost = 2; perHost <= 8; ++perHost)
      for (int hosts = 2; hosts <= 5; ++hosts) {
        auto hostRanks = interleavedHosts(std::vector<int>(hosts, perHost));
        auto rings = railRings(hostRanks, rails);
        int want = std::min(rails, hostPathCapacity(perHost));
        ASSERT_EQ(rings.size(), size_t(want)) << rails << " rails " << hosts << "x" << perHost;
        SCOPED_TRACE(std::to_string(rails) + " rails " + std::to_string(hosts) + "x" + std::to_string(perHost));
        checkRings(hostRanks, rings);
      }
}

// Hosts of different sizes: the smallest host bounds the rings.
TEST(RingOrder, UnevenHosts) {
  for (const auto& sizes : std::vector<std::vector<int>>{{2, 3}, {3, 5, 4}, {8, 6, 7}, {4, 9, 2, 8}}) {
    auto hostRanks = interleavedHosts(sizes);
    int cap = kMaxRings;
    for (int s : sizes) cap = std::min(cap, hostPathCapacity(s));
    auto rings = railRings(hostRanks, 8);
    ASSERT_EQ(rings.size(), size_t(cap));
    checkRings(hostRanks, rings);
  }
}

TEST(RingOrder, Limits) {
  // One host: its ranks in order, one ring, whatever the rails.
  EXPECT_EQ(railRings({{0, 1, 2, 3}}, 4), (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
  // A host with one rank: one ring.
  EXPECT_EQ(railRings({{0, 2}, {1}}, 4).size(), 1u);
  // Never more than 8, never fewer than 1.
  auto big = interleavedHosts({12, 12});
  EXPECT_EQ(railRings(big, 16).size(), 8u);
  EXPECT_EQ(railRings(big, 0).size(), 1u);
  checkRings(big, railRings(big, 16));
  // 2 hosts x 2 ranks: ring 0 leaves from local 0, ring 1 from local 1.
  EXPECT_EQ(railRings({{0, 1}, {2, 3}}, 2), (std::vector<std::vector<int>>{{1, 0, 3, 2}, {0, 1, 2, 3}}));
  EXPECT_TRUE(ringsShareDirection({0, 1, 2, 3}, {1, 2, 0, 3}));
  EXPECT_FALSE(ringsShareDirection({0, 1, 2, 3}, {3, 2, 1, 0}));
}

// makeView: a NIC per rank (nRails = the largest host), so as many rings as
// the hosts allow; setRings lowers them; ringOrder is ring 0.
TEST(RingOrder, ViewRings) {
  CommView v = makeView({5, 5, 5, 5, 9, 9, 9, 9});
  EXPECT_EQ(v.nRails, 4);
  ASSERT_EQ(v.rings.size(), 4u);
  EXPECT_EQ(v.ringOrder, v.rings[0]);
  setRings(&v, 2);
  EXPECT_EQ(v.rings.size(), 2u);
  EXPECT_EQ(v.ringOrder, v.rings[0]);
  EXPECT_EQ(makeView({1, 1, 1}).rings.size(), 1u);
  EXPECT_EQ(makeView({1, 1, 1}).ringOrder, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace ferry
