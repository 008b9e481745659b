/* A tuner plugin written in C (as most third-party ones are), so that
 * nccl_tuner.h is checked as a C header too: it compiles with -std=c11, the
 * layouts hold in C, and the loader accepts it. Policy: every collective of
 * at least 64 KiB prefers Ring/LL128, and the plugin asks for 2 channels;
 * getChunkSize halves the chunk. Exports only ncclTunerPlugin_v6. */
#include <nccl_tuner.h>
#include <stddef.h>

_Static_assert(sizeof(ncclTuner_v6_t) == 40, "v6 table: name + 4 pointers");
_Static_assert(offsetof(ncclTuner_v6_t, getChunkSize) == 32, "getChunkSize last");
_Static_assert(sizeof(ncclTunerConstants_v6_t) == 1152, "144 doubles");
_Static_assert(offsetof(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws) == 1056, "last array");
_Static_assert(sizeof(ncclNvlDomainInfo_v6_t) == 12, "three ints");

static int gCtx;

static ncclResult_t cInit(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                          ncclDebugLogger_t logger, ncclNvlDomainInfo_v6_t* nvl,
                          ncclTunerConstants_v6_t* constants) {
  (void)commId;
  (void)nvl;
  (void)constants;
  if (logger) logger(NCCL_LOG_INFO, NCCL_TUNING, __FILE__, __LINE__, "CTuner: %zu ranks, %zu nodes",
                     nRanks, nNodes);
  *ctx = &gCtx;
  return ncclSuccess;
}

static ncclResult_t cCollInfo(void* ctx, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels) {
  float(*table)[NCCL_NUM_PROTOCOLS] = (float(*)[NCCL_NUM_PROTOCOLS])collCostTable;
  (void)coll;
  (void)numPipeOps;
  (void)regBuff;
  if (ctx != &gCtx || numAlgo != NCCL_NUM_ALGORITHMS || numProto != NCCL_NUM_PROTOCOLS)
    return ncclInvalidArgument;
  if (nBytes >= 65536 && table[NCCL_ALGO_RING][NCCL_PROTO_LL128] != NCCL_ALGO_PROTO_IGNORE)
    table[NCCL_ALGO_RING][NCCL_PROTO_LL128] = 0.0f;
  *nChannels = 2;
  return ncclSuccess;
}

static ncclResult_t cChunk(void* ctx, ncclFunc_t coll, size_t nBytes, int algo, int proto,
                           int nChannels, size_t* chunkSize) {
  (void)ctx;
  (void)coll;
  (void)nBytes;
  (void)algo;
  (void)proto;
  (void)nChannels;
  *chunkSize /= 2;
  return ncclSuccess;
}

static ncclResult_t cFinalize(void* ctx) { return ctx == &gCtx ? ncclSuccess : ncclInternalError; }

__attribute__((visibility("default"))) const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    "CTuner", cInit, cCollInfo, cFinalize, cChunk};
