// Collectives on device memory (issue 14), on two backends whose memory the
// host cannot touch and whose streams are worker threads: the test device
// (FERRY_DEVICE=testdev) and the CUDA backend driving the stand-in CUDA
// driver (FERRY_DEVICE=cuda, FERRY_CUDA_LIBRARY=tests/support/fake_cuda),
// docs/accelerators.md. The cases of coll_cases.h run unchanged with
// their buffers in device memory (mp_util.h's device mode: inputs uploaded
// and results downloaded on the default stream, the collective enqueued
// between them on the same stream), so every check is exact and a result
// read too early shows as a wrong value.
//  - every collective x datatype x op at 1-4 ranks, in place and out, two sizes;
//  - a mixed communicator: two ranks on device memory, two on host memory;
//  - NCCL's stream contract: the call returns before its stream ran it
//    (the peer enters only after that was seen), later work on the stream
//    sees the result;
//  - call order: a host call after a device call does not overtake it;
//  - ncclCommFinalize flushes queued work; a dead peer fails queued work
//    (ncclCommGetAsyncError) without holding the stream forever.
#include <dlfcn.h>
#include <ferry/device.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"
#include "tests/mp/fake_cuda_count.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("device"); }

// Every datatype through every collective at count 7; every op's
// reductions where exact.
int matrix(const Rank& me) {
  for (ncclDataType_t dt : kAllTypes) {
    MP_TRY(caseAllMovement(me, dt, 7));
    for (TestOp op : kAllOps) {
      RedCase c{dt, op, me.nranks};
      if (redCaseExact(c)) MP_TRY(caseAllReductions(me, c, 7));
    }
  }
  return 0;
}

// Device buffers on the ranks whose FERRY_DEVICE is set, host on the others.
int onOwnBuffers(const Rank& me, const std::function<int(const Rank&)>& f) {
  const char* dev = std::getenv("FERRY_DEVICE");
  setDeviceBuffers(dev && *dev);
  int rc = f(me);
  if (rc == 0 && deviceBuffers()) {
    unsigned long long staged = 0;
    MP_NCCL(ferryCommStagedBytes(me.comm, &staged));
    MP_CHECK(staged > 0, "rank %d: device collectives ran but nothing was staged", me.rank);
    // CUDA streams wait for the bridge with cuStreamWaitValue32 on the
    // registered flag slab, not in a host function.
    // Nor does Ferry call the driver from a host function (CUDA does not
    // permit it; a staging block's last holder is the stream's last task).
    if (std::string(dev) == "cuda" && !std::getenv("FERRY_TEST_CUDA_LIBRARY")) {
      MP_CHECK(fakeCudaCount("cuStreamWaitValue32") > 0, "rank %d: no stream waited on a flag", me.rank);
      MP_CHECK(fakeCudaCount("called from a host function") == 0,
               "rank %d: a driver call from a host function", me.rank);
    }
  }
  setDeviceBuffers(false);
  return rc;
}

// The environment of a rank on `backend`'s memory.
Env deviceEnv(const std::string& backend) {
  Env e{{"FERRY_DEVICE", backend}};
  // The stand-in driver, unless a real one is named (tools/gpu-check.sh).
  const char* real = std::getenv("FERRY_TEST_CUDA_LIBRARY");
  if (backend == "cuda") e["FERRY_CUDA_LIBRARY"] = real ? real : FERRY_FAKECUDA;
  return e;
}

RunResult runDevice(int n, const std::string& tag, const std::function<int(const Rank&)>& f,
                    const std::vector<bool>& onDevice, const std::string& backend = "testdev",
                    int timeoutSec = 240, const Env& extra = {}) {
  RunOptions o = loggedOptions(logDir(), tag, "INIT", {}, timeoutSec);
  o.rankEnv.resize(n);
  for (int r = 0; r < n; ++r) {
    if (onDevice[r]) o.rankEnv[r] = deviceEnv(backend);
    for (const auto& [k, v] : extra) o.rankEnv[r][k] = v;
  }
  return runRanks(n, [f](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [&](const Rank& me) { return onOwnBuffers(me, f); });
  }, o);
}

