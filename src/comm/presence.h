// Presence: which ranks of this host are parked, i.e. gave their core away
// in a wait (sched_yield or a sleep).
//
// When ranks outnumber cores, a wait's spin phase pays off only if a rank it
// waits on is running at that moment. When every one of them is parked,
// nothing can arrive before one of them gets a core back, and ours may be
// the core it needs: the wait skips its spin phase and yields at once
// (Backoff::pause with PeerState::kParked). A context switch costs ~1 us on
// this VM, as much as a 4-rank 8 B Send/Recv's own work.
//
// Tried and not kept (perf/README.md, "Waits that know their peers are
// parked"): spinning longer while a waited-on rank runs (small operations
// gained 5-25% in some runs and lost as much in others; a 4-rank 1 MiB
// AlltoAll lost ~9%: a running peer may be copying for tens of
// microseconds), and yielding only for a rank parked on our own CPU (most
// of the gain went).
//
// One shared-memory segment per communicator and host, one cache line per
// rank of the communicator (a rank writes only its own line, twice per
// yield); opened next to the failure board (fail_board.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace ferry {

class Presence {
 public:
  // Opens (creating if needed) communicator `commHash`'s segment on this
  // host, with a line for each of `nranks` ranks. Every local rank must open
  // it before any of them calls unlink().
  static Result<std::unique_ptr<Presence>> open(uint64_t commHash, int nranks);
  ~Presence();
  Presence(const Presence&) = delete;
  Presence& operator=(const Presence&) = delete;

  void unlink();
  // Rank r's flag: non-zero while r is parked. r writes it (Backoff does,
  // around its yields and sleeps); its peers read it.
  std::atomic<uint32_t>* flag(int r) { return &lines_[r].parked; }
  bool parked(int r) const { return lines_[r].parked.load(std::memory_order_relaxed) != 0; }

 private:
  struct alignas(64) Line {
    std::atomic<uint32_t> parked;
  };
  Presence(Line* lines, size_t bytes, std::string name)
      : lines_(lines), bytes_(bytes), name_(std::move(name)) {}
  Line* lines_;
  size_t bytes_;
  std::string name_;
};

}  // namespace ferry
