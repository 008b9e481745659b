// nccl-tests' -R, --local_register for the drivers that call NCCL (the Ferry
// AllReduce demo and tools/perf_tools): how the send and receive buffers are
// made known to the communicator, as NCCL users do for peak performance.
//   0  none: the driver allocates as it always did;
//   1  ncclMemAlloc, then ncclCommRegister once the communicator exists;
//   2  ncclMemAlloc, then ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC).
// Ferry's ncclMemAlloc maps host pages, or device memory where a device is
// in use (FERRY_DEVICE, CUDA); tools/perf_tools then mirrors it. Kept apart from
// ferry_bench, which the MPI and Gloo baselines link without an NCCL library.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <vector>

namespace ferry::bench {

constexpr int kRegisterNone = 0, kRegisterLocal = 1, kRegisterWindow = 2;

class RegisteredBuffers {
 public:
  RegisteredBuffers(int mode, int rank) : mode_(mode), rank_(rank) {}
  RegisteredBuffers(const RegisteredBuffers&) = delete;
  RegisteredBuffers& operator=(const RegisteredBuffers&) = delete;
  // ncclMemFree of every buffer. Destroy it after the communicator is
  // destroyed or aborted: an aborting comm may still reach the buffers.
  ~RegisteredBuffers();

  int mode() const { return mode_; }

  // bytes (rounded up to 64, at least 64) from ncclMemAlloc, zeroed so that
  // every page is touched before the timed loop, as the drivers' own
  // allocation does. Null after printing the failed call.
  // zero false: device memory, which the caller zeroes through its API.
  void* alloc(size_t bytes, bool zero = true);
  // Registers every buffer from alloc with comm, whole, in allocation order.
  // Windows are collective: every rank allocates the same sizes in the same
  // order (the drivers do) and so registers alike. False after printing the
  // failed call as every NCCL failure is printed ("Test NCCL failure ...").
  bool registerAll(ncclComm_t comm);
  // Undoes registerAll (windows collectively again). Only after a run without
  // failures; after one the comm is aborted and the handles are left to it.
  bool deregisterAll(ncclComm_t comm);

 private:
  struct Buffer {
    void* base;
    size_t bytes;
    void* handle;      // ncclCommRegister's, or null
    ncclWindow_t win;  // ncclCommWindowRegister's, or null
  };

  int mode_;
  int rank_;
  std::vector<Buffer> bufs_;
};

}  // namespace ferry::bench
