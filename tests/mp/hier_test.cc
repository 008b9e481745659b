// hier and pat forced with NCCL_ALGO on real forked ranks, two per simulated
// node (NCCL_HOSTID), 2 and 3 nodes: the intra-host rings run over shared
// memory and the rail rings over the Socket network. Exact values for
// AllReduce (hier only), AllGather and ReduceScatter, out of place and in
// place, with tiny chunks (many rounds, each step in several pieces) and
// with the defaults and messages of several chunks; the TUNING log shows
// every rank really ran the forced algorithm.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("hier"); }

struct Counts {
  std::vector<size_t> allReduce, perRank;  // perRank: AllGather / ReduceScatter block
};

int body(const Rank& me, bool withAllReduce, const Counts& counts) {
  for (bool inPlace : {false, true}) {
    for (const RedCase& c : standardReductions(me.nranks)) {
      if (withAllReduce)
        for (size_t n : counts.allReduce) MP_TRY(caseAllReduce(me, c, n, inPlace));
      for (size_t n : counts.perRank) MP_TRY(caseReduceScatter(me, c, n, inPlace));
    }
    for (ncclDataType_t dt : {ncclInt32, ncclInt8, ncclFloat64})
      for (size_t n : counts.perRank) MP_TRY(caseAllGather(me, dt, n, inPlace));
  }
  return 0;
}

// (algorithm, ranks, small chunks)
using Param = std::tuple<std::string, int, bool>;
class MpHier : public ::testing::TestWithParam<Param> {};

TEST_P(MpHier, ExactOnPairedNodes) {
  auto [algo, n, small] = GetParam();
  std::string tag = algo + std::to_string(n) + (small ? "small" : "large");
  RunOptions o = pairedNodesOptions(logDir(), tag, {{"NCCL_ALGO", algo}}, n, 200);
  o.env["NCCL_DEBUG_SUBSYS"] = "INIT,NET,TUNING";
  Counts counts;
  if (small) {
    // chunkBytes = min(8192, shm FIFO / 2) - 64 = 8128: 20000 int32 is
    // several rounds of every algorithm's schedule.
    o.env["FERRY_CHUNK_BYTES"] = "8192";
    o.env["FERRY_SHM_SLOT_BYTES"] = "4096";
    o.env["FERRY_SHM_SLOTS"] = "4";
    counts = {{1, 7, 20000}, {1, 7, 5000}};
  } else {
    // Network FIFO 4 x 64 KiB: chunks of 128 KiB, several per message.
    counts = {{300001}, {100001}};
  }
  bool withAllReduce = algo == "hier";
  RunResult res = runRanks(
      n,
      [withAllReduce, counts](int rank, int nranks, const ncclUniqueId& id) {
        return withComm(rank, nranks, id,
                        [&](const Rank& me) { return body(me, withAllReduce, counts); });
      },
      o);
  EXPECT_RANKS_OK(res);
  size_t big = counts.perRank.back();
  EXPECT_EQ(logFilesWith(logDir(), tag, "NET: using network Socket"), n);
  EXPECT_EQ(logFilesWith(logDir(), tag,
                         "AllGather count " + std::to_string(big) + " elemSize 4: algorithm " + algo),
            n);
  EXPECT_EQ(logFilesWith(logDir(), tag,
                         "ReduceScatter count " + std::to_string(big) + " elemSize 2: algorithm " + algo),
            n);
  if (withAllReduce) {
    size_t ar = counts.allReduce.back();
    EXPECT_EQ(logFilesWith(logDir(), tag,
                           "AllReduce count " + std::to_string(ar) + " elemSize 4: algorithm hier"),
              n);
  }
}

std::string name(const ::testing::TestParamInfo<Param>& p) {
  auto [algo, n, small] = p.param;
  return algo + std::to_string(n) + "ranks" + (small ? "SmallChunks" : "DefaultChunks");
}

INSTANTIATE_TEST_SUITE_P(Algos, MpHier,
                         ::testing::Combine(::testing::Values(std::string("hier"), std::string("pat")),
                                            ::testing::Values(4, 6), ::testing::Bool()),
                         name);

}  // namespace
}  // namespace ferry::mp
