// Whether an executor's large pieces of ordinary memory go to a local peer
// by reference (the peer reads our buffer by cross-memory attach: one
// kernel copy at about half memcpy speed, our core free) or by value (we
// copy into the ring, the peer copies out: two copies on two cores at
// memcpy speed, pipelined). Neither wins everywhere, and the winner moves
// with the collective's shape and with the machine's phase: at 2 ranks by
// value took 0.58-0.76 of the time of a 4-64 MiB Send/Recv and 0.61-0.71 of
// a 16-64 MiB Scatter, while at 4 ranks on 2 cores a 16-64 MiB Scatter took
// 1.29-1.60x by value (its root copies every block; by reference the
// receivers share the work). perf/README.md, "By reference or by value,
// chosen per operation".
//
// So each executor whose runs send at least kTimedBytes in pieces above the
// reference threshold chooses for itself from its runs' times (64 KiB, the
// threshold's own default on a host whose ranks outnumber its cores: a
// 4-rank AlltoAll, SendRecv, AllGather or AllReduce of 256 KiB-1 MiB on 2
// cores took 0.45-0.79x the time once it chose, with a 1 MiB floor it could
// not, and a 64 KiB SendRecv 0.53x, with a 128 KiB floor it could not;
// perf/README.md): way 0 is the
// threshold (FERRY_CMA_THRESHOLD's default), way 1 sends every piece of
// ordinary memory by value. Memory a peer maps (ncclMemAlloc) always goes by
// reference from its own threshold, and a FERRY_CMA_THRESHOLD the user set
// is obeyed as it stands.
//
// Run times are noisy (4 ranks on 2 cores: context switches), so a way is
// judged by the median of kSamples runs, after one run that pays for the
// state the other way left behind, and the other way must be kMargin
// cheaper to take over. A trial that loses waits twice as long for the
// next (kMinInterval .. kMaxInterval runs), and longer when the losing way
// costs far more: a trial's kSamples + 1 runs of the dearer way may cost at
// most kTrialShare of the runs until the next (after a switch too, where
// the way left behind is the dearer one). At 4 ranks on 2 cores a 256 KiB
// Send/Recv ran 16-63 us per run by value and 108-359 us at the threshold:
// trials every 16-64 runs made it 54-61 us per operation against 47-48
// with every piece by value (perf/README.md, "Trials spaced by what they
// cost"). Ranks choose alone; they run the
// same executors in the same order, so their trials fall on the same runs,
// and a mix of ways is still correct.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace ferry {

class RefChoice {
 public:
  static constexpr size_t kTimedBytes = size_t(64) << 10;
  static constexpr int kSamples = 3;
  static constexpr int kBlock = 4;  // runs per sample of a rank that only sends
  static constexpr uint32_t kMinInterval = 16, kMaxInterval = 1024;
  static constexpr double kMargin = 0.95;
  static constexpr double kTrialShare = 0.05;

  // `candidateBytes`: what a run sends in steps that may go by reference at
  // the threshold; `recvBytes`: what it receives; `adaptive`: choose (else
  // always the threshold). A rank that receives as much times the whole
  // exchange by its own run. One that receives less (a Scatter root, a
  // Gather sender) would finish a run by value as soon as its last piece
  // is in the ring and run ahead, so its own times favour by value while
  // its peers pay (4 ranks, 64 MiB Scatter: the root's runs took 3.0-3.8
  // ms by value against 4.0-5.7 by reference, the collective 6.1 ms
  // against 5.0). Such a rank times its runs only around a trial, the way
  // in use and then the other, and a sample there is the mean of kBlock
  // runs of which the last ends only once the peers took every piece
  // (waitsForPeers): run-ahead counts, but only as far as the peers keep
  // up. Between trials its runs neither wait nor count. (Waiting on every
  // run cost a 4-rank 256 KiB Scatter 2.6x, 31.6 us against 12.2; timing
  // single waited runs judged by value at 130-170 us per 1 MiB Scatter run
  // against 73-147 by reference, while free-running it took 46-53.)
  // `label` names the operation in the log line of each trial's verdict.
  void configure(size_t candidateBytes, size_t recvBytes, bool adaptive, const char* label = "") {
    active_ = adaptive && candidateBytes >= kTimedBytes;
    sendsOnly_ = recvBytes < kTimedBytes;
    label_ = label;
    bytes_ = candidateBytes;
  }
  // Whether this run must wait until its peers took every piece it sent
  // before it ends (a timed run of a rank that mostly sends).
  bool waitsForPeers() const {
    return active_ && sendsOnly_ && timed_ && !untimed_ && (skipNext_ || blockRuns_ == kBlock - 1);
  }
  // A run begins. Returns whether it tries the other way: the ring's store
  // choice (SlotWrites) then stays quiet, so the time measures this one.
  bool beginRun();
  // A run whose time says nothing about either way (a gated run waits for
  // its input, io_gate.h): the way in use, nothing recorded at its end.
  void beginUntimedRun() {
    way_ = mode_;
    untimed_ = true;
  }
  // Whether this run sends pieces at or above the threshold by reference.
  bool atThreshold() const { return !active_ || way_ == 0; }
  // The run ended. `otherTrial`: the ring's store choice was on trial in it
  // (never in one of our trials), so its time is not this way's usual cost.
  void endRun(bool otherTrial);
  // endRun's bookkeeping for a run of `us` microseconds (tests call it
  // directly with chosen times).
  void recordRun(double us, bool otherTrial);
  bool active() const { return active_; }
  int way() const { return mode_; }  // the way in use (0: threshold, 1: by value)

 private:
  struct Samples {  // the last kSamples samples of one way
    double t[kSamples] = {};
    int n = 0;
    void add(double v) { t[n++ % kSamples] = v; }
    bool full() const { return n >= kSamples; }
    double median() const;
  };
  void judge();
  // The runs until the next trial when the dearer way took `ratio` times
  // the other's (>= 1), at least `floor`.
  static uint32_t intervalFor(double ratio, uint32_t floor);

  bool active_ = false;
  bool sendsOnly_ = false;  // configure: the run receives less than kTimedBytes
  bool baseline_ = false;   // sendsOnly_: timing the way in use before a trial
  bool timed_ = false;      // this run's time counts
  int blockRuns_ = 0;       // runs of the current sample so far (kBlock)
  double blockUs_ = 0;      // their time
  bool blockOther_ = false; // one of them had the store choice on trial
  const char* label_ = "";
  size_t bytes_ = 0;
  int mode_ = 0;            // the way in use
  int way_ = 0;             // this run's way
  bool untimed_ = false;    // beginUntimedRun
  int trialRuns_ = 0;       // runs of the current trial so far (0: none)
  bool skipNext_ = true;    // the next run's time pays for a change of way
  uint32_t sinceTrial_ = 0;
  uint32_t interval_ = 0;   // 0: the opening trial comes once `used_` is full
  Samples used_, trial_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ferry
