// Device windows (issue 14): ncclMemAlloc'd test-device memory registered
// with ncclCommWindowRegister is shared between the ranks of the host
// through the backend's IPC handles, and AllReduce, ReduceScatter,
// AllGather and Broadcast on it run as stream work on the peers' memory
// (comm/device_direct.h) instead of through host staging:
//  - exact results at 2-4 ranks, in place and out, several sizes, dtypes
//    and ops (Avg too: a division kernel), with guard elements after every
//    output; nothing staged (ferryCommStagedBytes 0) and each rank's log
//    names the stream path; on testdev and on the CUDA backend over the
//    stand-in driver (whose cuIpcOpenMemHandle maps the peer's memory as
//    testdev's import does);
//  - PreMulSum, which the path does not take, goes through the bridge on
//    the same windows and is exact too;
//  - two communicators whose streams reach their barriers in opposite
//    orders on two ranks (CUDA; the stand-in runs host functions one at a
//    time, as CUDA may);
//  - the call returns before its stream ran it (a slow stream worker);
//  - a peer that never arrives: the survivor's stream gives up after the
//    communicator's timeout and ncclCommGetAsyncError reports it; ranks
//    that call different collectives fail at once, naming both calls.
// Host memory cannot touch test-device memory, so every buffer is filled
// and read through a host mirror copied on the collective's own stream.
#include <dlfcn.h>
#include <ferry/device.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"
#include "tests/mp/fake_cuda_count.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("devwin"); }

constexpr size_t kArenaBytes = 8 << 20;
constexpr size_t kGuardElems = 16;

// A device window (input half, output half) and its host mirror.
struct Arena {
  void* base = nullptr;
  ncclWindow_t win = nullptr;
  void* stream = nullptr;
  std::vector<char> host = std::vector<char>(kArenaBytes);
  char* in() { return host.data(); }
  char* out() { return host.data() + kArenaBytes / 2; }
  // The device address of a mirror address.
  char* dev(const char* h) { return static_cast<char*>(base) + (h - host.data()); }
};

int openArena(const Rank& me, Arena* a) {
  MP_NCCL(ncclMemAlloc(&a->base, kArenaBytes));
  MP_NCCL(ncclCommWindowRegister(me.comm, a->base, kArenaBytes, &a->win, NCCL_WIN_COLL_SYMMETRIC));
  MP_NCCL(ferryDeviceStreamCreate(&a->stream));
  return 0;
}

int closeArena(const Rank& me, Arena* a) {
  MP_NCCL(ferryDeviceStreamSynchronize(a->stream));
  MP_NCCL(ncclCommWindowDeregister(me.comm, a->win));
  MP_NCCL(ferryDeviceStreamDestroy(a->stream));
  MP_NCCL(ncclMemFree(a->base));
  return 0;
}

// A rank that ends its communicator itself (abort or destroy, which
// withComm's teardown would not do), its arena made: f(me, a) runs, then the
// arena's stream and memory go (the window with the communicator).
int ownComm(int rank, int nranks, const ncclUniqueId& id, const std::function<int(Rank&, Arena&)>& f) {
  ncclComm_t comm;
  MP_NCCL(initComm(&comm, nranks, id, rank));
  Rank me{comm, rank, nranks};
  Arena a;
  MP_TRY(openArena(me, &a));
  MP_TRY(f(me, a));
  MP_NCCL(ferryDeviceStreamDestroy(a.stream));
  MP_NCCL(ncclMemFree(a.base));
  return 0;
}

// Mirror -> device, the call, device -> mirror, all on the arena's stream.
int onDevice(Arena* a, const std::function<ncclResult_t()>& call) {
  MP_NCCL(ferryDeviceMemcpyAsync(a->base, a->host.data(), kArenaBytes, a->stream));
  MP_NCCL(call());
  MP_NCCL(ferryDeviceMemcpyAsync(a->host.data(), a->base, kArenaBytes, a->stream));
  MP_NCCL(ferryDeviceStreamSynchronize(a->stream));
  return 0;
}

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

