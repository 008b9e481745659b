// Multi-process test harness: runs a test body in N forked rank processes.
//
// The gtest process (parent) never calls into Ferry, so forking it is safe.
// A MAP_SHARED anonymous region made before fork carries the ncclUniqueId
// (published by rank 0's child), per-rank "ready" flags, kill times, numeric
// result slots and failure text. Each child's exit status is its result.
// A watchdog SIGKILLs every rank still running at the deadline: a hang is a
// failure, and the report names the ranks that were still running.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ferry::mp {

constexpr int kMaxRanks = 64;
constexpr int kMsgBytes = 4096;
constexpr int kValueSlots = 8;

// Exit codes the harness itself uses (test bodies return 0 or a small code).
constexpr int kExitIdFailed = 90;     // rank 0 could not create the unique id
constexpr int kExitIdTimeout = 91;    // the unique id never arrived
constexpr int kExitException = 92;    // the body threw
constexpr int kExitLeak = 93;         // LeakSanitizer found leaks at the end of the body

using Env = std::map<std::string, std::string>;
using RankBody = std::function<int(int rank, int nranks, const ncclUniqueId& id)>;

struct RunOptions {
  int timeoutSec = 60;          // watchdog for the whole run
  int killRank = -1;            // rank the parent SIGKILLs (-1: none)
  int killAfterMs = -1;         // kill at this time after start (-1: not by time)
  bool killOnReady = false;     // kill when killRank calls harnessSignalReady()
  int killDelayMs = 0;          // extra delay between "ready" and the kill
  Env env;                      // set in every child before the body runs
  std::vector<Env> rankEnv;     // per-rank additions/overrides (index = rank)
  bool makeUniqueId = true;     // rank 0 calls ncclGetUniqueId and publishes it
  int idWaitSec = 30;           // how long ranks > 0 wait for the id
};

struct RankResult {
  int rank = 0;
  bool exited = false;          // exited normally (exitCode valid)
  int exitCode = -1;
  int signal = 0;               // terminating signal, if any
  bool killedByHarness = false; // the planned kill (killRank)
  bool hung = false;            // still running at the watchdog deadline
  double elapsedMs = 0;         // from start of run to reap
  std::string message;          // text the rank wrote with harnessMessage()
  int64_t values[kValueSlots] = {};  // numbers the rank stored with harnessSetValue()
};

struct RunResult {
  std::vector<RankResult> ranks;
  bool timedOut = false;
  int64_t killTimeNs = 0;       // CLOCK_MONOTONIC time of the planned kill (0: none)

  // True when every rank exited 0, ignoring the planned victim.
  bool ok() const;
  // One line per rank that failed, with its message; empty when ok().
  std::string summary() const;
};

// Forks nranks children, runs body in each, waits, reports. Never throws.
RunResult runRanks(int nranks, RankBody body, RunOptions opts = {});

// ---- Child-side helpers (valid only inside a body run by runRanks) ----

// Tells the parent this rank reached its kill point (see killOnReady).
void harnessSignalReady();
// Appends printf-style text to this rank's message buffer (truncated).
void harnessMessage(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Stores a number the parent returns in RankResult::values.
void harnessSetValue(int slot, int64_t v);
// CLOCK_MONOTONIC ns of the planned kill, or 0 if it has not happened yet.
int64_t harnessKillTimeNs();
// Waits (deadline timeoutMs) until all ranks reached barrier number `gen`
// (call with 1, 2, ... in order). Does not use Ferry. Returns false on timeout.
bool harnessBarrier(int gen, int timeoutMs = 30000);
// Monotonic clock in ns (same clock as harnessKillTimeNs).
int64_t monoNs();

}  // namespace ferry::mp

// gtest helper: fails the test with the per-rank report.
#define EXPECT_RANKS_OK(res) EXPECT_TRUE((res).ok()) << (res).summary()
#define ASSERT_RANKS_OK(res) ASSERT_TRUE((res).ok()) << (res).summary()
