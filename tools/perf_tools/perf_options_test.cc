// Option parsing of the perf tools: every option, its default, and the
// outcome for invalid values (kUsage -> exit 255, kNotImplemented -> exit 5);
// also the -I statistics and the host/device buffer choice.
#include "tools/perf_tools/perf_options.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/perf_tools/perf_data.h"
#include "tools/perf_tools/perf_iter.h"
#include "tools/perf_tools/perf_mem.h"

namespace ferry::perf {
namespace {

ParseResult parse(std::vector<std::string> args, PerfOptions* o, std::string* err = nullptr) {
  args.insert(args.begin(), "all_reduce_perf");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string e;
  ParseResult r = parsePerfOptions(static_cast<int>(args.size()), argv.data(), o, &e);
  if (err != nullptr) *err = e;
  return r;
}

TEST(PerfOptions, DefaultsAreNcclTests) {
  PerfOptions o;
  ASSERT_EQ(parse({}, &o), ParseResult::kOk);
  EXPECT_EQ(o.nranks, 1);
  EXPECT_EQ(o.minBytes, 32u << 20);
  EXPECT_EQ(o.maxBytes, 32u << 20);
  EXPECT_EQ(o.stepFactor, 1);
  EXPECT_EQ(o.stepBytes, 1u << 20);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.aggIters, 1);
  EXPECT_EQ(o.warmup, 1);
  EXPECT_EQ(o.runCycles, 1);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.ops, std::vector<int>{kOpSum});
  EXPECT_EQ(o.types, std::vector<int>{7});  // float
  EXPECT_EQ(o.root, 0);
  EXPECT_EQ(o.blocking, 0);
  EXPECT_EQ(o.average, 1);
  EXPECT_EQ(o.unalign, 0);
  EXPECT_FALSE(o.cpuTime);
  EXPECT_EQ(o.timeoutSec, 0);
  EXPECT_TRUE(o.jsonFile.empty());
  EXPECT_FALSE(o.help);
  EXPECT_TRUE(o.notes.empty());
}

TEST(PerfOptions, EveryOptionShortForm) {
  PerfOptions o;
  ASSERT_EQ(
      parse({"--nranks", "3",  "-t", "1",  "-g", "1",   "-b", "8",        "-e",       "128M", "-i",
             "2K",       "-f", "2",  "-n", "7",  "-m",  "4",  "-w",       "3",        "-N",   "2",
             "-p",       "1",  "-c", "5",  "-o", "max", "-d", "bfloat16", "-r",       "-1",   "-z",
             "1",        "-a", "3",  "-C", "1",  "-T",  "30", "-J",       "out.json", "-u",   "3"},
            &o),
      ParseResult::kOk);
  EXPECT_EQ(o.nranks, 3);
  EXPECT_EQ(o.minBytes, 8u);
  EXPECT_EQ(o.maxBytes, 128u << 20);
  EXPECT_EQ(o.stepBytes, 2048u);
  EXPECT_EQ(o.stepFactor, 2);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.aggIters, 4);
  EXPECT_EQ(o.warmup, 3);
  EXPECT_EQ(o.runCycles, 2);
  EXPECT_EQ(o.check, 5);
  EXPECT_EQ(o.ops, std::vector<int>{kOpMax});
  EXPECT_EQ(o.types, std::vector<int>{9});
  EXPECT_EQ(o.root, -1);
  EXPECT_EQ(o.blocking, 1);
  EXPECT_EQ(o.average, 3);
  EXPECT_TRUE(o.cpuTime);
  EXPECT_EQ(o.timeoutSec, 30);
  EXPECT_EQ(o.jsonFile, "out.json");
  EXPECT_EQ(o.unalign, 3);
}

TEST(PerfOptions, CsvAndCorruptLongOnly) {
  PerfOptions o;
  ASSERT_EQ(parse({"--csv", "rows.csv", "--corrupt-for-test", "--output_file", "r.json"}, &o),
            ParseResult::kOk);
  EXPECT_EQ(o.csvFile, "rows.csv");
  EXPECT_EQ(o.jsonFile, "r.json");
  EXPECT_TRUE(o.corruptForTest);
  EXPECT_FALSE(o.hangForTest);
  PerfOptions hang;
  ASSERT_EQ(parse({"--hang-for-test"}, &hang), ParseResult::kOk);
  EXPECT_TRUE(hang.hangForTest);
  PerfOptions e;
  EXPECT_EQ(parse({"--csv", ""}, &e), ParseResult::kUsage);
  PerfOptions h;
  ASSERT_EQ(parse({"-h"}, &h), ParseResult::kOk);
  EXPECT_TRUE(h.help);
}

