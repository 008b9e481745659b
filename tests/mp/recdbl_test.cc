// Recursive doubling AllReduce forced with NCCL_ALGO=recdbl: exact values on
// power-of-two and folded rank counts, out of place and in place, and the
// log line showing every rank really ran it. Two FIFO set-ups: tiny chunks
// and slots (many chunks, each in several pieces, FIFOs of two chunks), and
// the defaults with a message larger than one chunk (the fold-out result
// then travels as a cross-memory-attach reference); and every rank on its
// own simulated node (Socket network).
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("recdbl"); }

int body(const Rank& me, std::initializer_list<size_t> counts) {
  for (const RedCase& c : standardReductions(me.nranks))
    for (size_t count : counts)
      for (bool inPlace : {false, true}) MP_TRY(caseAllReduce(me, c, count, inPlace));
  return 0;
}

RunOptions opts(const std::string& tag) {
  return loggedOptions(logDir(), tag, "TUNING", {{"NCCL_ALGO", "recdbl"}}, 90);
}

class MpRecdbl : public ::testing::TestWithParam<int> {};

TEST_P(MpRecdbl, SmallChunksExact) {
  int n = GetParam();
  std::string tag = "small" + std::to_string(n);
  RunOptions o = opts(tag);
  // chunkBytes = min(8192, FIFO / 2) - 64 = 8128: 5000 int32 is 3 chunks.
  o.env["FERRY_CHUNK_BYTES"] = "8192";
  o.env["FERRY_SHM_SLOT_BYTES"] = "4096";
  o.env["FERRY_SHM_SLOTS"] = "4";
  RunResult res = runRanks(
      n,
      [](int rank, int nranks, const ncclUniqueId& id) {
        return withComm(rank, nranks, id, [](const Rank& me) { return body(me, {1, 7, 5000}); });
      },
      o);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), tag, "AllReduce count 5000 elemSize 4: algorithm recdbl"), n);
}

TEST_P(MpRecdbl, DefaultChunksLargeExact) {
  int n = GetParam();
  std::string tag = "large" + std::to_string(n);
  RunResult res = runRanks(
      n,
      [](int rank, int nranks, const ncclUniqueId& id) {
        // 1.2 MB of int32: three chunks of the default 512 KiB.
        return withComm(rank, nranks, id, [](const Rank& me) { return body(me, {300001}); });
      },
      opts(tag));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), tag, "AllReduce count 300001 elemSize 4: algorithm recdbl"), n);
}

// Every rank on its own simulated node: all exchanges over the Socket
// network, whose FIFO (4 slots of 64 KiB here) caps chunks at 128 KiB.
TEST(MpRecdblNet, FiveNodesExact) {
  std::string tag = "net5";
  RunOptions o = opts(tag);
  o.timeoutSec = 150;
  o.env["FERRY_NET_SLOT_BYTES"] = "65536";
  o.env["NCCL_DEBUG_SUBSYS"] = "TUNING,NET";
  onSimulatedNodes(&o, tag, 5, [](int r) { return r; });
  RunResult res = runRanks(
      5,
      [](int rank, int nranks, const ncclUniqueId& id) {
        return withComm(rank, nranks, id, [](const Rank& me) { return body(me, {7, 100000}); });
      },
      o);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), tag, "AllReduce count 100000 elemSize 4: algorithm recdbl"), 5);
  EXPECT_EQ(logFilesWith(logDir(), tag, "NET: using network Socket"), 5);
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpRecdbl, ::testing::Values(2, 3, 4, 5, 8));

}  // namespace
}  // namespace ferry::mp
