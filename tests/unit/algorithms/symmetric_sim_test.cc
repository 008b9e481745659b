// The symmetric schedules (algorithms/symmetric.cc) run in a simulator of
// shared memory: every rank's buffers are visible to all, barriers wait for
// every rank, and the ranks advance in several interleavings (round robin,
// reverse, one rank far ahead). A rank that finishes overwrites its input
// at once, as a caller reusing its buffer would, so a schedule that reads
// a peer's input after that peer could have returned gives wrong sums; and
// its output as it was then must be what it ends as (no peer writes it after
// it returned).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/tuner.h"

namespace ferry {
namespace {

using Bytes = std::vector<char>;

struct SymSim {
  int n;
  std::vector<Schedule> scheds;
  std::vector<std::vector<Bytes>> bufs;  // [rank][input, output, scratch]
  std::vector<size_t> pos;
  std::vector<int> arrived;              // barriers each rank has reached
  bool inPlace = false;                  // output is the input (AllReduce, Broadcast, AlltoAll)
  std::vector<Bytes> returned;           // each rank's output when it returned

  uint32_t outBuf() const { return inPlace ? kInputBuf : kOutputBuf; }
  char* at(int r, const Region& g) {
    uint32_t buf = g.buf == kOutputBuf ? outBuf() : g.buf;
    return bufs[g.peer >= 0 ? g.peer : r][buf].data() + g.offset;
  }

  bool step(int r) {
    const std::vector<Step>& steps = scheds[r].lanes[0].steps;
    if (pos[r] >= steps.size()) return false;
    const Step& s = steps[pos[r]];
    switch (s.kind) {
      case StepKind::kBarrier: {
        int mine = 0;
        for (size_t i = 0; i < pos[r]; ++i) mine += steps[i].kind == StepKind::kBarrier;
        arrived[r] = mine + 1;
        for (int p = 0; p < n; ++p)
          if (arrived[p] < mine + 1) return false;
        break;
      }
      case StepKind::kCopy:
        if (s.bytes) std::memmove(at(r, s.dst), at(r, s.src), s.bytes);
        break;
      case StepKind::kLocalReduce:
        for (size_t i = 0; i < s.bytes / 8; ++i) {
          int64_t x, y;
          std::memcpy(&x, at(r, s.src) + 8 * i, 8);
          std::memcpy(&y, at(r, s.dst) + 8 * i, 8);
          x += y;
          std::memcpy(at(r, s.dst) + 8 * i, &x, 8);
        }
        break;
      default:
        ADD_FAILURE() << "symmetric schedules only copy, reduce and wait: " << stepName(s.kind);
    }
    if (++pos[r] == steps.size()) {
      returned[r] = bufs[r][outBuf()];
      if (!inPlace) std::fill(bufs[r][kInputBuf].begin(), bufs[r][kInputBuf].end(), 0x5a);
    }
    return true;
  }

