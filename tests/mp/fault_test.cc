// Fault handling through libferry.so:
//  (a) one of 4 ranks is SIGKILLed in the middle of a loop of large
//      AllReduces (it signals "ready", the parent kills it 20 ms later);
//      each survivor's call fails with ncclRemoteError or ncclSystemError
//      within FERRY_TIMEOUT_MS (10 s) + margin of the kill, and ncclCommAbort
//      then returns promptly;
//  (b) the same with every rank on its own simulated node (NCCL_HOSTID), so
//      the socket path carries the data;
//  (c) ncclCommAbort from a second thread while the first waits inside a
//      collective (AllReduce, then Recv) for a peer that never calls it: the
//      waiting call returns an error promptly, long before FERRY_TIMEOUT_MS.
//  (d) a peer that stays alive but never joins: the waiting AllReduce fails
//      with ncclRemoteError/ncclSystemError after FERRY_TIMEOUT_MS (3 s here),
//      not earlier (the peer is alive) and not much later.
//  (e) a rank killed right after init, before any connection to it exists:
//      the survivors' first collective needs a lazily made connection to it
//      and fails within seconds (liveness), not at FERRY_TIMEOUT_MS (60 s).
//  (f) ranks that disagree on nranks, or two ranks with one rank number:
//      ncclCommInitRank fails on every rank within seconds (the root tells
//      each why) with ncclInvalidUsage and a WARN naming the problem, with
//      FERRY_INIT_TIMEOUT_MS at its 120 s default.
//  (g) /dev/shm too small for a pair's rings (a container's --shm-size): the
//      ranks' collective fails with an error naming /dev/shm on every rank,
//      and no rank dies of SIGBUS writing past the end of the tmpfs.
// The harness watchdog turns any hang into a failure naming the hung ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <cstdio>
#include <string>
#include <thread>

#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

constexpr int kVictim = 2;
constexpr int64_t kTimeoutMs = 10000;
constexpr int64_t kMarginMs = 5000;
constexpr int64_t kAbortMaxMs = 5000;
constexpr int64_t kMsNs = 1000000;

// Value slots the survivors report.
enum Slot { kErrLatencyMs = 0, kAbortMs = 1, kErrCode = 2, kIters = 3 };

int killLoopBody(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  MP_NCCL(initComm(&comm, n, id, rank));
  // 2 MiB of floats per call: large enough that the kill lands inside a call
  // most of the time, while each rank's ring chunk (512 KiB) stays below the
  // shm FIFO capacity, so this suite tests fault handling only.
  const size_t count = size_t(512) << 10;
  HostBuf in(ncclFloat32, count), out(ncclFloat32, count);
  in.fill(1.0);
  const int64_t loopDeadline = monoNs() + 60000 * kMsNs;
  ncclResult_t r = ncclSuccess;
  int iter = 0;
  int64_t returned = 0;
  for (;; ++iter) {
    if (rank == kVictim && iter == 3) harnessSignalReady();
    r = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
    returned = monoNs();
    if (r != ncclSuccess) break;
    MP_CHECK(out.get(count - 1) == double(n), "iteration %d: wrong sum %g before the kill", iter, out.get(count - 1));
    MP_CHECK(returned < loopDeadline, "rank %d: no error 60 s into the loop (victim killed at %lld)", rank,
             (long long)harnessKillTimeNs());
  }
  harnessSetValue(kIters, iter);
  harnessSetValue(kErrCode, int64_t(r));
  MP_CHECK(rank != kVictim, "the victim itself saw %s", resultName(r).c_str());
  MP_CHECK(r == ncclRemoteError || r == ncclSystemError, "survivor %d: AllReduce returned %s", rank,
           resultName(r).c_str());
  // The parent stores the kill time right after kill(); allow for that race.
  int64_t killT = harnessKillTimeNs();
  for (int k = 0; killT == 0 && k < 1000; ++k) {
    usleep(1000);
    killT = harnessKillTimeNs();
  }
  MP_CHECK(killT != 0, "survivor %d failed at iteration %d although nobody was killed", rank, iter);
  int64_t latencyMs = (returned - killT) / kMsNs;
  harnessSetValue(kErrLatencyMs, latencyMs);
  MP_CHECK(latencyMs <= kTimeoutMs + kMarginMs, "survivor %d took %lld ms after the kill to fail", rank,
           (long long)latencyMs);
  int64_t t0 = monoNs();
  ncclResult_t ra = ncclCommAbort(comm);
  int64_t abortMs = (monoNs() - t0) / kMsNs;
  harnessSetValue(kAbortMs, abortMs);
  MP_CHECK(ra == ncclSuccess, "ncclCommAbort returned %s", resultName(ra).c_str());
  MP_CHECK(abortMs <= kAbortMaxMs, "ncclCommAbort took %lld ms", (long long)abortMs);
  return 0;
}

