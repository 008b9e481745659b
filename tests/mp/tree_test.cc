// The tree algorithms forced on real forked ranks, exact values, in place
// and out of place: NCCL_ALGO=tree (double binary tree AllReduce) and
// NCCL_ALGO=bintree (binomial Broadcast and Reduce, roots 0 and n-1). On
// one host with tiny chunks and slots (many chunks, several pieces each,
// FIFOs of two chunks), and with the ranks spread over simulated hosts
// (NCCL_HOSTID; Socket network) so the inter-host tree edges, the host
// chains and the merged lanes of trees sharing an edge all run.
#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>
#include <thread>
#include <string>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("tree"); }

int treeBody(const Rank& me, std::initializer_list<size_t> counts) {
  for (const RedCase& c : standardReductions(me.nranks))
    for (size_t count : counts)
      for (bool inPlace : {false, true}) MP_TRY(caseAllReduce(me, c, count, inPlace));
  return 0;
}

int bintreeBody(const Rank& me, std::initializer_list<size_t> counts) {
  const RedCase cases[] = {{ncclInt32, TestOp::kSum, me.nranks},
                           {ncclInt32, TestOp::kAvg, me.nranks},
                           {ncclFloat16, TestOp::kPreMulSum, me.nranks}};
  for (size_t count : counts)
    for (int root : {0, me.nranks - 1})
      for (bool inPlace : {false, true}) {
        MP_TRY(caseBroadcast(me, ncclInt32, count, root, inPlace));
        for (const RedCase& c : cases) MP_TRY(caseReduce(me, c, count, root, inPlace));
      }
  return 0;
}

int body(const std::string& algo, const Rank& me, std::initializer_list<size_t> counts) {
  return algo == "tree" ? treeBody(me, counts) : bintreeBody(me, counts);
}

// What each algorithm's log line says ran a 5000-element call.
std::string ranLine(const std::string& algo) {
  return std::string(algo == "tree" ? "AllReduce" : "Broadcast") + " count 5000 elemSize 4: algorithm " + algo;
}

RunOptions opts(const std::string& algo, const std::string& tag) {
  // chunkBytes = min(8192, FIFO / 2) - 64 = 8128: 5000 int32 is 3 chunks.
  return loggedOptions(logDir(), tag, "TUNING",
                       {{"NCCL_ALGO", algo},
                        {"FERRY_CHUNK_BYTES", "8192"},
                        {"FERRY_SHM_SLOT_BYTES", "4096"},
                        {"FERRY_SHM_SLOTS", "4"}},
                       120);
}

// Ranks per simulated host: 0 all on one host, else that many per host.
void runCase(const std::string& algo, int n, int perHost) {
  std::string tag = algo + std::to_string(n) + "h" + std::to_string(perHost);
  RunOptions o = opts(algo, tag);
  if (perHost > 0) {
    o.timeoutSec = 200;
    // Network FIFOs of 4 x 8 KiB: two chunks of the 8 KiB chunk size fit.
    o.env["FERRY_NET_SLOT_BYTES"] = "8192";
    onSimulatedNodes(&o, tag, n, [perHost](int r) { return r / perHost; });
  }
  RunResult res = runRanks(
      n,
      [algo](int rank, int nranks, const ncclUniqueId& id) {
        return withComm(rank, nranks, id, [&](const Rank& me) { return body(algo, me, {1, 7, 5000}); });
      },
      o);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), tag, ranLine(algo)), n);
}

class MpTree : public ::testing::TestWithParam<int> {};

TEST_P(MpTree, OneHostExact) { runCase("tree", GetParam(), 0); }
TEST_P(MpTree, OwnHostsExact) { runCase("tree", GetParam(), 1); }
TEST_P(MpTree, PairedHostsExact) { runCase("tree", GetParam(), 2); }
TEST_P(MpTree, BintreeOneHostExact) { runCase("bintree", GetParam(), 0); }
TEST_P(MpTree, BintreeOwnHostsExact) { runCase("bintree", GetParam(), 1); }
TEST_P(MpTree, BintreePairedHostsExact) { runCase("bintree", GetParam(), 2); }

INSTANTIATE_TEST_SUITE_P(Ranks, MpTree, ::testing::Values(2, 3, 4, 5, 8));

// Default chunks (512 KiB) and a message of several: large pieces travel
// as cross-memory-attach references down the trees.
TEST(MpTreeLarge, DefaultChunksExact) {
  for (const char* algo : {"tree", "bintree"}) {
    std::string tag = std::string("large-") + algo;
    RunOptions o = opts(algo, tag);
    o.env.erase("FERRY_CHUNK_BYTES");
    o.env.erase("FERRY_SHM_SLOT_BYTES");
    o.env.erase("FERRY_SHM_SLOTS");
    std::string a = algo;
    RunResult res = runRanks(
        4,
        [a](int rank, int nranks, const ncclUniqueId& id) {
          return withComm(rank, nranks, id, [&](const Rank& me) { return body(a, me, {300001}); });
        },
        o);
    EXPECT_RANKS_OK(res) << algo;
  }
}

// A leaf whose whole share fits in the shared rings (by value) finishes,
// destroys its communicator and exits while its parent still waits for room
// towards the root (the root comes late). The parent must read what the leaf
// left in shared memory instead of failing with "rank 2 exited" (a CI
// failure of DefaultChunksExact: Reduce root 3, ranks 1 and 3 failed).
TEST(MpTreeLarge, LeafExitsWhileItsParentWaitsForRoom) {
  RunOptions o = opts("bintree", "leafexit");
  o.env.erase("FERRY_CHUNK_BYTES");
  o.env.erase("FERRY_SHM_SLOT_BYTES");
  o.env.erase("FERRY_SHM_SLOTS");
  RunResult res = runRanks(
      4,
      [](int rank, int nranks, const ncclUniqueId& id) {
        return withComm(rank, nranks, id, [](const Rank& me) {
          // 1.5 MiB: more than one 1 MiB ring, less than the two between the
          // leaf (rank 2) and the root (rank 3) through its parent (rank 1).
          const size_t count = 3 << 17;
          const int root = 3;
          HostBuf buf(ncclInt32, count);
          buf.fill([&](size_t i) { return double((i % 1000) + me.rank); });
          if (me.rank == root) std::this_thread::sleep_for(std::chrono::milliseconds(800));
          MP_NCCL(ncclReduce(buf.data(), buf.data(), count, ncclInt32, ncclSum, root, me.comm, nullptr));
          if (me.rank == root)
            MP_CHECK(checkBuf(buf, 0, count, [](size_t i) { return double(4 * (i % 1000) + 6); },
                              "Reduce after a leaf exited"));
          return 0;
        });
      },
      o);
  EXPECT_RANKS_OK(res);
}

}  // namespace
}  // namespace ferry::mp
