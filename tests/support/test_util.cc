#include "tests/support/test_util.h"
#include "tests/support/sanitize.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"

namespace ferry::test {

ScopedEnv::ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
  if (const char* v = getenv(name)) old_ = v;
  if (value) {
    setenv(name, value->c_str(), 1);
  } else {
    unsetenv(name);
  }
  config::reload();
  log::reset();
}

ScopedEnv::~ScopedEnv() {
  if (old_) {
    setenv(name_.c_str(), old_->c_str(), 1);
  } else {
    unsetenv(name_.c_str());
  }
  config::reload();
  log::reset();
}

std::vector<Status> runThreads(int n, const std::function<Status(int)>& fn) {
  std::vector<Status> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++) threads.emplace_back([&, r] {
    log::setThreadRank(r);
    out[r] = fn(r);
  });
  for (auto& t : threads) t.join();
  return out;
}

std::vector<int> runProcesses(int n, const std::function<int(int)>& fn, int64_t timeoutMs,
                              const std::function<void()>& afterFork) {
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids(n, -1);
  std::vector<int> codes(n, -1);
  // A child of a multi-threaded parent has only the forking thread: memory
  // the others reach from their stacks looks leaked there. Leak-check the
  // children only when the parent is single-threaded.
  const bool leakCheck = processThreadCount() == 1;
  for (int r = 0; r < n; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      // Second line of defence if the parent dies before its watchdog fires.
      alarm(static_cast<unsigned>(timeoutMs / 1000 + 5));
      int code = fn(r);
      fflush(stdout);
      fflush(stderr);
      // _exit skips LeakSanitizer's at-exit check: run it here (ASan builds).
      // (Also only once the child's own threads are gone, as in tests/mp/harness.cc.)
      if (code == 0 && leakCheck && processThreadCount() == 1 && childLeakCheck()) code = 93;
      _exit(code);
    }
    pids[r] = pid;
  }
  if (afterFork) afterFork();
  int64_t deadline = nowMs() + timeoutMs;
  int left = n;
  while (left > 0 && nowMs() < deadline) {
    for (int r = 0; r < n; r++) {
      if (pids[r] < 0) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pids[r] = -1;
        left--;
      }
    }
    usleep(2000);
  }
  for (int r = 0; r < n; r++) {
    if (pids[r] < 0) continue;
    fprintf(stderr, "watchdog: killing rank %d (pid %d)\n", r, pids[r]);
    kill(pids[r], SIGKILL);
    waitpid(pids[r], nullptr, 0);
  }
  return codes;
}

SharedId::SharedId() {
  void* p = mmap(nullptr, sizeof(Page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("SharedId: mmap");
    abort();
  }
  page_ = new (p) Page{};
  page_->state.store(0);
}

SharedId::~SharedId() { munmap(page_, sizeof(Page)); }

ncclUniqueId* SharedId::id() { return &page_->id; }

void SharedId::publish(bool ok) { page_->state.store(ok ? 1 : 2, std::memory_order_release); }

bool SharedId::wait(ncclUniqueId* out, int64_t timeoutMs) const {
  int64_t end = nowMs() + timeoutMs;
  int st;
  while ((st = page_->state.load(std::memory_order_acquire)) == 0 && nowMs() < end) usleep(1000);
  if (st != 1) return false;
  *out = page_->id;
  return true;
}

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

bool waitForWarn(const std::string& needle, int64_t timeoutMs) {
  int64_t deadline = nowMs() + timeoutMs;
  while (nowMs() < deadline) {
    if (log::lastError().find(needle) != std::string::npos) return true;
    usleep(5000);
  }
  return false;
}

}  // namespace ferry::test

#include "bootstrap/bootstrap.h"

namespace ferry::test {
namespace {

Status checkAllGather(Bootstrap& b, size_t block, int salt) {
  int n = b.nranks();
  std::vector<char> all(block * n, static_cast<char>(0xEE));
  for (size_t i = 0; i < block; i++) all[b.rank() * block + i] = pattern(b.rank(), i, salt);
  FERRY_TRY(b.allGather(all.data(), block));
  for (int r = 0; r < n; r++) {
    for (size_t i = 0; i < block; i++) {
      if (all[r * block + i] != pattern(r, i, salt)) {
        return internalError("allGather block " + std::to_string(r) + " byte " +
                             std::to_string(i) + " wrong on rank " + std::to_string(b.rank()));
      }
    }
  }
  return Status::ok();
}

std::vector<char> message(int rank, int tag) {
  std::vector<char> m(10 * tag + rank);
  for (size_t i = 0; i < m.size(); i++) m[i] = pattern(rank, i, tag);
  return m;
}

}  // namespace

Status exerciseBootstrap(Bootstrap& b) {
  int n = b.nranks(), r = b.rank();
  FERRY_TRY(checkAllGather(b, 37, 1));
  FERRY_TRY(checkAllGather(b, 64 << 10, 2));
  FERRY_TRY(b.barrier());
  int next = (r + 1) % n, prev = (r - 1 + n) % n;
  for (int tag = 1; tag <= 3; tag++) {
    auto m = message(r, tag);
    FERRY_TRY(b.send(next, tag, m.data(), m.size()));
  }
  FERRY_TRY(b.send(next, 4, nullptr, 0));
  for (int tag : {3, 4, 1, 2}) {
    if (tag == 4) {
      FERRY_TRY(b.recv(prev, 4, nullptr, 0));
      continue;
    }
    auto want = message(prev, tag);
    std::vector<char> got(want.size());
    FERRY_TRY(b.recv(prev, tag, got.data(), got.size()));
    if (got != want) {
      return internalError("rank " + std::to_string(r) + ": message tag " + std::to_string(tag) +
                           " from rank " + std::to_string(prev) + " has wrong contents");
    }
  }
  FERRY_TRY(checkAllGather(b, 3, 3));
  return b.barrier();
}

}  // namespace ferry::test
