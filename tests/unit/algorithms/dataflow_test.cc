// The data-flow checker (label `sim`): for every collective x every
// algorithm able to run it, builds all ranks' schedules, runs them in the
// symbolic model (dataflow_model.h) with bounded FIFOs, and proves that every
// output element receives every required contribution exactly once (scaled
// once and divided once where the schedule's flags say so), and that nothing
// deadlocks or is left unread. n = 1..64 exhaustively, with host shapes of 1,
// 2, 4 and 8 ranks per host, round-robin and uneven placements; sampled n up
// to 1024.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/builders.h"
#include "algorithms/tuner.h"
#include "algorithms/ring_order.h"
#include "tests/unit/algorithms/dataflow_model.h"

namespace ferry::sim {
namespace {

// Connection capacities in 8-byte elements, scaled down from the defaults
// (shm 8 x 128 KiB, net 4 x 512 KiB) keeping their ratios, and the ring chunk
// the communicator derives from them (half the smallest FIFO, less 64 bytes).
constexpr WireShape kShm{8, 64};
constexpr WireShape kNet{4, 256};
constexpr size_t kChunkBytes = 8 * 64 * 8 / 2 - 64;

struct Case {
  CollKind kind;
  int n;
  size_t count;
  int root;
  bool inPlace;
  std::vector<uint64_t> hostOf;  // rank -> host
  bool allLocal;                 // one host, a core per rank (direct reduce-scatter/all-gather)
};

bool rooted(CollKind k) {
  return k == CollKind::kBroadcast || k == CollKind::kReduce || k == CollKind::kGather ||
         k == CollKind::kScatter;
}

size_t inElems(const Case& c) {
  bool wide = c.kind == CollKind::kReduceScatter || c.kind == CollKind::kAllToAll ||
              c.kind == CollKind::kScatter;
  return wide ? c.count * c.n : c.count;
}
size_t outElems(const Case& c) {
  bool wide = c.kind == CollKind::kAllGather || c.kind == CollKind::kAllToAll ||
              c.kind == CollKind::kGather;
  return wide ? c.count * c.n : c.count;
}

// What element i of rank r's output must hold; false when it is not defined
// (a non-root's Reduce or Gather output).
bool expected(const Case& c, int r, size_t i, Sym* want) {
  size_t cnt = c.count;
  Sym s;
  switch (c.kind) {
    case CollKind::kAllReduce:
    case CollKind::kReduce:
      if (c.kind == CollKind::kReduce && r != c.root) return false;
      for (int q = 0; q < c.n; ++q) s = plus(s, scaled(contribution(q, i)));
      *want = divided(s);
      return true;
    case CollKind::kReduceScatter:
      for (int q = 0; q < c.n; ++q) s = plus(s, scaled(contribution(q, r * cnt + i)));
      *want = divided(s);
      return true;
    case CollKind::kBroadcast: *want = contribution(c.root, i); return true;
    case CollKind::kAllGather: *want = contribution(static_cast<int>(i / cnt), i % cnt); return true;
    case CollKind::kGather:
      if (r != c.root) return false;
      *want = contribution(static_cast<int>(i / cnt), i % cnt);
      return true;
    case CollKind::kScatter: *want = contribution(c.root, r * cnt + i); return true;
    case CollKind::kAllToAll:
      *want = contribution(static_cast<int>(i / cnt), r * cnt + i % cnt);
      return true;
    default: return false;
  }
}

// Buffers of rank r as the API hands them over (NCCL's in-place layouts).
RankModel makeRank(const Case& c, int r, Schedule sched) {
  RankModel m;
  m.sched = std::move(sched);
  size_t in = inElems(c), out = outElems(c), off = r * c.count;
  bool isRoot = r == c.root;
  bool needSend = !((c.kind == CollKind::kBroadcast || c.kind == CollKind::kScatter) && !isRoot);
  bool needRecv = !((c.kind == CollKind::kReduce || c.kind == CollKind::kGather) && !isRoot);
  bool inPlace = c.inPlace && needSend && needRecv;
  m.store0.assign(std::max<size_t>(in, 1), Sym{0xbad0bad0bad0bad0ull, 1});
  m.store1.assign(std::max<size_t>(out, 1), Sym{0x5e7715e7715e7715ull, 1});
  m.buf[0] = m.store0.data();
  m.buf[1] = m.store1.data();
  if (inPlace && in > out) m.buf[1] = m.buf[0] + off;        // ReduceScatter, Scatter
  else if (inPlace && out > in) m.buf[0] = m.buf[1] + off;   // AllGather, Gather
  else if (inPlace) m.buf[0] = m.buf[1];
  if (needSend)
    for (size_t i = 0; i < in; ++i) m.buf[0][i] = contribution(r, i);
  m.scratch.resize(m.sched.scratchBytes / 8 + 1);
  m.buf[2] = m.scratch.data();
  return m;
}

// Runs case c with algorithm alg on every rank; "" when all is right.
std::string check(const Case& c, const Algorithm& alg) {
  CommView v = makeView(c.hostOf, kChunkBytes, c.allLocal);
  std::vector<RankModel> ranks;
  for (int r = 0; r < c.n; ++r) {
    CollArgs a{c.kind, r, c.n, c.root, c.count, 8, false};
    a.inPlace = c.inPlace;
    if (!alg.supports(a, v)) return r == 0 ? "" : "rank " + std::to_string(r) + " disagrees on support";
    ranks.push_back(makeRank(c, r, alg.build(a, v)));
  }
  DataflowModel model(std::move(ranks), [&c](int from, int to) {
    return c.hostOf[from] == c.hostOf[to] ? kShm : kNet;
  });
  std::string err = model.run();
  if (!err.empty()) return err;
  for (int r = 0; r < c.n; ++r)
    for (size_t i = 0; i < outElems(c); ++i) {
      Sym want;
      if (!expected(c, r, i, &want)) continue;
      Sym got = model.rank(r).buf[1][i];
      if (!(got == want))
        return "rank " + std::to_string(r) + " output element " + std::to_string(i) + " holds " +
               std::to_string(got.n) + " contributions with the wrong sum (want " +
               std::to_string(want.n) + ")";
    }
  return "";
}

std::string describe(const Case& c, const Algorithm& alg) {
  std::string hosts;
  for (uint64_t h : c.hostOf) hosts += std::to_string(h) + ",";
  return std::string(alg.name) + " " + collName(c.kind) + " n=" + std::to_string(c.n) + " count=" +
         std::to_string(c.count) + " root=" + std::to_string(c.root) + (c.inPlace ? " in-place" : "") +
         (c.allLocal ? " allLocal" : "") + " hosts=" + hosts;
}

// Host of each rank for shape s: 0 one host, 1/2/3 blocks of 2/4/8 ranks,
// 4 round-robin over 3 hosts, 5 uneven blocks (3, 1, 4, 1, 5, 9, 2, 6, ...).
std::vector<uint64_t> hostsFor(int n, int s) {
  static const int kUneven[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9};
  std::vector<uint64_t> h(n);
  for (int r = 0, block = 0, left = kUneven[0]; r < n; ++r) {
    switch (s) {
      case 0: h[r] = 0; break;
      case 1: h[r] = r / 2; break;
      case 2: h[r] = r / 4; break;
      case 3: h[r] = r / 8; break;
      case 4: h[r] = r % 3; break;
      default:
        if (left == 0) left = kUneven[++block % 15];
        h[r] = block;
        left--;
    }
  }
  return h;
}

constexpr CollKind kKinds[] = {CollKind::kAllReduce, CollKind::kBroadcast, CollKind::kReduce,
                               CollKind::kAllGather, CollKind::kReduceScatter, CollKind::kAllToAll,
                               CollKind::kGather, CollKind::kScatter};

// Every collective x algorithm for one n and shape; counts from one element
// to several ring rounds, both ends as root, in-place or not by count.
int runAll(int n, int shape, std::vector<size_t> counts) {
  int checked = 0;
  for (CollKind k : kKinds)
    for (size_t count : counts)
      for (int root : {0, n - 1}) {
        if (root != 0 && !rooted(k)) continue;
        for (bool inPlace : {false, true}) {
          Case c{k, n, count, root, inPlace, hostsFor(n, shape), false};
          c.allLocal = shape == 0 && n <= 2;  // a core per rank: only on tiny runs here
          for (const Algorithm& alg : algorithmRegistry()) {
            std::string err = check(c, alg);
            EXPECT_EQ(err, "") << describe(c, alg);
            if (!err.empty()) return checked;
            checked++;
          }
        }
      }
  return checked;
}

TEST(Dataflow, EveryCollectiveEveryAlgorithmUpTo64Ranks) {
  auto t0 = std::chrono::steady_clock::now();
  int checked = 0;
  size_t chunkElems = kChunkBytes / 8;
  for (int n = 1; n <= 64; ++n) {
    int shape = n % 6;
    checked += runAll(n, shape, {1, 7, chunkElems + 3});
    if (HasFailure()) return;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d case x algorithm runs, %.1f s\n", checked, s);
}

TEST(Dataflow, LargeCountsSeveralRounds) {
  size_t chunkElems = kChunkBytes / 8;
  for (int n : {2, 3, 4, 5, 8, 13})
    for (int shape = 0; shape < 6; ++shape) {
      runAll(n, shape, {n * chunkElems * 2 + 5});
      if (HasFailure()) return;
    }
}

TEST(Dataflow, AllHostShapesUpTo16Ranks) {
  for (int n = 1; n <= 16; ++n)
    for (int shape = 0; shape < 6; ++shape) {
      runAll(n, shape, {3, 65});
      if (HasFailure()) return;
    }
}

TEST(Dataflow, SampledUpTo1024Ranks) {
  auto t0 = std::chrono::steady_clock::now();
  for (int n : {96, 129, 257, 512, 1024}) {
    for (CollKind k : {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                       CollKind::kBroadcast}) {
      Case c{k, n, 5, n / 3, false, hostsFor(n, n % 6), false};
      for (const Algorithm& alg : algorithmRegistry()) {
        std::string err = check(c, alg);
        ASSERT_EQ(err, "") << describe(c, alg);
      }
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("sampled n up to 1024: %.1f s\n", s);
}

// The checker itself must catch what it claims to: a schedule that misses a
// scaling, divides twice, forwards its input instead of the reduced value, or
// sends less than the peer expects fails.
TEST(Dataflow, CatchesBrokenSchedules) {
  Case c{CollKind::kAllReduce, 4, 9, 0, false, hostsFor(4, 0), false};
  const Algorithm& ring = algorithmRegistry()[1];
  ASSERT_STREQ(ring.name, "ring");
  ASSERT_EQ(check(c, ring), "");
  auto mutate = [&](auto edit) {
    Algorithm broken{"broken", ring.supports, nullptr, ring.cost, ring.ncclAlgo, ring.ncclProto};
    static std::function<void(Schedule&)> f;
    f = edit;
    broken.build = [](const CollArgs& a, const CommView& v) {
      Schedule s = ringSchedule(a, v);
      if (a.rank == 1) f(s);
      return s;
    };
    return check(c, broken);
  };
  // Rank 1 never scales its input.
  EXPECT_NE(mutate([](Schedule& s) {
              for (auto& l : s.lanes)
                for (auto& st : l.steps) st.scaleSrc = false;
            }),
            "");
  // Rank 1 divides twice (its copy of the final values too).
  EXPECT_NE(mutate([](Schedule& s) {
              for (auto& l : s.lanes)
                for (auto& st : l.steps) st.finalValue = st.finalValue || st.kind == StepKind::kRecvReduceSend;
            }),
            "");
  // Rank 1 keeps the last piece of its first step (nothing arrives after it).
  EXPECT_NE(mutate([](Schedule& s) { s.lanes[0].steps[0].bytes -= 8; }), "");
  // Rank 1 drops the final division.
  EXPECT_NE(mutate([](Schedule& s) {
              for (auto& l : s.lanes)
                for (auto& st : l.steps) st.finalValue = false;
            }),
            "");
  // Rank 1 sends its own input instead of the reduced value.
  EXPECT_NE(mutate([](Schedule& s) {
              for (auto& l : s.lanes)
                for (auto& st : l.steps)
                  if (st.kind == StepKind::kRecvReduceSend) st.kind = StepKind::kRecvCopySend;
            }),
            "");
}

}  // namespace
}  // namespace ferry::sim