TEST(PerfOptions, Store) {
  PerfOptions o;
  ASSERT_EQ(parse({"--store", "node-1.example:29500"}, &o), ParseResult::kOk);
  EXPECT_EQ(o.storeHost, "node-1.example");
  EXPECT_EQ(o.storePort, 29500);
  PerfOptions none;
  ASSERT_EQ(parse({}, &none), ParseResult::kOk);
  EXPECT_EQ(none.storeHost, "");
  EXPECT_EQ(none.storePort, 0);
  for (const char* bad : {"host", ":29500", "host:", "host:0", "host:65536", "host:12x"}) {
    PerfOptions e;
    std::string err;
    EXPECT_EQ(parse({"--store", bad}, &e, &err), ParseResult::kUsage) << bad;
  }
}

TEST(PerfOptions, LongForms) {
  PerfOptions o;
  ASSERT_EQ(parse({"--minbytes", "1K",   "--maxbytes",     "0.5M",  "--stepfactor", "4",
                   "--iters",    "3",    "--warmup_iters", "0",     "--check",      "0",
                   "--op",       "prod", "--datatype",     "int64", "--root",       "0",
                   "--average",  "0",    "--timeout",      "9",     "--agg_iters",  "2",
                   "--blocking", "2",    "--nthreads",     "1",     "--ngpus",      "1"},
                  &o),
            ParseResult::kOk);
  EXPECT_EQ(o.minBytes, 1024u);
  EXPECT_EQ(o.maxBytes, 512u * 1024);
  EXPECT_EQ(o.stepFactor, 4);
  EXPECT_EQ(o.iters, 3);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(o.ops, std::vector<int>{kOpProd});
  EXPECT_EQ(o.types, std::vector<int>{4});
  EXPECT_EQ(o.average, 0);
  EXPECT_EQ(o.timeoutSec, 9);
  EXPECT_EQ(o.aggIters, 2);
  EXPECT_EQ(o.blocking, 2);
}

