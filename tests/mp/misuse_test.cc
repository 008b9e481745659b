// Misuse a new user makes, through libferry.so with forked ranks: each must
// end in a clear error code on every rank (and a WARN), never a crash, a hang
// or silently wrong data.
//   - a communicator destroyed or aborted while its work is queued in a group
//   - collectives after ncclCommFinalize
//   - ranks that call different collectives, counts, datatypes, ops or roots
//   - grouped Send/Recv whose sizes disagree
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
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

// ---- Ranks that disagree about an operation ----

// What one rank calls in a mismatch test.
struct Call {
  enum Kind { kAllReduce, kBroadcast, kReduce, kAllGather, kSend, kRecv } kind = kAllReduce;
  size_t count = 64;
  ncclDataType_t dt = ncclInt32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
};

ncclResult_t issue(const Call& c, ncclComm_t comm, int rank, int n, HostBuf& in, HostBuf& out) {
  int peer = (rank + 1) % n;
  switch (c.kind) {
    case Call::kAllReduce: return ncclAllReduce(in.data(), out.data(), c.count, c.dt, c.op, comm, nullptr);
    case Call::kBroadcast: return ncclBroadcast(in.data(), out.data(), c.count, c.dt, c.root, comm, nullptr);
    case Call::kReduce: return ncclReduce(in.data(), out.data(), c.count, c.dt, c.op, c.root, comm, nullptr);
    case Call::kAllGather: return ncclAllGather(in.data(), out.data(), c.count, c.dt, comm, nullptr);
    case Call::kSend: return ncclSend(in.data(), c.count, c.dt, peer, comm, nullptr);
    case Call::kRecv: return ncclRecv(out.data(), c.count, c.dt, (rank + n - 1) % n, comm, nullptr);
  }
  return ncclInternalError;
}

// Every rank makes its own call; each must fail with ncclInvalidUsage (the
// first rank that noticed names both sides; the others name that rank and
// repeat its message: fail_board.h), none may succeed, none may hang (FERRY_TIMEOUT_MS is 20 s: the watchdog at
// 60 s would catch a hang; a prompt failure takes well under a second).
// Ranks listed in mayPass are senders whose data left before anyone noticed.
int mismatchBody(int rank, int n, const ncclUniqueId& id, const std::vector<Call>& calls,
                 std::vector<int> mayPass = {}) {
  ncclComm_t comm = nullptr;
  MP_NCCL(initComm(&comm, n, id, rank));
  const Call& mine = calls[rank];
  HostBuf in(mine.dt, mine.count * n + 1), out(mine.dt, mine.count * n + 1);
  in.fill(1.0);
  int64_t t0 = monoNs();
  ncclResult_t r = issue(mine, comm, rank, n, in, out);
  int64_t ms = (monoNs() - t0) / 1000000;
  harnessSetValue(0, ms);
  bool passOk = std::find(mayPass.begin(), mayPass.end(), rank) != mayPass.end();
  if (r == ncclSuccess && passOk) {
    // Its peer failed: the next operation on this comm must fail, not succeed.
    HostBuf a(ncclInt32, 8), b(ncclInt32, 8);
    a.fill(1.0);
    r = ncclAllReduce(a.data(), b.data(), 8, ncclInt32, ncclSum, comm, nullptr);
    MP_CHECK(r != ncclSuccess, "rank %d: the operation after a failed one succeeded", rank);
  } else {
    MP_CHECK(r == ncclInvalidUsage, "rank %d: got %s after %lld ms, expected ncclInvalidUsage: %s",
             rank, resultName(r).c_str(), (long long)ms, ncclGetLastError(comm));
  }
  harnessMessage("rank %d (%lld ms): %s", rank, (long long)ms, ncclGetLastError(comm));
  ncclCommAbort(comm);
  return 0;
}

// separateHosts: every rank on its own simulated node (NCCL_HOSTID), so the
// descriptors travel through the network transport (built-in Socket).
RunResult runMismatch(std::vector<Call> calls, std::vector<int> mayPass = {},
                      bool separateHosts = false) {
  int n = static_cast<int>(calls.size());
  RunOptions o = opts(60);
  if (separateHosts) {
    o.rankEnv.resize(n);
    for (int r = 0; r < n; ++r) o.rankEnv[r]["NCCL_HOSTID"] = "misuse-node-" + std::to_string(r);
  }
  return runRanks(
      n,
      [&](int rank, int nr, const ncclUniqueId& id) {
        return mismatchBody(rank, nr, id, calls, mayPass);
      },
      o);
}

