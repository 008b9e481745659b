// Recursive doubling AllReduce in a network-free simulator that, unlike
// schedule_sim_test's, models bounded FIFOs (a Send moves only as many bytes
// as the receiver's FIFO has room for, like the executor's pieces), scratch
// memory, PreMulSum scaling and Avg's division. Besides exact int64 sums it
// runs a non-commutative, non-associative "op", so any rank that combined
// operands in another order than its partner ends with different bits.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "algorithms/algo_filter.h"
#include "algorithms/algorithm.h"
#include "algorithms/builders.h"
#include "algorithms/tuner.h"

namespace ferry {
namespace {

// NCCL_ALGO's value as the communicator parses it.
CollFilter filterOf(const char* value) {
  Result<CollFilter> f = parseAlgoFilter(value);
  EXPECT_TRUE(f.isOk()) << value;
  return f.isOk() ? f.value() : CollFilter();
}

enum class Mode { kSum, kPreMul, kAvg, kMix };
constexpr uint64_t kScalar = 3;

uint64_t combine(Mode m, uint64_t a, uint64_t b) {
  // a first: the executor's operand order (incoming value, then local).
  if (m == Mode::kMix) return a * 6364136223846793005ull + (b ^ (b >> 7)) + 1442695040888963407ull;
  return a + b;
}

struct Wire {
  std::deque<char> bytes;
  std::deque<size_t> messages;  // sizes of the send steps, in order
};

struct RecdblSim {
  Mode mode;
  int n;
  size_t cap;  // FIFO bytes per connection
  std::vector<Schedule> scheds;
  std::vector<std::vector<std::vector<char>>> bufs;  // [rank][buffer]
  std::map<std::pair<int, int>, Wire> wires;

  char* at(int r, const Region& g) { return bufs[r][g.buf].data() + g.offset; }
  uint64_t get(const char* p, size_t i) {
    uint64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    return v;
  }
  void put(char* p, size_t i, uint64_t v) { std::memcpy(p + 8 * i, &v, 8); }
  bool scales(const Step& s) { return s.scaleSrc && mode == Mode::kPreMul; }
  void finish(const Step& s, char* dst) {
    if (!s.finalValue || mode != Mode::kAvg) return;
    for (size_t i = 0; i < s.bytes / 8; ++i) put(dst, i, get(dst, i) / static_cast<uint64_t>(n));
  }

  struct LaneState {
    size_t step = 0, done = 0;
    bool started = false;
    std::vector<char> staged;  // received bytes of the current step
  };

  // Advance one step as far as possible; true if it completed.
  bool advance(int r, const Step& s, LaneState& st) {
    if (s.kind == StepKind::kCopy) {
      for (size_t i = 0; i < s.bytes / 8; ++i) {
        uint64_t v = get(at(r, s.src), i);
        put(at(r, s.dst), i, scales(s) ? v * kScalar : v);
      }
      finish(s, at(r, s.dst));
      return true;
    }
    // Our schedules never scale inside a reduction (see recursive_doubling.cc).
    EXPECT_FALSE(s.scaleSrc && s.kind != StepKind::kSend) << "rank " << r << " " << stepName(s.kind);
    if (s.kind == StepKind::kLocalReduce) {
      for (size_t i = 0; i < s.bytes / 8; ++i)
        put(at(r, s.dst), i, combine(mode, get(at(r, s.src), i), get(at(r, s.dst), i)));
      finish(s, at(r, s.dst));
      return true;
    }
    if (s.kind == StepKind::kSend) {
      Wire& w = wires[{r, s.sendPeer}];
      if (!st.started) w.messages.push_back(s.bytes);
      st.started = true;
      while (st.done < s.bytes && w.bytes.size() + 8 <= cap) {
        uint64_t v = get(at(r, s.src), st.done / 8);
        if (scales(s)) v *= kScalar;
        const char* p = reinterpret_cast<const char*>(&v);
        w.bytes.insert(w.bytes.end(), p, p + 8);
        st.done += 8;
      }
      return st.done == s.bytes;
    }
    Wire& w = wires[{s.recvPeer, r}];
    if (st.done == 0 && !w.bytes.empty()) {
      EXPECT_FALSE(w.messages.empty());
      EXPECT_EQ(w.messages.front(), s.bytes) << "piece would cross a step, rank " << r;
      w.messages.pop_front();
    }
    while (st.done < s.bytes && !w.bytes.empty()) {
      st.staged.push_back(w.bytes.front());
      w.bytes.pop_front();
      st.done++;
    }
    if (st.done < s.bytes) return false;
    char* dst = at(r, s.dst);
    if (s.kind == StepKind::kRecv) {
      if (s.bytes) std::memcpy(dst, st.staged.data(), s.bytes);
    } else {
      EXPECT_EQ(s.kind, StepKind::kRecvReduceCopy);
      for (size_t i = 0; i < s.bytes / 8; ++i)
        put(dst, i, combine(mode, get(st.staged.data(), i), get(at(r, s.src), i)));
    }
    finish(s, dst);
    return true;
  }