class MpDevice : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(MpDevice, EveryCollectiveTypeAndOpExact) {
  auto [backend, n] = GetParam();
  std::string tag = backend + std::to_string(n);
  RunResult res = runDevice(n, tag, [](const Rank& me) {
    MP_TRY(matrix(me));
    // In-place forms, and a size whose pieces travel by reference between
    // local ranks (the staging blocks are shared memory).
    return caseEveryShape(me, {1, 70001});
  }, std::vector<bool>(n, true), backend);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), tag, backend + " memory is staged through host buffers"), n);
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpDevice,
                         ::testing::Combine(::testing::Values("testdev", "cuda"), ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// Pipelined staging (FERRY_BRIDGE_PIECE_BYTES, io_gate.h): inputs staged in
// 4 KiB pieces that the host collective waits for step by step, results
// copied back piece by piece as they become final. Every shape at 70001
// elements, every op at 5000; on two ranks whose streams are slow too.
int pieceCases(const Rank& me) {
  MP_TRY(caseEveryShape(me, {70001}));
  for (ncclDataType_t dt : {ncclInt32, ncclFloat64}) {
    for (TestOp op : kAllOps) {
      RedCase c{dt, op, me.nranks};
      if (redCaseExact(c)) MP_TRY(caseAllReductions(me, c, 5000));
    }
  }
  // CUDA streams count the pieces from the device (cuStreamWriteValue32
  // on the registered flag slab), not in host functions.
  const char* dev = std::getenv("FERRY_DEVICE");
  if (dev && std::string(dev) == "cuda" && !std::getenv("FERRY_TEST_CUDA_LIBRARY"))
    MP_CHECK(fakeCudaCount("cuStreamWriteValue32") > 0, "rank %d: no stream counted a piece", me.rank);
  return 0;
}

const Env kSmallPieces{{"FERRY_BRIDGE_PIECE_BYTES", "4096"}};

class MpDevicePieces : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(MpDevicePieces, EveryShapeAndOpExact) {
  auto [backend, n] = GetParam();
  std::string tag = "pieces" + backend + std::to_string(n);
  RunResult res = runDevice(n, tag, pieceCases, std::vector<bool>(n, true), backend, 240, kSmallPieces);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), tag, "staging in pieces of 4096 bytes"), n);
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpDevicePieces,
                         ::testing::Combine(::testing::Values("testdev", "cuda"), ::testing::Values(2, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

TEST(MpDevicePieces, SlowStreamsAndHostRanksExact) {
  const std::string tag = "piecesslow";
  RunResult res = runDevice(4, tag, [](const Rank& me) {
    // The device ranks' streams take 300 us per task: the collective
    // waits for pieces that trickle in, and the host ranks wait for them.
    if (deviceBuffers()) MP_NCCL(ferryDeviceSetTaskDelayUs(300));
    RedCase c{ncclInt32, TestOp::kSum, me.nranks};
    MP_TRY(caseAllReduce(me, c, 70001, false));
    MP_TRY(caseReduceScatter(me, c, 20001, true));
    MP_TRY(caseAllGather(me, ncclUint8, 70001, false));
    if (deviceBuffers()) MP_NCCL(ferryDeviceSetTaskDelayUs(0));
    return 0;
  }, {true, false, true, false}, "testdev", 240, kSmallPieces);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), tag, "staging in pieces of 4096 bytes"), 2);
}

// By default only a device that copies on engines of its own (CUDA) is
// staged in pieces (1 MiB); testdev copies on host cores, where nothing
// overlaps, and stages whole buffers.
TEST(MpDevicePieces, ByDefaultOnlyCudaStagesInPieces) {
  for (std::string backend : {"cuda", "testdev"}) {
    const std::string tag = "piecesdefault" + backend;
    RunResult res = runDevice(2, tag, [](const Rank& me) {
      return caseAllReduce(me, RedCase{ncclInt32, TestOp::kSum, me.nranks}, 600000, false);
    }, {true, true}, backend);
    EXPECT_RANKS_OK(res);
    EXPECT_EQ(logFilesWith(logDir(), tag, "staging in pieces of 1048576 bytes"), backend == "cuda" ? 2 : 0)
        << backend;
  }
}

class MpDeviceMixed : public ::testing::TestWithParam<std::string> {};

TEST_P(MpDeviceMixed, TwoDeviceRanksTwoHostRanks) {
  const std::string backend = GetParam();
  RunResult res = runDevice(4, "mixed" + backend, [](const Rank& me) {
    MP_TRY(matrix(me));
    // In-place forms, and a size whose pieces travel by reference between
    // local ranks (the staging blocks are shared memory).
    return caseEveryShape(me, {1, 70001});
  }, {true, false, true, false}, backend);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "mixed" + backend, backend + " memory is staged through host buffers"), 2);
}

INSTANTIATE_TEST_SUITE_P(Backends, MpDeviceMixed, ::testing::Values("testdev", "cuda"));

