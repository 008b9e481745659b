// The accelerator seam (src/accel/accelerator.h): the registry, the host
// backend and the test device (memory the host cannot touch, stream order).
#include "accel/accelerator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "accel/test_device.h"

namespace ferry::accel {
namespace {

// A stream task that holds its stream until released: work enqueued after
// it cannot have run while the latch is closed (no timing involved).
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> g(mu);
      open = true;
    }
    cv.notify_all();
  }
};

TestDevice& dev() { return static_cast<TestDevice&>(*find("testdev")); }

TEST(AccelRegistry, ByNameFromTheList) {
  ASSERT_NE(find("host"), nullptr);
  EXPECT_STREQ(find("host")->name(), "host");
  ASSERT_NE(find("testdev"), nullptr);
  EXPECT_STREQ(find("testdev")->name(), "testdev");
  EXPECT_EQ(find("no-such-device"), nullptr);
  EXPECT_EQ(find("testdev"), find("testdev"));  // one instance per process
}

TEST(AccelRegistry, OwnerOfAPointer) {
  Result<void*> p = dev().alloc(64);
  ASSERT_TRUE(p.isOk());
  EXPECT_STREQ(ownerOf(p.value()).name(), "testdev");
  int local = 0;
  EXPECT_STREQ(ownerOf(&local).name(), "host");
  EXPECT_TRUE(dev().free(p.value()).isOk());
}

TEST(HostAccel, CopyAndReduceAreDoneOnReturn) {
  Accelerator& h = host();
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, out(4);
  ASSERT_TRUE(h.reduceAsync(out.data(), a.data(), b.data(), 4, kernels::DType::kFloat32,
                            kernels::Op::kSum, nullptr).isOk());
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 44}));
  ASSERT_TRUE(h.copyAsync(out.data(), a.data(), 4 * sizeof(float), nullptr).isOk());
  EXPECT_EQ(out, a);
  bool ran = false;
  ASSERT_TRUE(h.hostFnAsync(nullptr, [&] { ran = true; }).isOk());
  EXPECT_TRUE(ran);
}

// The kernel refuses to read the device addresses for us (EFAULT), which
// is what makes a load by the host fault; checked this way rather than by
// faulting a child, which AddressSanitizer would report as a crash.
TEST(TestDeviceMemory, HostCannotReadIt) {
  Result<void*> p = dev().alloc(4096);
  ASSERT_TRUE(p.isOk());
  std::vector<char> data(4096, 'x');
  ASSERT_TRUE(dev().copyAsync(p.value(), data.data(), data.size(), nullptr).isOk());
  ASSERT_TRUE(dev().synchronize(nullptr, 60000).isOk());  // its pages exist now
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  errno = 0;
  EXPECT_EQ(write(fds[1], p.value(), 1), -1) << "the host could read device memory";
  EXPECT_EQ(errno, EFAULT);
  close(fds[0]);
  close(fds[1]);
  EXPECT_TRUE(dev().free(p.value()).isOk());
}

TEST(TestDeviceMemory, RoundTripAndReduceAreExact) {
  const size_t n = 1000;
  std::vector<int32_t> a(n), b(n), out(n, -1);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<int32_t>(i);
    b[i] = static_cast<int32_t>(3 * i + 7);
  }
  void* da = dev().alloc(n * 4).take();
  void* db = dev().alloc(n * 4).take();
  void* dc = dev().alloc(n * 4).take();
  ASSERT_TRUE(dev().copyAsync(da, a.data(), n * 4, nullptr).isOk());
  ASSERT_TRUE(dev().copyAsync(db, b.data(), n * 4, nullptr).isOk());
  // Device to device, then a reduction with one operand on the host.
  ASSERT_TRUE(dev().copyAsync(dc, db, n * 4, nullptr).isOk());
  ASSERT_TRUE(dev().reduceAsync(dc, da, dc, n, kernels::DType::kInt32, kernels::Op::kSum, nullptr).isOk());
  ASSERT_TRUE(dev().reduceAsync(dc, dc, a.data(), n, kernels::DType::kInt32, kernels::Op::kMax, nullptr).isOk());
  ASSERT_TRUE(dev().copyAsync(out.data(), dc, n * 4, nullptr).isOk());
  ASSERT_TRUE(dev().synchronize(nullptr, 60000).isOk());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(4 * i + 7)) << i;
  for (void* p : {da, db, dc}) EXPECT_TRUE(dev().free(p).isOk());
}

TEST(TestDeviceMemory, RangesOutsideAnAllocationAreRefused) {
  void* p = dev().alloc(1000).take();  // rounded up to 1024
  std::vector<char> host(4096);
  EXPECT_TRUE(dev().copyAsync(p, host.data(), 1024, nullptr).isOk());
  Status st = dev().copyAsync(p, host.data(), 1025, nullptr);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  EXPECT_EQ(dev().free(static_cast<char*>(p) + 256).code(), Code::kInvalidArgument);
  EXPECT_TRUE(dev().free(p).isOk());
  EXPECT_EQ(dev().free(p).code(), Code::kInvalidArgument);  // twice
  EXPECT_EQ(dev().free(host.data()).code(), Code::kInvalidArgument);
  ASSERT_TRUE(dev().synchronize(nullptr, 60000).isOk());
}