  void run() {
    std::vector<std::vector<LaneState>> ls(n);
    for (int r = 0; r < n; ++r) ls[r].resize(scheds[r].lanes.size());
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < n; ++r)
        for (size_t l = 0; l < ls[r].size(); ++l) {
          auto& steps = scheds[r].lanes[l].steps;
          LaneState& st = ls[r][l];
          while (st.step < steps.size()) {
            size_t before = st.done;
            if (!advance(r, steps[st.step], st)) {
              moved |= st.done != before;
              break;
            }
            st = LaneState{st.step + 1, 0, false, {}};
            moved = true;
          }
        }
    }
    for (int r = 0; r < n; ++r)
      for (size_t l = 0; l < ls[r].size(); ++l)
        ASSERT_EQ(ls[r][l].step, scheds[r].lanes[l].steps.size()) << "deadlock at rank " << r;
    for (auto& [k, w] : wires) EXPECT_TRUE(w.bytes.empty()) << "unconsumed " << k.first << "->" << k.second;
  }
};

uint64_t input(int rank, size_t i) { return rank * 1000003ull + i * 7919ull + 1; }

// Runs recdbl for every rank; returns each rank's output.
std::vector<std::vector<uint64_t>> runRecdbl(Mode mode, int n, size_t count, size_t chunk, size_t cap,
                                             bool inPlace) {
  RecdblSim sim{mode, n, cap, {}, {}, {}};
  for (int r = 0; r < n; ++r) {
    CollArgs a;
    a.rank = r;
    a.nranks = n;
    a.count = count;
    a.elemSize = 8;
    a.inPlace = inPlace;
    Result<Schedule> s = selectSchedule(a, makeView(std::vector<uint64_t>(n, 0), chunk), filterOf("recdbl"));
    EXPECT_TRUE(s.isOk());
    EXPECT_EQ(s.value().algorithm, "recdbl");
    std::set<std::pair<int, int>> used;  // no (peer, direction) on two lanes
    for (auto& lane : s.value().lanes) {
      std::set<std::pair<int, int>> mine;
      for (auto& st : lane.steps) {
        if (st.sendPeer >= 0) mine.insert({st.sendPeer, 1});
        if (st.recvPeer >= 0) mine.insert({st.recvPeer, 0});
        if (chunk && (st.sendPeer >= 0 || st.recvPeer >= 0)) {
          EXPECT_LE(st.bytes, chunk) << "message larger than a chunk";
        }
      }
      for (auto& u : mine) EXPECT_TRUE(used.insert(u).second) << "lanes share a connection";
    }
    EXPECT_TRUE(s.value().prologue.empty());
    sim.scheds.push_back(s.value());
    std::vector<char> in(count * 8), out(count * 8, 0x5a), scratch(s.value().scratchBytes, 0x5a);
    for (size_t i = 0; i < count; ++i) sim.put(in.data(), i, input(r, i));
    // In place: one buffer plays both roles (the output entry aliases it).
    sim.bufs.push_back({in, out, scratch});
  }
  if (inPlace) {
    // Emulate aliasing by running on buffer 0 for both input and output.
    for (auto& sch : sim.scheds)
      for (auto& lane : sch.lanes)
        for (auto& st : lane.steps) {
          if (st.src.buf == kOutputBuf) st.src.buf = kInputBuf;
          if (st.dst.buf == kOutputBuf) st.dst.buf = kInputBuf;
        }
  }
  sim.run();
  std::vector<std::vector<uint64_t>> res(n);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) res[r].push_back(sim.get(sim.bufs[r][inPlace ? 0 : 1].data(), i));
  return res;
}

