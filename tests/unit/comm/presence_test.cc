// Presence (comm/presence.h) and the wait that asks it (Backoff with
// PeerState::kParked, core/wait.h).
#include "comm/presence.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/wait.h"

namespace ferry {
namespace {

uint64_t uniqueHash() {
  return (static_cast<uint64_t>(getpid()) << 20) ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

TEST(Presence, LinesAreSharedBetweenOpenersAndStartUnparked) {
  uint64_t h = uniqueHash();
  auto a = Presence::open(h, 3);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  auto b = Presence::open(h, 3);
  ASSERT_TRUE(b.isOk()) << b.status().message();
  a.value()->unlink();
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(b.value()->parked(r));
  a.value()->flag(1)->store(1);
  EXPECT_FALSE(b.value()->parked(0));
  EXPECT_TRUE(b.value()->parked(1));
  EXPECT_FALSE(b.value()->parked(2));
  a.value()->flag(1)->store(0);
  EXPECT_FALSE(b.value()->parked(1));
}

TEST(Presence, AnotherProcessSeesTheFlag) {
  uint64_t h = uniqueHash();
  auto a = Presence::open(h, 2);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto b = Presence::open(h, 2);
    if (!b.isOk()) _exit(2);
    b.value()->flag(1)->store(1);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  a.value()->unlink();
  EXPECT_TRUE(a.value()->parked(1));
  EXPECT_FALSE(a.value()->parked(0));
}

TEST(Presence, RefusesNoRanks) { EXPECT_FALSE(Presence::open(uniqueHash(), 0).isOk()); }

TEST(BackoffPeers, ParkedPeersSkipTheSpinPhase) {
  Backoff b(1000);
  EXPECT_EQ(b.phase(), Backoff::Phase::kSpin);
  EXPECT_EQ(b.phase(PeerState::kParked), Backoff::Phase::kYield);
  b.pause(PeerState::kParked);  // yields (no assertion on time: the machine may be loaded)
  EXPECT_EQ(b.phase(PeerState::kParked), Backoff::Phase::kYield);
  // Unknown peers: the spin phase as before.
  EXPECT_EQ(b.phase(PeerState::kUnknown), Backoff::Phase::kSpin);
}

TEST(BackoffPeers, ParkFlagIsSetWhileYieldingAndClearedAfter) {
  std::atomic<uint32_t> flag{0};
  std::atomic<bool> seen{false}, stop{false};
  std::thread watcher([&] {
    while (!stop.load()) {
      if (flag.load(std::memory_order_relaxed)) seen.store(true);
    }
  });
  Backoff b(0);  // no spin phase: every pause yields
  b.setParkFlag(&flag);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!seen.load() && std::chrono::steady_clock::now() < end) {
    b.pause();
    EXPECT_EQ(flag.load(), 0u);  // back from the yield: not parked
    b.reset();                    // stay in the yield phase, never sleep
  }
  stop.store(true);
  watcher.join();
  EXPECT_TRUE(seen.load()) << "the flag was never seen set during a yield";
  EXPECT_EQ(flag.load(), 0u);
}

TEST(BackoffPeers, SpinPhaseDoesNotTouchTheFlag) {
  // A new thread: the spin budget a thread learned (wait.cc) starts full.
  std::atomic<uint32_t> flag{7};
  std::thread([&] {
    Backoff b(1000);
    b.setParkFlag(&flag);
    b.pause();  // the first poll of a full budget spins
  }).join();
  EXPECT_EQ(flag.load(), 7u);
}

}  // namespace
}  // namespace ferry
