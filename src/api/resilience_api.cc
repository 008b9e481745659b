// Continuing after a failure: ncclCommRevoke and ncclCommShrink
// (docs/resilience.md). ncclCommGetAsyncError lives with the lifecycle
// entry points (comm_api.cc).
#include <memory>
#include <string>
#include <vector>

#include "api/config_parse.h"
#include "api/edge.h"
#include "api/exports.h"
#include "comm/registry.h"
#include "comm/shrink.h"

namespace ferry::api {
namespace {

Status revoke(ncclComm_t comm, int flags) {
  FERRY_ASSIGN(Comm * c, liveComm(comm));
  if (flags != NCCL_REVOKE_DEFAULT)
    return invalidArgument("revokeFlags " + std::to_string(flags) + ": only NCCL_REVOKE_DEFAULT (0) is accepted");
  if (c->revoked()) return invalidArgument("communicator is already revoked");
  if (c->finalized()) return invalidArgument("communicator was finalized (ncclCommFinalize)");
  c->joinInit();
  c->revoke();
  FERRY_INFO(log::kInit, "ncclCommRevoke: rank %d of %d revoked", c->rank(), c->nranks());
  return Status::ok();
}

Status shrink(ncclComm_t comm, const int* list, int count, ncclComm_t* newcomm, const ncclConfig_t* config,
              int flags) {
  FERRY_TRY(checkPtr(newcomm, "newcomm"));
  *newcomm = nullptr;
  FERRY_ASSIGN(Comm * parent, managedComm(comm));
  // Failed work in the stream queue fails fast: the comm is failed.
  FERRY_TRY(parent->quiesce());
  if (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT)
    return invalidArgument("shrinkFlags " + std::to_string(flags) +
                           ": NCCL_SHRINK_DEFAULT (0) or NCCL_SHRINK_ABORT (1)");
  if (count < 0) return invalidArgument("excludeRanksCount " + std::to_string(count) + " is negative");
  if (count > 0) FERRY_TRY(checkPtr(list, "excludeRanksList"));
  std::vector<int> exclude(list, list + (count > 0 ? count : 0));
  CommConfig cfg = parent->config();
  if (config) {
    FERRY_ASSIGN(cfg, parseConfig(config));
  }
  FERRY_ASSIGN(std::unique_ptr<Comm> child, shrinkComm(parent, exclude, flags == NCCL_SHRINK_ABORT, cfg));
  registerComm(child.get());
  *newcomm = reinterpret_cast<ncclComm_t>(child.release());
  return Status::ok();
}

}  // namespace
}  // namespace ferry::api

using ferry::api::guard;

FERRY_EXPORT(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags)) {
  return guard("ncclCommRevoke", [&] { return ferry::api::revoke(comm, revokeFlags); });
}

FERRY_EXPORT(ncclResult_t, ncclCommShrink,
             (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
              ncclConfig_t* config, int shrinkFlags)) {
  return guard("ncclCommShrink", [&] {
    return ferry::api::shrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  });
}
