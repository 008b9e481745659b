// Device memory at the C API edge: until collectives run on it (issue 14),
// a buffer of a device backend is refused with ncclInvalidUsage and a WARN
// naming the buffer and the backend, never read as host memory (which, for
// the test device, would crash).
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
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
    if (buf_) {
      EXPECT_TRUE(dev_->free(buf_).isOk());
    }
    if (comm_) {
      EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
    }
  }
  ncclComm_t comm_ = nullptr;
  Accelerator* dev_ = nullptr;
  void* buf_ = nullptr;
};

TEST_F(DeviceAtTheEdge, CollectivesAndSendRecvRefuseDeviceBuffers) {
  std::vector<float> host(1024, 1.0f);
  EXPECT_EQ(ncclAllReduce(buf_, host.data(), 1024, ncclFloat, ncclSum, comm_, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclAllReduce(host.data(), buf_, 1024, ncclFloat, ncclSum, comm_, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclBroadcast(buf_, buf_, 1024, ncclFloat, 0, comm_, nullptr), ncclInvalidUsage);
  const char* last = ncclGetLastError(comm_);
  ASSERT_NE(last, nullptr);
  EXPECT_NE(std::string(last).find("testdev device memory"), std::string::npos) << last;
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclSend(buf_, 16, ncclFloat, 0, comm_, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);  // nothing was queued
  // Host buffers still work after the refusals, exactly.
  std::vector<float> out(1024, 0.0f);
  ASSERT_EQ(ncclAllReduce(host.data(), out.data(), 1024, ncclFloat, ncclSum, comm_, nullptr), ncclSuccess);
  EXPECT_EQ(out, host);
}

}  // namespace
}  // namespace ferry::accel
