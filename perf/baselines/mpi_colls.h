// The MPI collectives measured by mpi_coll_perf, described the way
// tools/perf_tools describes Ferry's: which buffer holds what, how the size
// column and busbw are formed (nccl-tests' factors) and what each rank must
// receive. Kept free of MPI types so the tables can be read on their own.
#pragma once

#include <cstddef>
#include <string>

namespace ferry::bench {

enum class MpiColl {
  kAllReduce, kAllGather, kBroadcast, kReduce, kReduceScatter,
  kAlltoAll, kGather, kScatter, kSendRecv,
};

struct MpiCollInfo {
  MpiColl coll;
  const char* name;      // --coll value, e.g. "all_gather" (or "allgather")
  const char* testName;  // nccl-tests binary it mirrors, e.g. "all_gather_perf"
  const char* mpiCall;   // the MPI function measured
  bool reduces;          // redop column "sum" instead of "none"
  bool rooted;           // root column is the root instead of -1
  bool perRank;          // count is per rank; the size column is count * n
};

// Accepts "all_gather", "allgather", "all_gather_perf"; nullptr if unknown.
const MpiCollInfo* findMpiColl(const std::string& name);
// Every name findMpiColl accepts in its canonical form, comma separated.
std::string mpiCollNames();

// Elements per rank for a sweep size, rounded as tools/perf_tools does.
size_t mpiCollCount(const MpiCollInfo& c, size_t bytes, int n);
size_t mpiCollSizeColumn(const MpiCollInfo& c, size_t count, int n);
double mpiCollBusFactor(const MpiCollInfo& c, int n);

// Where data lives for one op on one rank, in elements.
struct MpiLayout {
  size_t inElems;     // input elements this rank fills
  size_t inPlaceOff;  // in-place: offset of the input inside the recv buffer
  size_t outOff;      // offset of the result inside the recv buffer
  size_t outElems;    // result elements to check (0: nothing on this rank)
};
MpiLayout mpiCollLayout(const MpiCollInfo& c, size_t count, int n, int rank, int root,
                        bool inPlace);

// Source of result element k on `rank`: for reductions the global index of
// the sum (srcRank < 0), otherwise which rank's input element it is.
struct MpiSource {
  int srcRank;
  size_t srcIdx;
};
MpiSource mpiCollSource(const MpiCollInfo& c, size_t count, int n, int rank, int root, size_t k);

}  // namespace ferry::bench