void runKillTest(bool separateNodes) {
  RunOptions o = killAtReadyOptions(kVictim, 20, kTimeoutMs, 100);
  if (separateNodes) onSimulatedNodes(&o, "mp-fault", 4, [](int r) { return r; });
  RunResult res = runRanks(4, killLoopBody, o);
  ASSERT_RANKS_OK(res);
  EXPECT_TRUE(res.ranks[kVictim].killedByHarness) << res.summary();
  for (int r = 0; r < 4; ++r) {
    if (r == kVictim) continue;
    const RankResult& rr = res.ranks[r];
    std::printf("survivor %d: %lld good calls, %s %lld ms after the kill, abort %lld ms\n", r,
                (long long)rr.values[kIters], resultName(ncclResult_t(rr.values[kErrCode])).c_str(),
                (long long)rr.values[kErrLatencyMs], (long long)rr.values[kAbortMs]);
    EXPECT_LE(rr.values[kErrLatencyMs], kTimeoutMs + kMarginMs) << "rank " << r;
    EXPECT_LE(rr.values[kAbortMs], kAbortMaxMs) << "rank " << r;
    EXPECT_TRUE(rr.values[kErrCode] == ncclRemoteError || rr.values[kErrCode] == ncclSystemError)
        << "rank " << r << " code " << rr.values[kErrCode];
  }
}

TEST(MpFault, KilledRankMidAllReduceSameNode) { runKillTest(false); }

TEST(MpFault, KilledRankMidAllReduceSeparateNodes) { runKillTest(true); }

// Rank 0 blocks in `op` against rank 1, which never joins; a second thread
// aborts rank 0's comm after 500 ms.
enum class Wait { kAllReduce, kRecv };

int abortWhileWaitingBody(int rank, int n, const ncclUniqueId& id, Wait what) {
  ncclComm_t comm = nullptr;
  MP_NCCL(initComm(&comm, n, id, rank));
  if (rank == 1) {
    // Stay alive and silent until rank 0 is done, then leave.
    MP_CHECK(harnessBarrier(1, 40000), "rank 0 never finished");
    int64_t t0 = monoNs();
    ncclResult_t ra = ncclCommAbort(comm);
    int64_t ms = (monoNs() - t0) / kMsNs;
    MP_CHECK(ra == ncclSuccess, "peer's ncclCommAbort returned %s", resultName(ra).c_str());
    MP_CHECK(ms <= kAbortMaxMs, "peer's ncclCommAbort took %lld ms", (long long)ms);
    return 0;
  }
  const size_t count = 1 << 20;
  HostBuf in(ncclFloat32, count), out(ncclFloat32, count);
  in.fill(1.0);
  std::atomic<int64_t> abortAt{0};
  std::atomic<int> abortRes{-1};
  int64_t t0 = monoNs();  // before the thread starts: the abort comes >= 500 ms later
  std::thread killer([&] {
    usleep(500 * 1000);
    abortAt.store(monoNs());
    abortRes.store(int(ncclCommAbort(comm)));
  });
  ncclResult_t r = what == Wait::kAllReduce
                       ? ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr)
                       : ncclRecv(out.data(), count, ncclFloat32, 1, comm, nullptr);
  int64_t t1 = monoNs();
  killer.join();
  bool peerDone = harnessBarrier(1, 40000);
  MP_CHECK(r != ncclSuccess, "the waiting call succeeded although the peer never joined");
  MP_CHECK(t1 >= abortAt.load() && abortAt.load() != 0, "the call returned %s after only %lld ms, before the abort",
           resultName(r).c_str(), (long long)((t1 - t0) / kMsNs));
  int64_t lagMs = (t1 - abortAt.load()) / kMsNs;
  harnessSetValue(0, lagMs);
  MP_CHECK(lagMs <= kAbortMaxMs, "the waiting call returned %lld ms after ncclCommAbort", (long long)lagMs);
  MP_CHECK(abortRes.load() == ncclSuccess, "ncclCommAbort returned %d", abortRes.load());
  MP_CHECK(peerDone);
  return 0;
}

