// The UCX network through its ncclNet_v11_t table: two processes (forked,
// watchdog) and two threads, over UCX's default choice, tcp and shared memory.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>

#include "tests/unit/netucx/net_harness.h"

#ifndef FERRY_HAVE_UCX
TEST(NetUcx, NotBuilt) { GTEST_SKIP() << "Ferry was built without UCX"; }
#else
#include "transports/netucx/ucx_net.h"

namespace {

using namespace ferrytest;

constexpr size_t kMiB = 1 << 20;
const std::vector<size_t> kSizes = {0, 1, 4095, kMiB, 64 * kMiB};

Pair transferPair(const std::string& tls, std::vector<size_t> sizes, int window, int seed) {
  Pair p;
  p.getNet = [] { return ferry::ucxNet(); };
  if (!tls.empty()) p.env.push_back({"UCX_TLS", tls});
  p.recvBody = [=](const ncclNet_v11_t* net, void* c) { return recvAll(net, c, sizes, window, seed); };
  p.sendBody = [=](const ncclNet_v11_t* net, void* c) { return sendAll(net, c, sizes, window, seed); };
  return p;
}

// Many messages of assorted sizes (zero, eager, rendezvous), in order.
std::vector<size_t> mixedSizes(int n) {
  std::vector<size_t> s;
  for (int i = 0; i < n; i++) s.push_back(i % 7 == 0 ? 0 : (static_cast<size_t>(i) * 40009) % (300 * 1024));
  return s;
}

TEST(NetUcx, DeviceProperties) {
  const ncclNet_v11_t* net = ferry::ucxNet();
  ASSERT_STREQ(net->name, "UCX");
  int ndev = 0;
  ASSERT_EQ(net->devices(&ndev), ncclSuccess);
  ASSERT_GE(ndev, 1);
  for (int d = 0; d < ndev; d++) {
    ncclNetProperties_v11_t p{};
    ASSERT_EQ(net->getProperties(d, &p), ncclSuccess);
    ASSERT_NE(p.name, nullptr);
    std::string link = std::string("/sys/class/net/") + p.name + "/device";
    char real[PATH_MAX];
    if (realpath(link.c_str(), real)) {
      ASSERT_NE(p.pciPath, nullptr) << p.name;
      EXPECT_STREQ(p.pciPath, real);
    } else {
      EXPECT_EQ(p.pciPath, nullptr) << p.name;
    }
    EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
    EXPECT_EQ(p.maxRecvs, 1);
    EXPECT_EQ(p.maxP2pBytes, static_cast<size_t>(MAX_NET_SIZE));
    EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
    EXPECT_EQ(p.vProps.ndevs, 1);
    EXPECT_EQ(p.vProps.devs[0], d);
    EXPECT_GT(p.speed, 0);
  }
  ncclNetProperties_v11_t p{};
  EXPECT_EQ(net->getProperties(ndev, &p), ncclInvalidArgument);
}

// libucs installs SIGSEGV/SIGBUS handlers as it loads: UCX must stay
// unloaded until the network is actually initialized (in a fresh child).
TEST(NetUcx, UcxLoadedOnlyByInit) {
  if (dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD)) {
    GTEST_SKIP() << "an earlier test in this process loaded UCX (run it alone, as ctest does)";
  }
  pid_t pid = forkChild([] {
    const ncclNet_v11_t* net = ferry::ucxNet();
    int ndev = 0;
    if (net->devices(&ndev) != ncclSuccess || ndev < 1) return 2;
    if (dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD)) return 3;
    if (dlopen("libucs.so.0", RTLD_NOW | RTLD_NOLOAD)) return 4;
    void* ctx = nullptr;
    ncclNetCommConfig_v11_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    if (net->init(&ctx, 1, &cfg, nullptr, nullptr) != ncclSuccess) return 5;
    if (!dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD)) return 6;
    return net->finalize(ctx) == ncclSuccess ? 0 : 7;
  });
  std::vector<int> codes = waitChildren({pid}, 30000);
  EXPECT_EQ(codes[0], 0);
}

