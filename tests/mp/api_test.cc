// Public API and communicator lifecycle through libferry.so (forked ranks):
// ncclGetVersion, ncclGetErrorString for every code, ncclCommCount /
// UserRank / CuDevice, ncclCommInitAll with a grouped AllReduce over all
// comms from one thread, ncclCommSplit (color/key ordering and
// NCCL_SPLIT_NOCOLOR), nonblocking init/collective/finalize polled with
// ncclCommGetAsyncError, ncclCommInitRankConfig with a NULL config,
// Finalize + Destroy, Abort, nested groups, ncclGroupSimulateEnd,
// ncclMemAlloc/Free, ncclCommRegister/Deregister, ncclGetLastError.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include <cstring>
#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

static_assert(NCCL_VERSION_CODE == 22809, "nccl.h must describe NCCL 2.28.9");
static_assert(NCCL_VERSION(2, 28, 9) == 22809, "NCCL_VERSION old encoding");
static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");
static_assert(sizeof(ncclConfig_t) == 80, "ncclConfig_t (v22800) is 80 bytes");
static_assert(sizeof(ncclSimInfo_t) == 24, "ncclSimInfo_t is 24 bytes");

RunOptions opts(int timeoutSec, bool id = true) {
  RunOptions o;
  o.timeoutSec = timeoutSec;
  o.makeUniqueId = id;
  o.env["FERRY_TIMEOUT_MS"] = "20000";
  return o;
}

// Polls ncclCommGetAsyncError until the comm leaves ncclInProgress.
ncclResult_t waitAsync(ncclComm_t comm, int timeoutMs = 30000) {
  int64_t deadline = monoNs() + int64_t(timeoutMs) * 1000000;
  ncclResult_t st = ncclInProgress;
  while (monoNs() < deadline) {
    ncclResult_t r = ncclCommGetAsyncError(comm, &st);
    if (r != ncclSuccess) return r;
    if (st != ncclInProgress) return st;
    usleep(1000);
  }
  return ncclInProgress;
}

// The test-side codecs against known bit patterns (no Ferry involved), so a
// codec bug cannot hide behind a matching library bug.
TEST(MpCodec, KnownBitPatterns) {
  struct Case {
    ncclDataType_t dt;
    double v;
    uint32_t bits;
  };
  const Case cases[] = {
      {ncclFloat16, 1.0, 0x3C00},    {ncclFloat16, -2.0, 0xC000},   {ncclFloat16, 2048.0, 0x6800},
      {ncclBfloat16, 1.0, 0x3F80},   {ncclBfloat16, -3.0, 0xC040},  {ncclBfloat16, 256.0, 0x4380},
      {ncclFloat8e4m3, 1.0, 0x38},   {ncclFloat8e4m3, 16.0, 0x58},  {ncclFloat8e4m3, -0.125, 0xA0},
      {ncclFloat8e4m3, 448.0, 0x7E}, {ncclFloat8e5m2, 1.0, 0x3C},   {ncclFloat8e5m2, -8.0, 0xC8},
      {ncclFloat8e5m2, 5.0, 0x45},   {ncclFloat8e5m2, 0.25, 0x34},  {ncclFloat8e5m2, 0.0, 0x00},
  };
  for (const Case& c : cases) {
    uint32_t got = 0;
    encodeValue(c.dt, c.v, &got, 0);  // little-endian: low bytes hold the value
    EXPECT_EQ(got, c.bits) << dtypeName(c.dt) << " " << c.v;
    EXPECT_EQ(decodeValue(c.dt, &c.bits, 0), c.v) << dtypeName(c.dt) << " " << c.v;
  }
  // Every generated input is exact: a round trip through each type is the identity.
  for (ncclDataType_t dt : kAllTypes)
    for (TestOp op : kAllOps)
      for (int n : {1, 3, 4, 8}) {
        RedCase rc{dt, op, n};
        if (!redCaseExact(rc)) continue;
        for (size_t i = 0; i < 64; ++i) {
          unsigned char buf[8];
          encodeValue(dt, redExpected(rc, i), buf, 0);
          ASSERT_EQ(decodeValue(dt, buf, 0), redExpected(rc, i)) << dtypeName(dt) << " " << opName(op) << " n=" << n;
        }
      }
}