// One AllReduce of n ints on `stream`: inputs r + i uploaded on it, the call,
// returns the device buffers (the caller downloads on the same stream).
struct DevAllReduce {
  void* send = nullptr;
  void* recv = nullptr;
  std::vector<int32_t> in, out;
};

int startAllReduce(const Rank& me, size_t n, void* stream, DevAllReduce* a) {
  a->in.resize(n);
  a->out.assign(n, -1);
  for (size_t i = 0; i < n; ++i) a->in[i] = me.rank + int32_t(i);
  MP_NCCL(ferryDeviceAlloc(&a->send, n * 4));
  MP_NCCL(ferryDeviceAlloc(&a->recv, n * 4));
  MP_NCCL(ferryDeviceMemcpyAsync(a->send, a->in.data(), n * 4, stream));
  MP_NCCL(ncclAllReduce(a->send, a->recv, n, ncclInt32, ncclSum, me.comm,
                        static_cast<cudaStream_t>(stream)));
  return 0;
}

int finishAllReduce(const Rank& me, size_t n, void* stream, DevAllReduce* a) {
  MP_NCCL(ferryDeviceMemcpyAsync(a->out.data(), a->recv, n * 4, stream));
  MP_NCCL(ferryDeviceStreamSynchronize(stream));
  const int32_t ranksSum = me.nranks * (me.nranks - 1) / 2;
  for (size_t i = 0; i < n; ++i)
    MP_CHECK(a->out[i] == ranksSum + me.nranks * int32_t(i), "rank %d: element %zu is %d, expected %d",
             me.rank, i, a->out[i], ranksSum + me.nranks * int32_t(i));
  MP_NCCL(ferryDeviceFree(a->send));
  MP_NCCL(ferryDeviceFree(a->recv));
  return 0;
}

// Rank 0's call must return before its device work ran: its stream is
// still busy when rank 1 has not even entered the collective (so the call
// cannot have waited for the operation), and a copy enqueued after it on
// the same stream reads the reduced result. A slow stream worker (every
// task delayed) makes an early read show.
class MpDeviceContract : public ::testing::TestWithParam<std::string> {};

TEST_P(MpDeviceContract, CallReturnsBeforeTheWorkAndLaterWorkSeesTheResult) {
  const std::string backend = GetParam();
  RunResult res = runDevice(2, "contract" + backend, [backend](const Rank& me) {
    if (backend == "testdev") MP_NCCL(ferryDeviceSetTaskDelayUs(2000));
    void* s = nullptr;
    MP_NCCL(ferryDeviceStreamCreate(&s));
    DevAllReduce a;
    const size_t n = 4096;
    if (me.rank == 0) {
      MP_TRY(startAllReduce(me, n, s, &a));
      MP_EXPECT_RESULT(ferryDeviceStreamQuery(s), ncclInProgress);
      MP_CHECK(harnessBarrier(1), "barrier");
    } else {
      MP_CHECK(harnessBarrier(1), "barrier");
      MP_TRY(startAllReduce(me, n, s, &a));
    }
    MP_TRY(finishAllReduce(me, n, s, &a));
    MP_NCCL(ferryDeviceStreamDestroy(s));
    return 0;
  }, {true, true}, backend);
  EXPECT_RANKS_OK(res);
}

INSTANTIATE_TEST_SUITE_P(Backends, MpDeviceContract, ::testing::Values("testdev", "cuda"));

// A host-memory call right after a device call on rank 0's slow stream must
// wait for it: rank 1's stream is fast, so if rank 0's host AllReduce ran at
// once it would meet rank 1's device AllReduce (a mismatch, or wrong sums).
TEST(MpDeviceStream, HostCallDoesNotOvertakeQueuedDeviceCall) {
  RunResult res = runDevice(2, "order", [](const Rank& me) {
    if (me.rank == 0) MP_NCCL(ferryDeviceSetTaskDelayUs(20000));
    const size_t n = 1000;
    DevAllReduce a;
    MP_TRY(startAllReduce(me, n, nullptr, &a));
    std::vector<int64_t> h(n, me.rank + 1), hr(n, 0);
    MP_NCCL(ncclAllReduce(h.data(), hr.data(), n, ncclInt64, ncclSum, me.comm, nullptr));
    for (size_t i = 0; i < n; ++i)
      MP_CHECK(hr[i] == me.nranks * (me.nranks + 1) / 2, "host AllReduce element %zu: %lld", i,
               static_cast<long long>(hr[i]));
    return finishAllReduce(me, n, nullptr, &a);
  }, {true, true});
  EXPECT_RANKS_OK(res);
}

