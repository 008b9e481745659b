// Going on after a failure: ncclCommShrink (with and without a dead rank,
// on one host and on simulated hosts over the network), ncclCommRevoke, and
// ncclCommGetAsyncError reporting a failure of another rank of the host to
// ranks that call nothing.
// Every shrunk communicator's collectives are checked for exact values.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

constexpr int kVictim = 2;
constexpr int64_t kMsNs = 1000000;

// Exact AllReduce (every standard reduction, in and out of place) and a
// Broadcast from the last rank on `comm`, whose size and rank must be
// `nranks` and `rank`.
int exactOn(ncclComm_t comm, int rank, int nranks) {
  int n = -1, r = -1;
  MP_NCCL(ncclCommCount(comm, &n));
  MP_NCCL(ncclCommUserRank(comm, &r));
  MP_CHECK(n == nranks && r == rank, "shrunk comm says rank %d of %d, expected %d of %d", r, n, rank, nranks);
  Rank me{comm, rank, nranks};
  for (const RedCase& c : standardReductions(nranks))
    for (size_t count : {size_t(0), size_t(1), size_t(1001), size_t(300000)})
      for (bool inPlace : {false, true}) MP_TRY(caseAllReduce(me, c, count, inPlace));
  MP_TRY(caseBroadcast(me, ncclInt32, 4097, nranks - 1, false));
  return 0;
}

RunOptions plainOptions(int timeoutSec) {
  RunOptions o;
  o.timeoutSec = timeoutSec;
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  return o;
}

// The survivors' new rank: their index among the ranks that stay.
int shrunkRank(int rank) { return rank < kVictim ? rank : rank - 1; }

// Ranks 0, 1, 3 shrink rank 2 away (NCCL_SHRINK_DEFAULT) while it is alive;
// rank 2 only destroys its communicator. The parent stays usable.
int excludeLiveBody(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  MP_NCCL(initComm(&comm, n, id, rank));
  MP_TRY(exactOn(comm, rank, n));
  if (rank == kVictim) {
    MP_CHECK(harnessBarrier(1, 60000), "the survivors never finished");
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  }
  int exclude[] = {kVictim};
  ncclComm_t child = nullptr;
  MP_NCCL(ncclCommShrink(comm, exclude, 1, &child, nullptr, NCCL_SHRINK_DEFAULT));
  MP_CHECK(child != nullptr);
  MP_TRY(exactOn(child, shrunkRank(rank), n - 1));
  MP_NCCL(closeComm(child));
  MP_CHECK(harnessBarrier(1, 60000), "rank 2 or a survivor never arrived");
  MP_NCCL(ncclCommDestroy(comm));
  return 0;
}

// Rank 2 is killed inside an AllReduce loop. The survivors fail, see the
// error in ncclCommGetAsyncError, shrink with NCCL_SHRINK_ABORT and go on
// exactly; the parent then refuses collectives (revoked).
int afterKillBody(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  MP_NCCL(initComm(&comm, n, id, rank));
  const size_t count = size_t(256) << 10;
  HostBuf in(ncclFloat32, count), out(ncclFloat32, count);
  in.fill(1.0);
  ncclResult_t r = ncclSuccess;
  const int64_t deadline = monoNs() + 60000 * kMsNs;
  for (int iter = 0; r == ncclSuccess; ++iter) {
    if (rank == kVictim && iter == 3) harnessSignalReady();
    r = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
    MP_CHECK(monoNs() < deadline, "rank %d: no error 60 s into the loop", rank);
  }
  MP_CHECK(rank != kVictim, "the victim itself saw %s", resultName(r).c_str());
  ncclResult_t async = ncclSuccess;
  MP_NCCL(ncclCommGetAsyncError(comm, &async));
  MP_CHECK(async != ncclSuccess, "ncclCommGetAsyncError says success after %s", resultName(r).c_str());
  int exclude[] = {kVictim};
  ncclComm_t child = nullptr;
  MP_NCCL(ncclCommShrink(comm, exclude, 1, &child, nullptr, NCCL_SHRINK_ABORT));
  MP_TRY(exactOn(child, shrunkRank(rank), n - 1));
  ncclResult_t again = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
  MP_CHECK(again == ncclInvalidUsage, "an AllReduce on the shrunk-away parent returned %s", resultName(again).c_str());
  MP_NCCL(closeComm(child));
  MP_NCCL(ncclCommDestroy(comm));
  return 0;
}

RunOptions killOptions(bool separateNodes) {
  RunOptions o = killAtReadyOptions(kVictim, 20, 10000, 150);
  if (separateNodes) {
    o.env["FERRY_NET_SLOT_BYTES"] = "65536";
    onSimulatedNodes(&o, "mp-shrink", 4, [](int r) { return r; });
  }
  return o;
}

TEST(MpShrink, ExcludeLiveRankExact) {
  RunResult res = runRanks(4, excludeLiveBody, plainOptions(120));
  EXPECT_RANKS_OK(res);
}

TEST(MpShrink, AfterKillSameNodeExact) {
  RunResult res = runRanks(4, afterKillBody, killOptions(false));
  EXPECT_RANKS_OK(res);
  EXPECT_TRUE(res.ranks[kVictim].killedByHarness) << res.summary();
}

TEST(MpShrink, AfterKillSeparateNodesExact) {
  RunResult res = runRanks(4, afterKillBody, killOptions(true));
  EXPECT_RANKS_OK(res);
  EXPECT_TRUE(res.ranks[kVictim].killedByHarness) << res.summary();
}

