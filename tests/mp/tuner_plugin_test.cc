// An NCCL tuner plugin steering Ferry's choice, through libferry.so with
// forked ranks (the example tuner of tests/plugins, configured by env):
//   - it sees Ferry's cost table and its pick runs: AllReduce below 1 MiB
//     -> Tree/LL (Ferry's recdbl), from 1 MiB -> Ring/Simple (ring); exact;
//   - a getCollInfo error, or a pick of an entry no Ferry algorithm fills
//     (CollNetDirect), keeps Ferry's own choice with a WARN; still exact.
#include <gtest/gtest.h>

#include <string>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("tuner"); }

RunOptions opts(const std::string& tag) {
  return loggedOptions(logDir(), tag, "TUNING",
                       {{"NCCL_TUNER_PLUGIN", std::string(FERRY_PLUGIN_DIR) + "/libnccl-tuner-ferryexample.so"},
                        {"FERRY_EXAMPLE_TUNER_RING_ABOVE", std::to_string(1 << 20)}},
                       90);
}

// 1000 int32 (4 KB) and 300000 int32 (1.2 MB), sum and max, in place and out.
RunResult run(const RunOptions& o) {
  return runRanks(
      4,
      [](int rank, int nranks, const ncclUniqueId& id) {
        return withComm(rank, nranks, id, [](const Rank& me) {
          for (RedCase c : {RedCase{ncclInt32, TestOp::kSum, me.nranks},
                            RedCase{ncclFloat32, TestOp::kMax, me.nranks}})
            for (size_t count : {size_t{1000}, size_t{300000}})
              for (bool inPlace : {false, true}) MP_TRY(caseAllReduce(me, c, count, inPlace));
          return 0;
        });
      },
      o);
}

TEST(MpTunerPlugin, ItsPickRuns) {
  RunResult res = run(opts("pick"));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "pick", "tuner plugin FerryExample"), 4);
  EXPECT_EQ(logFilesWith(logDir(), "pick", "AllReduce count 1000 elemSize 4: algorithm recdbl (tuner plugin"), 4);
  EXPECT_EQ(logFilesWith(logDir(), "pick", "AllReduce count 300000 elemSize 4: algorithm ring (tuner plugin"), 4);
}

TEST(MpTunerPlugin, ErrorKeepsFerrysChoice) {
  RunOptions o = opts("fail");
  o.env["FERRY_EXAMPLE_TUNER_FAIL_COLLINFO"] = "1";
  RunResult res = run(o);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "fail", "tuner plugin failed for AllReduce"), 4);
  EXPECT_EQ(logFilesWith(logDir(), "fail", "AllReduce count 1000 elemSize 4: algorithm recdbl (tuner plugin"), 0);
  EXPECT_EQ(logFilesWith(logDir(), "fail", "(cost model,"), 4);
}

TEST(MpTunerPlugin, UnsupportedPickKeepsFerrysChoice) {
  RunOptions o = opts("collnet");
  o.env["FERRY_EXAMPLE_TUNER_PICK_COLLNET"] = "1";
  RunResult res = run(o);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "collnet", "which has no Ferry algorithm"), 4);
  EXPECT_EQ(logFilesWith(logDir(), "collnet", "(tuner plugin,"), 0);
}

}  // namespace
}  // namespace ferry::mp
