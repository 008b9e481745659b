// Device windows (issue 14): ncclMemAlloc'd test-device memory registered
// with ncclCommWindowRegister is shared between the ranks of the host
// through the backend's IPC handles, and AllReduce, ReduceScatter,
// AllGather, Broadcast, Reduce and AlltoAll on it run as stream work on the
// peers' memory (comm/device_direct.h) instead of through host staging:
//  - exact results at 2-4 ranks, in place and out, several sizes, dtypes
//    and ops (Avg too: a division kernel), with guard elements after every
//    output; nothing staged (ferryCommStagedBytes 0) and each rank's log
//    names the stream path; on testdev and on the CUDA backend over the
//    stand-in driver (whose cuIpcOpenMemHandle maps the peer's memory as
//    testdev's import does); in small steps too;
//  - PreMulSum, which the path does not take, goes through the bridge on
//    the same windows and is exact too.
// The stream contract and failures: device_window_stream_test.cc.
// Host memory cannot touch test-device memory, so every buffer is filled
// and read through a host mirror copied on the collective's own stream.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/mp/device_window_util.h"
#include "tests/mp/fake_cuda_count.h"

namespace ferry::mp {
namespace {

void sentinel(ncclDataType_t dt, void* p, size_t n) {
  for (size_t i = 0; i < n; ++i) encodeValue(dt, sentinelValue(dt), p, i);
}

int checkRange(ncclDataType_t dt, const void* p, size_t n, const std::function<double(size_t)>& want,
               const std::string& what, bool guards = true) {
  for (size_t i = 0; i < n; ++i) {
    double got = decodeValue(dt, p, i);
    MP_CHECK(got == want(i), "%s: element %zu is %g, expected %g", what.c_str(), i, got, want(i));
  }
  for (size_t i = n; guards && i < n + kGuardElems; ++i)
    MP_CHECK(decodeValue(dt, p, i) == sentinelValue(dt), "%s: guard %zu overwritten", what.c_str(), i - n);
  return 0;
}

// Sentinels after inCount inputs and outCount outputs, this rank's inputs,
// then call(op) with c's operator made for it, on the arena's stream.
int runReduction(const Rank& me, Arena& a, const RedCase& c, size_t inCount, size_t outCount,
                 const std::function<ncclResult_t(ncclRedOp_t)>& call) {
  sentinel(c.dt, a.out(), outCount + kGuardElems);
  sentinel(c.dt, a.in(), inCount + kGuardElems);
  for (size_t i = 0; i < inCount; ++i) encodeValue(c.dt, redInput(c, me.rank, i), a.in(), i);
  return onDevice(&a, [&] {
    ncclRedOp_t op;
    if (ncclResult_t r = acquireOp(c.op, c.dt, me.comm, &op); r != ncclSuccess) return r;
    ncclResult_t r = call(op);
    ncclResult_t released = releaseOp(c.op, op, me.comm);
    return r != ncclSuccess ? r : released;
  });
}

int allReduce(const Rank& me, Arena& a, const RedCase& c, size_t count, bool inPlace) {
  std::string what = "AllReduce " + std::string(opName(c.op)) + " count " + std::to_string(count) +
                     (inPlace ? " in place" : "");
  char* out = inPlace ? a.in() : a.out();
  MP_TRY(runReduction(me, a, c, count, count, [&](ncclRedOp_t op) {
    return ncclAllReduce(a.dev(a.in()), a.dev(out), count, c.dt, op, me.comm, static_cast<cudaStream_t>(a.stream));
  }));
  return checkRange(c.dt, out, count, [&](size_t i) { return redExpected(c, i); }, what);
}

int reduceScatter(const Rank& me, Arena& a, const RedCase& c, size_t count, bool inPlace) {
  std::string what = "ReduceScatter " + std::string(opName(c.op)) + " count " + std::to_string(count) +
                     (inPlace ? " in place" : "");
  size_t total = count * me.nranks, e = dtypeSize(c.dt);
  char* out = inPlace ? a.in() + me.rank * count * e : a.out();
  MP_TRY(runReduction(me, a, c, total, count, [&](ncclRedOp_t op) {
    return ncclReduceScatter(a.dev(a.in()), a.dev(out), count, c.dt, op, me.comm, static_cast<cudaStream_t>(a.stream));
  }));
  size_t base = me.rank * count;
  // In place the guard after my block is the next rank's input block.
  bool guards = !inPlace || me.rank + 1 == me.nranks;
  return checkRange(c.dt, out, count, [&](size_t i) { return redExpected(c, base + i); }, what, guards);
}

// The root's output holds the result; a non-root's output keeps its
// sentinels (its input its values, in place).
int reduce(const Rank& me, Arena& a, const RedCase& c, size_t count, int root, bool inPlace) {
  std::string what = "Reduce " + std::string(opName(c.op)) + " count " + std::to_string(count) + " root " +
                     std::to_string(root) + (inPlace ? " in place" : "");
  char* out = inPlace ? a.in() : a.out();
  MP_TRY(runReduction(me, a, c, count, count, [&](ncclRedOp_t op) {
    return ncclReduce(a.dev(a.in()), a.dev(out), count, c.dt, op, root, me.comm, static_cast<cudaStream_t>(a.stream));
  }));
  if (me.rank == root) return checkRange(c.dt, out, count, [&](size_t i) { return redExpected(c, i); }, what);
  if (inPlace) return checkRange(c.dt, out, count, [&](size_t i) { return redInput(c, me.rank, i); }, what);
  return checkRange(c.dt, out, count, [&](size_t) { return sentinelValue(c.dt); }, what);
}

int allGather(const Rank& me, Arena& a, ncclDataType_t dt, size_t count, bool inPlace) {
  std::string what = "AllGather count " + std::to_string(count) + (inPlace ? " in place" : "");
  size_t total = count * me.nranks;
  char* in = inPlace ? a.out() + me.rank * count * dtypeSize(dt) : a.in();
  sentinel(dt, a.out(), total + kGuardElems);
  for (size_t i = 0; i < count; ++i) encodeValue(dt, moveValue(dt, me.rank, i), in, i);
  MP_TRY(onDevice(&a, [&] {
    return ncclAllGather(a.dev(in), a.dev(a.out()), count, dt, me.comm, static_cast<cudaStream_t>(a.stream));
  }));
  return checkRange(dt, a.out(), total, [&](size_t i) { return moveValue(dt, int(i / count), i % count); }, what);
}

int broadcast(const Rank& me, Arena& a, ncclDataType_t dt, size_t count, int root, bool inPlace) {
  std::string what = "Broadcast count " + std::to_string(count) + " root " + std::to_string(root) +
                     (inPlace ? " in place" : "");
  char* in = inPlace ? a.out() : a.in();
  sentinel(dt, a.out(), count + kGuardElems);
  if (me.rank == root)
    for (size_t i = 0; i < count; ++i) encodeValue(dt, moveValue(dt, root, i), in, i);
  MP_TRY(onDevice(&a, [&] {
    return ncclBroadcast(a.dev(in), a.dev(a.out()), count, dt, root, me.comm, static_cast<cudaStream_t>(a.stream));
  }));
  return checkRange(dt, a.out(), count, [&](size_t i) { return moveValue(dt, root, i); }, what);
}

// AlltoAll: block p of rank r's output is block r of rank p's input (in
// place it sends from a copy in device scratch).
int allToAll(const Rank& me, Arena& a, ncclDataType_t dt, size_t count, bool inPlace) {
  std::string what = "AlltoAll count " + std::to_string(count) + (inPlace ? " in place" : "");
  size_t total = count * me.nranks;
  char* in = inPlace ? a.out() : a.in();
  sentinel(dt, a.out(), total + kGuardElems);
  for (size_t i = 0; i < total; ++i) encodeValue(dt, moveValue(dt, me.rank, i), in, i);
  MP_TRY(onDevice(&a, [&] {
    return ncclAlltoAll(a.dev(in), a.dev(a.out()), count, dt, me.comm, static_cast<cudaStream_t>(a.stream));
  }));
  return checkRange(dt, a.out(), total,
                    [&](size_t i) { return moveValue(dt, int(i / count), me.rank * count + i % count); }, what);
}

std::vector<RedCase> directCases(int n) {
  return {{ncclInt32, TestOp::kSum, n},   {ncclFloat32, TestOp::kMax, n}, {ncclBfloat16, TestOp::kSum, n},
          {ncclInt8, TestOp::kProd, n},   {ncclFloat64, TestOp::kMin, n}, {ncclInt32, TestOp::kAvg, n},
          {ncclFloat16, TestOp::kAvg, n}, {ncclUint64, TestOp::kAvg, n}};
}

int everyCollective(const Rank& me, Arena& a) {
  for (bool inPlace : {false, true}) {
    for (const RedCase& c : directCases(me.nranks))
      for (size_t count : {size_t{1}, size_t{7}, size_t{5000}}) MP_TRY(allReduce(me, a, c, count, inPlace));
    MP_TRY(allReduce(me, a, {ncclInt32, TestOp::kSum, me.nranks}, 300007, inPlace));
    for (const RedCase& c : directCases(me.nranks))
      for (size_t count : {size_t{1}, size_t{700}, size_t{70001}}) MP_TRY(reduceScatter(me, a, c, count, inPlace));
    for (ncclDataType_t dt : {ncclInt32, ncclUint8, ncclFloat64})
      for (size_t count : {size_t{1}, size_t{700}, size_t{70001}}) MP_TRY(allGather(me, a, dt, count, inPlace));
    for (int root : {0, me.nranks - 1}) {
      for (size_t count : {size_t{3}, size_t{300001}}) MP_TRY(broadcast(me, a, ncclInt32, count, root, inPlace));
      for (const RedCase& c : directCases(me.nranks))
        for (size_t count : {size_t{1}, size_t{70001}}) MP_TRY(reduce(me, a, c, count, root, inPlace));
    }
    for (ncclDataType_t dt : {ncclInt32, ncclUint8, ncclFloat64})
      for (size_t count : {size_t{1}, size_t{700}, size_t{70001}}) MP_TRY(allToAll(me, a, dt, count, inPlace));
  }
  return 0;
}

class MpDeviceWindow : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(MpDeviceWindow, EveryCollectiveExactWithoutStaging) {
  auto [backend, n] = GetParam();
  std::string tag = backend + std::to_string(n);
  RunResult res = runRanks(n, [backend](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [backend](const Rank& me) {
      Arena a;
      MP_TRY(openArena(me, &a));
      MP_TRY(everyCollective(me, a));
      unsigned long long staged = 1;
      MP_TRY(stagedBytes(me, &staged));
      MP_CHECK(staged == 0, "rank %d: %llu bytes staged on device windows", me.rank, staged);
      if (backend == "cuda" && !std::getenv("FERRY_TEST_CUDA_LIBRARY")) {
        MP_CHECK(fakeCudaCount("cuIpcOpenMemHandle") == me.nranks - 1,
                 "rank %d: opened %ld IPC handles", me.rank, fakeCudaCount("cuIpcOpenMemHandle"));
        // The barriers' host functions make no driver call (CUDA forbids it).
        MP_CHECK(fakeCudaCount("called from a host function") == 0, "rank %d: a driver call from a host function",
                 me.rank);
      }
      return closeArena(me, &a);
    });
  }, opts(tag, {}, 240, backend));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), tag, "of " + backend + " memory at"), n);
  EXPECT_EQ(logFilesWith(logDir(), tag, "shared by every rank"), n);
  for (const char* k : {"AllReduce on ", "ReduceScatter on ", "AllGather on ", "Broadcast on ", "Reduce on ",
                        "AlltoAll on "})
    EXPECT_EQ(logFilesWith(logDir(), tag, k + backend + " windows"), n) << k;
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpDeviceWindow,
                         ::testing::Values(std::tuple{"testdev", 2}, std::tuple{"testdev", 3},
                                           std::tuple{"testdev", 4}, std::tuple{"cuda", 2},
                                           std::tuple{"cuda", 4}));