int withOp(const Rank& me, const RedCase& c, const std::function<ncclResult_t(ncclRedOp_t)>& call,
           ncclResult_t* r) {
  ncclRedOp_t op;
  MP_NCCL(acquireOp(c.op, c.dt, me.comm, &op));
  *r = call(op);
  MP_NCCL(releaseOp(c.op, op, me.comm));
  return 0;
}

int allReduce(const Rank& me, Arena& a, const RedCase& c, size_t count, bool inPlace) {
  std::string what = "AllReduce " + std::string(opName(c.op)) + " count " + std::to_string(count) +
                     (inPlace ? " in place" : "");
  char* out = inPlace ? a.in() : a.out();
  sentinel(c.dt, a.out(), count + kGuardElems);
  sentinel(c.dt, a.in(), count + kGuardElems);
  for (size_t i = 0; i < count; ++i) encodeValue(c.dt, redInput(c, me.rank, i), a.in(), i);
  ncclResult_t r = ncclSuccess;
  MP_TRY(onDevice(&a, [&] {
    ncclResult_t w = withOp(me, c, [&](ncclRedOp_t op) {
      return ncclAllReduce(a.dev(a.in()), a.dev(out), count, c.dt, op, me.comm, static_cast<cudaStream_t>(a.stream));
    }, &r) == 0 ? ncclSuccess : ncclInternalError;
    return r != ncclSuccess ? r : w;
  }));
  return checkRange(c.dt, out, count, [&](size_t i) { return redExpected(c, i); }, what);
}

int reduceScatter(const Rank& me, Arena& a, const RedCase& c, size_t count, bool inPlace) {
  std::string what = "ReduceScatter " + std::string(opName(c.op)) + " count " + std::to_string(count) +
                     (inPlace ? " in place" : "");
  size_t total = count * me.nranks, e = dtypeSize(c.dt);
  char* out = inPlace ? a.in() + me.rank * count * e : a.out();
  sentinel(c.dt, a.out(), count + kGuardElems);
  sentinel(c.dt, a.in(), total + kGuardElems);
  for (size_t i = 0; i < total; ++i) encodeValue(c.dt, redInput(c, me.rank, i), a.in(), i);
  ncclResult_t r = ncclSuccess;
  MP_TRY(onDevice(&a, [&] {
    ncclResult_t w = withOp(me, c, [&](ncclRedOp_t op) {
      return ncclReduceScatter(a.dev(a.in()), a.dev(out), count, c.dt, op, me.comm,
                               static_cast<cudaStream_t>(a.stream));
    }, &r) == 0 ? ncclSuccess : ncclInternalError;
    return r != ncclSuccess ? r : w;
  }));
  size_t base = me.rank * count;
  // In place the guard after my block is the next rank's input block.
  bool guards = !inPlace || me.rank + 1 == me.nranks;
  return checkRange(c.dt, out, count, [&](size_t i) { return redExpected(c, base + i); }, what, guards);
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
    for (int root : {0, me.nranks - 1})
      for (size_t count : {size_t{3}, size_t{300001}}) MP_TRY(broadcast(me, a, ncclInt32, count, root, inPlace));
  }
  return 0;
}

int stagedBytes(const Rank& me, unsigned long long* staged) {
  MP_NCCL(ferryCommStagedBytes(me.comm, staged));
  return 0;
}

// Ranks on `backend`'s memory: testdev, or CUDA through the stand-in
// driver (a real one where tools/gpu-check.sh names it).
RunOptions opts(const std::string& tag, Env env = {}, int timeoutSec = 240,
                const std::string& backend = "testdev") {
  env["FERRY_DEVICE"] = backend;
  const char* real = std::getenv("FERRY_TEST_CUDA_LIBRARY");
  if (backend == "cuda") env["FERRY_CUDA_LIBRARY"] = real ? real : FERRY_FAKECUDA;
  return loggedOptions(logDir(), tag, "INIT,COLL", std::move(env), timeoutSec);
}

