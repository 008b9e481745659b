// Helpers shared by the bootstrap/net/socket tests: environment overrides,
// running ranks as threads or as forked processes (always with a watchdog).
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nccl.h>

#include "core/status.h"

namespace ferry::test {

// Set (or unset, with nullopt) an environment variable for the scope of the
// object and make config/log re-read it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value);
  ~ScopedEnv();

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Run fn(rank) on n threads (log lines say [rank]); returns each rank's Status.
std::vector<Status> runThreads(int n, const std::function<Status(int)>& fn);

// Fork n children running fn(rank); a child exits with fn's code (0 = ok).
// afterFork, if given, runs here once every child is forked, before the
// wait. The parent kills every child still alive after timeoutMs. Returns
// each child's exit code, 128+signal if it died of a signal, or -1 if the
// watchdog had to kill it.
//
// Fork before this process starts threads: make a unique id (which starts
// the bootstrap root thread here) in afterFork and hand it over with a
// SharedId. A child forked while another thread runs inherits whatever
// locks that thread held; the sanitizer runtimes of gcc 12 do not take
// their allocator locks around fork, so such a child can hang in malloc
// (seen under ASan and TSan while the root thread allocated).
std::vector<int> runProcesses(int n, const std::function<int(int)>& fn, int64_t timeoutMs,
                              const std::function<void()>& afterFork = {});

// A unique id in shared memory, made in the parent after the ranks are
// forked (runProcesses' afterFork): the parent fills id() and calls
// publish(); a child's wait() returns it.
class SharedId {
 public:
  SharedId();
  ~SharedId();
  SharedId(const SharedId&) = delete;
  SharedId& operator=(const SharedId&) = delete;

  ncclUniqueId* id();
  // ok: id() holds the id; false tells the children that none will come.
  void publish(bool ok = true);
  // In a child: the id once published (up to timeoutMs); false if the
  // parent failed to make one or it did not come in time.
  bool wait(ncclUniqueId* out, int64_t timeoutMs = 30000) const;

 private:
  struct Page {
    std::atomic<int> state;  // 0 not yet, 1 ready, 2 failed
    ncclUniqueId id;
  };
  Page* page_;
};

// A child-side check: print the failure and return 1 from the child.
#define CHILD_CHECK(cond, ...)                                      \
  do {                                                              \
    if (!(cond)) {                                                  \
      fprintf(stderr, "child check failed (%s:%d): ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                 \
      fprintf(stderr, "\n");                                        \
      return 1;                                                     \
    }                                                               \
  } while (0)
#define CHILD_OK(expr)                                                        \
  do {                                                                        \
    ::ferry::Status _s = (expr);                                              \
    CHILD_CHECK(_s.isOk(), "%s: %s", #expr, _s.message().c_str());            \
  } while (0)

// The byte that rank r puts at offset i of its test blocks.
inline char pattern(int rank, size_t i, int salt = 0) {
  return static_cast<char>((rank * 131 + i * 7 + salt * 29) & 0xff);
}

// A TCP port on 127.0.0.1 that was free a moment ago.
int freePort();

// Wait until log::lastError() contains `needle` (true) or timeoutMs passed.
bool waitForWarn(const std::string& needle, int64_t timeoutMs);

}  // namespace ferry::test

namespace ferry {
class Bootstrap;
}

namespace ferry::test {
// allGather (odd and large blocks), barrier and send/recv with out-of-order
// tags and an empty message, checking every byte. Non-ok on any mismatch.
Status exerciseBootstrap(Bootstrap& b);
}  // namespace ferry::test
