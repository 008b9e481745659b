// Runs every rank's schedule in a network-free simulator (unbounded in-memory
// queues between ranks, int64 sums) and checks the results exactly. This tests
// the algorithms alone: no transport, executor or kernel is involved.
#include <gtest/gtest.h>

#include "algorithms/ring_order.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/builders.h"
#include "algorithms/tuner.h"

namespace ferry {
namespace {

using Bytes = std::vector<char>;

struct Sim {
  int n;
  std::vector<Schedule> scheds;
  std::vector<std::vector<Bytes>> bufs;  // [rank][buffer]
  std::map<std::pair<int, int>, std::deque<Bytes>> wires;

  char* at(int r, const Region& g) { return bufs[r][g.buf].data() + g.offset; }

  // memmove with 0 bytes: an empty buffer's data() is null, which memmove
  // must not be given even then (UBSan: nonnull argument).
  static void copyBytes(char* dst, const char* src, size_t bytes) {
    if (bytes) std::memmove(dst, src, bytes);
  }

  static void add(char* dst, const char* a, const char* b, size_t bytes) {
    for (size_t i = 0; i < bytes / 8; ++i) {
      int64_t x, y;
      std::memcpy(&x, a + 8 * i, 8);
      std::memcpy(&y, b + 8 * i, 8);
      x += y;
      std::memcpy(dst + 8 * i, &x, 8);
    }
  }

  // Execute one step if its input has arrived.
  bool tryStep(int r, const Step& s) {
    Bytes in;
    if (s.kind == StepKind::kLocalReduce) {
      add(at(r, s.dst), at(r, s.src), at(r, s.dst), s.bytes);
      return true;
    }
    if (s.kind != StepKind::kCopy && s.kind != StepKind::kSend) {
      auto& q = wires[{s.recvPeer, r}];
      if (q.empty()) return false;
      in = std::move(q.front());
      q.pop_front();
      EXPECT_EQ(in.size(), s.bytes) << "rank " << r << " " << stepName(s.kind);
      in.resize(s.bytes);
    }
    Bytes out(s.bytes);
    switch (s.kind) {
      case StepKind::kCopy: copyBytes(at(r, s.dst), at(r, s.src), s.bytes); return true;
      case StepKind::kSend:
        copyBytes(out.data(), at(r, s.src), s.bytes);
        if (s.alsoCopy) copyBytes(at(r, s.dst), at(r, s.src), s.bytes);
        break;
      case StepKind::kRecv: copyBytes(at(r, s.dst), in.data(), s.bytes); return true;
      case StepKind::kRecvReduceSend: add(out.data(), in.data(), at(r, s.src), s.bytes); break;
      case StepKind::kRecvReduceCopy: add(at(r, s.dst), in.data(), at(r, s.src), s.bytes); return true;
      case StepKind::kRecvReduceCopySend:
        add(at(r, s.dst), in.data(), at(r, s.src), s.bytes);
        copyBytes(out.data(), at(r, s.dst), s.bytes);
        break;
      case StepKind::kRecvCopySend:
        copyBytes(at(r, s.dst), in.data(), s.bytes);
        out = in;
        break;
      case StepKind::kLocalReduce:
        return true;
      case StepKind::kBarrier:  // symmetric schedules: symmetric_sim_test.cc
        ADD_FAILURE() << "barrier in a schedule without peer memory";
        return true;
    }
    wires[{r, s.sendPeer}].push_back(std::move(out));
    return true;
  }

  void run() {
    std::vector<std::vector<size_t>> pos(n);
    for (int r = 0; r < n; ++r) pos[r].assign(scheds[r].lanes.size(), 0);
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < n; ++r)
        for (size_t l = 0; l < scheds[r].lanes.size(); ++l) {
          auto& steps = scheds[r].lanes[l].steps;
          while (pos[r][l] < steps.size() && tryStep(r, steps[pos[r][l]])) {
            pos[r][l]++;
            moved = true;
          }
        }
    }
    for (int r = 0; r < n; ++r)
      for (size_t l = 0; l < pos[r].size(); ++l)
        ASSERT_EQ(pos[r][l], scheds[r].lanes[l].steps.size()) << "deadlock at rank " << r;
    for (auto& [k, q] : wires) EXPECT_TRUE(q.empty()) << "unconsumed data " << k.first << "->" << k.second;
  }
};