class NetUcxTls : public ::testing::TestWithParam<std::string> {};

TEST_P(NetUcxTls, ProcessesExactBytes) {
  PairResult r = runProcesses(transferPair(GetParam(), kSizes, 1, 3));
  EXPECT_EQ(r.recv, "");
  EXPECT_EQ(r.send, "");
  EXPECT_EQ(r.recvCode, 0);
  EXPECT_EQ(r.sendCode, 0);
}

TEST_P(NetUcxTls, Processes32InFlight) {
  PairResult r = runProcesses(transferPair(GetParam(), mixedSizes(300), 32, 5));
  EXPECT_EQ(r.recv, "");
  EXPECT_EQ(r.send, "");
  EXPECT_EQ(r.recvCode, 0);
  EXPECT_EQ(r.sendCode, 0);
}

TEST_P(NetUcxTls, ThreadsExactBytes) {
  PairResult r = runThreads(transferPair(GetParam(), kSizes, 1, 7));
  EXPECT_EQ(r.recv, "");
  EXPECT_EQ(r.send, "");
}

TEST_P(NetUcxTls, Threads32InFlight) {
  PairResult r = runThreads(transferPair(GetParam(), mixedSizes(300), 32, 9));
  EXPECT_EQ(r.recv, "");
  EXPECT_EQ(r.send, "");
}

// The sender dies with receives outstanding: the receiver reports
// ncclRemoteError within a few seconds, never hangs.
TEST_P(NetUcxTls, SenderKilledGivesRemoteError) {
  Pair p;
  p.getNet = [] { return ferry::ucxNet(); };
  if (!GetParam().empty()) p.env.push_back({"UCX_TLS", GetParam()});
  p.sendBody = [](const ncclNet_v11_t* net, void* c) -> std::string {
    std::string e = sendAll(net, c, {4096}, 1, 1);
    if (!e.empty()) return e;
    std::vector<uint8_t> big(64 * kMiB, 1);
    void* mh = nullptr;
    void* req = nullptr;
    net->regMr(c, big.data(), big.size(), NCCL_PTR_HOST, &mh);
    net->isend(c, big.data(), big.size(), 0, mh, nullptr, &req);
    int done = 0, size = 0;
    if (req) net->test(req, &done, &size);
    raise(SIGKILL);  // mid-transfer
    return "survived SIGKILL";
  };
  p.recvBody = [](const ncclNet_v11_t* net, void* c) -> std::string {
    std::string e = recvAll(net, c, {4096}, 1, 1);
    if (!e.empty()) return "first message: " + e;
    std::vector<uint8_t> buf(64 * kMiB);
    void* mh = nullptr;
    net->regMr(c, buf.data(), buf.size(), NCCL_PTR_HOST, &mh);
    int64_t start = msNow();
    // The 64 MiB message may or may not have been pulled before the sender
    // died; the one after it can never come.
    for (int m = 0; m < 2; m++) {
      void* data = buf.data();
      size_t size = buf.size();
      int tag = 0;
      void* req = nullptr;
      ncclResult_t r = net->irecv(c, 1, &data, &size, &tag, &mh, nullptr, &req);
      if (r != ncclSuccess || !req) return err("irecv", r);
      ncclResult_t failure = ncclSuccess;
      int got = 0;
      e = waitRequest(net, req, &got, &failure);
      if (failure == ncclRemoteError) {
        int64_t took = msNow() - start;
        return took < 5000 ? "" : "remote error only after " + std::to_string(took) + " ms";
      }
      if (!e.empty()) return e;
    }
    return "no error although the sender died";
  };
  PairResult r = runProcesses(p);
  EXPECT_EQ(r.recv, "");
  EXPECT_EQ(r.recvCode, 0);
  EXPECT_EQ(r.sendCode, 128 + SIGKILL);
}

