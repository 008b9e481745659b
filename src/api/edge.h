// Helpers shared by the C ABI entry points: argument checks that log a WARN
// naming the problem, and the one place a Status becomes an ncclResult_t.
#pragma once

#include <nccl.h>

#include <string>

#include "comm/comm.h"
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
    return finish(fn, body());
  } catch (const std::bad_alloc&) {
    return finish(fn, systemError("out of memory"));
  } catch (...) {
    return finish(fn, internalError("unexpected exception"));
  }
}

// A live, usable communicator, or an error naming what is wrong with it.
Result<Comm*> liveComm(ncclComm_t comm);
Result<Comm*> readyComm(ncclComm_t comm);
// Live, initialised and not aborted, but maybe revoked or failed: what
// ncclCommSplit and ncclCommShrink may start from.
Result<Comm*> managedComm(ncclComm_t comm);

// Takes the caller's value as an int: it may be outside the enum's range.
Result<kernels::DType> checkType(int t);
Status checkPtr(const void* p, const char* what);
Status checkRank(int r, int nranks, const char* what);
// count * elemSize * factor must fit in size_t.
Status checkSize(size_t count, size_t elemSize, size_t factor);

}  // namespace ferry::api
