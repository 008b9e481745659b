// Shared between the example tuner plugin (example_tuner.cc) and its tests:
// the plugin's settings and what it recorded, reached by the tests through
// the exported ferryExampleTunerState() of the loaded library.
#pragma once

#include <stddef.h>
#include <stdint.h>

struct FerryExampleTunerState {
  // Settings (tests change them between calls).
  size_t ringAboveBytes;  // AllReduce of at least this many bytes: Ring/Simple, else Tree/LL
  int nChannels;          // written to *nChannels (0 = no opinion)
  size_t chunkSize;       // v6 getChunkSize: replaces *chunkSize when non-zero
  int failInit;           // init returns ncclSystemError
  int failCollInfo;       // getCollInfo returns ncclInvalidArgument
  int failFinalize;       // finalize returns ncclInternalError
  int pickCollNet;        // choose CollNetDirect/Simple even where the table ignores it

  // Records.
  int initCalls, finalizeCalls, collInfoCalls, chunkSizeCalls;
  int liveContexts;     // inits not finalized yet
  int badContextCalls;  // calls with a context this plugin did not hand out
  int initVersion;      // which exported table's init ran
  int collVersion;      // which table's getCollInfo ran
  uint64_t commId;
  size_t nRanks, nNodes;
  int nvlDomains, nvlMinRanks, nvlMaxRanks;
  double seenRingSimpleBaseLatency;  // v5/v6: constants as init found them
  int coll;
  size_t nBytes;
  int numPipeOps, numAlgo, numProto, regBuff;
  int collNetSupport, nvlsSupport;  // v2 only
  int chunkAlgo, chunkProto, chunkChannels;
};

// What the v5/v6 init writes into the constants (tests check they arrive).
#define FERRY_EXAMPLE_RING_SIMPLE_BASE_LAT 1.5
#define FERRY_EXAMPLE_NET_RING_SIMPLE_HW_LAT 7.0
#define FERRY_EXAMPLE_LAST_NVLSTREE_BW 99.0

#ifdef __cplusplus
extern "C"
#endif
    struct FerryExampleTunerState*
    ferryExampleTunerState(void);
