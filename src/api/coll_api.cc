// Collective and point-to-point entry points: validate, describe the
// operation as a task, hand it to the group engine.
#include <cstring>
#include <memory>
#include <vector>

#include "api/edge.h"
#include "api/exports.h"
#include "comm/group.h"
#include "comm/stream_bridge.h"

namespace ferry::api {
namespace {

struct CollCall {
  const char* fn;
  CollKind kind;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  // The caller's datatype and op as plain ints: a C caller may pass any int
  // (e.g. 99), which is outside ncclDataType_t's value range, and loading
  // such a value as the enum is undefined in C++ (UBSan: invalid enum
  // load). They become enums only after checkType/reduceSpec accept them.
  int type;
  int op;
  int root;
  bool reduces;
  bool rooted;
  void* stream;
};

// *scalarAt: where a ncclScalarDevice scalar is, to be read (bindScalar).
Result<ReduceSpec> reduceSpec(Comm* c, int op, kernels::DType t, const void** scalarAt) {
  ReduceSpec r;
  r.dtype = t;
  int v = op;
  if (v >= 0 && v < ncclNumOps) {
    r.op = v == ncclAvg ? kernels::Op::kSum : static_cast<kernels::Op>(v);
    if (v == ncclAvg) r.divisor = static_cast<uint64_t>(c->nranks());
    return r;
  }
  const PremulOp* p = c->premul(v);
  if (!p) return invalidArgument("invalid reduction operation " + std::to_string(v));
  if (p->dtype != t)
    return invalidArgument("PreMulSum operation " + std::to_string(v) + " was created for " +
                           kernels::name(p->dtype) + ", used with " + kernels::name(t));
  r.op = kernels::Op::kSum;
  r.premul = true;
  r.scalar = p->scalar;
  *scalarAt = p->at;
  return r;
}

// NCCL reads a ncclScalarDevice scalar as the collective runs: a call
// ordered on a stream reads it when the stream gets there (the bridge
// copies it on the stream, wherever it is: device memory, or host memory a
// kernel earlier on the stream may write), a host call now.
Status bindScalar(CollTask* task, const void* at) {
  accel::Accelerator& owner = accel::anyDevice() ? accel::ownerOf(at) : accel::host();
  if (task->dev && (&owner == task->dev || &owner == &accel::host())) {
    task->deviceScalar = at;
    return Status::ok();
  }
  if (!task->dev && &owner == &accel::host()) {
    task->reduce.scalar = kernels::scalarFromBytes(task->reduce.dtype, at);
    return Status::ok();
  }
  return invalidUsage(std::string("the PreMulSum scalar is ") + owner.name() +
                      " memory (ncclScalarDevice): the call must be ordered on a stream of that device");
}

// Which buffers this rank must supply for a collective (NCCL semantics).
void significance(const CollCall& k, int rank, bool* needSend, bool* needRecv) {
  bool isRoot = rank == k.root;
  *needSend = *needRecv = true;
  if (k.kind == CollKind::kBroadcast || k.kind == CollKind::kScatter) *needSend = isRoot;
  if (k.kind == CollKind::kReduce || k.kind == CollKind::kGather) *needRecv = isRoot;
}

bool detectInPlace(const CollCall& k, int rank, size_t block) {
  const char* s = static_cast<const char*>(k.sendbuff);
  const char* r = static_cast<const char*>(k.recvbuff);
  switch (k.kind) {
    case CollKind::kAllGather: case CollKind::kGather: return s == r + rank * block;
    case CollKind::kReduceScatter: case CollKind::kScatter: return r == s + rank * block;
    default: return s == r;
  }
}

void logCall(const CollCall& k, Comm* c) {
  FERRY_INFO(log::kColl, "%s: sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p "
             "[nranks=%d]", k.fn, k.sendbuff, k.recvbuff, k.count, static_cast<int>(k.type),
             static_cast<int>(k.op), k.root, static_cast<void*>(c), c->nranks());
}

// A call ordered on a stream (device buffers, or a device's stream) goes to
// the communicator's queue; a host call waits for what is queued first.
// Only when a device backend exists (one load otherwise).
Status orderOnStream(Comm* c, const void* send, const void* recv, void* stream,
                     accel::Accelerator** dev) {
  if (accel::anyDevice()) {
    FERRY_ASSIGN(*dev, orderingDevice(send, recv, stream));
  }
  if (*dev || !c->queueBusy()) [[likely]] return Status::ok();
  return c->quiesce();
}

Status submit(const CollCall& k, ncclComm_t comm) {
  FERRY_ASSIGN(Comm * c, readyComm(comm));
  // The same arguments as a call that passed every check below: run it
  // again (not while the stream queue runs: it owns the plans then).
  CallKey key{k.sendbuff, k.recvbuff, k.count, static_cast<int32_t>(k.kind), k.type, k.op, k.root};
  if (Repeat r; !c->queueBusy() && findRepeat(c, key, &r)) {
    logCall(k, c);
    return runRepeat(c, r);
  }
  FERRY_ASSIGN(kernels::DType t, checkType(k.type));
  size_t e = kernels::sizeOf(t);
  FERRY_TRY(checkSize(k.count, e, static_cast<size_t>(c->nranks())));
  if (k.rooted) FERRY_TRY(checkRank(k.root, c->nranks(), "root"));
  CollTask task;
  task.comm = c;
  const void* scalarAt = nullptr;
  if (k.reduces) {
    FERRY_ASSIGN(task.reduce, reduceSpec(c, k.op, t, &scalarAt));
  }
  bool needSend, needRecv;
  significance(k, c->rank(), &needSend, &needRecv);
  if (k.count > 0 && needSend) FERRY_TRY(checkBuffer(k.sendbuff, "sendbuff"));
  if (k.count > 0 && needRecv) FERRY_TRY(checkBuffer(k.recvbuff, "recvbuff"));
  task.args = CollArgs{k.kind, c->rank(), c->nranks(), k.root, k.count, e, false};
  task.args.inPlace = needSend && needRecv && detectInPlace(k, c->rank(), k.count * e);
  // What every rank must agree on (exec/op_check.h); the group engine
  // stamps the sequence number.
  task.info.kind = k.kind;
  task.info.count = k.count;
  task.info.root = k.rooted ? k.root : -1;
  task.info.dtype = static_cast<uint8_t>(t);
  if (k.reduces) task.info.op = task.reduce.premul ? uint8_t{kOpPreMulSum} : static_cast<uint8_t>(k.op);
  task.sendbuff = k.sendbuff;
  task.recvbuff = k.recvbuff;
  logCall(k, c);
  if (k.count == 0) return Status::ok();
  task.key = key;
  FERRY_TRY(orderOnStream(c, needSend ? k.sendbuff : nullptr, needRecv ? k.recvbuff : nullptr,
                          k.stream, &task.dev));
  task.stream = k.stream;
  if (scalarAt) FERRY_TRY(bindScalar(&task, scalarAt));
  if (k.kind == CollKind::kAllToAll && task.args.inPlace && !task.dev) {
    // Blocks are received while others are still being sent: work on a copy.
    // The copy comes from the communicator's staging pool (reused, and
    // shared memory a local peer reads by reference).
    size_t bytes = k.count * e * c->nranks();
    FERRY_ASSIGN(std::shared_ptr<char[]> copy, c->staging().copyOf(k.sendbuff, bytes));
    task.sendCopy = copy;
    task.sendCopyBytes = bytes;
    task.sendbuff = copy.get();
    task.args.inPlace = false;
  }
  return enqueueColl(task);
}

ncclResult_t coll(const CollCall& k, ncclComm_t comm) {
  return guard(k.fn, [&] { return submit(k, comm); });
}

Status submitP2p(const char* fn, bool isSend, void* buf, size_t count, int type,
                 int peer, ncclComm_t comm, void* stream) {
  FERRY_ASSIGN(Comm * c, readyComm(comm));
  FERRY_ASSIGN(kernels::DType t, checkType(type));
  size_t e = kernels::sizeOf(t);
  FERRY_TRY(checkSize(count, e, 1));
  FERRY_TRY(checkRank(peer, c->nranks(), "peer"));
  if (count > 0) FERRY_TRY(checkBuffer(buf, isSend ? "sendbuff" : "recvbuff"));
  FERRY_INFO(log::kColl, "%s: buff %p count %zu datatype %d peer %d comm %p [nranks=%d]", fn, buf,
             count, static_cast<int>(type), peer, static_cast<void*>(c), c->nranks());
  P2pTask task{c, isSend, peer, count * e, buf};
  if (accel::anyDevice()) [[unlikely]] {  // no queue exists otherwise
    FERRY_TRY(orderOnStream(c, count ? buf : nullptr, nullptr, stream, &task.dev));
    task.stream = stream;
  }
  return enqueueP2p(task);
}

}  // namespace
}  // namespace ferry::api

