// What is specific to hier and pat beyond the data-flow checker's exactness
// (dataflow_test.cc runs both on every collective and host shape): which
// peers each step talks to, the phase structure, the number of steps, step
// sizes, where final values come from, and when they are supported.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/builders.h"
#include "algorithms/cost_model.h"

namespace ferry {
namespace {

// H hosts of L ranks; ranks interleaved over hosts when `roundRobin`.
CommView grid(int H, int L, size_t chunk = 0, bool roundRobin = false) {
  std::vector<uint64_t> hosts;
  for (int r = 0; r < H * L; ++r) hosts.push_back(roundRobin ? r % H : r / L);
  return makeView(hosts, chunk);
}

CollArgs args(CollKind k, int rank, int n, size_t count, size_t elem = 4) {
  CollArgs a;
  a.kind = k;
  a.rank = rank;
  a.nranks = n;
  a.count = count;
  a.elemSize = elem;
  return a;
}

constexpr CollKind kHierKinds[] = {CollKind::kAllReduce, CollKind::kAllGather,
                                   CollKind::kReduceScatter};

TEST(Hier, SupportsUniformMultiHostOnly) {
  CollArgs a = args(CollKind::kAllReduce, 0, 4, 10);
  EXPECT_TRUE(hierSupports(a, grid(2, 2)));
  EXPECT_TRUE(hierSupports(a, grid(2, 2, 0, true)));
  EXPECT_FALSE(hierSupports(a, grid(1, 4)));  // one host
  a.nranks = 3;
  EXPECT_FALSE(hierSupports(a, grid(3, 1)));  // one rank per host
  a.nranks = 5;
  EXPECT_FALSE(hierSupports(a, makeView({0, 0, 0, 1, 1})));  // uneven hosts
  a.nranks = 4;
  for (CollKind k : {CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllToAll}) {
    a.kind = k;
    EXPECT_FALSE(hierSupports(a, grid(2, 2)));
  }
}

// Inter-host steps only connect equal local ranks (the rank's rail); intra
// steps only the next and previous local rank; one lane.
TEST(Hier, InterHostStepsStayOnTheRail) {
  for (int H : {2, 3, 4})
    for (int L : {2, 3, 4})
      for (bool rr : {false, true})
        for (CollKind k : kHierKinds) {
          CommView v = grid(H, L, 256, rr);
          int n = H * L, inter = 0;
          for (int r = 0; r < n; ++r) {
            Schedule s = hierSchedule(args(k, r, n, 1000), v);
            ASSERT_EQ(s.lanes.size(), 1u);
            int me = v.localRankOf[r];
            for (const Step& st : s.lanes[0].steps)
              for (int p : {st.sendPeer, st.recvPeer}) {
                if (p < 0) continue;
                ASSERT_NE(p, r);
                if (v.sameHost(p, r)) {
                  int d = (v.localRankOf[p] - me + L) % L;
                  EXPECT_TRUE(d == 1 || d == L - 1) << "rank " << r << " peer " << p;
                } else {
                  EXPECT_EQ(v.localRankOf[p], me) << collName(k) << " rank " << r << " peer " << p;
                  inter++;
                }
              }
          }
          EXPECT_GT(inter, 0);
        }
}

Level levelOf(const CommView& v, int r, const Step& s) {
  int p = s.sendPeer >= 0 ? s.sendPeer : s.recvPeer;
  return p < 0 ? Level::kSelf : v.level(r, p);
}

// One round of AllReduce: H intra rings of L steps (reduce-scatter), the
// inter ring's 2H-1 steps, H intra rings of L steps (all-gather); scaling only
// in the first phase, one final value per round.
TEST(Hier, AllReducePhases) {
  int H = 3, L = 2, n = 6;
  CommView v = grid(H, L);
  for (int r = 0; r < n; ++r) {
    std::vector<Step> st = hierSchedule(args(CollKind::kAllReduce, r, n, 100), v).lanes[0].steps;
    ASSERT_EQ(st.size(), size_t(2 * H * L + 2 * H - 1));
    for (size_t j = 0; j < st.size(); ++j) {
      bool rail = j >= size_t(H * L) && j < size_t(H * L + 2 * H - 1);
      EXPECT_EQ(levelOf(v, r, st[j]), rail ? Level::kInterHost : Level::kIntraHost) << j;
      EXPECT_EQ(st[j].scaleSrc, j < size_t(H * L)) << j;
      EXPECT_EQ(st[j].finalValue, j == size_t(H * L + H - 1)) << j;
    }
  }
}

// Every element gets its final value on exactly one rank (the others copy
// it), which is why all ranks hold identical bits; and no step carries more
// than a chunk.
TEST(Hier, OneFinalValuePerElementAndChunkedSteps) {
  for (size_t count : {size_t(1), size_t(37), size_t(5000)})
    for (int H : {2, 3})
      for (int L : {2, 4}) {
        int n = H * L;
        size_t chunk = 256;
        CommView v = grid(H, L, chunk);
        std::vector<int> finals(count, 0);
        for (int r = 0; r < n; ++r) {
          Schedule s = hierSchedule(args(CollKind::kAllReduce, r, n, count), v);
          for (const Step& st : s.lanes[0].steps) {
            if (st.sendPeer >= 0 || st.recvPeer >= 0) {
              EXPECT_LE(st.bytes, chunk);
            }
            if (!st.finalValue) continue;
            ASSERT_EQ(st.dst.buf, kOutputBuf);
            for (size_t b = 0; b < st.bytes; b += 4) finals[(st.dst.offset + b) / 4]++;
          }
        }
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(finals[i], 1) << "element " << i;
      }
}

// AllGather moves over the network only its own rail's H-1 blocks per rank;
// ReduceScatter likewise: the bytes over the network are those of a ring
// among H ranks.
TEST(Hier, NetworkBytesAreOneRingOfHosts) {
  int H = 3, L = 4, n = 12;
  size_t count = 100;
  CommView v = grid(H, L);
  for (CollKind k : {CollKind::kAllGather, CollKind::kReduceScatter})
    for (int r = 0; r < n; ++r) {
      size_t sent = 0;
      Schedule s = hierSchedule(args(k, r, n, count), v);
      for (const Step& st : s.lanes[0].steps)
        if (st.sendPeer >= 0 && !v.sameHost(r, st.sendPeer)) sent += st.bytes;
      EXPECT_EQ(sent, (H - 1) * count * 4) << collName(k) << " rank " << r;
    }
}

TEST(Hier, CostFavoursRailsForLargeMessages) {
  CommView v = grid(4, 4, 1 << 19);
  v.nRails = 4;
  // Against the ring on two of the four rails (with a ring per rail the
  // model has the ring ahead: 15/16 vs hier's 3/4 of the bytes per rail,
  // but no intra-host phases).
  setRings(&v, 2);
  v.inter = LinkCost{10.0, 1000.0};
  v.intra = LinkCost{0.5, 8000.0};
  CollArgs a = args(CollKind::kAllReduce, 0, 16, 1 << 24);
  EXPECT_LT(hierCost(a, v), ringCost(a, v));
  EXPECT_GT(hierCost(a, v), 0.0);
}

// Every rank must predict the same cost, or ranks would choose different
// algorithms for one call (and hang): uneven hosts included.
TEST(HierPat, CostIsTheSameOnEveryRank) {
  CommView uneven = makeView({0, 1, 2, 0, 1}, 4096), even = grid(3, 2, 4096, true);
  for (CollKind k : kHierKinds)
    for (size_t count : {size_t(7), size_t(1000), size_t(1 << 20)}) {
      for (int r = 1; r < 5 && k != CollKind::kAllReduce; ++r)
        EXPECT_EQ(patCost(args(k, r, 5, count), uneven), patCost(args(k, 0, 5, count), uneven));
      for (int r = 1; r < 6; ++r)
        EXPECT_EQ(hierCost(args(k, r, 6, count), even), hierCost(args(k, 0, 6, count), even));
    }
}

// PAT: ceil(log2 n) steps per round, step k talks to r -/+ 2^k only, each
// step one message of at most a chunk, scratch bounded by the round.
TEST(Pat, StepsPeersAndBoundedScratch) {
  for (int n : {2, 3, 5, 8, 13, 64})
    for (CollKind k : {CollKind::kAllGather, CollKind::kReduceScatter}) {
      size_t chunk = 4096;
      std::vector<uint64_t> hosts;
      for (int r = 0; r < n; ++r) hosts.push_back(r);
      CommView v = makeView(hosts, chunk);
      int steps = cost::ceilLog2(n);
      for (int r = 0; r < n; ++r) {
        Schedule s = patSchedule(args(k, r, n, 3, 8), v);  // one round
        ASSERT_EQ(s.lanes.size(), 1u);
        std::vector<int> sends;
        for (const Step& st : s.lanes[0].steps) {
          if (st.sendPeer >= 0) {
            EXPECT_LE(st.bytes, chunk);
            sends.push_back(st.sendPeer);
          }
        }
        ASSERT_EQ(sends.size(), size_t(steps)) << n;
        for (int j = 0; j < steps; ++j) {
          int dist = 1 << (k == CollKind::kAllGather ? j : steps - 1 - j);
          int want = k == CollKind::kAllGather ? (r - dist + n) % n : (r + dist) % n;
          EXPECT_EQ(sends[j], want) << "n " << n << " rank " << r << " step " << j;
        }
        EXPECT_EQ(s.scratchBytes, size_t(n) * 3 * 8);
      }
      // A large message: rounds keep scratch within three chunks (n / m_max <= 3).
      Schedule big = patSchedule(args(k, 0, n, 1 << 20, 8), v);
      EXPECT_LE(big.scratchBytes, 3 * chunk + size_t(n) * 8) << n;
    }
}

}  // namespace
}  // namespace ferry
