// An example tuner plugin ("FerryExample"), built several times to export
// different ABI versions (EXAMPLE_V2 .. EXAMPLE_V6 select the symbols):
//   AllReduce of at least ringAboveBytes -> Ring/Simple, smaller -> Tree/LL;
//   other collectives -> no opinion. nChannels and (v6) the chunk size come
//   from the settings. Every call is recorded for the tests.
// The v6 table exports only name and init and fills in the rest in init, as
// some real plugins do, so a loader that reads pointers early would crash.
// With EXAMPLE_NET it also exports a minimal net plugin, to test NCCL's rule
// that a tuner may live inside the net plugin library.
#include <nccl_tuner.h>

#include <cstdlib>

#include "tests/plugins/example_tuner.h"

namespace {

FerryExampleTunerState gState = {.ringAboveBytes = 1 << 20};

// Hand out contexts we can recognise.
constexpr uint32_t kMagic = 0xfe77a001;
struct Ctx {
  uint32_t magic;
};
Ctx* checkCtx(void* ctx) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (c == nullptr || c->magic != kMagic) {
    gState.badContextCalls++;
    return nullptr;
  }
  return c;
}

// Forked test ranks cannot reach ferryExampleTunerState() before init:
// these variables set the same fields (see tests/mp/tuner_plugin_test.cc).
void settingsFromEnv() {
  if (const char* v = getenv("FERRY_EXAMPLE_TUNER_RING_ABOVE")) gState.ringAboveBytes = strtoull(v, nullptr, 10);
  if (const char* v = getenv("FERRY_EXAMPLE_TUNER_FAIL_COLLINFO")) gState.failCollInfo = atoi(v);
  if (const char* v = getenv("FERRY_EXAMPLE_TUNER_PICK_COLLNET")) gState.pickCollNet = atoi(v);
}

ncclResult_t newCtx(void** ctx, int version, size_t nRanks, size_t nNodes,
                    ncclDebugLogger_t logger) {
  settingsFromEnv();
  gState.initCalls++;
  gState.initVersion = version;
  gState.nRanks = nRanks;
  gState.nNodes = nNodes;
  if (logger != nullptr) {
    logger(NCCL_LOG_INFO, NCCL_TUNING, __FILE__, __LINE__,
           "FerryExample tuner: init (v%d) for %zu ranks on %zu nodes", version, nRanks, nNodes);
  }
  if (gState.failInit) return ncclSystemError;
  Ctx* c = static_cast<Ctx*>(malloc(sizeof(Ctx)));
  c->magic = kMagic;
  *ctx = c;
  gState.liveContexts++;
  return ncclSuccess;
}

// The policy, as an (algorithm, protocol) choice; false = no opinion.
bool choose(ncclFunc_t coll, size_t nBytes, int* algo, int* proto) {
  if (coll != ncclFuncAllReduce) return false;
  if (gState.pickCollNet) {  // an entry no host library fills: NCCL_ALGO_PROTO_IGNORE -> 0
    *algo = NCCL_ALGO_COLLNET_DIRECT;
    *proto = NCCL_PROTO_SIMPLE;
    return true;
  }
  bool big = nBytes >= gState.ringAboveBytes;
  *algo = big ? NCCL_ALGO_RING : NCCL_ALGO_TREE;
  *proto = big ? NCCL_PROTO_SIMPLE : NCCL_PROTO_LL;
  return true;
}

void record(int version, ncclFunc_t coll, size_t nBytes, int numPipeOps) {
  gState.collInfoCalls++;
  gState.collVersion = version;
  gState.coll = coll;
  gState.nBytes = nBytes;
  gState.numPipeOps = numPipeOps;
}

