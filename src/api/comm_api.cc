// Communicator lifecycle entry points.
#include <memory>
#include <set>
#include <vector>

#include "api/config_parse.h"
#include "api/edge.h"
#include "api/exports.h"
#include "bootstrap/bootstrap.h"
#include "comm/group.h"
#include "comm/registry.h"
#include "comm/split.h"
#include "core/wait.h"
#include "mem/registrations.h"

namespace ferry::api {
namespace {

// Hand a new communicator to the caller: registered, and initialised now,
// in the background (nonblocking), or at the group end (inside a group).
Status startComm(std::unique_ptr<Comm> c, const ncclUniqueId& id, ncclComm_t* out) {
  Comm* raw = c.release();
  registerComm(raw);
  *out = reinterpret_cast<ncclComm_t>(raw);
  if (groupDepth() > 0) return enqueueInit(raw, id);
  if (!raw->config().blocking) {
    raw->initAsync(id);
    return inProgress();
  }
  Status st = raw->init(id);
  if (!st.isOk()) {
    unregisterComm(raw);
    delete raw;
    *out = nullptr;
  }
  return st;
}

Status initRank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank,
                const ncclConfig_t* config) {
  FERRY_TRY(checkPtr(comm, "comm"));
  *comm = nullptr;
  if (nranks < 1) return invalidArgument("nranks " + std::to_string(nranks) + " must be >= 1");
  FERRY_TRY(checkRank(rank, nranks, "rank"));
  FERRY_ASSIGN(CommConfig cfg, parseConfig(config));
  return startComm(std::make_unique<Comm>(rank, nranks, cfg), id, comm);
}

Status initAll(ncclComm_t* comms, int ndev, const int* devlist) {
  FERRY_TRY(checkPtr(comms, "comm"));
  if (ndev < 1) return invalidArgument("ndev " + std::to_string(ndev) + " must be >= 1");
  if (devlist) {
    std::set<int> seen;
    for (int i = 0; i < ndev; ++i) {
      if (devlist[i] < 0) return invalidArgument("devlist contains invalid device " + std::to_string(devlist[i]));
      if (!seen.insert(devlist[i]).second)
        return invalidUsage("devlist contains device " + std::to_string(devlist[i]) + " twice");
    }
  }
  ncclUniqueId id;
  FERRY_TRY(createUniqueId(&id));
  FERRY_TRY(groupStart());
  for (int i = 0; i < ndev; ++i) {
    CommConfig cfg;
    cfg.device = devlist ? devlist[i] : i;
    Status st = startComm(std::make_unique<Comm>(i, ndev, cfg), id, &comms[i]);
    if (!st.isOk()) {
      (void)groupEnd();
      return st;
    }
  }
  return groupEnd();
}

// Destroy/abort: unregister first, so no group can start work on it any
// more (queued work fails at ncclGroupEnd), wait (bounded) for work in
// flight, then free.
Status release(Comm* c) {
  // Work queued behind streams runs first (an aborted comm fails it fast);
  // what cannot run is cancelled when the comm is freed.
  if (Status st = c->quiesce(); !st.isOk() && !c->abortFlag()->load())
    FERRY_WARN("rank %d: destroying with stream-ordered work not done: %s", c->rank(),
               st.message().c_str());
  unregisterComm(c);
  mem::releaseRegistrationsOf(c);  // later deregisters of its handles are harmless
  c->waitIdle(c->timeoutMs());
  delete c;
  return Status::ok();
}

}  // namespace
}  // namespace ferry::api

using namespace ferry;
using namespace ferry::api;

FERRY_EXPORT(ncclResult_t, ncclGetUniqueId, (ncclUniqueId* uniqueId)) {
  return guard("ncclGetUniqueId", [&]() -> Status {
    FERRY_TRY(checkPtr(uniqueId, "uniqueId"));
    return createUniqueId(uniqueId);
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommInitRank,
             (ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank)) {
  return guard("ncclCommInitRank", [&] { return initRank(comm, nranks, commId, rank, nullptr); });
}

FERRY_EXPORT(ncclResult_t, ncclCommInitRankConfig,
             (ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config)) {
  return guard("ncclCommInitRankConfig", [&] { return initRank(comm, nranks, commId, rank, config); });
}

FERRY_EXPORT(ncclResult_t, ncclCommInitRankScalable, (ncclComm_t* newcomm, int nranks, int myrank,
             int nId, ncclUniqueId* commIds, ncclConfig_t* config)) {
  return guard("ncclCommInitRankScalable", [&]() -> Status {
    FERRY_TRY(checkPtr(commIds, "commIds"));
    if (nId < 1 || nId > nranks) return invalidArgument("nId must be in 1..nranks");
    // One root serves everybody here; every rank is given the same ids, so
    // the first one names a root all ranks can reach.
    return initRank(newcomm, nranks, commIds[0], myrank, config);
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommInitAll, (ncclComm_t* comm, int ndev, const int* devlist)) {
  return guard("ncclCommInitAll", [&] { return initAll(comm, ndev, devlist); });
}

FERRY_EXPORT(ncclResult_t, ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
             ncclConfig_t* config)) {
  return guard("ncclCommSplit", [&]() -> Status {
    FERRY_ASSIGN(Comm * parent, managedComm(comm));
    FERRY_TRY(parent->quiesce());  // the split's exchange comes after queued work
    FERRY_TRY(checkPtr(newcomm, "newcomm"));
    *newcomm = nullptr;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
      return invalidArgument("color " + std::to_string(color) + " must be >= 0 or NCCL_SPLIT_NOCOLOR");
    CommConfig cfg = parent->config();
    if (config) {
      FERRY_ASSIGN(cfg, parseConfig(config));
    }
    FERRY_ASSIGN(std::unique_ptr<Comm> child, splitComm(parent, color, key, cfg));
    if (child) {
      registerComm(child.get());
      *newcomm = reinterpret_cast<ncclComm_t>(child.release());
    }
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommFinalize, (ncclComm_t comm)) {
  return guard("ncclCommFinalize", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    if (c->finalized()) return invalidArgument("ncclCommFinalize called twice");
    if (c->revoked()) return invalidUsage("communicator was revoked: only ncclCommDestroy, Split and Shrink may follow");
    c->joinInit();
    // Host work completes inside each call; work queued behind streams is
    // flushed here.
    FERRY_TRY(c->quiesce());
    c->setFinalized();
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommDestroy, (ncclComm_t comm)) {
  return guard("ncclCommDestroy", [&]() -> Status {
    if (comm == nullptr) return Status::ok();  // NCCL accepts NULL here
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    return release(c);
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommAbort, (ncclComm_t comm)) {
  return guard("ncclCommAbort", [&]() -> Status {
    if (comm == nullptr) return Status::ok();
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    c->abort();
    return release(c);
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError)) {
  return guard("ncclCommGetAsyncError", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    FERRY_TRY(checkPtr(asyncError, "asyncError"));
    c->pollBackground();
    *asyncError = c->asyncResult();
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count)) {
  return guard("ncclCommCount", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    FERRY_TRY(checkPtr(count, "count"));
    *count = c->nranks();
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank)) {
  return guard("ncclCommUserRank", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    FERRY_TRY(checkPtr(rank, "rank"));
    *rank = c->rank();
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device)) {
  return guard("ncclCommCuDevice", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    FERRY_TRY(checkPtr(device, "device"));
    *device = c->config().device;
    return Status::ok();
  });
}
