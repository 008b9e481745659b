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

Result<Comm*> readyCommSlow(ncclComm_t comm) {
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

Status typeError(int t) { return invalidArgument("invalid datatype " + std::to_string(t)); }

Status ptrError(const char* what) { return invalidArgument(std::string(what) + " is NULL"); }

Status deviceMemoryCheck(const void* p, const char* what) {
  accel::Accelerator& owner = accel::ownerOf(p);
  if (&owner == &accel::host()) return Status::ok();
  return invalidUsage(std::string(what) + " is " + owner.name() +
                      " device memory; this call takes host memory only (docs/accelerators.md)");
}

Status rankError(int r, int nranks, const char* what) {
  return invalidArgument(std::string(what) + " " + std::to_string(r) + " is out of range [0, " +
                         std::to_string(nranks) + ")");
}

Status sizeError(size_t count) {
  return invalidArgument("count " + std::to_string(count) + " overflows the buffer size");
}

}  // namespace ferry::api