int64_t val(int rank, size_t i) { return rank * 1000003 + static_cast<int64_t>(i); }

// Builds schedules and buffers for `kind`; returns the simulator after running.
// `algo` forces a registry entry (null: the tuner's choice); rings follow
// the given order (null: rank order, one ring) or, with `rings`, all of those.
Sim simulate(CollKind kind, int n, size_t count, int root, size_t chunkBytes,
             const char* algo = nullptr, const std::vector<int>* ringOrder = nullptr,
             const std::vector<std::vector<int>>* rings = nullptr) {
  CommView v = makeView(std::vector<uint64_t>(n, 0), chunkBytes, algo && std::string(algo) == "twoshot");
  v.ringOrder = ringOrder ? *ringOrder : std::vector<int>();
  if (rings) {
    v.rings = *rings;
    v.ringOrder = rings->at(0);
  }
  Sim sim{n, {}, {}, {}};
  size_t inElems = count, outElems = count;
  if (kind == CollKind::kAllGather || kind == CollKind::kAllToAll) outElems = count * n;
  if (kind == CollKind::kReduceScatter || kind == CollKind::kAllToAll) inElems = count * n;
  if (kind == CollKind::kGather) outElems = count * n;
  if (kind == CollKind::kScatter) inElems = count * n;
  for (int r = 0; r < n; ++r) {
    CollArgs a{kind, r, n, root, count, 8, false};
    Result<Schedule> s = algo ? Result<Schedule>(findAlgorithm(algo)->build(a, v)) : selectSchedule(a, v);
    EXPECT_TRUE(s.isOk());
    // No (peer, direction) may be used by two lanes.
    std::set<std::pair<int, int>> used;
    for (auto& lane : s.value().lanes) {
      std::set<std::pair<int, int>> mine;
      for (auto& st : lane.steps) {
        if (st.sendPeer >= 0) mine.insert({st.sendPeer, 1});
        if (st.recvPeer >= 0) mine.insert({st.recvPeer, 0});
      }
      for (auto& u : mine) EXPECT_TRUE(used.insert(u).second) << "lanes share a connection";
    }
    sim.scheds.push_back(s.value());
    Bytes in(inElems * 8), out(outElems * 8, 0);
    for (size_t i = 0; i < inElems; ++i) {
      int64_t v = val(r, i);
      std::memcpy(in.data() + 8 * i, &v, 8);
    }
    sim.bufs.push_back({in, out, Bytes(s.value().scratchBytes)});
  }
  for (int r = 0; r < n; ++r)
    for (const Step& st : sim.scheds[r].prologue) sim.tryStep(r, st);
  sim.run();
  return sim;
}

int64_t outAt(Sim& s, int r, size_t i) {
  int64_t v;
  std::memcpy(&v, s.bufs[r][kOutputBuf].data() + 8 * i, 8);
  return v;
}

int64_t sumAt(int n, size_t i) {
  int64_t t = 0;
  for (int r = 0; r < n; ++r) t += val(r, i);
  return t;
}

class ScheduleSim : public ::testing::TestWithParam<std::tuple<int, size_t, size_t>> {};