uint64_t expected(Mode mode, int n, size_t i) {
  uint64_t t = 0;
  for (int r = 0; r < n; ++r) t += input(r, i) * (mode == Mode::kPreMul ? kScalar : 1);
  return mode == Mode::kAvg ? t / static_cast<uint64_t>(n) : t;
}

TEST(Recdbl, ExactAndIdenticalOnEveryRankCount) {
  for (int n = 1; n <= 33; ++n)
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}})
      // chunk bytes: one round, 3 elements, 8 elements
      for (size_t chunk : {size_t{0}, size_t{24}, size_t{64}})
        for (Mode mode : {Mode::kSum, Mode::kPreMul, Mode::kAvg, Mode::kMix})
          for (bool inPlace : {false, true}) {
            // FIFOs of one chunk: tighter than the real two (Comm's constructor).
            size_t cap = chunk ? chunk : count * 8 + 8;
            auto res = runRecdbl(mode, n, count, chunk, cap, inPlace);
            SCOPED_TRACE(testing::Message() << "n " << n << " count " << count << " chunk " << chunk
                                            << " mode " << int(mode) << " inPlace " << inPlace);
            for (int r = 0; r < n; ++r) {
              ASSERT_EQ(res[r].size(), count);
              ASSERT_EQ(res[r], res[0]) << "rank " << r << " differs from rank 0";
              if (mode == Mode::kMix) continue;
              for (size_t i = 0; i < count; ++i) ASSERT_EQ(res[r][i], expected(mode, n, i)) << "rank " << r;
            }
          }
}

// The cost model picks it where latency dominates: small AllReduce over
// hosts with slow hops, never for large ones or for other collectives.
TEST(Recdbl, ChosenByCost) {
  for (int n : {4, 8}) {
    std::vector<uint64_t> hosts;
    for (int r = 0; r < n; ++r) hosts.push_back(r);  // a rank per host
    CommView v = makeView(hosts, 4096);
    v.inter = LinkCost{20.0, 125.0};
    CollArgs a;
    a.nranks = n;
    a.count = 2;
    a.elemSize = 4;
    EXPECT_EQ(selectSchedule(a, v, filterOf("^direct")).value().algorithm, "recdbl") << n;
    a.count = 1 << 20;
    // Large: a bandwidth algorithm (ring, or the double tree across hosts).
    EXPECT_NE(selectSchedule(a, v, filterOf("")).value().algorithm, "recdbl") << n;
    EXPECT_EQ(selectSchedule(a, v, filterOf("^tree")).value().algorithm, "ring") << n;
    EXPECT_EQ(selectSchedule(a, v, filterOf("RecDbl")).value().algorithm, "recdbl");
    a.kind = CollKind::kReduceScatter;
    EXPECT_NE(selectSchedule(a, v, filterOf("recdbl")).value().algorithm, "recdbl");
  }
}

// The rounds: log2(n) exchanges for a power of two, plus a fold-in and a
// fold-out for the ranks that pair with an extra rank.
TEST(Recdbl, RoundCounts) {
  auto sends = [](int n, int r) {
    CollArgs a;
    a.rank = r;
    a.nranks = n;
    a.count = 5;
    a.elemSize = 4;
    Schedule s = recursiveDoublingSchedule(a, makeView(std::vector<uint64_t>(n, 0)));
    int k = 0;
    for (auto& st : s.lanes.at(0).steps) k += st.kind == StepKind::kSend;
    return k;
  };
  EXPECT_EQ(sends(8, 5), 3);
  EXPECT_EQ(sends(16, 0), 4);
  EXPECT_EQ(sends(5, 0), 3);  // 2 rounds + the result back to rank 4
  EXPECT_EQ(sends(5, 4), 1);  // the extra rank: its input only
  EXPECT_EQ(sends(5, 1), 2);
}

}  // namespace
}  // namespace ferry
