// Tuner adapters: for every ABI version (v2..v6) the cost table comes back
// modified as the example plugin intends, the arguments arrive as the
// version defines them, constants flow in and out of v5/v6 init, and
// failures of init, getCollInfo and finalize are handled.
#include <gtest/gtest.h>

#include <cstring>

#include "plugins/tuner/coll_kind.h"
#include "tests/plugins/tuner_test_util.h"

namespace ferry::tunerplugin::testing {
namespace {

using testutil::countOf;

struct Version {
  const char* plugin;
  int version;
};
const Version kVersions[] = {{"ferryv2", 2}, {"ferryv3", 3}, {"ferryv4", 4}, {"ferryv5", 5},
                             {"ferryexample", 6}};

TEST_F(TunerTest, EveryVersionRewritesTheTableAsIntended) {
  for (Version v : kVersions) {
    SCOPED_TRACE(v.plugin);
    useTuner(v.plugin);
    FerryExampleTunerState* s = exampleState();
    ASSERT_NE(s, nullptr) << logText();
    s->nChannels = 4;
    auto tuner = Tuner::open(TunerInit{.nRanks = 4, .nNodes = 2}, nullptr);
    ASSERT_NE(tuner, nullptr) << logText();
    EXPECT_EQ(tuner->version(), v.version);
    EXPECT_EQ(s->initVersion, v.version);
    EXPECT_EQ(s->nRanks, 4u);
    EXPECT_EQ(s->nNodes, 2u);

    // Large AllReduce: Ring/Simple becomes 0, nothing else changes.
    CostTable table, before;
    fillTable(table);
    fillTable(before);
    int channels = -1;
    ASSERT_TRUE(tuner->adjust(ncclFuncAllReduce, 2 << 20, 3, true, table, &channels).isOk());
    EXPECT_EQ(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], 0.0f);
    EXPECT_EQ(diffCount(table, before), 1);
    EXPECT_EQ(channels, 4);
    EXPECT_EQ(s->collVersion, v.version);
    EXPECT_EQ(s->coll, ncclFuncAllReduce);
    EXPECT_EQ(s->nBytes, 2u << 20);
    EXPECT_EQ(s->numPipeOps, 3);
    if (v.version >= 3) {
      EXPECT_EQ(s->numAlgo, 7);
      EXPECT_EQ(s->numProto, 3);
    }
    if (v.version >= 4) {
      EXPECT_EQ(s->regBuff, 1);
    }

    // Small AllReduce: Tree/LL.
    fillTable(table);
    ASSERT_TRUE(tuner->adjust(ncclFuncAllReduce, 1024, 1, false, table, &channels).isOk());
    EXPECT_EQ(table[NCCL_ALGO_TREE][NCCL_PROTO_LL], 0.0f);
    EXPECT_EQ(diffCount(table, before), 1);
    if (v.version >= 4) {
      EXPECT_EQ(s->regBuff, 0);
    }

    // No opinion on AllGather; channel count 0 means "keep yours".
    s->nChannels = 0;
    fillTable(table);
    ASSERT_TRUE(tuner->adjust(ncclFuncAllGather, 2 << 20, 1, false, table, &channels).isOk());
    EXPECT_EQ(diffCount(table, before), 0);
    EXPECT_EQ(channels, 0);
    EXPECT_EQ(s->coll, ncclFuncAllGather);

    // A choice the caller ruled out stays ruled out.
    fillTable(table);
    table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = kIgnore;
    ASSERT_TRUE(tuner->adjust(ncclFuncAllReduce, 2 << 20, 1, false, table, nullptr).isOk());
    EXPECT_EQ(table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], kIgnore);

    EXPECT_EQ(s->collInfoCalls, 4);
    EXPECT_EQ(s->badContextCalls, 0);
    tuner.reset();
    EXPECT_EQ(s->finalizeCalls, 1);
    EXPECT_EQ(s->liveContexts, 0);
  }
}