// Bad calls return ncclInvalidArgument at once (no rank waits) and leave the
// communicator usable.
int badArgsBody(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  MP_NCCL(initComm(&comm, n, id, rank));
  ncclComm_t child = reinterpret_cast<ncclComm_t>(uintptr_t{0x1000});
  int self[] = {rank}, outside[] = {n}, negative[] = {-1}, other[] = {(rank + 1) % n};
  struct {
    int* list;
    int count;
    ncclComm_t* out;
    int flags;
    const char* what;
  } cases[] = {{other, 0, &child, NCCL_SHRINK_DEFAULT, "an empty list"},
               {self, 1, &child, NCCL_SHRINK_DEFAULT, "the caller excluded"},
               {outside, 1, &child, NCCL_SHRINK_DEFAULT, "rank nranks"},
               {negative, 1, &child, NCCL_SHRINK_DEFAULT, "rank -1"},
               {nullptr, 1, &child, NCCL_SHRINK_DEFAULT, "a NULL list"},
               {other, 1, &child, 7, "flags 7"},
               {other, 1, nullptr, NCCL_SHRINK_DEFAULT, "a NULL newcomm"}};
  for (const auto& c : cases) {
    ncclResult_t r = ncclCommShrink(comm, c.list, c.count, c.out, nullptr, c.flags);
    MP_CHECK(r == ncclInvalidArgument, "shrink with %s returned %s", c.what, resultName(r).c_str());
    MP_CHECK(c.out == nullptr || *c.out == nullptr, "shrink with %s left newcomm set", c.what);
  }
  ncclResult_t r = ncclCommRevoke(comm, 1);
  MP_CHECK(r == ncclInvalidArgument, "revoke with flags 1 returned %s", resultName(r).c_str());
  MP_TRY(exactOn(comm, rank, n));
  MP_NCCL(closeComm(comm));
  return 0;
}

TEST(MpShrink, BadArgumentsFailCleanly) {
  EXPECT_RANKS_OK(runRanks(3, badArgsBody, plainOptions(60)));
}

// Revoke: collectives and Finalize refused, a second revoke refused, Split
// and Shrink of the revoked communicator work.
int revokeBody(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  MP_NCCL(initComm(&comm, n, id, rank));
  MP_TRY(exactOn(comm, rank, n));
  MP_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  int v = 1;
  ncclResult_t r = ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, nullptr);
  MP_CHECK(r == ncclInvalidUsage, "AllReduce after revoke returned %s", resultName(r).c_str());
  r = ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT);
  MP_CHECK(r == ncclInvalidArgument, "a second revoke returned %s", resultName(r).c_str());
  r = ncclCommFinalize(comm);
  MP_CHECK(r == ncclInvalidUsage, "Finalize after revoke returned %s", resultName(r).c_str());
  ncclComm_t split = nullptr;
  MP_NCCL(ncclCommSplit(comm, 0, n - rank, &split, nullptr));  // reversed order
  MP_TRY(exactOn(split, n - 1 - rank, n));
  MP_NCCL(closeComm(split));
  if (rank != n - 1) {
    int exclude[] = {n - 1};
    ncclComm_t child = nullptr;
    MP_NCCL(ncclCommShrink(comm, exclude, 1, &child, nullptr, NCCL_SHRINK_DEFAULT));
    MP_TRY(exactOn(child, rank, n - 1));
    MP_NCCL(closeComm(child));
  }
  MP_CHECK(harnessBarrier(1, 60000));
  MP_NCCL(ncclCommDestroy(comm));
  return 0;
}

TEST(MpRevoke, RefusesCollectivesThenSplitsAndShrinks) {
  EXPECT_RANKS_OK(runRanks(3, revokeBody, plainOptions(120)));
}

// Rank 2 is killed; rank 0 notices in a Recv from it and posts the failure
// on its host's board; ranks 1 and 3 call nothing but
// ncclCommGetAsyncError, which reports it.
int idleKillBody(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  MP_NCCL(initComm(&comm, n, id, rank));
  MP_TRY(exactOn(comm, rank, n));
  if (rank == kVictim) {
    harnessSignalReady();
    pause();  // until killed
    return 1;
  }
  if (rank == 0) {
    int v = 0;
    ncclResult_t r = ncclRecv(&v, 1, ncclInt32, kVictim, comm, nullptr);
    MP_CHECK(r == ncclRemoteError, "Recv from the killed rank returned %s", resultName(r).c_str());
  }
  ncclResult_t async = ncclSuccess;
  int64_t deadline = monoNs() + 30000 * kMsNs;
  while (async == ncclSuccess && monoNs() < deadline) {
    MP_NCCL(ncclCommGetAsyncError(comm, &async));
    if (async == ncclSuccess) usleep(10000);
  }
  MP_CHECK(async == ncclRemoteError, "ncclCommGetAsyncError: %s 30 s after the start", resultName(async).c_str());
  MP_CHECK(harnessKillTimeNs() != 0, "an error although nobody was killed");
  MP_NCCL(ncclCommAbort(comm));
  return 0;
}

TEST(MpAsyncError, IdleRanksSeeAFailureOfTheirHost) {
  RunResult res = runRanks(4, idleKillBody, killAtReadyOptions(kVictim, 0, 20000, 90));
  EXPECT_RANKS_OK(res);
  EXPECT_TRUE(res.ranks[kVictim].killedByHarness) << res.summary();
}

}  // namespace
}  // namespace ferry::mp
