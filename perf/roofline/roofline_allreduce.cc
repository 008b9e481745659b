// roofline_allreduce: the fastest a host-memory AllReduce can be on this
// machine. N threads share one address space, so nothing is copied through
// an intermediate buffer and no process boundary is crossed; what is left is
// the minimal memory work plus two thread barriers per op:
//
//   phase 1  thread t sums slice t of all N inputs into slice t of its output
//   barrier
//   phase 2  thread t copies every other slice u from thread u's output
//   barrier  (the op is complete on every thread)
//
// Any multi-process library pays at least this, so Ferry/roofline is the
// fraction of the machine's limit Ferry reaches. Rows use the same sizes,
// data, checks and busbw formula as ferry_allreduce_demo; the time is the
// median over -r repeats of the mean over -n back-to-back ops.

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

#include "tools/demo/bench_data.h"
#include "tools/demo/bench_options.h"
#include "tools/demo/bench_report.h"
#include "tools/demo/bench_sweep.h"
#include "tools/demo/fork_launch.h"

namespace ferry::bench {
namespace {

// One pass over the slice, N inputs read once, output written once.
// ivdep: in place, out is exactly one of the inputs at the same index, which
// is safe element by element; without it GCC's alias check would fall back
// to scalar code.
template <int N>
void reduceFixed(float* out, float* const* in, size_t begin, size_t end) {
  const float* a[N];
  for (int k = 0; k < N; ++k) a[k] = in[k];
#pragma GCC ivdep
  for (size_t i = begin; i < end; ++i) {
    float s = a[0][i];
    for (int k = 1; k < N; ++k) s += a[k][i];
    out[i] = s;
  }
}

// Any N: accumulate in L1-sized blocks so the output block stays cached.
void reduceBlocked(float* out, float* const* in, int n, size_t begin, size_t end, int self) {
  constexpr size_t kBlock = 2048;
  for (size_t b = begin; b < end; b += kBlock) {
    size_t e = std::min(end, b + kBlock);
    // Start from our own input: in place it is `out`, and must be read first.
    const float* own = in[self];
#pragma GCC ivdep
    for (size_t i = b; i < e; ++i) out[i] = own[i];
    for (int k = 0; k < n; ++k) {
      if (k == self) continue;
      const float* src = in[k];
#pragma GCC ivdep
      for (size_t i = b; i < e; ++i) out[i] += src[i];
    }
  }
}

void reduceSlice(float* out, float* const* in, int n, size_t begin, size_t end, int self) {
  switch (n) {
    case 1: if (out != in[0]) std::memcpy(out + begin, in[0] + begin, (end - begin) * 4); return;
    case 2: reduceFixed<2>(out, in, begin, end); return;
    case 3: reduceFixed<3>(out, in, begin, end); return;
    case 4: reduceFixed<4>(out, in, begin, end); return;
    case 8: reduceFixed<8>(out, in, begin, end); return;
    default: reduceBlocked(out, in, n, begin, end, self); return;
  }
}

// Spin, then yield; never sleep. std::barrier parks waiters on a futex, and
// a futex wake costs tens of microseconds on this VM, which would make the
// "limit" slower than a spinning library. Yielding (rather than spinning
// only) keeps 4 threads on 2 cores moving. A stuck run ends at the deadline.
class SpinBarrier {
 public:
  SpinBarrier(int n, int timeoutSec, uint64_t spinPolls)
      : n_(n), timeoutSec_(timeoutSec), spinPolls_(spinPolls) {}
  void arrive_and_wait() {
    uint32_t gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_release);
      return;
    }
    std::chrono::steady_clock::time_point waitStart;
    for (uint64_t polls = 0; gen_.load(std::memory_order_acquire) == gen; ++polls) {
      if (polls < spinPolls_) {
        __builtin_ia32_pause();
        continue;
      }
      if (polls == spinPolls_) waitStart = std::chrono::steady_clock::now();
      sched_yield();
      if ((polls & 0xffff) == 0) checkDeadline(waitStart);
    }
  }

 private:
  void checkDeadline(std::chrono::steady_clock::time_point waitStart) const {
    if (timeoutSec_ <= 0) return;
    if (std::chrono::steady_clock::now() - waitStart > std::chrono::seconds(timeoutSec_)) {
      std::fprintf(stderr, "roofline: barrier waited longer than %d s; aborting\n", timeoutSec_);
      std::abort();
    }
  }

  const uint32_t n_;
  const int timeoutSec_;
  const uint64_t spinPolls_;
  std::atomic<uint32_t> count_{0};
  std::atomic<uint32_t> gen_{0};
};

// Spinning only pays while every thread has a core (and only briefly: a
// preempted peer makes a long spin cost its whole length). With more threads
// than cores the thread being waited for needs this core, so yield at once.
// Measured on the 2-core VM: 4 threads, yield at once ~15 us per barrier
// under load vs ~36 us after 100 pauses and ~420 us after 2000.
uint64_t spinPollsFor(int nthreads) {
  unsigned cores = std::thread::hardware_concurrency();
  return (cores == 0 || static_cast<unsigned>(nthreads) <= cores) ? 200 : 0;
}

struct World {
  int n = 0;
  std::vector<float*> in, out;  // per thread, maxBytes each (in == out in place)
  std::vector<float*> inOwn;    // the separate input buffers
  std::vector<int64_t> wrong;
  bool more = false;  // settle loop: written by thread 0 between barriers
  SpinBarrier bar;
  World(int nthreads, int timeoutSec)
      : n(nthreads),
        in(n),
        out(n),
        inOwn(n),
        wrong(n),
        bar(nthreads, timeoutSec, spinPollsFor(nthreads)) {}
};

