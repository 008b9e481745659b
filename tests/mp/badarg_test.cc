// Invalid arguments through libferry.so: each call must return NCCL's code
// for it, and the communicator must still work afterwards (a correct
// AllReduce runs after the bad calls). Covers: NULL comm, NULL buffers with
// count > 0, datatype/op out of range, root/peer out of range, count*size
// overflow, ncclGroupEnd without ncclGroupStart, bad nranks/rank/NULL
// newcomm/bad config magic in ncclCommInitRank[Config], ncclGetVersion(NULL),
// ncclCommCount/UserRank with NULL arguments, ncclRedOpDestroy of a built-in
// op, duplicate devices in ncclCommInitAll.
// Reuse of a destroyed or aborted comm is undefined in NCCL; Ferry detects it
// (a registry of live communicators) and the last test checks that.
#include <gtest/gtest.h>

#include <cstdint>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

constexpr ncclResult_t kArg = ncclInvalidArgument;

RunOptions opts(int timeoutSec, bool id = true) {
  RunOptions o;
  o.timeoutSec = timeoutSec;
  o.makeUniqueId = id;
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  return o;
}

// Calls that must fail before any communication, so every rank can make them.
int badInitCalls(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t c = nullptr;
  MP_EXPECT_RESULT(ncclCommInitRank(&c, 0, id, 0), kArg);
  MP_EXPECT_RESULT(ncclCommInitRank(&c, -3, id, 0), kArg);
  MP_EXPECT_RESULT(ncclCommInitRank(&c, n, id, n), kArg);
  MP_EXPECT_RESULT(ncclCommInitRank(&c, n, id, -1), kArg);
  MP_EXPECT_RESULT(ncclCommInitRank(nullptr, n, id, rank), kArg);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0x12345678;
  MP_EXPECT_RESULT(ncclCommInitRankConfig(&c, n, id, rank, &cfg), kArg);
  return 0;
}