TEST(TestDeviceMemory, FreedSpaceIsReused) {
  size_t before = dev().allocatedBytes();
  const size_t big = TestDevice::kRegionBytes / 4;
  std::vector<void*> ps;
  for (int i = 0; i < 3; ++i) ps.push_back(dev().alloc(big).take());
  EXPECT_EQ(dev().allocatedBytes(), before + 3 * big);
  for (void* p : ps) ASSERT_TRUE(dev().free(p).isOk());
  EXPECT_EQ(dev().allocatedBytes(), before);
  // Only coalesced neighbours can hold this again.
  Result<void*> again = dev().alloc(3 * big);
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_TRUE(dev().free(again.value()).isOk());
}

TEST(TestDeviceStream, EnqueueReturnsBeforeTheWorkRunsAndOrderHolds) {
  Result<StreamHandle> s = dev().createStream();
  ASSERT_TRUE(s.isOk());
  Latch latch;
  ASSERT_TRUE(dev().hostFnAsync(s.value(), [&] { latch.wait(); }).isOk());
  std::vector<uint8_t> src(256, 0xAB), back(256, 0);
  void* d = dev().alloc(256).take();
  ASSERT_TRUE(dev().copyAsync(d, src.data(), 256, s.value()).isOk());
  ASSERT_TRUE(dev().copyAsync(back.data(), d, 256, s.value()).isOk());
  std::atomic<int> after{0};
  ASSERT_TRUE(dev().hostFnAsync(s.value(), [&] { after.store(1); }).isOk());
  // The calls returned; nothing behind the latch has run.
  EXPECT_EQ(after.load(), 0);
  EXPECT_EQ(back[0], 0);
  latch.release();
  ASSERT_TRUE(dev().synchronize(s.value(), 60000).isOk());
  EXPECT_EQ(after.load(), 1);
  EXPECT_EQ(back, src);
  EXPECT_TRUE(dev().destroyStream(s.value()).isOk());
  EXPECT_TRUE(dev().free(d).isOk());
}

// signalFlagAsync's host-function form (every backend but CUDA): the flag
// rises when the stream gets there and never falls.
TEST(TestDeviceStream, SignalRaisesAFlagInStreamOrder) {
  auto& d = dev();
  auto s = d.createStream();
  ASSERT_TRUE(s.isOk());
  HostFlag gate, count;
  ASSERT_TRUE(d.waitFlagAsync(s.value(), &gate, 1, 10000).isOk());
  ASSERT_TRUE(d.signalFlagAsync(s.value(), &count, 4).isOk());
  ASSERT_TRUE(d.signalFlagAsync(s.value(), &count, 2).isOk());
  EXPECT_EQ(count.load(), 0u);
  gate.add(1);
  ASSERT_TRUE(count.waitAtLeast(4, 10000));
  ASSERT_TRUE(d.synchronize(s.value(), 10000).isOk());
  EXPECT_EQ(count.load(), 4u);
  EXPECT_FALSE(d.copyEngines());
  EXPECT_TRUE(d.destroyStream(s.value()).isOk());
}

TEST(TestDeviceStream, SynchronizeHasADeadline) {
  Result<StreamHandle> s = dev().createStream();
  ASSERT_TRUE(s.isOk());
  Latch latch;
  ASSERT_TRUE(dev().hostFnAsync(s.value(), [&] { latch.wait(); }).isOk());
  Status st = dev().synchronize(s.value(), 50);
  EXPECT_EQ(st.code(), Code::kTimeout) << st.message();
  latch.release();
  EXPECT_TRUE(dev().synchronize(s.value(), 60000).isOk());
  EXPECT_TRUE(dev().destroyStream(s.value()).isOk());
  EXPECT_EQ(dev().destroyStream(s.value()).code(), Code::kInvalidArgument);
}

TEST(TestDeviceStream, DelayedWorkerStillRunsEverythingInOrder) {
  dev().setTaskDelayUs(2000);
  Result<StreamHandle> s = dev().createStream();
  ASSERT_TRUE(s.isOk());
  std::vector<int> seen;
  std::mutex mu;
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(dev().hostFnAsync(s.value(), [&, i] {
      std::lock_guard<std::mutex> g(mu);
      seen.push_back(i);
    }).isOk());
  ASSERT_TRUE(dev().synchronize(s.value(), 60000).isOk());
  dev().setTaskDelayUs(0);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_TRUE(dev().destroyStream(s.value()).isOk());
}

}  // namespace
}  // namespace ferry::accel
