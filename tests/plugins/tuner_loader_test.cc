// Tuner plugin loader: NCCL_TUNER_PLUGIN name rules, the symbol probe order,
// the net plugin fallback, "none", missing libraries and the log lines.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tests/plugins/tuner_test_util.h"

// Found only through STATIC_PLUGIN (dlopen(NULL)); this executable is linked
// with ENABLE_EXPORTS so the symbol is visible.
namespace {
ncclResult_t staticInit(size_t, size_t, ncclDebugLogger_t, void**) { return ncclSuccess; }
}  // namespace
extern "C" {
__attribute__((visibility("default"))) ncclTuner_v3_t ncclTunerPlugin_v3 = {.name = "static-v3",
                                                                          .init = staticInit};
}

namespace ferry::tunerplugin::testing {
namespace {

using testutil::countOf;

const std::string kCouldNot = "TUNER/Plugin: Could not find: ";

TEST_F(TunerTest, UnsetTriesLibNcclTuner) {
  useTuner(nullptr);
  EXPECT_EQ(loadedTuner(), nullptr);
  EXPECT_EQ(Tuner::open(TunerInit{}, nullptr), nullptr);
  std::string t = logText();
  EXPECT_EQ(countOf(t, kCouldNot), 1u) << t;
  EXPECT_EQ(countOf(t, kCouldNot + "libnccl-tuner.so ("), 1u) << t;
  EXPECT_EQ(countOf(t, "TUNER/Plugin: no tuner plugin found; the internal model decides"), 1u) << t;
}

TEST_F(TunerTest, EmptyValueIsUnset) {
  useTuner("");
  EXPECT_EQ(loadedTuner(), nullptr);
  EXPECT_EQ(countOf(logText(), kCouldNot + "libnccl-tuner.so ("), 1u) << logText();
}

TEST_F(TunerTest, NoneDisablesEvenTheNetPluginTuner) {
  for (const char* v : {"none", "NONE", "None"}) {
    useTuner(v, "withtuner");
    EXPECT_EQ(loadedTuner(), nullptr) << v;
    EXPECT_EQ(Tuner::open(TunerInit{}, nullptr), nullptr);
  }
  std::string t = logText();
  EXPECT_EQ(countOf(t, "TUNER/Plugin: Could not find"), 0u) << t;
  EXPECT_EQ(countOf(t, "TUNER/Plugin: Using"), 0u) << t;
  EXPECT_EQ(countOf(t, "TUNER/Plugin: NCCL_TUNER_PLUGIN=none, tuner plugin disabled"), 1u) << t;
}

TEST_F(TunerTest, ShortNameGetsLibPrefixAndNewestVersion) {
  useTuner("ferryexample");
  const LoadedTuner* lt = loadedTuner();
  ASSERT_NE(lt, nullptr) << logText();
  EXPECT_EQ(lt->library, "libnccl-tuner-ferryexample.so");
  EXPECT_EQ(lt->version, 6);  // the library exports v5 and v6
  EXPECT_EQ(lt->name, "FerryExample");
  EXPECT_FALSE(lt->fromNetPlugin);
  std::string t = logText();
  // The name itself is tried first, then the prefixed form.
  EXPECT_EQ(countOf(t, kCouldNot + "ferryexample ("), 1u) << t;
  const std::string using6 =
      "TUNER/Plugin: Using FerryExample (v6) from libnccl-tuner-ferryexample.so\n";
  EXPECT_EQ(countOf(t, using6), 1u) << t;
  EXPECT_LT(t.find(kCouldNot + "ferryexample ("), t.find(using6)) << t;
}

TEST_F(TunerTest, AbsolutePathIsOpenedVerbatim) {
  std::string path = netplugin::testing::pluginPath("libnccl-tuner-ferryv4.so");
  useTuner(path.c_str());
  const LoadedTuner* lt = loadedTuner();
  ASSERT_NE(lt, nullptr) << logText();
  EXPECT_EQ(lt->library, path);
  EXPECT_EQ(lt->version, 4);
  EXPECT_EQ(countOf(logText(), "Could not find"), 0u) << logText();
}

TEST_F(TunerTest, ProbeOrderIsNewestFirst) {
  struct Case {
    const char* name;
    int version;
  };
  for (Case c : {Case{"ferryexample", 6}, Case{"ferryv5", 5}, Case{"ferryv4", 4},
                 Case{"ferryv3", 3}, Case{"ferryv2", 2}}) {
    useTuner(c.name);
    const LoadedTuner* lt = loadedTuner();
    ASSERT_NE(lt, nullptr) << c.name << logText();
    EXPECT_EQ(lt->version, c.version) << c.name;  // ferryv3 exports v2 and v3
  }
}

TEST_F(TunerTest, LibNameAndPathsAreNotPrefixed) {
  for (const char* v : {"libnccl-tuner-nothere.so", "/nonexistent/tuner", "./nothere"}) {
    useTuner(v);
    EXPECT_EQ(loadedTuner(), nullptr) << v;
    std::string t = logText();
    EXPECT_EQ(countOf(t, kCouldNot + v + " ("), 1u) << t;
    EXPECT_EQ(countOf(t, kCouldNot), 1u) << t;  // the log restarts with each useTuner
  }
}

TEST_F(TunerTest, MissingNameTriesBothFormsThenNoTuner) {
  useTuner("nothere");
  EXPECT_EQ(loadedTuner(), nullptr);
  std::string t = logText();
  EXPECT_EQ(countOf(t, kCouldNot + "nothere ("), 1u) << t;
  EXPECT_EQ(countOf(t, kCouldNot + "libnccl-tuner-nothere.so ("), 1u) << t;
  EXPECT_EQ(countOf(t, "no tuner plugin found"), 1u) << t;
  EXPECT_EQ(countOf(t, "NCCL WARN"), 0u) << t;
}

TEST_F(TunerTest, LibraryWithoutSymbolWarnsAndStops) {
  std::string path = netplugin::testing::pluginPath("libnccl-net-empty.so");
  useTuner(path.c_str(), "withtuner");  // a net tuner exists but is not used
  EXPECT_EQ(loadedTuner(), nullptr);
  std::string t = logText();
  EXPECT_EQ(countOf(t, "NCCL WARN TUNER/Plugin: " + path +
                           " exports no tuner plugin symbol (ncclTunerPlugin_v6 .. _v2); no tuner"),
            1u)
      << t;
  EXPECT_EQ(countOf(t, "TUNER/Plugin: Using"), 0u) << t;
}

TEST_F(TunerTest, TunerInsideNetPluginLibrary) {
  for (const char* value : {static_cast<const char*>(nullptr), "nothere"}) {
    useTuner(value, "withtuner");
    const LoadedTuner* lt = loadedTuner();
    ASSERT_NE(lt, nullptr) << logText();
    EXPECT_TRUE(lt->fromNetPlugin);
    EXPECT_EQ(lt->library, "libnccl-net-withtuner.so");
    EXPECT_EQ(lt->version, 5);
    FerryExampleTunerState* s = exampleState();
    ASSERT_NE(s, nullptr);
    auto tuner = Tuner::open(TunerInit{}, nullptr);
    ASSERT_NE(tuner, nullptr);
    EXPECT_EQ(s->initVersion, 5);
    EXPECT_EQ(countOf(logText(), "TUNER/Plugin: Using FerryExample (v5) from net plugin library "
                                 "libnccl-net-withtuner.so\n"),
              1u)
        << logText();
  }
}

TEST_F(TunerTest, StaticPlugin) {
  useTuner("STATIC_PLUGIN");
  const LoadedTuner* lt = loadedTuner();
  ASSERT_NE(lt, nullptr) << logText();
  EXPECT_EQ(lt->library, "STATIC_PLUGIN");
  EXPECT_EQ(lt->version, 3);
  EXPECT_EQ(lt->name, "static-v3");
  // Its getCollInfo is NULL: an error for the caller, the table untouched.
  auto tuner = Tuner::open(TunerInit{}, nullptr);
  ASSERT_NE(tuner, nullptr);
  CostTable table, before;
  fillTable(table);
  fillTable(before);
  Status st = tuner->adjust(ncclFuncAllReduce, 8, 1, false, table, nullptr);
  EXPECT_FALSE(st.isOk());
  EXPECT_EQ(diffCount(table, before), 0);
}

TEST_F(TunerTest, LoadedOncePerProcessInitPerCommunicator) {
  useTuner("ferryexample");
  FerryExampleTunerState* s = exampleState();
  ASSERT_NE(s, nullptr);
  auto a = Tuner::open(TunerInit{.commId = 1}, nullptr);
  auto b = Tuner::open(TunerInit{.commId = 2}, nullptr);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(s->initCalls, 2);
  EXPECT_EQ(s->liveContexts, 2);
  a.reset();
  b.reset();
  EXPECT_EQ(s->finalizeCalls, 2);
  EXPECT_EQ(s->liveContexts, 0);
  EXPECT_EQ(s->badContextCalls, 0);
  EXPECT_EQ(countOf(logText(), "TUNER/Plugin: Using FerryExample"), 1u) << logText();
}

TEST_F(TunerTest, ConcurrentFirstCallsLoadOnce) {
  useTuner("ferryexample");
  std::vector<const LoadedTuner*> seen(8, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); i++) {
    threads.emplace_back([&seen, i] { seen[i] = loadedTuner(); });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_NE(seen[0], nullptr) << logText();
  for (const LoadedTuner* p : seen) EXPECT_EQ(p, seen[0]);
  EXPECT_EQ(countOf(logText(), "TUNER/Plugin: Using FerryExample"), 1u) << logText();
}

TEST_F(TunerTest, PluginLoggerGoesToFerryLog) {
  useTuner("ferryexample");
  ASSERT_NE(exampleState(), nullptr);
  auto tuner = Tuner::open(TunerInit{.commId = 0xabc, .nRanks = 8, .nNodes = 2}, nullptr);
  ASSERT_NE(tuner, nullptr);
  std::string t = logText();
  EXPECT_EQ(countOf(t, "NCCL INFO FerryExample tuner: init (v6) for 8 ranks on 2 nodes\n"), 1u) << t;
  EXPECT_EQ(countOf(t, "TUNER/Plugin: FerryExample (v6) initialised: commId 0xabc, 8 ranks, 2 nodes"),
            1u)
      << t;
  tuner.reset();
  // The plugin logs with NCCL_TUNING: filtered out like Ferry's own lines.
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  log::reset();
  tuner = Tuner::open(TunerInit{.nRanks = 3}, nullptr);
  ASSERT_NE(tuner, nullptr);
  EXPECT_EQ(countOf(logText(), "for 3 ranks"), 0u) << logText();
}

}  // namespace
}  // namespace ferry::tunerplugin::testing
