// HostFlag: a 32-bit counter in host memory that threads and streams wait on.
//
// The bridge (comm/stream_bridge.h) joins a caller's stream and the
// communicator's progress thread with two of them: the stream bumps one
// when it reaches the operation, the progress thread sets the other when
// the host collective is done, and the stream waits for it before copying
// the result back (for CUDA, cuStreamWaitValue32 on the same word). Waits
// spin briefly, then sleep on a futex: ranks outnumber cores here. The
// futex is a shared one, so a flag in memory other processes map
// (mem/node_sync.h's device barriers) wakes their waiters too.
#pragma once

#include <atomic>
#include <cstdint>

namespace ferry::accel {

class HostFlag {
 public:
  uint32_t load() const { return v_.load(std::memory_order_acquire); }
  // Whether load() >= value, wrap-safe (the counters here count a handful
  // of events at a time, never 2^31 apart).
  bool reached(uint32_t value) const { return static_cast<int32_t>(load() - value) >= 0; }
  // Adds n (release) and wakes every waiter.
  void add(uint32_t n = 1);
  // At least value from now on (release; never lowers it), waking every waiter.
  void raiseTo(uint32_t value);
  // Until load() >= value: true, or false once timeoutMs passed (<= 0: no
  // deadline) or *abort turned true (checked at least every 10 ms). With
  // spin, it polls and yields briefly before it sleeps (a hand-off is often
  // close); a caller that waits long in slices spins in the first only.
  bool waitAtLeast(uint32_t value, int64_t timeoutMs, const std::atomic<bool>* abort = nullptr,
                   bool spin = true) const;
  // The word a device waits on (cuStreamWaitValue32).
  const std::atomic<uint32_t>* word() const { return &v_; }

 private:
  std::atomic<uint32_t> v_{0};
};

}  // namespace ferry::accel
