// Shared by the tuner plugin tests: the net plugin fixture (clean
// configuration, log in a file) plus NCCL_TUNER_PLUGIN handling and access to
// the example tuner's settings and records.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <string>

#include "plugins/tuner/tuner_plugin.h"
#include "tests/plugins/example_tuner.h"
#include "tests/plugins/plugin_test_util.h"

namespace ferry::tunerplugin::testing {

class TunerTest : public netplugin::testing::PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    setenv("NCCL_DEBUG_SUBSYS", "INIT,NET,TUNING", 1);
    // Keep libnccl-net.so lookups out of the way unless a test wants them.
    setenv("NCCL_NET_PLUGIN", "none", 1);
    tunerplugin::resetForTest();
    log::reset();
  }
  void TearDown() override {
    tunerplugin::resetForTest();
    PluginTest::TearDown();
  }
  // Set NCCL_TUNER_PLUGIN (nullptr: unset) and forget what was loaded.
  void useTuner(const char* value, const char* netPlugins = "none") {
    if (value) setenv("NCCL_TUNER_PLUGIN", value, 1);
    else unsetenv("NCCL_TUNER_PLUGIN");
    if (netPlugins) setenv("NCCL_NET_PLUGIN", netPlugins, 1);
    else unsetenv("NCCL_NET_PLUGIN");
    tunerplugin::resetForTest();
    netplugin::resetForTest();
    log::reset();
  }
  // The loaded example tuner's state, reset to its defaults (the library may
  // stay mapped between tests, so its globals would carry over).
  FerryExampleTunerState* exampleState() {
    const LoadedTuner* t = loadedTuner();
    if (t == nullptr) return nullptr;
    void* h = dlopen(t->library.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) return nullptr;
    auto fn = reinterpret_cast<FerryExampleTunerState* (*)()>(dlsym(h, "ferryExampleTunerState"));
    dlclose(h);  // the loader keeps its own reference
    if (fn == nullptr) return nullptr;
    FerryExampleTunerState* s = fn();
    std::memset(s, 0, sizeof(*s));
    s->ringAboveBytes = 1 << 20;
    return s;
  }
};

// Entries a..: distinct positive costs; CollNet, NVLS and PAT rows ignored.
inline void fillTable(CostTable& t) {
  for (int a = 0; a < kNumAlgorithms; a++)
    for (int p = 0; p < kNumProtocols; p++) t[a][p] = 10.0f + a * 3 + p;
  for (int a : {NCCL_ALGO_COLLNET_DIRECT, NCCL_ALGO_COLLNET_CHAIN, NCCL_ALGO_NVLS,
                NCCL_ALGO_NVLS_TREE, NCCL_ALGO_PAT})
    for (int p = 0; p < kNumProtocols; p++) t[a][p] = kIgnore;
}

// Number of entries that differ between two tables.
inline int diffCount(const CostTable& x, const CostTable& y) {
  int n = 0;
  for (int a = 0; a < kNumAlgorithms; a++)
    for (int p = 0; p < kNumProtocols; p++) n += x[a][p] != y[a][p];
  return n;
}

}  // namespace ferry::tunerplugin::testing