// Reductions in many small steps (FERRY_DEVWIN_PIECE_BYTES, not a multiple
// of every element size) instead of the default's one or two per block.
TEST(MpDeviceWindowPieces, SmallStepsExact) {
  RunResult res = runRanks(3, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      Arena a;
      MP_TRY(openArena(me, &a));
      MP_TRY(everyCollective(me, a));
      return closeArena(me, &a);
    });
  }, opts("pieces", {{"FERRY_DEVWIN_PIECE_BYTES", "4100"}}));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "pieces", "ReduceScatter on testdev windows"), 3);
}

// PreMulSum is not stream work here (each rank's input is scaled by its
// own rank's scalar, which the symmetric schedules cannot apply): the
// bridge stages it, on the same window buffers, exactly.
TEST(MpDeviceWindowBridge, PreMulSumIsStagedAndExact) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      Arena a;
      MP_TRY(openArena(me, &a));
      for (ncclDataType_t dt : {ncclFloat16, ncclInt32})
        MP_TRY(allReduce(me, a, {dt, TestOp::kPreMulSum, me.nranks}, 5000, false));
      unsigned long long staged = 0;
      MP_TRY(stagedBytes(me, &staged));
      MP_CHECK(staged > 0, "rank %d: PreMulSum on device windows staged nothing", me.rank);
      return closeArena(me, &a);
    });
  }, opts("bridge"));
  EXPECT_RANKS_OK(res);
}

}  // namespace
}  // namespace ferry::mp
