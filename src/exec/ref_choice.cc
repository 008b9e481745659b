#include "exec/ref_choice.h"

#include <algorithm>

#include "core/log.h"

namespace ferry {

double RefChoice::Samples::median() const {
  double s[kSamples];
  std::copy(t, t + kSamples, s);
  std::sort(s, s + kSamples);
  return s[kSamples / 2];
}

bool RefChoice::beginRun() {
  untimed_ = false;
  if (!active_) return false;
  if (trialRuns_ == 0 && used_.full() && sinceTrial_ >= interval_) {
    trialRuns_ = 1;  // a trial of the other way begins with this run
    trial_ = Samples{};
    skipNext_ = true;
  } else if (trialRuns_ > 0) {
    ++trialRuns_;
  } else if (sendsOnly_ && !baseline_ && sinceTrial_ >= interval_) {
    baseline_ = true;  // the way in use, timed afresh right before its trial
    used_ = Samples{};
    blockRuns_ = 0;
    blockUs_ = 0;
    skipNext_ = true;  // it waits for what earlier runs left in the rings
  }
  way_ = trialRuns_ > 0 ? 1 - mode_ : mode_;
  timed_ = !sendsOnly_ || baseline_ || trialRuns_ > 0;
  start_ = std::chrono::steady_clock::now();
  return trialRuns_ > 0;
}

void RefChoice::endRun(bool otherTrial) {
  if (untimed_) {
    untimed_ = false;
    return;
  }
  if (!active_) return;
  recordRun(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count(),
            otherTrial);
}

void RefChoice::recordRun(double us, bool otherTrial) {
  bool skip = skipNext_;
  skipNext_ = false;
  if (trialRuns_ == 0) ++sinceTrial_;
  if (skip || !timed_) return;
  // A sample: one run, or the mean of kBlock runs of a rank that only sends.
  blockUs_ += us;
  blockOther_ = blockOther_ || otherTrial;
  if (++blockRuns_ < (sendsOnly_ ? kBlock : 1)) return;
  double sample = blockUs_ / blockRuns_;
  bool other = blockOther_;
  blockRuns_ = 0;
  blockUs_ = 0;
  blockOther_ = false;
  if (trialRuns_ > 0) {
    trial_.add(sample);
    if (trial_.full()) judge();
  } else if (!other) {
    used_.add(sample);
  }
}

uint32_t RefChoice::intervalFor(double ratio, uint32_t floor) {
  if (!(ratio > 1)) ratio = 1;  // also NaN (two zero medians)
  double cost = (kSamples + 1) * (ratio - 1) / kTrialShare;  // in runs of the cheaper way
  double runs = std::clamp<double>(std::max<double>(floor, cost), kMinInterval, kMaxInterval);
  return static_cast<uint32_t>(runs);
}

void RefChoice::judge() {
  double other = trial_.median(), mine = used_.median();
  int was = mode_;
  if (other < kMargin * mine) {
    mode_ = 1 - mode_;
    used_ = trial_;
    interval_ = intervalFor(mine / other, kMinInterval);
  } else {
    interval_ = intervalFor(other / mine, interval_ * 2);
  }
  FERRY_INFO(log::kColl, "reference choice (%s, %zu bytes by reference at the threshold): %s %.1f us "
              "against %s %.1f us; %s, next trial in %u runs", label_, bytes_,
              was == 0 ? "by value" : "at the threshold", other,
              was == 0 ? "at the threshold" : "by value", mine,
              mode_ == was ? "kept" : "switched", interval_);
  trialRuns_ = 0;
  sinceTrial_ = 0;
  baseline_ = false;
  if (sendsOnly_) used_ = Samples{};  // the next trial times both ways again
  skipNext_ = mode_ == was;  // back to the way in use: its first run pays for the change
}

}  // namespace ferry
