// Plugin loader: NCCL_NET_PLUGIN name resolution, the symbol probe order, the
// log lines, skipping of bad libraries, caching and STATIC_PLUGIN.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "tests/plugins/plugin_test_util.h"

// Found only through STATIC_PLUGIN (dlopen(NULL)); this executable is linked
// with ENABLE_EXPORTS so the symbol is visible.
namespace {
ncclResult_t staticInit(ncclDebugLogger_t) { return ncclSuccess; }
}  // namespace
extern "C" {
__attribute__((visibility("default"))) ncclNet_v7_t ncclNetPlugin_v7 = {.name = "static-v7",
                                                                      .init = staticInit};
}

namespace ferry::netplugin::testing {
namespace {

using testutil::countOf;

const std::string kCouldNot = "NET/Plugin: Could not find: ";

TEST_F(PluginTest, UnsetTriesLibNcclNet) {
  usePlugins(nullptr);
  EXPECT_TRUE(externalNets().empty());
  std::string t = logText();
  EXPECT_EQ(countOf(t, kCouldNot), 1u) << t;
  EXPECT_EQ(countOf(t, kCouldNot + "libnccl-net.so ("), 1u) << t;
}

TEST_F(PluginTest, EmptyValueTriesLibNcclNet) {
  usePlugins("");
  EXPECT_TRUE(externalNets().empty());
  EXPECT_EQ(countOf(logText(), kCouldNot + "libnccl-net.so ("), 1u) << logText();
}

TEST_F(PluginTest, NoneDisables) {
  for (const char* v : {"none", "NONE"}) {
    usePlugins(v);
    EXPECT_TRUE(externalNets().empty());
  }
  std::string t = logText();
  EXPECT_EQ(countOf(t, "Could not find"), 0u) << t;
  EXPECT_EQ(countOf(t, "NCCL_NET_PLUGIN=none, external net plugins disabled"), 1u) << t;
}

TEST_F(PluginTest, VerbatimAbsolutePath) {
  std::string path = pluginPath("libnccl-net-ferrytest.so");
  usePlugins(path.c_str());
  const auto& nets = externalNets();
  ASSERT_EQ(nets.size(), 1u) << logText();
  EXPECT_EQ(nets[0].library, path);
  EXPECT_EQ(nets[0].version, 8);
  ASSERT_NE(nets[0].net, nullptr);
  EXPECT_STREQ(nets[0].net->name, "FerryTest");
  std::string t = logText();
  EXPECT_EQ(countOf(t, "NET/Plugin: Loaded net plugin FerryTest (v8) from " + path + "\n"), 1u) << t;
  EXPECT_EQ(countOf(t, "Could not find"), 0u) << t;
}

TEST_F(PluginTest, ShortNameGetsLibPrefix) {
  usePlugins("ferrytest6");
  const auto& nets = externalNets();
  ASSERT_EQ(nets.size(), 1u) << logText();
  EXPECT_EQ(nets[0].library, "libnccl-net-ferrytest6.so");
  EXPECT_EQ(nets[0].version, 6);
  std::string t = logText();
  // The name itself is tried first, then the prefixed form.
  EXPECT_EQ(countOf(t, kCouldNot + "ferrytest6 ("), 1u) << t;
  EXPECT_LT(t.find(kCouldNot + "ferrytest6 ("), t.find("Loaded net plugin FerryTest (v6)")) << t;
  EXPECT_EQ(countOf(t, "NET/Plugin: Loaded net plugin FerryTest (v6) from libnccl-net-ferrytest6.so\n"), 1u) << t;
}

TEST_F(PluginTest, LibNameIsOpenedVerbatim) {
  usePlugins("libnccl-net-ferrytest.so");
  const auto& nets = externalNets();
  ASSERT_EQ(nets.size(), 1u) << logText();
  EXPECT_EQ(nets[0].library, "libnccl-net-ferrytest.so");
  EXPECT_EQ(countOf(logText(), "Could not find"), 0u) << logText();
}

TEST_F(PluginTest, MissingLibNameIsNotPrefixed) {
  usePlugins("libnccl-net-nosuch.so");
  EXPECT_TRUE(externalNets().empty());
  std::string t = logText();
  EXPECT_EQ(countOf(t, "Could not find"), 1u) << t;
  EXPECT_EQ(countOf(t, kCouldNot + "libnccl-net-nosuch.so ("), 1u) << t;
}

TEST_F(PluginTest, MissingPathIsNotPrefixed) {
  usePlugins("/nonexistent/dir/plugin");
  EXPECT_TRUE(externalNets().empty());
  std::string t = logText();
  EXPECT_EQ(countOf(t, "Could not find"), 1u) << t;
  EXPECT_EQ(countOf(t, kCouldNot + "/nonexistent/dir/plugin ("), 1u) << t;
}

TEST_F(PluginTest, MissingShortNameTriesBothAndIsSkipped) {
  usePlugins("nosuch");
  EXPECT_TRUE(externalNets().empty());
  std::string t = logText();
  EXPECT_EQ(countOf(t, "Could not find"), 2u) << t;
  EXPECT_EQ(countOf(t, kCouldNot + "nosuch ("), 1u) << t;
  EXPECT_EQ(countOf(t, kCouldNot + "libnccl-net-nosuch.so ("), 1u) << t;
  EXPECT_EQ(countOf(t, "WARN"), 0u) << t;
}

TEST_F(PluginTest, CommaListKeepsOrderAndSkipsMissing) {
  usePlugins("ferrytest6,missing,ferrytest");
  const auto& nets = externalNets();
  ASSERT_EQ(nets.size(), 2u) << logText();
  EXPECT_EQ(nets[0].library, "libnccl-net-ferrytest6.so");
  EXPECT_EQ(nets[0].version, 6);
  EXPECT_EQ(nets[1].library, "libnccl-net-ferrytest.so");
  EXPECT_EQ(nets[1].version, 8);
  EXPECT_NE(nets[0].net, nets[1].net);
  EXPECT_EQ(countOf(logText(), kCouldNot + "libnccl-net-missing.so ("), 1u) << logText();
}

TEST_F(PluginTest, SameLibraryTwiceIsLoadedOnce) {
  std::string value = "ferrytest," + pluginPath("libnccl-net-ferrytest.so");
  usePlugins(value.c_str());
  ASSERT_EQ(externalNets().size(), 1u) << logText();
  EXPECT_EQ(countOf(logText(), "is already loaded; skipped"), 1u) << logText();
}

TEST_F(PluginTest, NewestVersionWins) {
  usePlugins("multi");
  const auto& nets = externalNets();
  ASSERT_EQ(nets.size(), 1u) << logText();
  EXPECT_EQ(nets[0].version, 11);
  EXPECT_STREQ(nets[0].net->name, "multi-v11");
  // A v11 plugin's own table is used directly.
  void* ctx = reinterpret_cast<void*>(1);
  EXPECT_EQ(nets[0].net->init(&ctx, 0, nullptr, pluginLogger(), nullptr), ncclSuccess);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_EQ(countOf(logText(), "Loaded net plugin multi-v11 (v11) from libnccl-net-multi.so\n"), 1u);
}

TEST_F(PluginTest, LibraryWithoutSymbolIsWarnedAndSkipped) {
  usePlugins("empty,ferrytest");
  const auto& nets = externalNets();
  ASSERT_EQ(nets.size(), 1u) << logText();
  EXPECT_EQ(nets[0].library, "libnccl-net-ferrytest.so");
  std::string warn =
      "NET/Plugin: libnccl-net-empty.so loaded but exports no net plugin symbol "
      "(ncclNetPlugin_v11 .. _v6); skipped";
  EXPECT_EQ(log::lastError(), warn);
  EXPECT_EQ(countOf(logText(), "NCCL WARN " + warn + "\n"), 1u) << logText();
}

TEST_F(PluginTest, AtMostFourteenExternals) {
  // 15 copies of the v8 test plugin under different paths: distinct libraries.
  std::string value;
  for (int i = 0; i < 15; i++) {
    std::string copy = dir_.file("p" + std::to_string(i) + ".so");
    std::filesystem::copy_file(pluginPath("libnccl-net-ferrytest.so"), copy);
    value += (i ? "," : "") + copy;
  }
  usePlugins(value.c_str());
  const auto& nets = externalNets();
  ASSERT_EQ(nets.size(), 14u) << logText();
  EXPECT_EQ(log::lastError(), "NET/Plugin: at most 14 external net plugins; ignoring " +
                                  dir_.file("p14.so") + " and the rest");
  // Every adapter slot forwards to its own copy of the plugin.
  for (size_t i = 0; i < nets.size(); i++) {
    EXPECT_EQ(nets[i].library, dir_.file("p" + std::to_string(i) + ".so"));
    void* ctx = nullptr;
    ASSERT_EQ(nets[i].net->init(&ctx, i, nullptr, pluginLogger(), nullptr), ncclSuccess);
    int ndev = 0;
    EXPECT_EQ(nets[i].net->devices(&ndev), ncclSuccess);
    EXPECT_EQ(ndev, 1);
    EXPECT_EQ(nets[i].net->finalize(ctx), ncclSuccess);
  }
}

TEST_F(PluginTest, StaticPluginLooksInTheProgram) {
  usePlugins("STATIC_PLUGIN");
  const auto& nets = externalNets();
  ASSERT_EQ(nets.size(), 1u) << logText();
  EXPECT_EQ(nets[0].library, "STATIC_PLUGIN");
  EXPECT_EQ(nets[0].version, 7);
  EXPECT_STREQ(nets[0].net->name, "static-v7");
}

TEST_F(PluginTest, CachedUntilReset) {
  usePlugins("ferrytest");
  const std::vector<ExternalNet>* first = &externalNets();
  ASSERT_EQ(first->size(), 1u);
  setenv("NCCL_NET_PLUGIN", "none", 1);
  config::reload();
  EXPECT_EQ(&externalNets(), first);
  ASSERT_EQ(externalNets().size(), 1u);
  EXPECT_EQ(externalNets()[0].version, 8);
  resetForTest();
  EXPECT_TRUE(externalNets().empty());
}

TEST_F(PluginTest, ConcurrentFirstCallsLoadOnce) {
  usePlugins("ferrytest,ferrytest6");
  std::atomic<int> go{0};
  std::vector<size_t> seen(4, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; i++) {
    threads.emplace_back([&, i] {
      while (go.load() == 0) std::this_thread::yield();
      seen[i] = externalNets().size();
    });
  }
  go = 1;
  for (auto& t : threads) t.join();
  for (size_t s : seen) EXPECT_EQ(s, 2u);
  EXPECT_EQ(countOf(logText(), "Loaded net plugin"), 2u) << logText();
}

}  // namespace
}  // namespace ferry::netplugin::testing
