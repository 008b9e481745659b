// Implementation of the fork-based multi-rank harness (see harness.h).
#include "tests/mp/harness.h"

#include "tests/support/sanitize.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

// Weak, so the harness self-test can be linked without libferry; every
// suite that makes unique ids links libferry.so, which defines it.
#pragma weak ncclGetUniqueId

namespace ferry::mp {
namespace {

enum IdState : int { kIdNone = 0, kIdReady = 1, kIdFailed = 2 };

// Lives in MAP_SHARED memory: only lock-free atomics and plain data.
struct Shared {
  std::atomic<int> idState;
  ncclUniqueId id;
  std::atomic<int> ready[kMaxRanks];
  std::atomic<int> barrier[kMaxRanks];
  std::atomic<int64_t> killTimeNs;
  int nranks;
  int64_t values[kMaxRanks][kValueSlots];
  char msg[kMaxRanks][kMsgBytes];
};
static_assert(std::atomic<int64_t>::is_always_lock_free, "shared atomics must be lock-free");

Shared* gShared = nullptr;  // in a child: the run's region
int gRank = -1;             // in a child: its rank
bool gLeakCheck = false;    // the parent was single-threaded at fork

void sleepMs(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

[[noreturn]] void childMain(Shared* sh, int rank, int nranks, const RankBody& body,
                            const RunOptions& opts) {
  // If the gtest process dies (ctest timeout), take the ranks with it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  gShared = sh;
  gRank = rank;
  for (const auto& [k, v] : opts.env) setenv(k.c_str(), v.c_str(), 1);
  if (rank < static_cast<int>(opts.rankEnv.size()))
    for (const auto& [k, v] : opts.rankEnv[rank]) setenv(k.c_str(), v.c_str(), 1);

  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (opts.makeUniqueId) {
    if (rank == 0) {
      ncclResult_t r = &ncclGetUniqueId ? ncclGetUniqueId(&id) : ncclInternalError;
      if (r != ncclSuccess) {
        harnessMessage("ncclGetUniqueId failed: %d", static_cast<int>(r));
        sh->idState.store(kIdFailed, std::memory_order_release);
        _exit(kExitIdFailed);
      }
      sh->id = id;
      sh->idState.store(kIdReady, std::memory_order_release);
    } else {
      int64_t deadline = monoNs() + int64_t(opts.idWaitSec) * 1000000000LL;
      int st;
      while ((st = sh->idState.load(std::memory_order_acquire)) == kIdNone) {
        if (monoNs() > deadline) {
          harnessMessage("timed out after %d s waiting for rank 0's unique id", opts.idWaitSec);
          _exit(kExitIdTimeout);
        }
        sleepMs(1);
      }
      if (st == kIdFailed) _exit(kExitIdFailed);
      id = sh->id;
    }
  }

  int rc;
  try {
    rc = body(rank, nranks, id);
  } catch (const std::exception& e) {
    harnessMessage("body threw: %s", e.what());
    rc = kExitException;
  } catch (...) {
    harnessMessage("body threw a non-std exception");
    rc = kExitException;
  }
  fflush(stdout);
  fflush(stderr);
  // An exit code outside 1..255 would read as success or be truncated.
  if (rc < 0 || rc > 255) rc = 1;
  // _exit skips LeakSanitizer's at-exit check: run it here (ASan builds).
  // Opt-in (FERRY_MP_LEAK_CHECK=1): in ranks that ran Ferry, LeakSanitizer's
  // tracer crashed ("Tracer caught signal 11") in several suites even with
  // one thread left, failing the rank for a tool error. Only if the parent
  // was single-threaded (see runProcesses in test_util.cc) and the rank has
  // no threads left (memory a live thread still uses is not a leak yet).
  if (rc == 0 && gLeakCheck && ferry::test::processThreadCount() == 1 &&
      ferry::test::childLeakCheck()) {
    harnessMessage("LeakSanitizer found leaks in this rank (report on stderr)");
    rc = kExitLeak;
  }
  _exit(rc);
}

void recordStatus(RankResult& rr, int status) {
  if (WIFEXITED(status)) {
    rr.exited = true;
    rr.exitCode = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    rr.signal = WTERMSIG(status);
  }
}

}  // namespace

int64_t monoNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void harnessSignalReady() {
  if (gShared) gShared->ready[gRank].store(1, std::memory_order_release);
}

void harnessMessage(const char* fmt, ...) {
  if (!gShared) return;
  char line[kMsgBytes];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  // Blank lines (MP_CHECK without a detail text) carry nothing.
  if (line[strspn(line, " ")] == '\0') return;
  char* buf = gShared->msg[gRank];
  size_t len = strnlen(buf, kMsgBytes - 1);
  if (len + 2 >= static_cast<size_t>(kMsgBytes)) return;
  if (len > 0) buf[len++] = '\n';
  snprintf(buf + len, kMsgBytes - len, "%s", line);
}

void harnessSetValue(int slot, int64_t v) {
  if (gShared && slot >= 0 && slot < kValueSlots) gShared->values[gRank][slot] = v;
}

int64_t harnessKillTimeNs() {
  return gShared ? gShared->killTimeNs.load(std::memory_order_acquire) : 0;
}

bool harnessBarrier(int gen, int timeoutMs) {
  if (!gShared) return false;
  gShared->barrier[gRank].store(gen, std::memory_order_release);
  int64_t deadline = monoNs() + int64_t(timeoutMs) * 1000000LL;
  for (int r = 0; r < gShared->nranks; ++r) {
    while (gShared->barrier[r].load(std::memory_order_acquire) < gen) {
      if (monoNs() > deadline) return false;
      sleepMs(1);
    }
  }
  return true;
}

bool RunResult::ok() const {
  if (timedOut) return false;
  for (const auto& r : ranks) {
    if (r.killedByHarness) continue;
    if (!r.exited || r.exitCode != 0) return false;
  }
  return true;
}

std::string RunResult::summary() const {
  std::string s;
  if (timedOut) s += "watchdog expired: a rank hung\n";
  for (const auto& r : ranks) {
    bool bad = !r.killedByHarness && (!r.exited || r.exitCode != 0);
    if (!bad && r.message.empty()) continue;
    char head[160];
    if (r.hung)
      snprintf(head, sizeof(head), "rank %d: HUNG (still running at the watchdog deadline)", r.rank);
    else if (r.killedByHarness)
      snprintf(head, sizeof(head), "rank %d: killed by the harness as planned", r.rank);
    else if (r.exited)
      snprintf(head, sizeof(head), "rank %d: exit code %d after %.0f ms", r.rank, r.exitCode, r.elapsedMs);
    else
      snprintf(head, sizeof(head), "rank %d: died of signal %d (%s)", r.rank, r.signal, strsignal(r.signal));
    s += head;
    if (!r.message.empty()) s += "\n    " + r.message;
    s += "\n";
  }
  return s;
}

RunResult runRanks(int nranks, RankBody body, RunOptions opts) {
  RunResult res;
  if (nranks < 1 || nranks > kMaxRanks) {
    res.timedOut = true;
    res.ranks.push_back(RankResult{});
    res.ranks[0].message = "runRanks: bad nranks " + std::to_string(nranks);
    return res;
  }
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    res.timedOut = true;
    res.ranks.push_back(RankResult{});
    res.ranks[0].message = std::string("runRanks: mmap failed: ") + strerror(errno);
    return res;
  }
  Shared* sh = new (mem) Shared();  // anonymous memory is zeroed; construct for form's sake
  sh->nranks = nranks;

