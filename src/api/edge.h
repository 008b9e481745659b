// Helpers shared by the C ABI entry points: argument checks that log a WARN
// naming the problem, and the one place a Status becomes an ncclResult_t.
#pragma once

#include <nccl.h>

#include <string>

#include "accel/accelerator.h"
#include "comm/comm.h"
#include "comm/registry.h"
#include "core/log.h"
#include "core/status.h"
#include "kernels/reduce.h"

namespace ferry::api {

// Convert, logging a WARN for failures ("<fn>: <message>"). kInProgress is
// not a failure.
ncclResult_t finish(const char* fn, const Status& st);

// Run `body` (returning Status) and convert; catches anything thrown by the
// standard library so no exception crosses extern "C".
template <typename F>
ncclResult_t guard(const char* fn, F&& body) {
  try {
    Status st = body();
    if (st.isOk()) [[likely]] return ncclSuccess;  // no call per successful entry point
    return finish(fn, st);
  } catch (const std::bad_alloc&) {
    return finish(fn, systemError("out of memory"));
  } catch (...) {
    return finish(fn, internalError("unexpected exception"));
  }
}

// A live, usable communicator, or an error naming what is wrong with it.
Result<Comm*> liveComm(ncclComm_t comm);
Result<Comm*> readyCommSlow(ncclComm_t comm);
// Inline for the live, usable communicator every call of a loop passes;
// anything else takes the out-of-line path that names the problem.
inline Result<Comm*> readyComm(ncclComm_t comm) {
  auto* c = reinterpret_cast<Comm*>(comm);
  if (c != nullptr && isLiveComm(c) && c->usableNow() && !c->finalized()) [[likely]] return c;
  return readyCommSlow(comm);
}
// Live, initialised and not aborted, but maybe revoked or failed: what
// ncclCommSplit and ncclCommShrink may start from.
Result<Comm*> managedComm(ncclComm_t comm);

// The argument checks are inline, so a valid call pays a compare each (a
// Send/Recv makes five of them per call); what they say about a bad value is
// built out of line.
Status typeError(int t);
Status ptrError(const char* what);
Status rankError(int r, int nranks, const char* what);
Status sizeError(size_t count);

// Takes the caller's value as an int: it may be outside the enum's range.
inline Result<kernels::DType> checkType(int t) {
  if (t >= 0 && t < ncclNumTypes) [[likely]] return static_cast<kernels::DType>(t);
  return typeError(t);
}
// Where only host memory will do (ferryAlltoAllv, registration, windows),
// device memory (src/accel) is refused by name instead of being read as
// host memory; while no device backend exists the check is one load.
Status deviceMemoryCheck(const void* p, const char* what);
inline Status checkPtr(const void* p, const char* what) {
  if (p != nullptr && !accel::anyDevice()) [[likely]] return Status::ok();
  if (p == nullptr) return ptrError(what);
  return deviceMemoryCheck(p, what);
}
// A collective's or Send/Recv's buffer: not NULL; host or device memory
// (device memory is ordered on the stream, comm/stream_bridge.h).
inline Status checkBuffer(const void* p, const char* what) {
  if (p != nullptr) [[likely]] return Status::ok();
  return ptrError(what);
}
inline Status checkRank(int r, int nranks, const char* what) {
  if (r >= 0 && r < nranks) [[likely]] return Status::ok();
  return rankError(r, nranks, what);
}
// count * elemSize * factor must fit in size_t.
inline Status checkSize(size_t count, size_t elemSize, size_t factor) {
  size_t bytes = 0;
  if (!__builtin_mul_overflow(count, elemSize, &bytes) &&
      !__builtin_mul_overflow(bytes, factor, &bytes)) [[likely]]
    return Status::ok();
  return sizeError(count);
}

}  // namespace ferry::api