// ncclCommFinalize waits for what is queued: right after the call, the
// communicator is finalized and destroyed, and the stream still gets the
// result.
TEST(MpDeviceStream, FinalizeFlushesQueuedWork) {
  RunOptions o = loggedOptions(logDir(), "flush", "INIT", {{"FERRY_DEVICE", "testdev"}}, 120);
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm;
    MP_NCCL(initComm(&comm, nranks, id, rank));
    MP_NCCL(ferryDeviceSetTaskDelayUs(5000));
    Rank me{comm, rank, nranks};
    DevAllReduce a;
    MP_TRY(startAllReduce(me, 512, nullptr, &a));
    MP_NCCL(closeComm(comm));
    me.comm = nullptr;
    return finishAllReduce(me, 512, nullptr, &a);
  }, o);
  EXPECT_RANKS_OK(res);
}

// A peer that exits without joining: the queued device AllReduce fails on
// the survivor (its error latched: ncclCommGetAsyncError), and the stream
// is released rather than held.
TEST(MpDeviceStream, DeadPeerFailsQueuedWorkAndReleasesTheStream) {
  RunOptions o = loggedOptions(logDir(), "dead", "INIT", {{"FERRY_DEVICE", "testdev"},
                                                         {"FERRY_TIMEOUT_MS", "5000"}}, 120);
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm;
    MP_NCCL(initComm(&comm, nranks, id, rank));
    if (rank == 1) _exit(0);  // leaves without a word
    Rank me{comm, rank, nranks};
    DevAllReduce a;
    MP_TRY(startAllReduce(me, 256, nullptr, &a));
    MP_NCCL(ferryDeviceStreamSynchronize(nullptr));
    ncclResult_t async = ncclSuccess;
    MP_NCCL(ncclCommGetAsyncError(comm, &async));
    MP_CHECK(async != ncclSuccess && async != ncclInProgress,
             "the AllReduce with a dead peer left async error %d", static_cast<int>(async));
    ncclCommAbort(comm);
    MP_NCCL(ferryDeviceFree(a.send));
    MP_NCCL(ferryDeviceFree(a.recv));
    return 0;
  }, o);
  EXPECT_RANKS_OK(res);
}

// A collective captured into a CUDA graph would run its host side once, at
// the call, and never at the graph's launches: it is refused by name before
// anything reaches the stream, and the same call runs once the capture ends.
TEST(MpDeviceCuda, GraphCaptureIsRefusedByName) {
  RunResult res = runDevice(2, "capture", [](const Rank& me) {
    void* s = nullptr;
    MP_NCCL(ferryDeviceStreamCreate(&s));
    void* lib = dlopen(FERRY_FAKECUDA, RTLD_NOW | RTLD_NOLOAD);
    MP_CHECK(lib != nullptr, "the driver was not loaded");
    auto begin = reinterpret_cast<int (*)(void*, int)>(dlsym(lib, "cuStreamBeginCapture_v2"));
    auto end = reinterpret_cast<int (*)(void*, void**)>(dlsym(lib, "cuStreamEndCapture"));
    MP_CHECK(begin && end, "no capture entry points");
    const size_t n = 1000;
    void *send = nullptr, *recv = nullptr;
    MP_NCCL(ferryDeviceAlloc(&send, n * 4));
    MP_NCCL(ferryDeviceAlloc(&recv, n * 4));
    MP_CHECK(begin(s, 2) == 0, "cuStreamBeginCapture failed");  // relaxed mode
    MP_EXPECT_RESULT(ncclAllReduce(send, recv, n, ncclInt32, ncclSum, me.comm,
                                   static_cast<cudaStream_t>(s)),
                     ncclInvalidUsage);
    MP_NCCL(ncclGroupStart());
    MP_NCCL(ncclSend(send, n, ncclInt32, (me.rank + 1) % me.nranks, me.comm, static_cast<cudaStream_t>(s)));
    MP_NCCL(ncclRecv(recv, n, ncclInt32, (me.rank + 1) % me.nranks, me.comm, static_cast<cudaStream_t>(s)));
    MP_EXPECT_RESULT(ncclGroupEnd(), ncclInvalidUsage);
    void* graph = nullptr;
    MP_CHECK(end(s, &graph) == 0, "cuStreamEndCapture failed");
    MP_CHECK(fakeCudaCount("captured") == 0, "the refused calls left %ld tasks in the graph",
             fakeCudaCount("captured"));
    dlclose(lib);
    MP_NCCL(ferryDeviceFree(send));
    MP_NCCL(ferryDeviceFree(recv));
    DevAllReduce a;
    MP_TRY(startAllReduce(me, n, s, &a));
    MP_TRY(finishAllReduce(me, n, s, &a));
    MP_NCCL(ferryDeviceStreamDestroy(s));
    return 0;
  }, {true, true}, "cuda");
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "capture", "stream capture (CUDA graphs) are not supported yet"), 2);
}

