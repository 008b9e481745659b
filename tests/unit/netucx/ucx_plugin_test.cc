// The standalone plugin libnccl-net-ferryucx.so, dlopen'ed RTLD_LOCAL into a
// program that does not link libferry (as NCCL would load it).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "tests/unit/netucx/net_harness.h"

namespace {

using namespace ferrytest;

const ncclNet_v11_t* loadPlugin() {
  void* h = dlopen(FERRY_UCX_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  return static_cast<const ncclNet_v11_t*>(dlsym(h, "ncclNetPlugin_v11"));
}

TEST(NetUcxPlugin, ExportsOnlyThePluginSymbol) {
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

}  // namespace