using ferry::CollKind;
using ferry::api::coll;
using ferry::api::CollCall;

FERRY_EXPORT(ncclResult_t, ncclAllReduce, (const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)) {
  return coll({"ncclAllReduce", CollKind::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0,
               true, false, stream}, comm);
}

FERRY_EXPORT(ncclResult_t, ncclBroadcast, (const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)) {
  return coll({"ncclBroadcast", CollKind::kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum,
               root, false, true, stream}, comm);
}

FERRY_EXPORT(ncclResult_t, ncclBcast, (void* buff, size_t count, ncclDataType_t datatype, int root,
             ncclComm_t comm, cudaStream_t stream)) {
  return coll({"ncclBcast", CollKind::kBroadcast, buff, buff, count, datatype, ncclSum, root, false,
               true, stream}, comm);
}

FERRY_EXPORT(ncclResult_t, ncclReduce, (const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
             cudaStream_t stream)) {
  return coll({"ncclReduce", CollKind::kReduce, sendbuff, recvbuff, count, datatype, op, root, true,
               true, stream}, comm);
}

FERRY_EXPORT(ncclResult_t, ncclAllGather, (const void* sendbuff, void* recvbuff, size_t sendcount,
             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)) {
  return coll({"ncclAllGather", CollKind::kAllGather, sendbuff, recvbuff, sendcount, datatype,
               ncclSum, 0, false, false, stream}, comm);
}

