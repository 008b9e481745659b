// NCCL 2.28's model constants (what a v5/v6 tuner's init is shown unless the
// caller has its own) and the names used in log lines. The numbers are the
// defaults of NCCL's graph/tuning.cc as listed in §6.2 of
// /work/shared/reference/nccl-internals.md; "not applicable" entries are 0,
// as in NCCL.
#include "plugins/tuner/tuner_plugin.h"

namespace ferry::tunerplugin {

ncclTunerConstants_v5_t defaultConstants() {
  return ncclTunerConstants_v5_t{
      // baseLatencies [algo][LL, LL128, Simple]
      .baseLatencies = {{6.8, 14.0, 8.4},  // Tree
                        {6.6, 14.0, 8.4},  // Ring
                        {0, 0, 0},         // CollNetDirect
                        {0, 0, 0},         // CollNetChain
                        {0, 0, 0},         // NVLS
                        {0, 0, 0},         // NVLSTree
                        {8.0, 8.0, 8.0}},  // PAT
      // hwLatencies [NVLINK, PCI, NET][algo][LL, LL128, Simple]
      .hwLatencies = {{{0.6, 1.25, 4.0},
                       {0.6, 1.9, 3.4},
                       {0, 0, 3.7},
                       {0, 0, 2.8},
                       {0, 0, 25.0},
                       {0, 0, 25.0},
                       {0, 0, 4.0}},
                      {{1.0, 1.9, 4.0},
                       {1.0, 2.5, 5.7},
                       {0, 0, 3.7},
                       {0, 0, 2.8},
                       {0, 0, 0},
                       {0, 0, 0},
                       {0, 0, 4.0}},
                      {{5.0, 8.5, 14.0},
                       {2.7, 4.0, 14.0},
                       {0, 0, 31.0},
                       {0, 0, 30.0},
                       {0, 0, 18.0},
                       {0, 0, 20.9},
                       {0, 0, 14.0}}},
      // [Volta, Ampere, Hopper, Blackwell][1 node, 2 nodes, >= 4 nodes], GB/s
      .llMaxBws = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}},
      .perChMaxRingLL128Bws = {{20.0, 20.0, 20.0},
                               {20.0, 20.0, 20.0},
                               {36.7, 36.7, 36.7},
                               {73.4, 34.6, 73.4}},
      .perChMaxTreeLL128Bws = {{20.0, 20.0, 20.0},
                               {20.0, 20.0, 20.0},
                               {36.7, 36.7, 29.0},
                               {55.6, 31.67, 20.0}},
      .perChMaxTreeBws = {{26.5, 18.5, 10.0},
                          {24.0, 23.6, 17.8},
                          {38.7, 41.4, 36.0},
                          {70.0, 42.8, 24.0}},
      .perChMaxNVLSTreeBws = {{26.5, 18.5, 10.0},
                              {24.0, 23.6, 17.8},
                              {0, 57.7, 45.5},
                              {0, 96.0, 43.8}},
  };
}

const char* funcName(ncclFunc_t f) {
  static const char* const kNames[] = {"Broadcast", "Reduce",  "AllGather", "ReduceScatter",
                                       "AllReduce", "SendRecv", "Send",     "Recv",
                                       "AlltoAll",  "Scatter", "Gather"};
  int i = static_cast<int>(f);
  return i >= 0 && i < ncclNumFuncs ? kNames[i] : "Unknown";
}

const char* resultName(ncclResult_t r) {
  static const char* const kNames[] = {"ncclSuccess",         "ncclUnhandledCudaError",
                                       "ncclSystemError",     "ncclInternalError",
                                       "ncclInvalidArgument", "ncclInvalidUsage",
                                       "ncclRemoteError",     "ncclInProgress"};
  int i = static_cast<int>(r);
  return i >= 0 && i < static_cast<int>(sizeof(kNames) / sizeof(kNames[0])) ? kNames[i]
                                                                           : "ncclResult(unknown)";
}

}  // namespace ferry::tunerplugin