// The receiver dies while a send waits for it: the sender gets ncclRemoteError.
TEST_P(NetUcxTls, ReceiverKilledGivesRemoteError) {
  Pair p;
  p.getNet = [] { return ferry::ucxNet(); };
  if (!GetParam().empty()) p.env.push_back({"UCX_TLS", GetParam()});
  p.recvBody = [](const ncclNet_v11_t* net, void* c) -> std::string {
    std::string e = recvAll(net, c, {4096}, 1, 1);
    if (!e.empty()) return e;
    raise(SIGKILL);
    return "survived SIGKILL";
  };
  p.sendBody = [](const ncclNet_v11_t* net, void* c) -> std::string {
    std::string e = sendAll(net, c, {4096}, 1, 1);
    if (!e.empty()) return "first message: " + e;
    std::vector<uint8_t> big(64 * kMiB, 1);
    void* mh = nullptr;
    net->regMr(c, big.data(), big.size(), NCCL_PTR_HOST, &mh);
    int64_t start = msNow();
    void* req = nullptr;
    while (!req) {
      ncclResult_t r = net->isend(c, big.data(), big.size(), 0, mh, nullptr, &req);
      if (r == ncclRemoteError) break;
      if (r != ncclSuccess) return err("isend", r);
      if (msNow() - start > 10000) return "isend never accepted";
    }
    ncclResult_t failure = ncclRemoteError;
    int got = 0;
    if (req) e = waitRequest(net, req, &got, &failure);
    if (failure != ncclRemoteError) return "no remote error: " + e;
    int64_t took = msNow() - start;
    return took < 5000 ? "" : "remote error only after " + std::to_string(took) + " ms";
  };
  PairResult r = runProcesses(p);
  EXPECT_EQ(r.send, "");
  EXPECT_EQ(r.sendCode, 0);
  EXPECT_EQ(r.recvCode, 128 + SIGKILL);
}

// "" = UCX's own choice (no UCX_TLS); "sm" and "posix,cma" = shared memory.
INSTANTIATE_TEST_SUITE_P(Tls, NetUcxTls, ::testing::Values("", "tcp", "sm", "posix,cma"),
                         [](const auto& info) {
                           std::string n = info.param.empty() ? "default" : info.param;
                           for (char& ch : n) if (ch == ',') ch = '_';
                           return n;
                         });

// With 32 sends posted and none tested, a 33rd isend is refused (NULL request)
// rather than failing, and all 32 then complete in order.
TEST(NetUcx, ThirtyThirdSendIsDeferred) {
  Pair p;
  p.getNet = [] { return ferry::ucxNet(); };
  std::vector<size_t> sizes(32, 1000);
  p.recvBody = [=](const ncclNet_v11_t* net, void* c) { return recvAll(net, c, sizes, 32, 11); };
  p.sendBody = [](const ncclNet_v11_t* net, void* c) -> std::string {
    std::vector<std::vector<uint8_t>> bufs(33, std::vector<uint8_t>(1000));
    std::vector<void*> reqs;
    void* mh = nullptr;
    net->regMr(c, bufs[0].data(), 1000, NCCL_PTR_HOST, &mh);
    for (int m = 0; m < 33; m++) {
      for (size_t i = 0; i < 1000; i++) bufs[m][i] = patternByte(i, m, 11);
      void* req = nullptr;
      ncclResult_t r = net->isend(c, bufs[m].data(), 1000, 0, mh, nullptr, &req);
      if (r != ncclSuccess) return err("isend", r);
      if (m < 32 && !req) return "isend " + std::to_string(m) + " refused";
      if (m == 32 && req) return "a 33rd request was accepted";
      if (req) reqs.push_back(req);
    }
    for (void* req : reqs) {
      int size = 0;
      std::string e = waitRequest(net, req, &size);
      if (!e.empty()) return e;
    }
    return std::string();
  };
  PairResult r = runProcesses(p);
  EXPECT_EQ(r.recv, "");
  EXPECT_EQ(r.send, "");
}

