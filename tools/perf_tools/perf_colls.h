// The collectives under test: how a size becomes a count, the buffer layout
// out of place and in place, the bandwidth formulas, one call, and what each
// rank must find in its receive buffer. Formulas follow nccl-tests.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

namespace ferry::perf {

enum class Coll {
  kAllReduce,
  kAllGather,
  kBroadcast,
  kReduce,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv,
  kHypercube,
  kAlltoAllv  // Ferry extension / grouped p2p; pattern in perf_alltoallv.h
};

struct CollInfo {
  Coll coll;
  const char* testName;  // "all_reduce_perf"
  bool reduces;          // takes -o
  bool rooted;           // takes -r
  bool perRank;          // count is per rank; the size column is count*n*elt
};

// Looks up a collective by its binary name without "_perf"; null if unknown.
const CollInfo* findColl(const char* name);

// Per-rank count for a requested size (per-rank counts rounded down to 16 B).
size_t countFor(const CollInfo& c, size_t bytes, size_t elt, int n);
// The size column and the bytes behind algbw.
size_t sizeColumn(const CollInfo& c, size_t count, size_t elt, int n);
double algBytes(const CollInfo& c, size_t count, size_t elt, int n);
double busFactor(const CollInfo& c, int n);

// Elements a rank sends and receives, and for in place where they sit in the
// receive buffer.
struct Layout {
  size_t sendElems, recvElems, inPlaceSendOff, inPlaceRecvOff;
};
Layout layoutFor(const CollInfo& c, size_t count, int n, int rank, size_t elt);

// One op, enqueued on stream (complete on return with Ferry's host memory).
ncclResult_t runColl(const CollInfo& c, const void* send, void* recv, size_t count, int type,
                     int op, int root, ncclComm_t comm, int rank, int n, cudaStream_t stream);

// Whether this rank's receive buffer is defined after the op (reduce and
// gather: root only) and whether the placement is checked at all (sendrecv
// and alltoallv in place are not, as nccl-tests).
bool checksRecv(const CollInfo& c, int rank, int root, bool inPlace);

// Wrong elements in this rank's receive buffer for inputs of seed.
int64_t countWrong(const CollInfo& c, const void* recv, size_t count, int type, int op,
                   uint64_t seed, int n, int rank, int root);

}  // namespace ferry::perf
