// RefChoice: each executor's choice between sending large pieces by
// reference at the threshold (way 0) and by value (way 1), from run times
// given here (recordRun) instead of measured.
#include "exec/ref_choice.h"

#include <gtest/gtest.h>

namespace ferry {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

// One run of the executor taking `us`; returns whether it went at the threshold.
bool run(RefChoice& c, double us, bool otherTrial = false) {
  c.beginRun();
  bool atThreshold = c.atThreshold();
  c.recordRun(us, otherTrial);
  return atThreshold;
}

RefChoice active() {
  RefChoice c;
  c.configure(4 * kMiB, 4 * kMiB, true);
  return c;
}

TEST(RefChoice, InactiveKeepsTheThreshold) {
  RefChoice small, sendOnly, fixed;
  small.configure(kMiB - 1, 4 * kMiB, true);
  sendOnly.configure(4 * kMiB, 0, true);  // a Scatter root: its own time misleads
  fixed.configure(4 * kMiB, 4 * kMiB, false);  // FERRY_CMA_THRESHOLD set
  for (RefChoice* c : {&small, &sendOnly, &fixed}) {
    EXPECT_FALSE(c->active());
    for (int i = 0; i < 50; ++i) {
      EXPECT_FALSE(c->beginRun());
      EXPECT_TRUE(c->atThreshold());
    }
  }
}

TEST(RefChoice, OpeningTrialSwitchesToTheCheaperWay) {
  RefChoice c = active();
  // The first run pays for connecting; then three runs at the threshold.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(run(c, i == 0 ? 900 : 100));
  // The trial by value: one run paying for the change, three measured.
  EXPECT_TRUE(c.beginRun());
  EXPECT_FALSE(c.atThreshold());
  c.recordRun(300, false);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(run(c, 60));
  EXPECT_EQ(c.way(), 1);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(run(c, 60));
}

// A gated run (the bridge's pipelined staging) takes the way in use and
// leaves no trace: neither a sample nor a step towards the next trial.
TEST(RefChoice, UntimedRunsTakeTheWayInUseAndCountNothing) {
  RefChoice c = active();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(run(c, i == 0 ? 900 : 100));
  for (int i = 0; i < 3; ++i) {
    c.beginUntimedRun();
    EXPECT_TRUE(c.atThreshold());
    c.endRun(false);
  }
  EXPECT_TRUE(c.beginRun());  // still the trial's first run
  EXPECT_FALSE(c.atThreshold());
  c.recordRun(300, false);
  c.beginUntimedRun();  // mid-trial: the way in use, not the trial's
  EXPECT_TRUE(c.atThreshold());
  c.endRun(false);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(run(c, 60));
  EXPECT_EQ(c.way(), 1);
}

TEST(RefChoice, ALosingTrialKeepsTheWayAndWaitsLonger) {
  RefChoice c = active();
  for (int i = 0; i < 4; ++i) run(c, 100);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(run(c, 97));  // within the margin: not enough
  EXPECT_EQ(c.way(), 0);
  // Back at the threshold for kMinInterval runs (the first pays for the change).
  for (uint32_t i = 0; i < RefChoice::kMinInterval; ++i) EXPECT_TRUE(run(c, 100));
  // The next trial; it loses again, and the wait after it doubles.
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(run(c, 150));
  EXPECT_EQ(c.way(), 0);
  for (uint32_t i = 0; i < 2 * RefChoice::kMinInterval; ++i) EXPECT_TRUE(run(c, 100));
  EXPECT_FALSE(run(c, 100));  // the third trial begins
}

TEST(RefChoice, OneSlowRunDoesNotDecide) {
  RefChoice c = active();
  for (int i = 0; i < 4; ++i) run(c, 100);
  run(c, 60);  // the trial's first run, not counted
  run(c, 60);
  run(c, 50000);  // descheduled once: the median ignores it
  run(c, 60);
  EXPECT_EQ(c.way(), 1);
}

TEST(RefChoice, RunsWithTheStoreChoiceOnTrialAreNotCounted) {
  RefChoice c = active();
  run(c, 100);
  // Runs in which SlotWrites tried its other way: their times do not count,
  // so the way in use has no figure yet and no trial starts.
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(run(c, 5000, /*otherTrial=*/true));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(run(c, 100));
  // Now a trial; 120 against 100: kept.
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(run(c, 120));
  EXPECT_EQ(c.way(), 0);
}

}  // namespace
}  // namespace ferry