// Ferry's net connection pre-posts receives and closes with some still
// posted: closeRecv cancels them promptly.
TEST(NetUcx, CloseWithReceivesStillPosted) {
  Pair p;
  p.getNet = [] { return ferry::ucxNet(); };
  p.sendBody = [](const ncclNet_v11_t* net, void* c) { return sendAll(net, c, {100, 200}, 2, 4); };
  p.recvBody = [](const ncclNet_v11_t* net, void* c) -> std::string {
    std::string e = recvAll(net, c, {100, 200}, 2, 4);
    if (!e.empty()) return e;
    std::vector<uint8_t> buf(4096);
    void* mh = nullptr;
    net->regMr(c, buf.data(), buf.size(), NCCL_PTR_HOST, &mh);
    for (int i = 0; i < 4; i++) {
      void* data = buf.data();
      size_t size = buf.size();
      int tag = 0;
      void* req = nullptr;
      if (net->irecv(c, 1, &data, &size, &tag, &mh, nullptr, &req) != ncclSuccess || !req)
        return "extra irecv refused";
    }
    int64_t t0 = msNow();
    if (net->closeRecv(c) != ncclSuccess) return "closeRecv failed";
    if (msNow() - t0 > 1000) return "closeRecv took " + std::to_string(msNow() - t0) + " ms";
    return "closed";  // the harness must not close it again
  };
  PairResult r = runProcesses(p);
  EXPECT_EQ(r.recv, "closed");
  EXPECT_EQ(r.send, "");
}

// A message larger than the posted buffer is an error, not a silent cut.
TEST(NetUcx, TruncationIsAnError) {
  Pair p;
  p.getNet = [] { return ferry::ucxNet(); };
  p.sendBody = [](const ncclNet_v11_t* net, void* c) -> std::string {
    std::vector<uint8_t> buf(1000, 7);
    void* mh = nullptr;
    void* req = nullptr;
    net->regMr(c, buf.data(), buf.size(), NCCL_PTR_HOST, &mh);
    if (net->isend(c, buf.data(), buf.size(), 0, mh, nullptr, &req) != ncclSuccess || !req)
      return "isend refused";
    int size = 0;
    waitRequest(net, req, &size);  // either outcome is fine for the sender
    return "";
  };
  p.recvBody = [](const ncclNet_v11_t* net, void* c) -> std::string {
    std::vector<uint8_t> buf(100);
    void* mh = nullptr;
    net->regMr(c, buf.data(), buf.size(), NCCL_PTR_HOST, &mh);
    void* data = buf.data();
    size_t size = buf.size();
    int tag = 0;
    void* req = nullptr;
    if (net->irecv(c, 1, &data, &size, &tag, &mh, nullptr, &req) != ncclSuccess || !req)
      return "irecv refused";
    ncclResult_t failure = ncclSuccess;
    int got = 0;
    std::string e = waitRequest(net, req, &got, &failure);
    return failure == ncclInvalidUsage ? "" : "expected ncclInvalidUsage, got: " + e;
  };
  PairResult r = runProcesses(p);
  EXPECT_EQ(r.recv, "");
}

// Every device the network lists can carry a connection.
TEST(NetUcx, ThreadsOnEveryDevice) {
  int ndev = 0;
  ASSERT_EQ(ferry::ucxNet()->devices(&ndev), ncclSuccess);
  for (int d = 0; d < ndev; d++) {
    Pair p = transferPair("", {0, 5000, 300000}, 2, d);
    p.dev = d;
    PairResult r = runThreads(p);
    EXPECT_EQ(r.recv, "") << "device " << d;
    EXPECT_EQ(r.send, "") << "device " << d;
  }
}

}  // namespace
#endif
