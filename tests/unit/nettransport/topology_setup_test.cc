// Connection set-up orders that the old per-pair design deadlocked on: a
// ring where every rank connects to its next first, and a full mesh in
// random per-rank orders; then exact bytes over every connection.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "core/wait.h"
#include "harness.h"

namespace ferry::nxtest {
namespace {

constexpr size_t kBlock = 300 * 1024 + 11;  // one piece per block (slots are 512 KiB)

char blockByte(int owner, size_t i) { return static_cast<char>((owner * 97 + i * 13 + (i >> 10)) & 0xff); }

// Ring allgather: in step s rank r sends block (r - s) to next and receives
// block (r - s - 1) from prev, so every block travels the whole ring and is
// forwarded by every rank.
Status ringAllGather(Connection& next, Connection& prev, int r, int n,
                     std::vector<std::vector<char>>& blocks) {
  Waiter w(nullptr, 20000, "ring allgather");
  for (int s = 0; s < n - 1; s++) {
    const std::vector<char>& out = blocks[(r - s + n) % n];
    bool sent = false, got = false;
    while (!sent || !got) {
      bool moved = false;
      if (!sent) {
        SendSlot slot;
        FERRY_TRY(next.trySend(&slot));
        if (slot.data) {
          memcpy(slot.data, out.data(), out.size());
          FERRY_TRY(next.commitSend(out.size()));
          sent = moved = true;
        }
      }
      if (!got) {
        RecvPiece p;
        FERRY_TRY(prev.tryRecv(&p));
        if (p.ready) {
          std::vector<char>& in = blocks[(r - s - 1 + n) % n];
          in.assign(static_cast<const char*>(p.data), static_cast<const char*>(p.data) + p.size);
          FERRY_TRY(prev.releaseRecv());
          got = moved = true;
        }
      }
      FERRY_TRY(next.progress());
      FERRY_TRY(prev.progress());
      if (moved) w.progressed();
      else FERRY_TRY(w.idle());
    }
  }
  while (!next.sendsDrained()) {
    FERRY_TRY(prev.progress());
    FERRY_TRY(w.idle());
  }
  return Status::ok();
}

class RingSetup : public ::testing::TestWithParam<int> {};

TEST_P(RingSetup, ConnectNextThenPrevCompletesAndCarriesExactBlocks) {
  const int n = GetParam();
  ThreadComm comm(n);
  ASSERT_TRUE(comm.setupAndPrepare().isOk());
  std::vector<std::vector<std::vector<char>>> blocks(n, std::vector<std::vector<char>>(n));
  auto st = runThreads(n, [&](int r) -> Status {
    int next = (r + 1) % n, prev = (r - 1 + n) % n;
    // Every rank waits in connect(next) while its prev waits in connect(me):
    // only the listener pump lets this complete.
    FERRY_ASSIGN(comm.conns[r][next], comm.tr[r]->connect(comm.ctx[r], next));
    FERRY_ASSIGN(comm.conns[r][prev], comm.tr[r]->connect(comm.ctx[r], prev));
    blocks[r][r].resize(kBlock);
    for (size_t i = 0; i < kBlock; i++) blocks[r][r][i] = blockByte(r, i);
    FERRY_TRY(ringAllGather(*comm.conns[r][next], *comm.conns[r][prev], r, n, blocks[r]));
    // And the other way round the ring, many pieces both ways per pair.
    std::vector<Pump> pumps{Pump(*comm.conns[r][next], r, next, 30, 64 << 10),
                            Pump(*comm.conns[r][prev], r, prev, 30, 64 << 10)};
    return pumpAll(pumps, 20000);
  });
  for (int r = 0; r < n; r++) {
    ASSERT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
    for (int o = 0; o < n; o++) {
      ASSERT_EQ(blocks[r][o].size(), kBlock) << "rank " << r << " block " << o;
      for (size_t i = 0; i < kBlock; i++)
        ASSERT_EQ(blocks[r][o][i], blockByte(o, i)) << "rank " << r << " block " << o << " byte " << i;
    }
  }
  int next0 = 1 % n;
  EXPECT_EQ(comm.conns[0][next0]->describe(), "Socket/0 rank 1 (host1)");
  EXPECT_FALSE(comm.conns[0][next0]->supportsRef());
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingSetup, ::testing::Values(4, 8));

class MeshSetup : public ::testing::TestWithParam<unsigned> {};

TEST_P(MeshSetup, RandomConnectOrdersEveryPairExactBothWays) {
  const int n = 6;
  ScopedEnv slot("FERRY_NET_SLOT_BYTES", std::to_string(64 << 10));
  ThreadComm comm(n);
  ASSERT_TRUE(comm.setupAndPrepare().isOk());
  std::vector<std::vector<int>> orders(n);
  std::mt19937 rng(GetParam());
  for (int r = 0; r < n; r++) {
    for (int p = 0; p < n; p++)
      if (p != r) orders[r].push_back(p);
    std::shuffle(orders[r].begin(), orders[r].end(), rng);
  }
  auto st = runThreads(n, [&](int r) -> Status {
    for (int p : orders[r]) {
      FERRY_ASSIGN(comm.conns[r][p], comm.tr[r]->connect(comm.ctx[r], p));
    }
    std::vector<Pump> pumps;
    for (int p : orders[r]) pumps.emplace_back(*comm.conns[r][p], r, p, 40, 64 << 10);
    return pumpAll(pumps, 20000);
  });
  for (int r = 0; r < n; r++) {
    std::string order;
    for (int p : orders[r]) order += " " + std::to_string(p);
    EXPECT_TRUE(st[r].isOk()) << "rank " << r << " (order" << order << "): " << st[r].message();
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, MeshSetup, ::testing::Values(1u, 2u, 3u, 20261122u));


#ifdef FERRY_HAVE_UCX
// The same set-up over the built-in UCX network: nothing in the transport
// is Socket-specific.
TEST(UcxSetup, RingConnectNextThenPrevOverUcx) {
  ScopedEnv net("NCCL_NET", "UCX");
  ScopedEnv slot("FERRY_NET_SLOT_BYTES", std::to_string(64 << 10));
  const int n = 4;
  ThreadComm comm(n);
  Status prep = comm.setupAndPrepare();
  ASSERT_TRUE(prep.isOk()) << prep.message();
  auto st = runThreads(n, [&](int r) -> Status {
    int next = (r + 1) % n, prev = (r - 1 + n) % n;
    FERRY_ASSIGN(comm.conns[r][next], comm.tr[r]->connect(comm.ctx[r], next));
    FERRY_ASSIGN(comm.conns[r][prev], comm.tr[r]->connect(comm.ctx[r], prev));
    std::vector<Pump> pumps{Pump(*comm.conns[r][next], r, next, 30, 64 << 10),
                            Pump(*comm.conns[r][prev], r, prev, 30, 64 << 10)};
    return pumpAll(pumps, 20000);
  });
  for (int r = 0; r < n; r++) EXPECT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
  ASSERT_TRUE(comm.conns[0][1]);
  EXPECT_EQ(comm.conns[0][1]->describe().rfind("UCX/0 rank 1 (host1)", 0), 0u) << comm.conns[0][1]->describe();
}
#endif

}  // namespace
}  // namespace ferry::nxtest