void runAbortTest(Wait what) {
  RunOptions o;
  o.timeoutSec = 60;
  o.env["FERRY_TIMEOUT_MS"] = "60000";  // only the abort may end the wait
  RunResult res = runRanks(
      2, [what](int rank, int n, const ncclUniqueId& id) { return abortWhileWaitingBody(rank, n, id, what); }, o);
  ASSERT_RANKS_OK(res);
  EXPECT_LE(res.ranks[0].values[0], kAbortMaxMs);
}

TEST(MpFault, AbortFromAnotherThreadUnblocksAllReduce) { runAbortTest(Wait::kAllReduce); }

TEST(MpFault, AbortFromAnotherThreadUnblocksRecv) { runAbortTest(Wait::kRecv); }

TEST(MpFault, SilentPeerTimesOut) {
  constexpr int64_t kShortTimeoutMs = 3000;
  RunOptions o;
  o.timeoutSec = 60;
  o.env["FERRY_TIMEOUT_MS"] = std::to_string(kShortTimeoutMs);
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL(initComm(&comm, n, id, rank));
        if (rank == 1) {
          // Alive and silent until rank 0 has given up.
          MP_CHECK(harnessBarrier(1, 40000), "rank 0 never finished");
          ncclCommAbort(comm);
          return 0;
        }
        HostBuf in(ncclFloat32, 1000), out(ncclFloat32, 1000);
        in.fill(1.0);
        int64_t t0 = monoNs();
        ncclResult_t r = ncclAllReduce(in.data(), out.data(), 1000, ncclFloat32, ncclSum, comm, nullptr);
        int64_t ms = (monoNs() - t0) / kMsNs;
        harnessSetValue(0, ms);
        bool peerDone = harnessBarrier(1, 40000);
        MP_CHECK(r == ncclRemoteError || r == ncclSystemError, "AllReduce with a silent peer returned %s after %lld ms",
                 resultName(r).c_str(), (long long)ms);
        MP_CHECK(ms >= kShortTimeoutMs * 9 / 10, "gave up after %lld ms although the peer is alive", (long long)ms);
        MP_CHECK(ms <= kShortTimeoutMs + kMarginMs, "gave up only after %lld ms", (long long)ms);
        ncclResult_t ra = ncclCommAbort(comm);
        MP_CHECK(ra == ncclSuccess, "ncclCommAbort returned %s", resultName(ra).c_str());
        MP_CHECK(peerDone);
        return 0;
      },
      o);
  ASSERT_RANKS_OK(res);
  std::printf("silent peer: AllReduce failed after %lld ms\n", (long long)res.ranks[0].values[0]);
}

TEST(MpFault, RankKilledBeforeLazyConnect) {
  RunOptions o;
  o.timeoutSec = 60;
  o.env["FERRY_TIMEOUT_MS"] = "60000";  // only liveness may end the wait in time
  o.killRank = 1;
  o.killOnReady = true;
  RunResult res = runRanks(
      4,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL(initComm(&comm, n, id, rank));
        if (rank == 1) {
          harnessSignalReady();
          pause();  // killed here
          return 0;
        }
        usleep(200 * 1000);  // let the kill land first
        const size_t count = size_t(1) << 18;
        HostBuf in(ncclFloat32, count), out(ncclFloat32, count);
        in.fill(1.0);
        int64_t t0 = monoNs();
        ncclResult_t r = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
        int64_t ms = (monoNs() - t0) / kMsNs;
        harnessSetValue(0, ms);
        MP_CHECK(r != ncclSuccess, "AllReduce with a dead rank succeeded");
        MP_CHECK(ms <= 5000, "rank %d: the dead rank was noticed only after %lld ms", rank, (long long)ms);
        ncclCommAbort(comm);
        return 0;
      },
      o);
  ASSERT_RANKS_OK(res);
  for (int r : {0, 2, 3})
    std::printf("rank %d: error %lld ms into the AllReduce\n", r, (long long)res.ranks[r].values[0]);
}

