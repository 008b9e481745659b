// Backoff phases and Waiter abort/timeout behaviour. Timing bounds are
// generous: the machine is shared and oversubscribed.
#include "core/wait.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <regex>
#include <thread>

namespace ferry {
namespace {

int64_t elapsedUs(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - since).count();
}

TEST(Backoff, DefaultSpinCountComesFromConfig) {
  // FERRY_SPIN_COUNT is not set by ctest; params.def says 2000.
  if (getenv("FERRY_SPIN_COUNT")) GTEST_SKIP() << "FERRY_SPIN_COUNT set in the environment";
  EXPECT_EQ(Backoff::defaultSpinCount(), 2000);
}

TEST(Backoff, SleepsOnceSpinAndYieldPhasesAreOver) {
  Backoff b(10);
  for (int i = 0; i < 10 + Backoff::kYieldPolls + 20; i++) b.pause();  // reach the sleep cap
  auto t0 = Clock::now();
  for (int i = 0; i < 50; i++) b.pause();
  EXPECT_GE(elapsedUs(t0), 50 * Backoff::kMaxSleepUs);
  EXPECT_LT(elapsedUs(t0), 2'000'000);
}

TEST(Backoff, PhasesAndResetReturnsToSpinning) {
  Backoff b(1000);
  EXPECT_EQ(b.phase(), Backoff::Phase::kSpin);
  // The learned per-thread budget may be below 1000, but the yield phase is
  // always kYieldPolls long and the sleep phase follows it.
  for (int i = 0; i < 1000 + Backoff::kYieldPolls; i++) b.pause();
  EXPECT_EQ(b.phase(), Backoff::Phase::kSleep);
  b.reset();
  EXPECT_EQ(b.phase(), Backoff::Phase::kSpin);  // was a 100 ms timing check: flaky under load
}

TEST(Waiter, AbortAlreadySet) {
  std::atomic<bool> abort{true};
  Waiter w(&abort, 0, "recv from rank 3");
  Status st = w.idle();
  EXPECT_EQ(st.code(), Code::kRemote);
  EXPECT_EQ(st.message(), "communicator aborted while recv from rank 3");
}

TEST(Waiter, AbortFromAnotherThreadIsSeenPromptly) {
  std::atomic<bool> abort{false};
  Waiter w(&abort, 60'000, "send");
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abort = true;
  });
  auto t0 = Clock::now();
  Status st;
  while ((st = w.idle()).isOk()) {
  }
  int64_t us = elapsedUs(t0);
  setter.join();
  EXPECT_EQ(st.code(), Code::kRemote);
  EXPECT_GE(us, 40'000);
  EXPECT_LT(us, 2'000'000);
}

TEST(Waiter, NoDeadlineNoAbort) {
  Waiter w(nullptr, 0, "forever");
  for (int i = 0; i < 3000; i++) ASSERT_TRUE(w.idle().isOk());
}

TEST(Waiter, TimeoutFires) {
  Waiter w(nullptr, 100, "allreduce step 2");
  auto t0 = Clock::now();
  Status st;
  while ((st = w.idle()).isOk()) {
  }
  int64_t us = elapsedUs(t0);
  EXPECT_EQ(st.code(), Code::kTimeout);
  EXPECT_TRUE(std::regex_match(st.message(),
                               std::regex("no progress for \\d+ ms while allreduce step 2")))
      << st.message();
  // The deadline runs on the coarse clock plus one tick: never early.
  EXPECT_GE(us, 100'000);
  EXPECT_LT(us, 3'000'000);
}

TEST(Waiter, ProgressResetsDeadline) {
  std::atomic<bool> abort{false};
  Waiter w(&abort, 150, "progressing");
  auto t0 = Clock::now();
  auto lastProgress = t0;
  // 600 ms of waiting with progress every 30 ms: never times out.
  while (elapsedUs(t0) < 600'000) {
    if (elapsedUs(lastProgress) >= 30'000) {
      w.progressed();
      lastProgress = Clock::now();
    }
    ASSERT_TRUE(w.idle().isOk());
  }
  // Then progress stops: the timeout counts from the last progress.
  w.progressed();
  auto t1 = Clock::now();
  Status st;
  while ((st = w.idle()).isOk()) {
  }
  EXPECT_EQ(st.code(), Code::kTimeout);
  // The coarse clock plus one tick of slack: never early.
  EXPECT_GE(elapsedUs(t1), 150'000);
  EXPECT_LT(elapsedUs(t1), 3'000'000);
}

// A pass in which a transport moved bytes (a large message on its way)
// is progress: no pause, and the no-progress deadline starts again.
TEST(Waiter, MovedBytesCountAsProgress) {
  readiness::noteMoved();
  EXPECT_TRUE(readiness::takeMoved());
  EXPECT_FALSE(readiness::takeMoved());  // taken once
  readiness::noteMoved();
  readiness::clear();
  EXPECT_FALSE(readiness::takeMoved());

  Waiter w(nullptr, 100, "a large receive");
  auto t0 = Clock::now();
  while (elapsedUs(t0) < 300'000) {
    readiness::noteMoved();
    ASSERT_TRUE(w.idle().isOk()) << "timed out although bytes kept moving";
  }
  // Nothing moves any more: the deadline counts from the last move.
  auto t1 = Clock::now();
  Status st;
  while ((st = w.idle()).isOk()) {
  }
  EXPECT_EQ(st.code(), Code::kTimeout);
  EXPECT_GE(elapsedUs(t1), 100'000);
}

// A wait on sockets only spins FERRY_WAIT_SOCKET_GAP_US (4 us by default)
// between its polls in the spin phase; any other wait pauses once. Only the
// lower bound is checked (a loaded machine makes everything slower).
TEST(Waiter, SocketWaitSpacesItsPollsInTheSpinPhase) {
  if (getenv("FERRY_WAIT_SOCKET_GAP_US") || getenv("FERRY_SPIN_COUNT")) GTEST_SKIP() << "set in the environment";
  ASSERT_EQ(Waiter::socketGapNs(), 4000);
  int64_t us = 0;
  // A fresh thread: the spin budget is learned per thread, and earlier
  // tests may have shrunk this one's below the 200 polls used here.
  std::thread t([&] {
    Waiter w(nullptr, 0, "socket wait");
    w.allowFdWait(true);
    auto t0 = Clock::now();
    for (int i = 0; i < 200; i++) ASSERT_TRUE(w.idle().isOk());
    us = elapsedUs(t0);
  });
  t.join();
  EXPECT_GE(us, 200 * 4);
}

// Mid-message (a stream noted part of its chunk moved) the next bytes are
// microseconds away: the wait polls back to back. Between messages it
// spaces its polls again, and a pass's note does not outlive its idle().
TEST(Waiter, SocketWaitPollsBackToBackMidMessage) {
  if (getenv("FERRY_WAIT_SOCKET_GAP_US") || getenv("FERRY_SPIN_COUNT")) GTEST_SKIP() << "set in the environment";
  std::thread t([] {
    Waiter w(nullptr, 0, "socket wait");
    w.allowFdWait(true);
    readiness::note(0, POLLIN);
    EXPECT_TRUE(w.spacesPolls());
    readiness::noteMidMessage();
    EXPECT_FALSE(w.spacesPolls());
    ASSERT_TRUE(w.idle().isOk());
    readiness::note(0, POLLIN);
    EXPECT_TRUE(w.spacesPolls());
    Waiter other(nullptr, 0, "shm wait");
    EXPECT_FALSE(other.spacesPolls());
  });
  t.join();
}

}  // namespace
}  // namespace ferry
