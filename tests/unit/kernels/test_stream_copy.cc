// copyPastCache moves exactly the bytes asked for, at any alignment, and
// TwoWayChoice follows the cheaper way as costs change.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/stream_copy.h"

namespace ferry::kernels {
namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed);
  return v;
}

// Every size around the line and block boundaries, at every offset of a
// line for source and destination; guard bytes around dst stay untouched.
template <typename Copy>
void checkExact(Copy copy) {
  const size_t sizes[] = {0, 1, 15, 63, 64, 65, 127, 128, 1000, 4095, 4096, 8192 + 17, 70001};
  for (size_t n : sizes) {
    for (size_t srcOff : {0, 1, 17, 63}) {
      for (size_t dstOff : {0, 8, 33, 63}) {
        std::vector<uint8_t> src = pattern(n + 64, 7);
        std::vector<uint8_t> dst(n + 192, 0xEE);
        uint8_t* d = dst.data() + 64 + dstOff;
        copy(d, src.data() + srcOff, n);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(d[i], src[srcOff + i]) << "n " << n << " src+" << srcOff << " dst+" << dstOff << " at " << i;
        for (uint8_t* p = dst.data(); p < d; ++p) ASSERT_EQ(*p, 0xEE) << "below dst, n " << n;
        for (uint8_t* p = d + n; p < dst.data() + dst.size(); ++p) ASSERT_EQ(*p, 0xEE) << "above dst, n " << n;
      }
    }
  }
}

TEST(StreamCopy, PastCacheIsExactAtAnyAlignment) {
  checkExact([](void* d, const void* s, size_t n) { copyPastCache(d, s, n); });
}

// Drives the choice with made-up costs: way 0 costs a, way 1 costs b.
int runCalls(TwoWayChoice& c, int calls, double a, double b, int* trials = nullptr) {
  for (int i = 0; i < calls; ++i) {
    bool trial = false;
    int way = c.next(&trial);
    if (trial && trials) ++*trials;
    c.record(way, way == 0 ? a : b, trial);
  }
  return c.current();
}

TEST(TwoWayChoice, FollowsTheCheaperWayAndBacksOffLosingTrials) {
  TwoWayChoice c;
  EXPECT_EQ(runCalls(c, 40, 1.0, 2.0), 0);  // ordinary stores cheaper: stay
  int trials = 0;
  runCalls(c, 20000, 1.0, 2.0, &trials);
  EXPECT_EQ(c.interval(), TwoWayChoice::kMaxInterval);
  EXPECT_LT(trials, 30) << "losing trials must become rare";
  EXPECT_GT(trials, 0) << "but never stop";
  // Phase change: streaming becomes 10x cheaper; seen within one interval,
  // and the way left is tried again soon after.
  int calls = 0;
  while (c.current() == 0 && calls <= int(TwoWayChoice::kMaxInterval + TwoWayChoice::kTrialCalls)) {
    runCalls(c, 1, 10.0, 1.0);
    ++calls;
  }
  EXPECT_EQ(c.current(), 1) << "after " << calls << " calls";
  EXPECT_EQ(c.interval(), TwoWayChoice::kMinInterval);
  // And back, sooner: the interval restarted at its minimum.
  calls = 0;
  while (c.current() == 1 && calls <= int(TwoWayChoice::kMaxInterval + TwoWayChoice::kTrialCalls)) {
    runCalls(c, 1, 1.0, 10.0);
    ++calls;
  }
  EXPECT_EQ(c.current(), 0);
  EXPECT_LE(calls, int(TwoWayChoice::kMinInterval + TwoWayChoice::kTrialCalls));
}

// A trial's first call pays for the state the other way left behind (on the
// test VM, ordinary stores into lines the reader took from memory after
// streamed writes cost 2-3x their steady figure): it must not count.
TEST(TwoWayChoice, OnlyTheLastCallOfATrialCounts) {
  TwoWayChoice c;
  runCalls(c, 100, 1.0, 2.0);
  ASSERT_EQ(c.current(), 0);
  int switched = -1;
  for (int i = 0; i < 200 && switched < 0; ++i) {
    bool trial = false;
    int way = c.next(&trial);
    if (!trial) {
      c.record(way, 1.0, false);
      continue;
    }
    c.record(way, 50.0, true);  // the warm-up call: expensive
    way = c.next(&trial);
    ASSERT_TRUE(trial);
    ASSERT_EQ(way, 1);
    c.record(way, 0.5, true);  // steady: cheaper than the way in use
    switched = c.current();
  }
  EXPECT_EQ(switched, 1);
}

// The opening trial (the other way first, while nothing is known) decides
// as soon as the way in use has one measurement: a run of a dozen calls
// must not spend them all on the dearer way waiting for the next trial.
TEST(TwoWayChoice, TheOpeningTrialDecidesAtOnce) {
  TwoWayChoice c;
  EXPECT_EQ(runCalls(c, 3, 3.0, 1.0), 1);
  TwoWayChoice d;
  EXPECT_EQ(runCalls(d, 3, 1.0, 3.0), 0);
}

TEST(TwoWayChoice, TheWayInUseAveragesOutOneSlowCall) {
  TwoWayChoice c;
  runCalls(c, 100, 1.0, 1.5);
  ASSERT_EQ(c.current(), 0);
  // One interrupted call of the way in use does not make the next trial win.
  bool trial = false;
  int way = c.next(&trial);
  ASSERT_FALSE(trial);
  c.record(way, 4.0, false);  // average now 1.75
  EXPECT_EQ(runCalls(c, 1, 1.0, 1.5), 0);
  EXPECT_EQ(runCalls(c, 200, 1.0, 1.5), 0);
}

}  // namespace
}  // namespace ferry::kernels