int badCommCalls(const Rank& me) {
  const int n = me.nranks;
  HostBuf a(ncclFloat32, 64), b(ncclFloat32, 64 * size_t(n));
  void* s = a.data();
  void* r = b.data();
  const ncclComm_t comm = me.comm;

  // NULL communicator.
  MP_EXPECT_RESULT(ncclAllReduce(s, r, 8, ncclFloat32, ncclSum, nullptr, nullptr), kArg);
  MP_EXPECT_RESULT(ncclBroadcast(s, r, 8, ncclFloat32, 0, nullptr, nullptr), kArg);
  MP_EXPECT_RESULT(ncclSend(s, 8, ncclFloat32, 0, nullptr, nullptr), kArg);
  int out = 0;
  MP_EXPECT_RESULT(ncclCommCount(nullptr, &out), kArg);
  MP_EXPECT_RESULT(ncclCommUserRank(nullptr, &out), kArg);
  MP_EXPECT_RESULT(ncclCommCount(comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclCommUserRank(comm, nullptr), kArg);

  // NULL buffers with count > 0.
  MP_EXPECT_RESULT(ncclAllReduce(nullptr, r, 8, ncclFloat32, ncclSum, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclAllReduce(s, nullptr, 8, ncclFloat32, ncclSum, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclAllGather(nullptr, r, 8, ncclFloat32, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclReduceScatter(s, nullptr, 8, ncclFloat32, ncclSum, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclAlltoAll(nullptr, r, 8, ncclFloat32, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclSend(nullptr, 8, ncclFloat32, 0, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclRecv(nullptr, 8, ncclFloat32, 0, comm, nullptr), kArg);

  // Datatype and op out of range.
  MP_EXPECT_RESULT(ncclAllReduce(s, r, 8, static_cast<ncclDataType_t>(99), ncclSum, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclAllReduce(s, r, 8, ncclNumTypes, ncclSum, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclAllReduce(s, r, 8, ncclFloat32, static_cast<ncclRedOp_t>(99), comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclReduce(s, r, 8, ncclFloat32, static_cast<ncclRedOp_t>(99), 0, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclAllGather(s, r, 8, static_cast<ncclDataType_t>(99), comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclSend(s, 8, static_cast<ncclDataType_t>(99), 0, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclRedOpDestroy(ncclSum, comm), kArg);

  // Root / peer out of range.
  MP_EXPECT_RESULT(ncclBroadcast(s, r, 8, ncclFloat32, n, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclBroadcast(s, r, 8, ncclFloat32, -1, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclBcast(s, 8, ncclFloat32, n + 5, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclReduce(s, r, 8, ncclFloat32, ncclSum, n, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclGather(s, r, 8, ncclFloat32, n, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclScatter(r, s, 8, ncclFloat32, -1, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclSend(s, 8, ncclFloat32, n, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclRecv(r, 8, ncclFloat32, -1, comm, nullptr), kArg);

  // count * sizeof(datatype) overflows size_t.
  const size_t huge = SIZE_MAX / 2;
  MP_EXPECT_RESULT(ncclAllReduce(s, r, huge, ncclFloat32, ncclSum, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclBroadcast(s, r, huge, ncclFloat64, 0, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclAllGather(s, r, huge, ncclInt32, comm, nullptr), kArg);
  MP_EXPECT_RESULT(ncclSend(s, huge, ncclFloat32, 0, comm, nullptr), kArg);

  // Group misuse and process-wide calls.
  MP_EXPECT_RESULT(ncclGroupEnd(), ncclInvalidUsage);
  MP_EXPECT_RESULT(ncclGetVersion(nullptr), kArg);
  return 0;
}

TEST(MpBadArgs, BadCallsThenCommStillWorks) {
  RunResult res = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        MP_TRY(badInitCalls(rank, n, id));
        return withComm(rank, n, id, [](const Rank& me) {
          MP_TRY(caseAllReduce(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, 7, false));
          MP_TRY(badCommCalls(me));
          MP_TRY(caseAllReduce(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, 1000, false));
          // A second round: failures must not leave state behind (e.g. an open group).
          MP_TRY(badCommCalls(me));
          MP_TRY(caseAllReduce(me, RedCase{ncclInt32, TestOp::kMax, me.nranks}, 7, false));
          MP_TRY(caseSendRecvRing(me, ncclInt32, 7));
          return 0;
        });
      },
      opts(90));
  EXPECT_RANKS_OK(res);
}

TEST(MpBadArgs, InitAllDuplicateDevices) {
  RunResult res = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[2] = {};
        const int devs[2] = {0, 0};
        MP_EXPECT_RESULT(ncclCommInitAll(comms, 2, devs), ncclInvalidUsage);
        return 0;
      },
      opts(30, false));
  EXPECT_RANKS_OK(res);
}

TEST(MpBadArgs, DestroyedAndAbortedCommsAreRejected) {
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t c = nullptr;
        MP_NCCL(ncclCommInitRank(&c, n, id, rank));
        // A call first: the thread remembers c as live (registry.cc) and
        // must forget it when c is destroyed.
        float x = 1.0f;
        MP_NCCL(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr));
        MP_NCCL(ncclCommDestroy(c));
        int count = -1;
        MP_EXPECT_RESULT(ncclCommCount(c, &count), kArg);
        MP_EXPECT_RESULT(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, nullptr), kArg);
        MP_EXPECT_RESULT(ncclCommDestroy(c), kArg);
        return 0;
      },
      opts(60));
  EXPECT_RANKS_OK(res);
  RunResult res2 = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t c = nullptr;
        MP_NCCL(ncclCommInitRank(&c, n, id, rank));
        MP_NCCL(ncclCommAbort(c));
        int r = -1;
        MP_EXPECT_RESULT(ncclCommUserRank(c, &r), kArg);
        MP_EXPECT_RESULT(ncclCommAbort(c), kArg);
        return 0;
      },
      opts(60));
  EXPECT_RANKS_OK(res2);
}

}  // namespace
}  // namespace ferry::mp
