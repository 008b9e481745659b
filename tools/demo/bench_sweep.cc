#include "tools/demo/bench_sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tools/demo/bench_data.h"
#include "tools/demo/fork_launch.h"

namespace ferry::bench {

float* allocFloats(size_t count) {
  size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  void* p = std::aligned_alloc(64, bytes);
  if (p != nullptr) std::memset(p, 0, bytes);
  return static_cast<float*>(p);
}

void freeFloats(float* p) { std::free(p); }

int SweepBackend::allocBuffers(size_t count, float** send, float** recv) {
  *send = allocFloats(count);
  *recv = allocFloats(count);
  return *send != nullptr && *recv != nullptr ? kExitOk : kExitInternal;
}

bool SweepBackend::freeBuffers(float* send, float* recv, bool /*healthy*/) {
  freeFloats(send);
  freeFloats(recv);
  return true;
}

namespace {

struct Measured {
  Half half;
  bool ok = false;
};

// One placement (out-of-place or in-place) of one size.
Measured measure(const Options& o, size_t sizeIndex, size_t count, int rank, int nranks,
                 float* send, float* recv, bool inPlace, SweepBackend& be) {
  Measured m;
  float* in = inPlace ? recv : send;
  fillInput(in, count, 0, rank);
  for (int i = 0; i < o.warmup; ++i) {
    if (!be.allReduce(in, recv, count)) return m;
  }
  if (!be.barrier()) return m;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) {
    if (!be.allReduce(in, recv, count)) return m;
  }
  auto t1 = std::chrono::steady_clock::now();
  double secs = std::chrono::duration<double>(t1 - t0).count() / o.iters;

  int64_t wrong = o.check > 0 ? 0 : -1;
  for (int c = 0; c < o.check; ++c) {
    uint64_t seed = checkSeed(sizeIndex, c);
    fillInput(in, count, seed, rank);
    if (!be.allReduce(in, recv, count)) return m;
    wrong += countWrong(recv, count, seed, nranks);
    if (wrong > 0) break;  // as nccl-tests: stop at the first failing repetition
  }
  double maxSecs = 0;
  int64_t sumWrong = 0;
  int badRanks = 0;
  if (!be.combine(secs, wrong, &maxSecs, &sumWrong, &badRanks)) return m;
  size_t bytes = count * sizeof(float);
  m.half = makeHalf(bytes, maxSecs, allReduceBusFactor(nranks), o.check > 0 ? sumWrong : -1,
                    badRanks);
  m.ok = true;
  return m;
}

// Freshly started ranks share a core until the scheduler spreads them, and
// the first ops set up connections; neither belongs in the first timed row.
// So, before any timing, run ops at the first size until rank 0 has seen
// kSettleMs pass. Rank 0 alone decides: a 1-element sum where only rank 0
// contributes a non-zero "continue" keeps every rank in step.
bool settle(SweepBackend& be, float* send, float* recv, size_t count, int rank) {
  constexpr int kSettleMs = 200;
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 10; ++i) {
      if (!be.allReduce(send, recv, count)) return false;
    }
    auto elapsed = std::chrono::steady_clock::now() - t0;
    float more = rank == 0 && elapsed < std::chrono::milliseconds(kSettleMs) ? 1.0f : 0.0f;
    if (!be.allReduce(&more, &more, 1)) return false;
    if (more == 0.0f) return true;
  }
}

// Every size, out of place then in place; an exit code.
int runSizes(const Options& o, int rank, int nranks, float* send, float* recv, SweepBackend& be,
             Report* report) {
  std::vector<size_t> sizes = sweepSizes(o, sizeof(float));
  // Small ops suffice to settle; a large first size gets its per-size warmup.
  size_t settleCount = sizes.empty() ? 0 : std::min<size_t>(sizes[0] / sizeof(float), 4096);
  if (!sizes.empty() && !settle(be, send, recv, settleCount, rank)) return kExitLibrary;
  for (size_t k = 0; k < sizes.size(); ++k) {
    size_t count = sizes[k] / sizeof(float);
    Measured oop = measure(o, k, count, rank, nranks, send, recv, false, be);
    if (!oop.ok) return kExitLibrary;
    Measured ip = measure(o, k, count, rank, nranks, send, recv, true, be);
    if (!ip.ok) return kExitLibrary;
    if (report != nullptr) report->row(sizes[k], count, "float", "sum", -1, oop.half, ip.half);
  }
  return kExitOk;
}

}  // namespace

int runAllReduceSweep(const Options& o, int rank, int nranks, SweepBackend& be, Report* report) {
  float* send = nullptr;
  float* recv = nullptr;
  int code = be.allocBuffers(o.maxBytes / sizeof(float), &send, &recv);
  if (code == kExitInternal) {
    std::fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", rank, o.maxBytes);
  } else if (code == kExitOk) {
    code = runSizes(o, rank, nranks, send, recv, be, report);
  }
  if (!be.freeBuffers(send, recv, code == kExitOk) && code == kExitOk) code = kExitLibrary;
  if (report != nullptr && code == kExitOk) {
    report->footer();
    if (report->outOfBounds() > 0) code = kExitWrong;
  }
  return code;
}

}  // namespace ferry::bench
