#include "api/edge.h"

#include <cstdint>

#include "comm/registry.h"

namespace ferry::api {

ncclResult_t finish(const char* fn, const Status& st) {
  if (!st.isOk() && st.code() != Code::kInProgress) FERRY_WARN("%s: %s", fn, st.message().c_str());
  return toNcclResult(st);
}

Result<Comm*> liveComm(ncclComm_t comm) {
  if (comm == nullptr) return invalidArgument("comm is NULL");
  if (!isLiveComm(comm)) return invalidArgument("comm is not a valid communicator (destroyed or never created?)");
  return reinterpret_cast<Comm*>(comm);
}

Result<Comm*> readyComm(ncclComm_t comm) {
  FERRY_ASSIGN(Comm * c, liveComm(comm));
  FERRY_TRY(c->usable());
  if (c->finalized()) return invalidUsage("communicator was finalized (ncclCommFinalize): only ncclCommDestroy may follow");
  return c;
}

Result<Comm*> managedComm(ncclComm_t comm) {
  FERRY_ASSIGN(Comm * c, liveComm(comm));
  if (c->abortFlag()->load()) return invalidUsage("communicator was aborted");
  if (!c->ready()) return invalidUsage("communicator is still initializing (or failed to)");
  return c;
}

Result<kernels::DType> checkType(int t) {
  if (t < 0 || t >= ncclNumTypes) return invalidArgument("invalid datatype " + std::to_string(t));
  return static_cast<kernels::DType>(t);
}

Status checkPtr(const void* p, const char* what) {
  if (p == nullptr) return invalidArgument(std::string(what) + " is NULL");
  return Status::ok();
}

Status checkRank(int r, int nranks, const char* what) {
  if (r < 0 || r >= nranks)
    return invalidArgument(std::string(what) + " " + std::to_string(r) + " is out of range [0, " +
                           std::to_string(nranks) + ")");
  return Status::ok();
}

Status checkSize(size_t count, size_t elemSize, size_t factor) {
  unsigned __int128 total = static_cast<unsigned __int128>(count) * elemSize * factor;
  if (total > SIZE_MAX)
    return invalidArgument("count " + std::to_string(count) + " overflows the buffer size");
  return Status::ok();
}

}  // namespace ferry::api
