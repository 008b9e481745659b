/* NCCL tuner plugin ABI, as Ferry loads it (versions 2 to 6).
 *
 * A tuner is a shared library (libnccl-tuner-*.so, or a net plugin library)
 * exporting one of these tables under the symbol ncclTunerPlugin_v<N>. The
 * library calls init once per communicator, getCollInfo for each collective
 * it schedules, and finalize when the communicator goes away. Ferry's loader
 * (plugins/tuner) adapts every version to one internal interface.
 *
 * The layouts match NCCL 2.28 (v2..v5) and 2.30 (v6) on LP64; the sizes and
 * offsets are pinned by static_asserts in tests/plugins/tuner_layout_test.cc.
 * Index values (functions, algorithms, protocols, table rows) are part of the
 * ABI too: a plugin writes into tables by these indices.
 */
#ifndef FERRY_NCCL_TUNER_H_
#define FERRY_NCCL_TUNER_H_

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"
#include "nccl_net.h" /* ncclDebugLogger_t and the log levels/subsystems */

#ifdef __cplusplus
extern "C" {
#endif

/* The collective a call is about. Values as in NCCL 2.28; only the first
 * NCCL_NUM_FUNCTIONS (Broadcast .. AllReduce) are ever tuned. */
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10,
  ncclNumFuncs = 11
} ncclFunc_t;
#define NCCL_NUM_FUNCTIONS 5

/* Rows of the cost table (algorithms). */
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_NUM_ALGORITHMS 7

/* Columns of the cost table (protocols). */
#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_NUM_PROTOCOLS 3

/* A cost-table entry holding this value is not a candidate (unsupported or
 * disabled); the library skips it whatever the plugin does to others. */
#define NCCL_TUNING_IGNORE -1.0
#define NCCL_ALGO_PROTO_IGNORE NCCL_TUNING_IGNORE

/* First index of hwLatencies: the kind of link a step crosses. */
#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2
#define NCCL_NUM_HW_LINKS 3

/* First index of the bandwidth caps: GPU generation (for llMaxBws across
 * nodes NCCL reuses rows 0/1 for the CPU vendor). */
#define NCCL_VOLTA_COMPCAP_IDX 0
#define NCCL_AMPERE_COMPCAP_IDX 1
#define NCCL_HOPPER_COMPCAP_IDX 2
#define NCCL_BLACKWELL_COMPCAP_IDX 3
#define NCCL_NUM_COMPCAPS 4

/* Second index of the bandwidth caps: how many nodes. */
#define NCCL_TUNING_SCALE_1NODE 0
#define NCCL_TUNING_SCALE_2NODES 1
#define NCCL_TUNING_SCALE_4NODES 2
#define NCCL_NUM_TUNING_SCALES 3

/* v5+: how the communicator's ranks group into NVLink domains. */
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

/* v5+: the model's constants, handed to init in/out so that a plugin can
 * replace them before the library builds its latency/bandwidth tables.
 * Latencies in microseconds, bandwidths in GB/s; the arrays are in this order
 * with no padding between them (all double). */
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  double hwLatencies[NCCL_NUM_HW_LINKS][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  double llMaxBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
} ncclTunerConstants_v5_t;

/* v6 changed neither struct. */
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;

/* About the cost table every version from v3 on receives: the C type says
 * float** but the pointer is the address of a contiguous
 * float[numAlgo][numProto] (numAlgo = 7, numProto = 3), indexed
 * [algorithm][protocol]. It arrives holding the library's predicted time per
 * entry (microseconds; NCCL_ALGO_PROTO_IGNORE where not a candidate). The
 * plugin may raise or lower entries; the smallest non-negative one wins, so 0
 * means "take this one". *nChannels left at 0 keeps the library's choice.
 * A non-success return means "no opinion": the library uses its own choice. */

/* v6 (NCCL 2.30): v5 plus an optional getChunkSize (may be NULL). */
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v6_t* nvlDomainInfo,
                       ncclTunerConstants_v6_t* constants);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
  /* In/out *chunkSize: the library's chunk for the chosen algorithm and
   * protocol; the library clamps what comes back to its buffer limits. */
  ncclResult_t (*getChunkSize)(void* ctx, ncclFunc_t collType, size_t nBytes, int algo, int proto,
                               int nChannels, size_t* chunkSize);
} ncclTuner_v6_t;

/* v5 (NCCL 2.27/2.28): context first in init; commId, NVL domains and the
 * constants added; destroy renamed finalize. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                       ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                       ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
} ncclTuner_v5_t;

/* v4: v3 plus regBuff (user buffers registered, or graph-registered). */
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** ctx);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int regBuff,
                              int* nChannels);
  ncclResult_t (*destroy)(void* ctx);
} ncclTuner_v4_t;

/* v3: the first cost-table version. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** ctx);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                              float** collCostTable, int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* ctx);
} ncclTuner_v3_t;

/* v2: the plugin names one algorithm and protocol (either may stay
 * NCCL_ALGO_UNDEF / NCCL_PROTO_UNDEF for "no opinion"). collNetSupport and
 * nvlsSupport tell it whether those algorithms are candidates at all. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** ctx);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                              int nvlsSupport, int numPipeOps, int* algorithm, int* protocol,
                              int* nChannels);
  ncclResult_t (*destroy)(void* ctx);
} ncclTuner_v2_t;

/* The current version. */
typedef ncclTuner_v6_t ncclTuner_t;
typedef ncclTunerConstants_v6_t ncclTunerConstants_t;
typedef ncclNvlDomainInfo_v6_t ncclNvlDomainInfo_t;
#define NCCL_TUNER_PLUGIN_SYMBOL "ncclTunerPlugin_v6"

#ifdef __cplusplus
}
#endif

#endif /* FERRY_NCCL_TUNER_H_ */