TEST(MpApi, VersionAndErrorStrings) {
  RunResult res = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        int v = 0;
        MP_NCCL(ncclGetVersion(&v));
        MP_CHECK(v == 22809, "ncclGetVersion gave %d", v);
        // Codes as ints: 99 is outside ncclResult_t's range, and loading it
        // from an ncclResult_t array is undefined (UBSan: invalid enum load).
        const std::pair<int, const char*> table[] = {
            {ncclSuccess, "no error"},
            {ncclUnhandledCudaError, "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"},
            {ncclSystemError, "unhandled system error (run with NCCL_DEBUG=INFO for details)"},
            {ncclInternalError, "internal error - please report this issue to the NCCL developers"},
            {ncclInvalidArgument, "invalid argument (run with NCCL_DEBUG=WARN for details)"},
            {ncclInvalidUsage, "invalid usage (run with NCCL_DEBUG=WARN for details)"},
            {ncclRemoteError, "remote process exited or there was a network error"},
            {ncclInProgress, "NCCL operation in progress"},
            {ncclNumResults, "unknown result code"},
            {99, "unknown result code"},
        };
        for (const auto& [code, text] : table) {
          const char* s = ncclGetErrorString(static_cast<ncclResult_t>(code));
          MP_CHECK(s && std::strcmp(s, text) == 0, "ncclGetErrorString(%d) = \"%s\", expected \"%s\"", int(code),
                   s ? s : "(null)", text);
        }
        return 0;
      },
      opts(30, false));
  EXPECT_RANKS_OK(res);
}

TEST(MpApi, CommQueries) {
  RunResult res = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          int count = -1, r = -1, dev = -1;
          MP_NCCL(ncclCommCount(me.comm, &count));
          MP_NCCL(ncclCommUserRank(me.comm, &r));
          MP_NCCL(ncclCommCuDevice(me.comm, &dev));
          MP_CHECK(count == me.nranks, "count %d", count);
          MP_CHECK(r == me.rank, "user rank %d", r);
          MP_CHECK(dev >= 0, "cuDevice %d", dev);
          return 0;
        });
      },
      opts(60));
  EXPECT_RANKS_OK(res);
}

TEST(MpApi, InitAllAndGroupedAllReduceFromOneThread) {
  RunResult res = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        constexpr int kN = 4;
        ncclComm_t comms[kN] = {};
        MP_NCCL(ncclCommInitAll(comms, kN, nullptr));
        for (int i = 0; i < kN; ++i) {
          int count = -1, r = -1;
          MP_NCCL(ncclCommCount(comms[i], &count));
          MP_NCCL(ncclCommUserRank(comms[i], &r));
          MP_CHECK(count == kN && r == i, "comm %d: count %d rank %d", i, count, r);
        }
        const size_t c = 4099;
        RedCase rc{ncclFloat32, TestOp::kSum, kN};
        std::vector<std::unique_ptr<HostBuf>> in, out;
        for (int i = 0; i < kN; ++i) {
          in.push_back(std::make_unique<HostBuf>(ncclFloat32, c));
          out.push_back(std::make_unique<HostBuf>(ncclFloat32, c));
          in[i]->fill([&](size_t k) { return redInput(rc, i, k); });
          out[i]->fill(sentinelValue(ncclFloat32));
        }
        MP_NCCL(ncclGroupStart());
        for (int i = 0; i < kN; ++i)
          MP_NCCL(ncclAllReduce(in[i]->data(), out[i]->data(), c, ncclFloat32, ncclSum, comms[i], nullptr));
        MP_NCCL(ncclGroupEnd());
        for (int i = 0; i < kN; ++i)
          MP_CHECK(checkBuf(*out[i], 0, c, [&](size_t k) { return redExpected(rc, k); },
                            "InitAll grouped AllReduce comm " + std::to_string(i)));
        // devlist NULL means devices 0..ndev-1, in order (checked last so the
        // collective part above is reported on its own).
        for (int i = 0; i < kN; ++i) {
          int dev = -1;
          MP_NCCL(ncclCommCuDevice(comms[i], &dev));
          MP_CHECK(dev == i, "comm %d: ncclCommCuDevice gave %d", i, dev);
        }
        for (int i = 0; i < kN; ++i) MP_NCCL(ncclCommDestroy(comms[i]));
        return 0;
      },
      opts(60, false));
  EXPECT_RANKS_OK(res);
}

