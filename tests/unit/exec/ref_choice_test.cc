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
  RefChoice small, fixed;
  small.configure(RefChoice::kTimedBytes - 1, 4 * kMiB, true);
  fixed.configure(4 * kMiB, 4 * kMiB, false);  // FERRY_CMA_THRESHOLD set
  for (RefChoice* c : {&small, &fixed}) {
    EXPECT_FALSE(c->active());
    for (int i = 0; i < 50; ++i) {
      EXPECT_FALSE(c->beginRun());
      EXPECT_TRUE(c->atThreshold());
      EXPECT_FALSE(c->waitsForPeers());
    }
  }
}

// A rank that only sends (a Scatter root) would see by value finish as soon
// as its pieces are in the rings: it times both ways only around each
// trial, a sample being the mean of kBlock runs of which the last waits for
// the peers (as does the first, which drains what came before).
TEST(RefChoice, ASendOnlyRankTimesBlocksOfRunsAroundEachTrialOnly) {
  RefChoice c;
  c.configure(4 * kMiB, 0, true);
  ASSERT_TRUE(c.active());
  // One timed stretch: the draining run, then kSamples blocks; `us(i)` is
  // run i's time within its block. Returns whether it went at the threshold.
  auto stretch = [&](auto us) {
    bool atThreshold = true;
    c.beginRun();
    EXPECT_TRUE(c.waitsForPeers());
    atThreshold = c.atThreshold();
    c.recordRun(99999, false);  // draining: not counted
    for (int b = 0; b < RefChoice::kSamples; ++b)
      for (int i = 0; i < RefChoice::kBlock; ++i) {
        c.beginRun();
        EXPECT_EQ(c.waitsForPeers(), i == RefChoice::kBlock - 1) << "block " << b << " run " << i;
        EXPECT_EQ(c.atThreshold(), atThreshold);
        c.recordRun(us(i), false);
      }
    return atThreshold;
  };
  // At the threshold every run takes 100; by value three run ahead (10)
  // and the last waits for the peers (310): a mean of 85, cheaper (by
  // little enough that the next trial is kMinInterval runs away).
  EXPECT_TRUE(stretch([](int) { return 100.0; }));
  EXPECT_FALSE(stretch([](int i) { return i == RefChoice::kBlock - 1 ? 310.0 : 10.0; }));
  EXPECT_EQ(c.way(), 1);
  // Until the next trial no run waits, and no time counts, however long.
  for (uint32_t i = 0; i < RefChoice::kMinInterval; ++i) {
    EXPECT_FALSE(c.beginRun());
    EXPECT_FALSE(c.waitsForPeers());
    EXPECT_FALSE(c.atThreshold());
    c.recordRun(i % 2 ? 5000 : 1, false);
  }
  // Then by value is timed afresh (the wait now costs 400: a mean of 107.5)
  // and the trial at the threshold (100) wins it back.
  EXPECT_FALSE(stretch([](int i) { return i == RefChoice::kBlock - 1 ? 400.0 : 10.0; }));
  EXPECT_TRUE(stretch([](int) { return 100.0; }));
  EXPECT_EQ(c.way(), 0);
  c.beginRun();
  EXPECT_FALSE(c.waitsForPeers());
  EXPECT_TRUE(c.atThreshold());
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
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(run(c, 110));
  EXPECT_EQ(c.way(), 0);
  for (uint32_t i = 0; i < 2 * RefChoice::kMinInterval; ++i) EXPECT_TRUE(run(c, 100));
  EXPECT_FALSE(run(c, 100));  // the third trial begins
}

// A trial's kSamples + 1 runs of the dearer way may cost at most
// kTrialShare of the runs until the next: a way 6x as dear is tried again
// after 4 x 5 / 0.05 = 400 runs, not 16; after a switch, the way left
// behind likewise.
TEST(RefChoice, TrialsOfAFarDearerWayComeRarely) {
  RefChoice c = active();
  for (int i = 0; i < 4; ++i) run(c, 100);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(run(c, 600));  // the opening trial loses 6x
  EXPECT_EQ(c.way(), 0);
  for (int i = 0; i < 400; ++i) EXPECT_TRUE(run(c, 100)) << "run " << i;
  EXPECT_FALSE(run(c, 100));  // the next trial
  for (int i = 0; i < 3; ++i) run(c, 20);  // it wins 5x: switched
  EXPECT_EQ(c.way(), 1);
  for (int i = 0; i < 320; ++i) EXPECT_FALSE(run(c, 20)) << "run " << i;
  EXPECT_TRUE(run(c, 20));  // a trial of the threshold again
  EXPECT_EQ(RefChoice::kMaxInterval, 1024u);  // and never more than this apart
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
