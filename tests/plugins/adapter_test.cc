// The v11 view of the v8 and v6 test plugins (libnccl-net-ferrytest*.so):
// exact bytes through listen/connect/accept/isend/irecv/test between two
// threads, property conversion, process-global init, and the int-size limit
// of old versions.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/plugins/plugin_test_util.h"

namespace ferry::netplugin::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(60);  // watchdog for every retry loop
constexpr size_t k4M = 4u << 20;
constexpr size_t kGuard = 16;  // receive buffers are this much larger than the message

// Retry `step` until it sets done, fails, or the deadline passes.
template <class Step>
ncclResult_t retry(Step step) {
  auto end = Clock::now() + kDeadline;
  for (;;) {
    bool done = false;
    ncclResult_t r = step(done);
    if (r != ncclSuccess || done) return r;
    if (Clock::now() > end) return ncclRemoteError;
    std::this_thread::yield();
  }
}

// Return a failing ncclResult_t from the enclosing function (or lambda).
#define FERRY_TRY_NCCL(call)                   \
  do {                                         \
    ncclResult_t _r = (call);                  \
    if (_r != ncclSuccess) return _r;          \
  } while (0)

uint8_t pattern(size_t msg, size_t at) { return static_cast<uint8_t>(msg * 131 + at * 7 + 1); }

class AdapterTest : public PluginTest {
 protected:
  // Load one test plugin and init its v11 view.
  const ncclNet_v11_t* load(const char* name, int version) {
    usePlugins(name);
    const auto& nets = externalNets();
    if (nets.size() != 1 || nets[0].version != version) return nullptr;
    const ncclNet_v11_t* net = nets[0].net;
    ncclNetCommConfig_v11_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
    if (net->init(&ctx_, 0x1234, &config, pluginLogger(), nullptr) != ncclSuccess) return nullptr;
    return net;
  }
  void TearDown() override {
    if (net_ && ctx_) {
      EXPECT_EQ(net_->finalize(ctx_), ncclSuccess);
    }
    PluginTest::TearDown();
  }
  // One connection: listen, then alternate nonblocking connect and accept.
  void connectPair(void** sendComm, void** recvComm) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* listenComm = nullptr;
    ASSERT_EQ(net_->listen(ctx_, 0, handle, &listenComm), ncclSuccess);
    ASSERT_NE(listenComm, nullptr);
    *sendComm = *recvComm = nullptr;
    ncclNetDeviceHandle_v11_t* sendDev = nullptr;
    ncclNetDeviceHandle_v11_t* recvDev = nullptr;
    int notYet = 0;
    ncclResult_t r = retry([&](bool& done) {
      if (!*sendComm) FERRY_TRY_NCCL(net_->connect(ctx_, 0, handle, sendComm, &sendDev));
      if (!*recvComm) FERRY_TRY_NCCL(net_->accept(listenComm, recvComm, &recvDev));
      done = *sendComm && *recvComm;
      notYet += !done;
      return ncclSuccess;
    });
    ASSERT_EQ(r, ncclSuccess) << log::lastError();
    EXPECT_GT(notYet, 0);  // the plugin reports "not yet" first, like real ones
    EXPECT_EQ(net_->closeListen(listenComm), ncclSuccess);
  }
  void transfer(const std::vector<size_t>& sizes, size_t window);

  const ncclNet_v11_t* net_ = nullptr;
  void* ctx_ = nullptr;
};

// Post a window of requests (retrying "no request"), then test them all.
template <class Post>
ncclResult_t runWindow(const ncclNet_v11_t* net, size_t n, Post post, std::vector<int>* got) {
  std::vector<void*> reqs(n, nullptr);
  for (size_t i = 0; i < n; i++)
    FERRY_TRY_NCCL(retry([&](bool& done) {
      FERRY_TRY_NCCL(post(i, &reqs[i]));
      done = reqs[i] != nullptr;
      return ncclSuccess;
    }));
  for (size_t i = 0; i < n; i++)
    FERRY_TRY_NCCL(retry([&](bool& done) {
      int d = 0;
      FERRY_TRY_NCCL(net->test(reqs[i], &d, &(*got)[i]));
      done = d != 0;
      return ncclSuccess;
    }));
  return ncclSuccess;
}

