// ncclCommWindowRegister / ncclCommWindowDeregister for host and device
// memory (src/mem/window.h): collectives whose buffers lie in windows that
// every rank of one host maps run as direct loads and stores
// (symmetric.cc), or on device memory as stream work (comm/device_direct.h).
#include <nccl.h>

#include "api/edge.h"
#include "api/exports.h"
#include "comm/comm.h"
#include "comm/device_direct.h"
#include "comm/group.h"
#include "core/log.h"

using namespace ferry;
using namespace ferry::api;

// Collective: every rank registers a buffer of the same size, in the same
// order. Unlike NCCL it runs at once even inside a group (the exchange goes
// over the bootstrap, not the group's launch).
FERRY_EXPORT(ncclResult_t, ncclCommWindowRegister,
             (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags)) {
  return guard("ncclCommWindowRegister", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, readyComm(comm));
    FERRY_TRY(c->quiesce());
    FERRY_TRY(checkPtr(win, "win"));
    FERRY_TRY(checkBuffer(buff, "buff"));  // host or device memory (mem/window.h)
    if (size == 0) return invalidArgument("size is 0");
    if (winFlags & ~(NCCL_WIN_COLL_SYMMETRIC | 0x2))
      return invalidArgument("unknown window flags " + std::to_string(winFlags));
    FERRY_ASSIGN(mem::Window * w, c->registerWindow(buff, size, winFlags));
    *win = reinterpret_cast<ncclWindow_t>(w);
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win)) {
  return guard("ncclCommWindowDeregister", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    FERRY_TRY(checkPtr(win, "win"));
    FERRY_TRY(c->quiesce());  // queued work may still use the window
    // So may device work on windows (comm/device_direct.h): the window's
    // imports stay until it ran.
    if (DeviceDirect* d = c->directIfAny(); d && !d->drain(c->timeoutMs()))
      return timeoutError("device work on windows still runs after " + std::to_string(c->timeoutMs()) +
                          " ms; the window stays registered");
    return c->windows().remove(win);
  });
}
