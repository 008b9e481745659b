// Unit tests of the benchmark harness: option parsing, row formatting, the
// exact-sum data and the fork launcher (including its watchdog).
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/demo/bench_data.h"
#include "tools/demo/bench_options.h"
#include "tools/demo/bench_report.h"
#include "tools/demo/fork_launch.h"

namespace ferry::bench {
namespace {

TEST(BenchOptions, ParseSizeSuffixes) {
  size_t b = 0;
  ASSERT_TRUE(parseSize("8", &b));
  EXPECT_EQ(b, 8u);
  ASSERT_TRUE(parseSize("1K", &b));
  EXPECT_EQ(b, 1024u);
  ASSERT_TRUE(parseSize("0.5M", &b));
  EXPECT_EQ(b, 524288u);
  ASSERT_TRUE(parseSize("2G", &b));
  EXPECT_EQ(b, 2147483648u);
  ASSERT_TRUE(parseSize("256m", &b));
  EXPECT_EQ(b, 268435456u);
  EXPECT_FALSE(parseSize("", &b));
  EXPECT_FALSE(parseSize("-1", &b));
  EXPECT_FALSE(parseSize("3X", &b));
  EXPECT_FALSE(parseSize("K", &b));
  EXPECT_FALSE(parseSize("1KB", &b));
}

bool parseArgs(std::vector<const char*> args, Options* o, std::string* err) {
  args.insert(args.begin(), "prog");
  return parseOptions(static_cast<int>(args.size()), const_cast<char**>(args.data()), o, err);
}

TEST(BenchOptions, ParsesEveryOption) {
  Options o;
  std::string err;
  ASSERT_TRUE(parseArgs({"--nranks", "3", "-b", "16", "-e", "4K", "-f", "4", "-n", "7", "-w",
                         "2", "-c", "0", "-r", "9", "-T", "30", "-R", "2"},
                        &o, &err))
      << err;
  EXPECT_EQ(o.nranks, 3);
  EXPECT_EQ(o.minBytes, 16u);
  EXPECT_EQ(o.maxBytes, 4096u);
  EXPECT_EQ(o.stepFactor, 4);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup, 2);
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(o.repeats, 9);
  EXPECT_EQ(o.timeoutSec, 30);
  EXPECT_EQ(o.localRegister, 2);
  EXPECT_FALSE(o.help);
  Options d;
  ASSERT_TRUE(parseArgs({"--local_register", "1"}, &d, &err)) << err;
  EXPECT_EQ(d.localRegister, 1);
  EXPECT_EQ(Options().localRegister, 0);
}

TEST(BenchOptions, RejectsBadInput) {
  Options o;
  std::string err;
  EXPECT_FALSE(parseArgs({"-n", "abc"}, &o, &err));
  EXPECT_EQ(err, "invalid value 'abc' for -n");
  EXPECT_FALSE(parseArgs({"--nranks", "0"}, &o, &err));
  EXPECT_FALSE(parseArgs({"-b", "1M", "-e", "1K"}, &o, &err));
  EXPECT_EQ(err, "minbytes (-b) is larger than maxbytes (-e)");
  EXPECT_FALSE(parseArgs({"-q"}, &o, &err));
  EXPECT_FALSE(parseArgs({"-b"}, &o, &err));
  EXPECT_FALSE(parseArgs({"stray"}, &o, &err));
  for (const char* bad : {"3", "-1", "x", "01"}) {
    EXPECT_FALSE(parseArgs({"-R", bad}, &o, &err)) << bad;
    EXPECT_EQ(err, std::string("invalid value '") + bad +
                       "' for -R (0 none, 1 ncclCommRegister, 2 ncclCommWindowRegister)");
  }
}

TEST(BenchOptions, SweepSizes) {
  Options o;
  o.minBytes = 8;
  o.maxBytes = 64;
  o.stepFactor = 2;
  EXPECT_EQ(sweepSizes(o, 4), (std::vector<size_t>{8, 16, 32, 64}));
  o.minBytes = 6;
  o.maxBytes = 20;
  o.stepFactor = 1;
  o.stepBytes = 5;
  EXPECT_EQ(sweepSizes(o, 4), (std::vector<size_t>{4, 8, 16}));
  o.minBytes = 0;
  o.stepFactor = 2;
  EXPECT_EQ(sweepSizes(o, 4), (std::vector<size_t>{0}));
}

TEST(BenchReport, TimeColumnKeepsSevenCharacters) {
  EXPECT_EQ(formatTime(1.234), "   1.23");
  EXPECT_EQ(formatTime(1234.567), "1234.57");
  EXPECT_EQ(formatTime(12345.67), "12345.7");
  EXPECT_EQ(formatTime(1234567.8), "1234568");
  EXPECT_EQ(formatTime(1.5e7), "1.5e+07");
}

// FERRY_PERF_TIME_DECIMALS (perf/compare): more decimals below 100 us only,
// wider than 7 characters where they need it.
TEST(BenchReport, TimeColumnTakesMoreDecimalsWhenAsked) {
  EXPECT_EQ(formatTime(0.06126, 4), " 0.0613");
  EXPECT_EQ(formatTime(12.5, 5), "12.50000");
  EXPECT_EQ(formatTime(1234.567, 4), "1234.57");
  EXPECT_EQ(formatTime(0.06126, 2), "   0.06");
}

TEST(BenchReport, RowMatchesNcclTestsLayout) {
  Half h;
  h.timeUs = 1234.56;
  h.algbw = 108.71;
  h.busbw = 190.25;
  h.wrong = 0;
  std::string row = formatRowPrefix(134217728, 33554432, "float", "sum", -1) + formatHalf(h);
  EXPECT_EQ(row,
            "   134217728      33554432     float     sum      -1  1234.56  108.71  190.25       0");
  h.wrong = -1;
  EXPECT_EQ(formatHalf(h), "  1234.56  108.71  190.25     N/A");
}

TEST(BenchReport, BusBandwidth) {
  EXPECT_DOUBLE_EQ(allReduceBusFactor(1), 0.0);
  EXPECT_DOUBLE_EQ(allReduceBusFactor(2), 1.0);
  EXPECT_DOUBLE_EQ(allReduceBusFactor(4), 1.5);
  Half h = makeHalf(1000000000, 0.5, allReduceBusFactor(4), 0, 0);
  EXPECT_DOUBLE_EQ(h.timeUs, 500000.0);
  EXPECT_DOUBLE_EQ(h.algbw, 2.0);
  EXPECT_DOUBLE_EQ(h.busbw, 3.0);
}

TEST(BenchReport, FooterCountsFailedChecksAndAveragesEveryHalf) {
  char* text = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  ASSERT_NE(f, nullptr);
  Report r(f, "all_reduce_perf");
  r.row(8, 2, "float", "sum", -1, makeHalf(8, 1e-6, 1.0, 0, 0), makeHalf(8, 2e-6, 1.0, 0, 0));
  r.row(16, 4, "float", "sum", -1, makeHalf(16, 1e-6, 1.0, 3, 2), makeHalf(16, 1e-6, 1.0, 0, 0));
  r.footer();
  std::fclose(f);
  std::string out(text, len);
  std::free(text);
  EXPECT_EQ(r.outOfBounds(), 2);
  // busbw: 0.008, 0.004, 0.016, 0.016 GB/s -> mean 0.011
  EXPECT_NEAR(r.avgBusBw(), 0.011, 1e-12);
  EXPECT_NE(out.find("# Out of bounds values : 2 FAILED\n"), std::string::npos) << out;
  EXPECT_NE(out.find("# Avg bus bandwidth    : 0.011\n"), std::string::npos) << out;
}

TEST(BenchData, SumsAreExactIntegers) {
  for (int n = 1; n <= 8; ++n) {
    for (size_t i = 0; i < 2000; ++i) {
      double sum = 0;
      for (int r = 0; r < n; ++r) {
        int32_t v = inputInt(5, r, i);
        ASSERT_GE(v, -512);
        ASSERT_LE(v, 511);
        sum += v;
      }
      ASSERT_EQ(static_cast<double>(expectedSum(5, n, i)), sum);
    }
  }
}

TEST(BenchData, CountWrongSeesEveryBitDifference) {
  const int n = 3;
  const uint64_t seed = 42;
  std::vector<float> buf(4096);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = expectedSum(seed, n, i);
  EXPECT_EQ(countWrong(buf.data(), buf.size(), seed, n), 0);
  buf[10] += 1.0f;
  buf[4000] = std::nextafter(buf[4000], 1e9f);
  EXPECT_EQ(countWrong(buf.data(), buf.size(), seed, n), 2);
  // A zero sum must be +0: -0 compares equal as a float but not as bits.
  size_t zero = 0;
  while (expectedSum(seed, n, zero) != 0.0f) ++zero;
  buf[zero] = -0.0f;
  EXPECT_EQ(countWrong(buf.data(), buf.size(), seed, n), 3);
}

TEST(BenchData, InputsDependOnSeedAndRank) {
  int sameSeed = 0, sameRank = 0;
  for (size_t i = 0; i < 1000; ++i) {
    sameSeed += inputInt(1, 0, i) == inputInt(2, 0, i);
    sameRank += inputInt(1, 0, i) == inputInt(1, 1, i);
  }
  EXPECT_LT(sameSeed, 20);  // 1024 values: about 1 in 1024 collide by chance
  EXPECT_LT(sameRank, 20);
}

TEST(ForkLaunch, BlobBarrierAndSlots) {
  int code = forkLaunch(4, 60, [](RankContext& ctx) {
    int blob[4] = {0, 0, 0, 0};
    if (ctx.rank() == 0) {
      int mine[4] = {11, 22, 33, 44};
      if (!ctx.publish(mine, sizeof mine)) return 20;
      std::memcpy(blob, mine, sizeof mine);
    } else if (!ctx.receive(blob, sizeof blob)) {
      return 21;
    }
    if (blob[0] != 11 || blob[3] != 44) return 22;
    for (int round = 0; round < 50; ++round) {
      ctx.slot(ctx.rank()).value = round * 10 + ctx.rank();
      if (!ctx.barrier()) return 23;
      double sum = 0;
      for (int r = 0; r < ctx.nranks(); ++r) sum += ctx.slot(r).value;
      if (sum != round * 40 + 6) return 24;  // every rank sees every post of this round
      if (!ctx.barrier()) return 25;
    }
    return 0;
  });
  EXPECT_EQ(code, 0);
}

TEST(ForkLaunch, FirstFailureWinsAndAbortsTheOthers) {
  int code = forkLaunch(3, 60, [](RankContext& ctx) {
    if (ctx.rank() == 2) return 7;
    // The others wait for a barrier rank 2 never joins; the launcher's abort
    // flag must release them well before the deadline.
    return ctx.barrier() ? 0 : 5;
  });
  EXPECT_EQ(code, 7);
}

TEST(ForkLaunch, WatchdogKillsHungRanks) {
  auto t0 = std::chrono::steady_clock::now();
  int code = forkLaunch(2, 1, [](RankContext& ctx) {
    if (ctx.rank() == 1) {
      for (;;) pause();  // ignores the abort flag, like a rank stuck in a syscall
    }
    return 0;
  });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(code, kExitTimeout);
  EXPECT_LT(secs, 10.0);
}

TEST(ForkLaunch, CrashedRankReportsItsSignal) {
  int code = forkLaunch(2, 60, [](RankContext& ctx) {
    if (ctx.rank() == 1) raise(SIGKILL);
    return 0;
  });
  EXPECT_EQ(code, 128 + SIGKILL);
}

// The CPUs this process may run on, in order.
std::vector<int> allowedCpus() {
  cpu_set_t set;
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// Launches n ranks with FERRY_LAUNCH_BIND=mode (nullptr: unset); each rank
// returns 0 when its affinity is what `want` says for it: exactly CPU
// want[r], or (want[r] == -1) the launcher's whole set.
int launchAndCheck(const char* mode, int n, const std::vector<int>& want) {
  if (mode) {
    setenv("FERRY_LAUNCH_BIND", mode, 1);
  } else {
    unsetenv("FERRY_LAUNCH_BIND");
  }
  std::vector<int> parent = allowedCpus();
  int code = forkLaunch(n, 60, [&](RankContext& ctx) {
    std::vector<int> mine = allowedCpus();
    int w = want[static_cast<size_t>(ctx.rank())];
    if (w < 0) return mine == parent ? 0 : 30;
    return mine.size() == 1 && mine[0] == w ? 0 : 31;
  });
  unsetenv("FERRY_LAUNCH_BIND");
  return code;
}

TEST(ForkLaunch, BindsRanksToCoresAsMpirunDoes) {
  std::vector<int> cpus = allowedCpus();
  ASSERT_FALSE(cpus.empty());
  int k = static_cast<int>(cpus.size());
  if (k < 2) GTEST_SKIP() << "one allowed CPU: nothing to spread ranks over";
  // auto (also unset): 2..k ranks get a core each, in order.
  EXPECT_EQ(launchAndCheck(nullptr, 2, {cpus[0], cpus[1]}), 0);
  EXPECT_EQ(launchAndCheck("auto", 2, {cpus[0], cpus[1]}), 0);
  // auto: more ranks than cores, or a single rank, stay unbound.
  EXPECT_EQ(launchAndCheck("auto", k + 1, std::vector<int>(static_cast<size_t>(k + 1), -1)), 0);
  EXPECT_EQ(launchAndCheck("auto", 1, {-1}), 0);
  // core: always, wrapping around the allowed CPUs.
  std::vector<int> wrap;
  for (int r = 0; r <= k; ++r) wrap.push_back(cpus[static_cast<size_t>(r % k)]);
  EXPECT_EQ(launchAndCheck("core", k + 1, wrap), 0);
  // none, and a value the launcher does not know (it says so), bind nothing.
  EXPECT_EQ(launchAndCheck("none", 2, {-1, -1}), 0);
  EXPECT_EQ(launchAndCheck("sockets", 2, {-1, -1}), 0);
}

TEST(ForkLaunch, RejectsBadRankCount) {
  EXPECT_EQ(forkLaunch(0, 10, [](RankContext&) { return 0; }), kExitUsage);
}

}  // namespace
}  // namespace ferry::bench
