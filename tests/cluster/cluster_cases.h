// Exact-value collective cases for the cluster test (see cluster_colls.cc).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <vector>

namespace ferry::cluster {

struct Ctx {
  ncclComm_t comm = nullptr;
  int rank = 0, nranks = 1;
  int host = 0, hosts = 1;
  int local = 0, perHost = 1;
};

struct CaseResult {
  bool ok;
  // Payload bytes this rank's host must receive from other hosts for this
  // case under any algorithm (counted on local rank 0's results only).
  long long minRxThisHost;
};

enum class Red { kSum, kMax, kAvg };

// Every case's buffers in device memory of FERRY_DEVICE's backend
// (ferry/device.h) instead of host vectors.
void setDeviceMode(bool on);

// AllReduce: float sum/max, int32 avg. quiet: no OK line (the fault loop).
bool caseAllReduce(const Ctx& cx, size_t count, Red op, bool inPlace, bool quiet = false);

// AlltoAll of m floats per peer.
bool caseAlltoAll(const Ctx& cx, size_t m, bool quiet = false);

// Every collective for one size: `count` elements in the largest buffer of
// each case (per-rank counts for AllGather/ReduceScatter/AlltoAll/Gather/
// Scatter are count/nranks, at least 1).
std::vector<CaseResult> runSize(const Ctx& cx, size_t count);

}  // namespace ferry::cluster
