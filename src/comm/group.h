// Group engine: ncclGroupStart/End and the execution of queued work.
//
// Every collective or point-to-point call becomes a task. Outside a group a
// task runs at once (a group of one); inside, tasks queue per thread until the
// outermost ncclGroupEnd. Then, per communicator, collectives run in call
// order and the group's sends/receives run together as one schedule, so
// matching pairs progress concurrently. Several communicators in one group
// (one thread driving several ranks, as ncclCommInitAll users do) each get a
// thread so their ranks can make progress against each other.
//
// With host buffers and a NULL stream every call (or the ncclGroupEnd that
// closes a group) returns after the operation has completed. Work on device
// memory is queued behind its stream instead (stream_bridge.h); a
// communicator's group containing any goes to the queue as one job.
#pragma once

#include <nccl.h>

#include <memory>

#include "accel/accelerator.h"
#include "algorithms/schedule.h"
#include "comm/alltoallv_call.h"
#include "comm/comm.h"
#include "core/status.h"
#include "exec/executor.h"

namespace ferry {

struct CollTask {
  Comm* comm = nullptr;
  CollArgs args;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  ReduceSpec reduce;
  OpInfo info;            // the call as every rank must agree on it (collSeq set at run time)
  // In-place AlltoAll: sendbuff is a copy of the caller's buffer made for
  // this call, of this many bytes (a remembered call copies again into it).
  std::shared_ptr<char[]> sendCopy;
  size_t sendCopyBytes = 0;
  // ferryAlltoAllv on a rail-shaped communicator: a count exchange, then
  // the exchange built from it (args and buffers above are unused).
  std::shared_ptr<AlltoAllvCall> alltoallv;
  // The call's arguments when a repeat of it may skip the checks and the
  // lookup (repeat_call.h); kind -1: it may not.
  CallKey key;
  // Not null: the call is ordered on `stream` of this accelerator (its
  // buffers are device memory, or its stream a device's); it runs through
  // the communicator's queue and host staging (stream_bridge.h).
  accel::Accelerator* dev = nullptr;
  accel::StreamHandle stream = nullptr;
  // PreMulSum's ncclScalarDevice scalar (dev's memory or host memory):
  // read when the stream reaches the call, into reduce.scalar.
  const void* deviceScalar = nullptr;
  // Not null: the run's input arrives and its output leaves piece by piece
  // (the bridge's pipelined staging, io_gate.h); must outlive the run.
  IoGate* gate = nullptr;
};

struct P2pTask {
  Comm* comm = nullptr;
  bool isSend = false;
  int peer = -1;
  size_t bytes = 0;
  void* buf = nullptr;
  accel::Accelerator* dev = nullptr;  // as CollTask's
  accel::StreamHandle stream = nullptr;
};

Status groupStart();
Status groupEnd();
// Prepare the queued work without running it; estimate its time (µs).
Status groupSimulateEnd(float* estimatedUs);
int groupDepth();

Status enqueueColl(const CollTask& t);
// A standalone call (outside any group) with the arguments of an earlier
// one that was remembered (repeat_call.h): findRepeat gets its plan (false:
// there is none, nothing happened), runRepeat runs it.
struct Repeat {
  const RepeatEntry* entry = nullptr;
  Executor* exec = nullptr;
};
bool findRepeat(Comm* c, const CallKey& k, Repeat* out);
Status runRepeat(Comm* c, const Repeat& r);
Status enqueueP2p(const P2pTask& t);
// ncclCommInitRank inside a group: init runs at the outermost group end.
Status enqueueInit(Comm* c, const ncclUniqueId& id);

}  // namespace ferry
