// Logger: exact line shapes, level/subsystem filtering, lastError, debug file.
#include "core/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "core/config.h"
#include "tests/unit/core/test_util.h"

namespace ferry::log {
namespace {

using testutil::countOf;
using testutil::readFile;
using testutil::TempDir;
using testutil::writeFile;

const char* kVars[] = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE",
                       "NCCL_DEBUG_TIMESTAMP_LEVELS", "NCCL_DEBUG_TIMESTAMP_FORMAT"};

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) unsetenv(v);
    writeFile(dir_.file("empty.conf"), "");
    setenv("NCCL_CONF_FILE", dir_.file("empty.conf").c_str(), 1);
    path_ = dir_.file("log.txt");
    setenv("NCCL_DEBUG_FILE", path_.c_str(), 1);
    setThreadRank(0);
    prefix_ = testutil::shortHost() + ":" + std::to_string(getpid()) + ":" +
              std::to_string(gettid());
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    reset();
  }
  // Apply the environment and force the logger to read it.
  void apply(const char* level, const char* subsys = nullptr) {
    if (level) setenv("NCCL_DEBUG", level, 1);
    if (subsys) setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
    reset();
    enabled(Level::kInfo, kInit);
  }
  std::string text() { return readFile(path_); }

  TempDir dir_;
  std::string path_;
  std::string prefix_;  // host:pid:tid of this thread
};

