// Copies into memory that another core reads next and has read before: a
// shared-memory ring's records.
//
// A store to a line another core holds pays a round trip to take the line
// back. How much depends on where the two cores sit, and on the 2-core test
// VM that changes by itself within seconds: writing 1 MiB into lines the
// other core had just read took 230-435 us in slow phases against 23 us into
// private memory, while the same bytes written with non-temporal stores took
// 38 us and the reader's copy out was no slower (41-45 us either way). In
// fast phases ordinary stores win: a 2-rank 1 MiB Reduce took 39 us with
// them and 77 us streamed. src/exec/slot_writes.h chooses between the two.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::kernels {

// dst = src (n bytes, no overlap) with non-temporal stores where the CPU has
// them (x86-64), then a store fence: the bytes are globally visible before
// any later store (e.g. a ring's release of its tail) is. Elsewhere memcpy.
void copyPastCache(void* dst, const void* src, size_t n);

// dst = src, past the cache (copyPastCache) when pastCache, else memcpy.
void copyOut(bool pastCache, void* dst, const void* src, size_t n);

// A choice between two ways of doing the same work, from their measured
// costs: the way in use is measured every time (an average), the other on
// trial now and then: kTrialCalls calls in a row, of which only the last
// counts (the first pay for the state the other way left behind) and
// replaces its figure (which may come from another phase). A trial that
// loses waits twice as long for the next one (16 .. 2048 calls); one that
// wins switches, and the way left gets a trial again after 16 calls.
// (SlotWrites, src/exec/slot_writes.h, chooses between ordinary and
// streaming stores with it.)
class TwoWayChoice {
 public:
  static constexpr uint32_t kMinInterval = 16, kMaxInterval = 2048, kTrialCalls = 2;
  // The way to take for the next call, and whether it is a trial.
  int next(bool* trial);
  // What the call that next() chose cost.
  void record(int way, double cost, bool trial);
  int current() const { return mode_; }
  uint32_t interval() const { return interval_; }

 private:
  double cost_[2] = {-1, -1};  // < 0: not measured yet
  int mode_ = 0;
  uint32_t sinceTry_ = 0;
  uint32_t interval_ = kMinInterval;
  uint32_t trialLeft_ = 0;  // calls left in the trial under way
};

}  // namespace ferry::kernels