// v3+: the table is a contiguous float[numAlgo][numProto].
[[maybe_unused]] ncclResult_t tableCollInfo(int version, void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                           float** costTable, int numAlgo, int numProto, int regBuff,
                           int* nChannels) {
  record(version, coll, nBytes, numPipeOps);
  gState.numAlgo = numAlgo;
  gState.numProto = numProto;
  gState.regBuff = regBuff;
  if (checkCtx(ctx) == nullptr) return ncclInvalidUsage;
  if (gState.failCollInfo) return ncclInvalidArgument;
  float* table = reinterpret_cast<float*>(costTable);
  int algo, proto;
  if (choose(coll, nBytes, &algo, &proto) && algo < numAlgo && proto < numProto &&
      (table[algo * numProto + proto] >= 0 || gState.pickCollNet)) {
    table[algo * numProto + proto] = 0.0f;
  }
  *nChannels = gState.nChannels;
  return ncclSuccess;
}

ncclResult_t finalize(void* ctx) {
  gState.finalizeCalls++;
  Ctx* c = checkCtx(ctx);
  if (c == nullptr) return ncclInvalidUsage;
  c->magic = 0;
  free(c);
  gState.liveContexts--;
  return gState.failFinalize ? ncclInternalError : ncclSuccess;
}

// ---- v2: (algorithm, protocol) out-parameters.
[[maybe_unused]] ncclResult_t initOld2(size_t nRanks, size_t nNodes, ncclDebugLogger_t logger,
                                       void** ctx) {
  return newCtx(ctx, 2, nRanks, nNodes, logger);
}
[[maybe_unused]] ncclResult_t collInfo2(void* ctx, ncclFunc_t coll, size_t nBytes,
                                        int collNetSupport, int nvlsSupport, int numPipeOps,
                                        int* algo, int* proto, int* nChannels) {
  record(2, coll, nBytes, numPipeOps);
  gState.collNetSupport = collNetSupport;
  gState.nvlsSupport = nvlsSupport;
  if (checkCtx(ctx) == nullptr) return ncclInvalidUsage;
  if (gState.failCollInfo) return ncclInvalidArgument;
  choose(coll, nBytes, algo, proto);
  *nChannels = gState.nChannels;
  return ncclSuccess;
}

// ---- v3, v4: cost table; v4 adds regBuff.
[[maybe_unused]] ncclResult_t initOld3(size_t nRanks, size_t nNodes, ncclDebugLogger_t logger,
                                       void** ctx) {
  return newCtx(ctx, 3, nRanks, nNodes, logger);
}
[[maybe_unused]] ncclResult_t collInfo3(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                                        float** table, int numAlgo, int numProto, int* nChannels) {
  return tableCollInfo(3, ctx, coll, nBytes, numPipeOps, table, numAlgo, numProto, -1, nChannels);
}
[[maybe_unused]] ncclResult_t initOld4(size_t nRanks, size_t nNodes, ncclDebugLogger_t logger,
                                       void** ctx) {
  return newCtx(ctx, 4, nRanks, nNodes, logger);
}
[[maybe_unused]] ncclResult_t collInfo4(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                                        float** table, int numAlgo, int numProto, int regBuff,
                                        int* nChannels) {
  return tableCollInfo(4, ctx, coll, nBytes, numPipeOps, table, numAlgo, numProto, regBuff,
                       nChannels);
}

