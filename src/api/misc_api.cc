// Version, errors, groups, reduction operators, memory and registration.

#include <cstring>

#include <ferry/ferry.h>

#include "api/edge.h"
#include "api/exports.h"
#include "comm/group.h"
#include "core/config.h"
#include "mem/registrations.h"
#include "mem/shared_alloc.h"

using namespace ferry;
using namespace ferry::api;

FERRY_EXPORT(ncclResult_t, ncclGetVersion, (int* version)) {
  return guard("ncclGetVersion", [&]() -> Status {
    FERRY_TRY(checkPtr(version, "version"));
    *version = NCCL_VERSION_CODE;
    return Status::ok();
  });
}

FERRY_EXPORT(const char*, ncclGetErrorString, (ncclResult_t result)) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

FERRY_EXPORT(const char*, ncclGetLastError, (ncclComm_t comm)) {
  // Process-wide like NCCL; the string lives in thread-local storage so the
  // pointer stays valid until this thread asks again.
  thread_local std::string last;
  last = log::lastError();
  return last.c_str();
}

FERRY_EXPORT(void, ncclResetDebugInit, (void)) { log::reset(); }

FERRY_EXPORT_STRONG(void, ncclResetDebugInitInternal, (void)) { log::reset(); }

FERRY_EXPORT(ncclResult_t, ncclGroupStart, (void)) {
  return guard("ncclGroupStart", [] { return groupStart(); });
}

FERRY_EXPORT(ncclResult_t, ncclGroupEnd, (void)) {
  return guard("ncclGroupEnd", [] { return groupEnd(); });
}

FERRY_EXPORT(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t* simInfo)) {
  return guard("ncclGroupSimulateEnd", [&]() -> Status {
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    if (simInfo) {
      size_t size = 0;
      std::memcpy(&size, simInfo, sizeof(size));
      std::memcpy(&info, simInfo, std::min(size, sizeof(info)));
      if (info.magic != 0x74685283)
        return invalidArgument("simInfo was not initialized with NCCL_SIM_INFO_INITIALIZER");
    }
    float us = 0;
    FERRY_TRY(groupSimulateEnd(&us));
    info.estimatedTime = us;
    if (simInfo) {
      size_t size = 0;
      std::memcpy(&size, simInfo, sizeof(size));
      std::memcpy(simInfo, &info, std::min(size, sizeof(info)));
    }
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclRedOpCreatePreMulSum, (ncclRedOp_t* op, void* scalar,
             ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm)) {
  // Plain ints before the lambda captures them: a caller's out-of-range
  // value loaded as the enum is undefined (UBSan: invalid enum load).
  const int dtype = datatype, where = residence;
  return guard("ncclRedOpCreatePreMulSum", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    FERRY_TRY(checkPtr(op, "op"));
    FERRY_ASSIGN(kernels::DType t, checkType(dtype));
    if (where != ncclScalarHostImmediate && where != ncclScalarDevice)
      return invalidArgument("invalid scalar residence " + std::to_string(where));
    // Only a device-resident scalar may be device memory.
    FERRY_TRY(where == ncclScalarDevice ? checkBuffer(scalar, "scalar") : checkPtr(scalar, "scalar"));
    // A device scalar is read by each collective (it may be written in
    // between, e.g. by a kernel earlier on the collective's stream).
    PremulOp p{t, {}, nullptr};
    if (where == ncclScalarDevice)
      p.at = scalar;
    else
      p.scalar = kernels::scalarFromBytes(t, scalar);
    *op = static_cast<ncclRedOp_t>(c->addPremul(p));
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm)) {
  const int v = op;  // an int before the capture, as in ncclRedOpCreatePreMulSum
  return guard("ncclRedOpDestroy", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    if (v < ncclNumOps)
      return invalidArgument("ncclRedOpDestroy: built-in operation " + std::to_string(v) +
                             " cannot be destroyed");
    return c->removePremul(v);
  });
}

FERRY_EXPORT(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size)) {
  return guard("ncclMemAlloc", [&]() -> Status {
    FERRY_TRY(checkPtr(ptr, "ptr"));
    // FERRY_DEVICE names a device: its memory, as NCCL's is a GPU's.
    if (accel::Accelerator* d = accel::configured()) {
      FERRY_ASSIGN(*ptr, d->alloc(size));
      return Status::ok();
    }
    // Shared memory (a memfd) that local peers can map: symmetric windows.
    FERRY_ASSIGN(*ptr, mem::allocShared(size));
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclMemFree, (void* ptr)) {
  return guard("ncclMemFree", [&]() -> Status {
    if (ptr == nullptr) return Status::ok();
    if (accel::anyDevice())
      if (accel::Accelerator& d = accel::ownerOf(ptr); &d != &accel::host()) {
        // Its registrations go with it, as for host memory below (the size
        // is not known here: those starting at ptr).
        if (int n = mem::releaseRegistrationsIn(ptr, 1))
          FERRY_INFO(log::kInit, "ncclMemFree: %p was still registered (%d registration%s released)", ptr, n,
                     n == 1 ? "" : "s");
        return d.free(ptr);
      }
    mem::SharedRange r;
    size_t bytes = mem::lookupShared(ptr, 1, &r) ? r.allocBytes : 0;
    FERRY_TRY(mem::freeShared(ptr));
    // Freed while registered: the registrations go with the memory.
    if (int n = mem::releaseRegistrationsIn(ptr, bytes))
      FERRY_INFO(log::kInit, "ncclMemFree: %p was still registered (%d registration%s released)", ptr, n,
                 n == 1 ? "" : "s");
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size,
             void** handle)) {
  return guard("ncclCommRegister", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    FERRY_TRY(checkPtr(handle, "handle"));
    if (size > 0) FERRY_TRY(checkBuffer(buff, "buff"));
    // Host buffers need no pinning: the registration is a checked record
    // (mem/registrations.h). Device memory is recorded alike: the bridge
    // stages it whether registered or not (docs/accelerators.md).
    FERRY_ASSIGN(*handle, mem::addRegistration(c, buff, size));
    return Status::ok();
  });
}

FERRY_EXPORT(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle)) {
  return guard("ncclCommDeregister", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    FERRY_TRY(checkPtr(handle, "handle"));
    return mem::removeRegistration(c, handle);
  });
}

extern "C" FERRY_API ncclResult_t ferryGetVersion(int* major, int* minor, int* patch) {
  if (!major || !minor || !patch) return ncclInvalidArgument;
  *major = FERRY_VERSION_MAJOR;
  *minor = FERRY_VERSION_MINOR;
  *patch = FERRY_VERSION_PATCH;
  return ncclSuccess;
}

extern "C" FERRY_API const char* ferryVersionString(void) {
  return "Ferry " FERRY_VERSION_STRING " (NCCL 2.28.9 ABI, host memory)";
}
