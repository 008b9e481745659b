// PreMulSum with the scalar in memory (ncclScalarDevice): NCCL reads it
// while the collective runs, not when the operation is created. Checked:
//  - device memory (testdev, and CUDA over the stand-in driver): the
//    scalar is written on the collective's stream after the operation was
//    created, then rewritten between two collectives; each sum is scaled by
//    the value its stream wrote just before it, exactly;
//  - the same on device windows (staged: the direct path takes no device
//    scalar), in a group, and with the scalar in host memory the stream
//    writes (a call on a stream reads it when the stream gets there too);
//  - host memory: the value at each call counts;
//  - a device scalar for a call that is not ordered on that device is
//    refused by name (before, the host read device memory: a crash on
//    testdev, a wrong value on CUDA).
#include <ferry/device.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/mp/coll_cases.h"

namespace ferry::mp {
namespace {

const std::string& logDir() { return testLogDir("devscalar"); }

constexpr size_t kCount = 3000;

RunOptions opts(const std::string& tag, const std::string& backend) {
  Env env;
  if (!backend.empty()) env["FERRY_DEVICE"] = backend;
  const char* real = std::getenv("FERRY_TEST_CUDA_LIBRARY");
  if (backend == "cuda") env["FERRY_CUDA_LIBRARY"] = real ? real : FERRY_FAKECUDA;
  return loggedOptions(logDir(), tag, "INIT,COLL", std::move(env), 120);
}

// Inputs r * 10 + i as floats: every sum and small multiple is exact.
float expected(const Rank& me, size_t i, float scalar) {
  float sum = 0;
  for (int r = 0; r < me.nranks; ++r) sum += float(r * 10) + float(i);
  return scalar * sum;
}

struct DeviceBufs {
  void* stream = nullptr;
  float* scalar = nullptr;  // device memory, or hostScalar
  float hostScalar = 0;
  float* in = nullptr;
  float* out = nullptr;
  void* base = nullptr;
  ncclWindow_t win = nullptr;
  std::vector<float> hostIn, hostOut;
  float values[3] = {1.0f, 3.0f, 5.0f};  // host sources of the stream's scalar writes
};

// The scalar in device memory, or (hostScalar) in host memory that the
// stream writes all the same: a call ordered on a stream reads it when the
// stream gets there either way.
int setUp(const Rank& me, DeviceBufs* b, bool window, bool hostScalar = false) {
  MP_NCCL(ferryDeviceStreamCreate(&b->stream));
  void* mem = nullptr;
  const size_t bytes = 2 * kCount * sizeof(float) + 4096;
  MP_NCCL(ncclMemAlloc(&mem, bytes));
  if (window) MP_NCCL(ncclCommWindowRegister(me.comm, mem, bytes, &b->win, NCCL_WIN_COLL_SYMMETRIC));
  b->base = mem;
  b->scalar = hostScalar ? &b->hostScalar : static_cast<float*>(mem);
  b->in = reinterpret_cast<float*>(static_cast<char*>(mem) + 4096);
  b->out = b->in + kCount;
  b->hostIn.resize(kCount);
  for (size_t i = 0; i < kCount; ++i) b->hostIn[i] = float(me.rank * 10) + float(i);
  MP_NCCL(ferryDeviceMemcpyAsync(b->in, b->hostIn.data(), kCount * sizeof(float), b->stream));
  MP_NCCL(ferryDeviceMemcpyAsync(b->scalar, &b->values[0], sizeof(float), b->stream));
  return ferryDeviceStreamSynchronize(b->stream) == ncclSuccess ? 0 : 1;
}

int tearDown(const Rank& me, DeviceBufs* b) {
  MP_NCCL(ferryDeviceStreamSynchronize(b->stream));
  if (b->win) MP_NCCL(ncclCommWindowDeregister(me.comm, b->win));
  MP_NCCL(ncclMemFree(b->base));
  MP_NCCL(ferryDeviceStreamDestroy(b->stream));
  return 0;
}

// Two AllReduces with one PreMulSum operation; before each, the stream
// writes the scalar (3, then 5), after the operation was created with 1 in
// place. Both results are read back at the end.
int twoScaledSums(const Rank& me, DeviceBufs* b, bool grouped) {
  ncclRedOp_t op;
  MP_NCCL(ncclRedOpCreatePreMulSum(&op, b->scalar, ncclFloat32, ncclScalarDevice, me.comm));
  std::vector<float> first(kCount, -1), second(kCount, -1);
  // On testdev every stream task starts late, so the stream's writes of
  // the scalar cannot have run by the time the calls return.
  const char* name = nullptr;
  MP_NCCL(ferryDeviceName(&name));
  const bool slow = std::string(name) == "testdev";
  if (slow) MP_NCCL(ferryDeviceSetTaskDelayUs(2000));
  for (int k = 1; k <= 2; ++k) {
    MP_NCCL(ferryDeviceMemcpyAsync(b->scalar, &b->values[k], sizeof(float), b->stream));
    if (grouped) MP_NCCL(ncclGroupStart());
    MP_NCCL(ncclAllReduce(b->in, b->out, kCount, ncclFloat32, op, me.comm, static_cast<cudaStream_t>(b->stream)));
    if (grouped) MP_NCCL(ncclGroupEnd());
    MP_NCCL(ferryDeviceMemcpyAsync(k == 1 ? first.data() : second.data(), b->out, kCount * sizeof(float),
                                   b->stream));
  }
  MP_NCCL(ferryDeviceStreamSynchronize(b->stream));
  if (slow) MP_NCCL(ferryDeviceSetTaskDelayUs(0));
  MP_NCCL(ncclRedOpDestroy(op, me.comm));
  for (size_t i = 0; i < kCount; ++i) {
    MP_CHECK(first[i] == expected(me, i, 3.0f), "rank %d: first sum, element %zu is %g, expected %g", me.rank, i,
             first[i], expected(me, i, 3.0f));
    MP_CHECK(second[i] == expected(me, i, 5.0f), "rank %d: second sum, element %zu is %g, expected %g", me.rank,
             i, second[i], expected(me, i, 5.0f));
  }
  return 0;
}

class MpDeviceScalar : public ::testing::TestWithParam<std::string> {};

TEST_P(MpDeviceScalar, ReadWhenTheStreamGetsThere) {
  const std::string backend = GetParam();
  RunResult res = runRanks(2, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      for (bool window : {false, true}) {
        for (bool grouped : {false, true}) {
          for (bool hostScalar : {false, true}) {
            DeviceBufs b;
            MP_TRY(setUp(me, &b, window, hostScalar));
            MP_TRY(twoScaledSums(me, &b, grouped));
            MP_TRY(tearDown(me, &b));
          }
        }
      }
      // Host buffers without a stream: nothing orders a read of the device
      // scalar, so the call is refused by name.
      DeviceBufs b;
      MP_TRY(setUp(me, &b, false));
      ncclRedOp_t op;
      MP_NCCL(ncclRedOpCreatePreMulSum(&op, b.scalar, ncclFloat32, ncclScalarDevice, me.comm));
      std::vector<float> in(16, 1.0f), out(16);
      MP_EXPECT_RESULT(ncclAllReduce(in.data(), out.data(), 16, ncclFloat32, op, me.comm, nullptr),
                       ncclInvalidUsage);
      MP_NCCL(ncclRedOpDestroy(op, me.comm));
      return tearDown(me, &b);
    });
  }, opts("dev-" + backend, backend));
  EXPECT_RANKS_OK(res);
  EXPECT_EQ(logFilesWith(logDir(), "dev-" + backend, "(ncclScalarDevice): the call must be ordered"), 2);
}

