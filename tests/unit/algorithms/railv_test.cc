// The rail AlltoAllv schedule (rail_alltoallv.cc) in the data-flow model with
// bounded FIFOs: random byte matrices with empty pairs, packed and
// scattered displacements, host shapes with consecutive and round-robin
// ranks. Every output block must hold exactly its sender's block, nothing
// may deadlock or be left unread, and the rail schedule must send each
// remote host at most one message (the aggregation it exists for).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "algorithms/builders.h"
#include "tests/unit/algorithms/dataflow_model.h"

namespace ferry::sim {
namespace {

constexpr WireShape kShm{8, 64};
constexpr WireShape kNet{4, 256};

// Counts in 8-byte elements; displacements per rank, in elements.
struct Layout {
  int n;
  std::vector<size_t> counts;            // [s * n + d]
  std::vector<std::vector<size_t>> sd, rd;  // [rank][peer]
  std::vector<size_t> inElems, outElems;
};

// Blocks in peer order, or shuffled with gaps when `scatter`.
std::vector<size_t> place(const std::vector<size_t>& sizes, bool scatter, std::mt19937& rng,
                          size_t* total) {
  std::vector<int> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  if (scatter) std::shuffle(order.begin(), order.end(), rng);
  std::vector<size_t> at(sizes.size());
  size_t off = 0;
  for (int p : order) {
    off += scatter ? rng() % 3 : 0;
    at[p] = off;
    off += sizes[p];
  }
  *total = off;
  return at;
}

Layout randomLayout(int n, std::mt19937& rng, size_t maxCount, bool scatter) {
  Layout l{n, std::vector<size_t>(size_t(n) * n), {}, {}, {}, {}};
  for (auto& c : l.counts) c = rng() % 4 == 0 ? 0 : rng() % (maxCount + 1);
  for (int r = 0; r < n; ++r) {
    std::vector<size_t> out(n), in(n);
    for (int p = 0; p < n; ++p) {
      out[p] = l.counts[size_t(r) * n + p];
      in[p] = l.counts[size_t(p) * n + r];
    }
    size_t ti = 0, to = 0;
    l.sd.push_back(place(out, scatter, rng, &ti));
    l.rd.push_back(place(in, scatter, rng, &to));
    l.inElems.push_back(ti);
    l.outElems.push_back(to);
  }
  return l;
}

// What rank r knows in the library (src/comm/alltoallv_call.cc): its own
// row and column and what its local peers send its rail peers; the rest
// stays 0, so a schedule reading anything else goes wrong here.
AlltoAllvMatrix matrixFor(const Layout& l, int r, const CommView& v) {
  AlltoAllvMatrix m;
  m.n = l.n;
  m.bytes.assign(size_t(l.n) * l.n, 0);
  auto known = [&](int s, int d) {
    return s == r || d == r || (v.sameHost(s, r) && v.localRankOf[d] == v.localRankOf[r]);
  };
  for (int s = 0; s < l.n; ++s)
    for (int d = 0; d < l.n; ++d)
      if (known(s, d)) m.bytes[size_t(s) * l.n + d] = l.counts[size_t(s) * l.n + d] * 8;
  for (int p = 0; p < l.n; ++p) {
    m.sendOff.push_back(l.sd[r][p] * 8);
    m.recvOff.push_back(l.rd[r][p] * 8);
  }
  return m;
}

const Sym kUnset{0x5e7715e7715e7715ull, 1};

std::string lanesShareConnection(const Schedule& s) {
  std::set<std::pair<int, int>> used;
  for (const Lane& lane : s.lanes) {
    std::set<std::pair<int, int>> mine;
    for (const Step& st : lane.steps) {
      if (st.sendPeer >= 0) mine.insert({st.sendPeer, 1});
      if (st.recvPeer >= 0) mine.insert({st.recvPeer, 0});
    }
    for (auto& u : mine)
      if (!used.insert(u).second) return "two lanes use one connection direction";
  }
  return "";
}

// Runs every rank's schedule; "" when every block arrived exactly.
std::string check(const Layout& l, const std::vector<uint64_t>& hostOf) {
  CommView v = makeView(hostOf);
  std::vector<RankModel> ranks;
  for (int r = 0; r < l.n; ++r) {
    RankModel m;
    AlltoAllvMatrix mx = matrixFor(l, r, v);
    m.sched = railvSchedule(r, v, mx);
    if (std::string e = lanesShareConnection(m.sched); !e.empty()) return "rank " + std::to_string(r) + ": " + e;
    // Aggregation: at most one message to each remote host.
    std::set<int> remote;
    int netSends = 0;
    for (const Lane& lane : m.sched.lanes)
      for (const Step& st : lane.steps)
        if (st.sendPeer >= 0 && !v.sameHost(st.sendPeer, r)) {
          netSends++;
          remote.insert(v.hostOf[st.sendPeer]);
        }
    if (netSends > static_cast<int>(remote.size()))
      return "rank " + std::to_string(r) + " sends " + std::to_string(netSends) + " messages to " +
             std::to_string(remote.size()) + " remote hosts";
    m.store0.assign(l.inElems[r] + 1, Sym{});
    m.store1.assign(l.outElems[r] + 1, kUnset);
    for (size_t i = 0; i < m.store0.size(); ++i) m.store0[i] = contribution(r, i);
    m.scratch.resize(m.sched.scratchBytes / 8 + 1);
    m.buf[0] = m.store0.data();
    m.buf[1] = m.store1.data();
    m.buf[2] = m.scratch.data();
    ranks.push_back(std::move(m));
  }
  DataflowModel model(std::move(ranks), [&](int from, int to) {
    return hostOf[from] == hostOf[to] ? kShm : kNet;
  });
  std::string err = model.run();
  if (!err.empty()) return err;
  for (int r = 0; r < l.n; ++r) {
    std::vector<bool> covered(l.outElems[r] + 1, false);
    for (int s = 0; s < l.n; ++s)
      for (size_t k = 0; k < l.counts[size_t(s) * l.n + r]; ++k) {
        size_t at = l.rd[r][s] + k;
        covered[at] = true;
        if (!(model.rank(r).buf[1][at] == contribution(s, l.sd[s][r] + k)))
          return "rank " + std::to_string(r) + " element " + std::to_string(k) + " from rank " +
                 std::to_string(s) + " is wrong";
      }
    for (size_t i = 0; i < covered.size(); ++i)
      if (!covered[i] && !(model.rank(r).buf[1][i] == kUnset))
        return "rank " + std::to_string(r) + " wrote outside its blocks at " + std::to_string(i);
  }
  return "";
}

std::vector<uint64_t> blocks(int hosts, int perHost) {
  std::vector<uint64_t> h;
  for (int r = 0; r < hosts * perHost; ++r) h.push_back(r / perHost);
  return h;
}

std::vector<uint64_t> roundRobin(int hosts, int perHost) {
  std::vector<uint64_t> h;
  for (int r = 0; r < hosts * perHost; ++r) h.push_back(r % hosts);
  return h;
}

TEST(RailAlltoAllv, ExactOnRandomMatrices) {
  std::mt19937 rng(12345);
  int checked = 0;
  for (auto [hosts, per] : {std::pair{2, 2}, {2, 3}, {3, 2}, {4, 4}, {3, 5}}) {
    for (bool rr : {false, true}) {
      std::vector<uint64_t> hostOf = rr ? roundRobin(hosts, per) : blocks(hosts, per);
      ASSERT_TRUE(railvSupports(makeView(hostOf)));
      for (size_t maxCount : {size_t{0}, size_t{3}, size_t{700}})
        for (bool scatter : {false, true})
          for (int trial = 0; trial < 3; ++trial) {
            Layout l = randomLayout(hosts * per, rng, maxCount, scatter);
            std::string err = check(l, hostOf);
            ASSERT_EQ(err, "") << hosts << "x" << per << (rr ? " round-robin" : "") << " max "
                               << maxCount << (scatter ? " scattered" : " packed");
            checked++;
          }
    }
  }
  EXPECT_EQ(checked, 5 * 2 * 3 * 2 * 3);
}

// The packed layout (the usual prefix-sum displacements) with consecutive
// host ranks lands each rail message in place: no scratch on receive.
TEST(RailAlltoAllv, PackedLayoutNeedsNoReceiveCopies) {
  std::mt19937 rng(7);
  Layout l = randomLayout(8, rng, 50, false);
  CommView v = makeView(blocks(2, 4));
  for (int r = 0; r < 8; ++r) {
    Schedule s = railvSchedule(r, v, matrixFor(l, r, v));
    for (const Lane& lane : s.lanes)
      for (const Step& st : lane.steps)
        if (st.recvPeer >= 0 && !v.sameHost(st.recvPeer, r)) {
          EXPECT_EQ(st.dst.buf, kOutputBuf);
        }
  }
}

TEST(RailAlltoAllv, ShapeRequirement) {
  EXPECT_FALSE(railvSupports(makeView(blocks(1, 4))));
  EXPECT_FALSE(railvSupports(makeView(blocks(4, 1))));
  EXPECT_FALSE(railvSupports(makeView({0, 0, 1, 1, 1})));
}

}  // namespace
}  // namespace ferry::sim
