// Collective correctness, full datatype matrix, through libferry.so with host
// buffers and the NULL stream, exact values:
//  - every datatype x every op (sum, prod, max, min, avg, PreMulSum with a
//    host-immediate scalar) for AllReduce, Reduce (root n-1) and
//    ReduceScatter at 4 ranks, count 7, all in one forked run; the same at 3
//    ranks (exact cases only), and sum/prod/avg/PreMulSum at 8 ranks;
//  - every datatype through Broadcast, ncclBcast, Gather, Scatter (roots 0
//    and 3), AllGather, AlltoAll and ring Send/Recv at 4 ranks, count 7;
//  - NCCL's in-place forms of every collective that has one, for a few
//    datatypes and roots.
#include <gtest/gtest.h>

#include <initializer_list>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

RunOptions opts(int timeoutSec) {
  RunOptions o;
  o.timeoutSec = timeoutSec;
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  return o;
}

TEST(MpCollMatrix, ReductionsAllTypesAllOps4Ranks) {
  RunResult res = runRanks(
      4,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          for (ncclDataType_t dt : kAllTypes)
            for (TestOp op : kAllOps) MP_TRY(caseAllReductions(me, RedCase{dt, op, me.nranks}, 7));
          return 0;
        });
      },
      opts(120));
  EXPECT_RANKS_OK(res);
}

// Odd rank count (float avg is skipped: 1/3 is inexact) and the full 8 ranks,
// where fp8 inputs must be bounded harder to keep every partial sum exact.
int matrixSubset(const Rank& me, std::initializer_list<TestOp> ops) {
  for (ncclDataType_t dt : kAllTypes)
    for (TestOp op : ops) {
      RedCase c{dt, op, me.nranks};
      if (redCaseExact(c)) MP_TRY(caseAllReductions(me, c, 7));
    }
  return 0;
}

TEST(MpCollMatrix, ReductionsAllTypesAllOps3Ranks) {
  RunResult res = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          return matrixSubset(me, {TestOp::kSum, TestOp::kProd, TestOp::kMax, TestOp::kMin, TestOp::kAvg,
                                   TestOp::kPreMulSum});
        });
      },
      opts(120));
  EXPECT_RANKS_OK(res);
}

TEST(MpCollMatrix, ReductionsAllTypes8Ranks) {
  RunResult res = runRanks(
      8,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          return matrixSubset(me, {TestOp::kSum, TestOp::kProd, TestOp::kAvg, TestOp::kPreMulSum});
        });
      },
      opts(150));
  EXPECT_RANKS_OK(res);
}

TEST(MpCollMatrix, MovementAllTypes4Ranks) {
  RunResult res = runRanks(
      4,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          for (ncclDataType_t dt : kAllTypes) MP_TRY(caseAllMovement(me, dt, 7));
          return 0;
        });
      },
      opts(120));
  EXPECT_RANKS_OK(res);
}

int inPlaceCases(const Rank& me, ncclDataType_t dt, size_t count) {
  const int last = me.nranks - 1;
  for (TestOp op : {TestOp::kSum, TestOp::kMax, TestOp::kPreMulSum}) {
    RedCase c{dt, op, me.nranks};
    MP_TRY(caseAllReduce(me, c, count, true));
    MP_TRY(caseReduce(me, c, count, 0, true));
    MP_TRY(caseReduce(me, c, count, last, true));
    MP_TRY(caseReduceScatter(me, c, count, true));
  }
  for (int root : {0, last}) {
    MP_TRY(caseBroadcast(me, dt, count, root, true));
    MP_TRY(caseGather(me, dt, count, root, true));
    MP_TRY(caseScatter(me, dt, count, root, true));
  }
  MP_TRY(caseAllGather(me, dt, count, true));
  return 0;
}

TEST(MpCollMatrix, InPlace4Ranks) {
  RunResult res = runRanks(
      4,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          for (ncclDataType_t dt : {ncclFloat32, ncclInt8, ncclBfloat16, ncclFloat8e4m3, ncclUint64})
            for (size_t count : {size_t(1), size_t(7), size_t(1000)}) MP_TRY(inPlaceCases(me, dt, count));
          return 0;
        });
      },
      opts(120));
  EXPECT_RANKS_OK(res);
}

TEST(MpCollMatrix, InPlace3RanksLarge) {
  RunResult res = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) { return inPlaceCases(me, ncclFloat32, (1 << 20) + 3); });
      },
      opts(120));
  EXPECT_RANKS_OK(res);
}

}  // namespace
}  // namespace ferry::mp
