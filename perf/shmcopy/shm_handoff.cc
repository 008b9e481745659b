// shm_handoff: what a writer pays to fill memory that a reader on another
// core has just read, the way a shared-memory ring is used, with ordinary
// stores and with non-temporal ones (kernels::copyPastCache).
//
// Two threads pinned to two cores take turns on one 1 MiB buffer: the
// writer copies into it, the reader copies out of it. Printed per mode, in
// microseconds per turn (medians): the writer's copy, the reader's copy.
// On the 2-core development VM the ordinary writer takes ~25 us in some
// periods and 230-460 us in others (the "slow phase" of perf/README.md);
// the streaming writer ~38 us in both. `shm_handoff --probe` prints just
// "fast" or "slow" (ordinary writer under or over 200 us): perf/phase_ab
// uses it to keep the two phases apart.
//
//   shm_handoff [--probe] [--iters N] [--bytes B]
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/stream_copy.h"

namespace {

using Clock = std::chrono::steady_clock;

void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu % std::max(1u, std::thread::hardware_concurrency()), &s);
  pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Result {
  double writer, reader;
};

Result run(bool streaming, size_t bytes, int iters) {
  auto* buf = static_cast<char*>(std::aligned_alloc(64, bytes));
  auto* src = static_cast<char*>(std::aligned_alloc(64, bytes));
  auto* dst = static_cast<char*>(std::aligned_alloc(64, bytes));
  std::memset(buf, 1, bytes);
  std::memset(src, 2, bytes);
  std::memset(dst, 3, bytes);
  std::atomic<int> turn{0};
  std::vector<double> w, r;
  std::thread writer([&] {
    pin(0);
    for (int i = 0; i < iters; ++i) {
      while (turn.load(std::memory_order_acquire) != 0) {
      }
      auto t0 = Clock::now();
      if (streaming) {
        ferry::kernels::copyPastCache(buf, src, bytes);
      } else {
        std::memcpy(buf, src, bytes);
      }
      w.push_back(us(t0, Clock::now()));
      turn.store(1, std::memory_order_release);
    }
  });
  std::thread reader([&] {
    pin(1);
    for (int i = 0; i < iters; ++i) {
      while (turn.load(std::memory_order_acquire) != 1) {
      }
      auto t0 = Clock::now();
      std::memcpy(dst, buf, bytes);
      r.push_back(us(t0, Clock::now()));
      turn.store(0, std::memory_order_release);
    }
  });
  writer.join();
  reader.join();
  std::free(buf);
  std::free(src);
  std::free(dst);
  return {median(w), median(r)};
}

}  // namespace

int main(int argc, char** argv) {
  bool probe = false;
  int iters = 200;
  size_t bytes = 1 << 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--probe") {
      probe = true;
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--bytes" && i + 1 < argc) {
      bytes = std::max<size_t>(64, std::strtoull(argv[++i], nullptr, 10));
    } else {
      std::fprintf(stderr, "usage: shm_handoff [--probe] [--iters N] [--bytes B]\n");
      return 2;
    }
  }
  if (std::thread::hardware_concurrency() < 2) {
    std::fprintf(stderr, "shm_handoff: needs two cores\n");
    return 2;
  }
  if (probe) {
    Result o = run(false, 1 << 20, 50);
    std::printf("%s\n", o.writer < 200 ? "fast" : "slow");
    return 0;
  }
  Result o = run(false, bytes, iters);
  Result s = run(true, bytes, iters);
  std::printf("# %zu bytes per turn, medians of %d turns (us)\n", bytes, iters);
  std::printf("ordinary   writer %8.1f  reader %8.1f\n", o.writer, o.reader);
  std::printf("streaming  writer %8.1f  reader %8.1f\n", s.writer, s.reader);
  return 0;
}