INSTANTIATE_TEST_SUITE_P(Backends, MpDeviceScalar, ::testing::Values("testdev", "cuda"));

// Host memory: the value at each call counts, not the one at creation.
TEST(MpHostScalar, ReadAtEachCall) {
  RunResult res = runRanks(3, [](int rank, int nranks, const ncclUniqueId& id) {
    return withComm(rank, nranks, id, [](const Rank& me) {
      float scalar = 1.0f;
      ncclRedOp_t op;
      MP_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarDevice, me.comm));
      std::vector<float> in(kCount), out(kCount);
      for (size_t i = 0; i < kCount; ++i) in[i] = float(me.rank * 10) + float(i);
      for (float v : {2.0f, 4.0f}) {
        scalar = v;
        MP_NCCL(ncclAllReduce(in.data(), out.data(), kCount, ncclFloat32, op, me.comm, nullptr));
        for (size_t i = 0; i < kCount; ++i)
          MP_CHECK(out[i] == expected(me, i, v), "rank %d: scalar %g, element %zu is %g", me.rank, v, i, out[i]);
      }
      return ncclRedOpDestroy(op, me.comm) == ncclSuccess ? 0 : 1;
    });
  }, opts("host", ""));
  EXPECT_RANKS_OK(res);
}

}  // namespace
}  // namespace ferry::mp
