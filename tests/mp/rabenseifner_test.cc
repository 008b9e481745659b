// Rabenseifner AllReduce and Bruck AllGather/ReduceScatter forced with
// NCCL_ALGO on real forked ranks: exact values for 2..8 ranks (powers of two
// and folded counts), out of place and in place, reductions in several
// dtypes and ops (Avg, PreMulSum), and the TUNING log line showing every rank
// ran them. FIFO set-ups: tiny chunks and slots (many rounds, Bruck groups of
// several whole blocks and of block slices), the defaults with messages
// larger than a chunk, and ranks on simulated nodes of two ranks each, so
// pairs cross the Socket network.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("rab"); }

constexpr const char* kAlgo = "AllReduce:rabenseifner;AllGather:bruck;ReduceScatter:bruck";

// AllReduce counts, then AllGather/ReduceScatter per-rank counts.
int body(const Rank& me, std::initializer_list<size_t> arCounts, std::initializer_list<size_t> blockCounts) {
  std::vector<RedCase> cases = standardReductions(me.nranks);
  cases.push_back({ncclInt8, TestOp::kProd, me.nranks});
  for (bool inPlace : {false, true}) {
    for (const RedCase& c : cases)
      for (size_t count : arCounts) MP_TRY(caseAllReduce(me, c, count, inPlace));
    for (const RedCase& c : cases)
      for (size_t count : blockCounts) MP_TRY(caseReduceScatter(me, c, count, inPlace));
    for (ncclDataType_t dt : {ncclInt32, ncclUint8, ncclFloat64})
      for (size_t count : blockCounts) MP_TRY(caseAllGather(me, dt, count, inPlace));
  }
  return 0;
}

RunOptions opts(const std::string& tag) { return loggedOptions(logDir(), tag, "TUNING", {{"NCCL_ALGO", kAlgo}}, 120); }

// Every rank logged that it ran `algo` for this call shape (int32 cases).
void expectRan(const std::string& tag, int n, const char* coll, size_t count, const char* algo) {
  std::string line = std::string(coll) + " count " + std::to_string(count) + " elemSize 4: algorithm " + algo;
  EXPECT_EQ(logFilesWith(logDir(), tag, line), n) << line;
}

class MpRabenseifner : public ::testing::TestWithParam<int> {};

TEST_P(MpRabenseifner, SmallChunksExact) {
  int n = GetParam();
  std::string tag = "small" + std::to_string(n);
  RunOptions o = opts(tag);
  // chunkBytes = min(8192, FIFO / 2) - 64 = 8128: AllReduce of 5000 int32
  // is 3 rounds; Bruck blocks of 700 int32 go two per group, of 3000 in
  // slices of 2032 elements.
  o.env["FERRY_CHUNK_BYTES"] = "8192";
  o.env["FERRY_SHM_SLOT_BYTES"] = "4096";
  o.env["FERRY_SHM_SLOTS"] = "4";
  RunResult res = runRanks(
      n,
      [](int rank, int nranks, const ncclUniqueId& id) {
        return withComm(rank, nranks, id, [](const Rank& me) { return body(me, {1, 7, 5000}, {1, 7, 700, 3000}); });
      },
      o);
  EXPECT_RANKS_OK(res);
  expectRan(tag, n, "AllReduce", 5000, "rabenseifner");
  expectRan(tag, n, "AllGather", 700, "bruck");
  expectRan(tag, n, "ReduceScatter", 3000, "bruck");
}

TEST_P(MpRabenseifner, DefaultChunksLargeExact) {
  int n = GetParam();
  std::string tag = "large" + std::to_string(n);
  RunResult res = runRanks(
      n,
      [](int rank, int nranks, const ncclUniqueId& id) {
        // 1.2 MB of int32: two rounds of the default chunks; Bruck blocks of
        // 600 KB, each in two slices.
        return withComm(rank, nranks, id, [](const Rank& me) { return body(me, {300001}, {150001}); });
      },
      opts(tag));
  EXPECT_RANKS_OK(res);
  expectRan(tag, n, "AllReduce", 300001, "rabenseifner");
  expectRan(tag, n, "AllGather", 150001, "bruck");
  expectRan(tag, n, "ReduceScatter", 150001, "bruck");
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpRabenseifner, ::testing::Values(2, 3, 4, 5, 6, 8));

// Two ranks per simulated node: Rabenseifner's first halving stays inside
// a node, the later ones and (for 6) the fold cross the network; Bruck's
// partners at distance 1 alternate between the node and the network.
class MpRabenseifnerNodes : public ::testing::TestWithParam<int> {};

TEST_P(MpRabenseifnerNodes, PairedNodesExact) {
  int n = GetParam();
  std::string tag = "nodes" + std::to_string(n);
  Env env{{"NCCL_ALGO", kAlgo}};
  RunOptions o = pairedNodesOptions(logDir(), tag, env, n, 180);
  o.env["NCCL_DEBUG_SUBSYS"] = "TUNING,NET";
  RunResult res = runRanks(
      n,
      [](int rank, int nranks, const ncclUniqueId& id) {
        return withComm(rank, nranks, id, [](const Rank& me) { return body(me, {7, 100000}, {5, 40000}); });
      },
      o);
  EXPECT_RANKS_OK(res);
  expectRan(tag, n, "AllReduce", 100000, "rabenseifner");
  expectRan(tag, n, "AllGather", 40000, "bruck");
  expectRan(tag, n, "ReduceScatter", 40000, "bruck");
  EXPECT_EQ(logFilesWith(logDir(), tag, "NET: using network Socket"), n);
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpRabenseifnerNodes, ::testing::Values(5, 6, 8));

}  // namespace
}  // namespace ferry::mp
