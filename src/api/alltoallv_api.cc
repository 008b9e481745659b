// ferryAlltoAllv: Ferry's AlltoAllv extension (counts and displacements in
// elements, as RCCL's ncclAllToAllv). With NCCL_ALGO="AlltoAll:rail" on a
// communicator of >= 2 hosts with the same number (>= 2) of ranks each it
// runs rail-local (src/comm/alltoallv_call.h). Otherwise it is one group of
// ncclSend and ncclRecv, inheriting the p2p engine's ordering, deadlines
// and aborts.
#include <ferry/ferry.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "algorithms/builders.h"
#include "api/edge.h"
#include "comm/group.h"
#include "comm/stream_bridge.h"
#include "core/log.h"

namespace ferry::api {
namespace {

struct Extent {
  size_t lo = 0, hi = 0;  // bytes [lo, hi) from the buffer start; empty if lo == hi
};

std::string at(const char* array, int peer) {
  return std::string(array) + "[" + std::to_string(peer) + "]";
}

// Checks one side (send or receive): a NULL buffer only with all-zero counts,
// displacement + count never overflowing; returns the bytes it touches.
Result<Extent> sideExtent(const void* buf, const char* bufName, const size_t* counts,
                          const char* countsName, const size_t* displs, const char* displsName,
                          int nranks, size_t elt) {
  FERRY_TRY(checkPtr(counts, countsName));
  FERRY_TRY(checkPtr(displs, displsName));
  Extent e{SIZE_MAX, 0};
  for (int p = 0; p < nranks; ++p) {
    if (counts[p] == 0) continue;
    if (buf == nullptr)
      return invalidArgument(std::string(bufName) + " is NULL but " + at(countsName, p) + " is " +
                             std::to_string(counts[p]));
    if (displs[p] > SIZE_MAX / elt - counts[p])
      return invalidArgument(at(displsName, p) + " + " + at(countsName, p) +
                             " overflows the buffer size");
    e.lo = std::min(e.lo, displs[p] * elt);
    e.hi = std::max(e.hi, (displs[p] + counts[p]) * elt);
  }
  if (e.hi == 0) e.lo = 0;
  return e;
}

bool overlap(const void* a, Extent ea, const void* b, Extent eb) {
  if (ea.lo == ea.hi || eb.lo == eb.hi) return false;
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa + ea.lo < pb + eb.hi && pb + eb.lo < pa + ea.hi;
}

Status validate(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                ncclDataType_t datatype, ncclComm_t comm, int* nranks, size_t* elt,
                Comm** out) {
  FERRY_ASSIGN(Comm * c, readyComm(comm));
  *out = c;
  FERRY_ASSIGN(kernels::DType t, checkType(datatype));
  *nranks = c->nranks();
  *elt = kernels::sizeOf(t);
  FERRY_ASSIGN(Extent se, sideExtent(sendbuff, "sendbuff", sendcounts, "sendcounts", sdispls,
                                     "sdispls", *nranks, *elt));
  FERRY_ASSIGN(Extent re, sideExtent(recvbuff, "recvbuff", recvcounts, "recvcounts", rdispls,
                                     "rdispls", *nranks, *elt));
  if (overlap(sendbuff, se, recvbuff, re))
    return invalidArgument("sendbuff and recvbuff ranges overlap (in-place AlltoAllv is not supported)");
  return Status::ok();
}

// Rail-local when the shape allows it and NCCL_ALGO's AlltoAll clause
// asks for rail: decided from what every rank knows alike (the counts are
// not: choosing by size would need a global exchange, see
// alltoallv_call.h). Off by default: rail wins with small blocks and loses
// with mid-size ones (docs/tuning.md, perf/README.md).
bool railLocal(Comm* c) {
  const CollFilter& f = c->algoFilter();
  return railvSupports(c->view()) && f.allows(CollKind::kAllToAll, "rail") &&
         !f.allows(CollKind::kAllToAll, "direct");
}

// Device memory goes the direct way: its Send/Recv group runs through the
// bridge (stream_bridge.h); the rail exchange works on host memory only.
bool onDevice(const void* a, const void* b) {
  if (!accel::anyDevice()) return false;
  Result<accel::Accelerator*> d = orderingDevice(a, b, nullptr);
  return !d.isOk() || d.value() != nullptr;  // two device kinds: the Send/Recv path names it
}

Status submitRail(Comm* c, const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                  void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                  ncclDataType_t datatype, size_t elt) {
  FERRY_TRY(c->quiesce());  // runs on this thread: after what the stream queue holds
  CollTask t;
  t.comm = c;
  t.args.kind = CollKind::kAllToAllv;
  t.args.rank = c->rank();
  t.args.nranks = c->nranks();
  t.info.kind = CollKind::kAllToAllv;
  t.info.count = static_cast<uint64_t>(c->nranks());
  FERRY_ASSIGN(kernels::DType type, checkType(datatype));
  t.info.dtype = static_cast<uint8_t>(type);
  t.alltoallv = std::make_shared<AlltoAllvCall>(c, sendbuff, sendcounts, sdispls, recvbuff,
                                                recvcounts, rdispls, elt);
  return enqueueColl(t);
}

}  // namespace
}  // namespace ferry::api

extern "C" FERRY_API ncclResult_t ferryAlltoAllv(const void* sendbuff, const size_t sendcounts[],
                                                 const size_t sdispls[], void* recvbuff,
                                                 const size_t recvcounts[], const size_t rdispls[],
                                                 ncclDataType_t datatype, ncclComm_t comm,
                                                 cudaStream_t stream) {
  int n = 0;
  size_t elt = 0;
  ferry::Comm* c = nullptr;
  ncclResult_t r = ferry::api::guard("ferryAlltoAllv", [&] {
    return ferry::api::validate(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls,
                                datatype, comm, &n, &elt, &c);
  });
  if (r != ncclSuccess) return r;
  const bool device = ferry::api::onDevice(sendbuff, recvbuff);
  const bool rail = !device && ferry::api::railLocal(c);
  FERRY_INFO(ferry::log::kTuning, "AlltoAllv: algorithm %s%s", rail ? "rail" : "direct",
             device && ferry::api::railLocal(c) ? " (device memory: rail runs on host memory only)" : "");
  if (rail)
    return ferry::api::guard("ferryAlltoAllv", [&] {
      return ferry::api::submitRail(c, sendbuff, sendcounts, sdispls, recvbuff, recvcounts,
                                    rdispls, datatype, elt);
    });
  const auto* sb = static_cast<const unsigned char*>(sendbuff);
  auto* rb = static_cast<unsigned char*>(recvbuff);
  // The first failing call has logged its own WARN; the group still ends so
  // the caller's group depth stays balanced.
  r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  for (int p = 0; p < n && r == ncclSuccess; ++p) {
    if (sendcounts[p] > 0)
      r = ncclSend(sb + sdispls[p] * elt, sendcounts[p], datatype, p, comm, stream);
    if (r == ncclSuccess && recvcounts[p] > 0)
      r = ncclRecv(rb + rdispls[p] * elt, recvcounts[p], datatype, p, comm, stream);
  }
  ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}