  res.ranks.resize(nranks);
  std::vector<pid_t> pids(nranks, -1);
  std::vector<bool> alive(nranks, false);
  fflush(stdout);
  fflush(stderr);
  const char* lc = getenv("FERRY_MP_LEAK_CHECK");
  gLeakCheck = lc && std::strcmp(lc, "1") == 0 && ferry::test::processThreadCount() == 1;
  const int64_t start = monoNs();
  for (int r = 0; r < nranks; ++r) {
    res.ranks[r].rank = r;
    pid_t pid = fork();
    if (pid == 0) childMain(sh, r, nranks, body, opts);
    if (pid < 0) {
      res.ranks[r].message = std::string("fork failed: ") + strerror(errno);
      continue;
    }
    pids[r] = pid;
    alive[r] = true;
  }

  const int64_t deadline = start + int64_t(opts.timeoutSec) * 1000000000LL;
  bool killPending = opts.killRank >= 0 && opts.killRank < nranks;
  int64_t readySeenNs = 0;
  int nAlive = 0;
  for (bool a : alive) nAlive += a;
  while (nAlive > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (!alive[r]) continue;
      int status;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        recordStatus(res.ranks[r], status);
        res.ranks[r].elapsedMs = (monoNs() - start) / 1e6;
        alive[r] = false;
        --nAlive;
      }
    }
    int64_t now = monoNs();
    if (killPending && alive[opts.killRank]) {
      bool due = opts.killAfterMs >= 0 && now - start >= int64_t(opts.killAfterMs) * 1000000LL;
      if (opts.killOnReady && sh->ready[opts.killRank].load(std::memory_order_acquire)) {
        if (readySeenNs == 0) readySeenNs = now;
        due = due || now - readySeenNs >= int64_t(opts.killDelayMs) * 1000000LL;
      }
      if (due) {
        kill(pids[opts.killRank], SIGKILL);
        sh->killTimeNs.store(monoNs(), std::memory_order_release);
        res.killTimeNs = sh->killTimeNs.load();
        res.ranks[opts.killRank].killedByHarness = true;
        killPending = false;
      }
    }
    if (nAlive > 0 && now > deadline) {
      res.timedOut = true;
      for (int r = 0; r < nranks; ++r) {
        if (!alive[r]) continue;
        kill(pids[r], SIGKILL);
        int status;
        waitpid(pids[r], &status, 0);
        recordStatus(res.ranks[r], status);
        res.ranks[r].hung = true;
        res.ranks[r].elapsedMs = (monoNs() - start) / 1e6;
        alive[r] = false;
      }
      nAlive = 0;
    }
    if (nAlive > 0) sleepMs(1);
  }

  for (int r = 0; r < nranks; ++r) {
    res.ranks[r].message += std::string(sh->msg[r], strnlen(sh->msg[r], kMsgBytes));
    for (int i = 0; i < kValueSlots; ++i) res.ranks[r].values[i] = sh->values[r][i];
  }
  sh->~Shared();
  munmap(mem, sizeof(Shared));
  return res;
}

}  // namespace ferry::mp
