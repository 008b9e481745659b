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
  }
  way_ = trialRuns_ > 0 ? 1 - mode_ : mode_;
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
  if (trialRuns_ > 0) {
    if (!skip) trial_.add(us);
    if (trial_.full()) judge();
    return;
  }
  ++sinceTrial_;
  if (!skip && !otherTrial) used_.add(us);
}

void RefChoice::judge() {
  double other = trial_.median(), mine = used_.median();
  int was = mode_;
  if (other < kMargin * mine) {
    mode_ = 1 - mode_;
    used_ = trial_;
    interval_ = kMinInterval;
  } else {
    interval_ = std::clamp<uint32_t>(interval_ * 2, kMinInterval, kMaxInterval);
  }
  FERRY_INFO(log::kColl, "reference choice (%s, %zu bytes by reference at the threshold): %s %.1f us "
              "against %s %.1f us; %s, next trial in %u runs", label_, bytes_,
              was == 0 ? "by value" : "at the threshold", other,
              was == 0 ? "at the threshold" : "by value", mine,
              mode_ == was ? "kept" : "switched", interval_);
  trialRuns_ = 0;
  sinceTrial_ = 0;
  skipNext_ = mode_ == was;  // back to the way in use: its first run pays for the change
}

}  // namespace ferry
