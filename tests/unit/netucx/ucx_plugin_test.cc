// The standalone plugin libnccl-net-ferryucx.so, dlopen'ed RTLD_LOCAL into a
// program that does not link libferry (as NCCL would load it).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <nccl_net_legacy.h>

#include "tests/unit/netucx/net_harness.h"

namespace {

using namespace ferrytest;

const ncclNet_v11_t* loadPlugin() {
  void* h = dlopen(FERRY_UCX_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  return static_cast<const ncclNet_v11_t*>(dlsym(h, "ncclNetPlugin_v11"));
}

TEST(NetUcxPlugin, ExportsOnlyThePluginSymbols) {
  void* h = dlopen(FERRY_UCX_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto* net = static_cast<const ncclNet_v11_t*>(dlsym(h, "ncclNetPlugin_v11"));
  ASSERT_NE(net, nullptr);
  EXPECT_STREQ(net->name, "UCX");
  EXPECT_NE(net->init, nullptr);
  EXPECT_NE(net->isend, nullptr);
  EXPECT_NE(net->finalize, nullptr);
  // Ferry's internals compiled into the plugin stay hidden.
  EXPECT_EQ(dlsym(h, "_ZN5ferry6ucxNetEv"), nullptr);
  EXPECT_EQ(dlsym(h, "_ZN5ferry6config9getStringENS0_5ParamE"), nullptr);
  EXPECT_EQ(dlsym(h, "ncclGetVersion"), nullptr);
  auto* v10 = static_cast<const ncclNet_v10_t*>(dlsym(h, "ncclNetPlugin_v10"));
  auto* v9 = static_cast<const ncclNet_v9_t*>(dlsym(h, "ncclNetPlugin_v9"));
  ASSERT_NE(v10, nullptr);
  ASSERT_NE(v9, nullptr);
  EXPECT_STREQ(v10->name, "UCX");
  EXPECT_STREQ(v9->name, "UCX");
}

Pair pluginPair(std::vector<size_t> sizes, int window) {
  Pair p;
  p.getNet = loadPlugin;
  p.env.push_back({"NCCL_SOCKET_IFNAME", "lo"});
  p.recvBody = [=](const ncclNet_v11_t* net, void* c) -> std::string {
    ncclNetProperties_v11_t props{};
    if (net->getProperties(0, &props) != ncclSuccess) return "getProperties failed";
    if (std::string(props.name) != "lo") return std::string("device 0 is ") + props.name;
    if (props.pciPath) return "lo has a PCI path";
    return recvAll(net, c, sizes, window, 21);
  };
  p.sendBody = [=](const ncclNet_v11_t* net, void* c) { return sendAll(net, c, sizes, window, 21); };
  return p;
}

TEST(NetUcxPlugin, TransferBetweenProcesses) {
  PairResult r = runProcesses(pluginPair({0, 1, 4095, 1 << 20, 64 << 20}, 1));
  EXPECT_EQ(r.recv, "");
  EXPECT_EQ(r.send, "");
  EXPECT_EQ(r.recvCode, 0);
  EXPECT_EQ(r.sendCode, 0);
}

TEST(NetUcxPlugin, TransferBetweenThreads) {
  std::vector<size_t> sizes;
  for (int i = 0; i < 100; i++) sizes.push_back(static_cast<size_t>(i) * 3001);
  PairResult r = runThreads(pluginPair(sizes, 32));
  EXPECT_EQ(r.recv, "");
  EXPECT_EQ(r.send, "");
}

// The v9 table (one process-wide context), driven through a v11 view.
const ncclNet_v9_t* gV9 = nullptr;
ncclNet_v11_t gV9As11;

const ncclNet_v11_t* loadV9As11() {
  void* h = dlopen(FERRY_UCX_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  gV9 = h ? static_cast<const ncclNet_v9_t*>(dlsym(h, "ncclNetPlugin_v9")) : nullptr;
  if (!gV9) return nullptr;
  ncclNet_v11_t& n = gV9As11;
  n = {};
  n.name = gV9->name;
  n.init = [](void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t,
              ncclProfilerCallback_t) {
    *ctx = &gV9As11;  // any non-NULL token
    return gV9->init(nullptr);
  };
  n.devices = [](int* nd) { return gV9->devices(nd); };
  n.getProperties = [](int d, ncclNetProperties_v11_t* p) {
    ncclNetProperties_v9_t p9{};
    ncclResult_t r = gV9->getProperties(d, &p9);
    *p = {};
    p->name = p9.name;
    p->pciPath = p9.pciPath;
    p->maxRecvs = p9.maxRecvs;
    return r;
  };
  n.listen = [](void*, int d, void* h, void** lc) { return gV9->listen(d, h, lc); };
  n.connect = [](void*, int d, void* h, void** sc, ncclNetDeviceHandle_v11_t** dc) {
    return gV9->connect(d, h, sc, dc);
  };
  n.accept = gV9->accept;
  n.regMr = gV9->regMr;
  n.deregMr = gV9->deregMr;
  n.isend = [](void* c, void* d, size_t s, int t, void* mh, void*, void** r) {
    return gV9->isend(c, d, s, t, mh, r);
  };
  n.irecv = [](void* c, int k, void** d, size_t* s, int* t, void** mh, void**, void** r) {
    return gV9->irecv(c, k, d, s, t, mh, r);
  };
  n.test = gV9->test;
  n.closeSend = gV9->closeSend;
  n.closeRecv = gV9->closeRecv;
  n.closeListen = gV9->closeListen;
  n.finalize = [](void*) { return ncclSuccess; };
  return &n;
}

TEST(NetUcxPlugin, V9TableTransferBetweenProcesses) {
  Pair p = pluginPair({0, 4095, 3 << 20}, 1);
  p.getNet = loadV9As11;
  PairResult r = runProcesses(p);
  EXPECT_EQ(r.recv, "");
  EXPECT_EQ(r.send, "");
  EXPECT_EQ(r.recvCode, 0);
  EXPECT_EQ(r.sendCode, 0);
}

}  // namespace