// Every rank's error names the mismatch: both `a` and `b` in its message.
void expectNamed(const RunResult& res, const std::string& a, const std::string& b) {
  EXPECT_RANKS_OK(res);
  for (const RankResult& r : res.ranks) {
    EXPECT_NE(r.message.find(a), std::string::npos) << "rank " << r.rank << ": " << r.message;
    EXPECT_NE(r.message.find(b), std::string::npos) << "rank " << r.rank << ": " << r.message;
    std::printf("  %s\n", r.message.c_str());
  }
}

TEST(MpMisuse, AllReduceCountsDiffer) {
  Call a, b;
  a.count = 1000;
  b.count = 1024;
  expectNamed(runMismatch({a, b}), "AllReduce count 1000 int32 sum", "AllReduce count 1024 int32 sum");
}

TEST(MpMisuse, AllReduceCountsDifferAcrossHosts) {
  Call a, b;
  a.count = 1000;
  b.count = 1024;
  expectNamed(runMismatch({a, b}, {}, true), "AllReduce count 1000 int32 sum",
              "AllReduce count 1024 int32 sum");
}

// Four simulated hosts, one rank each: no shared failure board, so the usage
// error travels over the network connections as a failure notice; every rank
// still fails with ncclInvalidUsage, and the rank that noticed names both.
TEST(MpMisuse, LargeAllReduceCountsDifferOnFourHosts) {
  Call big, other;
  big.count = 1 << 20;
  other.count = (1 << 20) + 4;
  big.dt = other.dt = ncclFloat32;
  RunResult res = runMismatch({big, other, big, big}, {}, true);
  EXPECT_RANKS_OK(res);
  bool named = false;
  for (const RankResult& r : res.ranks) {
    named = named || (r.message.find("AllReduce count 1048580 float32") != std::string::npos &&
                      r.message.find("AllReduce count 1048576 float32") != std::string::npos);
    std::printf("  %s\n", r.message.c_str());
  }
  EXPECT_TRUE(named) << res.summary();
}

TEST(MpMisuse, LargeAllReduceCountsDifferOnFourRanks) {
  // Ring-sized on three ranks, a different ring size on one.
  Call big, other;
  big.count = 1 << 20;
  other.count = (1 << 20) + 4;
  big.dt = other.dt = ncclFloat32;
  expectNamed(runMismatch({big, other, big, big}), "op #1: ", "AllReduce count 1048580 float32");
}

TEST(MpMisuse, SmallAndRingAllReduceOnFourRanks) {
  // One rank takes the one-hop algorithm, the others the ring: ranks wait
  // for connections the others never make; all must still fail promptly.
  Call big, small;
  big.count = 1 << 18;
  small.count = 16;
  expectNamed(runMismatch({big, big, big, small}), "AllReduce count 262144", "AllReduce count 16");
}

TEST(MpMisuse, AllReduceVersusBroadcast) {
  Call ar, bc;
  bc.kind = Call::kBroadcast;
  bc.root = 0;
  expectNamed(runMismatch({ar, bc}), "Broadcast count 64 int32 root 0", "AllReduce count 64 int32 sum");
}

TEST(MpMisuse, DatatypeOfEqualSizeDiffers) {
  Call i, f;
  f.dt = ncclFloat32;
  expectNamed(runMismatch({i, f, i}), "AllReduce count 64 float32 sum", "AllReduce count 64 int32 sum");
}

TEST(MpMisuse, ReductionOpDiffers) {
  Call s, m;
  m.op = ncclMax;
  expectNamed(runMismatch({s, m}), "AllReduce count 64 int32 max", "AllReduce count 64 int32 sum");
}

// Reduce with roots 0, 1, 0: every rank waits for a rank that never sends to
// it, so no descriptor ever arrives to compare. The limit of a check that
// rides on the data: this ends at the progress deadline (FERRY_TIMEOUT_MS,
// 3 s here) with an error on every rank, never a success or a hang.
TEST(MpMisuse, ReduceRootsDifferWithoutDataFlowTimesOut) {
  RunOptions o = opts(60);
  o.env["FERRY_TIMEOUT_MS"] = "3000";
  RunResult res = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL(initComm(&comm, n, id, rank));
        HostBuf a(ncclInt32, 64), b(ncclInt32, 64);
        a.fill(1.0);
        int64_t t0 = monoNs();
        ncclResult_t r = ncclReduce(a.data(), b.data(), 64, ncclInt32, ncclSum, rank == 1 ? 1 : 0,
                                    comm, nullptr);
        int64_t ms = (monoNs() - t0) / 1000000;
        MP_CHECK(r != ncclSuccess, "rank %d: Reduce with mismatched roots succeeded", rank);
        MP_CHECK(ms < 30000, "rank %d: failed only after %lld ms", rank, (long long)ms);
        harnessMessage("rank %d: %s after %lld ms: %s", rank, resultName(r).c_str(), (long long)ms,
                       ncclGetLastError(comm));
        ncclCommAbort(comm);
        return 0;
      },
      o);
  EXPECT_RANKS_OK(res);
  for (const RankResult& r : res.ranks) std::printf("  %s\n", r.message.c_str());
}

