// Device-direct collectives: symmetric schedules as a device's stream work.
//
// When a call ordered on a device stream has its buffers in device windows
// that every rank of the host shares (mem/window.h: each rank imported the
// others' windows through the backend's IPC handles), nothing needs host
// staging: the symmetric schedule (algorithms/symmetric.cc) is enqueued on
// the caller's stream step by step. Copies and reductions become the
// backend's copyAsync / reduceAsync on the peers' memory, and a barrier
// becomes "raise my flag to the barrier's number (mem/node_sync.h), wait
// for the gate", which a host thread raises once every rank's flag has
// (comm/barrier_watch.h): no host function ever blocks. The host call
// returns at once; the stream runs the collective when it gets there, as
// NCCL's kernels would.
//
// Operations run one after another per communicator, whatever streams they
// are on (each waits for the previous one's end on a flag of its own): the
// barrier numbers and the descriptor pages assume it, as NCCL's kernels of
// one communicator are ordered too.
//
// Taken for AllReduce, ReduceScatter, AllGather, Broadcast, Reduce and
// AlltoAll (reductions with Sum, Prod, Max, Min, and Avg where the backend
// divides: the final values' division is a kernel of its own), inside
// groups too (every rank decides alike from its own arguments); PreMulSum
// (each rank's input scaled by that rank's scalar, which the symmetric
// schedules' reads of peers' inputs cannot apply), Gather and Scatter (no
// symmetric form: algorithms/symmetric.cc), capturing streams and
// everything else go through the CPU-forward bridge (stream_bridge.h). A rank that never
// arrives makes every survivor's stream give up after the communicator's
// timeout, and the communicator reports the error.
#pragma once

#include <memory>
#include <vector>

#include "accel/accelerator.h"
#include "core/status.h"

namespace ferry {

class BarrierWatch;
class Comm;
struct CollTask;

class DeviceDirect {
 public:
  explicit DeviceDirect(Comm* c);
  // Waits for the operations enqueued so far; past the communicator's
  // timeout their waits are stopped, and if they still have not finished
  // the sync pages and imported windows are left mapped (leaked) rather
  // than pulled from under them.
  ~DeviceDirect();
  DeviceDirect(const DeviceDirect&) = delete;
  DeviceDirect& operator=(const DeviceDirect&) = delete;

  // Whether t was enqueued as stream work on device windows (false: the
  // caller stages it through the bridge). An error once part of it was
  // enqueued: the communicator is failed too.
  Result<bool> submit(const CollTask& t);
  // Until every operation enqueued so far has run: false after timeoutMs.
  bool drain(int64_t timeoutMs) const;

 private:
  // Device memory of at least `bytes` for schedules' scratch (null for 0).
  Result<char*> scratch(accel::Accelerator* dev, size_t bytes);

  Comm* comm_;
  accel::Accelerator* dev_ = nullptr;     // the backend of the first operation
  std::shared_ptr<accel::HostFlag> done_;  // operations finished, in order
  std::shared_ptr<accel::HostFlag> gate_;  // barriers released (by watch_)
  std::unique_ptr<BarrierWatch> watch_;
  uint64_t ops_ = 0;                       // operations begun
  uint64_t signaled_ = 0;                  // the last whose end is enqueued
  std::vector<char*> scratch_;             // the last is the current one
  size_t scratchBytes_ = 0;
  accel::Accelerator* scratchDev_ = nullptr;
};

}  // namespace ferry