// v2 learns whether CollNet/NVLS are candidates from the table.
TEST_F(TunerTest, V2SupportFlagsComeFromTheTable) {
  useTuner("ferryv2");
  FerryExampleTunerState* s = exampleState();
  ASSERT_NE(s, nullptr);
  auto tuner = Tuner::open(TunerInit{}, nullptr);
  ASSERT_NE(tuner, nullptr);
  CostTable table;
  fillTable(table);
  ASSERT_TRUE(tuner->adjust(ncclFuncAllReduce, 8, 1, false, table, nullptr).isOk());
  EXPECT_EQ(s->collNetSupport, 0);
  EXPECT_EQ(s->nvlsSupport, 0);
  fillTable(table);
  table[NCCL_ALGO_NVLS_TREE][NCCL_PROTO_SIMPLE] = 5.0f;
  table[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] = 5.0f;
  ASSERT_TRUE(tuner->adjust(ncclFuncAllReduce, 8, 1, false, table, nullptr).isOk());
  EXPECT_EQ(s->collNetSupport, 1);
  EXPECT_EQ(s->nvlsSupport, 1);
}

TEST_F(TunerTest, ConstantsFlowThroughV5AndV6Init) {
  for (Version v : kVersions) {
    SCOPED_TRACE(v.plugin);
    useTuner(v.plugin);
    FerryExampleTunerState* s = exampleState();
    ASSERT_NE(s, nullptr);
    ncclTunerConstants_v5_t c = defaultConstants();
    const ncclTunerConstants_v5_t defaults = defaultConstants();
    TunerInit args{.commId = 0x1234567890abcdefULL, .nRanks = 16, .nNodes = 4,
                   .nvlDomains = {4, 3, 5}};
    auto tuner = Tuner::open(args, &c);
    ASSERT_NE(tuner, nullptr);
    if (v.version < 5) {
      EXPECT_EQ(std::memcmp(&c, &defaults, sizeof(c)), 0);  // old versions never see them
      continue;
    }
    EXPECT_EQ(s->seenRingSimpleBaseLatency, 8.4);
    EXPECT_EQ(c.baseLatencies[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], FERRY_EXAMPLE_RING_SIMPLE_BASE_LAT);
    EXPECT_EQ(c.hwLatencies[NCCL_HW_NET][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE],
              FERRY_EXAMPLE_NET_RING_SIMPLE_HW_LAT);
    EXPECT_EQ(c.perChMaxNVLSTreeBws[3][2], FERRY_EXAMPLE_LAST_NVLSTREE_BW);
    EXPECT_EQ(c.baseLatencies[NCCL_ALGO_TREE][NCCL_PROTO_LL], 6.8);  // untouched
    EXPECT_EQ(s->commId, 0x1234567890abcdefULL);
    EXPECT_EQ(s->nvlDomains, 4);
    EXPECT_EQ(s->nvlMinRanks, 3);
    EXPECT_EQ(s->nvlMaxRanks, 5);
  }
}

TEST_F(TunerTest, DefaultConstantsAreNccls) {
  ncclTunerConstants_v5_t c = defaultConstants();
  EXPECT_EQ(c.baseLatencies[NCCL_ALGO_RING][NCCL_PROTO_LL], 6.6);
  EXPECT_EQ(c.baseLatencies[NCCL_ALGO_PAT][NCCL_PROTO_SIMPLE], 8.0);
  EXPECT_EQ(c.hwLatencies[NCCL_HW_NVLINK][NCCL_ALGO_TREE][NCCL_PROTO_LL128], 1.25);
  EXPECT_EQ(c.hwLatencies[NCCL_HW_NET][NCCL_ALGO_NVLS_TREE][NCCL_PROTO_SIMPLE], 20.9);
  EXPECT_EQ(c.llMaxBws[NCCL_HOPPER_COMPCAP_IDX][NCCL_TUNING_SCALE_2NODES], 45.0);
  EXPECT_EQ(c.perChMaxTreeLL128Bws[NCCL_BLACKWELL_COMPCAP_IDX][NCCL_TUNING_SCALE_2NODES], 31.67);
  EXPECT_EQ(c.perChMaxNVLSTreeBws[NCCL_BLACKWELL_COMPCAP_IDX][NCCL_TUNING_SCALE_4NODES], 43.8);
}

