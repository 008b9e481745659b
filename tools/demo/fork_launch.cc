#include "tools/demo/fork_launch.h"

#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <string>
#include <vector>

namespace ferry::bench {
namespace {

int64_t monoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void sleepNs(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  nanosleep(&ts, nullptr);
}

}  // namespace

bool RankContext::waitFor(const std::function<bool()>& pred, const char* what) {
  // More ranks than cores is the normal case here, so after a short spin the
  // waiter yields and then sleeps, up to 1 ms per poll.
  int64_t pauseNs = 0;
  for (int polls = 0;; ++polls) {
    if (pred()) return true;
    if (aborted()) {
      std::fprintf(stderr, "rank %d: %s: run aborted by the launcher\n", rank_, what);
      return false;
    }
    if (s_->deadlineNs != 0 && monoNs() > s_->deadlineNs) {
      std::fprintf(stderr, "rank %d: %s: deadline passed\n", rank_, what);
      return false;
    }
    if (polls < 100) continue;
    if (polls < 200) {
      sched_yield();
      continue;
    }
    pauseNs = pauseNs == 0 ? 20000 : (pauseNs * 2 > 1000000 ? 1000000 : pauseNs * 2);
    sleepNs(pauseNs);
  }
}

bool RankContext::publish(const void* data, size_t size) {
  if (size > kMaxBlobBytes) {
    std::fprintf(stderr, "rank %d: blob of %zu bytes exceeds %zu\n", rank_, size, kMaxBlobBytes);
    return false;
  }
  std::memcpy(s_->blob, data, size);
  s_->blobSize = static_cast<uint32_t>(size);
  s_->blobReady.store(1, std::memory_order_release);
  return true;
}

bool RankContext::receive(void* data, size_t size) {
  if (!waitFor([this] { return s_->blobReady.load(std::memory_order_acquire) != 0; },
               "waiting for rank 0's blob")) {
    return false;
  }
  if (s_->blobSize != size) {
    std::fprintf(stderr, "rank %d: blob has %u bytes, expected %zu\n", rank_, s_->blobSize, size);
    return false;
  }
  std::memcpy(data, s_->blob, size);
  return true;
}

bool RankContext::combine(double seconds, int64_t wrong, double* maxSeconds, int64_t* sumWrong,
                          int* badRanks) {
  RankSlot& mine = slot(rank_);
  mine.value = seconds;
  mine.wrong = wrong;
  if (!barrier()) return false;
  if (rank_ == 0) {
    *maxSeconds = 0;
    *sumWrong = 0;
    *badRanks = 0;
    for (int r = 0; r < nranks(); ++r) {
      const RankSlot& s = slot(r);
      *maxSeconds = std::max(*maxSeconds, s.value);
      if (s.wrong > 0) {
        *sumWrong += s.wrong;
        *badRanks += 1;
      }
    }
  }
  return barrier();
}

bool RankContext::barrier() {
  uint32_t gen = s_->generation.load(std::memory_order_acquire);
  if (s_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 ==
      static_cast<uint32_t>(s_->nranks)) {
    // Reset before releasing: nobody can arrive for the next round until the
    // generation moves.
    s_->arrived.store(0, std::memory_order_relaxed);
    s_->generation.fetch_add(1, std::memory_order_release);
    return true;
  }
  return waitFor([&] { return s_->generation.load(std::memory_order_acquire) != gen; },
                 "harness barrier");
}

namespace {

[[noreturn]] void runChild(SharedState* s, int rank, pid_t parent, const RankBody& body, int cpu) {
  // Die with the launcher, so a killed launcher leaves no orphan ranks.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kExitInternal);
  if (cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) {
      std::fprintf(stderr, "launcher: rank %d: binding to CPU %d failed: %s\n", rank, cpu, strerror(errno));
    }
  }
  s->slots[rank].pid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
  RankContext ctx(s, rank);
  int code = body(ctx);
  std::fflush(nullptr);
  // exit (not _exit) so the library's atexit cleanup runs in each rank.
  std::exit(code);
}

int decodeStatus(int rank, int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "launcher: rank %d killed by signal %d (%s)\n", rank, WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    return 128 + WTERMSIG(status);
  }
  return kExitInternal;
}

void killAll(const std::vector<pid_t>& pids, const std::vector<bool>& done) {
  for (size_t r = 0; r < pids.size(); ++r) {
    if (!done[r] && pids[r] > 0) kill(pids[r], SIGKILL);
  }
}

