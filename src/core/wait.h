// Waiting without burning a core forever: spin briefly, then yield, then
// sleep in growing steps (capped), so 8+ ranks share 2 cores. Every wait in
// Ferry also carries a Deadline; see Waiter.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "core/readiness.h"
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

// What a wait knows about the ranks it waits on, from Presence
// (comm/presence.h): kParked when every one of them gave its core away (is
// yielding or sleeping in a wait of its own). Only ranks that outnumber
// cores ask (Backoff::oversubscribed).
enum class PeerState { kUnknown, kParked };

class Backoff {
 public:
  // Yielding costs ~1 µs when nobody else wants the core and hands the core
  // over when someone does, so it is the right wait for oversubscribed ranks;
  // only long waits fall through to sleeping (1, 2, 4 ... µs, capped).
  static constexpr int64_t kYieldPolls = 2000;
  static constexpr int64_t kMaxSleepUs = 200;

  explicit Backoff(int spinCount = defaultSpinCount()) : spin_(spinCount) {}
  // Call after a poll that found nothing to do. With kParked it skips the
  // spin phase: nothing can arrive before a rank we wait on gets a core
  // back, and ours is one it may need.
  void pause(PeerState peers = PeerState::kUnknown);
  // Set while this thread yields or sleeps in pause(): its peers' waits see
  // it parked (Presence). Null: nobody asks.
  void setParkFlag(std::atomic<uint32_t>* f) { park_ = f; }
  // Call after a poll that made progress.
  void reset();
  // Count a poll that found nothing whose wait happened elsewhere (a
  // blocking poll() on sockets, readiness.h): the spin budget still learns.
  void count() { polls_++; }
  static int defaultSpinCount();
  // More ranks than cores on this machine: spin much less before yielding.
  static void setOversubscribed(bool on);
  static bool oversubscribed();

  enum class Phase { kSpin, kYield, kSleep };
  // What the next pause(peers) will do.
  Phase phase(PeerState peers = PeerState::kUnknown) const;

 private:
  int budget() const;  // this thread's learned spin count (<= spin_)

  int spinFor(PeerState peers) const;
  void yieldOrSleep(int64_t past);

  int spin_;
  int64_t polls_ = 0;
  std::atomic<uint32_t>* park_ = nullptr;
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
    readiness::clear();
  }
  // Pause once; error if aborted or the deadline passed. A pass in which a
  // transport moved bytes (readiness::noteMoved) counts as progress.
  Status idle(PeerState peers = PeerState::kUnknown);
  // See Backoff::setParkFlag.
  void setParkFlag(std::atomic<uint32_t>* f) { backoff_.setParkFlag(f); }
  // Past its spin phase, this wait may block in poll() on the sockets the
  // last polling pass noted (readiness.h) instead of yielding: the caller
  // says so only when everything it waits on notes its sockets. Off unless
  // FERRY_WAIT_ON_SOCKETS allows it.
  void allowFdWait(bool on);

  // Longest blocking poll() of one idle(): a socket that was not noted (or
  // a timer the network runs on) costs at most this.
  static constexpr int kFdWaitUs = 500;
  // Whether a spin-phase idle() now spaces its poll by socketGapNs():
  // waits on sockets only, between messages (no readiness::midMessage()),
  // not oversubscribed.
  bool spacesPolls() const;
  // FERRY_WAIT_SOCKET_GAP_US in ns (read once).
  static int64_t socketGapNs();

 private:
  const std::atomic<bool>* abort_;
  int64_t timeoutMs_;
  const char* what_;
  int64_t lastProgressMs_ = -1;  // -1: not read yet since last progress
  uint32_t idleCalls_ = 0;
  bool onSockets_ = false;  // allowFdWait(true): everything waited on is a socket
  bool fdWait_ = false;     // ... and it may block in poll() on them
  Backoff backoff_;
};

}  // namespace ferry
