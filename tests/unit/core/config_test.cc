// Config registry: lookup order, parsing, caching and the log lines it emits.
#include "core/config.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "core/log.h"
#include "tests/unit/core/test_util.h"

namespace ferry::config {
namespace {

using testutil::countOf;
using testutil::readFile;
using testutil::TempDir;
using testutil::writeFile;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const ParamDef& d : all()) unsetenv(d.name);
    // An empty config file keeps ~/.nccl.conf and /etc/nccl.conf out of the way.
    empty_ = dir_.file("empty.conf");
    writeFile(empty_, "");
    setenv("NCCL_CONF_FILE", empty_.c_str(), 1);
    log::reset();
  }
  void TearDown() override {
    for (const ParamDef& d : all()) unsetenv(d.name);
    log::reset();
  }
  // Route the log to a file so tests can count lines.
  std::string logToFile() {
    std::string path = dir_.file("log.txt");
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "ENV", 1);
    setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
    log::reset();
    EXPECT_TRUE(log::enabled(log::Level::kInfo, log::kEnv));
    return path;
  }

  TempDir dir_;
  std::string empty_;
};

TEST_F(ConfigTest, TableIsConsistent) {
  ASSERT_EQ(all().size(), static_cast<size_t>(Param::kCount));
  std::set<std::string> names;
  for (size_t i = 0; i < all().size(); i++) {
    EXPECT_EQ(static_cast<size_t>(all()[i].id), i);
    EXPECT_TRUE(names.insert(all()[i].name).second) << all()[i].name;
  }
  EXPECT_STREQ(def(Param::kSpinCount).name, "FERRY_SPIN_COUNT");
  EXPECT_EQ(def(Param::kSpinCount).type, Type::kInt);
  EXPECT_STREQ(def(Param::kSpinCount).def, "2000");
}

TEST_F(ConfigTest, DefaultsWhenUnset) {
  EXPECT_EQ(getInt(Param::kSpinCount), 2000);
  EXPECT_FALSE(isSet(Param::kSpinCount));
  EXPECT_EQ(source(Param::kSpinCount), "default");
  EXPECT_FALSE(getBool(Param::kShmDisable));
  EXPECT_EQ(getString(Param::kDebugSubsys), "INIT,BOOTSTRAP,ENV");
  EXPECT_EQ(getString(Param::kSocketIfname), "");
  EXPECT_EQ(getInt(Param::kCommBlocking), 0);  // empty default
}

TEST_F(ConfigTest, Environment) {
  setenv("FERRY_SPIN_COUNT", "77", 1);
  setenv("FERRY_SHM_SLOTS", "0x10", 1);
  setenv("FERRY_TIMEOUT_MS", "-5", 1);
  setenv("NCCL_SOCKET_IFNAME", "^lo,docker", 1);
  reload();
  EXPECT_EQ(getInt(Param::kSpinCount), 77);
  EXPECT_EQ(getInt(Param::kShmSlots), 16);
  EXPECT_EQ(getInt(Param::kTimeoutMs), -5);
  EXPECT_EQ(getString(Param::kSocketIfname), "^lo,docker");
  EXPECT_TRUE(isSet(Param::kSpinCount));
  EXPECT_EQ(source(Param::kSpinCount), "environment");
}

TEST_F(ConfigTest, EmptyEnvironmentValueCountsAsUnset) {
  setenv("FERRY_SPIN_COUNT", "", 1);
  reload();
  EXPECT_EQ(getInt(Param::kSpinCount), 2000);
  EXPECT_FALSE(isSet(Param::kSpinCount));
}

TEST_F(ConfigTest, ConfigFile) {
  std::string conf = dir_.file("nccl.conf");
  writeFile(conf,
            "# a comment\n"
            "   FERRY_SHM_SLOTS =  12  \n"
            "\n"
            "NCCL_SOCKET_IFNAME=eth0\n"
            "not a setting\n"
            "  # FERRY_SPIN_COUNT=5\n"
            "NCCL_SHM_DISABLE=yes\n"
            "FERRY_NET_SLOTS=3\n");
  setenv("NCCL_CONF_FILE", conf.c_str(), 1);
  setenv("FERRY_NET_SLOTS", "9", 1);  // the environment wins over the file
  reload();
  EXPECT_EQ(getInt(Param::kShmSlots), 12);
  EXPECT_EQ(source(Param::kShmSlots), "config file " + conf);
  EXPECT_TRUE(isSet(Param::kShmSlots));
  EXPECT_EQ(getString(Param::kSocketIfname), "eth0");
  EXPECT_TRUE(getBool(Param::kShmDisable));
  EXPECT_EQ(getInt(Param::kSpinCount), 2000);
  EXPECT_EQ(source(Param::kSpinCount), "default");
  EXPECT_EQ(getInt(Param::kNetSlots), 9);
  EXPECT_EQ(source(Param::kNetSlots), "environment");
}

