// Rabenseifner AllReduce and Bruck AllGather/ReduceScatter: what is specific
// to their schedules (partners and their order, round counts, message sizes
// within a chunk, where PreMulSum and Avg apply, who computes each final
// value) and the costs' shape. Exact results, exactly-once contributions and
// deadlock freedom are the data-flow checker's (dataflow_test.cc).
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "algorithms/algo_filter.h"
#include "algorithms/algorithm.h"
#include "algorithms/builders.h"
#include "algorithms/cost_model.h"
#include "algorithms/tuner.h"

namespace ferry {
namespace {

CollArgs args(CollKind kind, int rank, int n, size_t count, size_t elem = 8) {
  CollArgs a{kind, rank, n, 0, count, elem, false};
  return a;
}

std::vector<uint64_t> blocksOf(int n, int perHost) {
  std::vector<uint64_t> h;
  for (int r = 0; r < n; ++r) h.push_back(r / perHost);
  return h;
}

// Peers of the sends of a schedule, in order, consecutive repeats merged (the
// last halving and the first doubling step share a partner).
std::vector<int> sendPeers(const Schedule& s) {
  std::vector<int> peers;
  for (const Step& st : s.lanes.at(0).steps)
    if (st.sendPeer >= 0 && (peers.empty() || peers.back() != st.sendPeer)) peers.push_back(st.sendPeer);
  return peers;
}

int countKind(const Schedule& s, StepKind k) {
  int c = 0;
  for (const Lane& l : s.lanes)
    for (const Step& st : l.steps) c += st.kind == k;
  return c;
}

TEST(Rabenseifner, NearRanksFirstOnContiguousHosts) {
  // 8 ranks, hosts of 4: halving with 1, 2 (same host), then 4 (other host);
  // the doubling mirrors it.
  CommView v = makeView(blocksOf(8, 4));
  Schedule s = rabenseifnerSchedule(args(CollKind::kAllReduce, 0, 8, 64), v);
  EXPECT_EQ(sendPeers(s), (std::vector<int>{1, 2, 4, 2, 1}));
  s = rabenseifnerSchedule(args(CollKind::kAllReduce, 5, 8, 64), v);
  EXPECT_EQ(sendPeers(s), (std::vector<int>{4, 7, 1, 7, 4}));
}

TEST(Rabenseifner, CrossingPairsLastOnRoundRobinHosts) {
  // Hosts r % 2: distance 1 always crosses, 2 and 4 never do.
  std::vector<uint64_t> h;
  for (int r = 0; r < 8; ++r) h.push_back(r % 2);
  Schedule s = rabenseifnerSchedule(args(CollKind::kAllReduce, 3, 8, 64), makeView(h));
  EXPECT_EQ(sendPeers(s), (std::vector<int>{1, 7, 2, 7, 1}));
}

TEST(Rabenseifner, FoldForNonPowersOfTwo) {
  CommView v = makeView(std::vector<uint64_t>(6, 0));
  // Rank 1 folds rank 5 in: receive its input, halve/double with 0 and 3,
  // send the result back.
  Schedule s = rabenseifnerSchedule(args(CollKind::kAllReduce, 1, 6, 64), v);
  EXPECT_EQ(s.lanes[0].steps[1].recvPeer, 5);
  EXPECT_EQ(sendPeers(s), (std::vector<int>{0, 3, 0, 5}));
  // Rank 5 only talks to rank 1; rank 2 does not fold.
  s = rabenseifnerSchedule(args(CollKind::kAllReduce, 5, 6, 64), v);
  EXPECT_EQ(sendPeers(s), (std::vector<int>{1}));
  EXPECT_EQ(countKind(s, StepKind::kRecv), 1);
  s = rabenseifnerSchedule(args(CollKind::kAllReduce, 2, 6, 64), v);
  EXPECT_EQ(sendPeers(s), (std::vector<int>{3, 0, 3}));
}

TEST(Rabenseifner, RoundsKeepEveryMessageWithinAChunk) {
  // 64-byte chunks of 4-byte elements: rounds of 32 elements, 1000 -> 32 rounds.
  for (int n : {2, 3, 4, 5, 8, 12}) {
    CommView v = makeView(blocksOf(n, 2), 64);
    for (int r = 0; r < n; ++r) {
      Schedule s = rabenseifnerSchedule(args(CollKind::kAllReduce, r, n, 1000, 4), v);
      int m = n >= 8 ? 8 : n >= 4 ? 4 : 2;
      int perRound = r >= m ? 2 : 0;
      for (int d = 1; d < m && r < m; d *= 2) perRound += 2;
      bool foldPair = r < n - m || r >= m;
      if (r < n - m) perRound += 2;  // two pieces of the round back to the extra rank
      // The last round (8 elements) is one fold piece.
      EXPECT_EQ(countKind(s, StepKind::kSend), 32 * perRound - (foldPair ? 1 : 0)) << "n " << n << " rank " << r;
      for (const Step& st : s.lanes[0].steps)
        if (st.sendPeer >= 0 || st.recvPeer >= 0) {
          EXPECT_LE(st.bytes, 64u) << "n " << n << " rank " << r;
        }
    }
  }
}

// Every output byte gets its final value (Avg's division) from exactly one
// rank, the others copy it; scaling happens on Copy/Send only.
TEST(Rabenseifner, EachFinalValueComputedOnce) {
  for (int n : {2, 3, 5, 6, 8, 11}) {
    size_t count = 37;
    std::vector<int> finals(count * 8, 0);
    CommView v = makeView(blocksOf(n, 4), 64);
    for (int r = 0; r < n; ++r) {
      Schedule s = rabenseifnerSchedule(args(CollKind::kAllReduce, r, n, count), v);
      for (const Step& st : s.lanes[0].steps) {
        bool reduces = st.kind == StepKind::kRecvReduceCopy || st.kind == StepKind::kLocalReduce;
        EXPECT_FALSE(st.scaleSrc && reduces) << "scaled inside a reduction, rank " << r;
        if (!st.finalValue) continue;
        EXPECT_EQ(st.kind, StepKind::kRecvReduceCopy);
        for (size_t b = 0; b < st.bytes; ++b) finals.at(st.dst.offset + b)++;
      }
    }
    for (size_t b = 0; b < finals.size(); ++b) ASSERT_EQ(finals[b], 1) << "n " << n << " byte " << b;
  }
}

TEST(Bruck, AllGatherPartnersAndSteps) {
  // n = 6: distances 1, 2, 4; rank 2 sends to 1, 0, 4 and receives from 3, 4, 0.
  CommView v = makeView(std::vector<uint64_t>(6, 0));
  Schedule s = bruckSchedule(args(CollKind::kAllGather, 2, 6, 3), v);
  EXPECT_EQ(sendPeers(s), (std::vector<int>{1, 0, 4}));
  std::vector<int> from;
  for (const Step& st : s.lanes[0].steps)
    if (st.recvPeer >= 0 && (from.empty() || from.back() != st.recvPeer)) from.push_back(st.recvPeer);
  EXPECT_EQ(from, (std::vector<int>{3, 4, 0}));
  // 1 + 2 + 2 blocks received, straight into their places: no rotation.
  size_t got = 0;
  for (const Step& st : s.lanes[0].steps)
    if (st.kind == StepKind::kRecv) got += st.bytes;
  EXPECT_EQ(got, 5u * 3 * 8);
  EXPECT_EQ(s.scratchBytes, 0u);
  for (int n = 1; n <= 40; ++n) {
    int steps = 0;
    while ((1 << steps) < n) ++steps;
    EXPECT_EQ(static_cast<int>(sendPeers(bruckSchedule(args(CollKind::kAllGather, 0, n, 1), makeView(
                  std::vector<uint64_t>(n, 0)))).size()),
              steps) << n;
  }
}

TEST(Bruck, ReduceScatterMirrorsAllGather) {
  // Top distance first: rank 2 of 6 sends to 6, 4, 3 mod 6.
  CommView v = makeView(std::vector<uint64_t>(6, 0));
  Schedule s = bruckSchedule(args(CollKind::kReduceScatter, 2, 6, 3), v);
  EXPECT_EQ(sendPeers(s), (std::vector<int>{0, 4, 3}));
  EXPECT_EQ(s.scratchBytes, 4u * 3 * 8);  // partials of the top step's 4 blocks
  int finals = 0;
  for (const Step& st : s.lanes[0].steps) {
    bool reduces = st.kind == StepKind::kRecvReduceCopy;
    EXPECT_FALSE(st.scaleSrc && reduces);
    if (st.finalValue) {
      finals++;
      EXPECT_EQ(st.dst.buf, kOutputBuf);
    }
    if (st.sendPeer >= 0) {
      EXPECT_TRUE(st.sendByValue);
    }
  }
  EXPECT_EQ(finals, 1);
}

TEST(Bruck, GroupsWithinAChunk) {
  // 64-byte chunks: blocks of one 8-byte element go 8 per group; blocks of
  // 20 elements go in slices of 8 elements, one per message.
  for (CollKind k : {CollKind::kAllGather, CollKind::kReduceScatter})
    for (int n : {3, 13, 33})
      for (size_t count : {size_t{1}, size_t{20}})
        for (int r : {0, n - 1}) {
          Schedule s = bruckSchedule(args(k, r, n, count), makeView(std::vector<uint64_t>(n, 0), 64));
          std::map<int, int> perPeer;
          for (const Step& st : s.lanes[0].steps) {
            if (st.sendPeer >= 0 || st.recvPeer >= 0) {
              EXPECT_LE(st.bytes, 64u);
            }
            if (st.sendPeer >= 0) perPeer[st.sendPeer] += static_cast<int>(st.bytes);
          }
          // Every peer of a step gets cnt blocks.
          size_t total = 0;
          for (auto& [p, b] : perPeer) total += b;
          EXPECT_EQ(total, (n - 1) * count * 8) << collName(k) << " n " << n;
        }
}

TEST(CostShape, RabenseifnerAndBruck) {
  // Many ranks, a mid-size message: fewer latencies than the ring for the
  // same bandwidth term; tiny messages stay with the one-hop algorithms.
  CommView v = makeView(blocksOf(64, 8), 512 * 1024);
  v.intra = LinkCost{1.0, 10000.0};
  v.inter = LinkCost{10.0, 1000.0};
  // The ring on two rails, as these bounds were set (its 8 rings per rail
  // would cut its network time by 4 more).
  setRings(&v, 2);
  CollArgs a = args(CollKind::kAllReduce, 0, 64, 16384, 4);
  EXPECT_LT(rabenseifnerCost(a, v), ringCost(a, v));
  a.count = 1 << 26;  // bandwidth-bound: within 25% of the ring
  EXPECT_LT(rabenseifnerCost(a, v), 1.25 * ringCost(a, v));
  EXPECT_GT(rabenseifnerCost(a, v), 0.75 * ringCost(a, v));
  a.kind = CollKind::kAllGather;
  a.count = 64;
  EXPECT_LT(bruckCost(a, v), ringCost(a, v));
  a.kind = CollKind::kReduceScatter;
  EXPECT_LT(bruckCost(a, v), ringCost(a, v));
  // Non-power of two: the fold costs extra.
  CollArgs b = args(CollKind::kAllReduce, 0, 6, 4096, 4);
  CollArgs c = args(CollKind::kAllReduce, 0, 4, 4096, 4);
  EXPECT_GT(rabenseifnerCost(b, makeView(std::vector<uint64_t>(6, 0))),
            rabenseifnerCost(c, makeView(std::vector<uint64_t>(4, 0))));
}

TEST(Registry, NamesAndCollectives) {
  const Algorithm* r = findAlgorithm("Rabenseifner");
  const Algorithm* b = findAlgorithm("bruck");
  ASSERT_TRUE(r && b);
  CommView v = makeView(std::vector<uint64_t>(4, 0));
  for (CollKind k : {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                     CollKind::kBroadcast, CollKind::kReduce}) {
    EXPECT_EQ(r->supports(args(k, 0, 4, 1), v), k == CollKind::kAllReduce);
    EXPECT_EQ(b->supports(args(k, 0, 4, 1), v), k == CollKind::kAllGather || k == CollKind::kReduceScatter);
  }
  Result<CollFilter> f = parseAlgoFilter("bruck");
  ASSERT_TRUE(f.isOk());
  CollArgs a = args(CollKind::kAllGather, 0, 4, 1 << 20);
  EXPECT_EQ(selectSchedule(a, v, f.value()).value().algorithm, "bruck");
}


// A token-bucket link (LinkCost::burstBytes) lets waits hide wire time,
// up to its bucket; a wire (burst 0) adds them.
TEST(CostShape, TokenBucketOverlapsWaitsWithWireTime) {
  CommView v = makeView(blocksOf(4, 1));
  v.inter = LinkCost{1.0, 125.0, 5.0};  // 1 Gbit/s
  EXPECT_DOUBLE_EQ(cost::overlap(v, v.inter, 10, 30), 40);
  v.inter.burstBytes = 125.0 * 5;       // 5 us of credit
  EXPECT_DOUBLE_EQ(cost::overlap(v, v.inter, 10, 30), 35);
  v.inter.burstBytes = 131072;
  EXPECT_DOUBLE_EQ(cost::overlap(v, v.inter, 10, 30), 30);
  EXPECT_DOUBLE_EQ(cost::overlap(v, v.inter, 10, 4), 10);
  EXPECT_DOUBLE_EQ(cost::overlap(v, v.intra, 10, 30), 40);  // only the bucket's link
  // 4 hosts x 1 rank, 8 KiB (measured: recursive doubling 131-140 us, its
  // wire time; Rabenseifner 108-146 us): the bucket turns the choice.
  v.oversubscription = 2;
  CollArgs a = args(CollKind::kAllReduce, 0, 4, 2048, 4);
  v.inter.burstBytes = 0;
  double wire = recursiveDoublingCost(a, v);
  EXPECT_LT(wire, rabenseifnerCost(a, v));
  v.inter.burstBytes = 131072;
  EXPECT_GT(recursiveDoublingCost(a, v), rabenseifnerCost(a, v));
  // Both steps' waits (1 us + 2 x 5 us x 2 ranks per core) are hidden.
  EXPECT_NEAR(recursiveDoublingCost(a, v), wire - 2 * 21.0, 1e-9);
}

// On a software link (veths between namespaces) ranks of a host that cross
// at once do not share a NIC. 2 hosts x 2 ranks, 32 KiB, this machine's view
// (measured: recursive doubling 50.6 us, Rabenseifner 67 us).
TEST(CostShape, SoftwareLinksDoNotShareANic) {
  CommView v = makeView(blocksOf(4, 2));
  v.self = LinkCost{0.1, 14066.0, 0.0};
  v.intra = LinkCost{0.516, 7033.0, 0.3};
  v.inter = LinkCost{1.0, 1250.0, 5.0};
  v.reduceBytesPerUs = 9570.0;
  v.oversubscription = 2;
  v.nRails = 1;
  CollArgs a = args(CollKind::kAllReduce, 0, 4, 8192, 4);
  EXPECT_DOUBLE_EQ(cost::nics(v, 2), 1.0);
  EXPECT_GT(recursiveDoublingCost(a, v), rabenseifnerCost(a, v));
  v.inter.software = true;
  EXPECT_DOUBLE_EQ(cost::nics(v, 2), 2.0);
  EXPECT_LT(recursiveDoublingCost(a, v), rabenseifnerCost(a, v));
  v.nRails = 4;  // rails beyond the crossing ranks change nothing
  EXPECT_DOUBLE_EQ(cost::nics(v, 2), 2.0);
  v.inter.software = false;
  EXPECT_DOUBLE_EQ(cost::nics(v, 2), 2.0);
  EXPECT_DOUBLE_EQ(cost::nics(v, 8), 4.0);
}

}  // namespace
}  // namespace ferry