TEST_P(ScheduleSim, AllCollectivesExact) {
  auto [n, count, chunk] = GetParam();
  {
    Sim s = simulate(CollKind::kAllReduce, n, count, 0, chunk);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(outAt(s, r, i), sumAt(n, i)) << "allreduce";
  }
  {
    // The one-hop direct AllReduce (selected for small messages).
    Sim s = simulate(CollKind::kAllReduce, n, count, 0, chunk, "direct");
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(outAt(s, r, i), sumAt(n, i)) << "direct allreduce";
  }
  {
    // The direct reduce-scatter + all-gather (large AllReduce on one machine).
    Sim s = simulate(CollKind::kAllReduce, n, count, 0, chunk, "twoshot");
    EXPECT_EQ(s.scheds[0].algorithm, "twoshot");
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(outAt(s, r, i), sumAt(n, i)) << "direct rs+ag";
  }
  {
    Sim s = simulate(CollKind::kReduceScatter, n, count, 0, chunk);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(outAt(s, r, i), sumAt(n, r * count + i));
  }
  {
    Sim s = simulate(CollKind::kAllGather, n, count, 0, chunk);
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(outAt(s, r, p * count + i), val(p, i));
  }
  {
    Sim s = simulate(CollKind::kAllToAll, n, count, 0, chunk);
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(outAt(s, r, p * count + i), val(p, r * count + i));
  }
  for (int root : {0, n - 1, n / 2}) {
    Sim b = simulate(CollKind::kBroadcast, n, count, root, chunk);
    Sim red = simulate(CollKind::kReduce, n, count, root, chunk);
    Sim g = simulate(CollKind::kGather, n, count, root, chunk);
    Sim sc = simulate(CollKind::kScatter, n, count, root, chunk);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(outAt(b, r, i), val(root, i));
        ASSERT_EQ(outAt(sc, r, i), val(root, r * count + i));
      }
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(outAt(red, root, i), sumAt(n, i));
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(outAt(g, root, p * count + i), val(p, i));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ScheduleSim,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{7},
                                                              size_t{1000}),
                                            // chunk bytes: one round, or rounds of 3 elements
                                            ::testing::Values(size_t{0}, size_t{24})));

// Ranks placed round-robin over two hosts (even ranks on one, odd on the
// other): the ring runs in the order 0 2 4 .. 1 3 5 .., so it crosses the
// host boundary twice, and every ring collective stays exact.
TEST(ScheduleSim, RingFollowsRingOrder) {
  for (int n : {2, 3, 5, 8}) {
    std::vector<int> order;
    for (int r = 0; r < n; r += 2) order.push_back(r);
    for (int r = 1; r < n; r += 2) order.push_back(r);
    size_t count = 37;
    for (size_t chunk : {size_t{0}, size_t{24}}) {
      Sim ar = simulate(CollKind::kAllReduce, n, count, 0, chunk, "ring", &order);
      for (int p = 0; p < n; ++p) {
        int r = order[p];
        EXPECT_EQ(ar.scheds[r].lanes[0].steps[0].sendPeer, order[(p + 1) % n]) << "n " << n;
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(outAt(ar, r, i), sumAt(n, i));
      }
      Sim rs = simulate(CollKind::kReduceScatter, n, count, 0, chunk, "ring", &order);
      Sim ag = simulate(CollKind::kAllGather, n, count, 0, chunk, "ring", &order);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(outAt(rs, r, i), sumAt(n, r * count + i)) << "reduce-scatter n " << n;
          for (int p = 0; p < n; ++p) ASSERT_EQ(outAt(ag, r, p * count + i), val(p, i));
        }
      for (int root = 0; root < n; ++root) {
        Sim b = simulate(CollKind::kBroadcast, n, count, root, chunk, "ring", &order);
        Sim red = simulate(CollKind::kReduce, n, count, root, chunk, "ring", &order);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(outAt(red, root, i), sumAt(n, i)) << "reduce root " << root;
          for (int r = 0; r < n; ++r) ASSERT_EQ(outAt(b, r, i), val(root, i));
        }
      }
    }
  }
}

// hostOf for `hosts` hosts of `perHost` ranks, placed round-robin.
std::vector<uint64_t> roundRobin(int hosts, int perHost) {
  std::vector<uint64_t> hostOf;
  for (int r = 0; r < hosts * perHost; ++r) hostOf.push_back(100 + r % hosts);
  return hostOf;
}

