// Network selection (transports/net/net_registry.cc) with an external plugin
// whose init fails: finalize belongs to a successful init only.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <string>

#include "harness.h"
#include "plugins/net/net_plugins.h"
#include "transports/net/net_registry.h"

namespace ferry::nxtest {
namespace {

const std::string kLib = std::string(FERRY_PLUGIN_DIR) + "/libnccl-net-failinit.so";

// The test's own handle on the plugin library: the loader's dlopen of the
// same path shares its globals (the counters).
struct FailInitPlugin {
  void* h = dlopen(kLib.c_str(), RTLD_NOW | RTLD_LOCAL);
  template <class F> F fn(const char* name) { return h ? reinterpret_cast<F>(dlsym(h, name)) : nullptr; }
  ~FailInitPlugin() {
    if (h) dlclose(h);
  }
};

class NetRegistryFailInit : public ::testing::Test {
 protected:
  void SetUp() override { netplugin::resetForTest(); }
  void TearDown() override { netplugin::resetForTest(); }
};

TEST_F(NetRegistryFailInit, FinalizeOnlyAfterSuccessfulInit) {
  FailInitPlugin p;
  ASSERT_NE(p.h, nullptr) << dlerror();
  auto setMode = p.fn<void (*)(int)>("ferrytestFailInitMode");
  auto inits = p.fn<int (*)()>("ferrytestFailInitInits");
  auto finalizes = p.fn<int (*)()>("ferrytestFailInitFinalizes");
  ASSERT_TRUE(setMode && inits && finalizes);
  ScopedEnv plugin("NCCL_NET_PLUGIN", kLib);
  netplugin::resetForTest();

  // init fails (after handing out a context): skipped, never finalized.
  setMode(0);
  Result<net::ActiveNet> a = net::openNet(0x1234);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  EXPECT_STREQ(a.value().net->name, "Socket");
  EXPECT_TRUE(a.value().notesReadiness);  // the built-in Socket network's test() notes its sockets
  EXPECT_EQ(inits(), 1);
  EXPECT_EQ(finalizes(), 0) << "finalize was called after a failed init";
  if (a.value().ctx) a.value().net->finalize(a.value().ctx);

  // init succeeds but there is no device: skipped, finalized exactly once.
  setMode(1);
  Result<net::ActiveNet> b = net::openNet(0x1235);
  ASSERT_TRUE(b.isOk()) << b.status().message();
  EXPECT_STREQ(b.value().net->name, "Socket");
  EXPECT_EQ(inits(), 2);
  EXPECT_EQ(finalizes(), 1);
  if (b.value().ctx) b.value().net->finalize(b.value().ctx);
}

}  // namespace
}  // namespace ferry::nxtest
