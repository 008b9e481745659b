// Waiting without burning a core forever: spin briefly, then yield, then
// sleep in growing steps (capped), so 8+ ranks share 2 cores. Every wait in
// Ferry also carries a Deadline; see Waiter.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace ferry {

using Clock = std::chrono::steady_clock;

inline int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

// A clock read at a fraction of nowMs()'s cost but only as fine as the
// kernel's tick (1-10 ms): for rate limits and timers of that order checked
// on every call of a hot loop (the Socket network's per-test() checks cost
// a sender streaming 64 KiB messages ~5% of its time with nowMs()).
int64_t nowCoarseMs();

class Backoff {
 public:
  // Yielding costs ~1 µs when nobody else wants the core and hands the core
  // over when someone does, so it is the right wait for oversubscribed ranks;
  // only long waits fall through to sleeping (1, 2, 4 ... µs, capped).
  static constexpr int64_t kYieldPolls = 2000;
  static constexpr int64_t kMaxSleepUs = 200;

  explicit Backoff(int spinCount = defaultSpinCount()) : spin_(spinCount) {}
  // Call after a poll that found nothing to do.
  void pause();
  // Call after a poll that made progress.
  void reset();
  static int defaultSpinCount();
  // More ranks than cores on this machine: spin much less before yielding.
  static void setOversubscribed(bool on);

  enum class Phase { kSpin, kYield, kSleep };
  // What the next pause() will do.
  Phase phase() const;

 private:
  int budget() const;  // this thread's learned spin count (<= spin_)

  int spin_;
  int64_t polls_ = 0;
};

// A wait with a "no progress" deadline and an abort flag. Typical loop:
//   Waiter w(abortFlag, timeoutMs, "recv from rank 3");
//   while (!done) { if (progress) w.progressed(); else FERRY_TRY(w.idle()); }
class Waiter {
 public:
  Waiter(const std::atomic<bool>* abortFlag, int64_t timeoutMs, const char* what);
  void progressed() {
    backoff_.reset();
    lastProgressMs_ = -1;
  }
  // Pause once; error if aborted or the deadline passed.
  Status idle();

 private:
  const std::atomic<bool>* abort_;
  int64_t timeoutMs_;
  const char* what_;
  int64_t lastProgressMs_ = -1;  // -1: not read yet since last progress
  uint32_t idleCalls_ = 0;
  Backoff backoff_;
};

}  // namespace ferry
