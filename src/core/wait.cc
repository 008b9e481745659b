// Backoff and Waiter (see wait.h).
#include "core/wait.h"

#include <sched.h>
#include <time.h>

#include <algorithm>

#include "core/config.h"

namespace ferry {
namespace {

// When more ranks than cores share the machine, spinning only delays the
// rank that holds the data we wait for.
constexpr int kOversubscribedSpin = 16;
std::atomic<bool> gOversubscribed{false};
// Reading the clock costs more than a spin; check the deadline this rarely.
constexpr uint32_t kClockEvery = 64;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void spinFor(int64_t ns) {
  Clock::time_point end = Clock::now() + std::chrono::nanoseconds(ns);
  do {
    cpuRelax();
  } while (Clock::now() < end);
}

}  // namespace

// Spinning pays off only when the peer runs on another core at the same
// time. Each thread learns how long its waits really are: a wait that had to
// yield halves its spin budget, one that ended while spinning grows it back.
// Two ranks the scheduler put on one core thus hand the core over within a
// few polls instead of burning the spin phase on every message.
thread_local int tSpinBudget = -1;
constexpr int kMinSpinBudget = 8;

int Backoff::budget() const {
  if (tSpinBudget < 0 || tSpinBudget > spin_) tSpinBudget = spin_;
  return tSpinBudget;
}

void Backoff::reset() {
  if (polls_ > 0) {
    int b = budget();
    if (polls_ > b) {
      tSpinBudget = std::max(std::min(kMinSpinBudget, spin_), b / 2);
    } else {
      tSpinBudget = std::min(spin_, b + b / 8 + 1);
    }
  }
  polls_ = 0;
}

// The learned budget, or none when every rank we wait on is parked.
int Backoff::spinFor(PeerState peers) const {
  return peers == PeerState::kParked ? 0 : budget();
}

void Backoff::pause(PeerState peers) {
  polls_++;
  int spin = spinFor(peers);
  if (polls_ <= spin) {
    cpuRelax();
    return;
  }
  yieldOrSleep(polls_ - spin);
}

void Backoff::yieldOrSleep(int64_t past) {
  if (park_) park_->store(1, std::memory_order_relaxed);
  if (past <= Backoff::kYieldPolls) {
    sched_yield();
  } else {
    // 1, 2, 4, ... µs, capped: oversubscribed ranks must leave the core to
    // whoever owns the data they are waiting for.
    int64_t step = std::min<int64_t>(past - Backoff::kYieldPolls - 1, 8);
    int64_t us = std::min<int64_t>(int64_t(1) << step, Backoff::kMaxSleepUs);
    struct timespec ts = {0, static_cast<long>(us * 1000)};
    nanosleep(&ts, nullptr);
  }
  if (park_) park_->store(0, std::memory_order_relaxed);
}

Backoff::Phase Backoff::phase(PeerState peers) const {
  int64_t next = polls_ + 1;
  int spin = spinFor(peers);
  if (next <= spin) return Phase::kSpin;
  return next - spin <= kYieldPolls ? Phase::kYield : Phase::kSleep;
}

int64_t nowCoarseMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Every wait starts here: the configuration is read once (a config read
// takes a lock, and oversubscribed ranks read FERRY_SPIN_COUNT's "set" bit
// on every operation before).
int Backoff::defaultSpinCount() {
  static std::atomic<int> cached{-1};
  static std::atomic<bool> userSet{false};
  int v = cached.load(std::memory_order_acquire);
  if (v < 0) {
    int64_t n = config::getInt(config::Param::kSpinCount);
    v = static_cast<int>(std::clamp<int64_t>(n, 0, 1 << 30));
    userSet.store(config::isSet(config::Param::kSpinCount), std::memory_order_relaxed);
    cached.store(v, std::memory_order_release);
  }
  if (gOversubscribed.load(std::memory_order_relaxed) && !userSet.load(std::memory_order_relaxed))
    return std::min(v, kOversubscribedSpin);
  return v;
}

void Backoff::setOversubscribed(bool on) { gOversubscribed.store(on, std::memory_order_relaxed); }
bool Backoff::oversubscribed() { return gOversubscribed.load(std::memory_order_relaxed); }

Waiter::Waiter(const std::atomic<bool>* abortFlag, int64_t timeoutMs, const char* what)
    : abort_(abortFlag), timeoutMs_(timeoutMs), what_(what ? what : "waiting") {}

void Waiter::allowFdWait(bool on) {
  static const bool enabled = config::getBool(config::Param::kWaitOnSockets);
  onSockets_ = on;
  fdWait_ = on && enabled;
  // Notes left by a pass of an earlier wait (or of a caller that never
  // blocks) must not decide this one's first wait.
  readiness::clear();
}

int64_t Waiter::socketGapNs() {
  static const int64_t ns =
      std::clamp<int64_t>(config::getInt(config::Param::kWaitSocketGapUs), 0, 1000) * 1000;
  return ns;
}

// Only between messages: while a message's bytes stream in (or out), the
// next piece is microseconds away and a spaced poll only delays draining
// it (one way 1 MiB between namespace hosts 1.28x libfabric back to back
// against 1.12x spaced; 256 KiB 1.23 against 1.10; perf/README.md).
bool Waiter::spacesPolls() const {
  return onSockets_ && socketGapNs() > 0 && !readiness::midMessage() &&
         !gOversubscribed.load(std::memory_order_relaxed);
}

namespace {
// One tick of the coarse clock, rounded up to whole ms (typically 4).
int64_t coarseTickMs() {
  static const int64_t tick = [] {
    timespec res{};
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0) return int64_t(10);
    return std::max<int64_t>(1, (static_cast<int64_t>(res.tv_sec) * 1000000000 + res.tv_nsec +
                                 999999) / 1000000);
  }();
  return tick;
}
}  // namespace

// The deadline runs on the coarse clock: most waits are a few microseconds
// and end before a second reading, so the first reading is the one every
// small operation pays (the precise clock was 4-6% of a 2-rank 8 B
// SendRecv's time). A tick of slack keeps the deadline from firing early.
Status Waiter::idle(PeerState peers) {
  if (abort_ && abort_->load(std::memory_order_acquire)) {
    return remoteError(std::string("communicator aborted while ") + what_);
  }
  // Bytes moved, nothing finished (a large message on its way): not idle.
  // Pausing here, the caller of a both-ways 16 MiB stream between namespace
  // hosts spent 17-37k socket gaps per GiB, up to a quarter of its time.
  if (readiness::takeMoved()) {
    progressed();
    return Status::ok();
  }
  // Past the spin phase, a pass that noted only sockets waits on them.
  bool spinning = backoff_.phase(peers) == Backoff::Phase::kSpin;
  bool blocked = fdWait_ && !spinning && readiness::wait(kFdWaitUs);
  if (blocked) {
    backoff_.count();
  } else if (spinning && spacesPolls()) {
    // A socket polled back to back slows its peer's side of the connection
    // (a one-way 64 KiB stream between namespace hosts ran 1.3-1.8x faster
    // with a poll per 5 us; params.def): spin between polls instead. Not
    // when ranks outnumber cores: their short spin phase ends in a yield;
    // not mid-message (spacesPolls).
    backoff_.count();
    spinFor(socketGapNs());
  } else {
    backoff_.pause(peers);
  }
  if (onSockets_) readiness::clear();
  if (timeoutMs_ <= 0) return Status::ok();
  if (lastProgressMs_ < 0) {
    lastProgressMs_ = nowCoarseMs();
    idleCalls_ = 0;
    return Status::ok();
  }
  if (++idleCalls_ % kClockEvery != 0) return Status::ok();
  int64_t idleMs = nowCoarseMs() - lastProgressMs_;
  if (idleMs >= timeoutMs_ + coarseTickMs() + 1) {  // + 1: both readings are truncated to ms
    return timeoutError("no progress for " + std::to_string(idleMs) + " ms while " + what_);
  }
  return Status::ok();
}

}  // namespace ferry
