// Accelerator: one memory kind behind one interface (issue 14).
//
// Everything the library does to user memory that is not plain host memory
// goes through this seam: which kind a pointer is, allocating it, copies
// between it and the host, reduction kernels on it, and ordering on the
// caller's stream. Schedules and transports stay kind-agnostic; what runs a
// step over device memory asks the owning Accelerator.
//
// Backends, from an explicit list (registry.cc):
//   host     today's memory: synchronous memcpy and host kernels, streams
//            ignored (every call is complete when it returns).
//   testdev  a stand-in discrete device (test_device.h): its memory faults on
//            any host access outside the backend, its work runs on stream
//            worker threads, so tests on a machine without a GPU catch a
//            library that touches device memory or ignores stream order.
//   cuda     the CUDA driver API, loaded at run time (cuda_accel.h), so
//            libferry.so needs no CUDA library to load.
//
// Stream semantics are NCCL's: work enqueued on a stream runs after
// everything enqueued on it before, and the host call that enqueues it
// returns without waiting for it.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include "accel/host_flag.h"
#include "core/status.h"
#include "kernels/reduce.h"

namespace ferry::accel {

// The caller's stream (a cudaStream_t's value for CUDA). nullptr is the
// backend's default stream.
using StreamHandle = void*;

// An opaque description of device memory another process can map
// (Accelerator::exportMemory); trivially copyable, sent as bytes.
struct IpcHandle {
  char backend[16] = {};  // the exporting backend's name: importers check it
  unsigned char data[128] = {};
};

class Accelerator {
 public:
  virtual ~Accelerator() = default;
  virtual const char* name() const = 0;
  // Whether p points into memory this backend allocated (the host backend
  // owns nothing: host memory is whatever nobody else claims).
  virtual bool owns(const void* p) const = 0;

  virtual Result<void*> alloc(size_t bytes) = 0;
  virtual Status free(void* p) = 0;

  virtual Result<StreamHandle> createStream() = 0;
  // Whether s is one of this backend's streams (nullptr, the default
  // stream, is every device backend's; the host backend has none).
  virtual bool ownsStream(StreamHandle s) = 0;
  // Waits for the stream's work first.
  virtual Status destroyStream(StreamHandle s) = 0;

  // Makes host memory [p, p + bytes) a target of copyAsync that does not
  // hold the caller (CUDA: page-locked, cuMemHostRegister; a copy between
  // pageable memory and the device may wait for the stream first). Undone
  // by unpinHost before the memory is freed. Nothing to do elsewhere.
  virtual Status pinHost(void* /*p*/, size_t /*bytes*/) { return Status::ok(); }
  virtual void unpinHost(void* /*p*/) {}

