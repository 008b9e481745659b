// Device-direct collectives: symmetric schedules as a device's stream work.
//
// When a call ordered on a device stream has its buffers in device windows
// that every rank of the host shares (mem/window.h: each rank imported the
// others' windows through the backend's IPC handles), nothing needs host
// staging: the symmetric schedule (algorithms/symmetric.cc) is enqueued on
// the caller's stream step by step. Copies and reductions become the
// backend's copyAsync / reduceAsync on the peers' memory, and a barrier
// becomes "raise my flag to the barrier's number, wait for every rank's"
// on shared flags (mem/node_sync.h). The host call returns at once; the
// stream runs the collective when it gets there, as NCCL's kernels would.
//
// Taken outside groups for AllReduce, ReduceScatter, AllGather and
// Broadcast with Sum, Prod, Max or Min; Avg and PreMulSum (which need a
// division or scaling kernel the seam does not have) and everything else
// go through the CPU-forward bridge (stream_bridge.h). A rank that never
// arrives makes every survivor's stream give up after the communicator's
// timeout, and the communicator reports the error.
#pragma once

#include "comm/group.h"

namespace ferry {

// Whether t was enqueued as stream work on device windows (false: the
// caller stages it through the bridge as before). An error once part of
// it was enqueued: the communicator is failed too.
Result<bool> submitDeviceDirect(Comm* c, const CollTask& t);

}  // namespace ferry
