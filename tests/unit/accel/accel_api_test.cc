// Device memory at the C API edge, in one process on a 1-rank communicator:
// collectives, Send/Recv and ferryAlltoAllv take test-device buffers and run
// them behind their stream (the bridge, comm/stream_bridge.h), and
// registration records them; windows take host memory only and refuse a device buffer with ncclInvalidUsage and a WARN naming
// the buffer and the backend, never reading it as host memory (which, for
// the test device, would crash); a stream of no device, or buffers of a
// device with another's stream, are refused by name.
#include <ferry/device.h>
#include <ferry/ferry.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "accel/accelerator.h"

namespace ferry::accel {
namespace {

class DeviceAtTheEdge : public ::testing::Test {
 protected:
  void SetUp() override {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ASSERT_EQ(ncclCommInitRank(&comm_, 1, id, 0), ncclSuccess);
    Accelerator* d = find("testdev");
    ASSERT_NE(d, nullptr);
    dev_ = d;
    buf_ = d->alloc(4096).take();
  }
  void TearDown() override {
    if (comm_) {
      EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
    }
    if (buf_) {
      EXPECT_TRUE(dev_->synchronize(nullptr, 10000).isOk());
      EXPECT_TRUE(dev_->free(buf_).isOk());
    }
  }
  std::string lastError() {
    const char* last = ncclGetLastError(comm_);
    return last ? last : "";
  }
  ncclComm_t comm_ = nullptr;
  Accelerator* dev_ = nullptr;
  void* buf_ = nullptr;
};

TEST_F(DeviceAtTheEdge, CollectivesRunOnDeviceBuffersBehindTheStream) {
  std::vector<float> in(1024), out(1024, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i);
  ASSERT_TRUE(dev_->copyAsync(buf_, in.data(), 4096, nullptr).isOk());
  ASSERT_EQ(ncclAllReduce(buf_, buf_, 1024, ncclFloat, ncclMax, comm_, nullptr), ncclSuccess);
  ASSERT_TRUE(dev_->copyAsync(out.data(), buf_, 4096, nullptr).isOk());
  ASSERT_TRUE(dev_->synchronize(nullptr, 10000).isOk());
  EXPECT_EQ(out, in);
  unsigned long long staged = 0;
  ASSERT_EQ(ferryCommStagedBytes(comm_, &staged), ncclSuccess);
  EXPECT_EQ(staged, 2u * 4096);  // the input in, the result out
}

// A count past the end of a device allocation is refused before anything is
// enqueued: no copy back into the caller's buffer runs (the staging it
// would copy holds no result), and the communicator stays usable.
TEST_F(DeviceAtTheEdge, ACountPastTheAllocationIsRefusedBeforeAnythingIsEnqueued) {
  void* big = dev_->alloc(8192).take();
  ASSERT_NE(big, nullptr);
  std::vector<float> mark(1024, 7.0f), out(1024, 0.0f);
  ASSERT_TRUE(dev_->copyAsync(buf_, mark.data(), 4096, nullptr).isOk());
  // 8 KiB of input is there; the 8 KiB of output would leave buf_'s 4 KiB.
  EXPECT_EQ(ncclAllReduce(big, buf_, 2048, ncclFloat, ncclSum, comm_, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("testdev"), std::string::npos) << lastError();
  ASSERT_TRUE(dev_->copyAsync(out.data(), buf_, 4096, nullptr).isOk());
  ASSERT_TRUE(dev_->synchronize(nullptr, 10000).isOk());
  EXPECT_EQ(out, mark);
  unsigned long long staged = 0;
  ASSERT_EQ(ferryCommStagedBytes(comm_, &staged), ncclSuccess);
  EXPECT_EQ(staged, 0u);
  ASSERT_EQ(ncclAllReduce(buf_, buf_, 1024, ncclFloat, ncclSum, comm_, nullptr), ncclSuccess);
  ASSERT_TRUE(dev_->synchronize(nullptr, 10000).isOk());
  EXPECT_TRUE(dev_->free(big).isOk());
}

// Registration of device memory is a record, as for host memory (the
// bridge stages either way); a window on device memory of a one-rank
// communicator registers but is not shared (no peer to share it with), so
// its collectives are staged as before.
TEST_F(DeviceAtTheEdge, RegistrationRecordsDeviceBuffersWindowsAreNotSharedAlone) {
  void* handle = nullptr;
  ASSERT_EQ(ncclCommRegister(comm_, buf_, 4096, &handle), ncclSuccess);
  std::vector<float> in(1024, 2.0f), out(1024, 0.0f);
  ASSERT_TRUE(dev_->copyAsync(buf_, in.data(), 4096, nullptr).isOk());
  ASSERT_EQ(ncclAllReduce(buf_, buf_, 1024, ncclFloat, ncclSum, comm_, nullptr), ncclSuccess);
  ASSERT_TRUE(dev_->copyAsync(out.data(), buf_, 4096, nullptr).isOk());
  ASSERT_TRUE(dev_->synchronize(nullptr, 10000).isOk());
  EXPECT_EQ(out, in);
  EXPECT_EQ(ncclCommDeregister(comm_, handle), ncclSuccess);
  ncclWindow_t win = nullptr;
  ASSERT_EQ(ncclCommWindowRegister(comm_, buf_, 4096, &win, 0), ncclSuccess);
  std::vector<float> twice(1024, 0.0f);
  ASSERT_EQ(ncclAllReduce(buf_, buf_, 1024, ncclFloat, ncclSum, comm_, nullptr), ncclSuccess);
  ASSERT_TRUE(dev_->copyAsync(twice.data(), buf_, 4096, nullptr).isOk());
  ASSERT_TRUE(dev_->synchronize(nullptr, 10000).isOk());
  EXPECT_EQ(twice, in);  // one rank: the sum is the input
  EXPECT_EQ(ncclCommWindowDeregister(comm_, win), ncclSuccess);
}

// ferryAlltoAllv's direct form is a Send/Recv group: it runs through the
// bridge like any other (device in, host out here).
TEST_F(DeviceAtTheEdge, AlltoAllvRunsOnDeviceBuffers) {
  std::vector<float> in(16), out(16, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i * 3);
  ASSERT_TRUE(dev_->copyAsync(buf_, in.data(), 64, nullptr).isOk());
  size_t counts[1] = {16}, displs[1] = {0};
  ASSERT_EQ(ferryAlltoAllv(buf_, counts, displs, out.data(), counts, displs, ncclFloat, comm_, nullptr),
            ncclSuccess);
  ASSERT_TRUE(dev_->synchronize(nullptr, 10000).isOk());
  EXPECT_EQ(out, in);
}

TEST_F(DeviceAtTheEdge, StreamsOfNoDeviceAreRefused) {
  int notAStream = 0;
  auto* bogus = reinterpret_cast<cudaStream_t>(&notAStream);
  EXPECT_EQ(ncclAllReduce(buf_, buf_, 16, ncclFloat, ncclSum, comm_, bogus), ncclInvalidUsage);
  EXPECT_NE(lastError().find("not one of its streams"), std::string::npos) << lastError();
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclSend(buf_, 16, ncclFloat, 0, comm_, bogus), ncclInvalidUsage);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);  // nothing was queued
  // Host buffers with a NULL stream still work after the refusals, exactly.
  std::vector<float> host(1024, 1.0f), out(1024, 0.0f);
  ASSERT_EQ(ncclAllReduce(host.data(), out.data(), 1024, ncclFloat, ncclSum, comm_, nullptr), ncclSuccess);
  EXPECT_EQ(out, host);
}

}  // namespace
}  // namespace ferry::accel