void AdapterTest::transfer(const std::vector<size_t>& sizes, size_t window) {
  void* sc = nullptr;
  void* rc = nullptr;
  connectPair(&sc, &rc);
  ASSERT_TRUE(sc && rc);
  const size_t n = sizes.size();
  std::vector<std::vector<uint8_t>> out(n), in(n);
  for (size_t i = 0; i < n; i++) {
    out[i].resize(sizes[i]);
    for (size_t j = 0; j < sizes[i]; j++) out[i][j] = pattern(i, j);
    in[i].assign(sizes[i] + kGuard, 0xEE);
  }
  void* smh = nullptr;
  void* rmh = nullptr;
  ASSERT_EQ(net_->regMr(sc, out[0].data(), out[0].size(), NCCL_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(net_->regMr(rc, in[0].data(), in[0].size(), NCCL_PTR_HOST, &rmh), ncclSuccess);

  std::vector<int> sentSizes(n, -1), recvSizes(n, -1);
  ncclResult_t sendResult = ncclInternalError;
  std::thread sender([&] {
    for (size_t base = 0; base < n; base += window) {
      size_t cnt = std::min(window, n - base);
      std::vector<int> got(cnt, -1);
      sendResult = runWindow(net_, cnt, [&](size_t i, void** req) {
        size_t m = base + i;
        return net_->isend(sc, out[m].data(), out[m].size(), 0, smh, nullptr, req);
      }, &got);
      std::copy(got.begin(), got.end(), sentSizes.begin() + base);
      if (sendResult != ncclSuccess) return;
    }
  });
  ncclResult_t recvResult = ncclSuccess;
  for (size_t base = 0; base < n && recvResult == ncclSuccess; base += window) {
    size_t cnt = std::min(window, n - base);
    std::vector<int> got(cnt, -1);
    recvResult = runWindow(net_, cnt, [&](size_t i, void** req) {
      size_t m = base + i;
      void* data = in[m].data();
      size_t size = in[m].size();
      int tag = 0;
      return net_->irecv(rc, 1, &data, &size, &tag, &rmh, nullptr, req);
    }, &got);
    std::copy(got.begin(), got.end(), recvSizes.begin() + base);
  }
  sender.join();
  ASSERT_EQ(sendResult, ncclSuccess) << log::lastError();
  ASSERT_EQ(recvResult, ncclSuccess) << log::lastError();
  for (size_t i = 0; i < n; i++) {
    SCOPED_TRACE("message " + std::to_string(i) + " of " + std::to_string(sizes[i]) + " bytes");
    EXPECT_EQ(sentSizes[i], static_cast<int>(sizes[i]));
    EXPECT_EQ(recvSizes[i], static_cast<int>(sizes[i]));
    EXPECT_TRUE(std::equal(out[i].begin(), out[i].end(), in[i].begin()));
    EXPECT_TRUE(std::all_of(in[i].begin() + sizes[i], in[i].end(), [](uint8_t b) { return b == 0xEE; }));
  }
  EXPECT_EQ(net_->deregMr(sc, smh), ncclSuccess);
  EXPECT_EQ(net_->deregMr(rc, rmh), ncclSuccess);
  EXPECT_EQ(net_->closeSend(sc), ncclSuccess);
  EXPECT_EQ(net_->closeRecv(rc), ncclSuccess);
}

const std::vector<size_t> kSizes = {0, 1, 7, 4096, 65537, k4M, 0, 3};

std::vector<size_t> inFlight32() {
  std::vector<size_t> s(32);
  for (size_t i = 0; i < s.size(); i++) s[i] = i == 5 ? k4M : (i % 3 == 0 ? 0 : i * 1031);
  return s;
}

TEST_F(AdapterTest, V8MovesExactBytes) {
  net_ = load("ferrytest", 8);
  ASSERT_NE(net_, nullptr) << logText();
  transfer(kSizes, 1);
  transfer(inFlight32(), 32);
}

TEST_F(AdapterTest, V6MovesExactBytes) {
  net_ = load("ferrytest6", 6);
  ASSERT_NE(net_, nullptr) << logText();
  transfer(kSizes, 1);
  transfer(inFlight32(), 32);
}

TEST_F(AdapterTest, PropertiesGetDefaultsForMissingFields) {
  for (auto [name, version] : {std::pair{"ferrytest", 8}, std::pair{"ferrytest6", 6}}) {
    SCOPED_TRACE(name);
    net_ = load(name, version);
    ASSERT_NE(net_, nullptr) << logText();
    int ndev = 0;
    ASSERT_EQ(net_->devices(&ndev), ncclSuccess);
    EXPECT_EQ(ndev, 1);
    ncclNetProperties_v11_t p;
    std::memset(&p, 0x5A, sizeof(p));
    ASSERT_EQ(net_->getProperties(0, &p), ncclSuccess);
    EXPECT_STREQ(p.name, "lo");
    EXPECT_EQ(p.pciPath, nullptr);
    EXPECT_EQ(p.guid, 0x6674u);
    EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
    EXPECT_EQ(p.regIsGlobal, 0);
    EXPECT_EQ(p.forceFlush, 0);
    EXPECT_EQ(p.speed, 10000);
    EXPECT_EQ(p.port, 0);
    EXPECT_EQ(p.latency, 0.0f);
    EXPECT_EQ(p.maxComms, 1024);
    EXPECT_EQ(p.maxRecvs, 1);
    EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
    EXPECT_EQ(p.netDeviceVersion, 0);
    EXPECT_EQ(p.vProps.ndevs, 1);
    EXPECT_EQ(p.vProps.devs[0], 0);
    EXPECT_EQ(p.maxP2pBytes, static_cast<size_t>(MAX_NET_SIZE));
    EXPECT_EQ(p.maxCollBytes, static_cast<size_t>(MAX_COLLNET_SIZE));
    EXPECT_EQ(p.maxMultiRequestSize, 1);
    EXPECT_EQ(net_->finalize(ctx_), ncclSuccess);
    ctx_ = nullptr;
  }
}

TEST_F(AdapterTest, OptionalEntriesFollowThePluginAfterInit) {
  usePlugins("ferrytest6");
  ASSERT_EQ(externalNets().size(), 1u);
  const ncclNet_v11_t* net = externalNets()[0].net;
  // Before init the plugin's table holds only name and init.
  int ndev = 0;
  EXPECT_EQ(net->devices(&ndev), ncclInvalidUsage);
  EXPECT_EQ(log::lastError(), "NET/Plugin: FerryTest (v6): devices() called before init()");
  ASSERT_EQ(net->init(&ctx_, 1, nullptr, pluginLogger(), nullptr), ncclSuccess);
  net_ = net;
  EXPECT_EQ(net->regMrDmaBuf, nullptr);
  EXPECT_EQ(net->getDeviceMr, nullptr);
  EXPECT_EQ(net->irecvConsumed, nullptr);
  EXPECT_EQ(net->makeVDevice, nullptr);
  ASSERT_NE(net->finalize, nullptr);
  ASSERT_NE(net->setNetAttr, nullptr);
  ncclNetAttr_v11_t attr{};
  EXPECT_EQ(net->setNetAttr(ctx_, &attr), ncclSuccess);
  EXPECT_EQ(net->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 1);
}

TEST_F(AdapterTest, InitIsProcessGlobalButContextsAreDistinct) {
  net_ = load("ferrytest", 8);
  ASSERT_NE(net_, nullptr);
  void* ctx2 = nullptr;
  ASSERT_EQ(net_->init(&ctx2, 0x5678, nullptr, pluginLogger(), nullptr), ncclSuccess);
  EXPECT_NE(ctx2, nullptr);
  EXPECT_NE(ctx2, ctx_);
  // Both contexts drive the same plugin: a connection made under ctx2 works.
  std::swap(ctx_, ctx2);
  transfer({5, 0, 1000}, 3);
  std::swap(ctx_, ctx2);
  EXPECT_EQ(net_->finalize(ctx2), ncclSuccess);
}

TEST_F(AdapterTest, V6RefusesSizesAboveIntMax) {
  net_ = load("ferrytest6", 6);
  ASSERT_NE(net_, nullptr);
  void* sc = nullptr;
  void* rc = nullptr;
  connectPair(&sc, &rc);
  ASSERT_TRUE(sc && rc);
  char buf[8] = {};
  const size_t big = static_cast<size_t>(INT_MAX) + 1;
  void* req = nullptr;
  void* mh = nullptr;
  EXPECT_EQ(net_->regMr(sc, buf, big, NCCL_PTR_HOST, &mh), ncclInvalidUsage);
  EXPECT_EQ(mh, nullptr);
  EXPECT_EQ(log::lastError(),
            "NET/Plugin: FerryTest (v6) takes int sizes: regMr of 2147483648 bytes exceeds INT_MAX");
  EXPECT_EQ(net_->isend(sc, buf, big, 0, nullptr, nullptr, &req), ncclInvalidUsage);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(log::lastError(),
            "NET/Plugin: FerryTest (v6) takes int sizes: isend of 2147483648 bytes exceeds INT_MAX");
  void* data = buf;
  size_t size = big;
  int tag = 0;
  EXPECT_EQ(net_->irecv(rc, 1, &data, &size, &tag, &mh, nullptr, &req), ncclInvalidUsage);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(log::lastError(),
            "NET/Plugin: FerryTest (v6) takes int sizes: irecv of 2147483648 bytes exceeds INT_MAX");
  // INT_MAX itself still reaches the plugin (which only records it).
  EXPECT_EQ(net_->regMr(sc, buf, INT_MAX, NCCL_PTR_HOST, &mh), ncclSuccess);
  EXPECT_NE(mh, nullptr);
  EXPECT_EQ(net_->closeSend(sc), ncclSuccess);
  EXPECT_EQ(net_->closeRecv(rc), ncclSuccess);
}

TEST_F(AdapterTest, V8RegistersLargeButSendsIntSizes) {
  net_ = load("ferrytest", 8);
  ASSERT_NE(net_, nullptr);
  void* sc = nullptr;
  void* rc = nullptr;
  connectPair(&sc, &rc);
  ASSERT_TRUE(sc && rc);
  char buf[8] = {};
  void* mh = nullptr;
  void* req = nullptr;
  EXPECT_EQ(net_->regMr(sc, buf, size_t(3) << 30, NCCL_PTR_HOST, &mh), ncclSuccess);  // v8: size_t
  EXPECT_NE(mh, nullptr);
  EXPECT_EQ(net_->isend(sc, buf, size_t(3) << 30, 0, mh, nullptr, &req), ncclInvalidUsage);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(log::lastError(),
            "NET/Plugin: FerryTest (v8) takes int sizes: isend of 3221225472 bytes exceeds INT_MAX");
  EXPECT_EQ(net_->closeSend(sc), ncclSuccess);
  EXPECT_EQ(net_->closeRecv(rc), ncclSuccess);
}

}  // namespace
}  // namespace ferry::netplugin::testing