TEST(PerfOptions, AllTypesAndOpsInNcclOrder) {
  PerfOptions o;
  ASSERT_EQ(parse({"-d", "all", "-o", "all"}, &o), ParseResult::kOk);
  EXPECT_EQ(o.types, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(o.ops, (std::vector<int>{0, 1, 2, 3, 4}));
  const char* names[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                         "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  for (int t = 0; t < 12; ++t) {
    PerfOptions p;
    ASSERT_EQ(parse({"-d", names[t]}, &p), ParseResult::kOk) << names[t];
    EXPECT_EQ(p.types, std::vector<int>{t});
    EXPECT_STREQ(typeName(t), names[t]);
  }
  const char* ops[] = {"sum", "prod", "max", "min", "avg"};
  for (int k = 0; k < 5; ++k) {
    PerfOptions p;
    ASSERT_EQ(parse({"-o", ops[k]}, &p), ParseResult::kOk);
    EXPECT_EQ(p.ops, std::vector<int>{k});
    EXPECT_STREQ(opName(k), ops[k]);
  }
}

TEST(PerfOptions, GpuOnlyOptionsAreNotedNotRejected) {
  PerfOptions o;
  ASSERT_EQ(parse({"-G", "10", "-D", "1", "-y", "1", "-x", "1", "-V", "8", "-M", "1", "-K", "2",
                   "-S", "1"},
                  &o),
            ParseResult::kOk);
  ASSERT_EQ(o.notes.size(), 6u);
  EXPECT_TRUE(o.cudaGraph);
  EXPECT_TRUE(o.timestamps);
  EXPECT_EQ(o.perIterSkip, 2);
  for (const auto& n : o.notes) EXPECT_NE(n.find("host memory"), std::string::npos) << n;
  PerfOptions zero;
  ASSERT_EQ(parse({"-G", "0", "-R", "0", "-y", "0"}, &zero), ParseResult::kOk);
  EXPECT_TRUE(zero.notes.empty());
}

// -R registers host buffers (so no parse-time note); only 0, 1 and 2 exist.
TEST(PerfOptions, LocalRegister) {
  PerfOptions d;
  ASSERT_EQ(parse({}, &d), ParseResult::kOk);
  EXPECT_EQ(d.localRegister, 0);
  PerfOptions one;
  ASSERT_EQ(parse({"-R", "1"}, &one), ParseResult::kOk);
  EXPECT_EQ(one.localRegister, 1);
  EXPECT_TRUE(one.notes.empty());
  PerfOptions two;
  ASSERT_EQ(parse({"--local_register", "2"}, &two), ParseResult::kOk);
  EXPECT_EQ(two.localRegister, 2);
  for (const char* bad : {"3", "-1", "x", "1x", ""}) {
    PerfOptions b;
    std::string err;
    EXPECT_EQ(parse({"-R", bad}, &b, &err), ParseResult::kUsage) << bad;
    EXPECT_EQ(err, std::string("invalid value '") + bad +
                       "' for -R (0 none, 1 ncclCommRegister, 2 ncclCommWindowRegister)");
  }
}

TEST(PerfOptions, TimestampsAndPerIterationTiming) {
  PerfOptions d;
  ASSERT_EQ(parse({}, &d), ParseResult::kOk);
  EXPECT_FALSE(d.timestamps);
  EXPECT_FALSE(d.perIter);
  EXPECT_EQ(d.perIterSkip, 0);
  EXPECT_FALSE(d.hostBuffers);
  PerfOptions o;
  ASSERT_EQ(parse({"--report_timestamps", "1", "--per_iter_timing", "1", "--per_iter_skip", "3",
                   "-n", "4", "--host-buffers"},
                  &o),
            ParseResult::kOk);
  EXPECT_TRUE(o.timestamps);
  EXPECT_TRUE(o.perIter);
  EXPECT_EQ(o.perIterSkip, 3);
  EXPECT_TRUE(o.hostBuffers);
  EXPECT_TRUE(o.notes.empty());
  std::string err;
  PerfOptions g;
  EXPECT_EQ(parse({"-I", "1", "-G", "2"}, &g, &err), ParseResult::kUsage);
  EXPECT_NE(err.find("cannot be combined with -G"), std::string::npos) << err;
  PerfOptions k;
  EXPECT_EQ(parse({"-I", "1", "-K", "4", "-n", "4"}, &k, &err), ParseResult::kUsage);
  EXPECT_NE(err.find("-K 4 skips every one of the 4 iterations"), std::string::npos) << err;
  for (const char* bad : {"2", "-1", "x"}) {
    PerfOptions b;
    EXPECT_EQ(parse({"-S", bad}, &b), ParseResult::kUsage) << bad;
    EXPECT_EQ(parse({"-I", bad}, &b), ParseResult::kUsage) << bad;
  }
}

TEST(PerfOptions, InvalidValuesAreUsageErrors) {
  const std::vector<std::vector<std::string>> bad = {{"-b", "x"},
                                                     {"-e", "-1"},
                                                     {"-b", "2K", "-e", "1K"},
                                                     {"-i", "0"},
                                                     {"-f", "x"},
                                                     {"-n", "0"},
                                                     {"-m", "0"},
                                                     {"-w", "-1"},
                                                     {"-c", "-1"},
                                                     {"-o", "mulsum"},
                                                     {"-d", "fp32"},
                                                     {"-r", "-2"},
                                                     {"-z", "4"},
                                                     {"-a", "4"},
                                                     {"-C", "2"},
                                                     {"-T", "-1"},
                                                     {"-G", "x"},
                                                     {"-p", "2"},
                                                     {"--nranks", "0"},
                                                     {"--nranks", "x"},
                                                     {"-t", "0"},
                                                     {"-u", "-1"},
                                                     {"-g", "0"},
                                                     {"--bogus"},
                                                     {"-b"},
                                                     {"extra"},
                                                     {"--nranks", "2", "-r", "2"}};
  for (const auto& args : bad) {
    PerfOptions o;
    std::string err;
    EXPECT_EQ(parse(args, &o, &err), ParseResult::kUsage) << args[0];
    EXPECT_FALSE(err.empty()) << args[0];
  }
}

TEST(PerfOptions, UnsupportedCountsAreNotImplemented) {
  PerfOptions o;
  std::string err;
  EXPECT_EQ(parse({"-g", "2"}, &o, &err), ParseResult::kNotImplemented);
  EXPECT_NE(err.find("host memory has no GPUs"), std::string::npos);
  EXPECT_EQ(parse({"-t", "4"}, &o, &err), ParseResult::kNotImplemented);
  EXPECT_NE(err.find("--nranks"), std::string::npos);
  EXPECT_EQ(parse({"-N", "0"}, &o, &err), ParseResult::kNotImplemented);
}

TEST(PerfOptions, SweepSizes) {
  PerfOptions o;
  ASSERT_EQ(parse({"-b", "8", "-e", "64", "-f", "2"}, &o), ParseResult::kOk);
  EXPECT_EQ(perfSizes(o), (std::vector<size_t>{8, 16, 32, 64}));
  PerfOptions a;
  ASSERT_EQ(parse({"-b", "1K", "-e", "3K", "-i", "1K"}, &a), ParseResult::kOk);
  EXPECT_EQ(perfSizes(a), (std::vector<size_t>{1024, 2048, 3072}));
}

TEST(PerfData, EncodingIsExactForEveryType) {
  // Small integers round trip through every type, including fp8.
  for (int t = 0; t < 12; ++t) {
    unsigned char buf[8] = {};
    for (uint64_t v : {0ull, 1ull, 2ull, 7ull, 8ull}) {
      encode(v, t, buf);
      EXPECT_EQ(decode(t, buf), static_cast<double>(v)) << typeName(t) << " " << v;
    }
  }
  unsigned char h[2];
  encode(1, 6, h);  // half 1.0 = 0x3C00
  EXPECT_EQ(h[0] | (h[1] << 8), 0x3C00);
  encode(1, 9, h);  // bfloat16 1.0 = 0x3F80
  EXPECT_EQ(h[0] | (h[1] << 8), 0x3F80);
  unsigned char b;
  encode(1, 10, &b);  // e4m3 1.0 = 0x38
  EXPECT_EQ(b, 0x38);
  encode(1, 11, &b);  // e5m2 1.0 = 0x3C
  EXPECT_EQ(b, 0x3C);
}


// Buffer placement: without a loadable CUDA runtime (or when asked) the
// tools fall back to host memory with a one-line note, and the host path
// is the identity: the "mirror" is the buffer, copies are no-ops.
TEST(PerfMem, NoCudaRuntimeMeansHostBuffers) {
  PerfMem mem;
  std::string note;
  ASSERT_TRUE(mem.init("libferry-test-no-such-cudart.so", false, 0, &note));
  EXPECT_FALSE(mem.device());
  EXPECT_EQ(mem.deviceIndex(), -1);
  EXPECT_EQ(mem.stream(), nullptr);
  EXPECT_EQ(note,
            "buffers in host memory (no CUDA runtime: libferry-test-no-such-cudart.so cannot be "
            "loaded)");
  unsigned char* p = mem.alloc(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], 0) << i;
  EXPECT_EQ(mem.host(p + 10), p + 10);
  EXPECT_TRUE(mem.upload(p, 1000));
  EXPECT_TRUE(mem.download(p, 1000));
  EXPECT_TRUE(mem.sync());
}

