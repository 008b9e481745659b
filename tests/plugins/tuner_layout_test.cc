// Struct layouts of the tuner plugin ABI (LP64), v2..v6, and the index
// values plugins write by. A wrong offset would make a real plugin's init or
// getCollInfo be called through the wrong pointer, a wrong constants layout
// would make it overwrite the wrong numbers.
#include <gtest/gtest.h>

#include <cstddef>

#include <nccl_tuner.h>

namespace {

// Function tables: name + 3 function pointers (v6: 4).
static_assert(sizeof(ncclTuner_v2_t) == 32);
static_assert(sizeof(ncclTuner_v3_t) == 32);
static_assert(sizeof(ncclTuner_v4_t) == 32);
static_assert(sizeof(ncclTuner_v5_t) == 32);
static_assert(sizeof(ncclTuner_v6_t) == 40);
static_assert(offsetof(ncclTuner_v2_t, init) == 8);
static_assert(offsetof(ncclTuner_v2_t, getCollInfo) == 16);
static_assert(offsetof(ncclTuner_v2_t, destroy) == 24);
static_assert(offsetof(ncclTuner_v3_t, destroy) == 24);
static_assert(offsetof(ncclTuner_v4_t, destroy) == 24);
static_assert(offsetof(ncclTuner_v5_t, getCollInfo) == 16);
static_assert(offsetof(ncclTuner_v5_t, finalize) == 24);
static_assert(offsetof(ncclTuner_v6_t, init) == 8);
static_assert(offsetof(ncclTuner_v6_t, getCollInfo) == 16);
static_assert(offsetof(ncclTuner_v6_t, finalize) == 24);
static_assert(offsetof(ncclTuner_v6_t, getChunkSize) == 32);

// Constants: 144 doubles, the seven arrays back to back in this order.
static_assert(sizeof(ncclTunerConstants_v5_t) == 144 * 8);
static_assert(offsetof(ncclTunerConstants_v5_t, baseLatencies) == 0);
static_assert(offsetof(ncclTunerConstants_v5_t, hwLatencies) == 21 * 8);
static_assert(offsetof(ncclTunerConstants_v5_t, llMaxBws) == 84 * 8);
static_assert(offsetof(ncclTunerConstants_v5_t, perChMaxRingLL128Bws) == 96 * 8);
static_assert(offsetof(ncclTunerConstants_v5_t, perChMaxTreeLL128Bws) == 108 * 8);
static_assert(offsetof(ncclTunerConstants_v5_t, perChMaxTreeBws) == 120 * 8);
static_assert(offsetof(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws) == 132 * 8);
static_assert(sizeof(ncclTunerConstants_v6_t) == sizeof(ncclTunerConstants_v5_t));

static_assert(sizeof(ncclNvlDomainInfo_v5_t) == 12);
static_assert(offsetof(ncclNvlDomainInfo_v5_t, minRanksPerNvlDomain) == 4);
static_assert(offsetof(ncclNvlDomainInfo_v5_t, maxRanksPerNvlDomain) == 8);

// Enums are ints; the values are ABI.
static_assert(sizeof(ncclFunc_t) == 4);
static_assert(ncclFuncBroadcast == 0 && ncclFuncReduce == 1 && ncclFuncAllGather == 2);
static_assert(ncclFuncReduceScatter == 3 && ncclFuncAllReduce == 4 && ncclFuncSendRecv == 5);
static_assert(ncclFuncSend == 6 && ncclFuncRecv == 7 && ncclFuncAlltoAll == 8);
static_assert(ncclFuncScatter == 9 && ncclFuncGather == 10 && ncclNumFuncs == 11);
static_assert(NCCL_NUM_FUNCTIONS == 5);
static_assert(NCCL_ALGO_TREE == 0 && NCCL_ALGO_RING == 1 && NCCL_ALGO_COLLNET_DIRECT == 2);
static_assert(NCCL_ALGO_COLLNET_CHAIN == 3 && NCCL_ALGO_NVLS == 4 && NCCL_ALGO_NVLS_TREE == 5);
static_assert(NCCL_ALGO_PAT == 6 && NCCL_NUM_ALGORITHMS == 7 && NCCL_ALGO_UNDEF == -1);
static_assert(NCCL_PROTO_LL == 0 && NCCL_PROTO_LL128 == 1 && NCCL_PROTO_SIMPLE == 2);
static_assert(NCCL_NUM_PROTOCOLS == 3 && NCCL_PROTO_UNDEF == -1);
static_assert(NCCL_HW_NVLINK == 0 && NCCL_HW_PCI == 1 && NCCL_HW_NET == 2);
static_assert(NCCL_VOLTA_COMPCAP_IDX == 0 && NCCL_BLACKWELL_COMPCAP_IDX == 3);
static_assert(NCCL_TUNING_SCALE_1NODE == 0 && NCCL_TUNING_SCALE_4NODES == 2);
static_assert(NCCL_ALGO_PROTO_IGNORE == -1.0);

// The current version is v6.
static_assert(sizeof(ncclTuner_t) == sizeof(ncclTuner_v6_t));

TEST(TunerLayout, Sizes) {
  EXPECT_EQ(sizeof(ncclTuner_v2_t), 32u);
  EXPECT_EQ(sizeof(ncclTuner_v5_t), 32u);
  EXPECT_EQ(sizeof(ncclTuner_v6_t), 40u);
  EXPECT_EQ(sizeof(ncclTunerConstants_v5_t), 1152u);
  EXPECT_EQ(offsetof(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws), 1056u);
  EXPECT_EQ(sizeof(ncclNvlDomainInfo_v5_t), 12u);
  EXPECT_STREQ(NCCL_TUNER_PLUGIN_SYMBOL, "ncclTunerPlugin_v6");
}

}  // namespace