// ---- v5, v6: context first, commId, NVL domains, constants in/out.
[[maybe_unused]] ncclResult_t initNew(int version, void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                     ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t* nvl,
                     ncclTunerConstants_v5_t* constants) {
  gState.commId = commId;
  gState.nvlDomains = nvl ? nvl->nNvlDomains : -1;
  gState.nvlMinRanks = nvl ? nvl->minRanksPerNvlDomain : -1;
  gState.nvlMaxRanks = nvl ? nvl->maxRanksPerNvlDomain : -1;
  if (constants != nullptr) {
    gState.seenRingSimpleBaseLatency = constants->baseLatencies[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE];
    constants->baseLatencies[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = FERRY_EXAMPLE_RING_SIMPLE_BASE_LAT;
    constants->hwLatencies[NCCL_HW_NET][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] =
        FERRY_EXAMPLE_NET_RING_SIMPLE_HW_LAT;
    constants->perChMaxNVLSTreeBws[NCCL_BLACKWELL_COMPCAP_IDX][NCCL_TUNING_SCALE_4NODES] =
        FERRY_EXAMPLE_LAST_NVLSTREE_BW;
  }
  return newCtx(ctx, version, nRanks, nNodes, logger);
}
[[maybe_unused]] ncclResult_t init5(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                                    ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t* nvl,
                                    ncclTunerConstants_v5_t* constants) {
  return initNew(5, ctx, commId, nRanks, nNodes, logger, nvl, constants);
}
[[maybe_unused]] ncclResult_t collInfo5(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                                        float** table, int numAlgo, int numProto, int regBuff,
                                        int* nChannels) {
  return tableCollInfo(5, ctx, coll, nBytes, numPipeOps, table, numAlgo, numProto, regBuff,
                       nChannels);
}
[[maybe_unused]] ncclResult_t collInfo6(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                                        float** table, int numAlgo, int numProto, int regBuff,
                                        int* nChannels) {
  return tableCollInfo(6, ctx, coll, nBytes, numPipeOps, table, numAlgo, numProto, regBuff,
                       nChannels);
}
[[maybe_unused]] ncclResult_t chunk6(void* ctx, ncclFunc_t, size_t, int algo, int proto,
                                     int nChannels, size_t* chunkSize) {
  gState.chunkSizeCalls++;
  gState.chunkAlgo = algo;
  gState.chunkProto = proto;
  gState.chunkChannels = nChannels;
  if (checkCtx(ctx) == nullptr) return ncclInvalidUsage;
  if (gState.chunkSize != 0) *chunkSize = gState.chunkSize;
  return ncclSuccess;
}
[[maybe_unused]] ncclResult_t init6(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                                    ncclDebugLogger_t logger, ncclNvlDomainInfo_v6_t* nvl,
                                    ncclTunerConstants_v6_t* constants);

}  // namespace

extern "C" {
__attribute__((visibility("default"))) FerryExampleTunerState* ferryExampleTunerState(void) {
  return &gState;
}
#ifdef EXAMPLE_V2
__attribute__((visibility("default"))) ncclTuner_v2_t ncclTunerPlugin_v2 = {
    "FerryExample", initOld2, collInfo2, finalize};
#endif
#ifdef EXAMPLE_V3
__attribute__((visibility("default"))) ncclTuner_v3_t ncclTunerPlugin_v3 = {
    "FerryExample", initOld3, collInfo3, finalize};
#endif
#ifdef EXAMPLE_V4
__attribute__((visibility("default"))) ncclTuner_v4_t ncclTunerPlugin_v4 = {
    "FerryExample", initOld4, collInfo4, finalize};
#endif
#ifdef EXAMPLE_V5
__attribute__((visibility("default"))) ncclTuner_v5_t ncclTunerPlugin_v5 = {
    "FerryExample", init5, collInfo5, finalize};
#endif
#ifdef EXAMPLE_V6
__attribute__((visibility("default"))) ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = "FerryExample", .init = init6};
#endif
}

namespace {
[[maybe_unused]] ncclResult_t init6(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                                    ncclDebugLogger_t logger, ncclNvlDomainInfo_v6_t* nvl,
                                    ncclTunerConstants_v6_t* constants) {
#ifdef EXAMPLE_V6
  ncclTunerPlugin_v6.getCollInfo = collInfo6;
  ncclTunerPlugin_v6.finalize = finalize;
  ncclTunerPlugin_v6.getChunkSize = chunk6;
#endif
  return initNew(6, ctx, commId, nRanks, nNodes, logger, nvl, constants);
}
}  // namespace

#ifdef EXAMPLE_NET
// Just enough of a net plugin for the net loader to list this library.
namespace {
ncclResult_t netInit(void**, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t,
                     ncclProfilerCallback_t) {
  return ncclInternalError;
}
}  // namespace
extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {.name = "WithTuner",
                                                                        .init = netInit};
}
#endif