FERRY_EXPORT(ncclResult_t, ncclReduceScatter, (const void* sendbuff, void* recvbuff,
             size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
             cudaStream_t stream)) {
  return coll({"ncclReduceScatter", CollKind::kReduceScatter, sendbuff, recvbuff, recvcount,
               datatype, op, 0, true, false, stream}, comm);
}

FERRY_EXPORT(ncclResult_t, ncclAlltoAll, (const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)) {
  return coll({"ncclAlltoAll", CollKind::kAllToAll, sendbuff, recvbuff, count, datatype, ncclSum, 0,
               false, false, stream}, comm);
}

FERRY_EXPORT(ncclResult_t, ncclGather, (const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)) {
  return coll({"ncclGather", CollKind::kGather, sendbuff, recvbuff, count, datatype, ncclSum, root,
               false, true, stream}, comm);
}

FERRY_EXPORT(ncclResult_t, ncclScatter, (const void* sendbuff, void* recvbuff, size_t count,
             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)) {
  return coll({"ncclScatter", CollKind::kScatter, sendbuff, recvbuff, count, datatype, ncclSum, root,
               false, true, stream}, comm);
}

FERRY_EXPORT(ncclResult_t, ncclSend, (const void* sendbuff, size_t count, ncclDataType_t datatype,
             int peer, ncclComm_t comm, cudaStream_t stream)) {
  // As an int before the lambda: reading an out-of-range enum through the
  // capture (a load) is undefined (see CollCall).
  const int type = datatype;
  return ferry::api::guard("ncclSend", [&] {
    return ferry::api::submitP2p("ncclSend", true, const_cast<void*>(sendbuff), count, type,
                                 peer, comm, stream);
  });
}

FERRY_EXPORT(ncclResult_t, ncclRecv, (void* recvbuff, size_t count, ncclDataType_t datatype,
             int peer, ncclComm_t comm, cudaStream_t stream)) {
  const int type = datatype;  // see ncclSend
  return ferry::api::guard("ncclRecv", [&] {
    return ferry::api::submitP2p("ncclRecv", false, recvbuff, count, type, peer, comm, stream);
  });
}
