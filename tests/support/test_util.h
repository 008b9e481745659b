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
// The parent kills every child still alive after timeoutMs. Returns each
// child's exit code, 128+signal if it died of a signal, or -1 if the
// watchdog had to kill it.
std::vector<int> runProcesses(int n, const std::function<int(int)>& fn, int64_t timeoutMs);

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
