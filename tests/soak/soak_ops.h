// Random collectives for the soak and chaos runs (tests/soak/README.md):
// a deterministic sequence from a seed, the same on every rank, each op
// checked exactly by the multi-process suite's cases (tests/mp/coll_cases.h).
#pragma once

#include <cstdint>
#include <string>

#include "tests/mp/coll_cases.h"

namespace ferry::soak {

enum class Kind {
  kAllReduce, kReduce, kReduceScatter, kBroadcast, kAllGather, kAlltoAll, kGather, kScatter,
  kSendRecvRing, kSendRecvAllPairs, kGroupedAllReduce, kCount
};

struct Op {
  Kind kind;
  mp::RedCase red;       // reductions
  ncclDataType_t dt;     // movements
  size_t count;          // elements (per rank for the per-rank kinds)
  int root;
  bool inPlace;
  int groupSize;         // kGroupedAllReduce: collectives in one group
};

// Op number `index` of the sequence `seed` for `nranks` ranks: sizes from 0
// to 16 MiB (log-uniform, 2% empty), every kind, datatype and reduction
// whose result is exact on nranks, roots anywhere, in place or not.
Op makeOp(uint64_t seed, uint64_t index, int nranks);
std::string describe(const Op& op);

// Runs and checks one op on `me`; 0 when exact (else the mp cases' code,
// with a harness message saying what differed).
int runOp(const mp::Rank& me, const Op& op);

// This process's open file descriptors and resident set (KiB).
int openFds();
long rssKiB();

}  // namespace ferry::soak