TEST(PerfMem, HostBuffersOnRequest) {
  PerfMem mem;
  std::string note;
  ASSERT_TRUE(mem.init("libcudart.so", true, 0, &note));
  EXPECT_FALSE(mem.device());
  EXPECT_EQ(note, "buffers in host memory (asked for with --host-buffers or FERRY_PERF_HOST=1)");
  unsetenv("FERRY_PERF_HOST");
  EXPECT_FALSE(hostBuffersFromEnv());
  setenv("FERRY_PERF_HOST", "1", 1);
  EXPECT_TRUE(hostBuffersFromEnv());
  setenv("FERRY_PERF_HOST", "0", 1);
  EXPECT_FALSE(hostBuffersFromEnv());
  unsetenv("FERRY_PERF_HOST");
}

TEST(PerfIter, StatisticsAsNcclTests) {
  IterStats s = computeIterStats({5, 1, 3, 2, 4});
  EXPECT_EQ(s.minUs, 1);
  EXPECT_EQ(s.maxUs, 5);
  EXPECT_EQ(s.p50Us, 3);
  EXPECT_EQ(s.p95Us, 5);  // sorted[ceil(5 * 0.95) - 1]
  EXPECT_EQ(s.p99Us, 5);
  EXPECT_EQ(s.avgUs, 3);
  EXPECT_DOUBLE_EQ(s.stdevUs, std::sqrt(2.0));  // population
  EXPECT_DOUBLE_EQ(s.cvPct, std::sqrt(2.0) / 3 * 100);
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  IterStats h = computeIterStats(hundred);
  EXPECT_EQ(h.p50Us, 51);
  EXPECT_EQ(h.p95Us, 95);
  EXPECT_EQ(h.p99Us, 99);
}

TEST(PerfIter, MaxOverRanksThenSkip) {
  IterReport r = makeIterReport({{1, 9, 3, 8}, {4, 2, 3, 1}}, 1);
  EXPECT_TRUE(r.present);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(r.timesUs, (std::vector<double>{4, 9, 3, 8}));
  EXPECT_EQ(r.stats.minUs, 3);  // iteration 0 (4) is skipped
  EXPECT_EQ(r.stats.maxUs, 9);
  EXPECT_EQ(r.stats.p50Us, 8);
  EXPECT_EQ(formatIterColumns(r.stats).size(), 4u * 9u);
  EXPECT_EQ(formatIterColumns(r.stats).substr(0, 18), "     3.00     9.00");
  std::string j = iterJson(r);
  EXPECT_NE(j.find("\"skipped_iterations\": 1, \"min_us\": 3.000, \"max_us\": 9.000"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"times_us\": [4.000, 9.000, 3.000, 8.000]"), std::string::npos) << j;
  EXPECT_NE(j.find("\"per_process_max_times_us\": [[1.000, 9.000, 3.000, 8.000], "
                   "[4.000, 2.000, 3.000, 1.000]]"),
            std::string::npos)
      << j;
  // One rank: no per-process list, as nccl-tests.
  EXPECT_EQ(iterJson(makeIterReport({{2, 2}}, 0)).find("per_process"), std::string::npos);
}

}  // namespace
}  // namespace ferry::perf
