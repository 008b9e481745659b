// v7, v9 and v10 adapters against in-process fake tables that record what
// they receive: argument conversion, per-comm config for v10 connect,
// profiler handles, optional entries and property defaults.
#include <gtest/gtest.h>

#include <cstring>

#include "core/log.h"
#include "plugins/net/legacy_adapter.h"
#include "plugins/net/net_plugins.h"

namespace ferry::netplugin {
namespace {

constexpr int kSlot = kMaxExternal - 1;
constexpr size_t k3G = size_t(3) << 30;

struct Record {
  int inits = 0;
  ncclDebugLogger_t logger = nullptr;
  ncclProfilerCallback_t prof = nullptr;
  int connectTc = -100;
  size_t size = 0;      // last regMr/isend/irecv size
  void* phandle = nullptr;
  int deviceMrs = 0;
};
Record rec;
int token;

ncclResult_t profCb(void**, int, void*, int64_t, void*) { return ncclSuccess; }
ncclResult_t devices(int* n) {
  *n = 2;
  return ncclSuccess;
}
ncclResult_t initOld(ncclDebugLogger_t l) {
  rec.inits++;
  rec.logger = l;
  return ncclSuccess;
}
ncclResult_t regMrInt(void*, void*, int size, int, void** mh) {
  rec.size = static_cast<size_t>(size);
  *mh = &token;
  return ncclSuccess;
}
ncclResult_t regMrSize(void*, void*, size_t size, int, void** mh) {
  rec.size = size;
  *mh = &token;
  return ncclSuccess;
}
ncclResult_t isendSize(void*, void*, size_t size, int, void*, void** req) {
  rec.size = size;
  *req = &token;
  return ncclSuccess;
}
ncclResult_t isendInt(void*, void*, int size, int, void*, void** req) {
  rec.size = static_cast<size_t>(size);
  *req = &token;
  return ncclSuccess;
}
ncclResult_t getDeviceMr(void*, void* mh, void** dptr) {
  rec.deviceMrs++;
  *dptr = mh;
  return ncclSuccess;
}
ncclResult_t makeVDevice(int* d, ncclNetVDeviceProps_v11_t* props) {
  *d = 7 + props->ndevs;
  return ncclSuccess;
}

class FakeTest : public ::testing::Test {
 protected:
  void SetUp() override { rec = Record{}; }
  void TearDown() override { releaseLegacy(kSlot); }
};

// ---- v10: config per comm, profiler handles pass through.

ncclResult_t init10(ncclDebugLogger_t l, ncclProfilerCallback_t p) {
  rec.inits++;
  rec.logger = l;
  rec.prof = p;
  return ncclSuccess;
}
ncclResult_t props10(int dev, ncclNetProperties_v10_t* p) {
  *p = ncclNetProperties_v10_t{};
  p->name = const_cast<char*>("fake10");
  p->speed = 400000;
  p->regIsGlobal = 1;
  p->forceFlush = 1;
  p->maxRecvs = 8;
  p->vProps.ndevs = 2;
  p->vProps.devs[0] = 3;
  p->vProps.devs[1] = 4;
  p->maxP2pBytes = size_t(1) << 33;
  p->maxCollBytes = 0;  // unset: the adapter fills NCCL's default
  return ncclSuccess;
}
ncclResult_t connect10(int, ncclNetCommConfig_v10_t* cfg, void*, void** sc, ncclNetDeviceHandle_v10_t**) {
  rec.connectTc = cfg ? cfg->trafficClass : -100;
  *sc = &token;
  return ncclSuccess;
}
ncclResult_t isend10(void*, void*, size_t size, int, void*, void* ph, void** req) {
  rec.size = size;
  rec.phandle = ph;
  *req = &token;
  return ncclSuccess;
}
ncclResult_t irecv10(void*, int, void**, size_t* sizes, int*, void**, void** phs, void** req) {
  rec.size = sizes[0];
  rec.phandle = phs ? phs[0] : nullptr;
  *req = &token;
  return ncclSuccess;
}

TEST_F(FakeTest, V10) {
  ncclNet_v10_t t{};
  t.name = "fake10";
  t.init = init10;
  t.devices = devices;
  t.getProperties = props10;
  t.connect = connect10;
  t.regMr = regMrSize;
  t.isend = isend10;
  t.irecv = irecv10;
  t.makeVDevice = makeVDevice;
  const ncclNet_v11_t* net = adaptLegacy(kSlot, 10, &t);
  ASSERT_NE(net, nullptr);
  EXPECT_STREQ(net->name, "fake10");

  ncclNetCommConfig_v11_t cfg = {5};
  void* ctx1 = nullptr;
  void* ctx2 = nullptr;
  ASSERT_EQ(net->init(&ctx1, 1, &cfg, pluginLogger(), profCb), ncclSuccess);
  ASSERT_EQ(net->init(&ctx2, 2, nullptr, pluginLogger(), profCb), ncclSuccess);
  EXPECT_EQ(rec.inits, 1);  // process-global init, once
  EXPECT_EQ(rec.logger, pluginLogger());
  EXPECT_EQ(rec.prof, &profCb);
  EXPECT_NE(ctx1, ctx2);

  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* sc = nullptr;
  ASSERT_EQ(net->connect(ctx1, 0, handle, &sc, nullptr), ncclSuccess);
  EXPECT_EQ(sc, &token);
  EXPECT_EQ(rec.connectTc, 5);
  ASSERT_EQ(net->connect(ctx2, 0, handle, &sc, nullptr), ncclSuccess);
  EXPECT_EQ(rec.connectTc, NCCL_NET_TRAFFIC_CLASS_UNDEF);

  int ph = 0;
  void* req = nullptr;
  ASSERT_EQ(net->isend(sc, nullptr, k3G, 0, nullptr, &ph, &req), ncclSuccess);
  EXPECT_EQ(rec.size, k3G);
  EXPECT_EQ(rec.phandle, &ph);
  size_t size = k3G + 1;
  void* phs[1] = {&token};
  void* data = nullptr;
  ASSERT_EQ(net->irecv(sc, 1, &data, &size, nullptr, nullptr, phs, &req), ncclSuccess);
  EXPECT_EQ(rec.size, k3G + 1);
  EXPECT_EQ(rec.phandle, &token);

  ncclNetProperties_v11_t p;
  std::memset(&p, 0x5A, sizeof(p));
  ASSERT_EQ(net->getProperties(1, &p), ncclSuccess);
  EXPECT_EQ(p.speed, 400000);
  EXPECT_EQ(p.regIsGlobal, 1);
  EXPECT_EQ(p.forceFlush, 1);
  EXPECT_EQ(p.maxRecvs, 8);
  EXPECT_EQ(p.vProps.ndevs, 2);
  EXPECT_EQ(p.vProps.devs[1], 4);
  EXPECT_EQ(p.maxP2pBytes, size_t(1) << 33);
  EXPECT_EQ(p.maxCollBytes, static_cast<size_t>(MAX_COLLNET_SIZE));
  EXPECT_EQ(p.maxMultiRequestSize, 1);

  ASSERT_NE(net->makeVDevice, nullptr);
  ncclNetVDeviceProps_v11_t vp = {2, {0, 1}};
  int d = -1;
  EXPECT_EQ(net->makeVDevice(&d, &vp), ncclSuccess);
  EXPECT_EQ(d, 9);
  EXPECT_EQ(net->getDeviceMr, nullptr);
  EXPECT_EQ(net->irecvConsumed, nullptr);
  EXPECT_EQ(net->finalize(ctx1), ncclSuccess);
  EXPECT_EQ(net->finalize(ctx2), ncclSuccess);
}

// ---- v9: size_t sizes, no profiler, no config.

ncclResult_t connect9(int, void*, void** sc, ncclNetDeviceHandle_v9_t**) {
  rec.connectTc = 0;
  *sc = &token;
  return ncclSuccess;
}

TEST_F(FakeTest, V9) {
  ncclNet_v9_t t{};
  t.name = "fake9";
  t.init = initOld;
  t.devices = devices;
  t.connect = connect9;
  t.regMr = regMrSize;
  t.isend = isendSize;
  const ncclNet_v11_t* net = adaptLegacy(kSlot, 9, &t);
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->makeVDevice, nullptr);  // the plugin has none
  void* ctx = nullptr;
  ASSERT_EQ(net->init(&ctx, 1, nullptr, nullptr, nullptr), ncclSuccess);
  EXPECT_EQ(rec.logger, pluginLogger());  // a NULL logger is replaced by Ferry's
  void* sc = nullptr;
  ASSERT_EQ(net->connect(ctx, 0, nullptr, &sc, nullptr), ncclSuccess);
  EXPECT_EQ(rec.connectTc, 0);
  void* req = nullptr;
  ASSERT_EQ(net->isend(sc, nullptr, k3G, 0, nullptr, &token, &req), ncclSuccess);
  EXPECT_EQ(rec.size, k3G);
  void* mh = nullptr;
  ASSERT_EQ(net->regMr(sc, nullptr, k3G + 2, NCCL_PTR_HOST, &mh), ncclSuccess);
  EXPECT_EQ(rec.size, k3G + 2);
  EXPECT_EQ(net->finalize(ctx), ncclSuccess);
}

// ---- v7: int sizes everywhere, device-MR entry present, v7 properties.

ncclResult_t props7(int, ncclNetProperties_v7_t* p) {
  *p = ncclNetProperties_v7_t{};
  p->name = const_cast<char*>("fake7");
  p->speed = 100000;
  p->netDeviceType = NCCL_NET_DEVICE_UNPACK;
  p->netDeviceVersion = 7;
  return ncclSuccess;
}

TEST_F(FakeTest, V7) {
  ncclNet_v7_t t{};
  t.name = "fake7";
  t.init = initOld;
  t.devices = devices;
  t.getProperties = props7;
  t.regMr = regMrInt;
  t.isend = isendInt;
  t.getDeviceMr = getDeviceMr;
  const ncclNet_v11_t* net = adaptLegacy(kSlot, 7, &t);
  ASSERT_NE(net, nullptr);
  void* ctx = nullptr;
  ASSERT_EQ(net->init(&ctx, 1, nullptr, pluginLogger(), nullptr), ncclSuccess);
  void* mh = nullptr;
  EXPECT_EQ(net->regMr(&token, nullptr, k3G, NCCL_PTR_HOST, &mh), ncclInvalidUsage);
  EXPECT_EQ(log::lastError(),
            "NET/Plugin: fake7 (v7) takes int sizes: regMr of 3221225472 bytes exceeds INT_MAX");
  ASSERT_EQ(net->regMr(&token, nullptr, 1000, NCCL_PTR_HOST, &mh), ncclSuccess);
  EXPECT_EQ(rec.size, 1000u);
  void* req = nullptr;
  ASSERT_EQ(net->isend(&token, nullptr, 123456, 0, mh, nullptr, &req), ncclSuccess);
  EXPECT_EQ(rec.size, 123456u);
  ASSERT_NE(net->getDeviceMr, nullptr);
  void* dptr = nullptr;
  EXPECT_EQ(net->getDeviceMr(&token, mh, &dptr), ncclSuccess);
  EXPECT_EQ(dptr, mh);
  EXPECT_EQ(rec.deviceMrs, 1);
  EXPECT_EQ(net->makeVDevice, nullptr);

  ncclNetProperties_v11_t p;
  ASSERT_EQ(net->getProperties(1, &p), ncclSuccess);
  EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_UNPACK);
  EXPECT_EQ(p.netDeviceVersion, 7);
  EXPECT_EQ(p.regIsGlobal, 0);
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_EQ(p.vProps.devs[0], 1);
  EXPECT_EQ(p.maxP2pBytes, static_cast<size_t>(MAX_NET_SIZE));
  EXPECT_EQ(net->finalize(ctx), ncclSuccess);
}

TEST_F(FakeTest, FailedInitIsRememberedAndUnknownVersionsRefused) {
  ncclNet_v8_t t{};
  t.name = "fails";
  t.init = [](ncclDebugLogger_t) {
    rec.inits++;
    return ncclSystemError;
  };
  const ncclNet_v11_t* net = adaptLegacy(kSlot, 8, &t);
  ASSERT_NE(net, nullptr);
  void* ctx = &token;
  EXPECT_EQ(net->init(&ctx, 1, nullptr, pluginLogger(), nullptr), ncclSystemError);
  EXPECT_EQ(net->init(&ctx, 2, nullptr, pluginLogger(), nullptr), ncclSystemError);
  EXPECT_EQ(rec.inits, 1);
  EXPECT_EQ(ctx, &token);  // untouched on failure
  EXPECT_EQ(adaptLegacy(kSlot, 5, &t), nullptr);
  EXPECT_EQ(adaptLegacy(kSlot, 11, &t), nullptr);
  EXPECT_EQ(adaptLegacy(kMaxExternal, 8, &t), nullptr);
}

}  // namespace
}  // namespace ferry::netplugin