// Host buffers a stream copies from and into: they must outlive the copies.
struct Io {
  std::vector<int32_t> in, out;
};

// One AllReduce of n ints on window offset `off` (input) and the output
// half at the same offset, on stream s; inputs r * 10 + i.
int windowAllReduce(const Rank& me, Arena& a, size_t off, size_t n, void* s, Io* io, bool grouped = false) {
  io->in.resize(n);
  for (size_t i = 0; i < n; ++i) io->in[i] = me.rank * 10 + int32_t(i);
  char* base = static_cast<char*>(a.base) + off;
  std::vector<int32_t>* out = &io->out;
  out->assign(n, -1);
  MP_NCCL(ferryDeviceMemcpyAsync(base, io->in.data(), n * 4, s));
  if (grouped) MP_NCCL(ncclGroupStart());
  MP_NCCL(ncclAllReduce(base, base + kArenaBytes / 2, n, ncclInt32, ncclSum, me.comm, static_cast<cudaStream_t>(s)));
  if (grouped) MP_NCCL(ncclGroupEnd());
  MP_NCCL(ferryDeviceMemcpyAsync(out->data(), base + kArenaBytes / 2, n * 4, s));
  return 0;
}

int checkAllReduce(const Rank& me, const Io& io, const char* what) {
  const std::vector<int32_t>& out = io.out;
  const int32_t ranks = 10 * me.nranks * (me.nranks - 1) / 2;
  for (size_t i = 0; i < out.size(); ++i)
    MP_CHECK(out[i] == ranks + me.nranks * int32_t(i), "rank %d: %s element %zu is %d", me.rank, what, i, out[i]);
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
  for (const char* k : {"AllReduce on ", "ReduceScatter on ", "AllGather on ", "Broadcast on "})
    EXPECT_EQ(logFilesWith(logDir(), tag, k + backend + " windows"), n) << k;
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpDeviceWindow,
                         ::testing::Values(std::tuple{"testdev", 2}, std::tuple{"testdev", 3},
                                           std::tuple{"testdev", 4}, std::tuple{"cuda", 2},
                                           std::tuple{"cuda", 4}));

// CUDA (stand-in driver): two windows in one allocation. CUDA maps a peer's
// allocation once per process (the stand-in refuses a second
// cuIpcOpenMemHandle of it, CUDA_ERROR_ALREADY_MAPPED), so the second
// window shares the first's mapping, and deregistering both closes it once.
TEST(MpDeviceWindowCuda, TwoWindowsInOneAllocation) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      Arena a;
      MP_NCCL(ncclMemAlloc(&a.base, kArenaBytes));
      ncclWindow_t lo = nullptr, hi = nullptr;
      MP_NCCL(ncclCommWindowRegister(me.comm, a.base, kArenaBytes / 2, &lo, NCCL_WIN_COLL_SYMMETRIC));
      MP_NCCL(ncclCommWindowRegister(me.comm, static_cast<char*>(a.base) + kArenaBytes / 2, kArenaBytes / 2, &hi,
                                     NCCL_WIN_COLL_SYMMETRIC));
      MP_NCCL(ferryDeviceStreamCreate(&a.stream));
      Io out;
      MP_TRY(windowAllReduce(me, a, 4096, 3000, a.stream, &out));  // input in lo, output in hi
      MP_NCCL(ferryDeviceStreamSynchronize(a.stream));
      MP_TRY(checkAllReduce(me, out, "across two windows"));
      MP_CHECK(fakeCudaCount("cuIpcOpenMemHandle") == 1, "rank %d: %ld opens of one peer allocation", me.rank,
               fakeCudaCount("cuIpcOpenMemHandle"));
      unsigned long long staged = 1;
      MP_TRY(stagedBytes(me, &staged));
      MP_CHECK(staged == 0, "rank %d: %llu bytes staged", me.rank, staged);
      MP_NCCL(ncclCommWindowDeregister(me.comm, lo));
      MP_NCCL(ncclCommWindowDeregister(me.comm, hi));
      MP_NCCL(ferryDeviceStreamDestroy(a.stream));
      MP_NCCL(ncclMemFree(a.base));
      return 0;
    });
  }, opts("cudatwo", {}, 120, "cuda"));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "cudatwo", "window 2: 4194304 bytes of cuda memory"), 2);
  EXPECT_EQ(logFilesWith(logDir(), "cudatwo", "AllReduce on cuda windows"), 2);
}

