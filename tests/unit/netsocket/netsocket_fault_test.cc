// Faults: a connector with the wrong nonce is refused while the right one
// gets through; a peer that closes or is killed mid-transfer is reported as
// ncclRemoteError within seconds, never a hang (with FERRY_NET_RETRY_MS on,
// a receiver whose sender died fails when the retry window ends).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <tuple>

#include "core/log.h"
#include "test_net.h"
#include "transports/netsocket/net_comm.h"

namespace ferry::nettest {
namespace {

constexpr int64_t kTimeoutMs = 30000;

TEST(NetSocketFault, WrongNonceRefusedRightConnectorAccepted) {
  Env ifname("NCCL_SOCKET_IFNAME", "lo");
  Env family("NCCL_SOCKET_FAMILY", "AF_INET");
  Env nthreads("NCCL_SOCKET_NTHREADS", "2");
  Env debug("NCCL_DEBUG", "WARN");
  Pair p;
  ASSERT_EQ(net()->init(&p.ctxSend, 1, nullptr, nullptr, nullptr), ncclSuccess);
  ASSERT_EQ(net()->init(&p.ctxRecv, 2, nullptr, nullptr, nullptr), ncclSuccess);
  ASSERT_EQ(net()->listen(p.ctxRecv, 0, p.handle, &p.listen), ncclSuccess);
  char bad[NCCL_NET_HANDLE_MAXSIZE];
  std::memcpy(bad, p.handle, sizeof(bad));
  reinterpret_cast<netsocket::Handle*>(bad)->nonce ^= 0x1;
  // The impostor finishes its side (TCP accepts it), but accept() must not.
  void* impostor = nullptr;
  int64_t deadline = nowMs() + 10000;
  while (!impostor) {
    ASSERT_EQ(net()->connect(p.ctxSend, 0, bad, &impostor, nullptr), ncclSuccess);
    ASSERT_EQ(net()->accept(p.listen, &p.recv, nullptr), ncclSuccess);
    ASSERT_EQ(p.recv, nullptr);
    ASSERT_LT(nowMs(), deadline);
  }
  for (int i = 0; i < 50; ++i) {  // let the listener read and refuse the hellos
    ASSERT_EQ(net()->accept(p.listen, &p.recv, nullptr), ncclSuccess);
    ASSERT_EQ(p.recv, nullptr);
    usleep(2000);
  }
  EXPECT_NE(log::lastError().find("wrong nonce"), std::string::npos) << log::lastError();
  while (!p.send || !p.recv) {
    if (!p.send) {
      ASSERT_EQ(net()->connect(p.ctxSend, 0, p.handle, &p.send, nullptr), ncclSuccess);
    }
    if (!p.recv) {
      ASSERT_EQ(net()->accept(p.listen, &p.recv, nullptr), ncclSuccess);
    }
    ASSERT_LT(nowMs(), deadline);
  }
  std::vector<char> out = pattern(3 << 20, 1), in(3 << 20);
  std::thread s([&] { EXPECT_EQ(sendWait(p.send, out.data(), out.size(), kTimeoutMs), ncclSuccess); });
  int got = -1;
  EXPECT_EQ(recvWait(p.recv, in.data(), in.size(), kTimeoutMs, &got), ncclSuccess);
  s.join();
  EXPECT_EQ(got, 3 << 20);
  EXPECT_EQ(in, out);
  // The listener closed the impostor's sockets: its sends fail as a remote
  // error. With retry on (the default) it tries to resume first, and the
  // listener, polled by accept(), refuses that for good.
  std::atomic<bool> stop{false};
  std::thread listener([&] {
    while (!stop) {
      void* none = nullptr;
      EXPECT_EQ(net()->accept(p.listen, &none, nullptr), ncclSuccess);
      EXPECT_EQ(none, nullptr);
      usleep(2000);
    }
  });
  std::vector<char> big(16 << 20);
  int64_t t0 = nowMs();
  EXPECT_EQ(sendWait(impostor, big.data(), big.size(), 5000), ncclRemoteError);
  EXPECT_LT(nowMs() - t0, 2000);
  stop = true;
  listener.join();
  EXPECT_EQ(net()->closeSend(impostor), ncclSuccess);
}

TEST(NetSocketFault, PeerClosesWhileReceivePending) {
  Env ifname("NCCL_SOCKET_IFNAME", "lo");
  Env family("NCCL_SOCKET_FAMILY", "AF_INET");
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  std::vector<char> in(1 << 20);
  void* req = nullptr;
  void* data = in.data();
  size_t cap = in.size();
  int tag = 0;
  void* mh = nullptr;
  ASSERT_EQ(net()->irecv(p.recv, 1, &data, &cap, &tag, &mh, nullptr, &req), ncclSuccess);
  ASSERT_EQ(net()->closeSend(p.send), ncclSuccess);
  p.send = nullptr;
  int64_t t0 = nowMs();
  EXPECT_EQ(waitDone(req, 5000, nullptr), ncclRemoteError);
  EXPECT_LT(nowMs() - t0, 2000);
}

// Child: the far end of a connection; killed by the parent mid-transfer.
// The child sends: it reads the parent's handle from `downFd` and connects.
// The child receives: it listens and writes its handle to `upFd`. (Forked
// before the parent listens: a listener may start a thread, and sanitizer
// runtimes do not survive a fork beside one; tests/sanitize finding 10.)
[[noreturn]] void childMain(bool childSends, int upFd, int downFd) {
  alarm(60);  // watchdog: never outlive a broken parent
  void* ctx = nullptr;
  if (net()->init(&ctx, 3, nullptr, nullptr, nullptr) != ncclSuccess) _exit(2);
  std::vector<char> buf(64 << 20, 1);
  void* comm = nullptr;
  if (childSends) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    if (read(downFd, handle, sizeof(handle)) != sizeof(handle)) _exit(8);
    while (!comm) {
      if (net()->connect(ctx, 0, handle, &comm, nullptr) != ncclSuccess) _exit(3);
    }
    void* req = nullptr;
    while (!req) net()->isend(comm, buf.data(), buf.size(), 0, nullptr, nullptr, &req);
    // Caller-driven (0 threads): a few test() calls move part of the message, then stop.
    int done = 0;
    for (int i = 0; i < 2; ++i) net()->test(req, &done, nullptr);
    if (done) _exit(4);
  } else {
    void* listen = nullptr;
    char h[NCCL_NET_HANDLE_MAXSIZE];
    if (net()->listen(ctx, 0, h, &listen) != ncclSuccess) _exit(5);
    if (write(upFd, h, sizeof(h)) != sizeof(h)) _exit(6);
    while (!comm) {
      if (net()->accept(listen, &comm, nullptr) != ncclSuccess) _exit(7);
    }
    // Never receives: the parent's send stalls on full socket buffers.
  }
  pause();
  _exit(0);
}

// (child sends, FERRY_NET_RETRY_MS)
class NetSocketKill : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(NetSocketKill, PeerKilledMidTransferIsRemoteError) {
  auto [childSends, retryMs] = GetParam();
  Env retry("FERRY_NET_RETRY_MS", std::to_string(retryMs));
  Env ifname("NCCL_SOCKET_IFNAME", "lo");
  Env family("NCCL_SOCKET_FAMILY", "AF_INET");
  // The child moves data only in its own test() calls, so it stops mid-message.
  Env nthreads("NCCL_SOCKET_NTHREADS", childSends ? "0" : "1");
  Env debug("NCCL_DEBUG", "WARN");
  void* ctx = nullptr;
  ASSERT_EQ(net()->init(&ctx, 4, nullptr, nullptr, nullptr), ncclSuccess);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  int fds[2], down[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(pipe(down), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) childMain(childSends, fds[1], down[0]);
  close(fds[1]);
  close(down[0]);
  if (childSends) {
    ASSERT_EQ(net()->listen(ctx, 0, handle, &listen), ncclSuccess);
    ASSERT_EQ(write(down[1], handle, sizeof(handle)), (ssize_t)sizeof(handle));
  }
  close(down[1]);
  // Watchdog: whatever happens below, the child dies within 30 s.
  std::atomic<bool> finished{false};
  std::thread dog([&] {
    for (int i = 0; i < 3000 && !finished; ++i) usleep(10000);
    kill(pid, SIGKILL);
  });
  void* comm = nullptr;
  int64_t deadline = nowMs() + 10000;
  if (childSends) {
    while (!comm && nowMs() < deadline) {
      ASSERT_EQ(net()->accept(listen, &comm, nullptr), ncclSuccess);
    }
  } else {
    pollfd pf{fds[0], POLLIN, 0};
    ASSERT_EQ(poll(&pf, 1, 10000), 1);
    ASSERT_EQ(read(fds[0], handle, sizeof(handle)), (ssize_t)sizeof(handle));
    while (!comm && nowMs() < deadline) {
      ASSERT_EQ(net()->connect(ctx, 0, handle, &comm, nullptr), ncclSuccess);
    }
  }
  ASSERT_NE(comm, nullptr);
  std::vector<char> buf(64 << 20);
  void* req = nullptr;
  int tag = 0;
  void* mh = nullptr;
  void* data = buf.data();
  size_t cap = buf.size();
  while (!req && nowMs() < deadline) {
    ncclResult_t rc = childSends ? net()->irecv(comm, 1, &data, &cap, &tag, &mh, nullptr, &req)
                                 : net()->isend(comm, data, cap, 0, nullptr, nullptr, &req);
    ASSERT_EQ(rc, ncclSuccess);
  }
  ASSERT_NE(req, nullptr);
  // Stalled mid-message: not done after a while.
  EXPECT_EQ(waitDone(req, 300, nullptr), ncclInProgress);
  kill(pid, SIGKILL);
  int64_t t0 = nowMs();
  EXPECT_EQ(waitDone(req, 10000, nullptr), ncclRemoteError);
  // Both learn at once, well inside the retry window: a sender because its
  // reconnect is refused (nobody listens any more), a receiver because the
  // sending process's sentinel port refuses its probe (net_alive.h).
  EXPECT_LT(nowMs() - t0, 1000);
  if (childSends && retryMs > 0) {
    EXPECT_NE(log::lastError().find("the sending process is gone"), std::string::npos)
        << log::lastError();
  }
  // The WARN names the peer.
  EXPECT_NE(log::lastError().find("127.0.0.1<"), std::string::npos) << log::lastError();
  finished = true;
  dog.join();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child exit " << status;
  close(fds[0]);
  int64_t c0 = nowMs();
  EXPECT_EQ(childSends ? net()->closeRecv(comm) : net()->closeSend(comm), ncclSuccess);
  EXPECT_LT(nowMs() - c0, 1000);  // helper threads joined promptly
  if (listen) {
    EXPECT_EQ(net()->closeListen(listen), ncclSuccess);
  }
  EXPECT_EQ(net()->finalize(ctx), ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Direction, NetSocketKill,
                         ::testing::Combine(::testing::Values(false, true), ::testing::Values(0, 1500)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "ChildSends" : "ChildReceives") +
                                  (std::get<1>(info.param) ? "_Retry" : "_NoRetry");
                         });

}  // namespace
}  // namespace ferry::nettest