// A communicator destroyed while its stream still copies results back: the
// stream's last task drops the job and its pinned staging after the
// communicator (and its pool) are gone, and must not call the driver there
// (CUDA does not permit it in a host function); the results still arrive.
TEST(MpDeviceCuda, DestroyBeforeTheStreamFinishesCallsNoDriverFromTheStream) {
  RunResult res = runDevice(2, "destroyearly", [](const Rank& me) {
    void* lib = dlopen(FERRY_FAKECUDA, RTLD_NOW | RTLD_NOLOAD);
    MP_CHECK(lib != nullptr, "the driver was not loaded");
    auto delay = reinterpret_cast<void (*)(unsigned)>(dlsym(lib, "fakeCudaSetTaskDelayUs"));
    MP_CHECK(delay != nullptr, "no fakeCudaSetTaskDelayUs");
    void* s = nullptr;
    MP_NCCL(ferryDeviceStreamCreate(&s));
    ncclComm_t child = nullptr;
    MP_NCCL(ncclCommSplit(me.comm, 0, me.rank, &child, nullptr));
    Rank c{child, me.rank, me.nranks};
    DevAllReduce a;
    const size_t n = 5000;
    delay(3000);  // the copy-back and the last task come well after the job
    MP_TRY(startAllReduce(c, n, s, &a));
    MP_NCCL(ncclCommDestroy(child));
    MP_EXPECT_RESULT(ferryDeviceStreamQuery(s), ncclInProgress);
    MP_TRY(finishAllReduce(c, n, s, &a));
    delay(0);
    MP_CHECK(fakeCudaCount("called from a host function") == 0,
             "rank %d: a driver call from a host function", me.rank);
    DevAllReduce b;  // the parent goes on (and stages: runDevice checks)
    MP_TRY(startAllReduce(me, n, s, &b));
    MP_TRY(finishAllReduce(me, n, s, &b));
    MP_NCCL(ferryDeviceStreamDestroy(s));
    dlclose(lib);
    return 0;
  }, {true, true}, "cuda");
  EXPECT_RANKS_OK(res);
}

// A host-memory program with a CUDA driver present gets no CUDA context from
// Ferry (on a GPU machine that would be memory on device 0 in every rank);
// once the program itself uses CUDA, the next communicator recognises its
// device buffers unasked (no FERRY_DEVICE).
TEST(MpDeviceCuda, NoContextUntilTheProgramUsesCuda) {
  RunOptions o = loggedOptions(logDir(), "nocontext", "INIT", {{"FERRY_CUDA_LIBRARY", FERRY_FAKECUDA}}, 120);
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      MP_TRY(caseAllReduce(me, RedCase{ncclInt32, TestOp::kSum, me.nranks}, 1000, false));
      MP_CHECK(fakeCudaCount("cuDevicePrimaryCtxRetain") == 0, "Ferry retained a CUDA context");
      // The program starts using CUDA (what cudaSetDevice does).
      void* lib = dlopen(FERRY_FAKECUDA, RTLD_NOW | RTLD_NOLOAD);
      MP_CHECK(lib != nullptr, "the driver was not loaded");
      auto retain = reinterpret_cast<int (*)(void**, int)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
      auto setCurrent = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cuCtxSetCurrent"));
      void* ctx = nullptr;
      MP_CHECK(retain && setCurrent && retain(&ctx, 0) == 0 && setCurrent(ctx) == 0, "no context");
      ncclComm_t child = nullptr;
      MP_NCCL(ncclCommSplit(me.comm, 0, me.rank, &child, nullptr));
      Rank c{child, me.rank, me.nranks};
      setDeviceBuffers(true);
      int rc = caseAllReduce(c, RedCase{ncclFloat32, TestOp::kSum, c.nranks}, 4099, false);
      setDeviceBuffers(false);
      unsigned long long staged = 0;
      MP_NCCL(ferryCommStagedBytes(child, &staged));
      MP_NCCL(ncclCommDestroy(child));
      dlclose(lib);
      MP_TRY(rc);
      MP_CHECK(staged > 0, "the child communicator staged nothing");
      return 0;
    });
  }, o);
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "nocontext", "the process does not use CUDA yet"), 2);
  EXPECT_EQ(logFilesWith(logDir(), "nocontext", "cuda memory is staged through host buffers"), 2);
}

}  // namespace
}  // namespace ferry::mp