// CUDA (stand-in driver): a window collective on a capturing stream is
// refused by name like any other (the bridge's check), not recorded.
TEST(MpDeviceWindowCuda, CaptureIsRefusedByName) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      Arena a;
      MP_TRY(openArena(me, &a));
      void* lib = dlopen(FERRY_FAKECUDA, RTLD_NOW | RTLD_NOLOAD);
      MP_CHECK(lib != nullptr, "the driver was not loaded");
      auto begin = reinterpret_cast<int (*)(void*, int)>(dlsym(lib, "cuStreamBeginCapture_v2"));
      auto end = reinterpret_cast<int (*)(void*, void**)>(dlsym(lib, "cuStreamEndCapture"));
      MP_CHECK(begin && end, "no capture entry points");
      char* out = static_cast<char*>(a.base) + kArenaBytes / 2;
      MP_CHECK(begin(a.stream, 2) == 0, "cuStreamBeginCapture failed");
      MP_EXPECT_RESULT(ncclAllReduce(a.base, out, 1000, ncclInt32, ncclSum, me.comm,
                                     static_cast<cudaStream_t>(a.stream)),
                       ncclInvalidUsage);
      void* graph = nullptr;
      MP_CHECK(end(a.stream, &graph) == 0, "cuStreamEndCapture failed");
      MP_CHECK(fakeCudaCount("captured") == 0, "the refused call left %ld tasks in the graph",
               fakeCudaCount("captured"));
      dlclose(lib);
      Io res;
      MP_TRY(windowAllReduce(me, a, 0, 1000, a.stream, &res));
      MP_NCCL(ferryDeviceStreamSynchronize(a.stream));
      MP_TRY(checkAllReduce(me, res, "after the capture"));
      return closeArena(me, &a);
    });
  }, opts("capture", {}, 120, "cuda"));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "capture", "stream capture (CUDA graphs) are not supported yet"), 2);
}

// Holds a stream back until release(): the stream waits on a registered
// host word (cuStreamWaitValue32), which holds no host-function thread.
class StreamGate {
 public:
  int hold(void* stream) {
    const char* real = std::getenv("FERRY_TEST_CUDA_LIBRARY");
    lib_ = dlopen(real ? real : FERRY_FAKECUDA, RTLD_NOW | RTLD_NOLOAD);
    MP_CHECK(lib_ != nullptr, "the driver was not loaded");
    auto reg = reinterpret_cast<int (*)(void*, size_t, unsigned)>(dlsym(lib_, "cuMemHostRegister_v2"));
    auto devPtr = reinterpret_cast<int (*)(unsigned long long*, void*, unsigned)>(
        dlsym(lib_, "cuMemHostGetDevicePointer_v2"));
    auto wait = reinterpret_cast<int (*)(void*, unsigned long long, uint32_t, unsigned)>(
        dlsym(lib_, "cuStreamWaitValue32_v2"));
    MP_CHECK(reg && devPtr && wait, "no entry points to hold a stream with");
    MP_CHECK(reg(word_, sizeof(word_), 2 /* DEVICEMAP */) == 0, "cuMemHostRegister failed");
    unsigned long long dev = 0;
    MP_CHECK(devPtr(&dev, word_, 0) == 0, "cuMemHostGetDevicePointer failed");
    MP_CHECK(wait(stream, dev, 1, 0) == 0, "cuStreamWaitValue32 failed");
    return 0;
  }
  void release() { __atomic_store_n(&word_[0], 1u, __ATOMIC_RELEASE); }
  ~StreamGate() {
    if (lib_) dlclose(lib_);
  }

