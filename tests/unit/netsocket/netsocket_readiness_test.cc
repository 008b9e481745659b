// What the Socket network notes for its caller's idle wait (core/readiness.h):
// a receive that waits for bytes names its socket, so a caller blocking on
// the notes wakes when the bytes come; with helper threads moving the data
// there is no socket of the caller's to wait on.
#include <gtest/gtest.h>

#include <thread>

#include "core/readiness.h"
#include "test_net.h"

namespace ferry::nettest {
namespace {

constexpr int64_t kTimeoutMs = 30000;

// Receive 256 KiB (streamed) that a thread sends 50 ms later, the caller
// waiting on the notes between tests with a wait of up to 10 s: done in a
// few waits when the notes name the right sockets (a missing note returns
// at once and the loop would spin: the count of waits tells; a wrong one
// sleeps 10 s: the deadline tells).
void receiveWaitingOnNotes(const char* retryMs) {
  LoopbackEnv env("0", retryMs);
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  const size_t n = 256 * 1024;
  std::vector<char> out = pattern(n, 3), in(n, 0);
  void* data = in.data();
  size_t size = n;
  int tag = 0;
  void* mh = nullptr;
  void* req = nullptr;
  ASSERT_EQ(net()->irecv(p.recv, 1, &data, &size, &tag, &mh, nullptr, &req), ncclSuccess);
  ASSERT_NE(req, nullptr);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(sendWait(p.send, out.data(), n, kTimeoutMs), ncclSuccess);
  });
  int64_t deadline = nowMs() + 5000;
  int done = 0, got = 0, waits = 0, blocked = 0;
  while (!done && nowMs() < deadline) {
    readiness::clear();
    ASSERT_EQ(net()->test(req, &done, &got), ncclSuccess);
    if (done) break;
    ++waits;
    if (readiness::wait(10'000'000)) ++blocked;
  }
  readiness::clear();
  sender.join();
  ASSERT_TRUE(done) << "not received within 5 s after " << waits << " waits";
  EXPECT_EQ(got, static_cast<int>(n));
  EXPECT_EQ(in, out);
  // Every wait blocked on a noted socket, and a few sufficed (header, then
  // the streams' bytes in socket-buffer sized pieces).
  EXPECT_EQ(blocked, waits);
  EXPECT_LT(waits, 200);
}

TEST(NetSocketReadiness, ReceiveNotesItsSocketsRetryOff) { receiveWaitingOnNotes("0"); }
TEST(NetSocketReadiness, ReceiveNotesItsSocketsRetryOn) { receiveWaitingOnNotes("5000"); }

TEST(NetSocketReadiness, HelperThreadsAreNoSocketToWaitOn) {
  LoopbackEnv env("1", "0");
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  char buf[64];
  void* data = buf;
  size_t size = sizeof(buf);
  int tag = 0;
  void* mh = nullptr;
  void* req = nullptr;
  ASSERT_EQ(net()->irecv(p.recv, 1, &data, &size, &tag, &mh, nullptr, &req), ncclSuccess);
  ASSERT_NE(req, nullptr);
  readiness::clear();
  int done = 0;
  ASSERT_EQ(net()->test(req, &done, nullptr), ncclSuccess);
  ASSERT_FALSE(done);
  // Helper threads: the caller waits on their progress, not on a socket.
  EXPECT_FALSE(readiness::wait(10'000'000));
  readiness::clear();
  char msg[64] = {1};
  EXPECT_EQ(sendWait(p.send, msg, sizeof(msg), kTimeoutMs), ncclSuccess);
  EXPECT_EQ(waitDone(req, kTimeoutMs, nullptr), ncclSuccess);
}

}  // namespace
}  // namespace ferry::nettest
