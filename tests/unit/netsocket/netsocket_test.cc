// The Socket net through its v11 table: properties, exact bytes over
// IPv4/IPv6 for several thread x socket layouts, 32 requests in flight, and
// a receive buffer too small for the message.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <tuple>

#include "test_net.h"
#include "transports/netsocket/net_comm.h"

namespace ferry::nettest {
namespace {

constexpr int64_t kTimeoutMs = 30000;

TEST(NetSocket, TableAndProperties) {
  Env ifname("NCCL_SOCKET_IFNAME", "lo");
  Env family("NCCL_SOCKET_FAMILY", "AF_INET");
  const ncclNet_v11_t* n = net();
  EXPECT_STREQ(n->name, "Socket");
  void* ctx = nullptr;
  ASSERT_EQ(n->init(&ctx, 42, nullptr, nullptr, nullptr), ncclSuccess);
  ASSERT_NE(ctx, nullptr);
  int ndev = 0;
  ASSERT_EQ(n->devices(&ndev), ncclSuccess);
  ASSERT_EQ(ndev, 1);
  ncclNetProperties_v11_t p;
  ASSERT_EQ(n->getProperties(0, &p), ncclSuccess);
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.pciPath, nullptr);  // loopback is virtual
  EXPECT_EQ(p.guid, 0u);
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(p.speed, 10000);  // lo reports no speed
  EXPECT_EQ(p.maxComms, 65536);
  EXPECT_EQ(p.maxRecvs, 1);
  EXPECT_EQ(p.latency, 0.0f);
  EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_EQ(p.maxP2pBytes, static_cast<size_t>(MAX_NET_SIZE));
  EXPECT_EQ(p.maxCollBytes, static_cast<size_t>(MAX_NET_SIZE));
  EXPECT_EQ(p.maxMultiRequestSize, 1);
  EXPECT_NE(n->getProperties(1, &p), ncclSuccess);
  EXPECT_EQ(n->finalize(ctx), ncclSuccess);
}

TEST(NetSocket, ListenHandleCarriesAddress) {
  Env ifname("NCCL_SOCKET_IFNAME", "lo");
  Env family("NCCL_SOCKET_FAMILY", "AF_INET");
  void* ctx = nullptr;
  ASSERT_EQ(net()->init(&ctx, 1, nullptr, nullptr, nullptr), ncclSuccess);
  char h1[NCCL_NET_HANDLE_MAXSIZE], h2[NCCL_NET_HANDLE_MAXSIZE];
  void *l1 = nullptr, *l2 = nullptr;
  ASSERT_EQ(net()->listen(ctx, 0, h1, &l1), ncclSuccess);
  ASSERT_EQ(net()->listen(ctx, 0, h2, &l2), ncclSuccess);
  EXPECT_NE(std::memcmp(h1, h2, sizeof(h1)), 0);  // different ports and nonces
  // Nobody connects: accept answers "not yet" at once.
  void* rc = reinterpret_cast<void*>(1);
  int64_t t0 = nowMs();
  EXPECT_EQ(net()->accept(l1, &rc, nullptr), ncclSuccess);
  EXPECT_EQ(rc, nullptr);
  EXPECT_LT(nowMs() - t0, 100);
  EXPECT_EQ(net()->closeListen(l1), ncclSuccess);
  EXPECT_EQ(net()->closeListen(l2), ncclSuccess);
  EXPECT_EQ(net()->finalize(ctx), ncclSuccess);
}

TEST(NetSocket, ThreadAndSocketCountsAreClamped) {
  struct Case {
    const char* threads;
    const char* socks;
    int wantThreads, wantSocks;
  } cases[] = {{"1", "1", 1, 1}, {"0", "3", 0, 3}, {"4", "4", 4, 4}, {"20", "1", 16, 1},
               {"-1", "2", 0, 2}, {"0", "-1", 0, 2}, {"3", "-1", 3, 1}, {"16", "8", 16, 4}, {"2", "0", 2, 1}, {"0", "100", 0, 64}};
  for (const Case& c : cases) {
    Env t("NCCL_SOCKET_NTHREADS", c.threads);
    Env s("NCCL_NSOCKS_PERTHREAD", c.socks);
    netsocket::Config cfg = netsocket::readConfig();
    EXPECT_EQ(cfg.nThreads, c.wantThreads) << c.threads << "x" << c.socks;
    EXPECT_EQ(cfg.nSocks, c.wantSocks) << c.threads << "x" << c.socks;
    EXPECT_LE(cfg.nStreams(), netsocket::kMaxStreams);
  }
}

double cpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(NetSocket, IdleHelperThreadsSleep) {
  Env ifname("NCCL_SOCKET_IFNAME", "lo");
  Env family("NCCL_SOCKET_FAMILY", "AF_INET");
  Env nthreads("NCCL_SOCKET_NTHREADS", "4");
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  // A receive waits for a send that never comes: 8 helper threads idle.
  char b;
  void* req = nullptr;
  void* data = &b;
  size_t one = 1;
  int tag = 0;
  void* mh = nullptr;
  ASSERT_EQ(net()->irecv(p.recv, 1, &data, &one, &tag, &mh, nullptr, &req), ncclSuccess);
  double c0 = cpuSeconds();
  usleep(500 * 1000);
  EXPECT_LT(cpuSeconds() - c0, 0.05);  // spinning threads would burn ~1 s here
  int done = 1;
  EXPECT_EQ(net()->test(req, &done, nullptr), ncclSuccess);
  EXPECT_EQ(done, 0);
}

// threads, sockets per thread, family
using Layout = std::tuple<int, int, const char*>;

class NetSocketExchange : public ::testing::TestWithParam<Layout> {};

TEST_P(NetSocketExchange, ExactBytesEverySize) {
  auto [threads, socks, fam] = GetParam();
  if (std::string(fam) == "AF_INET6" && !ipv6LoopbackUsable()) GTEST_SKIP() << "::1 unavailable";
  Env ifname("NCCL_SOCKET_IFNAME", "lo");
  Env family("NCCL_SOCKET_FAMILY", fam);
  Env nthreads("NCCL_SOCKET_NTHREADS", std::to_string(threads));
  Env nsocks("NCCL_NSOCKS_PERTHREAD", std::to_string(socks));
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  // Inline (< 64 KiB) and streamed sizes, whole on one stream (< 1 MiB with
  // the caller moving the data) and split.
  const size_t sizes[] = {0, 1, 4095, 1 << 20, 64u << 20, 65536, 65535, 3 * 65536 + 7, (1 << 20) - 1};
  std::vector<std::vector<char>> out;
  for (size_t i = 0; i < std::size(sizes); ++i) out.push_back(pattern(sizes[i], static_cast<int>(i)));
  ncclResult_t sendRc = ncclSuccess;
  std::thread sender([&] {
    for (size_t i = 0; i < std::size(sizes) && sendRc == ncclSuccess; ++i) {
      int got = -1;
      sendRc = sendWait(p.send, out[i].data(), sizes[i], kTimeoutMs, &got);
      if (sendRc == ncclSuccess && got != static_cast<int>(sizes[i])) sendRc = ncclInternalError;
    }
  });
  for (size_t i = 0; i < std::size(sizes); ++i) {
    // One spare byte: a receive may be larger than the send.
    std::vector<char> in(sizes[i] + 1, 0x5a);
    int got = -1;
    ASSERT_EQ(recvWait(p.recv, in.data(), in.size(), kTimeoutMs, &got), ncclSuccess) << sizes[i];
    EXPECT_EQ(got, static_cast<int>(sizes[i]));
    // memcmp's pointers must be valid even for 0 bytes (out[i] is empty then).
    if (sizes[i]) {
      EXPECT_EQ(std::memcmp(in.data(), out[i].data(), sizes[i]), 0) << "size " << sizes[i];
    }
    EXPECT_EQ(in[sizes[i]], 0x5a);  // nothing written past the message
  }
  sender.join();
  EXPECT_EQ(sendRc, ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, NetSocketExchange,
    ::testing::Values(Layout{0, 1, "AF_INET"}, Layout{1, 1, "AF_INET"}, Layout{2, 2, "AF_INET"},
                      Layout{4, 4, "AF_INET"}, Layout{1, 1, "AF_INET6"}, Layout{2, 2, "AF_INET6"}),
    [](const auto& info) {
      return "T" + std::to_string(std::get<0>(info.param)) + "xS" +
             std::to_string(std::get<1>(info.param)) +
             (std::string(std::get<2>(info.param)) == "AF_INET6" ? "_v6" : "_v4");
    });

class NetSocketInFlight : public ::testing::TestWithParam<int> {};

TEST_P(NetSocketInFlight, ThirtyTwoRequestsInPostingOrder) {
  Env ifname("NCCL_SOCKET_IFNAME", "lo");
  Env family("NCCL_SOCKET_FAMILY", "AF_INET");
  Env nthreads("NCCL_SOCKET_NTHREADS", std::to_string(GetParam()));
  Env nsocks("NCCL_NSOCKS_PERTHREAD", "2");
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  constexpr int kN = NCCL_NET_MAX_REQUESTS;
  std::vector<std::vector<char>> out, in;
  std::vector<size_t> size;
  void* sreq[kN];
  void* rreq[kN];
  for (int i = 0; i < kN; ++i) {
    size.push_back(i % 3 == 0 ? (size_t(i) << 16) + i : size_t(i) * 97);  // inline and streamed
    out.push_back(pattern(size[i], 100 + i));
    in.emplace_back(size[i] + 16, 0);
  }
  int tag = 0;
  void* mh = nullptr;
  for (int i = 0; i < kN; ++i) {
    void* data = in[i].data();
    size_t cap = in[i].size();
    ASSERT_EQ(net()->irecv(p.recv, 1, &data, &cap, &tag, &mh, nullptr, &rreq[i]), ncclSuccess);
    ASSERT_NE(rreq[i], nullptr) << i;
  }
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(net()->isend(p.send, out[i].data(), size[i], 0, nullptr, nullptr, &sreq[i]), ncclSuccess);
    ASSERT_NE(sreq[i], nullptr) << i;
  }
  // A 33rd request on either side must be refused, not queued.
  void* extra = reinterpret_cast<void*>(1);
  char byte = 0;
  EXPECT_EQ(net()->isend(p.send, &byte, 1, 0, nullptr, nullptr, &extra), ncclSuccess);
  EXPECT_EQ(extra, nullptr);
  void* data = &byte;
  size_t one = 1;
  extra = reinterpret_cast<void*>(1);
  EXPECT_EQ(net()->irecv(p.recv, 1, &data, &one, &tag, &mh, nullptr, &extra), ncclSuccess);
  EXPECT_EQ(extra, nullptr);
  // The sender's own thread keeps its comm moving (needed with 0 threads).
  std::vector<int> sent(kN, -1);
  std::thread sender([&] {
    for (int i = 0; i < kN; ++i) {
      if (waitDone(sreq[i], kTimeoutMs, &sent[i]) != ncclSuccess) break;
    }
  });
  // Complete receives newest first: test() must move every older request too.
  for (int i = kN - 1; i >= 0; --i) {
    int got = -1;
    EXPECT_EQ(waitDone(rreq[i], kTimeoutMs, &got), ncclSuccess) << i;
    EXPECT_EQ(got, static_cast<int>(size[i]));
    if (size[i]) {
      EXPECT_EQ(std::memcmp(in[i].data(), out[i].data(), size[i]), 0) << i;
    }
  }
  sender.join();
  for (int i = 0; i < kN; ++i) EXPECT_EQ(sent[i], static_cast<int>(size[i])) << i;
  // Slots are free again. (The receiver in a thread: with FERRY_NET_RETRY_MS
  // a send completes once the receiver has it.)
  char back = 0;
  std::thread receiver([&] { EXPECT_EQ(recvWait(p.recv, &back, 1, kTimeoutMs), ncclSuccess); });
  EXPECT_EQ(sendWait(p.send, &byte, 1, kTimeoutMs), ncclSuccess);
  receiver.join();
  EXPECT_EQ(back, byte);
}

INSTANTIATE_TEST_SUITE_P(Threads, NetSocketInFlight, ::testing::Values(0, 2));

class NetSocketTruncate : public ::testing::TestWithParam<size_t> {};

TEST_P(NetSocketTruncate, ReceiveSmallerThanSendIsAnError) {
  Env ifname("NCCL_SOCKET_IFNAME", "lo");
  Env family("NCCL_SOCKET_FAMILY", "AF_INET");
  size_t sendSize = GetParam();
  // Outlives the pair: the unfinished send reads it until closeSend.
  std::vector<char> out = pattern(sendSize, 7);
  Pair p;
  ASSERT_EQ(connectPair(p), "");
  void* sreq = nullptr;
  ASSERT_EQ(net()->isend(p.send, out.data(), sendSize, 0, nullptr, nullptr, &sreq), ncclSuccess);
  ASSERT_NE(sreq, nullptr);
  std::vector<char> in(sendSize / 2);
  EXPECT_EQ(recvWait(p.recv, in.data(), in.size(), kTimeoutMs), ncclInvalidUsage);
  // The comm stays failed rather than matching later messages wrongly.
  char b;
  EXPECT_NE(recvWait(p.recv, &b, 1, 1000), ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Sizes, NetSocketTruncate, ::testing::Values(size_t(100), size_t(1) << 20));

}  // namespace
}  // namespace ferry::nettest
