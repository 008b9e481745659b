// Collective correctness across rank counts, sizes, roots and simulated nodes
// (exact values, host buffers, NULL stream, libferry.so):
//  - ranks 1..8: float/int32 sum (plus int32 avg, float max) through
//    AllReduce, Reduce and ReduceScatter at counts 0, 1, 7 and 1000; every
//    root of Reduce/Broadcast/Gather/Scatter at count 7; the movement
//    collectives at counts 0, 1, 7;
//  - count 1M+3 for the main collectives at 3, 4 and 8 ranks;
//  - NCCL_HOSTID giving each rank (or each pair) its own node, which forces
//    the network (socket) path, for every collective kind.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

constexpr size_t kLarge = (size_t(1) << 20) + 3;

RunOptions opts(int timeoutSec) {
  RunOptions o;
  o.timeoutSec = timeoutSec;
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  return o;
}

int sweepBody(const Rank& me) {
  const RedCase cases[] = {{ncclFloat32, TestOp::kSum, me.nranks},
                           {ncclInt32, TestOp::kSum, me.nranks},
                           {ncclInt32, TestOp::kAvg, me.nranks},
                           {ncclFloat32, TestOp::kMax, me.nranks}};
  for (const RedCase& c : cases)
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000)}) MP_TRY(caseAllReductions(me, c, count));
  for (int root = 0; root < me.nranks; ++root) {
    MP_TRY(caseReduce(me, cases[0], 7, root, false));
    MP_TRY(caseBroadcast(me, ncclInt32, 7, root, false));
    MP_TRY(caseGather(me, ncclFloat32, 7, root, false));
    MP_TRY(caseScatter(me, ncclInt32, 7, root, false));
  }
  for (size_t count : {size_t(0), size_t(1), size_t(7)}) MP_TRY(caseAllMovement(me, ncclFloat32, count));
  MP_TRY(caseSendRecvAllPairs(me, ncclInt32, 7));
  return 0;
}

class MpCollRanks : public ::testing::TestWithParam<int> {};

TEST_P(MpCollRanks, SumsSizesRoots) {
  const int n = GetParam();
  RunResult res = runRanks(
      n, [](int rank, int nr, const ncclUniqueId& id) { return withComm(rank, nr, id, sweepBody); },
      opts(60 + 15 * n));
  EXPECT_RANKS_OK(res);
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpCollRanks, ::testing::Range(1, 9),
                         [](const ::testing::TestParamInfo<int>& i) { return std::to_string(i.param) + "ranks"; });

int largeBody(const Rank& me) {
  MP_TRY(caseAllReduce(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, kLarge, false));
  MP_TRY(caseAllReduce(me, RedCase{ncclInt32, TestOp::kSum, me.nranks}, kLarge, false));
  MP_TRY(caseReduceScatter(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, kLarge, false));
  MP_TRY(caseReduce(me, RedCase{ncclFloat32, TestOp::kMax, me.nranks}, kLarge, me.nranks / 2, false));
  MP_TRY(caseAllGather(me, ncclInt8, kLarge, false));
  MP_TRY(caseBroadcast(me, ncclBfloat16, kLarge, me.nranks - 1, false));
  MP_TRY(caseAlltoAll(me, ncclFloat32, kLarge / 4));
  MP_TRY(caseSendRecvRing(me, ncclFloat64, kLarge));
  return 0;
}

TEST(MpCollLarge, OneMegPlus3At4Ranks) {
  RunResult res = runRanks(
      4, [](int rank, int n, const ncclUniqueId& id) { return withComm(rank, n, id, largeBody); }, opts(150));
  EXPECT_RANKS_OK(res);
}

TEST(MpCollLarge, OneMegPlus3At3RanksHalfAndUint8) {
  RunResult res = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          MP_TRY(caseAllReduce(me, RedCase{ncclFloat16, TestOp::kSum, me.nranks}, kLarge, false));
          MP_TRY(caseAllReduce(me, RedCase{ncclUint8, TestOp::kProd, me.nranks}, kLarge, false));
          MP_TRY(caseReduceScatter(me, RedCase{ncclFloat8e5m2, TestOp::kMin, me.nranks}, kLarge, false));
          return 0;
        });
      },
      opts(120));
  EXPECT_RANKS_OK(res);
}

TEST(MpCollLarge, OneMegPlus3At8Ranks) {
  RunResult res = runRanks(
      8,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          return caseAllReduce(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, kLarge, false);
        });
      },
      opts(150));
  EXPECT_RANKS_OK(res);
}

// hostOf(rank) names the simulated node of each rank.
RunResult runOnNodes(int n, const std::function<std::string(int)>& hostOf) {
  RunOptions o = opts(150);
  o.rankEnv.resize(n);
  for (int r = 0; r < n; ++r) o.rankEnv[r]["NCCL_HOSTID"] = hostOf(r);
  return runRanks(
      n,
      [](int rank, int nr, const ncclUniqueId& id) {
        return withComm(rank, nr, id, [](const Rank& me) {
          MP_TRY(caseAllReductions(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, 7));
          MP_TRY(caseAllReductions(me, RedCase{ncclInt64, TestOp::kProd, me.nranks}, 1000));
          MP_TRY(caseAllMovement(me, ncclInt32, 7));
          MP_TRY(caseSendRecvAllPairs(me, ncclUint8, 1000));
          MP_TRY(caseAllReduce(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, kLarge, false));
          MP_TRY(caseAllGather(me, ncclFloat32, kLarge / 4, false));
          return 0;
        });
      },
      o);
}

