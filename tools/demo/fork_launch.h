// Runs N ranks as forked child processes of one launcher, with no MPI.
//
// Before forking, the launcher maps one anonymous MAP_SHARED region that every
// child inherits. Ranks use it to hand over a blob (the ncclUniqueId, made by
// rank 0), to meet at a barrier that does not depend on the library under
// test, and to publish per-rank results (time, wrong count) for rank 0 to
// combine. The launcher is a watchdog: past the deadline, or shortly after one
// rank fails, it kills the remaining ranks so a hung collective cannot hang
// the benchmark.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace ferry::bench {

constexpr int kMaxRanks = 1024;
constexpr size_t kMaxBlobBytes = 1024;

// Exit codes, following nccl-tests where one exists.
constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitLibrary = 3;   // an NCCL call failed
constexpr int kExitTimeout = 4;   // the watchdog fired
constexpr int kExitWrong = 7;     // wrong values
constexpr int kExitUsage = 255;

// Results a rank publishes for rank 0.
struct RankSlot {
  std::atomic<int32_t> pid;
  double value;    // e.g. mean seconds per op
  int64_t wrong;   // wrong elements, -1 = unchecked
};

struct SharedState {
  std::atomic<uint32_t> blobReady;
  uint32_t blobSize;
  unsigned char blob[kMaxBlobBytes];
  std::atomic<uint32_t> arrived;     // barrier: ranks in the current round
  std::atomic<uint32_t> generation;  // barrier: bumped when a round completes
  std::atomic<uint32_t> abort;       // set by the launcher when a rank failed
  int32_t nranks;
  int64_t deadlineNs;                // CLOCK_MONOTONIC; 0 = no deadline
  RankSlot slots[kMaxRanks];
};

class RankContext {
 public:
  RankContext(SharedState* s, int rank) : s_(s), rank_(rank) {}
  int rank() const { return rank_; }
  int nranks() const { return s_->nranks; }

  // Rank 0 publishes; the others wait for it. Both return false (and print
  // why on stderr) on size overflow, deadline or abort.
  bool publish(const void* data, size_t size);
  bool receive(void* data, size_t size);

  // All ranks meet; false on deadline or abort.
  bool barrier();

  RankSlot& slot(int r) { return s_->slots[r]; }

  // Combine per-rank results through the shared slots: every rank posts,
  // all meet, rank 0 fills the outputs (max seconds, summed wrong values,
  // ranks with any), all meet again so no slot is overwritten while rank 0
  // reads it. False on deadline or abort.
  bool combine(double seconds, int64_t wrong, double* maxSeconds, int64_t* sumWrong,
               int* badRanks);
  bool aborted() const { return s_->abort.load(std::memory_order_relaxed) != 0; }

 private:
  // Polls pred with a growing pause; false once the deadline passes or the
  // launcher aborts the run.
  bool waitFor(const std::function<bool()>& pred, const char* what);

  SharedState* s_;
  int rank_;
};

// The body of one rank; its return value is the child's exit code.
using RankBody = std::function<int(RankContext&)>;

// Forks nranks children running body and waits for them. Returns 0 when all
// succeed, kExitTimeout when the watchdog killed the run, otherwise the exit
// code of the first rank seen to fail (128 + signal for a killed child); the
// others usually fail only as a consequence.
// timeoutSec 0 disables the deadline; graceSec is how long the other ranks
// may still run after one failed.
int forkLaunch(int nranks, int timeoutSec, const RankBody& body, int graceSec = 10);

}  // namespace ferry::bench