// Broadcast with roots 0 and 1 on two ranks: each only sends, so nobody can
// see the difference during the call. The stale pieces must not be taken for
// the next operation's data: the next, matched AllReduce fails on every rank
// with both operations named instead of returning wrong values.
TEST(MpMisuse, BroadcastRootsDifferThenAllReduce) {
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL(initComm(&comm, n, id, rank));
        HostBuf a(ncclFloat32, 100), b(ncclFloat32, 100);
        a.fill(double(rank + 1));
        ncclResult_t r = ncclBroadcast(a.data(), b.data(), 100, ncclFloat32, rank, comm, nullptr);
        MP_CHECK(r == ncclSuccess || r == ncclInvalidUsage, "Broadcast: %s", resultName(r).c_str());
        b.fill(0.0);
        ncclResult_t r2 = ncclAllReduce(a.data(), b.data(), 100, ncclFloat32, ncclSum, comm, nullptr);
        if (r == ncclSuccess)
          MP_CHECK(r2 == ncclInvalidUsage, "AllReduce after the mismatched Broadcast: %s",
                   resultName(r2).c_str());
        harnessMessage("%s", ncclGetLastError(comm));
        ncclCommAbort(comm);
        return 0;
      },
      opts(60));
  EXPECT_RANKS_OK(res);
  for (const RankResult& r : res.ranks)
    EXPECT_NE(r.message.find("Broadcast count 100 float32 root"), std::string::npos) << r.message;
}

// Three ranks, roots 0, 0, 1: rank 2 receives rank 1's pieces and sees root 1.
TEST(MpMisuse, BroadcastRootsDifferOnThreeRanks) {
  Call r0, r1;
  r0.kind = r1.kind = Call::kBroadcast;
  r1.root = 1;
  // Ranks 0 and 1 only send; whoever notices first (rank 2 in the Broadcast,
  // or 0/1 in their next call, reading the stale pieces) names a Broadcast.
  expectNamed(runMismatch({r0, r1, r0}, {0, 1}), "op #", "Broadcast count 64 int32 root ");
}

// Grouped Send/Recv whose sizes disagree: the receiver fails with both sizes
// named; the sender's data left at once, so its call may succeed, but its
// next operation fails.
TEST(MpMisuse, SendRecvSizesDiffer) {
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL(initComm(&comm, n, id, rank));
        size_t sendCount = rank == 0 ? 100 : 300, recvCount = rank == 0 ? 300 : 200;
        HostBuf s(ncclFloat32, 300), r(ncclFloat32, 300);
        s.fill(1.0);
        MP_NCCL(ncclGroupStart());
        MP_NCCL(ncclSend(s.data(), sendCount, ncclFloat32, 1 - rank, comm, nullptr));
        MP_NCCL(ncclRecv(r.data(), recvCount, ncclFloat32, 1 - rank, comm, nullptr));
        ncclResult_t res = ncclGroupEnd();
        if (rank == 0 && res == ncclSuccess) {  // its data left and rank 1's arrived
          HostBuf a(ncclInt32, 8), b(ncclInt32, 8);
          res = ncclAllReduce(a.data(), b.data(), 8, ncclInt32, ncclSum, comm, nullptr);
        }
        MP_CHECK(res == ncclInvalidUsage, "rank %d: %s: %s", rank, resultName(res).c_str(),
                 ncclGetLastError(comm));
        harnessMessage("%s", ncclGetLastError(comm));
        ncclCommAbort(comm);
        return 0;
      },
      opts(60));
  EXPECT_RANKS_OK(res);
  EXPECT_NE(res.ranks[1].message.find("rank 0 sends 400 bytes, rank 1 receives 800 bytes"),
            std::string::npos) << res.summary();
}

}  // namespace
}  // namespace ferry::mp