// Child rank under color = rank % 2, key = -rank: members in descending parent rank.
int splitBody(const Rank& me) {
  ncclComm_t child = nullptr;
  MP_NCCL(ncclCommSplit(me.comm, me.rank % 2, -me.rank, &child, nullptr));
  MP_CHECK(child != nullptr);
  std::vector<int> members;  // parent ranks in child-rank order
  for (int r = me.nranks - 1; r >= 0; --r)
    if (r % 2 == me.rank % 2) members.push_back(r);
  int count = -1, crank = -1;
  MP_NCCL(ncclCommCount(child, &count));
  MP_NCCL(ncclCommUserRank(child, &crank));
  MP_CHECK(count == int(members.size()), "child count %d, expected %zu", count, members.size());
  MP_CHECK(crank >= 0 && crank < count && members[crank] == me.rank, "child rank %d for parent rank %d", crank,
           me.rank);
  // The AllGather order proves the key ordering on every member.
  HostBuf mine(ncclInt32, 1), all(ncclInt32, members.size());
  mine.set(0, me.rank);
  MP_NCCL(ncclAllGather(mine.data(), all.data(), 1, ncclInt32, child, nullptr));
  MP_CHECK(checkBuf(all, 0, members.size(), [&](size_t k) { return double(members[k]); }, "split AllGather"));
  MP_TRY(caseAllReduce(Rank{child, crank, count}, RedCase{ncclFloat32, TestOp::kSum, count}, 1000, false));
  MP_NCCL(closeComm(child));

  // Rank 0 opts out; the rest form one comm ordered by parent rank.
  ncclComm_t rest = nullptr;
  int color = me.rank == 0 ? NCCL_SPLIT_NOCOLOR : 7;
  MP_NCCL(ncclCommSplit(me.comm, color, me.rank, &rest, nullptr));
  if (me.rank == 0) {
    MP_CHECK(rest == nullptr, "NCCL_SPLIT_NOCOLOR must give a NULL comm");
  } else {
    MP_CHECK(rest != nullptr);
    MP_NCCL(ncclCommUserRank(rest, &crank));
    MP_CHECK(crank == me.rank - 1, "rank %d got %d in the NOCOLOR split", me.rank, crank);
    MP_TRY(caseAllReduce(Rank{rest, crank, me.nranks - 1}, RedCase{ncclInt32, TestOp::kSum, me.nranks - 1}, 7,
                         false));
    MP_NCCL(closeComm(rest));
  }
  // The parent still works after its children are gone.
  return caseAllReduce(me, RedCase{ncclInt32, TestOp::kSum, me.nranks}, 7, false);
}

TEST(MpApi, SplitColorKeyAndNoColor) {
  RunResult res = runRanks(
      6, [](int rank, int n, const ncclUniqueId& id) { return withComm(rank, n, id, splitBody); }, opts(90));
  EXPECT_RANKS_OK(res);
}

TEST(MpApi, NonblockingInitCollectiveFinalize) {
  RunResult res = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclComm_t comm = nullptr;
        ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &cfg);
        MP_CHECK(r == ncclSuccess || r == ncclInProgress, "nonblocking init returned %s", resultName(r).c_str());
        MP_CHECK(comm != nullptr, "the comm pointer is written before init completes");
        MP_EXPECT_RESULT(waitAsync(comm), ncclSuccess);

        RedCase c{ncclFloat32, TestOp::kSum, n};
        HostBuf in(ncclFloat32, 5000), out(ncclFloat32, 5000);
        in.fill([&](size_t i) { return redInput(c, rank, i); });
        out.fill(sentinelValue(ncclFloat32));
        r = ncclAllReduce(in.data(), out.data(), 5000, ncclFloat32, ncclSum, comm, nullptr);
        MP_CHECK(r == ncclSuccess || r == ncclInProgress, "nonblocking AllReduce returned %s", resultName(r).c_str());
        MP_EXPECT_RESULT(waitAsync(comm), ncclSuccess);
        MP_CHECK(checkBuf(out, 0, 5000, [&](size_t i) { return redExpected(c, i); }, "nonblocking AllReduce"));

        r = ncclCommFinalize(comm);
        MP_CHECK(r == ncclSuccess || r == ncclInProgress, "nonblocking finalize returned %s", resultName(r).c_str());
        MP_EXPECT_RESULT(waitAsync(comm), ncclSuccess);
        MP_NCCL(ncclCommDestroy(comm));
        return 0;
      },
      opts(90));
  EXPECT_RANKS_OK(res);
}

