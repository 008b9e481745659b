// Shared by the plugin tests: a clean configuration per test, the log routed
// to a file so exact INFO/WARN lines can be checked, and the directory where
// the test plugin libraries are built.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "core/config.h"
#include "core/log.h"
#include "plugins/net/net_plugins.h"
#include "tests/unit/core/test_util.h"

#ifndef FERRY_TEST_PLUGIN_DIR
#error "FERRY_TEST_PLUGIN_DIR must name the directory of the test plugins"
#endif

namespace ferry::netplugin::testing {

inline std::string pluginPath(const std::string& file) {
  return std::string(FERRY_TEST_PLUGIN_DIR) + "/" + file;
}

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const config::ParamDef& d : config::all()) unsetenv(d.name);
    testutil::writeFile(dir_.file("empty.conf"), "");
    setenv("NCCL_CONF_FILE", dir_.file("empty.conf").c_str(), 1);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
    setenv("NCCL_DEBUG_FILE", logPath().c_str(), 1);
    resetForTest();
    log::reset();
  }
  void TearDown() override {
    resetForTest();
    for (const config::ParamDef& d : config::all()) unsetenv(d.name);
    log::reset();
  }
  // Set NCCL_NET_PLUGIN (nullptr: unset) and make config/log see it.
  void usePlugins(const char* value) {
    if (value) setenv("NCCL_NET_PLUGIN", value, 1);
    else unsetenv("NCCL_NET_PLUGIN");
    resetForTest();
    log::reset();
  }
  std::string logPath() const { return dir_.file("log.txt"); }
  std::string logText() const { return testutil::readFile(logPath()); }

  testutil::TempDir dir_;
};

}  // namespace ferry::netplugin::testing
