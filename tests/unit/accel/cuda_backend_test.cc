// The CUDA backend (src/accel/cuda_accel.h) in-process against the stand-in
// driver (tests/support/fake_cuda): memory, ownership, copies, streams, the
// reduction kernels (their launch, run by the stand-in as the host
// instantiation of the code nvcc compiled) against kernels::reduce, stream
// waits on the registered flag slab, and errors that name the call.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "accel/accelerator.h"
#include "kernels/reduce.h"

namespace ferry::accel {
namespace {

// Before anything reads the configuration. FERRY_DEVICE=cuda: this process
// has no CUDA context of its own, which the backend otherwise waits for.
const int kUseFake = setenv("FERRY_CUDA_LIBRARY", FERRY_FAKECUDA, 1) | setenv("FERRY_DEVICE", "cuda", 1);

long fakeCount(const char* name) {
  void* lib = dlopen(FERRY_FAKECUDA, RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return -1;
  auto f = reinterpret_cast<long (*)(const char*)>(dlsym(lib, "fakeCudaCount"));
  long n = f ? f(name) : -1;
  dlclose(lib);
  return n;
}

class CudaBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(kUseFake, 0);
    cuda_ = find("cuda");
    ASSERT_NE(cuda_, nullptr) << "the CUDA backend did not load the stand-in driver";
    auto s = cuda_->createStream();
    ASSERT_TRUE(s.isOk()) << s.status().message();
    stream_ = s.value();
  }
  void TearDown() override {
    if (stream_) {
      EXPECT_TRUE(cuda_->destroyStream(stream_).isOk());
    }
  }
  void* devAlloc(size_t n) {
    auto p = cuda_->alloc(n);
    EXPECT_TRUE(p.isOk()) << p.status().message();
    return p.isOk() ? p.value() : nullptr;
  }
  Accelerator* cuda_ = nullptr;
  StreamHandle stream_ = nullptr;
};

TEST_F(CudaBackend, RoundTripAndOwnership) {
  std::vector<int> in(5000), out(5000, -1);
  for (size_t i = 0; i < in.size(); ++i) in[i] = int(i * 7);
  void* d = devAlloc(in.size() * 4);
  EXPECT_TRUE(cuda_->owns(d));
  EXPECT_FALSE(cuda_->owns(in.data()));
  EXPECT_EQ(&ownerOf(d), cuda_);
  ASSERT_TRUE(cuda_->copyAsync(d, in.data(), in.size() * 4, stream_).isOk());
  ASSERT_TRUE(cuda_->copyAsync(out.data(), d, in.size() * 4, stream_).isOk());
  ASSERT_TRUE(cuda_->synchronize(stream_, 10000).isOk());
  EXPECT_EQ(out, in);
  auto idle = cuda_->idle(stream_);
  ASSERT_TRUE(idle.isOk());
  EXPECT_TRUE(idle.value());
  EXPECT_TRUE(cuda_->free(d).isOk());
}

// Random bytes for the integer and low-precision types (every code,
// NaNs included), finite random values for float32/float64 (whose NaN
// payloads the hardware picks).
std::vector<uint8_t> inputs(kernels::DType t, size_t n, std::mt19937_64& rng) {
  const size_t e = kernels::sizeOf(t);
  std::vector<uint8_t> v(n * e);
  for (size_t i = 0; i < n; ++i) {
    if (t == kernels::DType::kFloat32) {
      float f = float(int64_t(rng() % 2000001) - 1000000) / 64.0f;
      std::memcpy(&v[i * 4], &f, 4);
    } else if (t == kernels::DType::kFloat64) {
      double f = double(int64_t(rng() % 2000001) - 1000000) / 1024.0;
      std::memcpy(&v[i * 8], &f, 8);
    } else {
      uint64_t r = rng();
      std::memcpy(&v[i * e], &r, e);
    }
  }
  return v;
}

TEST_F(CudaBackend, ReductionKernelsMatchTheHostKernels) {
  std::mt19937_64 rng(3);
  const size_t n = 4099;  // more than one block, not a multiple of it
  for (int ti = 0; ti < kernels::kNumDTypes; ++ti) {
    auto t = static_cast<kernels::DType>(ti);
    const size_t bytes = n * kernels::sizeOf(t);
    for (int oi = 0; oi < kernels::kNumOps; ++oi) {
      auto op = static_cast<kernels::Op>(oi);
      std::vector<uint8_t> a = inputs(t, n, rng), b = inputs(t, n, rng), want(bytes), got(bytes);
      kernels::reduce(want.data(), a.data(), b.data(), n, t, op);
      void* da = devAlloc(bytes);
      void* db = devAlloc(bytes);
      ASSERT_TRUE(cuda_->copyAsync(da, a.data(), bytes, stream_).isOk());
      ASSERT_TRUE(cuda_->copyAsync(db, b.data(), bytes, stream_).isOk());
      Status st = cuda_->reduceAsync(da, da, db, n, t, op, stream_);  // in place, as collectives do
      ASSERT_TRUE(st.isOk()) << st.message();
      ASSERT_TRUE(cuda_->copyAsync(got.data(), da, bytes, stream_).isOk());
      ASSERT_TRUE(cuda_->synchronize(stream_, 10000).isOk());
      EXPECT_EQ(std::memcmp(want.data(), got.data(), bytes), 0) << kernels::name(t) << " " << kernels::name(op);
      EXPECT_TRUE(cuda_->free(da).isOk());
      EXPECT_TRUE(cuda_->free(db).isOk());
    }
  }
  EXPECT_EQ(fakeCount("cuLaunchKernel"), kernels::kNumDTypes * kernels::kNumOps);
  EXPECT_EQ(fakeCount("cuModuleLoadData"), 1);  // loaded once
}

TEST_F(CudaBackend, KernelsRefusePageableHostMemory) {
  std::vector<float> host(64, 1.0f);
  void* d = devAlloc(256);
  Status st = cuda_->reduceAsync(d, d, host.data(), 64, kernels::DType::kFloat32, kernels::Op::kSum, stream_);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("cuLaunchKernel"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("illegal memory access"), std::string::npos) << st.message();
  EXPECT_TRUE(cuda_->free(d).isOk());
}

// The stream waits with cuStreamWaitValue32 on a flag of the registered
// slab: work behind the wait runs only once the flag is set.
TEST_F(CudaBackend, StreamWaitsOnASlabFlag) {
  std::shared_ptr<HostFlag> flag = cuda_->newFlag();
  const long before = fakeCount("cuStreamWaitValue32");
  std::atomic<bool> ran{false};
  ASSERT_TRUE(cuda_->waitFlagAsync(stream_, flag.get(), 1, 10000).isOk());
  ASSERT_TRUE(cuda_->hostFnAsync(stream_, [&] { ran = true; }).isOk());
  EXPECT_EQ(fakeCount("cuStreamWaitValue32"), before + 1);
  auto idle = cuda_->idle(stream_);
  ASSERT_TRUE(idle.isOk());
  EXPECT_FALSE(idle.value());
  EXPECT_FALSE(ran.load());
  Status early = cuda_->synchronize(stream_, 50);
  EXPECT_EQ(early.code(), Code::kTimeout) << early.message();
  flag->add(1);
  ASSERT_TRUE(cuda_->synchronize(stream_, 10000).isOk());
  EXPECT_TRUE(ran.load());
}

// Flags outlive one slab (1024): the backend registers another instead of
// handing out plain flags, whose waits would block host functions (the
// crossed-streams stall). Freed slots are reused before a new slab.
TEST_F(CudaBackend, FlagsBeyondOneSlabAreStillWaitedOnByTheStream) {
  std::vector<std::shared_ptr<HostFlag>> held;
  for (int i = 0; i < 1500; ++i) held.push_back(cuda_->newFlag());
  const long waits = fakeCount("cuStreamWaitValue32");
  const long hostFns = fakeCount("cuLaunchHostFunc");
  for (size_t i = held.size() - 3; i < held.size(); ++i) {
    held[i]->add(1);
    ASSERT_TRUE(cuda_->waitFlagAsync(stream_, held[i].get(), 1, 10000).isOk());
  }
  EXPECT_EQ(fakeCount("cuStreamWaitValue32"), waits + 3);
  EXPECT_EQ(fakeCount("cuLaunchHostFunc"), hostFns) << "a wait fell back to a host function";
  ASSERT_TRUE(cuda_->synchronize(stream_, 10000).isOk());
  // Distinct flags, none shared by two holders.
  std::set<const void*> words;
  for (auto& f : held) words.insert(f->word());
  EXPECT_EQ(words.size(), held.size());
  held.resize(100);
  for (int i = 0; i < 1400; ++i) held.push_back(cuda_->newFlag());
  words.clear();
  for (auto& f : held) words.insert(f->word());
  EXPECT_EQ(words.size(), held.size());
}

// The bridge's pieces are counted by the stream itself: a device store
// into the slab flag (cuStreamWriteValue32) once the copy before it ran,
// never lowering the flag.
TEST_F(CudaBackend, StreamRaisesASlabFlagAfterTheWorkBeforeIt) {
  std::shared_ptr<HostFlag> gate = cuda_->newFlag(), count = cuda_->newFlag();
  const size_t n = 1 << 12;
  std::vector<char> staging(n, 0);
  void* d = devAlloc(n);
  ASSERT_TRUE(cuda_->pinHost(staging.data(), n).isOk());
  std::vector<char> ones(n, 1);
  ASSERT_TRUE(cuda_->copyAsync(d, ones.data(), n, stream_).isOk());  // pageable: done on return
  const long before = fakeCount("cuStreamWriteValue32");
  ASSERT_TRUE(cuda_->waitFlagAsync(stream_, gate.get(), 1, 10000).isOk());
  ASSERT_TRUE(cuda_->copyAsync(staging.data(), d, n, stream_).isOk());
  ASSERT_TRUE(cuda_->signalFlagAsync(stream_, count.get(), 3).isOk());
  ASSERT_TRUE(cuda_->signalFlagAsync(stream_, count.get(), 5).isOk());
  EXPECT_EQ(fakeCount("cuStreamWriteValue32"), before + 2);
  EXPECT_EQ(count->load(), 0u);  // the stream has not got there
  gate->add(1);
  ASSERT_TRUE(cuda_->synchronize(stream_, 10000).isOk());
  EXPECT_EQ(count->load(), 5u);
  EXPECT_EQ(staging[n - 1], 1);
  cuda_->unpinHost(staging.data());
  EXPECT_TRUE(cuda_->free(d).isOk());
  EXPECT_TRUE(cuda_->copyEngines());
}

// What the bridge's copies need to return at once (stream_bridge.h): the
// stand-in driver, like CUDA, waits for the stream before a copy between
// pageable host memory and the device, and makes host-to-host copies
// synchronous. Pinned host memory (pinHost) and the backend's host-to-host
// copies (a host function) stay behind a stream that is still waiting.
TEST_F(CudaBackend, CopiesOfPinnedAndHostMemoryDoNotHoldTheCaller) {
  const char* sync = "cuMemcpyAsync (synchronous: pageable or host-to-host)";
  const size_t n = 1 << 16;
  std::vector<char> staging(n, 0), user(n, 0);
  for (size_t i = 0; i < n; ++i) user[i] = char(i * 13);
  void* d = devAlloc(n);
  ASSERT_TRUE(cuda_->pinHost(staging.data(), n).isOk());
  std::shared_ptr<HostFlag> gate = cuda_->newFlag();
  ASSERT_TRUE(cuda_->waitFlagAsync(stream_, gate.get(), 1, 10000).isOk());
  const long before = fakeCount(sync);
  // user -> staging -> device -> staging -> user, all behind the gate.
  ASSERT_TRUE(cuda_->copyAsync(staging.data(), user.data(), n, stream_).isOk());
  ASSERT_TRUE(cuda_->copyAsync(d, staging.data(), n, stream_).isOk());
  ASSERT_TRUE(cuda_->copyAsync(staging.data(), d, n / 2, stream_).isOk());
  std::vector<char> back(n, 0);
  ASSERT_TRUE(cuda_->copyAsync(back.data(), staging.data(), n / 2, stream_).isOk());
  EXPECT_EQ(fakeCount(sync), before) << "a copy waited for the stream";
  EXPECT_EQ(staging[1], 0) << "a copy ran before the stream got there";
  gate->add(1);
  ASSERT_TRUE(cuda_->synchronize(stream_, 10000).isOk());
  EXPECT_TRUE(std::equal(back.begin(), back.begin() + n / 2, user.begin()));
  // Unpinned, the same staging is pageable again: the driver waits.
  cuda_->unpinHost(staging.data());
  ASSERT_TRUE(cuda_->copyAsync(d, staging.data(), n, stream_).isOk());
  EXPECT_EQ(fakeCount(sync), before + 1);
  EXPECT_TRUE(cuda_->free(d).isOk());
}

TEST_F(CudaBackend, ErrorsNameTheCall) {
  int x = 0;
  Status st = cuda_->free(&x);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("cuMemFree"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("invalid argument"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace ferry::accel