TEST(MpApi, InitRankConfigNullConfigFinalizeDestroy) {
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL(ncclCommInitRankConfig(&comm, n, id, rank, nullptr));
        MP_TRY(caseAllReduce(Rank{comm, rank, n}, RedCase{ncclInt32, TestOp::kSum, n}, 7, false));
        MP_NCCL(ncclCommFinalize(comm));
        ncclResult_t st = ncclInProgress;
        MP_NCCL(ncclCommGetAsyncError(comm, &st));
        MP_CHECK(st == ncclSuccess, "async state after a blocking finalize: %s", resultName(st).c_str());
        MP_NCCL(ncclCommDestroy(comm));
        return 0;
      },
      opts(60));
  EXPECT_RANKS_OK(res);
}

TEST(MpApi, AbortAfterWorkIsPrompt) {
  RunResult res = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL(initComm(&comm, n, id, rank));
        MP_TRY(caseAllReduce(Rank{comm, rank, n}, RedCase{ncclFloat32, TestOp::kSum, n}, 100000, false));
        int64_t t0 = monoNs();
        MP_NCCL(ncclCommAbort(comm));
        int64_t ms = (monoNs() - t0) / 1000000;
        MP_CHECK(ms < 5000, "ncclCommAbort took %lld ms", (long long)ms);
        return 0;
      },
      opts(60));
  EXPECT_RANKS_OK(res);
}

// NCCL_TOPO_DUMP_FILE: rank NCCL_TOPO_DUMP_FILE_RANK writes the detected
// topology at creation; NCCL_TOPO_FILE loads it back (a missing file fails
// creation on every rank, without a hang).
TEST(MpApi, TopologyDumpAndLoadAtInit) {
  char dir[] = "/tmp/ferry-topo-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string dump = std::string(dir) + "/dump.xml";
  RunOptions o = opts(60);
  o.env["NCCL_TOPO_DUMP_FILE"] = dump;
  o.env["NCCL_TOPO_DUMP_FILE_RANK"] = "1";
  auto body = [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    MP_NCCL(initComm(&comm, n, id, rank));
    MP_TRY(caseAllReduce(Rank{comm, rank, n}, RedCase{ncclInt32, TestOp::kSum, n}, 10, false));
    MP_NCCL(ncclCommDestroy(comm));
    return 0;
  };
  EXPECT_RANKS_OK(runRanks(2, body, o));
  std::ifstream f(dump);
  std::string xml((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find("<system"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<cpu"), std::string::npos) << xml;

  RunOptions load = opts(60);
  load.env["NCCL_TOPO_FILE"] = dump;
  EXPECT_RANKS_OK(runRanks(2, body, load));

  RunOptions missing = opts(60);
  missing.env["NCCL_TOPO_FILE"] = std::string(dir) + "/no-such-file.xml";
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
        MP_CHECK(r != ncclSuccess, "init succeeded with a missing NCCL_TOPO_FILE");
        MP_CHECK(std::string(ncclGetLastError(nullptr)).find("no-such-file.xml") != std::string::npos,
                 "last error does not name the file: %s", ncclGetLastError(nullptr));
        return 0;
      },
      missing);
  EXPECT_RANKS_OK(res);
}

TEST(MpApi, NestedGroups) {
  RunResult res = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          RedCase a{ncclFloat32, TestOp::kSum, me.nranks}, b{ncclInt32, TestOp::kMin, me.nranks};
          HostBuf ain(ncclFloat32, 777), aout(ncclFloat32, 777), bin(ncclInt32, 999), bout(ncclInt32, 999);
          ain.fill([&](size_t i) { return redInput(a, me.rank, i); });
          bin.fill([&](size_t i) { return redInput(b, me.rank, i); });
          aout.fill(sentinelValue(ncclFloat32));
          bout.fill(sentinelValue(ncclInt32));
          MP_NCCL(ncclGroupStart());
          MP_NCCL(ncclGroupStart());
          MP_NCCL(ncclAllReduce(ain.data(), aout.data(), 777, ncclFloat32, ncclSum, me.comm, nullptr));
          MP_NCCL(ncclGroupStart());
          MP_NCCL(ncclGroupEnd());
          MP_NCCL(ncclGroupEnd());  // inner: nothing may be required to run yet
          MP_NCCL(ncclAllReduce(bin.data(), bout.data(), 999, ncclInt32, ncclMin, me.comm, nullptr));
          MP_NCCL(ncclGroupEnd());  // outermost: both run
          MP_CHECK(checkBuf(aout, 0, 777, [&](size_t i) { return redExpected(a, i); }, "nested group AllReduce a"));
          MP_CHECK(checkBuf(bout, 0, 999, [&](size_t i) { return redExpected(b, i); }, "nested group AllReduce b"));
          // An empty group is fine too.
          MP_NCCL(ncclGroupStart());
          MP_NCCL(ncclGroupEnd());
          return 0;
        });
      },
      opts(60));
  EXPECT_RANKS_OK(res);
}