TEST(MpMultiNode, TwoNodesOfTwoRanks) {
  RunResult res = runOnNodes(4, [](int r) { return "mp-node-" + std::to_string(r / 2); });
  EXPECT_RANKS_OK(res);
}

TEST(MpMultiNode, OneRankPerNode) {
  RunResult res = runOnNodes(4, [](int r) { return "mp-solo-" + std::to_string(r); });
  EXPECT_RANKS_OK(res);
}

TEST(MpMultiNode, UnevenNodes) {
  // Nodes of 2, 2 and 1 ranks, interleaved so node-local ranks are not contiguous.
  RunResult res = runOnNodes(5, [](int r) { return "mp-uneven-" + std::to_string(r % 3); });
  EXPECT_RANKS_OK(res);
}

}  // namespace
}  // namespace ferry::mp

namespace ferry::mp {
namespace {

// More call shapes in one group than the plan cache keeps (64): the plans a
// group built must survive until it ran (evicting one while it was queued
// ran a freed executor), and the shapes run again from the cache, exact.
TEST(MpCollGroup, MoreShapesThanCachedPlans) {
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      constexpr int kCalls = 150;
      RedCase c{ncclInt32, TestOp::kSum, me.nranks};
      std::vector<std::vector<int32_t>> in(kCalls), out(kCalls);
      for (int round = 0; round < 2; ++round) {
        MP_NCCL(ncclGroupStart());
        for (int k = 0; k < kCalls; ++k) {
          size_t count = size_t(k) + 1;
          in[k].resize(count);
          out[k].assign(count, -1);
          for (size_t i = 0; i < count; ++i) in[k][i] = int32_t(redInput(c, me.rank, i)) + round;
          MP_NCCL(ncclAllReduce(in[k].data(), out[k].data(), count, ncclInt32, ncclSum, me.comm, nullptr));
        }
        MP_NCCL(ncclGroupEnd());
        for (int k = 0; k < kCalls; ++k)
          for (size_t i = 0; i < out[k].size(); ++i)
            MP_CHECK(out[k][i] == redExpected(c, i) + me.nranks * round, "round %d call %d element %zu: %d", round,
                     k, i, out[k][i]);
      }
      return 0;
    });
  }, opts(120));
  EXPECT_RANKS_OK(res);
}

}  // namespace
}  // namespace ferry::mp

namespace ferry::mp {
namespace {

// A shared-memory ring of an odd configured shape (slot bytes not a multiple
// of the 128-byte record alignment, 3 slots): every record and skip must
// still fit the ring, through refs (FERRY_CMA_THRESHOLD low) and by value.
TEST(MpShmRing, OddShapeIsExact) {
  RunOptions o = opts(120);
  o.env["FERRY_SHM_SLOT_BYTES"] = "4160";
  o.env["FERRY_SHM_SLOTS"] = "3";
  o.env["FERRY_CMA_THRESHOLD"] = "8192";
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      RedCase c{ncclInt32, TestOp::kSum, me.nranks};
      for (size_t count : {size_t(1), size_t(12), size_t(1000), size_t(5000), size_t(70001)}) {
        MP_TRY(caseAllReductions(me, c, count));
        MP_TRY(caseAllMovement(me, ncclFloat32, count));
      }
      MP_TRY(caseSendRecvAllPairs(me, ncclInt32, 3001));
      return 0;
    });
  }, o);
  EXPECT_RANKS_OK(res);
}

// Pieces written into the rings with non-temporal stores (FERRY_SHM_STREAM
// =always, from 64 bytes on, all by value): every collective exact, with
// sizes that leave partial lines at the ends and every kind of step that
// writes a slot (send, reduce-and-send with and without a copy kept, Avg's
// final division, PreMulSum's scaled first step, copy-and-send). Local
// copies and receive steps stream from 64 bytes on as well
// (FERRY_COPY_STREAM_BYTES): a rank's own block, pieces copied out of a ring.
TEST(MpShmRing, StreamedStoresAreExact) {
  RunOptions o = opts(180);
  o.env["FERRY_SHM_STREAM"] = "always";
  o.env["FERRY_SHM_STREAM_BYTES"] = "64";
  o.env["FERRY_COPY_STREAM_BYTES"] = "64";
  o.env["FERRY_CMA_THRESHOLD"] = "1073741824";
  RunResult res = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    return withComm(rank, n, id, [](const Rank& me) {
      for (size_t count : {size_t(1), size_t(17), size_t(1000), size_t(70001), size_t(300007)}) {
        for (TestOp op : {TestOp::kSum, TestOp::kAvg, TestOp::kPreMulSum}) {
          RedCase c{ncclInt32, op, me.nranks};
          MP_TRY(caseAllReductions(me, c, count));
        }
        MP_TRY(caseAllReductions(me, RedCase{ncclFloat64, TestOp::kMax, me.nranks}, count));
        MP_TRY(caseAllMovement(me, ncclUint8, count));
      }
      MP_TRY(caseSendRecvAllPairs(me, ncclInt32, 30001));
      return 0;
    });
  }, o);
  EXPECT_RANKS_OK(res);
}

}  // namespace
}  // namespace ferry::mp