// Reaps children until all are gone; enforces the deadline and the grace
// period after a failure. Returns the launch's exit code.
int superviseChildren(SharedState* s, std::vector<pid_t>& pids, int graceSec) {
  const int n = static_cast<int>(pids.size());
  std::vector<bool> done(n, false);
  int alive = n;
  int64_t failedAtNs = 0;
  int firstFailure = kExitOk;
  bool timedOut = false;
  while (alive > 0) {
    bool reaped = false;
    for (int r = 0; r < n; ++r) {
      if (done[r]) continue;
      int status = 0;
      pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got == 0) continue;
      done[r] = true;
      --alive;
      reaped = true;
      int code = got < 0 ? kExitInternal : decodeStatus(r, status);
      if (code != 0 && failedAtNs == 0) {
        firstFailure = code;
        failedAtNs = monoNs();
        s->abort.store(1, std::memory_order_relaxed);
      }
    }
    if (alive == 0) break;
    int64_t now = monoNs();
    if (!timedOut && s->deadlineNs != 0 && now > s->deadlineNs) {
      std::fprintf(stderr, "launcher: watchdog deadline passed; killing %d remaining rank(s)\n",
                   alive);
      timedOut = true;
      s->abort.store(1, std::memory_order_relaxed);
      killAll(pids, done);
    } else if (failedAtNs != 0 && now - failedAtNs > int64_t{graceSec} * 1000000000) {
      std::fprintf(stderr, "launcher: a rank failed %d s ago; killing %d remaining rank(s)\n",
                   graceSec, alive);
      failedAtNs = now;  // do not repeat the message every poll
      killAll(pids, done);
    }
    if (!reaped) sleepNs(2000000);
  }
  return timedOut ? kExitTimeout : firstFailure;
}

// Open MPI's default binding (mpirun binds each rank to a core when there
// are no more ranks than cores, and leaves them unbound otherwise), so the
// drivers compared in perf/ run under the same placement. Unbound, the
// kernel may keep two ranks on one core while a background task holds the
// other (perf/README.md, "Latency under load"). FERRY_LAUNCH_BIND: auto (that
// rule for 2 or more ranks; the default), core (always: rank r on the r-th
// allowed CPU, modulo their count) or none. Returns each rank's CPU, -1 for
// unbound.
std::vector<int> bindings(int nranks) {
  std::vector<int> cpus(nranks, -1);
  const char* env = std::getenv("FERRY_LAUNCH_BIND");
  std::string mode = env && *env ? env : "auto";
  if (mode != "auto" && mode != "core" && mode != "none") {
    std::fprintf(stderr, "launcher: FERRY_LAUNCH_BIND=%s is not auto, core or none; not binding\n", env);
    return cpus;
  }
  cpu_set_t allowed;
  if (mode == "none" || sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return cpus;
  std::vector<int> list;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) list.push_back(c);
  }
  // auto leaves a single rank alone: there is no peer to keep apart from.
  bool fits = nranks >= 2 && nranks <= static_cast<int>(list.size());
  if (list.empty() || (mode == "auto" && !fits)) return cpus;
  for (int r = 0; r < nranks; ++r) cpus[r] = list[r % list.size()];
  return cpus;
}

}  // namespace

int forkLaunch(int nranks, int timeoutSec, const RankBody& body, int graceSec) {
  if (nranks < 1 || nranks > kMaxRanks) {
    std::fprintf(stderr, "launcher: rank count %d outside 1..%d\n", nranks, kMaxRanks);
    return kExitUsage;
  }
  void* mem = mmap(nullptr, sizeof(SharedState), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::fprintf(stderr, "launcher: mmap of %zu bytes failed: %s\n", sizeof(SharedState),
                 strerror(errno));
    return kExitInternal;
  }
  auto* s = new (mem) SharedState();
  s->nranks = nranks;
  s->deadlineNs = timeoutSec > 0 ? monoNs() + int64_t{timeoutSec} * 1000000000 : 0;

  std::fflush(nullptr);  // children must not inherit and re-emit buffered output
  pid_t parent = getpid();
  std::vector<pid_t> pids(nranks, -1);
  std::vector<int> cpus = bindings(nranks);
  int code = kExitOk;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) runChild(s, r, parent, body, cpus[r]);
    if (pid < 0) {
      std::fprintf(stderr, "launcher: fork of rank %d failed: %s\n", r, strerror(errno));
      s->abort.store(1, std::memory_order_relaxed);
      for (int k = 0; k < r; ++k) kill(pids[k], SIGKILL);
      for (int k = 0; k < r; ++k) waitpid(pids[k], nullptr, 0);
      code = kExitInternal;
      break;
    }
    pids[r] = pid;
  }
  if (code == kExitOk) code = superviseChildren(s, pids, graceSec);
  s->~SharedState();
  munmap(mem, sizeof(SharedState));
  return code;
}

}  // namespace ferry::bench
