// Readiness notes (core/readiness.h): what a pass noted decides whether a
// wait may block, and a noted socket that becomes ready ends the wait.
#include "core/readiness.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <thread>

namespace ferry {
namespace {

struct PipeFds {
  int fd[2] = {-1, -1};
  PipeFds() { EXPECT_EQ(pipe(fd), 0); }
  ~PipeFds() {
    close(fd[0]);
    close(fd[1]);
  }
};

TEST(Readiness, NothingNotedMeansNoWait) {
  readiness::clear();
  EXPECT_FALSE(readiness::wait(1000));
}

TEST(Readiness, OtherVetoesTheNotedSockets) {
  PipeFds p;
  readiness::clear();
  readiness::note(p.fd[0], POLLIN);
  readiness::noteOther();
  EXPECT_FALSE(readiness::wait(1000));
  readiness::clear();  // clear forgets "other" too
  readiness::note(p.fd[0], POLLIN);
  EXPECT_TRUE(readiness::wait(1));
  readiness::clear();
}

TEST(Readiness, TooManySocketsCountAsOther) {
  readiness::clear();
  std::vector<PipeFds> pipes(readiness::kMaxFds + 1);
  for (int i = 0; i < readiness::kMaxFds; ++i) readiness::note(pipes[i].fd[0], POLLIN);
  // Notes of one fd merge: this is still kMaxFds sockets.
  readiness::note(pipes[0].fd[0], POLLOUT);
  EXPECT_TRUE(readiness::wait(1));
  readiness::note(pipes[readiness::kMaxFds].fd[0], POLLIN);
  EXPECT_FALSE(readiness::wait(1000));
  readiness::clear();
}

// The wait returns once the socket is ready: a writer 20 ms later ends a
// wait of up to 10 s (one that ignored the fd would take the whole 10 s;
// the bound of 5 s leaves any loaded machine room).
TEST(Readiness, ReadySocketEndsTheWait) {
  PipeFds p;
  auto t0 = std::chrono::steady_clock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    char c = 'x';
    EXPECT_EQ(write(p.fd[1], &c, 1), 1);
  });
  bool ready = false;
  for (int round = 0; round < 3 && !ready; ++round) {  // a signal may cut a wait short
    readiness::clear();
    readiness::note(p.fd[0], POLLIN);
    ASSERT_TRUE(readiness::wait(10'000'000));
    pollfd q{p.fd[0], POLLIN, 0};
    ready = ::poll(&q, 1, 0) == 1;
  }
  writer.join();
  readiness::clear();
  EXPECT_TRUE(ready);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
}  // namespace ferry