// (f): rank r claims nranks[r] and rank number ranks[r].
void runBadInitTest(std::vector<int> ranks, std::vector<int> nranks, const char* needle) {
  RunOptions o;
  o.timeoutSec = 60;
  RunResult res = runRanks(
      static_cast<int>(ranks.size()),
      [&](int rank, int, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        int64_t t0 = monoNs();
        ncclResult_t r = ncclCommInitRank(&comm, nranks[rank], id, ranks[rank]);
        int64_t ms = (monoNs() - t0) / kMsNs;
        harnessSetValue(0, ms);
        std::string last = ncclGetLastError(nullptr);
        MP_CHECK(r == ncclInvalidUsage, "ncclCommInitRank returned %s after %lld ms (%s)",
                 resultName(r).c_str(), (long long)ms, last.c_str());
        MP_CHECK(last.find(needle) != std::string::npos, "last WARN does not say '%s': %s", needle,
                 last.c_str());
        MP_CHECK(ms < 5000, "failed only after %lld ms", (long long)ms);
        return 0;
      },
      o);
  ASSERT_RANKS_OK(res);
  for (auto& r : res.ranks) std::printf("rank %d: init failed after %lld ms\n", r.rank, (long long)r.values[0]);
}

TEST(MpFault, NranksMismatchFailsEveryRankFast) { runBadInitTest({0, 1, 2, 3}, {4, 4, 4, 5}, "mismatch"); }

TEST(MpFault, DuplicateRankFailsEveryRankFast) { runBadInitTest({0, 1, 1}, {3, 3, 3}, "duplicate"); }

// (g) in a child process of its own, which mounts a 4 MiB /dev/shm in a
// private mount namespace (root only) so the other tests keep the real one.
// A pair's segment is 16 MiB (FERRY_SHM_SLOTS=64: 8 MiB per direction), and
// an 8 MiB AllReduce walks far past 4 MiB of it: without the space reserved
// when the segment is made, the ranks died of SIGBUS.
int shmTooSmallChild() {
  if (unshare(CLONE_NEWNS) != 0) return 77;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
  if (mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=4m") != 0) return 77;
  RunOptions o;
  o.timeoutSec = 60;
  o.env["FERRY_SHM_SLOTS"] = "64";
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL(initComm(&comm, n, id, rank));
        const size_t count = size_t(2) << 20;
        HostBuf in(ncclFloat32, count), out(ncclFloat32, count);
        in.fill(1.0);
        ncclResult_t r = ncclSuccess;
        for (int i = 0; i < 4 && r == ncclSuccess; ++i)
          r = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
        std::string last = ncclGetLastError(comm);
        MP_CHECK(r != ncclSuccess, "8 MiB AllReduces through a 4 MiB /dev/shm succeeded");
        harnessMessage("rank %d: %s: %s", rank, resultName(r).c_str(), last.c_str());
        ncclCommAbort(comm);
        return 0;
      },
      o);
  std::fprintf(stderr, "%s", res.summary().c_str());
  bool named = false;
  for (const RankResult& r : res.ranks) {
    std::fprintf(stderr, "rank %d: exit %d signal %d: %s\n", r.rank, r.exitCode, r.signal, r.message.c_str());
    named = named || r.message.find("/dev/shm") != std::string::npos;
  }
  return res.ok() && named ? 0 : 1;
}

TEST(MpFault, ShmTooSmallFailsWithAMessageNotSigbus) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) _exit(shmTooSmallChild());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the test's child died of signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot mount a small /dev/shm here (needs root)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the ranks' lines above";
}

}  // namespace
}  // namespace ferry::mp
