#include "tools/perf_tools/perf_colls.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "tools/perf_tools/perf_alltoallv.h"
#include "tools/perf_tools/perf_data.h"

namespace ferry::perf {
namespace {

const CollInfo kColls[] = {
    {Coll::kAllReduce, "all_reduce_perf", true, false, false},
    {Coll::kAllGather, "all_gather_perf", false, false, true},
    {Coll::kBroadcast, "broadcast_perf", false, true, false},
    {Coll::kReduce, "reduce_perf", true, true, false},
    {Coll::kReduceScatter, "reduce_scatter_perf", true, false, true},
    {Coll::kAlltoAll, "alltoall_perf", false, false, true},
    {Coll::kGather, "gather_perf", false, true, true},
    {Coll::kScatter, "scatter_perf", false, true, true},
    {Coll::kSendRecv, "sendrecv_perf", false, false, false},
    {Coll::kHypercube, "hypercube_perf", false, false, true},
    {Coll::kAlltoAllv, "alltoallv_perf", false, false, true},
};

// AllGather by recursive exchange: at step m a rank holds the m blocks of
// its aligned group and swaps them with partner rank^m. Needs n = 2^k.
ncclResult_t hypercube(const void* send, void* recv, size_t count, ncclDataType_t dt,
                       ncclComm_t comm, int rank, int n, size_t elt, cudaStream_t stream) {
  auto* base = static_cast<unsigned char*>(recv);
  unsigned char* mine = base + count * static_cast<size_t>(rank) * elt;
  // The own block moves by a send to self, not memcpy: the buffers may be
  // device memory when the tools run on NVIDIA's NCCL.
  if (send != mine && count > 0) {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    ncclResult_t s = ncclSend(send, count, dt, rank, comm, stream);
    ncclResult_t v = ncclRecv(mine, count, dt, rank, comm, stream);
    r = ncclGroupEnd();
    if (r == ncclSuccess) r = s != ncclSuccess ? s : v;
    if (r != ncclSuccess) return r;
  }
  for (int m = 1; m < n; m <<= 1) {
    int partner = rank ^ m;
    size_t have = static_cast<size_t>(rank & ~(m - 1)) * count * elt;
    size_t get = static_cast<size_t>(partner & ~(m - 1)) * count * elt;
    size_t blocks = count * static_cast<size_t>(m);
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    ncclResult_t s = ncclSend(base + have, blocks, dt, partner, comm, stream);
    ncclResult_t v = ncclRecv(base + get, blocks, dt, partner, comm, stream);
    r = ncclGroupEnd();
    if (r == ncclSuccess) r = s != ncclSuccess ? s : v;
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

}  // namespace

const CollInfo* findColl(const char* name) {
  for (const CollInfo& c : kColls) {
    if (std::string(name) + "_perf" == c.testName) return &c;
  }
  return nullptr;
}

size_t countFor(const CollInfo& c, size_t bytes, size_t elt, int n) {
  if (c.coll == Coll::kAlltoAllv) return alltoallvPattern().paramCount(bytes, elt, n);
  if (!c.perRank) return bytes / elt;
  return (bytes / static_cast<size_t>(n)) / 16 * 16 / elt;
}

size_t sizeColumn(const CollInfo& c, size_t count, size_t elt, int n) {
  if (c.coll == Coll::kAlltoAllv) {
    size_t send = 0, recv = 0;
    alltoallvPattern().maxCounts(count, elt, n, &send, &recv);
    return std::max(send, recv) * elt;
  }
  return c.perRank ? count * elt * static_cast<size_t>(n) : count * elt;
}

double algBytes(const CollInfo& c, size_t count, size_t elt, int n) {
  if (c.coll == Coll::kHypercube) return static_cast<double>(count * elt) * (n - 1);
  return static_cast<double>(sizeColumn(c, count, elt, n));
}

double busFactor(const CollInfo& c, int n) {
  switch (c.coll) {
    case Coll::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv:
    case Coll::kHypercube:
      return 1.0;
    default:
      return static_cast<double>(n - 1) / n;
  }
}

Layout layoutFor(const CollInfo& c, size_t count, int n, int rank, size_t elt) {
  size_t all = count * static_cast<size_t>(n);
  size_t mine = count * static_cast<size_t>(rank);
  switch (c.coll) {
    case Coll::kReduceScatter:
      return {all, count, 0, mine};
    case Coll::kScatter:
      return {all, count, 0, mine};
    case Coll::kAllGather:
      return {count, all, mine, 0};
    case Coll::kGather:
    case Coll::kHypercube:
      return {count, all, mine, 0};
    case Coll::kAlltoAll:
      return {all, all, 0, 0};
    case Coll::kAlltoAllv: {
      AlltoallvPlan plan = alltoallvPlan(alltoallvPattern(), count, elt, n, rank);
      return {plan.sendTotal, plan.recvTotal, 0, 0};
    }
    default:
      return {count, count, 0, 0};
  }
}

ncclResult_t runColl(const CollInfo& c, const void* send, void* recv, size_t count, int type,
                     int op, int root, ncclComm_t comm, int rank, int n, cudaStream_t stream) {
  auto dt = static_cast<ncclDataType_t>(type);
  auto rop = static_cast<ncclRedOp_t>(op);
  switch (c.coll) {
    case Coll::kAllReduce:
      return ncclAllReduce(send, recv, count, dt, rop, comm, stream);
    case Coll::kAllGather:
      return ncclAllGather(send, recv, count, dt, comm, stream);
    case Coll::kBroadcast:
      return ncclBroadcast(send, recv, count, dt, root, comm, stream);
    case Coll::kReduce:
      return ncclReduce(send, recv, count, dt, rop, root, comm, stream);
    case Coll::kReduceScatter:
      return ncclReduceScatter(send, recv, count, dt, rop, comm, stream);
    case Coll::kAlltoAll:
      return ncclAlltoAll(send, recv, count, dt, comm, stream);
    case Coll::kGather:
      return ncclGather(send, recv, count, dt, root, comm, stream);
    case Coll::kScatter:
      return ncclScatter(send, recv, count, dt, root, comm, stream);
    case Coll::kSendRecv: {
      ncclResult_t r = ncclGroupStart();
      if (r != ncclSuccess) return r;
      ncclResult_t s = ncclSend(send, count, dt, (rank + 1) % n, comm, stream);
      ncclResult_t v = ncclRecv(recv, count, dt, (rank + n - 1) % n, comm, stream);
      r = ncclGroupEnd();
      return s != ncclSuccess ? s : v != ncclSuccess ? v : r;
    }
    case Coll::kHypercube:
      return hypercube(send, recv, count, dt, comm, rank, n, typeSize(type), stream);
    case Coll::kAlltoAllv:
      // Out of place through ferryAlltoAllv when the library has it; in
      // place (unsupported there) as nccl-tests' grouped send/recv.
      return runAlltoallv(send, recv, count, type, comm, rank, n, send != recv, stream);
  }
  return ncclInvalidArgument;
}

bool checksRecv(const CollInfo& c, int rank, int root, bool inPlace) {
  if ((c.coll == Coll::kSendRecv || c.coll == Coll::kAlltoAllv) && inPlace) return false;
  if (c.coll == Coll::kReduce || c.coll == Coll::kGather) return rank == root;
  return true;
}

int64_t countWrong(const CollInfo& c, const void* recv, size_t count, int type, int op,
                   uint64_t seed, int n, int rank, int root) {
  if (c.coll == Coll::kAlltoAllv)
    return alltoallvWrong(alltoallvPattern(), recv, count, type, seed, n, rank);
  const size_t elt = typeSize(type);
  const auto* got = static_cast<const unsigned char*>(recv);
  Layout l = layoutFor(c, count, n, rank, elt);
  const int dataOp = c.reduces ? op : kOpNone;
  unsigned char exp[8];
  int64_t wrong = 0;
  for (size_t k = 0; k < l.recvElems; ++k) {
    int srcRank = rank;
    size_t srcIdx = k;
    switch (c.coll) {
      case Coll::kAllReduce:
      case Coll::kReduce:
        expectedReduce(seed, type, op, n, k, exp);
        break;
      case Coll::kReduceScatter:
        expectedReduce(seed, type, op, n, count * static_cast<size_t>(rank) + k, exp);
        break;
      case Coll::kBroadcast:
        srcRank = root;
        break;
      case Coll::kAllGather:
      case Coll::kGather:
      case Coll::kHypercube:
        srcRank = static_cast<int>(k / count);
        srcIdx = k % count;
        break;
      case Coll::kAlltoAll:
        srcRank = static_cast<int>(k / count);
        srcIdx = count * static_cast<size_t>(rank) + k % count;
        break;
      case Coll::kScatter:
        srcRank = root;
        srcIdx = count * static_cast<size_t>(rank) + k;
        break;
      case Coll::kSendRecv:
        srcRank = (rank + n - 1) % n;
        break;
      case Coll::kAlltoAllv:
        break;  // handled above
    }
    if (!c.reduces) encode(inputValue(seed, type, dataOp, n, srcRank, srcIdx), type, exp);
    if (!matches(type, dataOp, n, got + k * elt, exp, seed, k)) ++wrong;
  }
  return wrong;
}

}  // namespace ferry::perf