TEST(MpApi, GroupSimulateEndEstimatesWithoutRunning) {
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          const size_t c = 1 << 20;
          HostBuf in(ncclFloat32, c), out(ncclFloat32, c);
          in.fill(1.0);
          out.fill(sentinelValue(ncclFloat32));
          ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
          MP_CHECK(sim.estimatedTime == NCCL_UNDEF_FLOAT);
          MP_NCCL(ncclGroupStart());
          MP_NCCL(ncclAllReduce(in.data(), out.data(), c, ncclFloat32, ncclSum, me.comm, nullptr));
          MP_NCCL(ncclGroupSimulateEnd(&sim));
          MP_CHECK(sim.estimatedTime > 0, "estimatedTime %f", double(sim.estimatedTime));
          double s = sentinelValue(ncclFloat32);
          MP_CHECK(checkBuf(out, 0, c, [s](size_t) { return s; }, "simulated AllReduce must not run"));
          // The comm is still usable for real work.
          return caseAllReduce(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, 1000, false);
        });
      },
      opts(60));
  EXPECT_RANKS_OK(res);
}

TEST(MpApi, MemAllocAndRegistration) {
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          const size_t c = 65536, bytes = c * sizeof(float);
          void* in = nullptr;
          void* out = nullptr;
          MP_NCCL(ncclMemAlloc(&in, bytes));
          MP_NCCL(ncclMemAlloc(&out, bytes));
          MP_CHECK(in && out && in != out);
          RedCase rc{ncclFloat32, TestOp::kSum, me.nranks};
          for (size_t i = 0; i < c; ++i) encodeValue(ncclFloat32, redInput(rc, me.rank, i), in, i);
          void* hIn = nullptr;
          void* hOut = nullptr;
          MP_NCCL(ncclCommRegister(me.comm, in, bytes, &hIn));
          MP_NCCL(ncclCommRegister(me.comm, out, bytes, &hOut));
          for (int rep = 0; rep < 2; ++rep) {
            std::memset(out, 0, bytes);
            MP_NCCL(ncclAllReduce(in, out, c, ncclFloat32, ncclSum, me.comm, nullptr));
            for (size_t i = 0; i < c; ++i)
              MP_CHECK(decodeValue(ncclFloat32, out, i) == redExpected(rc, i), "registered AllReduce element %zu", i);
          }
          MP_NCCL(ncclCommDeregister(me.comm, hIn));
          MP_NCCL(ncclCommDeregister(me.comm, hOut));
          MP_NCCL(ncclMemFree(in));
          MP_NCCL(ncclMemFree(out));
          return 0;
        });
      },
      opts(60));
  EXPECT_RANKS_OK(res);
}

TEST(MpApi, LastErrorDescribesBadCall) {
  RunResult res = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        return withComm(rank, n, id, [](const Rank& me) {
          HostBuf a(ncclFloat32, 4), b(ncclFloat32, 4);
          MP_EXPECT_RESULT(ncclAllReduce(a.data(), b.data(), 4, static_cast<ncclDataType_t>(99), ncclSum, me.comm,
                                         nullptr),
                           ncclInvalidArgument);
          const char* msg = ncclGetLastError(me.comm);
          MP_CHECK(msg != nullptr && msg[0] != '\0', "ncclGetLastError is empty after an invalid call");
          harnessSetValue(0, int64_t(std::strlen(msg)));
          return caseAllReduce(me, RedCase{ncclFloat32, TestOp::kSum, me.nranks}, 7, false);
        });
      },
      opts(60));
  EXPECT_RANKS_OK(res);
}

}  // namespace
}  // namespace ferry::mp