  // Enqueued on s. dst and src may each be host memory or this backend's;
  // the call returns without waiting for s if the host memory is pinned
  // (pinHost) or both sides are host memory.
  virtual Status copyAsync(void* dst, const void* src, size_t bytes, StreamHandle s) = 0;
  // Whether copyAsync would take [p, p + bytes): an error naming the
  // problem if p is this backend's memory and the range leaves its
  // allocation. Where the backend cannot tell (CUDA), ok; its copies fail.
  virtual Status checkRange(const void* /*p*/, size_t /*bytes*/) const { return Status::ok(); }
  // Whether this backend's kernels (reduceAsync, divideAsync) can take
  // [p, p + bytes) as an operand: checkRange by default; CUDA also refuses
  // pageable host memory, which its copies take but a kernel faults on.
  virtual Status checkKernelOperand(const void* p, size_t bytes) const { return checkRange(p, bytes); }
  // dst[i] = a[i] op b[i] (kernels::reduce's semantics), enqueued on s; any
  // operand may be host memory or this backend's.
  virtual Status reduceAsync(void* dst, const void* a, const void* b, size_t count,
                             kernels::DType t, kernels::Op op, StreamHandle s) = 0;
  // fn runs on a host thread once s reaches it; work enqueued on s after it
  // waits until fn returns (cudaLaunchHostFunc). fn must not enqueue on s.
  virtual Status hostFnAsync(StreamHandle s, std::function<void()> fn) = 0;
  // A flag this backend's streams can wait on cheaply (CUDA: one in memory
  // registered with the device); any HostFlag works with waitFlagAsync.
  virtual std::shared_ptr<HostFlag> newFlag() { return std::make_shared<HostFlag>(); }
  // Work enqueued on s after this waits until flag->load() >= value
  // (cuStreamWaitValue32 for CUDA: the stream waits, no host thread is
  // held). After timeoutMs (<= 0: none) the stream goes on, with a WARN.
  virtual Status waitFlagAsync(StreamHandle s, const HostFlag* flag, uint32_t value,
                               int64_t timeoutMs) = 0;
  // When s reaches this, flag rises to value (raiseTo): work enqueued
  // before it has run. CUDA stores it from the device (cuStreamWriteValue32
  // into a newFlag() flag), which wakes no sleeper: whoever waits for it
  // must poll. Elsewhere a host function raises it.
  virtual Status signalFlagAsync(StreamHandle s, HostFlag* flag, uint32_t value) {
    return hostFnAsync(s, [flag, value] { flag->raiseTo(value); });
  }
  // Whether reduceAsync can run at all (CUDA: only when the build embedded
  // the kernels nvcc compiled).
  virtual bool reduces() const { return true; }
  // Avg's final division as stream work, dst = src / n with
  // kernels::divide's semantics bit for bit (operands as reduceAsync's).
  // Backends without it refuse by name (kInvalidUsage); divides() says
  // which.
  virtual bool divides() const { return false; }
  virtual Status divideAsync(void* dst, const void* src, size_t count, kernels::DType t, uint64_t n,
                             StreamHandle h);
  // Whether copyAsync runs on engines of the device's own, not on host
  // cores (CUDA's copy engines): only then can the CPU-forward bridge's
  // copies overlap the host collective for free (pipelined staging).
  virtual bool copyEngines() const { return false; }
  // Whether s is capturing a graph (cudaStreamBeginCapture): what is
  // enqueued then is recorded to run at each launch of the graph, while the
  // bridge's host side would run once, at the call.
  virtual Result<bool> capturing(StreamHandle /*s*/) { return false; }
  // Sharing memory with the other processes of this host (CUDA IPC's
  // part): exportMemory describes [p, p + bytes) of this backend's memory
  // in a handle another process passes to importMemory, which maps it there
  // and returns a pointer that process's backend takes as an operand of its
  // copies and reductions (never host-accessible); closeImported unmaps it.
  // Backends that cannot share memory refuse by name (kInvalidUsage).
  virtual Status exportMemory(const void* p, size_t bytes, IpcHandle* out);
  virtual Result<void*> importMemory(const IpcHandle& h, size_t bytes);
  virtual Status closeImported(void* p);
  // Whether everything enqueued on s so far has run (cudaStreamQuery).
  virtual Result<bool> idle(StreamHandle s) = 0;
  // Blocks until everything enqueued on s so far has run, or fails after
  // timeoutMs (<= 0: no deadline) with kTimeout.
  virtual Status synchronize(StreamHandle s, int64_t timeoutMs) = 0;
};

// The backend of that name from the registry's explicit list, or nullptr.
// Backends are created at first use and live until the process exits.
Accelerator* find(const char* name);
// The host backend (never null).
Accelerator& host();
// The backend whose memory p is, asking every created device backend; the
// host backend when none claims it.
Accelerator& ownerOf(const void* p);

// The device backend FERRY_DEVICE names (created at the first ask); when it
// is empty, the cuda backend if probe() found one, else nullptr. An unknown
// name is WARNed once and is nullptr.
Accelerator* configured();
// Creates the backends that exist without being asked for (cuda, when its
// driver loads, sees a device and the process uses CUDA), at each
// communicator creation until one is made: a program hands Ferry
// cudaMalloc'd buffers without saying so.
void probe();

// The created device backend that owns stream s (non-null), or nullptr.
Accelerator* streamOwner(StreamHandle s);

// Whether a device backend exists in this process. While none does, no
// pointer can be device memory: the API's per-call check is this one load.
extern std::atomic<bool> gAnyDevice;
inline bool anyDevice() { return gAnyDevice.load(std::memory_order_acquire); }

}  // namespace ferry::accel
