// Rings per rail on real forked ranks: ranks on simulated hosts (NCCL_HOSTID,
// Socket network between them), NCCL_ALGO=ring, NCCL_MIN_NCHANNELS raising
// the ring count past the one rail the machine has, so AllReduce,
// ReduceScatter and AllGather run split over 2..4 lanes through the real
// executor with exact values; NCCL_MAX_NCHANNELS lowers it again. Also
// ferryCommViewJson (include/ferry/view.h) on those communicators.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <ferry/view.h>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("rings"); }

int reductions(const Rank& me, std::initializer_list<size_t> counts) {
  for (const RedCase& c : standardReductions(me.nranks))
    for (size_t count : counts) {
      for (bool inPlace : {false, true}) {
        MP_TRY(caseAllReduce(me, c, count, inPlace));
        MP_TRY(caseReduceScatter(me, c, count, inPlace));
      }
    }
  for (size_t count : counts)
    for (bool inPlace : {false, true}) MP_TRY(caseAllGather(me, ncclInt8, count, inPlace));
  MP_TRY(caseBroadcast(me, ncclInt32, 1001, me.nranks - 1, false));
  return 0;
}

// hosts x perHost ranks, rank r on host r % hosts (hosts interleave in rank
// order, so the rings' host blocks are not rank ranges).
RunOptions opts(const std::string& tag, int hosts, int perHost) {
  RunOptions o = loggedOptions(logDir(), tag, "INIT,TUNING",
                               {{"FERRY_NET_SLOT_BYTES", "65536"}, {"NCCL_ALGO", "ring"}}, 150);
  onSimulatedNodes(&o, tag, hosts * perHost, [hosts](int r) { return r % hosts; });
  return o;
}


struct Shape {
  int hosts, perHost;
  const char* minChannels;
  const char* maxChannels;
  int rings;  // expected
};

class MpRings : public ::testing::TestWithParam<Shape> {};

TEST_P(MpRings, SplitOverRingsExact) {
  Shape s = GetParam();
  int n = s.hosts * s.perHost;
  std::string tag = "rings" + std::to_string(s.hosts) + "x" + std::to_string(s.perHost) + "-" +
                    s.minChannels + "-" + s.maxChannels;
  RunOptions o = opts(tag, s.hosts, s.perHost);
  o.env["NCCL_MIN_NCHANNELS"] = s.minChannels;
  o.env["NCCL_MAX_NCHANNELS"] = s.maxChannels;
  RunResult res = runRanks(
      n,
      [](int rank, int nranks, const ncclUniqueId& id) {
        return withComm(rank, nranks, id, [](const Rank& me) { return reductions(me, {1, 7, 30001}); });
      },
      o);
  EXPECT_RANKS_OK(res);
  // The machine's rail count (Socket devices) varies; the rings do not.
  std::string hostsText = "View: " + std::to_string(n) + " ranks on " + std::to_string(s.hosts) + " host(s)";
  EXPECT_EQ(logFilesWith(logDir(), tag, hostsText), n);
  EXPECT_EQ(logFilesWith(logDir(), tag, "rail(s), " + std::to_string(s.rings) + " ring(s)"), n);
  EXPECT_EQ(logFilesWith(logDir(), tag, "AllReduce count 30001 elemSize 4: algorithm ring"), n);
}

// 3 ranks per host hold 2 rings at most (ring_order.h); MAX then MIN, as NCCL.
INSTANTIATE_TEST_SUITE_P(Shapes, MpRings,
                         ::testing::Values(Shape{2, 2, "2", "0", 2}, Shape{2, 4, "4", "0", 4},
                                           Shape{3, 3, "8", "0", 2}, Shape{2, 4, "0", "1", 1},
                                           Shape{2, 4, "3", "1", 3}),
                         [](const auto& info) {
                           return std::to_string(info.param.hosts) + "x" + std::to_string(info.param.perHost) +
                                  "_min" + info.param.minChannels + "_max" + info.param.maxChannels;
                         });

int viewChecks(const Rank& me) {
  size_t len = 0;
  MP_CHECK(ferryCommViewJson(nullptr, nullptr, &len) == ncclInvalidArgument, "%s", "NULL comm accepted");
  MP_CHECK(ferryCommViewJson(me.comm, nullptr, nullptr) == ncclInvalidArgument, "%s", "NULL len accepted");
  MP_CHECK(ferryCommViewJson(me.comm, nullptr, &len) == ncclInvalidArgument, "%s", "NULL buf accepted");
  MP_CHECK(len > 100, "size not reported: %zu", len);
  std::vector<char> buf(len);
  size_t small = len - 1;
  MP_CHECK(ferryCommViewJson(me.comm, buf.data(), &small) == ncclInvalidArgument, "%s", "short buffer accepted");
  MP_CHECK(small == len, "needed size %zu, then %zu", len, small);
  MP_CHECK(ferryCommViewJson(me.comm, buf.data(), &len) == ncclSuccess, "%s", "view failed");
  std::string j(buf.data());
  MP_CHECK(j.size() + 1 == len, "length %zu for a text of %zu", len, j.size());
  for (const char* want : {"\"nranks\": 4", "{\"host\": 0, \"ranks\": [0, 2]}", "{\"host\": 1, \"ranks\": [1, 3]}",
                           "{\"rank\": 3, \"host\": 1, \"localRank\": 1, \"rail\": 0, \"nic\": \"",
                           "\"rings\": [[2, 0, 3, 1], [0, 2, 1, 3]]", "\"calibration\": \""})
    MP_CHECK(j.find(want) != std::string::npos, "missing %s in %s", want, j.c_str());
  MP_TRY(caseAllReduce(me, RedCase{ncclInt32, TestOp::kSum, me.nranks}, 5, false));  // still usable
  return 0;
}

TEST(MpRingsView, CommViewJson) {
  RunOptions o = opts("view", 2, 2);
  o.env["NCCL_MIN_NCHANNELS"] = "2";
  o.env["NCCL_DEBUG"] = "WARN";
  RunResult res = runRanks(
      4,
      [](int rank, int nranks, const ncclUniqueId& id) { return withComm(rank, nranks, id, viewChecks); }, o);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "view", "ferryCommViewJson: buf holds"), 4);
}

}  // namespace
}  // namespace ferry::mp