 private:
  alignas(4096) uint32_t word_[1024] = {};
  void* lib_ = nullptr;
};

// CUDA (stand-in driver, which runs host functions one at a time across
// streams, as CUDA may): two communicators, one stream each, both ranks
// calling A then B. Rank 0's stream A and rank 1's stream B are held back,
// so each rank's other stream reaches its barrier first. A barrier that
// waited in a host function held the host-function thread there, and the
// peer's arrival it waited for was queued behind the peer's own waiting
// one: both ranks stalled until the timeout. Barriers the streams wait for
// on the device side pass, and both sums are exact.
TEST(MpDeviceWindowCuda, CrossedStreamsOfTwoCommunicators) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      ncclComm_t other = nullptr;
      MP_NCCL(ncclCommSplit(me.comm, 0, me.rank, &other, nullptr));
      Rank me2{other, me.rank, me.nranks};
      Arena a, b;
      MP_TRY(openArena(me, &a));
      MP_TRY(openArena(me2, &b));
      // Inputs first: a copy from pageable memory may wait for its stream.
      const size_t n = 3000;
      Io io;
      io.in.resize(n);
      for (size_t i = 0; i < n; ++i) io.in[i] = me.rank * 10 + int32_t(i);
      for (Arena* x : {&a, &b}) {
        MP_NCCL(ferryDeviceMemcpyAsync(x->base, io.in.data(), n * 4, x->stream));
        MP_NCCL(ferryDeviceStreamSynchronize(x->stream));
      }
      StreamGate gate;
      MP_TRY(gate.hold(me.rank == 0 ? a.stream : b.stream));
      for (auto [c, x] : {std::pair{me.comm, &a}, std::pair{other, &b}})
        MP_NCCL(ncclAllReduce(x->base, static_cast<char*>(x->base) + kArenaBytes / 2, n, ncclInt32, ncclSum, c,
                              static_cast<cudaStream_t>(x->stream)));
      usleep(300000);  // the streams not held reach their first barriers
      gate.release();
      for (auto [what, x] : {std::pair{"communicator A", &a}, std::pair{"communicator B", &b}}) {
        io.out.assign(n, -1);
        MP_NCCL(ferryDeviceMemcpyAsync(io.out.data(), static_cast<char*>(x->base) + kArenaBytes / 2, n * 4,
                                       x->stream));
        MP_NCCL(ferryDeviceStreamSynchronize(x->stream));
        MP_TRY(checkAllReduce(me, io, what));
      }
      for (ncclComm_t c : {me.comm, other}) {
        ncclResult_t async = ncclInternalError;
        MP_NCCL(ncclCommGetAsyncError(c, &async));
        MP_CHECK(async == ncclSuccess, "rank %d: a communicator failed (%d)", me.rank, int(async));
      }
      MP_TRY(closeArena(me2, &b));
      MP_TRY(closeArena(me, &a));
      MP_NCCL(ncclCommDestroy(other));
      return 0;
    });
  }, opts("crossed", {{"FERRY_TIMEOUT_MS", "20000"}}, 120, "cuda"));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "crossed", "AllReduce on cuda windows"), 2);
}

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

