// NCCL_ALGO / NCCL_PROTO through libferry.so with forked ranks:
//   - a bad value (unknown name, unknown collective prefix, malformed) makes
//     ncclCommInitRank fail with ncclInvalidUsage on every rank, promptly,
//     and the last error names the bad token;
//   - valid values in NCCL's syntax (per-collective clauses, ^ exclusion,
//     NCCL's algorithms Ferry lacks, LL/LL128) still give exact results;
//   - an NCCL-only algorithm logs the fallback at INFO (TUNING).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

RunOptions opts(const char* var, const std::string& value) {
  RunOptions o;
  o.timeoutSec = 60;
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  o.env[var] = value;
  return o;
}

// Every rank's ncclCommInitRank fails with ncclInvalidUsage well before
// any timeout, and ncclGetLastError names `token`.
void expectInitFails(const char* var, const std::string& value, const std::string& token) {
  RunResult res = runRanks(
      3,
      [token](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_EXPECT_RESULT(ncclCommInitRank(&comm, n, id, rank), ncclInvalidUsage);
        MP_CHECK(comm == nullptr, "a failed init left a communicator");
        std::string last = ncclGetLastError(nullptr);
        MP_CHECK(last.find(token) != std::string::npos, "last error does not name %s: %s",
                 token.c_str(), last.c_str());
        return 0;
      },
      opts(var, value));
  EXPECT_RANKS_OK(res) << var << "=" << value;
  for (const RankResult& r : res.ranks) EXPECT_LT(r.elapsedMs, 10000) << "rank " << r.rank;
}

TEST(MpAlgoEnv, BadAlgoFailsInitOnEveryRank) {
  expectInitFails("NCCL_ALGO", "bogus", "bogus");
  expectInitFails("NCCL_ALGO", "allreduce:ring;scatter:ring", "scatter");
  expectInitFails("NCCL_ALGO", "allreduce:ring;tree", "tree");
}

TEST(MpAlgoEnv, BadProtoFailsInitOnEveryRank) {
  expectInitFails("NCCL_PROTO", "LL256", "LL256");
}

// AllReduce small (direct by default) and large, in and out of place, and
// Broadcast, all exact.
int exactCollectives(int rank, int n, const ncclUniqueId& id) {
  return withComm(rank, n, id, [n](const Rank& me) {
    RedCase c{ncclInt32, TestOp::kSum, n};
    for (size_t count : {size_t(7), size_t(1000), size_t(300000)})
      for (bool inPlace : {false, true}) MP_TRY(caseAllReduce(me, c, count, inPlace));
    MP_TRY(caseBroadcast(me, ncclFloat32, 4099, 1, false));
    MP_TRY(caseReduceScatter(me, c, 513, false));
    return 0;
  });
}

TEST(MpAlgoEnv, ValidSettingsGiveExactResults) {
  for (const char* v : {"allreduce:ring;broadcast:ring", "^direct", "Ring,Tree",
                        "AllReduce:^RING", "PAT;allreduce:NVLSTree"}) {
    EXPECT_RANKS_OK(runRanks(3, exactCollectives, opts("NCCL_ALGO", v))) << "NCCL_ALGO=" << v;
  }
  for (const char* v : {"LL", "LL128", "^Simple", "^LL128;allreduce:LL128"})
    EXPECT_RANKS_OK(runRanks(3, exactCollectives, opts("NCCL_PROTO", v))) << "NCCL_PROTO=" << v;
}

TEST(MpAlgoEnv, NcclOnlyAlgorithmLogsFallback) {
  char dir[] = "/tmp/ferry-algo-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  RunOptions o = opts("NCCL_ALGO", "NVLS");  // NCCL's Tree and PAT are Ferry's tree and pat now
  o.env["NCCL_PROTO"] = "LL128";
  o.env["NCCL_DEBUG"] = "INFO";
  o.env["NCCL_DEBUG_SUBSYS"] = "TUNING";
  o.env["NCCL_DEBUG_FILE"] = std::string(dir) + "/tree.%p";
  EXPECT_RANKS_OK(runRanks(2, exactCollectives, o));
  EXPECT_EQ(logFilesWith(dir, "tree", "allows no algorithm Ferry has for Broadcast, Reduce, "
                                      "AllGather, ReduceScatter, AllReduce"), 2);
  EXPECT_EQ(logFilesWith(dir, "tree", "allows no algorithm Ferry can run for this AllReduce"), 2);
  EXPECT_EQ(logFilesWith(dir, "tree", "LL and LL128 also run as Simple"), 2);
  std::string rm = std::string("rm -rf ") + dir;
  EXPECT_EQ(system(rm.c_str()), 0);
}

}  // namespace
}  // namespace ferry::mp
