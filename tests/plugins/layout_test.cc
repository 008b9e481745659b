// Struct layouts of the net plugin ABI (LP64), v6..v11: sizes and the offsets
// where versions differ. A wrong layout would make a real plugin read garbage.
#include <gtest/gtest.h>

#include <cstddef>

#include <nccl_net.h>

namespace {

// Function tables: name + N function pointers.
static_assert(sizeof(ncclNet_v6_t) == 17 * 8);
static_assert(sizeof(ncclNet_v7_t) == 19 * 8);
static_assert(sizeof(ncclNet_v8_t) == 19 * 8);
static_assert(sizeof(ncclNet_v9_t) == 20 * 8);
static_assert(sizeof(ncclNet_v10_t) == 20 * 8);
static_assert(sizeof(ncclNet_v11_t) == 176);

static_assert(offsetof(ncclNet_v6_t, isend) == 80);
static_assert(offsetof(ncclNet_v6_t, closeListen) == 128);
static_assert(offsetof(ncclNet_v7_t, getDeviceMr) == 136);
static_assert(offsetof(ncclNet_v7_t, irecvConsumed) == 144);
static_assert(offsetof(ncclNet_v9_t, makeVDevice) == 152);
static_assert(offsetof(ncclNet_v10_t, makeVDevice) == 152);
static_assert(offsetof(ncclNet_v11_t, makeVDevice) == 152);
static_assert(offsetof(ncclNet_v11_t, finalize) == 160);
static_assert(offsetof(ncclNet_v11_t, setNetAttr) == 168);

// Properties.
static_assert(sizeof(ncclNetProperties_v6_t) == 48);
static_assert(sizeof(ncclNetProperties_v7_t) == 56);
static_assert(sizeof(ncclNetProperties_v8_t) == 64);
static_assert(sizeof(ncclNetProperties_v9_t) == 104);
static_assert(sizeof(ncclNetProperties_v10_t) == 104);
static_assert(sizeof(ncclNetProperties_v11_t) == 112);

static_assert(offsetof(ncclNetProperties_v6_t, speed) == 28);
static_assert(offsetof(ncclNetProperties_v6_t, maxRecvs) == 44);
static_assert(offsetof(ncclNetProperties_v7_t, netDeviceType) == 48);
static_assert(offsetof(ncclNetProperties_v8_t, regIsGlobal) == 28);
static_assert(offsetof(ncclNetProperties_v8_t, speed) == 32);
static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56);
static_assert(offsetof(ncclNetProperties_v9_t, forceFlush) == 32);
static_assert(offsetof(ncclNetProperties_v9_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88);
static_assert(offsetof(ncclNetProperties_v9_t, maxCollBytes) == 96);
static_assert(offsetof(ncclNetProperties_v11_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88);
static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104);

static_assert(sizeof(ncclNetDeviceHandle_v7_t) == 32);
static_assert(sizeof(ncclNetVDeviceProps_v9_t) == 20);
static_assert(sizeof(ncclNetCommConfig_v10_t) == 4);

// The same facts at run time, so the test report lists them.
TEST(NetLayout, Sizes) {
  EXPECT_EQ(sizeof(ncclNet_v11_t), 176u);
  EXPECT_EQ(sizeof(ncclNetProperties_v11_t), 112u);
  EXPECT_EQ(sizeof(ncclNet_v6_t), 136u);
  EXPECT_EQ(sizeof(ncclNet_v10_t), 160u);
  EXPECT_EQ(sizeof(ncclNetProperties_v6_t), 48u);
  EXPECT_EQ(sizeof(ncclNetProperties_v8_t), 64u);
  EXPECT_EQ(sizeof(ncclNetProperties_v10_t), 104u);
}

}  // namespace
