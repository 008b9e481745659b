// Self-test of the fork harness (tests/mp/harness.h), without Ferry: exit
// codes and messages reach the parent, per-rank values and environment, the
// shared barrier, a crash by signal, a throwing body, the watchdog killing a
// hung rank (and naming it), and the planned kill of a rank by time and on
// its "ready" signal.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "tests/mp/harness.h"

namespace ferry::mp {
namespace {

RunOptions noId(int timeoutSec = 20) {
  RunOptions o;
  o.makeUniqueId = false;
  o.timeoutSec = timeoutSec;
  return o;
}

TEST(MpHarness, AllRanksSucceedAndReportValues) {
  RunResult res = runRanks(
      5,
      [](int rank, int nranks, const ncclUniqueId&) {
        harnessSetValue(0, rank * 10);
        harnessSetValue(1, nranks);
        return 0;
      },
      noId());
  ASSERT_RANKS_OK(res);
  ASSERT_EQ(res.ranks.size(), 5u);
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(res.ranks[r].values[0], r * 10);
    EXPECT_EQ(res.ranks[r].values[1], 5);
    EXPECT_TRUE(res.ranks[r].exited);
  }
}

TEST(MpHarness, ExitCodeAndMessageReachParent) {
  RunResult res = runRanks(
      3,
      [](int rank, int, const ncclUniqueId&) {
        if (rank != 2) return 0;
        harnessMessage("rank %d failing on purpose", rank);
        return 7;
      },
      noId());
  EXPECT_FALSE(res.ok());
  EXPECT_FALSE(res.timedOut);
  EXPECT_EQ(res.ranks[2].exitCode, 7);
  EXPECT_EQ(res.ranks[0].exitCode, 0);
  EXPECT_EQ(res.ranks[2].message, "rank 2 failing on purpose");
  EXPECT_NE(res.summary().find("rank 2: exit code 7"), std::string::npos) << res.summary();
}

TEST(MpHarness, OutOfRangeReturnIsAFailure) {
  RunResult res = runRanks(1, [](int, int, const ncclUniqueId&) { return 256; }, noId());
  EXPECT_FALSE(res.ok());
  EXPECT_EQ(res.ranks[0].exitCode, 1);
}

TEST(MpHarness, EnvironmentPerRank) {
  RunOptions o = noId();
  o.env["MP_HARNESS_ALL"] = "everyone";
  o.rankEnv.resize(3);
  for (int r = 0; r < 3; ++r) o.rankEnv[r]["MP_HARNESS_RANK"] = "host" + std::to_string(r);
  RunResult res = runRanks(
      3,
      [](int rank, int, const ncclUniqueId&) {
        const char* a = getenv("MP_HARNESS_ALL");
        const char* b = getenv("MP_HARNESS_RANK");
        if (!a || std::string(a) != "everyone") return 1;
        if (!b || std::string(b) != "host" + std::to_string(rank)) return 2;
        return 0;
      },
      o);
  EXPECT_RANKS_OK(res);
}

TEST(MpHarness, BarrierOrdersRanks) {
  RunResult res = runRanks(
      4,
      [](int rank, int, const ncclUniqueId&) {
        // Rank 0 is slow; nobody may pass barrier 1 before it arrives.
        if (rank == 0) usleep(200 * 1000);
        harnessSetValue(0, monoNs());  // arrival
        if (!harnessBarrier(1, 5000)) return 1;
        harnessSetValue(1, monoNs());  // departure
        if (!harnessBarrier(2, 5000)) return 2;
        return 0;
      },
      noId());
  ASSERT_RANKS_OK(res);
  for (int r = 1; r < 4; ++r) EXPECT_GE(res.ranks[r].values[1], res.ranks[0].values[0]) << "rank " << r;
}

TEST(MpHarness, BarrierTimesOut) {
  RunResult res = runRanks(
      2,
      [](int rank, int, const ncclUniqueId&) {
        if (rank == 1) return 0;  // never arrives
        return harnessBarrier(1, 300) ? 1 : 0;
      },
      noId());
  EXPECT_RANKS_OK(res);
}

TEST(MpHarness, CrashBySignalIsReported) {
  RunResult res = runRanks(
      2,
      [](int rank, int, const ncclUniqueId&) {
        // Default action first: ASan's SEGV handler would report and exit(1).
        if (rank == 1) {
          signal(SIGSEGV, SIG_DFL);
          raise(SIGSEGV);
        }
        return 0;
      },
      noId());
  EXPECT_FALSE(res.ok());
  EXPECT_EQ(res.ranks[1].signal, SIGSEGV);
  EXPECT_FALSE(res.ranks[1].exited);
  EXPECT_NE(res.summary().find("signal"), std::string::npos);
}

TEST(MpHarness, ThrowingBodyIsReported) {
  RunResult res = runRanks(
      1, [](int, int, const ncclUniqueId&) -> int { throw std::runtime_error("boom"); }, noId());
  EXPECT_EQ(res.ranks[0].exitCode, kExitException);
  EXPECT_NE(res.ranks[0].message.find("boom"), std::string::npos);
}

TEST(MpHarness, WatchdogKillsHungRanksAndNamesThem) {
  int64_t t0 = monoNs();
  RunResult res = runRanks(
      3,
      [](int rank, int, const ncclUniqueId&) {
        if (rank == 1)
          for (;;) pause();
        return 0;
      },
      noId(2));
  double secs = (monoNs() - t0) / 1e9;
  EXPECT_TRUE(res.timedOut);
  EXPECT_FALSE(res.ok());
  EXPECT_TRUE(res.ranks[1].hung);
  EXPECT_FALSE(res.ranks[0].hung);
  EXPECT_EQ(res.ranks[0].exitCode, 0);
  EXPECT_NE(res.summary().find("rank 1: HUNG"), std::string::npos) << res.summary();
  EXPECT_LT(secs, 6.0);
}

TEST(MpHarness, KillOnReady) {
  RunOptions o = noId();
  o.killRank = 2;
  o.killOnReady = true;
  o.killDelayMs = 50;
  RunResult res = runRanks(
      3,
      [](int rank, int, const ncclUniqueId&) {
        if (rank == 2) {
          harnessSignalReady();
          for (;;) pause();
        }
        // Survivors see the kill time appear in the shared region.
        int64_t deadline = monoNs() + 5000000000LL;
        while (harnessKillTimeNs() == 0)
          if (monoNs() > deadline) return 1;
          else usleep(1000);
        return 0;
      },
      o);
  EXPECT_RANKS_OK(res);
  EXPECT_TRUE(res.ranks[2].killedByHarness);
  EXPECT_EQ(res.ranks[2].signal, SIGKILL);
  EXPECT_GT(res.killTimeNs, 0);
}

TEST(MpHarness, KillAfterTime) {
  RunOptions o = noId();
  o.killRank = 0;
  o.killAfterMs = 300;
  int64_t t0 = monoNs();
  RunResult res = runRanks(
      2,
      [](int rank, int, const ncclUniqueId&) {
        if (rank == 0)
          for (;;) pause();
        return 0;
      },
      o);
  EXPECT_RANKS_OK(res);
  EXPECT_TRUE(res.ranks[0].killedByHarness);
  EXPECT_GE((res.killTimeNs - t0) / 1000000, 300);
}

}  // namespace
}  // namespace ferry::mp