// NCCL's stream contract on the direct path: with every stream task slowed,
// rank 0's call returns while its stream still has the collective ahead,
// before rank 1 has even uploaded its input; the copy enqueued after it
// reads the sum (a stream that did not wait for rank 1 reads zeros).
TEST(MpDeviceWindowStream, CallReturnsBeforeTheWork) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      Arena a;
      MP_TRY(openArena(me, &a));
      MP_NCCL(ferryDeviceSetTaskDelayUs(2000));
      const size_t n = 4096;
      std::vector<int32_t> in(n), out(n, -1);
      for (size_t i = 0; i < n; ++i) in[i] = me.rank + int32_t(i);
      char* dout = static_cast<char*>(a.base) + kArenaBytes / 2;
      if (me.rank == 1) {
        // Late: rank 0's stream must wait for this input, not read it early.
        MP_CHECK(harnessBarrier(1), "barrier");
        usleep(30000);
      }
      MP_NCCL(ferryDeviceMemcpyAsync(a.base, in.data(), n * 4, a.stream));
      MP_NCCL(ncclAllReduce(a.base, dout, n, ncclInt32, ncclSum, me.comm, static_cast<cudaStream_t>(a.stream)));
      if (me.rank == 0) {
        MP_EXPECT_RESULT(ferryDeviceStreamQuery(a.stream), ncclInProgress);
        MP_CHECK(harnessBarrier(1), "barrier");
      }
      MP_NCCL(ferryDeviceMemcpyAsync(out.data(), dout, n * 4, a.stream));
      MP_NCCL(ferryDeviceStreamSynchronize(a.stream));
      for (size_t i = 0; i < n; ++i)
        MP_CHECK(out[i] == 1 + 2 * int32_t(i), "rank %d: element %zu is %d", me.rank, i, out[i]);
      MP_NCCL(ferryDeviceSetTaskDelayUs(0));
      return closeArena(me, &a);
    });
  }, opts("contract"));
  EXPECT_RANKS_OK(res);
}

// Rank 0 calls AllReduce where rank 1 calls AllGather on the same window
// offsets: the descriptors compared after the first barrier differ, and
// both ranks' communicators fail with ncclInvalidUsage naming both calls
// (not by timeout: that is set far beyond the test's wait).
TEST(MpDeviceWindowStream, RanksThatDisagreeFailNamingBothCalls) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return ownComm(rank, nranks, id, [](Rank& me, Arena& a) {
      char* out = static_cast<char*>(a.base) + kArenaBytes / 2;
      auto s = static_cast<cudaStream_t>(a.stream);
      if (me.rank == 0) MP_NCCL(ncclAllReduce(a.base, out, 1024, ncclInt32, ncclSum, me.comm, s));
      if (me.rank == 1) MP_NCCL(ncclAllGather(a.base, out, 512, ncclInt32, me.comm, s));
      MP_NCCL(ferryDeviceStreamSynchronize(a.stream));
      ncclResult_t async = ncclSuccess;
      MP_NCCL(ncclCommGetAsyncError(me.comm, &async));
      MP_CHECK(async == ncclInvalidUsage, "rank %d: async error %s after mismatched collectives", me.rank,
               resultName(async).c_str());
      ncclCommAbort(me.comm);
      return 0;
    });
  }, opts("disagree", {{"FERRY_TIMEOUT_MS", "600000"}}, 120));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "disagree", "ranks disagree on a collective over device windows"), 2);
  EXPECT_EQ(logFilesWith(logDir(), "disagree", "AllGather #1 count 512"), 2);
}

// Two streams on one communicator, as NCCL allows: rank 0 puts AllReduce X
// on a stream behind a backlog and Y on a second stream, rank 1 both on one
// stream and overwrites its X input right after. Operations of one
// communicator run in call order whatever their streams, so both are exact
// (without that, rank 0's Y raised its barrier flags past X's and rank 1
// passed X's barriers before rank 0 had read its input).
TEST(MpDeviceWindowStream, TwoStreamsOnOneCommunicatorExact) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      Arena a;
      MP_TRY(openArena(me, &a));
      void* b = nullptr;
      MP_NCCL(ferryDeviceStreamCreate(&b));
      const size_t n = 4096, off = 1 << 20;
      Io ox, oy;
      std::vector<int32_t> junk(n, 1000000);
      MP_NCCL(ferryDeviceSetTaskDelayUs(300));
      if (me.rank == 0)
        for (int i = 0; i < 100; ++i) MP_NCCL(ferryDeviceMemcpyAsync(junk.data(), junk.data() + 1, 4, a.stream));
      MP_TRY(windowAllReduce(me, a, 0, n, a.stream, &ox));
      MP_TRY(windowAllReduce(me, a, off, n, me.rank == 0 ? b : a.stream, &oy));
      if (me.rank == 1) MP_NCCL(ferryDeviceMemcpyAsync(a.base, junk.data(), n * 4, a.stream));
      MP_NCCL(ferryDeviceStreamSynchronize(a.stream));
      MP_NCCL(ferryDeviceStreamSynchronize(b));
      MP_NCCL(ferryDeviceSetTaskDelayUs(0));
      ncclResult_t async = ncclSuccess;
      MP_NCCL(ncclCommGetAsyncError(me.comm, &async));
      MP_CHECK(async == ncclSuccess, "rank %d: async error %s", me.rank, resultName(async).c_str());
      MP_TRY(checkAllReduce(me, ox, "X"));
      MP_TRY(checkAllReduce(me, oy, "Y"));
      MP_NCCL(ferryDeviceStreamDestroy(b));
      return closeArena(me, &a);
    });
  }, opts("twostreams", {{"FERRY_TIMEOUT_MS", "20000"}}));
  EXPECT_RANKS_OK(res);
}