std::string quote(const std::string& s) { return std::regex_replace(s, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)"); }

TEST_F(LogTest, InfoLineShape) {
  apply("INFO", "INIT");
  setThreadRank(3);
  FERRY_INFO(kInit, "hello %d", 42);
  EXPECT_EQ(text(), prefix_ + " [3] NCCL INFO hello 42\n");
}

TEST_F(LogTest, WarnLineShapeWithTimestamp) {
  apply("WARN");
  FERRY_WARN("bad thing %s", "happened");
  std::regex re("\n\\[\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}\\] " + quote(prefix_) +
                " \\[0\\] log_test\\.cc:\\d+ NCCL WARN bad thing happened\n");
  std::string t = text();
  EXPECT_TRUE(std::regex_match(t, re)) << t;
  EXPECT_EQ(lastError(), "bad thing happened");
}

TEST_F(LogTest, TraceLineShape) {
  apply("TRACE", "COLL");
  FERRY_TRACE(kColl, "step %d", 7);
  std::regex re(quote(prefix_) + " \\[0\\] \\d+\\.\\d{6} TestBody:\\d+ NCCL TRACE step 7\n");
  std::string t = text();
  EXPECT_TRUE(std::regex_match(t, re)) << t;
}

TEST_F(LogTest, TraceCallShape) {
  apply("TRACE", "CALL");
  FERRY_TRACE(kCall, "ncclAllReduce(%d)", 1);
  EXPECT_EQ(text(), prefix_ + " NCCL CALL ncclAllReduce(1)\n");
}

TEST_F(LogTest, LevelIsCaseInsensitiveAndFilters) {
  apply("warn", "ALL");
  FERRY_INFO(kInit, "hidden");
  FERRY_TRACE(kInit, "hidden too");
  FERRY_WARN("shown");
  std::string t = text();
  EXPECT_EQ(countOf(t, "hidden"), 0u) << t;
  EXPECT_EQ(countOf(t, "NCCL WARN shown\n"), 1u) << t;
  EXPECT_TRUE(enabled(Level::kWarn, kAll));
  EXPECT_FALSE(enabled(Level::kInfo, kAll));

  apply("Info");
  FERRY_INFO(kInit, "info now");
  FERRY_TRACE(kInit, "trace still hidden");
  t = text();
  EXPECT_EQ(countOf(t, "NCCL INFO info now\n"), 1u) << t;
  EXPECT_EQ(countOf(t, "trace still hidden"), 0u) << t;
}

// INFO/TRACE sites skip the call into the logger under a quieter level
// (mayLog); a reset must lift that ceiling before NCCL_DEBUG is read again,
// or the first INFO line after raising the level would be dropped.
TEST_F(LogTest, LevelCeilingFollowsTheLevelAcrossResets) {
  apply("WARN");
  EXPECT_TRUE(mayLog(Level::kWarn));
  EXPECT_FALSE(mayLog(Level::kInfo));
  FERRY_INFO(kInit, "hidden");
  setenv("NCCL_DEBUG", "INFO", 1);
  reset();  // no enabled() call before the next line: the site itself must ask
  FERRY_INFO(kInit, "shown after reset");
  EXPECT_TRUE(mayLog(Level::kInfo));
  EXPECT_FALSE(mayLog(Level::kTrace));
  std::string t = text();
  EXPECT_EQ(countOf(t, "hidden"), 0u) << t;
  EXPECT_EQ(countOf(t, "NCCL INFO shown after reset\n"), 1u) << t;
  apply("TRACE");
  EXPECT_TRUE(mayLog(Level::kTrace));
}

TEST_F(LogTest, DefaultSubsystems) {
  apply("INFO");
  EXPECT_TRUE(enabled(Level::kInfo, kInit));
  EXPECT_TRUE(enabled(Level::kInfo, kBootstrap));
  EXPECT_TRUE(enabled(Level::kInfo, kEnv));
  EXPECT_FALSE(enabled(Level::kInfo, kColl));
  EXPECT_FALSE(enabled(Level::kInfo, kNet));
}

TEST_F(LogTest, SubsystemFilter) {
  apply("INFO", "coll,NET");
  FERRY_INFO(kColl, "coll line");
  FERRY_INFO(kNet, "net line");
  FERRY_INFO(kInit, "init line");
  FERRY_INFO(kShm, "shm line");
  FERRY_WARN("warn line");  // WARN ignores the subsystem mask
  std::string t = text();
  EXPECT_EQ(countOf(t, "coll line"), 1u) << t;
  EXPECT_EQ(countOf(t, "net line"), 1u) << t;
  EXPECT_EQ(countOf(t, "init line"), 0u) << t;
  EXPECT_EQ(countOf(t, "shm line"), 0u) << t;
  EXPECT_EQ(countOf(t, "warn line"), 1u) << t;
}

TEST_F(LogTest, SubsystemInversion) {
  apply("INFO", "^INIT,ENV");
  FERRY_INFO(kInit, "init line");
  FERRY_INFO(kEnv, "env line");
  FERRY_INFO(kColl, "coll line");
  FERRY_INFO(kRas, "ras line");
  std::string t = text();
  EXPECT_EQ(countOf(t, "init line"), 0u) << t;
  EXPECT_EQ(countOf(t, "env line"), 0u) << t;
  EXPECT_EQ(countOf(t, "coll line"), 1u) << t;
  EXPECT_EQ(countOf(t, "ras line"), 1u) << t;
}

TEST_F(LogTest, LastErrorKeptWhenLevelHidesWarn) {
  apply(nullptr);
  FERRY_WARN("quiet failure %d", 5);
  EXPECT_EQ(lastError(), "quiet failure 5");
  // NCCL_DEBUG unset: the debug file is not even opened.
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(LogTest, TimestampLevelsAndFormat) {
  setenv("NCCL_DEBUG_TIMESTAMP_LEVELS", "INFO", 1);
  setenv("NCCL_DEBUG_TIMESTAMP_FORMAT", "<%Y> ", 1);
  apply("INFO", "INIT");
  FERRY_INFO(kInit, "stamped");
  FERRY_WARN("plain");
  std::string t = text();
  std::regex re("<\\d{4}> " + quote(prefix_) + " \\[0\\] NCCL INFO stamped\n\n" + quote(prefix_) +
                " \\[0\\] log_test\\.cc:\\d+ NCCL WARN plain\n");
  EXPECT_TRUE(std::regex_match(t, re)) << t;
}

TEST_F(LogTest, LongMessageIsTruncated) {
  apply("INFO", "INIT");
  std::string big(3000, 'x');
  FERRY_INFO(kInit, "%s", big.c_str());
  EXPECT_EQ(text(), prefix_ + " [0] NCCL INFO " + std::string(1023, 'x') + "\n");
}

TEST_F(LogTest, FilePatternExpandsHostAndPid) {
  std::string pattern = dir_.file("d.%h.%p.log");
  setenv("NCCL_DEBUG_FILE", pattern.c_str(), 1);
  apply("INFO", "INIT");
  FERRY_INFO(kInit, "to pattern file");
  std::string real =
      dir_.file("d." + testutil::shortHost() + "." + std::to_string(getpid()) + ".log");
  EXPECT_EQ(readFile(real), prefix_ + " [0] NCCL INFO to pattern file\n");
}

TEST_F(LogTest, UnopenableFileFallsBackToStdout) {
  setenv("NCCL_DEBUG_FILE", dir_.file("no/such/dir/log").c_str(), 1);
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  apply("INFO", "INIT");
  FERRY_INFO(kInit, "on stdout");
  std::string out = testing::internal::GetCapturedStdout();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, prefix_ + " [0] NCCL INFO on stdout\n");
  EXPECT_NE(err.find("NCCL WARN Cannot open debug file"), std::string::npos) << err;
  EXPECT_NE(err.find("No such file or directory"), std::string::npos) << err;
}

TEST_F(LogTest, VersionLineOncePerProcess) {
  apply(nullptr);
  versionLine("Ferry version test");  // level NONE: not printed, not spent
  apply("VERSION");
  EXPECT_FALSE(std::filesystem::exists(path_));  // VERSION never uses the debug file
  testing::internal::CaptureStdout();
  versionLine("Ferry version test");
  versionLine("Ferry version test");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "Ferry version test\n");
}

TEST_F(LogTest, ConcurrentLinesStayWhole) {
  apply("INFO", "COLL");
  constexpr int kThreads = 4, kLines = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([t] {
      setThreadRank(t);
      for (int i = 0; i < kLines; i++) FERRY_INFO(kColl, "thread %d line %d", t, i);
    });
  }
  for (auto& th : threads) th.join();
  std::istringstream in(text());
  std::regex re("[^: ]+:\\d+:\\d+ \\[(\\d)\\] NCCL INFO thread (\\d) line \\d+");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, re)) << line;
    EXPECT_EQ(m[1], m[2]);
    n++;
  }
  EXPECT_EQ(n, kThreads * kLines);
}

}  // namespace
}  // namespace ferry::log
