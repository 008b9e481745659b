// ferry/device.h: device memory and streams of the FERRY_DEVICE backend,
// for tools and tests that must not link a device runtime.
#include <ferry/device.h>

#include "accel/accelerator.h"
#include "accel/test_device.h"
#include "api/edge.h"
#include "api/exports.h"
#include "core/config.h"

namespace ferry::api {
namespace {

Result<accel::Accelerator*> device() {
  if (accel::Accelerator* d = accel::configured()) return d;
  return invalidUsage("no device backend: set FERRY_DEVICE (e.g. testdev)");
}

}  // namespace
}  // namespace ferry::api

using namespace ferry;
using namespace ferry::api;

FERRY_EXPORT_STRONG(ncclResult_t, ferryDeviceName, (const char** name)) {
  return guard("ferryDeviceName", [&]() -> Status {
    FERRY_TRY(checkPtr(name, "name"));
    FERRY_ASSIGN(accel::Accelerator * d, device());
    *name = d->name();
    return Status::ok();
  });
}

FERRY_EXPORT_STRONG(ncclResult_t, ferryDeviceAlloc, (void** ptr, size_t bytes)) {
  return guard("ferryDeviceAlloc", [&]() -> Status {
    FERRY_TRY(checkPtr(ptr, "ptr"));
    FERRY_ASSIGN(accel::Accelerator * d, device());
    FERRY_ASSIGN(*ptr, d->alloc(bytes));
    return Status::ok();
  });
}

FERRY_EXPORT_STRONG(ncclResult_t, ferryDeviceFree, (void* ptr)) {
  return guard("ferryDeviceFree", [&]() -> Status {
    FERRY_ASSIGN(accel::Accelerator * d, device());
    return ptr ? d->free(ptr) : Status::ok();
  });
}

FERRY_EXPORT_STRONG(ncclResult_t, ferryDeviceStreamCreate, (void** stream)) {
  return guard("ferryDeviceStreamCreate", [&]() -> Status {
    FERRY_TRY(checkPtr(stream, "stream"));
    FERRY_ASSIGN(accel::Accelerator * d, device());
    FERRY_ASSIGN(*stream, d->createStream());
    return Status::ok();
  });
}

FERRY_EXPORT_STRONG(ncclResult_t, ferryDeviceStreamDestroy, (void* stream)) {
  return guard("ferryDeviceStreamDestroy", [&]() -> Status {
    FERRY_ASSIGN(accel::Accelerator * d, device());
    return d->destroyStream(stream);
  });
}

FERRY_EXPORT_STRONG(ncclResult_t, ferryDeviceMemcpyAsync,
                    (void* dst, const void* src, size_t bytes, void* stream)) {
  return guard("ferryDeviceMemcpyAsync", [&]() -> Status {
    FERRY_ASSIGN(accel::Accelerator * d, device());
    if (bytes == 0) return Status::ok();
    FERRY_TRY(checkBuffer(dst, "dst"));
    FERRY_TRY(checkBuffer(src, "src"));
    return d->copyAsync(dst, src, bytes, stream);
  });
}

FERRY_EXPORT_STRONG(ncclResult_t, ferryDeviceStreamSynchronize, (void* stream)) {
  return guard("ferryDeviceStreamSynchronize", [&]() -> Status {
    FERRY_ASSIGN(accel::Accelerator * d, device());
    return d->synchronize(stream, config::getInt(config::Param::kTimeoutMs));
  });
}

FERRY_EXPORT_STRONG(ncclResult_t, ferryDeviceStreamQuery, (void* stream)) {
  return guard("ferryDeviceStreamQuery", [&]() -> Status {
    FERRY_ASSIGN(accel::Accelerator * d, device());
    FERRY_ASSIGN(bool idle, d->idle(stream));
    return idle ? Status::ok() : inProgress();
  });
}

FERRY_EXPORT_STRONG(ncclResult_t, ferryDeviceSetTaskDelayUs, (long long us)) {
  return guard("ferryDeviceSetTaskDelayUs", [&]() -> Status {
    FERRY_ASSIGN(accel::Accelerator * d, device());
    auto* t = dynamic_cast<accel::TestDevice*>(d);
    if (!t) return invalidUsage(std::string("task delays are a testdev feature, not ") + d->name() + "'s");
    t->setTaskDelayUs(us < 0 ? 0 : us);
    return Status::ok();
  });
}

FERRY_EXPORT_STRONG(ncclResult_t, ferryCommStagedBytes, (ncclComm_t comm, unsigned long long* bytes)) {
  return guard("ferryCommStagedBytes", [&]() -> Status {
    FERRY_ASSIGN(Comm * c, liveComm(comm));
    FERRY_TRY(checkPtr(bytes, "bytes"));
    *bytes = c->stagedBytes();
    return Status::ok();
  });
}
