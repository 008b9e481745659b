// Retry (FERRY_NET_RETRY_MS): a connection reset in the middle of a stream
// of mixed-size messages (inline and streamed) is re-established and every
// message arrives exactly once, in order, byte-exact; with retry off the
// same reset fails the transfer; a comm closed on purpose fails its peer at
// once instead of after the window.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <tuple>

#include "core/log.h"
#include "test_net.h"
#include "transports/netsocket/net_comm.h"

namespace ferry::nettest {
namespace {

constexpr int64_t kTimeoutMs = 30000;
constexpr int kDepth = 4;  // requests in flight per side

// Three rounds of inline and streamed sizes (inline: < 64 KiB).
std::vector<size_t> mixedSizes() {
  std::vector<size_t> v;
  for (int round = 0; round < 3; ++round) {
    for (size_t s : {size_t(0), size_t(100), size_t(64) << 10, size_t(1) << 20, size_t(4) << 20,
                     size_t(100) + round, (size_t(64) << 10) + 1, size_t(3000)}) {
      v.push_back(s);
    }
  }
  return v;
}

// Move messages 0..n-1 through `comm`, up to kDepth in flight, testing the
// oldest; onDone(i, size) after each. "" or what went wrong; `stop` (set
// when the other end failed) ends it early.
std::string pipeline(bool send, void* comm, size_t n, const std::function<char*(size_t)>& buf,
                     const std::function<size_t(size_t)>& size,
                     const std::function<std::string(size_t, int)>& onDone,
                     const std::atomic<bool>& stop) {
  std::deque<std::pair<size_t, void*>> inFlight;
  size_t next = 0;
  int64_t deadline = nowMs() + kTimeoutMs;
  while (next < n || !inFlight.empty()) {
    if (stop.load()) return "stopped: the other end failed";
    if (nowMs() > deadline) return "timed out at message " + std::to_string(next);
    if (next < n && inFlight.size() < kDepth) {
      void* req = nullptr;
      void* data = buf(next);
      size_t sz = size(next);
      int tag = 0;
      void* mh = nullptr;
      ncclResult_t rc = send ? net()->isend(comm, data, sz, 0, nullptr, nullptr, &req)
                             : net()->irecv(comm, 1, &data, &sz, &tag, &mh, nullptr, &req);
      if (rc != ncclSuccess) return "post of message " + std::to_string(next) + ": error " + std::to_string(rc);
      if (req) {
        inFlight.emplace_back(next++, req);
        continue;
      }
    }
    if (inFlight.empty()) continue;
    int done = 0, got = -1;
    ncclResult_t rc = net()->test(inFlight.front().second, &done, &got);
    if (rc != ncclSuccess) {
      return "test of message " + std::to_string(inFlight.front().first) + ": error " + std::to_string(rc);
    }
    if (!done) {
      std::this_thread::yield();
      continue;
    }
    std::string err = onDone(inFlight.front().first, got);
    if (!err.empty()) return err;
    inFlight.pop_front();
  }
  return "";
}

struct Transfer {
  std::string sendErr, recvErr;
  int received = 0;
};

// Send mixedSizes() from p.send to p.recv; inject(i) runs after message i arrived.
Transfer transfer(Pair& p, const std::function<void(size_t)>& inject) {
  std::vector<size_t> sizes = mixedSizes();
  std::vector<std::vector<char>> out;
  for (size_t i = 0; i < sizes.size(); ++i) out.push_back(pattern(sizes[i], static_cast<int>(i)));
  std::vector<std::vector<char>> in(kDepth, std::vector<char>((size_t(4) << 20) + 16));
  Transfer t;
  std::atomic<bool> sendFailed{false}, recvFailed{false};
  std::thread sender([&] {
    t.sendErr = pipeline(true, p.send, sizes.size(), [&](size_t i) { return out[i].data(); },
                         [&](size_t i) { return sizes[i]; },
                         [&](size_t i, int got) {
                           return got == static_cast<int>(sizes[i]) ? std::string()
                                                                    : "send " + std::to_string(i) + " reported " + std::to_string(got);
                         },
                         recvFailed);
    sendFailed = !t.sendErr.empty();
  });
  t.recvErr = pipeline(false, p.recv, sizes.size(), [&](size_t i) { return in[i % kDepth].data(); },
                       [&](size_t) { return in[0].size(); },
                       [&](size_t i, int got) -> std::string {
                         if (got != static_cast<int>(sizes[i])) {
                           return "message " + std::to_string(i) + ": " + std::to_string(got) +
                                  " bytes, expected " + std::to_string(sizes[i]);
                         }
                         if (got > 0 && std::memcmp(in[i % kDepth].data(), out[i].data(), got) != 0) {
                           return "message " + std::to_string(i) + ": wrong bytes";
                         }
                         t.received++;
                         inject(i);
                         return "";
                       },
                       sendFailed);
  recvFailed = !t.recvErr.empty();
  sender.join();
  return t;
}

netsocket::Comm* comm(void* c) { return static_cast<netsocket::Comm*>(c); }

// (threads, which end is reset: 0 send / 1 recv, socket: 0 control / 1 data)
class NetSocketRetry : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(NetSocketRetry, ResetMidStreamEveryMessageOnceInOrder) {
  auto [threads, end, sock] = GetParam();
  LoopbackEnv env(std::to_string(threads), "10000");
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  // As NCCL may: the listen comm goes right after accept; resumes still arrive.
  ASSERT_EQ(net()->closeListen(p.listen), ncclSuccess);
  p.listen = nullptr;
  int injected = 0;
  Transfer t = transfer(p, [&](size_t i) {
    // Mid-stream, three times: after an inline, a streamed and a mixed stretch.
    if (i != 2 && i != 9 && i != 17) return;
    comm(end == 0 ? p.send : p.recv)->TEST_injectReset(sock);
    injected++;
  });
  EXPECT_EQ(t.sendErr, "");
  EXPECT_EQ(t.recvErr, "");
  EXPECT_EQ(t.received, static_cast<int>(mixedSizes().size()));
  EXPECT_EQ(injected, 3);
  // The retry path ran (not just TCP riding it out).
  EXPECT_NE(log::lastError().find("broke"), std::string::npos) << log::lastError();
  // And the comms are healthy afterwards, both ways of completing.
  std::vector<char> a = pattern(3 << 20, 99), b(3 << 20);
  std::thread s([&] { EXPECT_EQ(sendWait(p.send, a.data(), a.size(), kTimeoutMs), ncclSuccess); });
  EXPECT_EQ(recvWait(p.recv, b.data(), b.size(), kTimeoutMs), ncclSuccess);
  s.join();
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, NetSocketRetry,
    ::testing::Combine(::testing::Values(0, 2), ::testing::Values(0, 1), ::testing::Values(0, 1)),
    [](const auto& info) {
      return "T" + std::to_string(std::get<0>(info.param)) +
             (std::get<1>(info.param) == 0 ? "_ResetSender" : "_ResetReceiver") +
             (std::get<2>(info.param) == 0 ? "Ctrl" : "Data");
    });

// A receiver that makes no calls (it has what it wanted) still answers a
// resume: the listener's thread has it adopt the new sockets. Here the
// receiver holds the message and has acknowledged it, but the sender's
// control socket breaks before it reads the ack; its send completes only
// through the resume.
TEST(NetSocketRetryIdle, ReceiverWithoutCallsIsResumedByTheListenerThread) {
  LoopbackEnv env("2", "20000");  // helper threads move the data without test()
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  std::vector<char> a = pattern(1 << 20, 1), a2(1 << 20);
  void* req = nullptr;
  ASSERT_EQ(net()->isend(p.send, a.data(), a.size(), 0, nullptr, nullptr, &req), ncclSuccess);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(recvWait(p.recv, a2.data(), a2.size(), kTimeoutMs), ncclSuccess);
  EXPECT_EQ(a, a2);
  // From here the receiver makes no call.
  comm(p.send)->TEST_injectReset(0);
  int64_t t0 = nowMs();
  EXPECT_EQ(waitDone(req, kTimeoutMs, nullptr), ncclSuccess);
  EXPECT_LT(nowMs() - t0, 10000);
  EXPECT_NE(log::lastError().find("reconnected"), std::string::npos) << log::lastError();
  // Both ends go on.
  std::vector<char> b = pattern(100, 2), b2(100);
  std::thread s([&] { EXPECT_EQ(sendWait(p.send, b.data(), b.size(), kTimeoutMs), ncclSuccess); });
  EXPECT_EQ(recvWait(p.recv, b2.data(), b2.size(), kTimeoutMs), ncclSuccess);
  s.join();
  EXPECT_EQ(b, b2);
}

// The mirror case: small sends complete once written (copied aside, acked
// lazily), so the sender's caller may make no more calls; a break that
// loses those bytes is repaired by the resend thread (net_driver.h).
TEST(NetSocketRetryIdle, SenderWithoutCallsResendsItsCompletedMessages) {
  LoopbackEnv env("0", "20000");
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  std::vector<std::vector<char>> out;
  for (int i = 0; i < 3; ++i) {
    out.push_back(pattern(100 + i, 10 + i));
    ASSERT_EQ(sendWait(p.send, out[i].data(), out[i].size(), kTimeoutMs), ncclSuccess) << i;
  }
  // From here the sender makes no call. The receiver's first step resets its
  // control socket before reading: the three messages are lost with it.
  comm(p.recv)->TEST_injectReset(0);
  for (int i = 0; i < 3; ++i) {
    std::vector<char> in(200);
    int got = -1;
    ASSERT_EQ(recvWait(p.recv, in.data(), in.size(), kTimeoutMs, &got), ncclSuccess) << i;
    ASSERT_EQ(got, static_cast<int>(out[i].size()));
    in.resize(got);
    EXPECT_EQ(in, out[i]) << i;
  }
  EXPECT_NE(log::lastError().find("broke"), std::string::npos) << log::lastError();
}

// Retry off: the same reset fails the transfer (today's behaviour), promptly.
TEST(NetSocketRetryOff, ResetFailsTheTransfer) {
  LoopbackEnv env("0", "0");
  for (int sock : {0, 1}) {
    Pair p;
    ASSERT_EQ(connectPair(p), "");
    int64_t t0 = nowMs();
    // The receiver's end: it surely has messages left to move after the 10th
    // (the sender may already have written everything into socket buffers).
    Transfer t = transfer(p, [&](size_t i) {
      if (i == 9) comm(p.recv)->TEST_injectReset(sock);
    });
    EXPECT_TRUE(!t.sendErr.empty() || !t.recvErr.empty()) << "socket " << sock;
    EXPECT_LT(t.received, static_cast<int>(mixedSizes().size()));
    EXPECT_LT(nowMs() - t0, kTimeoutMs / 2);
    EXPECT_EQ(log::lastError().find("broke"), std::string::npos) << log::lastError();
  }
}

// A comm closed on purpose says bye: the peer fails at once, not after the window.
TEST(NetSocketRetryBye, ClosedReceiverFailsSenderAtOnce) {
  LoopbackEnv env(std::nullopt, "20000");
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  char byte = 1, got = 0;
  std::thread r([&] { EXPECT_EQ(recvWait(p.recv, &got, 1, kTimeoutMs), ncclSuccess); });
  EXPECT_EQ(sendWait(p.send, &byte, 1, kTimeoutMs), ncclSuccess);
  r.join();
  EXPECT_EQ(got, byte);
  ASSERT_EQ(net()->closeRecv(p.recv), ncclSuccess);
  p.recv = nullptr;
  std::vector<char> big(8 << 20);
  int64_t t0 = nowMs();
  EXPECT_EQ(sendWait(p.send, big.data(), big.size(), kTimeoutMs), ncclRemoteError);
  EXPECT_LT(nowMs() - t0, 5000);
}

// A receiver's bye follows an ack of what it received: a sender whose send
// was written at post but not tested yet (its copy is taken at test()) does
// not fail it when the bye is read first (by the Driver, woken by the close).
TEST(NetSocketRetryBye, ByeFollowsTheLastAckSoUntestedSendsComplete) {
  LoopbackEnv env(std::nullopt, "20000");
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  char byte = 7, got = 0;
  void* req = nullptr;
  ASSERT_EQ(net()->isend(p.send, &byte, 1, 0, nullptr, nullptr, &req), ncclSuccess);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(recvWait(p.recv, &got, 1, kTimeoutMs), ncclSuccess);
  EXPECT_EQ(got, byte);
  ASSERT_EQ(net()->closeRecv(p.recv), ncclSuccess);
  p.recv = nullptr;
  // Time for the Driver to see the close and read the bye.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int done = 0, size = 0;
  EXPECT_EQ(net()->test(req, &done, &size), ncclSuccess) << log::lastError();
  EXPECT_EQ(done, 1);
}

}  // namespace
}  // namespace ferry::nettest
