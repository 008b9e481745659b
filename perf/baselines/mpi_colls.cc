#include "perf/baselines/mpi_colls.h"

namespace ferry::bench {
namespace {

const MpiCollInfo kColls[] = {
    {MpiColl::kAllReduce, "all_reduce", "all_reduce_perf", "MPI_Allreduce", true, false, false},
    {MpiColl::kAllGather, "all_gather", "all_gather_perf", "MPI_Allgather", false, false, true},
    {MpiColl::kBroadcast, "broadcast", "broadcast_perf", "MPI_Bcast", false, true, false},
    {MpiColl::kReduce, "reduce", "reduce_perf", "MPI_Reduce", true, true, false},
    {MpiColl::kReduceScatter, "reduce_scatter", "reduce_scatter_perf",
     "MPI_Reduce_scatter_block", true, false, true},
    {MpiColl::kAlltoAll, "alltoall", "alltoall_perf", "MPI_Alltoall", false, false, true},
    {MpiColl::kGather, "gather", "gather_perf", "MPI_Gather", false, true, true},
    {MpiColl::kScatter, "scatter", "scatter_perf", "MPI_Scatter", false, true, true},
    {MpiColl::kSendRecv, "sendrecv", "sendrecv_perf", "MPI_Sendrecv (ring)", false, false,
     false},
};

std::string squash(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch != '_') out += ch;
  }
  return out;
}

}  // namespace

const MpiCollInfo* findMpiColl(const std::string& name) {
  std::string want = name;
  if (want.size() > 5 && want.compare(want.size() - 5, 5, "_perf") == 0) {
    want.resize(want.size() - 5);
  }
  for (const MpiCollInfo& c : kColls) {
    if (squash(want) == squash(c.name)) return &c;
  }
  return nullptr;
}

std::string mpiCollNames() {
  std::string out;
  for (const MpiCollInfo& c : kColls) out += (out.empty() ? "" : ",") + std::string(c.name);
  return out;
}

size_t mpiCollCount(const MpiCollInfo& c, size_t bytes, int n) {
  if (!c.perRank) return bytes / sizeof(float);
  return (bytes / static_cast<size_t>(n)) / 16 * 16 / sizeof(float);
}

size_t mpiCollSizeColumn(const MpiCollInfo& c, size_t count, int n) {
  size_t bytes = count * sizeof(float);
  return c.perRank ? bytes * static_cast<size_t>(n) : bytes;
}

double mpiCollBusFactor(const MpiCollInfo& c, int n) {
  switch (c.coll) {
    case MpiColl::kAllReduce:
      return 2.0 * (n - 1) / n;
    case MpiColl::kBroadcast:
    case MpiColl::kReduce:
    case MpiColl::kSendRecv:
      return 1.0;
    default:
      return static_cast<double>(n - 1) / n;
  }
}

MpiLayout mpiCollLayout(const MpiCollInfo& c, size_t count, int n, int rank, int root,
                        bool inPlace) {
  const size_t all = count * static_cast<size_t>(n);
  const size_t mine = count * static_cast<size_t>(rank);
  switch (c.coll) {
    case MpiColl::kAllGather:
      return {count, mine, 0, all};
    case MpiColl::kGather:
      return {count, mine, 0, rank == root ? all : 0};
    case MpiColl::kReduce:
      return {count, 0, 0, rank == root ? count : 0};
    // MPI's in-place Reduce_scatter_block leaves the result at the start.
    case MpiColl::kReduceScatter:
      return {all, 0, 0, count};
    case MpiColl::kAlltoAll:
      return {all, 0, 0, all};
    // In place, the root's block stays where it is, so every rank's result
    // is at its own block.
    case MpiColl::kScatter:
      return {all, 0, inPlace ? mine : 0, count};
    default:
      return {count, 0, 0, count};
  }
}

MpiSource mpiCollSource(const MpiCollInfo& c, size_t count, int n, int rank, int root, size_t k) {
  const size_t mine = count * static_cast<size_t>(rank);
  switch (c.coll) {
    case MpiColl::kAllReduce:
    case MpiColl::kReduce:
      return {-1, k};
    case MpiColl::kReduceScatter:
      return {-1, mine + k};
    case MpiColl::kBroadcast:
      return {root, k};
    case MpiColl::kAllGather:
    case MpiColl::kGather:
      return {static_cast<int>(k / count), k % count};
    case MpiColl::kAlltoAll:
      return {static_cast<int>(k / count), mine + k % count};
    case MpiColl::kScatter:
      return {root, mine + k};
    case MpiColl::kSendRecv:
      return {(rank + n - 1) % n, k};
  }
  return {rank, k};
}

}  // namespace ferry::bench
