// Device windows (issue 14), the stream side: NCCL's stream contract on
// the direct path, ranks that disagree, two streams on one communicator, a
// group on one rank only, destroy with work queued, a dead peer; and on
// CUDA (the stand-in driver): two windows in one allocation, a capturing
// stream refused, and two communicators whose streams reach their
// barriers in opposite orders (the stand-in runs host functions one at a
// time, as CUDA may). Helpers in device_window_util.h.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "tests/mp/device_window_util.h"
#include "tests/mp/fake_cuda_count.h"

namespace ferry::mp {
namespace {

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

// CUDA (stand-in driver): a Reduce root whose output is pageable host
// memory, which its copies could take but its kernels cannot. Only the
// root knows; the others take the direct path. The root's call fails
// naming the operand and fails the communicator, and the others learn it
// from the host's failure board long before the timeout (60 s here).
int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TEST(MpDeviceWindowCuda, RootOperandRefusedFailsEveryRank) {
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return ownComm(rank, nranks, id, [](Rank& me, Arena& a) {
      std::vector<int32_t> pageable(1024, -1);
      const int64_t start = nowMs();
      ncclResult_t r = ncclReduce(a.base, me.rank == 0 ? static_cast<void*>(pageable.data()) : nullptr, 1024,
                                  ncclInt32, ncclSum, 0, me.comm, static_cast<cudaStream_t>(a.stream));
      if (me.rank == 0) MP_CHECK(r == ncclInvalidUsage, "the root's call returned %s", resultName(r).c_str());
      ncclResult_t async = ncclSuccess;
      for (int i = 0; i < 3000 && async == ncclSuccess; ++i) {
        MP_NCCL(ncclCommGetAsyncError(me.comm, &async));
        usleep(10000);
      }
      MP_CHECK(async != ncclSuccess && async != ncclInProgress, "rank %d: no error after %lld ms", me.rank,
               static_cast<long long>(nowMs() - start));
      MP_CHECK(nowMs() - start < 30000, "rank %d: the error took %lld ms (the timeout's, not the board's)",
               me.rank, static_cast<long long>(nowMs() - start));
      ncclCommAbort(me.comm);
      return 0;
    });
  }, opts("rootop", {{"FERRY_TIMEOUT_MS", "60000"}}, 120, "cuda"));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "rootop", "is pageable host memory"), 1);
}

}  // namespace
}  // namespace ferry::mp
