// The measurement loop shared by every multi-rank AllReduce driver (Ferry
// demo, MPI baseline), so that they time and check in exactly the same way:
//
// first untimed ops at the first size for 200 ms (ranks settle on cores),
// then per size, out-of-place then in-place:
//   fill inputs; `warmup` untimed ops; barrier (a 1-element AllReduce);
//   time `iters` back-to-back ops; per-rank time = elapsed / iters;
//   then `check` ops, each on fresh seeded inputs, compared bit for bit;
//   rank 0 prints max-over-ranks time and the wrong count summed over ranks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tools/demo/bench_options.h"
#include "tools/demo/bench_report.h"

namespace ferry::bench {

// What a driver provides: the collective under test and a way to combine
// per-rank numbers on rank 0. Each call returns false after printing why.
class SweepBackend {
 public:
  virtual ~SweepBackend() = default;
  // Float sum of count elements; in place when send == recv. Must be
  // complete (recv readable) when it returns.
  virtual bool allReduce(const float* send, float* recv, size_t count) = 0;
  // Lines the ranks up before a timed batch.
  virtual bool barrier() = 0;
  // Rank 0 receives the max of seconds, the sum of wrong (ignoring -1) and
  // the number of ranks with wrong > 0. Collective over all ranks.
  virtual bool combine(double seconds, int64_t wrong, double* maxSeconds, int64_t* sumWrong,
                       int* badRanks) = 0;
  // The send and receive buffers, count floats each; by default allocFloats
  // (the Ferry demo's -R takes them from ncclMemAlloc and registers them).
  // Returns kExitOk, kExitInternal when memory ran out (the sweep says so)
  // or kExitLibrary after printing the call that failed.
  virtual int allocBuffers(size_t count, float** send, float** recv);
  // Gives back what allocBuffers set (either may be null). healthy: no call
  // failed, so collective clean-up is safe. False after printing a failure.
  virtual bool freeBuffers(float* send, float* recv, bool healthy);
};

// Runs the sweep; report is non-null on rank 0 only, which also prints the
// footer. Returns 0, kExitLibrary (a backend call failed) or, on rank 0,
// kExitWrong when any value was wrong.
int runAllReduceSweep(const Options& o, int rank, int nranks, SweepBackend& backend,
                      Report* report);

// How far timed iteration `iter` moves an op's buffers (bytes): as
// nccl-tests, each iteration moves on by the op's footprint `span` (rounded
// up to 64 bytes), wrapping within buffers of `maxBytes`, so small sizes are
// not timed from a warm cache. Every driver that compares with another must
// walk its buffers the same way.
inline size_t iterationShift(size_t span, size_t maxBytes, int iter) {
  size_t stride = span > 64 ? (span + 63) / 64 * 64 : 64;
  size_t slots = span <= maxBytes ? (maxBytes - span) / stride + 1 : 1;
  return (static_cast<size_t>(iter) % slots) * stride;
}

// 64-byte aligned float buffer with every page touched, so first-touch page
// faults stay out of the timed loop. Freed with freeFloats.
float* allocFloats(size_t count);
void freeFloats(float* p);

}  // namespace ferry::bench
