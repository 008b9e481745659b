// Misuse a new user makes, through libferry.so with forked ranks: each must
// end in a clear error code on every rank (and a WARN), never a crash, a hang
// or silently wrong data.
//   - a communicator destroyed or aborted while its work is queued in a group
//   - collectives after ncclCommFinalize
//   - ranks that call different collectives, counts, datatypes, ops or roots
//   - grouped Send/Recv whose sizes disagree
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

RunOptions opts(int timeoutSec) {
  RunOptions o;
  o.timeoutSec = timeoutSec;
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  return o;
}

// ncclGroupStart; AllReduce; ncclCommDestroy (or Abort); ncclGroupEnd: the
// group end reports ncclInvalidUsage and touches nothing of the freed comm
// (this was a heap use-after-free). A second, live comm in the same group
// still runs its AllReduce exactly.
int destroyInGroup(int rank, int n, const ncclUniqueId& id, bool abort) {
  ncclComm_t c = nullptr, keep = nullptr;
  MP_NCCL(initComm(&c, n, id, rank));
  MP_NCCL(ncclCommSplit(c, 0, rank, &keep, nullptr));
  HostBuf in(ncclInt32, 1024), out(ncclInt32, 1024), in2(ncclInt32, 64), out2(ncclInt32, 64);
  in.fill([&](size_t i) { return double(rank + int(i % 7)); });
  in2.fill(double(rank + 1));
  MP_NCCL(ncclGroupStart());
  MP_NCCL(ncclAllReduce(in.data(), out.data(), 1024, ncclInt32, ncclSum, c, nullptr));
  MP_NCCL(ncclAllReduce(in2.data(), out2.data(), 64, ncclInt32, ncclSum, keep, nullptr));
  MP_NCCL(abort ? ncclCommAbort(c) : ncclCommDestroy(c));
  MP_EXPECT_RESULT(ncclGroupEnd(), ncclInvalidUsage);
  double want = n * (n + 1) / 2.0;
  MP_CHECK(checkBuf(out2, 0, 64, [&](size_t) { return want; }, "live comm in the group"));
  // The survivor is still usable, outside a group too.
  MP_TRY(caseAllReduce(Rank{keep, rank, n}, RedCase{ncclInt32, TestOp::kSum, n}, 333, false));
  MP_NCCL(closeComm(keep));
  return 0;
}

TEST(MpMisuse, DestroyWhileQueuedInGroup) {
  EXPECT_RANKS_OK(runRanks(
      3, [](int r, int n, const ncclUniqueId& id) { return destroyInGroup(r, n, id, false); },
      opts(90)));
}

TEST(MpMisuse, AbortWhileQueuedInGroup) {
  EXPECT_RANKS_OK(runRanks(
      2, [](int r, int n, const ncclUniqueId& id) { return destroyInGroup(r, n, id, true); },
      opts(90)));
}

// Point-to-point work of a destroyed comm too; and a comm created inside a
// group and destroyed before the group ends.
TEST(MpMisuse, DestroyWithQueuedSendRecvAndInit) {
  EXPECT_RANKS_OK(runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t c = nullptr;
        MP_NCCL(initComm(&c, n, id, rank));
        HostBuf buf(ncclFloat32, 100);
        MP_NCCL(ncclGroupStart());
        MP_NCCL(ncclSend(buf.data(), 100, ncclFloat32, 1 - rank, c, nullptr));
        MP_NCCL(ncclRecv(buf.data(), 100, ncclFloat32, 1 - rank, c, nullptr));
        MP_NCCL(ncclCommDestroy(c));
        MP_EXPECT_RESULT(ncclGroupEnd(), ncclInvalidUsage);
        ncclComm_t d = nullptr;
        ncclUniqueId none{};  // never used: the init does not run
        MP_NCCL(ncclGroupStart());
        MP_NCCL(ncclCommInitRank(&d, n, none, rank));
        MP_NCCL(ncclCommDestroy(d));
        MP_EXPECT_RESULT(ncclGroupEnd(), ncclInvalidUsage);
        return 0;
      },
      opts(60)));
}

// After ncclCommFinalize only ncclCommDestroy is valid: collectives and
// point-to-point calls are refused with ncclInvalidUsage.
TEST(MpMisuse, CollectiveAfterFinalize) {
  EXPECT_RANKS_OK(runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t c = nullptr;
        MP_NCCL(initComm(&c, n, id, rank));
        MP_TRY(caseAllReduce(Rank{c, rank, n}, RedCase{ncclInt32, TestOp::kSum, n}, 10, false));
        MP_NCCL(ncclCommFinalize(c));
        HostBuf a(ncclInt32, 10), b(ncclInt32, 10);
        MP_EXPECT_RESULT(ncclAllReduce(a.data(), b.data(), 10, ncclInt32, ncclSum, c, nullptr),
                         ncclInvalidUsage);
        MP_EXPECT_RESULT(ncclBroadcast(a.data(), b.data(), 10, ncclInt32, 0, c, nullptr),
                         ncclInvalidUsage);
        MP_EXPECT_RESULT(ncclSend(a.data(), 10, ncclInt32, 1 - rank, c, nullptr), ncclInvalidUsage);
        MP_NCCL(ncclCommDestroy(c));
        return 0;
      },
      opts(60)));
}

}  // namespace
}  // namespace ferry::mp