TEST(RingOrder, HostContiguous) {
  std::vector<uint64_t> hostOf = roundRobin(2, 3);  // ranks 0 2 4 on host A, 1 3 5 on B
  EXPECT_EQ(hostContiguousOrder(hostOf), (std::vector<int>{0, 2, 4, 1, 3, 5}));
}

// One ring per rail on multi-host communicators (ring_order_test.cc checks
// the orders): every collective that splits over them stays exact, with as
// many lanes as rings (fewer when there are fewer elements), and the lanes
// never share a connection direction (simulate() checks that).
TEST(ScheduleSim, RailRingsExact) {
  for (auto [hosts, perHost] : {std::pair{2, 2}, {2, 3}, {3, 2}, {4, 2}, {2, 4}, {3, 8}}) {
    std::vector<uint64_t> hostOf = roundRobin(hosts, perHost);
    std::vector<std::vector<int>> rings = makeView(hostOf).rings;
    ASSERT_EQ(rings.size(), size_t(hostPathCapacity(perHost))) << hosts << "x" << perHost;
    int n = hosts * perHost;
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}}) {
      for (size_t chunk : {size_t{0}, size_t{24}}) {
        Sim ar = simulate(CollKind::kAllReduce, n, count, 0, chunk, "ring", nullptr, &rings);
        Sim rs = simulate(CollKind::kReduceScatter, n, count, 0, chunk, "ring", nullptr, &rings);
        Sim ag = simulate(CollKind::kAllGather, n, count, 0, chunk, "ring", nullptr, &rings);
        EXPECT_EQ(ar.scheds[0].lanes.size(), std::min(rings.size(), count));
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(outAt(ar, r, i), sumAt(n, i)) << "allreduce " << hosts << "x" << perHost;
            ASSERT_EQ(outAt(rs, r, i), sumAt(n, r * count + i)) << "reduce-scatter";
            for (int p = 0; p < n; ++p) ASSERT_EQ(outAt(ag, r, p * count + i), val(p, i));
          }
      }
    }
  }
}

// Each lane of a rail-ring AllReduce talks to its ring's neighbours only.
TEST(ScheduleSim, RailRingLanesFollowTheirRing) {
  CommView v = makeView(roundRobin(3, 4));
  ASSERT_EQ(v.rings.size(), 4u);
  for (int r = 0; r < v.nranks; ++r) {
    Schedule s = ringSchedule(CollArgs{CollKind::kAllReduce, r, v.nranks, 0, 100, 4, false}, v);
    ASSERT_EQ(s.lanes.size(), 4u);
    for (size_t c = 0; c < 4; ++c) {
      const std::vector<int>& o = v.rings[c];
      size_t p = std::find(o.begin(), o.end(), r) - o.begin();
      for (const Step& st : s.lanes[c].steps) {
        if (st.sendPeer >= 0) {
          EXPECT_EQ(st.sendPeer, o[(p + 1) % o.size()]);
        }
        if (st.recvPeer >= 0) {
          EXPECT_EQ(st.recvPeer, o[(p + o.size() - 1) % o.size()]);
        }
      }
    }
  }
}

TEST(ScheduleSim, P2pLanesKeepOrderPerPeer) {
  std::vector<P2pOp> ops = {{true, 1, 8}, {false, 1, 8}, {true, 1, 16}, {true, 2, 8}};
  Schedule s = p2pSchedule(0, ops);
  ASSERT_EQ(s.lanes.size(), 3u);  // send->1 (two ops, in order), recv<-1, send->2
  for (auto& l : s.lanes)
    if (l.steps.size() == 2) {
      EXPECT_EQ(l.steps[0].src.buf, 0u);
      EXPECT_EQ(l.steps[1].src.buf, 2u);
    }
}

}  // namespace
}  // namespace ferry