  // order 0: round robin one step each; 1: reverse; 2: each rank as far as it can.
  void run(int order) {
    for (bool moved = true; moved;) {
      moved = false;
      for (int k = 0; k < n; ++k) {
        int r = order == 1 ? n - 1 - k : k;
        if (order == 2) {
          while (step(r)) moved = true;
        } else {
          moved = step(r) || moved;
        }
      }
    }
    for (int r = 0; r < n; ++r) ASSERT_EQ(pos[r], scheds[r].lanes[0].steps.size()) << "stuck: rank " << r;
    for (int r = 0; r < n; ++r) ASSERT_TRUE(returned[r] == bufs[r][outBuf()]) << "written after it returned: rank " << r;
  }
};

int64_t val(int rank, size_t i) { return rank * 1000003 + static_cast<int64_t>(i); }

int64_t word(const Bytes& b, size_t i) {
  int64_t v;
  std::memcpy(&v, b.data() + 8 * i, 8);
  return v;
}

SymSim simulate(CollKind kind, int n, size_t count, int root, int order, bool inPlace = false) {
  CommView v = makeView(std::vector<uint64_t>(n, 0));
  SymSim sim{n, {}, {}, std::vector<size_t>(n, 0), std::vector<int>(n, 0), inPlace, std::vector<Bytes>(n)};
  bool wideIn = kind == CollKind::kReduceScatter || kind == CollKind::kScatter || kind == CollKind::kAllToAll;
  bool wideOut = kind == CollKind::kAllGather || kind == CollKind::kGather || kind == CollKind::kAllToAll;
  size_t in = wideIn ? count * n : count;
  size_t out = wideOut ? count * n : count;
  for (int r = 0; r < n; ++r) {
    CollArgs a{kind, r, n, root, count, 8, inPlace, true};
    EXPECT_TRUE(symmetricSupports(a, v));
    sim.scheds.push_back(symmetricSchedule(a, v));
    Bytes ib(in * 8), ob(out * 8, 0);
    for (size_t i = 0; i < in; ++i) {
      int64_t x = val(r, i);
      std::memcpy(ib.data() + 8 * i, &x, 8);
    }
    sim.bufs.push_back({ib, ob, Bytes(sim.scheds.back().scratchBytes, 0)});
  }
  sim.run(order);
  return sim;
}

int64_t sumAt(int n, size_t i) {
  int64_t t = 0;
  for (int r = 0; r < n; ++r) t += val(r, i);
  return t;
}

TEST(SymmetricSim, EveryKindExactInEveryOrder) {
  for (int n : {2, 3, 4, 5, 8})
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{9000}})
      for (int order : {0, 1, 2}) {
        SCOPED_TRACE("n " + std::to_string(n) + " count " + std::to_string(count) + " order " +
                     std::to_string(order));
        SymSim ar = simulate(CollKind::kAllReduce, n, count, 0, order);
        SymSim rs = simulate(CollKind::kReduceScatter, n, count, 0, order);
        SymSim ag = simulate(CollKind::kAllGather, n, count, 0, order);
        SymSim bc = simulate(CollKind::kBroadcast, n, count, n - 1, order);
        SymSim rd = simulate(CollKind::kReduce, n, count, n / 2, order);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(word(ar.bufs[r][kOutputBuf], i), sumAt(n, i)) << "AllReduce rank " << r;
            ASSERT_EQ(word(rd.bufs[r][kOutputBuf], i), r == n / 2 ? sumAt(n, i) : 0) << "Reduce rank " << r;
            ASSERT_EQ(word(rs.bufs[r][kOutputBuf], i), sumAt(n, r * count + i)) << "ReduceScatter";
            ASSERT_EQ(word(bc.bufs[r][kOutputBuf], i), val(n - 1, i)) << "Broadcast";
            for (int p = 0; p < n; ++p) ASSERT_EQ(word(ag.bufs[r][kOutputBuf], p * count + i), val(p, i));
          }
      }
}

// AlltoAll pushes into peers' outputs; in place it sends from a copy.
TEST(SymmetricSim, AlltoAllExactInEveryOrder) {
  for (int n : {2, 3, 4, 5, 8})
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}})
      for (int order : {0, 1, 2}) {
        SCOPED_TRACE("n " + std::to_string(n) + " count " + std::to_string(count) + " order " +
                     std::to_string(order));
        SymSim aa = simulate(CollKind::kAllToAll, n, count, 0, order);
        SymSim ai = simulate(CollKind::kAllToAll, n, count, 0, order, true);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i)
            for (int p = 0; p < n; ++p) {
              ASSERT_EQ(word(aa.bufs[r][kOutputBuf], p * count + i), val(p, r * count + i)) << "rank " << r;
              ASSERT_EQ(word(ai.bufs[r][kInputBuf], p * count + i), val(p, r * count + i)) << "in place " << r;
            }
      }
}

// Every rank count up to 64 (the data-flow checker's range for the FIFO
// algorithms, dataflow_test.cc), counts that leave some ranks' blocks empty.
TEST(SymmetricSim, EveryRankCountTo64) {
  for (int n = 2; n <= 64; ++n)
    for (size_t count : {size_t{1}, size_t{67}}) {
      SCOPED_TRACE("n " + std::to_string(n) + " count " + std::to_string(count));
      SymSim ar = simulate(CollKind::kAllReduce, n, count, 0, n % 3);
      SymSim rs = simulate(CollKind::kReduceScatter, n, count, 0, (n + 1) % 3);
      SymSim ag = simulate(CollKind::kAllGather, n, count, 0, (n + 2) % 3);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(word(ar.bufs[r][kOutputBuf], i), sumAt(n, i)) << "AllReduce rank " << r;
          ASSERT_EQ(word(rs.bufs[r][kOutputBuf], i), sumAt(n, r * count + i)) << "ReduceScatter";
          for (int p = 0; p < n; ++p) ASSERT_EQ(word(ag.bufs[r][kOutputBuf], p * count + i), val(p, i));
        }
    }
}

