// How an executor writes large pieces into slots that another core reads
// (SendSlot::streamFrom): ordinary stores or past the cache
// (kernels::copyPastCache). Neither wins everywhere. On the 2-core test VM,
// in phases where taking a line back from the other core is slow, a 2-rank
// 1 MiB Reduce took 430 us with ordinary stores and 60-85 us streamed; in
// phases where it is quick, 37-39 us with ordinary stores and 70-77 us
// streamed (the reader then reads from memory instead of the writer's cache).
//
// The writer's own copy time does not tell them apart (streaming looked
// cheaper to the writer in both phases); a run's time from its start does
// once the run is large enough to wait for ring room, since its reader then
// paces it. So the choice is the thread's (the phase is the machine's),
// made by kernels::TwoWayChoice from the time per byte of runs that send at
// least kTimedBytes, and applied to the large pieces of every run.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/stream_copy.h"

namespace ferry {

class SlotWrites {
 public:
  static constexpr size_t kTimedBytes = size_t(1) << 20;  // the default ring's size
  enum class Mode { kAuto, kAlways, kNever };  // FERRY_SHM_STREAM
  // "auto", "always" or "never"; false for anything else.
  static bool parseMode(const std::string& s, Mode* out) {
    if (s == "auto") *out = Mode::kAuto;
    else if (s == "always") *out = Mode::kAlways;
    else if (s == "never") *out = Mode::kNever;
    else return false;
    return true;
  }
  void setMode(Mode m) { mode_ = m; }

  // A run that sends `sendBytes` in all begins. `quiet`: another choice is
  // on trial in this run (RefChoice): take the way in use, record nothing.
  void beginRun(size_t sendBytes, bool quiet = false) {
    timed_ = sendBytes >= kTimedBytes && !quiet;
    bytes_ = sendBytes;
    decided_ = false;
    // From the start: a run that waits for ring room is paced by its reader.
    if (timed_) start_ = std::chrono::steady_clock::now();
  }
  // A large slot write of this run: whether it goes past the cache (asked
  // once per run; a run without any is not recorded).
  bool pastCache() {
    if (mode_ != Mode::kAuto) return mode_ == Mode::kAlways;
    if (!decided_) {
      decided_ = true;
      trial_ = false;
      way_ = timed_ ? choice().next(&trial_) : choice().current();
    }
    return way_ == 1;
  }
  // Returns whether this run was one of a trial's (its time then says
  // nothing about other choices made in the run).
  bool endRun() {
    if (!decided_ || !timed_) return false;
    decided_ = false;
    auto ns = std::chrono::steady_clock::now() - start_;
    double perByte = double(std::chrono::duration_cast<std::chrono::nanoseconds>(ns).count()) / double(bytes_);
    choice().record(way_, perByte, trial_);
    return trial_;
  }
  static kernels::TwoWayChoice& choice() {
    static thread_local kernels::TwoWayChoice c;
    return c;
  }

 private:
  Mode mode_ = Mode::kAuto;
  bool timed_ = false;
  bool decided_ = false;
  bool trial_ = false;
  int way_ = 0;
  size_t bytes_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ferry