TEST_F(ConfigTest, MissingConfigFileIsIgnored) {
  setenv("NCCL_CONF_FILE", dir_.file("does-not-exist.conf").c_str(), 1);
  reload();
  EXPECT_EQ(getInt(Param::kShmSlots), 8);
  EXPECT_EQ(source(Param::kShmSlots), "default");
}

TEST_F(ConfigTest, BoolSpellings) {
  for (const char* t : {"1", "true", "TRUE", "yes", "Yes", "on", "ON"}) {
    setenv("NCCL_SHM_DISABLE", t, 1);
    reload();
    EXPECT_TRUE(getBool(Param::kShmDisable)) << t;
  }
  for (const char* f : {"0", "false", "False", "no", "NO", "off", "Off"}) {
    setenv("NCCL_SHM_DISABLE", f, 1);
    reload();
    EXPECT_FALSE(getBool(Param::kShmDisable)) << f;
  }
}

TEST_F(ConfigTest, BadValuesWarnOnceAndUseDefault) {
  std::string logPath = logToFile();
  setenv("FERRY_SHM_SLOTS", "12abc", 1);
  setenv("NCCL_P2P_DISABLE", "maybe", 1);
  reload();
  EXPECT_EQ(getInt(Param::kShmSlots), 8);
  EXPECT_EQ(getInt(Param::kShmSlots), 8);
  EXPECT_NE(log::lastError().find("FERRY_SHM_SLOTS"), std::string::npos) << log::lastError();
  EXPECT_NE(log::lastError().find("12abc"), std::string::npos) << log::lastError();
  EXPECT_FALSE(getBool(Param::kP2pDisable));
  EXPECT_FALSE(getBool(Param::kP2pDisable));
  EXPECT_NE(log::lastError().find("NCCL_P2P_DISABLE"), std::string::npos) << log::lastError();
  EXPECT_NE(log::lastError().find("maybe"), std::string::npos) << log::lastError();
  std::string text = readFile(logPath);
  EXPECT_EQ(countOf(text, "NCCL WARN Invalid value '12abc' for FERRY_SHM_SLOTS"), 1u) << text;
  EXPECT_EQ(countOf(text, "NCCL WARN Invalid value 'maybe' for NCCL_P2P_DISABLE"), 1u) << text;
}

TEST_F(ConfigTest, IntOverflowIsBad) {
  setenv("FERRY_SHM_SLOTS", "99999999999999999999999", 1);
  reload();
  EXPECT_EQ(getInt(Param::kShmSlots), 8);
}

TEST_F(ConfigTest, ValuesAreCachedUntilReload) {
  setenv("FERRY_SPIN_COUNT", "5", 1);
  reload();
  EXPECT_EQ(getInt(Param::kSpinCount), 5);
  setenv("FERRY_SPIN_COUNT", "6", 1);
  EXPECT_EQ(getInt(Param::kSpinCount), 5);
  reload();
  EXPECT_EQ(getInt(Param::kSpinCount), 6);
  unsetenv("FERRY_SPIN_COUNT");
  reload();
  EXPECT_EQ(getInt(Param::kSpinCount), 2000);
}

TEST_F(ConfigTest, SetByLinesLoggedOncePerVariable) {
  std::string conf = dir_.file("nccl.conf");
  writeFile(conf, "FERRY_NET_SLOTS=6\n");
  setenv("NCCL_CONF_FILE", conf.c_str(), 1);
  std::string logPath = logToFile();
  setenv("FERRY_SHM_SLOTS", "5", 1);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(getInt(Param::kShmSlots), 5);
    EXPECT_EQ(getInt(Param::kNetSlots), 6);
    EXPECT_EQ(getInt(Param::kSpinCount), 2000);
  }
  std::string text = readFile(logPath);
  EXPECT_EQ(countOf(text, "NCCL INFO FERRY_SHM_SLOTS set by environment to 5\n"), 1u) << text;
  EXPECT_EQ(countOf(text, "NCCL INFO FERRY_NET_SLOTS set by config file " + conf + " to 6\n"),
            1u)
      << text;
  EXPECT_EQ(countOf(text, "FERRY_SPIN_COUNT"), 0u) << text;
  // The logger's own variables go through the same path.
  EXPECT_EQ(countOf(text, "NCCL INFO NCCL_DEBUG set by environment to INFO\n"), 1u) << text;
}

TEST_F(ConfigTest, ConcurrentReadsAndReloads) {
  setenv("FERRY_SPIN_COUNT", "33", 1);
  reload();
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; i++) {
        if (t == 0 && i % 100 == 0) reload();
        if (getInt(Param::kSpinCount) != 33) wrong++;
        if (getString(Param::kDebugSubsys) != "INIT,BOOTSTRAP,ENV") wrong++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace ferry::config
