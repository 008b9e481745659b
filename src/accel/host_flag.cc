#include "accel/host_flag.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sched.h>

#include <algorithm>
#include <ctime>

#include "core/wait.h"

namespace ferry::accel {
namespace {

constexpr int kYields = 200;

// std::atomic<uint32_t> is a plain 32-bit word on Linux: the futex is its address.
uint32_t* wordOf(const std::atomic<uint32_t>* a) {
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(a));
}

void wakeAll(const std::atomic<uint32_t>* a) {
  syscall(SYS_futex, wordOf(a), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void futexWait(const std::atomic<uint32_t>* a, uint32_t seen, int64_t us) {
  timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)};
  syscall(SYS_futex, wordOf(a), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

}  // namespace

void HostFlag::add(uint32_t n) {
  v_.fetch_add(n, std::memory_order_acq_rel);
  wakeAll(&v_);
}

void HostFlag::raiseTo(uint32_t value) {
  uint32_t cur = load();
  while (static_cast<int32_t>(value - cur) > 0 &&
         !v_.compare_exchange_weak(cur, value, std::memory_order_acq_rel)) {
  }
  wakeAll(&v_);
}

bool HostFlag::waitAtLeast(uint32_t value, int64_t timeoutMs, const std::atomic<bool>* abort, bool spin) const {
  for (int i = 0; spin && i < 64; ++i) {
    if (reached(value)) return true;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  // Then yield for a while: the other side is often one hand-off away, and
  // waking a thread that sleeps on a futex costs tens of microseconds in a
  // virtual machine; a yield gives the core to whoever needs it.
  for (int i = 0; spin && i < kYields; ++i) {
    if (reached(value)) return true;
    sched_yield();
  }
  const int64_t end = timeoutMs > 0 ? nowMs() + timeoutMs : INT64_MAX;
  for (;;) {
    uint32_t v = load();
    if (static_cast<int32_t>(v - value) >= 0) return true;
    if (abort && abort->load(std::memory_order_acquire)) return false;
    int64_t left = end - nowMs();
    if (left <= 0) return false;
    futexWait(&v_, v, std::min<int64_t>(left, 10) * 1000);
  }
}

}  // namespace ferry::accel