TEST_F(TunerTest, ChunkSizeOnlyFromV6) {
  for (Version v : kVersions) {
    SCOPED_TRACE(v.plugin);
    useTuner(v.plugin);
    FerryExampleTunerState* s = exampleState();
    ASSERT_NE(s, nullptr);
    s->chunkSize = 4096;
    auto tuner = Tuner::open(TunerInit{}, nullptr);
    ASSERT_NE(tuner, nullptr);
    EXPECT_EQ(tuner->hasChunkSize(), v.version == 6);
    size_t chunk = 1 << 20;
    ASSERT_TRUE(tuner->chunkSize(ncclFuncAllReduce, 8 << 20, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 2,
                                 &chunk).isOk());
    EXPECT_EQ(chunk, v.version == 6 ? 4096u : size_t(1) << 20);
    EXPECT_EQ(s->chunkSizeCalls, v.version == 6 ? 1 : 0);
    if (v.version == 6) {
      EXPECT_EQ(s->chunkAlgo, NCCL_ALGO_RING);
      EXPECT_EQ(s->chunkProto, NCCL_PROTO_SIMPLE);
      EXPECT_EQ(s->chunkChannels, 2);
    }
  }
}

TEST_F(TunerTest, InitFailureMeansNoTunerAndNoFinalize) {
  for (Version v : kVersions) {
    SCOPED_TRACE(v.plugin);
    useTuner(v.plugin);
    FerryExampleTunerState* s = exampleState();
    ASSERT_NE(s, nullptr);
    s->failInit = 1;
    EXPECT_EQ(Tuner::open(TunerInit{}, nullptr), nullptr);
    EXPECT_EQ(s->initCalls, 1);
    EXPECT_EQ(s->finalizeCalls, 0);
    std::string warn = "NCCL WARN TUNER/Plugin: FerryExample (v" + std::to_string(v.version) +
                       ") init failed: ncclSystemError; this communicator uses no tuner";
    EXPECT_EQ(countOf(logText(), warn), 1u) << logText();
    // The next communicator tries again.
    s->failInit = 0;
    EXPECT_NE(Tuner::open(TunerInit{}, nullptr), nullptr);
    EXPECT_EQ(s->finalizeCalls, 1);
  }
}

TEST_F(TunerTest, GetCollInfoErrorIsAStatus) {
  for (Version v : kVersions) {
    SCOPED_TRACE(v.plugin);
    useTuner(v.plugin);
    FerryExampleTunerState* s = exampleState();
    ASSERT_NE(s, nullptr);
    s->failCollInfo = 1;
    s->nChannels = 4;
    auto tuner = Tuner::open(TunerInit{}, nullptr);
    ASSERT_NE(tuner, nullptr);
    CostTable table, before;
    fillTable(table);
    fillTable(before);
    int channels = -7;
    Status st = tuner->adjust(ncclFuncAllReduce, 2 << 20, 1, false, table, &channels);
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_EQ(st.message(), "TUNER/Plugin: FerryExample getCollInfo(AllReduce, 2097152 bytes) "
                            "returned ncclInvalidArgument");
    EXPECT_EQ(channels, -7);  // untouched on error
    EXPECT_EQ(diffCount(table, before), 0);
  }
}