// One rank calls inside a group, the other outside: both take the stream
// path (the group does not send it to the bridge), so they meet.
TEST(MpDeviceWindowStream, AGroupOnOneRankOnlyStillMeets) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      Arena a;
      MP_TRY(openArena(me, &a));
      Io out;
      MP_TRY(windowAllReduce(me, a, 0, 1000, a.stream, &out, me.rank == 0));
      MP_NCCL(ferryDeviceStreamSynchronize(a.stream));
      MP_TRY(checkAllReduce(me, out, "grouped"));
      return closeArena(me, &a);
    });
  }, opts("group"));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "group", "AllReduce on testdev windows"), 2);
}

// ncclCommDestroy right after the call, its stream still slow to get there:
// destruction waits for the stream work (which reads the peers' windows and
// the sync pages), and the stream still delivers the sum.
TEST(MpDeviceWindowStream, DestroyWaitsForQueuedWork) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return ownComm(rank, nranks, id, [](Rank& me, Arena& a) {
      MP_NCCL(ferryDeviceSetTaskDelayUs(3000));
      Io out;
      MP_TRY(windowAllReduce(me, a, 0, 2048, a.stream, &out));
      MP_NCCL(closeComm(me.comm));  // the window goes with it
      MP_NCCL(ferryDeviceStreamSynchronize(a.stream));
      MP_NCCL(ferryDeviceSetTaskDelayUs(0));
      return checkAllReduce(me, out, "after destroy");
    });
  }, opts("destroy"));
  EXPECT_RANKS_OK(res);
}

// Rank 1 registers its window and leaves: rank 0's AllReduce waits on its
// stream for rank 1's flag, gives up after the communicator's timeout, and
// the communicator reports the failure; the stream is released.
TEST(MpDeviceWindowStream, DeadPeerFailsTheCommunicatorAndReleasesTheStream) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return ownComm(rank, nranks, id, [](Rank& me, Arena& a) {
      if (me.rank == 1) _exit(0);  // leaves without a word
      MP_NCCL(ncclAllReduce(a.base, static_cast<char*>(a.base) + kArenaBytes / 2, 1024, ncclInt32, ncclSum,
                            me.comm, static_cast<cudaStream_t>(a.stream)));
      // The stream waits as long as the communicator's timeout, and so does
      // one synchronize: ask until it is through.
      ncclResult_t sync = ncclInternalError;
      for (int i = 0; i < 10 && sync != ncclSuccess; ++i) sync = ferryDeviceStreamSynchronize(a.stream);
      MP_CHECK(sync == ncclSuccess, "the stream was not released: %s", resultName(sync).c_str());
      ncclResult_t async = ncclSuccess;
      MP_NCCL(ncclCommGetAsyncError(me.comm, &async));
      MP_CHECK(async != ncclSuccess && async != ncclInProgress,
               "the AllReduce with a dead peer left async error %d", static_cast<int>(async));
      ncclCommAbort(me.comm);
      return 0;
    });
  }, opts("dead", {{"FERRY_TIMEOUT_MS", "3000"}}, 120));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "dead", "did not reach barrier"), 1);
}

}  // namespace
}  // namespace ferry::mp