// Slice t of count elements; boundaries on 64-byte lines so threads never
// write the same cache line.
void sliceOf(size_t count, int n, int t, size_t* begin, size_t* end) {
  size_t per = (count + n - 1) / n;
  per = (per + 15) / 16 * 16;
  *begin = std::min(count, per * t);
  *end = std::min(count, per * (t + 1));
}

void allReduceOp(World& w, int t, size_t count) {
  size_t b, e;
  sliceOf(count, w.n, t, &b, &e);
  reduceSlice(w.out[t], w.in.data(), w.n, b, e, t);
  w.bar.arrive_and_wait();
  for (int u = 0; u < w.n; ++u) {
    if (u == t) continue;
    sliceOf(count, w.n, u, &b, &e);
    if (e > b) std::memcpy(w.out[t] + b, w.out[u] + b, (e - b) * sizeof(float));
  }
  w.bar.arrive_and_wait();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// One placement of one size, run by every thread; thread 0 gets the result.
Half measure(World& w, const Options& o, int t, size_t sizeIndex, size_t count, bool inPlace) {
  w.in[t] = inPlace ? w.out[t] : w.inOwn[t];
  fillInput(w.in[t], count, 0, t);
  w.bar.arrive_and_wait();
  for (int i = 0; i < o.warmup; ++i) allReduceOp(w, t, count);
  std::vector<double> perOp;
  for (int r = 0; r < o.repeats; ++r) {
    w.bar.arrive_and_wait();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters; ++i) allReduceOp(w, t, count);
    auto t1 = std::chrono::steady_clock::now();
    perOp.push_back(std::chrono::duration<double>(t1 - t0).count() / o.iters);
  }
  w.wrong[t] = 0;
  for (int c = 0; c < o.check; ++c) {
    uint64_t seed = checkSeed(sizeIndex, c);
    fillInput(w.in[t], count, seed, t);
    w.bar.arrive_and_wait();  // all inputs written before anyone reads them
    allReduceOp(w, t, count);
    w.wrong[t] += countWrong(w.out[t], count, seed, w.n);
  }
  w.bar.arrive_and_wait();
  Half h;
  if (t == 0) {
    int64_t sum = 0;
    int bad = 0;
    for (int64_t x : w.wrong) {
      sum += x;
      bad += x > 0;
    }
    h = makeHalf(count * sizeof(float), median(perOp), allReduceBusFactor(w.n),
                 o.check > 0 ? sum : -1, bad);
  }
  w.bar.arrive_and_wait();  // wrong[] is reused by the next placement
  return h;
}

void threadMain(World& w, const Options& o, int t, Report* report) {
  std::vector<size_t> sizes = sweepSizes(o, sizeof(float));
  // Settle for 200 ms before timing anything, as the multi-rank drivers do
  // (see settle() in tools/demo/bench_sweep.cc); thread 0 decides.
  w.in[t] = w.inOwn[t];
  w.bar.arrive_and_wait();  // every in[] set before anyone reads a peer's
  size_t settleCount = sizes.empty() ? 0 : std::min<size_t>(sizes[0] / sizeof(float), 4096);
  auto t0 = std::chrono::steady_clock::now();
  for (bool more = !sizes.empty(); more;) {
    for (int i = 0; i < 10; ++i) allReduceOp(w, t, settleCount);
    if (t == 0) {
      w.more = std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200);
    }
    w.bar.arrive_and_wait();
    more = w.more;
    w.bar.arrive_and_wait();  // everyone has read `more` before thread 0 writes it again
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    size_t count = sizes[k] / sizeof(float);
    Half oop = measure(w, o, t, k, count, false);
    Half ip = measure(w, o, t, k, count, true);
    if (t == 0) report->row(sizes[k], count, "float", "sum", -1, oop, ip);
  }
}

}  // namespace
}  // namespace ferry::bench

int main(int argc, char** argv) {
  using namespace ferry::bench;
  Options o;
  if (int code = parseOrExit(argc, argv, &o); code >= 0) return code;
  Report report(stdout, "all_reduce_roofline");
  std::string timing = "median over " + std::to_string(o.repeats) + " repeats of the mean per op";
  report.header("roofline_allreduce: " + std::to_string(o.nranks) +
                    " threads, one address space, minimal memory work",
                o, o.nranks, timing.c_str());
  report.columns();
  World w(o.nranks, o.timeoutSec);
  size_t maxCount = o.maxBytes / sizeof(float);
  for (int t = 0; t < o.nranks; ++t) {
    w.out[t] = allocFloats(maxCount);
    w.inOwn[t] = allocFloats(maxCount);
    if (w.out[t] == nullptr || w.inOwn[t] == nullptr) {
      std::fprintf(stderr, "%s: cannot allocate 2 x %zu bytes for thread %d\n", argv[0],
                   o.maxBytes, t);
      return kExitInternal;
    }
  }
  std::vector<std::thread> threads;
  for (int t = 1; t < o.nranks; ++t) {
    threads.emplace_back([&w, &o, t] { threadMain(w, o, t, nullptr); });
  }
  threadMain(w, o, 0, &report);
  for (auto& th : threads) th.join();
  for (int t = 0; t < o.nranks; ++t) {
    freeFloats(w.out[t]);
    freeFloats(w.inOwn[t]);
  }
  report.footer();
  return report.outOfBounds() > 0 ? kExitWrong : kExitOk;
}