TEST_F(TunerTest, FinalizeOnceAndItsErrors) {
  useTuner("ferryexample");
  FerryExampleTunerState* s = exampleState();
  ASSERT_NE(s, nullptr);
  auto tuner = Tuner::open(TunerInit{}, nullptr);
  ASSERT_NE(tuner, nullptr);
  s->failFinalize = 1;
  Status st = tuner->finalize();
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_EQ(st.message(), "TUNER/Plugin: FerryExample finalize returned ncclInternalError");
  EXPECT_TRUE(tuner->finalize().isOk());  // once only
  EXPECT_FALSE(tuner->hasChunkSize());
  CostTable table;
  fillTable(table);
  EXPECT_EQ(tuner->adjust(ncclFuncAllReduce, 8, 1, false, table, nullptr).code(),
            Code::kInvalidUsage);
  tuner.reset();
  EXPECT_EQ(s->finalizeCalls, 1);
  EXPECT_EQ(s->collInfoCalls, 0);
  EXPECT_EQ(s->badContextCalls, 0);
}

// Destroying a tuner whose finalize fails is a WARN, not a crash.
TEST_F(TunerTest, FinalizeErrorInDestructorWarns) {
  useTuner("ferryv4");
  FerryExampleTunerState* s = exampleState();
  ASSERT_NE(s, nullptr);
  auto tuner = Tuner::open(TunerInit{}, nullptr);
  ASSERT_NE(tuner, nullptr);
  s->failFinalize = 1;
  tuner.reset();
  EXPECT_EQ(countOf(logText(), "NCCL WARN TUNER/Plugin: FerryExample finalize returned "
                               "ncclInternalError"),
            1u)
      << logText();
}

TEST(TunerCollKind, FerryKindsMapToNcclFunc) {
  EXPECT_EQ(toNcclFunc(CollKind::kAllReduce), ncclFuncAllReduce);
  EXPECT_EQ(toNcclFunc(CollKind::kBroadcast), ncclFuncBroadcast);
  EXPECT_EQ(toNcclFunc(CollKind::kReduce), ncclFuncReduce);
  EXPECT_EQ(toNcclFunc(CollKind::kAllGather), ncclFuncAllGather);
  EXPECT_EQ(toNcclFunc(CollKind::kReduceScatter), ncclFuncReduceScatter);
  EXPECT_EQ(toNcclFunc(CollKind::kAllToAll), ncclFuncAlltoAll);
  EXPECT_EQ(toNcclFunc(CollKind::kGather), ncclFuncGather);
  EXPECT_EQ(toNcclFunc(CollKind::kScatter), ncclFuncScatter);
  EXPECT_FALSE(toNcclFunc(CollKind::kSendRecv).has_value());
}

// A plugin written in C, exporting a const v6 table with every function.
TEST_F(TunerTest, PluginWrittenInC) {
  useTuner("ferryc");
  const LoadedTuner* lt = loadedTuner();
  ASSERT_NE(lt, nullptr) << logText();
  EXPECT_EQ(lt->name, "CTuner");
  EXPECT_EQ(lt->version, 6);
  auto tuner = Tuner::open(TunerInit{.nRanks = 2}, nullptr);
  ASSERT_NE(tuner, nullptr);
  CostTable table, before;
  fillTable(table);
  fillTable(before);
  int channels = 0;
  ASSERT_TRUE(tuner->adjust(ncclFuncReduceScatter, 1 << 16, 1, false, table, &channels).isOk());
  EXPECT_EQ(table[NCCL_ALGO_RING][NCCL_PROTO_LL128], 0.0f);
  EXPECT_EQ(diffCount(table, before), 1);
  EXPECT_EQ(channels, 2);
  ASSERT_TRUE(tuner->hasChunkSize());
  size_t chunk = 131072;
  ASSERT_TRUE(tuner->chunkSize(ncclFuncReduceScatter, 1 << 16, NCCL_ALGO_RING, NCCL_PROTO_LL128, 2,
                               &chunk).isOk());
  EXPECT_EQ(chunk, 65536u);
  EXPECT_TRUE(tuner->finalize().isOk());
  EXPECT_EQ(countOf(logText(), "NCCL INFO CTuner: 2 ranks, 1 nodes\n"), 1u) << logText();
}

}  // namespace
}  // namespace ferry::tunerplugin::testing