// In place (AllReduce, Broadcast, Reduce: the output is the input buffer), small and
// large, so both AllReduce variants run.
TEST(SymmetricSim, InPlaceExact) {
  for (int n : {2, 3, 4, 8})
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{200000}})
      for (int order : {0, 1, 2}) {
        SCOPED_TRACE("n " + std::to_string(n) + " count " + std::to_string(count) + " order " +
                     std::to_string(order));
        SymSim ar = simulate(CollKind::kAllReduce, n, count, 0, order, true);
        SymSim bc = simulate(CollKind::kBroadcast, n, count, 1, order, true);
        SymSim rd = simulate(CollKind::kReduce, n, count, n - 1, order, true);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(word(ar.bufs[r][kInputBuf], i), sumAt(n, i)) << "AllReduce rank " << r;
            ASSERT_EQ(word(rd.bufs[r][kInputBuf], i), r == n - 1 ? sumAt(n, i) : val(r, i)) << "Reduce rank " << r;
            ASSERT_EQ(word(bc.bufs[r][kInputBuf], i), val(1, i)) << "Broadcast rank " << r;
          }
      }
}

// Only calls whose buffers are in shared windows on one host qualify; the
// tuner takes it for a large AllReduce there.
TEST(SymmetricSim, SupportAndChoice) {
  CommView one = makeView(std::vector<uint64_t>(4, 0));
  CommView two = makeView({1, 1, 2, 2});
  CollArgs a{CollKind::kAllReduce, 0, 4, 0, 1 << 20, 4, false, true};
  EXPECT_TRUE(symmetricSupports(a, one));
  EXPECT_FALSE(symmetricSupports(a, two));
  CollArgs plain = a;
  plain.symmetric = false;
  EXPECT_FALSE(symmetricSupports(plain, one));
  CollArgs aa = a;
  aa.kind = CollKind::kAllToAll;
  EXPECT_TRUE(symmetricSupports(aa, one));
  EXPECT_FALSE(symmetricSupports(aa, two));
  for (CollKind k : {CollKind::kGather, CollKind::kScatter}) {
    CollArgs b = a;
    b.kind = k;
    EXPECT_FALSE(symmetricSupports(b, one)) << collName(k);
  }
  Result<Choice> c = chooseAlgorithm(a, one, CollFilter());
  ASSERT_TRUE(c.isOk());
  EXPECT_STREQ(c.value().algo->name, "symmetric");
}

// Whether a rooted call is in place is the root's alone to know (the
// buffer it names is ignored elsewhere), so the choice may not depend on
// it: the root and the others must pick the same algorithm at every size,
// or they run different schedules and hang (a root in place once costed
// symmetric Broadcast cheaper than the others did).
TEST(SymmetricSim, RootedChoiceIgnoresTheRootsInPlace) {
  for (CollKind kind : {CollKind::kBroadcast, CollKind::kReduce, CollKind::kGather, CollKind::kScatter}) {
    for (bool windows : {false, true}) {
      for (int n : {2, 3, 4, 8}) {
        CommView v = makeView(std::vector<uint64_t>(n, 0));
        for (size_t count = 1; count <= (size_t(1) << 28); count = count * 3 / 2 + 1) {
          CollArgs root{kind, 0, n, 0, count, 1, true, windows};
          CollArgs other = root;
          other.rank = 1;
          other.inPlace = false;
          Result<Choice> a = chooseAlgorithm(root, v, CollFilter());
          Result<Choice> b = chooseAlgorithm(other, v, CollFilter());
          ASSERT_TRUE(a.isOk() && b.isOk());
          EXPECT_STREQ(a.value().algo->name, b.value().algo->name)
              << collName(kind) << (windows ? " on windows, " : ", ") << n << " ranks, " << count << " bytes";
        }
      }
    }
  }
}

}  // namespace
}  // namespace ferry
